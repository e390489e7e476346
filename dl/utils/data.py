"""Datasets and the DataLoader (torch.utils.data names)."""
from __future__ import annotations

__all__: list[str] = []

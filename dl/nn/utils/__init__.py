"""nn.utils: gradient clipping (torch.nn.utils names)."""
from __future__ import annotations

__all__: list[str] = []

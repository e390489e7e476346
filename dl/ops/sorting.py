"""Scans, sorting and selection: cumsum/cumprod, sort/topk, searchsorted, bincount, histc (issue
17)."""
from __future__ import annotations

__all__: list[str] = []

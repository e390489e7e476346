"""Indexing and data movement: scatter, index_add, index_put, masked ops, chunk/split, flip/roll,
tril/triu, pad, nonzero (issue 17)."""
from __future__ import annotations

__all__: list[str] = []

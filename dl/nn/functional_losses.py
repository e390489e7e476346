"""Functional losses beyond the core: binary cross entropy (with logits), l1, smooth l1, huber,
kl_div, cosine embedding."""
from __future__ import annotations

__all__: list[str] = []

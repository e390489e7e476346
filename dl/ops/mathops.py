"""Math beyond the elementwise core: einsum, norms, cdist, atan2, remainder, bitwise ops,
predicates, linspace (issue 17)."""
from __future__ import annotations

__all__: list[str] = []

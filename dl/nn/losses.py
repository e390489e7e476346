"""Loss modules beyond the core (torch's names)."""
from __future__ import annotations

__all__: list[str] = []

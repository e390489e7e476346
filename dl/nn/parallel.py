"""Data parallelism: DistributedDataParallel (dl.distributed underneath)."""
from __future__ import annotations

__all__: list[str] = []

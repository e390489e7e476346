"""A simple caching allocator for device runtimes: freed blocks are kept by size class
(powers of two from 256 bytes) and reused, up to a cap, so steady-state launches allocate
nothing from the driver."""
from __future__ import annotations

import threading
from collections.abc import Callable


def size_class(nbytes: int) -> int:
    return max(256, 1 << (nbytes - 1).bit_length())


class Pool:
    def __init__(self, alloc: Callable[[int], object], cap_bytes: int = 1 << 30):
        self._alloc = alloc
        self._free: dict[int, list] = {}
        self._held = 0
        self._cap = cap_bytes
        self._lock = threading.Lock()
        self.stats = {"allocs": 0, "reuses": 0}

    def take(self, nbytes: int) -> tuple[object, int]:
        """(a block of at least nbytes, its size class)."""
        cls = size_class(max(nbytes, 1))
        with self._lock:
            blocks = self._free.get(cls)
            if blocks:
                self._held -= cls
                self.stats["reuses"] += 1
                return blocks.pop(), cls
        self.stats["allocs"] += 1
        return self._alloc(cls), cls

    def give(self, block, cls: int) -> None:
        """Keep a freed block; past the cap, free blocks of other sizes go first (largest
        first): a pool full of an earlier phase's sizes would make every later size fresh
        memory (a page fault per 4 KiB at first touch)."""
        if cls > self._cap:
            return
        with self._lock:
            if self._held + cls > self._cap:
                for c in sorted(self._free, reverse=True):
                    blocks = self._free[c]
                    while blocks and c != cls and self._held + cls > self._cap:
                        blocks.pop()
                        self._held -= c
                    if not blocks:
                        del self._free[c]
                    if self._held + cls <= self._cap:
                        break
            if self._held + cls <= self._cap:
                self._free.setdefault(cls, []).append(block)
                self._held += cls

    def clear(self) -> None:
        with self._lock:
            self._free.clear()
            self._held = 0


class Block:
    """One pooled allocation, shared by a buffer and every view (copy) of it: the memory goes
    back to the pool when the last of them is gone, never while a view still uses it."""

    __slots__ = ("pool", "mem", "cls")

    def __init__(self, pool: Pool, nbytes: int):
        self.pool = pool
        self.mem, self.cls = pool.take(nbytes)

    def __del__(self):
        try:
            if self.pool is not None:  # None: pinned, the memory is shared elsewhere
                self.pool.give(self.mem, self.cls)
        except Exception:  # interpreter shutdown
            pass

"""Counts kernel launches and code generations of the tensor layer (`dl.count_kernels`)."""
from __future__ import annotations

import threading
from contextlib import contextmanager

_lock = threading.Lock()
_totals = {"launches": 0, "compiles": 0}


def record(what: str) -> None:
    with _lock:
        _totals[what] += 1


class KernelCount:
    """What a `with dl.count_kernels() as c:` block did: `c.launches` kernel launches,
    `c.compiles` fused kernels generated (0 when every structure was already cached),
    `c.names` the launched kernels in order."""

    def __init__(self):
        self.launches = 0
        self.compiles = 0
        self.names: list[str] = []

    def __repr__(self) -> str:
        return f"<KernelCount launches={self.launches} compiles={self.compiles}>"


_active: list[KernelCount] = []


def record_launch(name) -> None:
    """name: a str, or a callable giving it (built only while a counter is active)."""
    record("launches")
    if _active:
        name = name() if callable(name) else name
        for c in _active:
            c.launches += 1
            c.names.append(name)


def record_compile() -> None:
    record("compiles")
    for c in _active:
        c.compiles += 1


@contextmanager
def count_kernels():
    c = KernelCount()
    _active.append(c)
    try:
        yield c
    finally:
        _active.remove(c)

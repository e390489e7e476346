"""Launching and counting kernels, below everything else in dl.

`launch_1d` runs a 1-D `@cube` kernel over n units. Every launch of the tensor layer (these,
the library's ops, the fused kernels) is counted here, so `dl.count_kernels` sees them all:
`record_launch`, `record_compile` and the counter itself live at the bottom, where both the
kernel library and fusion can reach them."""
from __future__ import annotations

import threading
from contextlib import contextmanager

CUBE_DIM = 256
MAX_CUBES_X = 65535  # WebGPU's per-dimension limit: bigger launches use a 2-D cube count


def cube_count(n: int, dim: int = CUBE_DIM) -> tuple:
    """The cube count for n units in cubes of `dim`: 1-D up to MAX_CUBES_X cubes, else 2-D,
    factored exactly when a factor pair fits (16M elements: (32768, 2, 1), not (65535, 2,
    1) with half a row of idle units). An exact grid lets a fused kernel drop its bounds
    test, which the CPU's loop vectoriser needs (a masked loop ran 4x slower)."""
    cubes = -(-n // dim)
    if cubes <= MAX_CUBES_X:
        return (cubes, 1, 1)
    rows = -(-cubes // MAX_CUBES_X)
    for y in range(rows, min(rows * 4, cubes) + 1):
        if cubes % y == 0:
            return (cubes // y, y, 1)
    return (MAX_CUBES_X, rows, 1)


def launch_1d(kernel, rt, n: int, /, **args) -> None:
    if n <= 0:
        return
    kernel.launch(rt, cube_count=cube_count(n), cube_dim=(CUBE_DIM,), **args)
    record_launch(kernel.__name__)


# ---- counting (`dl.count_kernels`) -----------------------------------------------------------
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


_active: list[tuple[int, KernelCount]] = []  # (thread id, its counter)
# (thread id, names) per dispatch plan tracing a call (dl/kernels/plan.py): the names of the
# launches its thread makes, which its replays record again
traces: list[tuple[int, list]] = []


def record_launch(name) -> None:
    """name: a str, or a callable giving it (built only while a counter is active)."""
    record("launches")
    if traces or _active:
        me = threading.get_ident()
        for th, t in traces:
            if th == me:
                t.append(name)
        mine = [c for th, c in _active if th == me]
        if mine:
            name = name() if callable(name) else name
            for c in mine:
                c.launches += 1
                c.names.append(name)


def record_launches(names: list) -> None:
    """record_launch of each name (a replayed plan's launches)."""
    if traces or _active:
        for name in names:
            record_launch(name)
        return
    with _lock:
        _totals["launches"] += len(names)


def record_compile() -> None:
    record("compiles")
    if _active:
        me = threading.get_ident()
        for th, c in _active:
            if th == me:
                c.compiles += 1


@contextmanager
def count_kernels():
    """Context manager counting kernel launches: `with dl.count_kernels() as c:`.

    On exit `c.launches` is the number of kernels launched in the block, `c.compiles` the
    fused kernels generated and `c.names` the launched kernels in order (a kernel-library
    op counts as one launch named `lib.<op>`). Counters nest, and count what their own
    thread launches (not other threads' work meanwhile)."""
    c = KernelCount()
    entry = (threading.get_ident(), c)
    _active.append(entry)
    try:
        yield c
    finally:
        _active.remove(entry)

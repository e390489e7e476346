"""Launch recording: while a `Recording` is active, every kernel launch (library kernels through
`CubeFunction.launch`, fused kernels through their executables) is appended to it, with its
executable's launch function, grid and argument list, so that the same launches can be
replayed later without the Python that produced them (dl's `capture`, like a CUDA graph).

The recorded argument lists hold the buffers themselves: memory a replay writes stays
allocated (out of the runtimes' pools) for as long as the recording lives.

Code whose effect depends on host state that changes between replays (an optimiser's step
count, a learning rate) registers itself with `hook`: it runs now, unrecorded, and again at
every replay, in its place among the launches."""
from __future__ import annotations

from collections.abc import Callable

# The recording launches go to, or None (read on every launch: one global lookup).
active: Recording | None = None


class CaptureError(RuntimeError):
    """Something a recording cannot replay faithfully (a host read, a random key)."""


class Recording:
    def __init__(self) -> None:
        # (launch, cube_count, cube_dim, args) per launch; (hook, None, None, None) per hook
        self.entries: list[tuple] = []

    def __enter__(self) -> Recording:
        global active
        if active is not None:
            raise CaptureError("a recording is already active (captures do not nest)")
        active = self
        return self

    def __exit__(self, *exc) -> None:
        global active
        active = None

    @property
    def launches(self) -> int:
        return sum(1 for e in self.entries if e[1] is not None)

    def replay(self) -> None:
        for fn, cc, cd, args in self.entries:
            if cc is None:
                fn()
            else:
                fn(cc, cd, args)


def launch(exe, cube_count, cube_dim, args) -> None:
    """Launch exe, and append the launch to the active recording if there is one: every
    launch site calls this (CubeFunction.launch, dl's fused kernels)."""
    exe.launch(cube_count, cube_dim, args)
    if active is not None:
        active.entries.append((exe.launch, cube_count, cube_dim, args))


def hook(fn: Callable[[], object]):
    """Run fn now; while recording, unrecorded, and recorded to run again at each replay."""
    global active
    rec = active
    if rec is None:
        return fn()
    active = None
    try:
        out = fn()
    finally:
        active = rec
    rec.entries.append((fn, None, None, None))
    return out


def refuse(what: str) -> None:
    """Raise when recording: `what` cannot be replayed (its value would be frozen)."""
    if active is not None:
        raise CaptureError(f"{what} during capture: a replay would repeat the value it had "
                           f"when recorded; do it outside the captured function")

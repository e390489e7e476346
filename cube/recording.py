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
from contextlib import contextmanager

from autotune import tunable

# The recording launches go to, or None (read on every launch: one global lookup).
active: Recording | None = None
# How many recordings have begun: values made lazily before the current one began are
# computed once, unrecorded, when first needed (see `paused`)
generation = 0
# How many `paused` blocks have begun (autotune times candidates in one): a trace that saw
# one missed launches (see `Trace`)
pauses = 0


class CaptureError(RuntimeError):
    """Something a recording cannot replay faithfully (a host read, a random key)."""


class Recording:
    def __init__(self, inside_hook: bool = False) -> None:
        # (launch, cube_count, cube_dim, args) per launch; (hook, None, None, None) per hook
        self.entries: list[tuple] = []
        self.inside_hook = inside_hook  # a hook's own launches: its host reads run again

    def __enter__(self) -> Recording:
        global active, generation
        if active is not None:
            raise CaptureError("a recording is already active (captures do not nest)")
        generation += 1
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
        if active.__class__ is Trace:
            active.exes[len(active.entries) - 1] = exe


def hook(fn: Callable[[], object], fast: Callable | None = None):
    """Run fn now; while recording, unrecorded, and recorded to run again at each replay.

    fast(launches) may offer a cheaper callable for the replays: it gets the Recording of
    the launches fn just made (e.g. an optimiser's per-parameter kernels, whose scalar
    arguments it refreshes in place) and returns it, or None to re-run fn."""
    global active
    rec = active
    if isinstance(rec, Trace):  # a hook is host state a plan's replay would skip
        rec.spoiled = True
        if rec.outer is None:
            return fn()
    if rec is None:
        return fn()
    sub = Recording(inside_hook=True) if fast is not None else None
    active = sub
    try:
        out = fn()
    finally:
        active = rec
    again = fast(sub) if fast is not None else None
    rec.entries.append((again or fn, None, None, None))
    return out


class Trace(Recording):
    """The launches of one call, taken aside from any active recording (`trace`): what dl's
    dispatch plans are built from. `spoiled` is set when the call did something a replay of
    those launches would not repeat (a host read, a hook, a paused block)."""

    def __init__(self, outer: Recording | None) -> None:
        super().__init__()
        self.outer = outer
        self.spoiled = False
        self.exes: dict = {}  # entry index -> the executable launched there


@contextmanager
def trace():
    """Take the launches of the block into a fresh `Trace` (yielded), then hand them on to the
    recording that was active (a dl.capture), so it still sees every launch."""
    global active
    outer = active
    t = Trace(outer)
    seen = pauses
    active = t
    try:
        yield t
    finally:
        active = outer
        if pauses != seen:
            t.spoiled = True
        if outer is not None:
            if outer.__class__ is Trace:  # a trace inside a trace: the executables too
                base = len(outer.entries)
                outer.exes.update((base + i, e) for i, e in t.exes.items())
            outer.entries.extend(t.entries)


def refuse(what: str) -> None:
    """Raise when recording: `what` cannot be replayed (its value would be frozen)."""
    if isinstance(active, Trace):
        active.spoiled = True
        if active.outer is None or active.outer.inside_hook:
            return
    if active is not None and not active.inside_hook:
        raise CaptureError(f"{what} during capture: a replay would repeat the value it had "
                           f"when recorded; do it outside the captured function")


@contextmanager
def paused():
    """No recording inside the block (its launches run, unrecorded)."""
    global active, pauses
    pauses += 1
    rec, active = active, None
    try:
        yield
    finally:
        active = rec


def launches_of(run):
    """Call run() under a trace: a callable repeating the launches it made, None where it
    made none, False where a replay would not repeat what it did (autotune times
    candidates so: `tunable.LAUNCH_TRACERS`)."""
    with trace() as t:
        run()
    if not t.entries:
        return None
    if t.spoiled:
        return False
    return t.replay


tunable.TIMING_CONTEXTS.append(paused)
tunable.LAUNCH_TRACERS.append(launches_of)

"""Launch recording: while a `Recording` is active, every kernel launch (library kernels through
`CubeFunction.launch`, fused kernels through their executables) is appended to it, with its
executable's launch function, grid and argument list, so that the same launches can be
replayed later without the Python that produced them (dl's `capture`, like a CUDA graph).

The recorded argument lists hold the buffers themselves: memory a replay writes stays
allocated (out of the runtimes' pools) for as long as the recording lives.

Code whose effect depends on host state that changes between replays (an optimiser's step
count, a learning rate) registers itself with `hook`: it runs now, unrecorded, and again at
every replay, in its place among the launches.

A recording belongs to the thread that began it (`current`): another thread's launches run
unrecorded, and its traces and pauses leave this thread's recording alone. (With one global
recording, dl used from four threads raised CaptureErrors in them, and left a dead trace
active for good: every later launch of the process went into it.)"""
from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import contextmanager

from autotune import tunable


class _Any:
    """`active` while some thread records."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<a recording in some thread>"


_ANY = _Any()
# None while no thread records: the launch paths' one cheap test (read on every launch);
# what this thread records into is `current()`
active: _Any | None = None
_state = threading.local()  # .rec: this thread's recording; .pauses: its `paused` blocks
_count_lock = threading.Lock()
_recorders = 0  # threads with a recording
# How many recordings have begun: values made lazily before the current one began are
# computed once, unrecorded, when first needed (see `paused`)
generation = 0


def current() -> Recording | None:
    """The recording this thread's launches go to, or None."""
    if active is None:
        return None
    return getattr(_state, "rec", None)


def _set(rec: Recording | None) -> None:
    """Make rec this thread's recording (None: none), keeping `active` in step."""
    global active, _recorders
    old = getattr(_state, "rec", None)
    _state.rec = rec
    if (old is None) != (rec is None):
        with _count_lock:
            _recorders += 1 if rec is not None else -1
            active = _ANY if _recorders else None


def _pauses() -> int:
    """How many `paused` blocks this thread has begun (autotune times candidates in one): a
    trace that saw one missed launches (see `Trace`)."""
    return getattr(_state, "pauses", 0)


class CaptureError(RuntimeError):
    """Something a recording cannot replay faithfully (a host read, a random key)."""


class Recording:
    def __init__(self, inside_hook: bool = False) -> None:
        # (launch, cube_count, cube_dim, args) per launch; (hook, None, None, None) per hook
        self.entries: list[tuple] = []
        self.inside_hook = inside_hook  # a hook's own launches: its host reads run again

    def __enter__(self) -> Recording:
        global generation
        if current() is not None:
            raise CaptureError("a recording is already active (captures do not nest)")
        generation += 1
        _set(self)
        return self

    def __exit__(self, *exc) -> None:
        _set(None)

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
    if active is not None:  # some thread records (the common case, none, costs one test)
        rec = getattr(_state, "rec", None)
        if rec is not None:
            rec.entries.append((exe.launch, cube_count, cube_dim, args))
            if rec.__class__ is Trace:
                rec.exes[len(rec.entries) - 1] = exe


def hook(fn: Callable[[], object], fast: Callable | None = None):
    """Run fn now; while recording, unrecorded, and recorded to run again at each replay.

    fast(launches) may offer a cheaper callable for the replays: it gets the Recording of
    the launches fn just made (e.g. an optimiser's per-parameter kernels, whose scalar
    arguments it refreshes in place) and returns it, or None to re-run fn."""
    rec = current()
    if isinstance(rec, Trace):  # a hook is host state a plan's replay would skip
        rec.spoiled = True
        if rec.outer is None:
            return fn()
    if rec is None:
        return fn()
    sub = Recording(inside_hook=True) if fast is not None else None
    _set(sub)
    try:
        out = fn()
    finally:
        _set(rec)
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
    outer = current()
    t = Trace(outer)
    seen = _pauses()
    _set(t)
    try:
        yield t
    finally:
        _set(outer)
        if _pauses() != seen:
            t.spoiled = True
        if outer is not None:
            if outer.__class__ is Trace:  # a trace inside a trace: the executables too
                base = len(outer.entries)
                outer.exes.update((base + i, e) for i, e in t.exes.items())
            outer.entries.extend(t.entries)


def refuse(what: str) -> None:
    """Raise when recording: `what` cannot be replayed (its value would be frozen)."""
    rec = current()
    if isinstance(rec, Trace):
        rec.spoiled = True
        if rec.outer is None or rec.outer.inside_hook:
            return
    if rec is not None and not rec.inside_hook:
        raise CaptureError(f"{what} during capture: a replay would repeat the value it had "
                           f"when recorded; do it outside the captured function")


@contextmanager
def paused():
    """No recording inside the block (its launches run, unrecorded)."""
    _state.pauses = _pauses() + 1
    rec = current()
    _set(None)
    try:
        yield
    finally:
        _set(rec)


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

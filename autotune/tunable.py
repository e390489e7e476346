"""Tunable operations: candidates with priorities, timed on the first call for a tune key.

A candidate's `run(rt, *args, **kw)` launches its kernels and must only write the op's
outputs (every candidate computes the same result), so timing one candidate after another
on the caller's own arguments is safe. Tuning never changes results, only speed."""
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .store import TuneStore, default_store

MODES = ("off", "fast", "full")
# context managers entered around candidate timing runs: a layer above registers what must
# not see them (cube.recording pauses a launch recording: a replay must not repeat a
# tuning's runs, which would apply an in-place update several times)
TIMING_CONTEXTS: list = []
# How a layer above times a candidate's kernels without the candidate's Python: a tracer
# calls run() under a launch trace and returns a callable repeating just the launches it
# made; None where it made none, False where a replay would not repeat what it did (a host
# read, a nested tuning). dl replays an op's launches from a plan without the Python that
# chose them, so that is the cost to compare: an 8x8 softmax's `row` kernel took 0.8 us
# beside `shared_32`'s 5.1, yet timed whole (row's launcher computes its line size and views)
# row took 8.7 us to shared_32's 7.0, and every eager softmax then paid 4.4 us more.
LAUNCH_TRACERS: list = []
# part of every stored winner's code digest: winners timed another way are timed again
TIMING_METHOD = b"launches-replayed"
FAST_TOP = 3  # how many candidates, by priority, `fast` times
PROGRESS_AFTER_S = 1.0  # tuning that takes longer reports progress on stderr


_parsed: dict = {}  # raw CUBE_AUTOTUNE value -> mode (read on every tuned launch)
# bumped whenever the candidates a Tunable may choose change (`only`): what a cached choice
# made outside the Tunable (dl's dispatch plans) keys on
epoch = [0]


def mode() -> str:
    raw = os.environ.get("CUBE_AUTOTUNE")
    m = _parsed.get(raw)
    if m is None:
        m = (raw or "fast").strip().lower() or "fast"
        if m not in MODES:
            raise ValueError(f"CUBE_AUTOTUNE must be one of {', '.join(MODES)}, got {m!r}")
        _parsed[raw] = m
    return m


class NoCandidate(ValueError):
    pass


@dataclass(frozen=True)
class Candidate:
    name: str
    run: Callable[..., None]
    priority: int | Callable[..., int] = 0  # an int, or priority(rt) -> int
    valid: Callable[..., bool] | None = None  # valid(rt, *args, **kw): can it run these?
    # prefer(rt, *args, **kw): ranks this candidate first for these arguments (e.g. a kernel
    # made for an operand layout), so `off` picks it and `fast` always times it
    prefer: Callable[..., bool] | None = None

    def priority_for(self, rt) -> int:
        return self.priority(rt) if callable(self.priority) else self.priority

    def is_valid(self, rt, *args, **kw) -> bool:
        return self.valid is None or bool(self.valid(rt, *args, **kw))

    def prefers(self, rt, *args, **kw) -> bool:
        return self.prefer is not None and bool(self.prefer(rt, *args, **kw))


class Tunable:
    def __init__(self, op: str, candidates: list[Candidate], store: TuneStore | None = None,
                 repeats: int = 5):
        names = [c.name for c in candidates]
        if len(set(names)) != len(names):
            raise ValueError(f"{op}: candidate names must be unique, got {names}")
        self.op = op
        self.candidates = list(candidates)
        self._store = store
        self.repeats = repeats
        self.tunings = 0  # how many times this process timed candidates (tests read it)
        # (id(rt), key, mode) -> (candidate list, winner): a launch's choice without sorting
        # candidates or reading the store; the list's identity drops it under `only`
        self._memo: dict = {}
        self._code: str | None = None  # `code()`, read once

    @property
    def store(self) -> TuneStore:
        return self._store if self._store is not None else default_store()

    def __getitem__(self, name: str) -> Candidate:
        for c in self.candidates:
            if c.name == name:
                return c
        raise KeyError(f"{self.op} has no candidate {name!r}")

    @contextmanager
    def only(self, name: str):
        """Run just one candidate inside the block (tests and benchmarks; not thread-safe)."""
        saved = self.candidates
        self.candidates = [self[name]]
        epoch[0] += 1
        try:
            yield self.candidates[0]
        finally:
            self.candidates = saved
            epoch[0] += 1

    def valid_candidates(self, rt, *args, **kw) -> list[Candidate]:
        """Valid candidates, highest priority first (stable for equal priorities)."""
        ok = [c for c in self.candidates if c.is_valid(rt, *args, **kw)]
        return sorted(ok, key=lambda c: (not c.prefers(rt, *args, **kw), -c.priority_for(rt)))

    def __call__(self, rt, key: str, *args, **kw):
        return self.choose(rt, key, *args, **kw).run(rt, *args, **kw)

    def choose(self, rt, key: str, *args, **kw) -> Candidate:
        m = mode()
        memo_key = (id(rt), key, m)
        hit = self._memo.get(memo_key)
        if hit is not None and hit[0] is self.candidates and hit[1].is_valid(rt, *args, **kw):
            return hit[1]  # this process chose it already (the store keeps it across runs)
        c = self._choose(rt, key, m, args, kw)
        self._memo[memo_key] = (self.candidates, c)
        return c

    def _choose(self, rt, key: str, m: str, args, kw) -> Candidate:
        cands = self.valid_candidates(rt, *args, **kw)
        if not cands:
            raise NoCandidate(f"{self.op}: no candidate can run {key}")
        if m == "off" or len(cands) == 1:
            return cands[0]
        device = rt.device_id()
        full_key = f"{self.op}|{key}"
        timed = cands if m == "full" else cands[:FAST_TOP]
        hit = self.store.get(device, full_key)
        if hit is not None and (m == "fast" or hit.get("mode") == "full") \
                and hit.get("code") == self.code() and self._covers(hit, timed):
            for c in cands:
                if c.name == hit["winner"]:
                    return c
        times = self._tune(rt, full_key, timed, args, kw)
        ok = {n: t for n, t in times.items() if t is not None}
        if not ok:
            raise RuntimeError(f"{self.op}: every candidate failed for {key}")
        winner = min(ok, key=ok.get)
        self.store.put(device, full_key, {
            "winner": winner, "mode": m, "code": self.code(),
            "times_ms": {n: (None if t is None else round(t * 1e3, 4)) for n, t in times.items()}})
        return self[winner]

    def code(self) -> str:
        """A digest of the source of the packages the candidates' code lives in (all of
        dl/kernels for the kernel library's ops): a winner stored against other kernel code
        is stale, so a changed kernel is timed again rather than keeping the choice made
        for the old one; and of how candidates are timed (`TIMING_METHOD`)."""
        if self._code is None:
            files: set[Path] = set()
            for c in self.candidates:
                fn = c.run
                while isinstance(fn, functools.partial):
                    fn = fn.func
                mod = sys.modules.get(getattr(fn, "__module__", "") or "")
                where = getattr(mod, "__file__", None)
                if where:
                    files.update(Path(where).parent.glob("*.py"))
            h = hashlib.sha256(TIMING_METHOD)
            for f in sorted(files):
                h.update(f.name.encode())
                h.update(f.read_bytes())
            self._code = h.hexdigest()[:16]
        return self._code

    @staticmethod
    def _covers(hit: dict, timed: list[Candidate]) -> bool:
        """A stored winner stands only if it beat every candidate we would time now: a new
        candidate, or one whose priority or preference rose since, makes it stale."""
        seen = hit.get("times_ms")
        return isinstance(seen, dict) and all(c.name in seen for c in timed)

    def _tune(self, rt, key: str, cands: list[Candidate], args, kw) -> dict:
        """Each candidate's time: its fastest of `repeats` runs, the candidates timed in
        turns, one run each a round, after a warm-up run each (compiles, first touches). In
        turns, a slow phase of a shared machine (another guest on the core's sibling: sgemm
        at half speed for seconds) falls on every candidate alike; one after the other it
        fell on one of them, and a 64x512x512 F.linear kept a kernel 1.3x slower than the
        best for as long as its choice was stored. A candidate 3x slower than the best so far
        drops out after that run; one that fails is skipped (None). Where a tracer can
        replay a candidate's launches (`LAUNCH_TRACERS`), the rounds time that replay: the
        kernels and their launches, not the Python choosing them."""
        self.tunings += 1
        start = time.perf_counter()
        times: dict[str, float | None] = {}
        alive: list[Candidate] = []
        runs: dict[str, Callable[[], object]] = {}  # what a round times, per candidate
        with contextlib.ExitStack() as stack:
            for ctx in TIMING_CONTEXTS:
                stack.enter_context(ctx())
            for i, c in enumerate(cands):
                try:
                    def whole(c=c):
                        return c.run(rt, *args, **kw)
                    replay = _traced(whole)  # warm-up: compiles, touches memory
                    if replay is False:  # e.g. a nested tuning in the warm-up: once more
                        replay = _traced(whole)
                    rt.sync()
                    runs[c.name] = replay or whole
                    alive.append(c)
                except Exception as e:  # a candidate this device cannot build: skip it
                    times[c.name] = None
                    first = str(e).splitlines()[0] if str(e) else ""
                    self._progress(key, i, len(cands), c.name, start,
                                   f"failed: {type(e).__name__}: {first}")
            spent = dict.fromkeys((c.name for c in alive), 0.0)
            best = float("inf")  # the fastest run so far, of any candidate
            for _ in range(self.repeats):
                for c in list(alive):
                    try:
                        t0 = time.perf_counter()
                        runs[c.name]()
                        rt.sync()
                        t = time.perf_counter() - t0
                    except Exception as e:
                        times[c.name] = None
                        alive.remove(c)
                        self._progress(key, cands.index(c), len(cands), c.name, start,
                                       f"failed: {type(e).__name__}")
                        continue
                    prev = times.get(c.name)
                    times[c.name] = t if prev is None else min(prev, t)
                    spent[c.name] += t
                    best = min(best, t)
                    if t > 3 * best or spent[c.name] > 1.0:  # clearly slower, or slow
                        alive.remove(c)
                if not alive:
                    break
        for i, c in enumerate(cands):
            t = times.get(c.name)
            if t is not None:
                self._progress(key, i, len(cands), c.name, start, f"{t * 1e3:.3f} ms")
        return times

    @staticmethod
    def _progress(key: str, i: int, n: int, name: str, start: float, what: str) -> None:
        if time.perf_counter() - start > PROGRESS_AFTER_S:
            print(f"cube autotune {key}: [{i + 1}/{n}] {name}: {what}", file=sys.stderr,
                  flush=True)


def _traced(run: Callable[[], object]):
    """run() under the registered tracer (see `LAUNCH_TRACERS`): its replay, None or False;
    without a tracer, None."""
    if not LAUNCH_TRACERS:
        run()
        return None
    return LAUNCH_TRACERS[0](run)

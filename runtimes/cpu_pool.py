"""A persistent pool of worker threads for big CPU launches.

The workers (and the calling thread) each make one call of the kernel's parallel driver,
which pulls chunks of cubes from a shared atomic counter, so uneven cubes balance out without
a Python round trip per chunk. The call releases the GIL (ctypes), so the threads run truly in
parallel. Workers get large stacks: shared memory and per-unit variables
of barrier kernels live on the stack.
"""
from __future__ import annotations

import ctypes
import itertools
import os
import queue
import threading
import time

STACK_BYTES = 64 << 20


class _Job:
    """One parallel launch: every participating thread makes one call of the kernel's
    `_par` driver, which claims chunks of cubes from a shared atomic counter natively."""

    __slots__ = ("fn", "blob", "counter", "n", "chunk", "finished", "helpers", "done")

    def __init__(self, fn, blob, n: int, chunk: int, helpers: int):
        self.fn, self.blob, self.n, self.chunk = fn, blob, n, chunk
        self.counter = ctypes.c_int64(0)
        self.finished = itertools.count(1)  # next() is atomic under the GIL
        self.helpers = helpers
        self.done = threading.Lock()
        self.done.acquire()  # released by the last helper

    def work(self) -> None:
        self.fn(self.blob, ctypes.addressof(self.counter), self.n, self.chunk)


    def finish(self) -> None:
        if next(self.finished) == self.helpers:
            self.done.release()


class Pool:
    def __init__(self, threads: int | None = None):
        self.size = max(1, threads or os.cpu_count() or 1)
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.overhead = 0.0  # seconds a launch loses to waking the workers (measured)

    def _start(self) -> None:
        with self._lock:
            if self._threads:
                return
            old = threading.stack_size()
            try:
                threading.stack_size(STACK_BYTES)
                for i in range(self.size):
                    t = threading.Thread(target=self._loop, name=f"cube-cpu-{i}", daemon=True)
                    t.start()
                    self._threads.append(t)
            finally:
                threading.stack_size(old)
            ts = []
            for _ in range(5):
                t = time.perf_counter()
                self._dispatch(_Job(_nothing, None, 0, 1, self.size), False)
                ts.append(time.perf_counter() - t)
            self.overhead = sorted(ts)[2]

    def _loop(self) -> None:
        while True:
            job = self._q.get()
            try:
                job.work()
            finally:
                job.finish()

    def run(self, fn_par, blob, ncubes: int, use_caller: bool = True) -> None:
        """fn_par(blob, &counter, ncubes, chunk) on the pool's threads (and this one)."""
        if not self._threads:
            self._start()
        helpers = min(self.size - 1 if use_caller else self.size, ncubes)
        chunk = max(1, ncubes // (self.size * 16))
        self._dispatch(_Job(fn_par, blob, ncubes, chunk, helpers), use_caller)

    def _dispatch(self, job: _Job, use_caller: bool) -> None:
        for _ in range(job.helpers):
            self._q.put(job)
        if use_caller:
            job.work()
        if job.helpers > 0:
            job.done.acquire()


def _nothing(*args) -> None:
    pass


_pool: Pool | None = None
_pool_lock = threading.Lock()


def _forget_after_fork() -> None:
    global _pool
    _pool = None  # a forked child has none of the parent's worker threads


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def pool() -> Pool:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = Pool()
    return _pool

"""A persistent pool of worker threads for big CPU launches.

A launch is split into chunks of cubes that the workers (and the calling thread) pull from a
shared counter, so uneven cubes balance out. The kernel call releases the GIL (ctypes), so the
chunks run truly in parallel. Workers get large stacks: shared memory and per-unit variables
of barrier kernels live on the stack.
"""
from __future__ import annotations

import itertools
import os
import queue
import threading

STACK_BYTES = 64 << 20


class _Job:
    __slots__ = ("fn", "addr", "n", "chunk", "counter", "pending", "lock", "done")

    def __init__(self, fn, addr, n: int, chunk: int, workers: int):
        self.fn, self.addr, self.n, self.chunk = fn, addr, n, chunk
        self.counter = itertools.count()
        self.pending = workers
        self.lock = threading.Lock()
        self.done = threading.Event()

    def work(self) -> None:
        fn, addr, n, chunk, counter = self.fn, self.addr, self.n, self.chunk, self.counter
        while True:
            b = next(counter) * chunk  # next() on a count is atomic under the GIL
            if b >= n:
                return
            fn(addr, b, min(n, b + chunk))

    def finish(self) -> None:
        with self.lock:
            self.pending -= 1
            if self.pending == 0:
                self.done.set()


class Pool:
    def __init__(self, threads: int | None = None):
        self.size = max(1, threads or os.cpu_count() or 1)
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

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

    def _loop(self) -> None:
        while True:
            job = self._q.get()
            try:
                job.work()
            finally:
                job.finish()

    def run(self, fn, addr, ncubes: int, use_caller: bool = True) -> None:
        """fn(addr, begin, end) over [0, ncubes) in chunks, on the pool (and this thread)."""
        if not self._threads:
            self._start()
        helpers = self.size - 1 if use_caller else self.size
        helpers = min(helpers, ncubes - (1 if use_caller else 0))
        chunk = max(1, -(-ncubes // (self.size * 4)))
        job = _Job(fn, addr, ncubes, chunk, max(helpers, 0))
        for _ in range(helpers):
            self._q.put(job)
        if use_caller:
            job.work()
        if helpers > 0:
            job.done.wait()


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

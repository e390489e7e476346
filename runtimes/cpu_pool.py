"""A persistent pool of worker threads for big CPU launches.

The workers (and the calling thread) each make one call of the kernel's parallel driver,
which pulls chunks of cubes from a shared atomic counter, so uneven cubes balance out without
a Python round trip per chunk. The call releases the GIL (ctypes), so the threads run truly in
parallel. Workers get large stacks: shared memory and per-unit variables
of barrier kernels live on the stack.

Waking a thread blocked on a lock took ~30 us a launch on a VM, twice (the worker, then the
caller at the end), which a training step of small kernels pays dozens of times. So a worker
that finished a job first spins for a while (`SPIN_SECONDS`) in a tiny native loop, without
the GIL, on an epoch counter the caller bumps after queueing a job, and the caller spins the
same way on a job's completion flag; only past the spin do they block.
"""
from __future__ import annotations

import ctypes
import itertools
import os
import queue
import threading
import time

STACK_BYTES = 64 << 20
SPIN_SECONDS = 2e-3  # how long an idle worker (or a waiting caller) spins before blocking

_SPIN_IR = """
define i64 @cube_spin_wait(ptr %flag, i64 %seen, i64 %iters) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %next ]
  %v = load atomic i64, ptr %flag acquire, align 8
  %changed = icmp ne i64 %v, %seen
  br i1 %changed, label %done, label %next
next:
  PAUSE
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, %iters
  br i1 %more, label %loop, label %done
done:
  ret i64 %v
}
define void @cube_spin_wait_par() {
  ret void
}
"""
_SPIN = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


def _native_spin():
    """(spin_wait(flag*, seen, iters) -> value, iterations per second), or None when the JIT
    cannot build it."""
    try:
        import llvmlite.binding as llvm

        from . import cpu_jit
        x86 = llvm.get_process_triple().startswith(("x86_64", "i686", "i386"))
        text = _SPIN_IR.replace("PAUSE", "call void @llvm.x86.sse2.pause()" if x86 else "")
        if x86:
            text += "declare void @llvm.x86.sse2.pause()\n"
        loaded = cpu_jit.Loaded(cpu_jit.compile_object(text), "cube_spin_wait")
        fn = _SPIN(loaded.address)
        flag = ctypes.c_int64(0)
        t = time.perf_counter()
        fn(ctypes.addressof(flag), 0, 20000)
        rate = 20000 / max(time.perf_counter() - t, 1e-6)
        return fn, rate, loaded
    except Exception:  # no JIT here: block on locks only
        return None


class _Job:
    """One parallel launch: every participating thread makes one call of the kernel's
    `_par` driver, which claims chunks of cubes from a shared atomic counter natively."""

    __slots__ = ("fn", "blob", "counter", "n", "chunk", "finished", "helpers", "done", "flag")

    def __init__(self, fn, blob, n: int, chunk: int, helpers: int):
        self.fn, self.blob, self.n, self.chunk = fn, blob, n, chunk
        self.counter = ctypes.c_int64(0)
        self.finished = itertools.count(1)  # next() is atomic under the GIL
        self.helpers = helpers
        self.done = threading.Lock()
        self.done.acquire()  # released by the last helper
        self.flag = ctypes.c_int64(0)  # 1 once every helper finished (the caller spins on it)

    def work(self) -> None:
        self.fn(self.blob, ctypes.addressof(self.counter), self.n, self.chunk)

    def finish(self) -> None:
        if next(self.finished) == self.helpers:
            self.flag.value = 1
            self.done.release()


class Pool:
    def __init__(self, threads: int | None = None):
        self.size = max(1, threads or os.cpu_count() or 1)
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.overhead = 0.0  # seconds a launch loses to waking the workers (measured)
        self._epoch = ctypes.c_int64(0)  # bumped after each job is queued
        self._spin = None  # (native spin_wait, iterations for SPIN_SECONDS, its code)

    def _start(self) -> None:
        with self._lock:
            if self._threads:
                return
            native = _native_spin()
            if native is not None:
                fn, rate, code = native
                self._spin = (fn, max(1, int(rate * SPIN_SECONDS)), code)
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
        epoch = ctypes.addressof(self._epoch)
        while True:
            if self._spin is not None and self._q.empty():
                # spin (GIL released) until a job is queued or the spin runs out
                seen = self._epoch.value
                if self._q.empty():
                    self._spin[0](epoch, seen, self._spin[1])
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
        self._epoch.value += 1  # wakes spinning workers (a lost bump only means a later wake)
        if use_caller:
            job.work()
        if job.helpers > 0:
            if self._spin is not None and not job.flag.value:
                self._spin[0](ctypes.addressof(job.flag), 0, self._spin[1])
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

"""A persistent pool of worker threads for big CPU launches.

The workers (and the calling thread) each make one call of the kernel's parallel driver,
which pulls chunks of cubes from a shared atomic counter, so uneven cubes balance out without
a Python round trip per chunk. The call releases the GIL (ctypes), so the threads run truly in
parallel. Workers get large stacks: shared memory and per-unit variables
of barrier kernels live on the stack.

Waking a thread blocked on a lock took ~30 us a launch on a VM, and the woken worker then
waited for the GIL. On x86-64 Linux the workers are native (`cpu_workers.py`): size - 1
threads each in one ctypes call of a loop that waits on an epoch counter, spinning for
`SPIN_SECONDS` and then sleeping on a futex, and runs the published `_par` driver without
ever taking the GIL (an empty parallel launch: 32 -> 4 us). The caller publishes, runs its
share and spins until every worker acknowledged. Jobs the caller cannot share (kernels that
need a worker's big stack), other platforms and CUBE_CPU_POOL=python use Python worker
threads fed by a queue.
"""
from __future__ import annotations

import atexit
import ctypes
import itertools
import os
import queue
import threading
import time

from . import cpu_workers

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
        self._spin = None  # (native spin_wait, iterations for SPIN_SECONDS, its code)
        self._native = None  # cpu_workers.Native when the workers run natively
        self._ctl = None  # their control block
        self._native_lock = threading.Lock()  # one published job at a time
        self._native_threads: list[threading.Thread] = []
        self._started = False

    def _start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
            native = _native_spin()
            if native is not None:
                fn, rate, code = native
                self._spin = (fn, max(1, int(rate * SPIN_SECONDS)), code)
                if os.environ.get("CUBE_CPU_POOL", "native") != "python":
                    self._native = cpu_workers.load()
            if self._native is not None and self.size > 1:
                # the caller is one of the spinning threads: size - 1 workers fill the cores
                # (one more would spin on the caller's core and starve it)
                self._ctl = cpu_workers.Control(self._spin[1])
                self._native_threads = self._spawn(self.size - 1, self._native_loop, "native")
            else:
                self._native = None
                self._threads = self._spawn(self.size, self._loop, "cpu")
            ts = []
            for _ in range(5):
                t = time.perf_counter()
                if self._native is not None:
                    self._native_dispatch(self._native.noop_par, b"", 0, 1, self.size - 1, True)
                else:
                    self._dispatch(_Job(_nothing, None, 0, 1, self.size), False)
                ts.append(time.perf_counter() - t)
            self.overhead = sorted(ts)[2]

    @staticmethod
    def _spawn(n: int, target, kind: str) -> list:
        old = threading.stack_size()
        threads = []
        try:
            threading.stack_size(STACK_BYTES)
            for i in range(n):
                t = threading.Thread(target=target, name=f"cube-{kind}-{i}", daemon=True)
                t.start()
                threads.append(t)
        finally:
            threading.stack_size(old)
        return threads

    def _native_loop(self) -> None:
        self._native.worker(self._ctl.addr)  # returns only when told to quit

    def stop_native(self) -> None:
        """Tell the native workers to leave their loop (at exit: their machine code is freed
        with the interpreter's objects, and must not be running then)."""
        if self._native is not None and self._ctl is not None:
            with self._native_lock:
                self._ctl.stop()
                self._native.publish(self._ctl.addr)
            for t in self._native_threads:
                t.join(timeout=0.2)

    def _python_workers(self) -> None:
        """Queue workers for jobs the caller cannot share (started on first need)."""
        with self._lock:
            if not self._threads:
                self._threads = self._spawn(self.size, self._loop, "cpu")

    def _loop(self) -> None:
        while True:
            job = self._q.get()
            try:
                job.work()
            finally:
                job.finish()

    def run(self, fn_par, blob, ncubes: int, use_caller: bool = True) -> None:
        """fn_par(blob, &counter, ncubes, chunk) on the pool's threads (and this one)."""
        if not self._started:
            self._start()
        helpers = min(self.size - 1 if use_caller else self.size, ncubes)
        chunk = max(1, ncubes // (self.size * 16))
        if self._native is not None and use_caller:
            fn_addr = ctypes.cast(fn_par, ctypes.c_void_p).value
            self._native_dispatch(fn_addr, blob, ncubes, chunk, helpers, use_caller, fn_par)
        else:
            if not self._threads:
                self._python_workers()
            self._dispatch(_Job(fn_par, blob, ncubes, chunk, helpers), use_caller)

    def _native_dispatch(self, fn_addr: int, blob: bytes, ncubes: int, chunk: int,
                         helpers: int, use_caller: bool, fn_par=None) -> None:
        """Publish the job to the native workers, run the caller's share, wait for every
        worker's acknowledgement (after it, no worker reads the job or `blob`)."""
        counter = ctypes.c_int64(0)
        blob_p = ctypes.c_char_p(blob)  # the bytes' own buffer, alive through the call
        with self._native_lock:
            ctl = self._ctl
            ctl.set_job(fn_addr, ctypes.cast(blob_p, ctypes.c_void_p).value or 0,
                        ctypes.addressof(counter), ncubes, chunk, helpers)
            self._native.publish(ctl.addr)
            if use_caller and fn_par is not None:
                fn_par(blob, ctypes.addressof(counter), ncubes, chunk)
            self._native.wait_done(ctl.addr, len(self._native_threads), self._spin[1])

    def _dispatch(self, job: _Job, use_caller: bool) -> None:
        for _ in range(job.helpers):
            self._q.put(job)
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


@atexit.register
def _stop_at_exit() -> None:
    if _pool is not None:
        _pool.stop_native()

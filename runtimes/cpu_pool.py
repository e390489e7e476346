"""A persistent pool of worker threads for big CPU launches.

The workers (and the calling thread) each make one call of the kernel's parallel driver,
which pulls chunks of cubes from a shared atomic counter, so uneven cubes balance out without
a Python round trip per chunk. The call releases the GIL (ctypes), so the threads run truly in
parallel. Workers get large stacks: shared memory and per-unit variables
of barrier kernels live on the stack.

Waking a thread blocked on a lock took ~30 us a launch on a VM, and the woken worker then
waited for the GIL. On x86-64 Linux the workers are native (`cpu_workers.py`): size - 1
threads each in one ctypes call of a loop that waits on an epoch counter, spinning for
`PAUSE_SECONDS`, then yielding the core between looks until `SPIN_SECONDS`, then sleeping on a
futex, and runs the published `_par` driver without ever taking the GIL (an empty parallel
launch: 32 -> 4 us). The caller publishes, runs the driver itself and waits only for the
workers that joined the job and are still inside it: a worker asleep or descheduled (another
library's threads on the cores) costs the launch nothing, it finds every chunk claimed and
the job closed when it arrives. Jobs the caller cannot share (kernels that need a worker's
big stack), other platforms and CUBE_CPU_POOL=python use Python worker threads fed by a
queue, with the same join/close rule.

The pool starts (a JIT compile and the threads: milliseconds) in the background on its first
launch, which runs on the calling thread alone meanwhile.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import queue
import threading
import time

from . import cpu_workers

# CUBE_POOL_STEER=0: wake sleeping workers wherever the scheduler puts them (`_steer_wakeup`)
_STEER = os.environ.get("CUBE_POOL_STEER", "1") != "0" and hasattr(os, "sched_setaffinity")
_getcpu = ctypes.CDLL(None).sched_getcpu if _STEER else None  # the calling thread's CPU


STACK_BYTES = 64 << 20
PAUSE_SECONDS = 50e-6  # an idle worker spins with `pause` this long (the caller waiting too)
SPIN_SECONDS = 2e-3  # then gives its core away between looks until this long, then sleeps


class _Job:
    """One parallel launch on the Python workers: every thread that joins makes one call of
    the kernel's `_par` driver, which claims chunks of cubes from a shared atomic counter; the
    job is over once every chunk is claimed and no joined thread is still inside, and a
    worker that comes later finds it closed."""

    __slots__ = ("fn", "blob", "counter", "n", "chunk", "helpers", "cond", "inside", "closed")

    def __init__(self, fn, blob, n: int, chunk: int, helpers: int):
        self.fn, self.blob, self.n, self.chunk = fn, blob, n, chunk
        self.counter = ctypes.c_int64(0)
        self.helpers = helpers
        self.cond = threading.Condition(threading.Lock())
        self.inside = 0
        self.closed = False

    def work(self) -> None:
        self.fn(self.blob, ctypes.addressof(self.counter), self.n, self.chunk)

    def join(self) -> bool:
        with self.cond:
            if self.closed:
                return False
            self.inside += 1
            return True

    def leave(self) -> None:
        with self.cond:
            self.inside -= 1
            if not self.inside:
                self.cond.notify_all()

    def close(self) -> None:
        """Wait until every chunk is claimed and nobody is inside, then close."""
        with self.cond:
            while self.inside or self.counter.value < self.n:
                self.cond.wait()
            self.closed = True


class Pool:
    def __init__(self, threads: int | None = None):
        self.size = max(1, threads or os.cpu_count() or 1)
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.overhead = 0.0  # seconds a launch loses to publishing and closing (measured)
        self._native = None  # cpu_workers.Native when the workers run natively
        self._ctl = None  # their control block
        self._close_iters = 1  # pause iterations the caller spins before yielding
        self._native_lock = threading.Lock()  # one published job at a time
        self._native_threads: list[threading.Thread] = []
        self._started = False  # the start was begun
        self._ready = False  # ... and is complete: the workers (if any) can take jobs
        self._stopping = False
        self._starter: threading.Thread | None = None
        self._steered: list = []  # (worker thread id, its own mask) off the caller's CPU

    def start(self, wait: bool = True) -> None:
        """Start the workers (in the background unless `wait`)."""
        with self._lock:
            if not self._started:
                self._started = True
                self._starter = threading.Thread(target=self._start, name="cube-pool-start",
                                                 daemon=True)
                self._starter.start()
            starter = self._starter
        if wait and not self._ready:
            starter.join()

    def ready(self, timeout: float | None = None) -> bool:
        """Whether the pool has started, waiting up to `timeout` seconds for a start begun."""
        if not self._ready and self._starter is not None:
            self._starter.join(timeout)
        return self._ready

    def _start(self) -> None:
        try:
            native = None
            if self.size > 1 and os.environ.get("CUBE_CPU_POOL", "native") != "python":
                native = cpu_workers.load()
            with self._lock:
                if self._stopping:
                    return
                if native is not None:
                    # the caller is one of the threads: size - 1 workers fill the cores
                    # (one more would compete with the caller for its core)
                    self._close_iters = max(1, int(native.pauses_per_second() * PAUSE_SECONDS))
                    tps = native.ticks_per_second()
                    self._ctl = cpu_workers.Control(int(tps * PAUSE_SECONDS),
                                                    int(tps * SPIN_SECONDS))
                    self._native = native
                    self._native_threads = self._spawn(self.size - 1, self._native_loop,
                                                       "native")
                else:
                    self._threads = self._spawn(self.size, self._loop, "cpu")
            ts = []
            for _ in range(5):
                t = time.perf_counter()
                if self._native is not None:
                    self._native_dispatch(self._native.noop_par, b"", 0, 1)
                else:
                    self._dispatch(_Job(_nothing, None, 0, 1, self.size), False)
                ts.append(time.perf_counter() - t)
            self.overhead = sorted(ts)[2]
        finally:
            self._ready = True

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
        with self._lock:
            self._stopping = True
        if self._starter is not None:
            self._starter.join(timeout=1.0)
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
            if job.join():
                try:
                    job.work()
                finally:
                    job.leave()

    def run(self, fn_par, blob, ncubes: int, use_caller: bool = True) -> None:
        """fn_par(blob, &counter, ncubes, chunk) on the pool's threads (and this one)."""
        chunk = max(1, ncubes // (self.size * 16))
        if not self._ready:
            if use_caller:  # start the pool in the background, run this launch here alone
                self.start(wait=False)
                if not self._ready:
                    counter = ctypes.c_int64(0)
                    fn_par(blob, ctypes.addressof(counter), ncubes, chunk)
                    return
            else:
                self.start()
        if self._native is not None and use_caller:
            self._native_dispatch(_pointee(fn_par), blob, ncubes, chunk, fn_par)
        else:
            if not self._threads:
                self._python_workers()
            helpers = min(self.size - 1 if use_caller else self.size, ncubes)
            self._dispatch(_Job(fn_par, blob, ncubes, chunk, helpers), use_caller)

    def _native_dispatch(self, fn_addr: int, blob: bytes, ncubes: int, chunk: int,
                         fn_par=None) -> None:
        """Publish the job to the native workers, run the driver here too, then wait for the
        workers inside it and close it (after that no worker reads the job or `blob`)."""
        counter = ctypes.c_int64(0)
        blob_p = ctypes.c_char_p(blob)  # the bytes' own buffer, alive through the call
        with self._native_lock:
            ctl = self._ctl
            ctl.set_job(fn_addr, _pointee(blob_p) or 0, ctypes.addressof(counter), ncubes,
                        chunk)
            if _STEER and ctl.sleepers():  # this publish wakes them
                self._steer_wakeup()
            self._native.publish(ctl.addr)
            if fn_par is not None:
                fn_par(blob, ctypes.addressof(counter), ncubes, chunk)
            self._native.close(ctl.addr, self._close_iters)
            if self._steered:
                self._unsteer()

    def _steer_wakeup(self) -> None:
        """Keep woken workers off the caller's core. After a few ms idle the other vCPUs
        look preempted to a VM guest, which then wakes a worker onto the waker's own CPU:
        the worker and the caller shared one core for ~10 ms (sgemm 512 after a 0.2 s
        pause: 3.3, 2.1, 1.8, 1.7, 1.4 ms, then 1.0 steady; NumPy, whose caller waits for
        its worker, 2.2 then 1.0). Each worker's own mask comes back when the launch closes."""
        try:
            cpu = _getcpu()
            for t in self._native_threads:
                tid = t.native_id
                if tid is None:
                    continue
                mask = os.sched_getaffinity(tid)
                if len(mask) > 1 and cpu in mask:
                    os.sched_setaffinity(tid, mask - {cpu})
                    self._steered.append((tid, mask))
        except OSError:  # a thread gone, a mask we may not set: wake as before
            pass

    def _unsteer(self) -> None:
        for tid, mask in self._steered:
            try:
                os.sched_setaffinity(tid, mask)
            except OSError:
                pass
        self._steered.clear()

    def _dispatch(self, job: _Job, use_caller: bool) -> None:
        for _ in range(job.helpers):
            self._q.put(job)
        if use_caller:
            job.work()
        job.close()


def _pointee(p) -> int | None:
    """The address a ctypes pointer (a function pointer, a c_char_p) holds: its own memory
    read as a void pointer, as `ctypes.cast(p, c_void_p).value` gives it at a third of the
    cost (every launch asks twice)."""
    return ctypes.c_void_p.from_address(ctypes.addressof(p)).value


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

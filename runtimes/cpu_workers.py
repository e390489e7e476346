"""Native worker threads for the CPU pool (x86-64 Linux): a worker that never takes the GIL.

A pooled launch used to reach a worker through a Python queue: the worker woke, took the GIL
(handed over only when the caller entered the kernel) and only then started, ~30-50 us late
on a VM, and the caller waited as long again at the end. Here each worker thread makes one
ctypes call into `cube_worker`, a loop in LLVM IR that waits on an epoch counter (spinning,
then sleeping on a futex), calls the job's `_par` driver through its address and counts
itself done; the caller publishes a job with plain stores and one atomic add, runs its own
share, and spins until every worker counted the job.

Control block: 16 i64 slots shared by the caller and all workers:
    0 epoch (low 32 bits; the futex word)   1 sleepers   2 fn   3 blob   4 counter
    5 ncubes   6 chunk   7 done   8 quit   9 spin iterations   10 allowed   11 joined
Every worker acknowledges every job (`done`), so the caller knows no worker still reads the
job's slots or argument block when it returns; only the first `allowed` to join run the
driver (the caller's own share plus `allowed` workers fill the cores, no more).
"""
from __future__ import annotations

import ctypes
import platform
import sys

SLOTS = 16
(_EPOCH, _SLEEPERS, _FN, _BLOB, _COUNTER, _N, _CHUNK, _DONE, _QUIT, _ITERS, _ALLOWED,
 _JOINED) = range(12)

_IR = """
declare i64 @syscall(i64, ...)
declare i32 @sched_yield()
declare void @llvm.x86.sse2.pause()

define void @cube_worker(ptr %ctl) {
entry:
  %epoch = getelementptr i64, ptr %ctl, i64 0
  %sleepers = getelementptr i64, ptr %ctl, i64 1
  %fn_p = getelementptr i64, ptr %ctl, i64 2
  %blob_p = getelementptr i64, ptr %ctl, i64 3
  %counter_p = getelementptr i64, ptr %ctl, i64 4
  %n_p = getelementptr i64, ptr %ctl, i64 5
  %chunk_p = getelementptr i64, ptr %ctl, i64 6
  %done = getelementptr i64, ptr %ctl, i64 7
  %quit = getelementptr i64, ptr %ctl, i64 8
  %iters_p = getelementptr i64, ptr %ctl, i64 9
  %allowed_p = getelementptr i64, ptr %ctl, i64 10
  %joined_p = getelementptr i64, ptr %ctl, i64 11
  %seen = alloca i32
  %i = alloca i64
  store i32 0, ptr %seen
  br label %wait
wait:
  store i64 0, ptr %i
  br label %spin
spin:
  %s = load i32, ptr %seen
  %cur = load atomic i32, ptr %epoch acquire, align 8
  %changed = icmp ne i32 %cur, %s
  br i1 %changed, label %got, label %spin_next
spin_next:
  call void @llvm.x86.sse2.pause()
  %iv = load i64, ptr %i
  %iv1 = add i64 %iv, 1
  store i64 %iv1, ptr %i
  %budget = load atomic i64, ptr %iters_p monotonic, align 8
  %more = icmp ult i64 %iv1, %budget
  br i1 %more, label %spin, label %sleep
sleep:
  %a = atomicrmw add ptr %sleepers, i64 1 seq_cst
  fence seq_cst
  %cur2 = load atomic i32, ptr %epoch seq_cst, align 8
  %changed2 = icmp ne i32 %cur2, %s
  br i1 %changed2, label %unsleep, label %dosleep
dosleep:
  %sz = zext i32 %s to i64
  %r = call i64 (i64, ...) @syscall(i64 202, ptr %epoch, i64 128, i64 %sz, ptr null)
  %b = atomicrmw sub ptr %sleepers, i64 1 seq_cst
  br label %wait
unsleep:
  %c = atomicrmw sub ptr %sleepers, i64 1 seq_cst
  br label %got
got:
  %now = load atomic i32, ptr %epoch acquire, align 8
  store i32 %now, ptr %seen
  %q = load atomic i64, ptr %quit acquire, align 8
  %stop = icmp ne i64 %q, 0
  br i1 %stop, label %exit, label %run
run:
  %joined = atomicrmw add ptr %joined_p, i64 1 acq_rel
  %allowed = load i64, ptr %allowed_p
  %take = icmp ult i64 %joined, %allowed
  br i1 %take, label %call, label %ack
call:
  %fnv = load i64, ptr %fn_p
  %fn = inttoptr i64 %fnv to ptr
  %blobv = load i64, ptr %blob_p
  %blob = inttoptr i64 %blobv to ptr
  %cv = load i64, ptr %counter_p
  %counter = inttoptr i64 %cv to ptr
  %n = load i64, ptr %n_p
  %chunk = load i64, ptr %chunk_p
  call void %fn(ptr %blob, ptr %counter, i64 %n, i64 %chunk)
  br label %ack
ack:
  %d = atomicrmw add ptr %done, i64 1 release
  br label %wait
exit:
  ret void
}

define void @cube_publish(ptr %ctl) {
entry:
  %epoch = getelementptr i64, ptr %ctl, i64 0
  %sleepers = getelementptr i64, ptr %ctl, i64 1
  %old = atomicrmw add ptr %epoch, i32 1 seq_cst
  fence seq_cst
  %sl = load atomic i64, ptr %sleepers seq_cst, align 8
  %any = icmp ne i64 %sl, 0
  br i1 %any, label %wake, label %done
wake:
  %r = call i64 (i64, ...) @syscall(i64 202, ptr %epoch, i64 129, i64 2147483647)
  br label %done
done:
  ret void
}

define void @cube_wait_done(ptr %ctl, i64 %target, i64 %iters) {
entry:
  %done = getelementptr i64, ptr %ctl, i64 7
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %pause ], [ %i1, %yield ]
  %d = load atomic i64, ptr %done acquire, align 8
  %ok = icmp uge i64 %d, %target
  br i1 %ok, label %exit, label %next
next:
  %i1 = add i64 %i, 1
  %spinning = icmp ult i64 %i1, %iters
  br i1 %spinning, label %pause, label %yield
pause:
  call void @llvm.x86.sse2.pause()
  br label %loop
yield:
  %y = call i32 @sched_yield()
  br label %loop
exit:
  ret void
}

define void @cube_noop_par(ptr %a, ptr %b, i64 %n, i64 %c) {
  ret void
}

define void @cube_worker_par() {
  ret void
}
"""

_WORKER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_PUBLISH = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_WAIT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


class Native:
    """The compiled loop and its helpers; `None` from `load()` where they cannot run."""

    def __init__(self, loaded):
        self._loaded = loaded  # keeps the machine code alive
        eng = loaded.engine
        self.worker = _WORKER(eng.get_function_address("cube_worker"))
        self.publish = _PUBLISH(eng.get_function_address("cube_publish"))
        self.wait_done = _WAIT(eng.get_function_address("cube_wait_done"))
        self.noop_par = eng.get_function_address("cube_noop_par")


def load() -> Native | None:
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "AMD64"):
        return None
    try:
        from . import cpu_jit
        return Native(cpu_jit.Loaded(cpu_jit.compile_object(_IR), "cube_worker"))
    except Exception:
        return None


class Control:
    """One control block (see the module doc) with typed access to its slots."""

    def __init__(self, spin_iters: int):
        self.block = (ctypes.c_int64 * SLOTS)()
        self.addr = ctypes.addressof(self.block)
        self.block[_ITERS] = spin_iters

    def set_job(self, fn_addr: int, blob_addr: int, counter_addr: int, n: int, chunk: int,
                allowed: int) -> None:
        """The job's slots, written before `publish` makes them visible (x86: stores are
        seen in order; publish is a seq_cst read-modify-write)."""
        b = self.block
        b[_FN], b[_BLOB], b[_COUNTER], b[_N], b[_CHUNK] = fn_addr, blob_addr, counter_addr, n, \
            chunk
        b[_ALLOWED], b[_JOINED], b[_DONE] = allowed, 0, 0

    def stop(self) -> None:
        self.block[_QUIT] = 1

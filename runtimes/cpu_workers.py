"""Native worker threads for the CPU pool (x86-64 Linux): a worker that never takes the GIL.

A pooled launch used to reach a worker through a Python queue: the worker woke, took the GIL
(handed over only when the caller entered the kernel) and only then started, ~30-50 us late
on a VM, and the caller waited as long again at the end. Here each worker thread makes one
ctypes call into `cube_worker`, a loop in LLVM IR that waits on an epoch counter (spinning
with `pause`, then spinning with `sched_yield`, then sleeping on a futex), joins the
published job and calls its `_par` driver through its address; the caller publishes a job
with plain stores and one atomic add, runs the driver itself too, and closes the job.

Nobody waits for a thread that has not started: the drivers claim chunks of cubes from the
job's atomic counter, so the caller alone can run every chunk while a worker is still asleep
or descheduled (another library's threads on the cores). The job is over when every chunk is
claimed (the caller's own driver call returned) and no worker that joined is still inside
its driver; the caller then closes it, and a worker arriving later sees the closed (or a
newer) generation and never reads the job's slots, counter or argument block.

Control block: 16 i64 slots shared by the caller and all workers:
    0 epoch (low 32 bits; the futex word)   1 sleepers   2 fn   3 blob   4 counter
    5 ncubes   6 chunk   7 state   8 quit   9 pause ticks   10 spin ticks (time stamp
    counter ticks since the worker began waiting: `pause` until 9, `sched_yield` until 10)
state = generation << 32 | CLOSED (bit 31) | workers inside the driver (bits 0-30); a worker
joins by compare-and-swap only while the generation is the epoch it woke for and the job is
open, and the caller closes by compare-and-swap only when none is inside.
"""
from __future__ import annotations

import ctypes
import platform
import sys

SLOTS = 16
(_EPOCH, _SLEEPERS, _FN, _BLOB, _COUNTER, _N, _CHUNK, _STATE, _QUIT, _PAUSE_TICKS,
 _SPIN_TICKS) = range(11)

_IR = """
declare i64 @syscall(i64, ...)
declare i32 @sched_yield()
declare void @llvm.x86.sse2.pause()
declare i64 @llvm.readcyclecounter()

define void @cube_worker(ptr %ctl) {
entry:
  %epoch = getelementptr i64, ptr %ctl, i64 0
  %sleepers = getelementptr i64, ptr %ctl, i64 1
  %fn_p = getelementptr i64, ptr %ctl, i64 2
  %blob_p = getelementptr i64, ptr %ctl, i64 3
  %counter_p = getelementptr i64, ptr %ctl, i64 4
  %n_p = getelementptr i64, ptr %ctl, i64 5
  %chunk_p = getelementptr i64, ptr %ctl, i64 6
  %state_p = getelementptr i64, ptr %ctl, i64 7
  %quit = getelementptr i64, ptr %ctl, i64 8
  %pauses_p = getelementptr i64, ptr %ctl, i64 9
  %yields_p = getelementptr i64, ptr %ctl, i64 10
  %seen = alloca i32
  %e0 = load atomic i32, ptr %epoch acquire, align 8
  store i32 %e0, ptr %seen
  br label %wait
wait:
  %t0 = call i64 @llvm.readcyclecounter()
  br label %spin
spin:
  %s = load i32, ptr %seen
  %cur = load atomic i32, ptr %epoch acquire, align 8
  %changed = icmp ne i32 %cur, %s
  br i1 %changed, label %got, label %spin_next
spin_next:
  %now_t = call i64 @llvm.readcyclecounter()
  %waited = sub i64 %now_t, %t0
  %pauses = load atomic i64, ptr %pauses_p monotonic, align 8
  %pausing = icmp ult i64 %waited, %pauses
  br i1 %pausing, label %do_pause, label %yield_check
do_pause:
  call void @llvm.x86.sse2.pause()
  br label %spin
yield_check:
  %limit = load atomic i64, ptr %yields_p monotonic, align 8
  %yielding = icmp ult i64 %waited, %limit
  br i1 %yielding, label %do_yield, label %sleep
do_yield:
  %y = call i32 @sched_yield()
  br label %spin
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
  br i1 %stop, label %exit, label %join
join:
  %st = load atomic i64, ptr %state_p acquire, align 8
  %gen = lshr i64 %st, 32
  %now64 = zext i32 %now to i64
  %same = icmp eq i64 %gen, %now64
  %closed_bit = and i64 %st, 2147483648
  %open = icmp eq i64 %closed_bit, 0
  %ok = and i1 %same, %open
  br i1 %ok, label %try_join, label %wait
try_join:
  %st1 = add i64 %st, 1
  %xchg = cmpxchg ptr %state_p, i64 %st, i64 %st1 acq_rel acquire
  %joined = extractvalue { i64, i1 } %xchg, 1
  br i1 %joined, label %call, label %join
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
  %left = atomicrmw sub ptr %state_p, i64 1 release
  br label %wait
exit:
  ret void
}

define void @cube_publish(ptr %ctl) {
entry:
  %epoch = getelementptr i64, ptr %ctl, i64 0
  %sleepers = getelementptr i64, ptr %ctl, i64 1
  %state_p = getelementptr i64, ptr %ctl, i64 7
  %old = load atomic i32, ptr %epoch monotonic, align 8
  %new = add i32 %old, 1
  %new64 = zext i32 %new to i64
  %st = shl i64 %new64, 32
  store atomic i64 %st, ptr %state_p seq_cst, align 8
  %prev = atomicrmw add ptr %epoch, i32 1 seq_cst
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

define void @cube_close(ptr %ctl, i64 %iters) {
entry:
  %state_p = getelementptr i64, ptr %ctl, i64 7
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %pause ], [ %i1, %yield ], [ %i, %close ]
  %st = load atomic i64, ptr %state_p acquire, align 8
  %inside = and i64 %st, 2147483647
  %idle = icmp eq i64 %inside, 0
  br i1 %idle, label %close, label %next
close:
  %st1 = or i64 %st, 2147483648
  %xchg = cmpxchg ptr %state_p, i64 %st, i64 %st1 acq_rel acquire
  %closed = extractvalue { i64, i1 } %xchg, 1
  br i1 %closed, label %exit, label %loop
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

define i64 @cube_ticks() {
  %t = call i64 @llvm.readcyclecounter()
  ret i64 %t
}

define i64 @cube_spin(ptr %flag, i64 %iters) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %loop ]
  %v = load atomic i64, ptr %flag acquire, align 8
  call void @llvm.x86.sse2.pause()
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, %iters
  br i1 %more, label %loop, label %done
done:
  ret i64 %v
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
_CLOSE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)
_SPIN = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64)
_TICKS = ctypes.CFUNCTYPE(ctypes.c_int64)


class Native:
    """The compiled loop and its helpers; `None` from `load()` where they cannot run."""

    def __init__(self, loaded):
        self._loaded = loaded  # keeps the machine code alive
        eng = loaded.engine
        self.worker = _WORKER(eng.get_function_address("cube_worker"))
        self.publish = _PUBLISH(eng.get_function_address("cube_publish"))
        self.close = _CLOSE(eng.get_function_address("cube_close"))
        self.spin = _SPIN(eng.get_function_address("cube_spin"))
        self.ticks = _TICKS(eng.get_function_address("cube_ticks"))
        self.noop_par = eng.get_function_address("cube_noop_par")

    def pauses_per_second(self) -> float:
        import time
        flag = ctypes.c_int64(0)
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            self.spin(ctypes.addressof(flag), 20000)
            best = min(best, time.perf_counter() - t)
        return 20000 / max(best, 1e-6)

    def ticks_per_second(self) -> float:
        """The time stamp counter's rate (invariant on current x86-64: not the core clock)."""
        import time
        t, c = time.perf_counter(), self.ticks()
        time.sleep(2e-3)
        return (self.ticks() - c) / max(time.perf_counter() - t, 1e-6)


def compile_plain(text: str) -> bytes:
    """Hand-written IR -> object code without the -O3 IR pipeline (cpu_jit.compile_object's
    pipeline cost ~15 ms a module on a 2-core VM; this ~3 ms)."""
    import llvmlite.binding as llvm

    from . import cpu_jit
    cpu_jit._init()
    with cpu_jit.LOCK:
        target = llvm.Target.from_triple(llvm.get_process_triple())
        tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                          features=cpu_jit.host_features(), opt=2,
                                          codemodel="jitdefault")
        mod = llvm.parse_assembly(text)
        mod.triple = tm.triple
        mod.data_layout = str(tm.target_data)
        mod.verify()
        return tm.emit_object(mod)


def load() -> Native | None:
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "AMD64"):
        return None
    try:
        from . import cpu_jit
        return Native(cpu_jit.Loaded(compile_plain(_IR), "cube_worker"))
    except Exception:
        return None


class Control:
    """One control block (see the module doc) with typed access to its slots."""

    def __init__(self, pause_ticks: int, spin_ticks: int):
        self.block = (ctypes.c_int64 * SLOTS)()
        self.addr = ctypes.addressof(self.block)
        self.block[_PAUSE_TICKS], self.block[_SPIN_TICKS] = pause_ticks, spin_ticks

    def set_job(self, fn_addr: int, blob_addr: int, counter_addr: int, n: int,
                chunk: int) -> None:
        """The job's slots, written before `publish` makes them visible (x86: stores are
        seen in order; publish is a seq_cst read-modify-write). Called only while the previous
        job is closed: no worker is inside a driver, none can join it."""
        b = self.block
        b[_FN], b[_BLOB], b[_COUNTER], b[_N], b[_CHUNK] = fn_addr, blob_addr, counter_addr, n, \
            chunk

    def state(self) -> int:
        return self.block[_STATE]

    def sleepers(self) -> int:
        """Workers asleep on the futex (the next `publish` wakes them)."""
        return self.block[_SLEEPERS]

    def stop(self) -> None:
        self.block[_QUIT] = 1

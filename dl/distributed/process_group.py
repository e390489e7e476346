"""The process group: torch.distributed's `init_process_group` and friends over MPI.

One process per rank, started by `mpirun -n N python script.py`: MPI gives the rank and world
size (the `world_size=` and `rank=` arguments, when given, must agree with it). The "nccl"
backend runs its collectives on CUDA tensors through NCCL (CuPy), its communicator set up
through an MPI broadcast of NCCL's unique id; tensors on other devices use MPI.

Waiting never hangs forever: a wait on a non-blocking request polls it against a deadline
(`timeout=`, 30 minutes by default as torch's), a blocking call is watched by a watchdog
thread with the same deadline, and a rank that times out prints which collective it was
waiting for and aborts the whole job (MPI_Abort), since the ranks that are still waiting could
not be woken otherwise.

Checked mode (`DL_DISTRIBUTED_DEBUG=DETAIL` in the environment, or `set_debug(True)`): before
every collective the ranks exchange a signature (the collective, dtype, shape) in one small
extra all-gather and raise the same RuntimeError on every rank when they differ, instead of
reducing garbage or hanging. It costs one small all-gather per collective (96 bytes a rank:
about a 1 KB all-reduce's latency, 13-17 us between two processes of a 16-core Xeon, see
bench/results/*-allreduce.md); it is off by default, as torch's TORCH_DISTRIBUTED_DEBUG."""
from __future__ import annotations

import datetime
import importlib
import os
import queue
import sys
import threading
import time

from . import nccl_backend

DEFAULT_TIMEOUT = 1800.0  # seconds, torch's default for init_process_group

_group = None
_debug = os.environ.get("DL_DISTRIBUTED_DEBUG", "").upper() in ("DETAIL", "INFO", "1")


class Backend:
    """Backend names, as torch.distributed.Backend."""
    MPI = "mpi"
    NCCL = "nccl"
    GLOO = "gloo"  # accepted as another name for MPI (CPU collectives)


def _mpi():
    """mpi4py's MPI module, imported on first use (importing it initialises MPI)."""
    try:
        MPI = importlib.import_module("mpi4py.MPI")
    except ImportError as e:
        raise RuntimeError(f"dl.distributed needs mpi4py and an MPI library ({e}): apt-get "
                           f"install openmpi-bin libopenmpi-dev && pip install "
                           f"'cube-lang[mpi]'") from None
    return MPI


class _Job:
    """A collective queued to the communication thread, with MPI's request interface."""
    __slots__ = ("what", "event", "error")

    def __init__(self, what: str):
        self.what, self.event, self.error = what, threading.Event(), None

    def Test(self) -> bool:  # noqa: N802 - MPI's name
        if not self.event.is_set():
            return False
        if self.error is not None:
            err, self.error = self.error, None
            raise RuntimeError(f"dl.distributed: {self.what} failed: {err}") from err
        return True


class ProcessGroup:
    """The world: the MPI communicator (and, for "nccl", the NCCL communicator)."""

    def __init__(self, backend: str, comm, timeout: float):
        self.backend = backend
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.timeout = timeout
        self.nccl = None
        self._deadline = None  # of the blocking call in progress (the watchdog's)
        self._what = ""
        self._dog = None
        # the communication thread (asynchronous collectives), where MPI allows threads
        self._threaded = not isinstance(comm, _SelfComm) and \
            _mpi().Query_thread() >= _mpi().THREAD_MULTIPLE
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._pending = 0
        self._worker = None

    def close(self) -> None:
        """Stop the communication and watchdog threads."""
        if self._worker is not None:
            self._jobs.put(None)
            self._worker.join(timeout=5)
            self._worker = None
        self._dog = None

    def call(self, blocking: bool, what: str, nonblocking, blocking_fn, *args):
        """Run a collective: `blocking_fn(*args)` is MPI's blocking call, `nonblocking(*args)`
        the same as a request. Blocking: the call is made here under the watchdog (None is
        returned), or queued behind the asynchronous ones in flight and waited for, so every
        rank makes its collectives in program order. Non-blocking: with MPI_THREAD_MULTIPLE
        the blocking call is queued to the group's communication thread (which makes
        progress while Python computes, and uses MPI's tuned algorithms) and its `_Job`
        returned; otherwise MPI's request."""
        if not self._threaded:
            if not blocking:
                return nonblocking(*args)
            self._watched(what, blocking_fn, args)
            return None
        with self._lock:
            inline = blocking and self._pending == 0
            if not inline:
                self._pending += 1
        if inline:
            self._watched(what, blocking_fn, args)
            return None
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name="dl-distributed-comm",
                                            daemon=True)
            self._worker.start()
        job = _Job(what)
        self._jobs.put((job, blocking_fn, args))
        if blocking:
            self.wait(job, what)
            return None
        return job

    def _watched(self, what: str, fn, args) -> None:
        self._what = what
        self._deadline = time.monotonic() + self.timeout
        if self._dog is None:
            self._dog = threading.Thread(target=self._watch, name="dl-distributed-watchdog",
                                         daemon=True)
            self._dog.start()
        try:
            fn(*args)
        finally:
            self._deadline = None

    def _work(self) -> None:
        """The communication thread: queued collectives, one at a time, in order."""
        while True:
            item = self._jobs.get()
            if item is None:
                return
            job, fn, args = item
            try:
                fn(*args)
            except BaseException as e:  # noqa: BLE001 - handed to the waiter
                job.error = e
            with self._lock:
                self._pending -= 1
            job.event.set()

    def _watch(self) -> None:
        """The watchdog: aborts the job when a blocking call outlives the timeout (MPI
        releases the GIL while it blocks; Open MPI's threads level is MPI_THREAD_MULTIPLE)."""
        while self._dog is not None:
            time.sleep(0.05)
            deadline = self._deadline
            if deadline is not None and time.monotonic() > deadline:
                self.abort(f"rank {self.rank}: {self._what} timed out after "
                           f"{self.timeout:g} s (another rank died, hangs or skipped this "
                           f"collective); aborting the job")

    def wait(self, req, what: str, timeout: float | None = None) -> None:
        """Wait for an MPI request (polled) or a queued `_Job` against the deadline (see the
        module)."""
        limit = self.timeout if timeout is None else timeout
        if isinstance(req, _Job):
            if not req.event.wait(limit):
                self.abort(f"rank {self.rank}: {what} timed out after {limit:g} s (another "
                           f"rank died, hangs or skipped this collective); aborting the job")
            req.Test()  # raises the call's error, if any
            return
        if req.Test():
            return
        deadline = time.monotonic() + limit
        spins = 0
        while not req.Test():
            spins += 1
            if spins > 200:  # a short spin first (latency), then sleep a little each time
                time.sleep(min(1e-3, 1e-6 * (spins - 200)))
            if time.monotonic() > deadline:
                self.abort(f"rank {self.rank}: {what} timed out after {limit:g} s (another "
                           f"rank died, hangs or skipped this collective); aborting the job")

    def abort(self, message: str) -> None:
        sys.stderr.write(f"dl.distributed: {message}\n")
        sys.stderr.flush()
        if self.nccl is not None:
            try:
                self.nccl.abort()
            except Exception:  # noqa: BLE001 - aborting anyway
                pass
        self.comm.Abort(1)


def _launched_size() -> int:
    """The world size a launcher (mpirun, torchrun) announces in the environment, else 1."""
    for var in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "WORLD_SIZE"):
        if os.environ.get(var):
            return int(os.environ[var])
    return 1


class _SelfComm:
    """The communicator of a world of one process, for the nccl backend where mpi4py is
    absent (what a single-GPU machine needs: NCCL does the collectives)."""

    class _Done:
        def Test(self) -> bool:  # noqa: N802 - MPI's names
            return True

    def Get_rank(self) -> int:  # noqa: N802
        return 0

    def Get_size(self) -> int:  # noqa: N802
        return 1

    def Dup(self):  # noqa: N802
        return self

    def Free(self) -> None:  # noqa: N802
        pass

    def bcast(self, obj, root: int = 0):
        return obj

    # the collectives of one process: copies at most
    def Allgather(self, send, recv):  # noqa: N802
        recv[...] = send.reshape(recv.shape)

    def Reduce_scatter_block(self, send, recv, op=None):  # noqa: N802
        recv[...] = send.reshape(recv.shape)

    def Allreduce(self, send, recv, op=None):  # noqa: N802
        pass  # in place (the only form dl uses)

    def Bcast(self, buf, root: int = 0):  # noqa: N802
        pass

    def Barrier(self):  # noqa: N802
        pass

    def _now(self, fn):
        def start(*args):
            fn(*args)
            return self._Done()
        return start

    @property
    def Iallgather(self):  # noqa: N802
        return self._now(self.Allgather)

    @property
    def Ireduce_scatter_block(self):  # noqa: N802
        return self._now(self.Reduce_scatter_block)

    @property
    def Iallreduce(self):  # noqa: N802
        return self._now(self.Allreduce)

    @property
    def Ibcast(self):  # noqa: N802
        return self._now(self.Bcast)

    @property
    def Ibarrier(self):  # noqa: N802
        return self._now(self.Barrier)

    def Abort(self, code: int = 1) -> None:  # noqa: N802
        os._exit(code)


def _seconds(timeout) -> float:
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def init_process_group(backend: str | None = None, init_method: str | None = None,
                       timeout=None, world_size: int = -1, rank: int = -1, store=None,
                       group_name: str = "", pg_options=None, device_id=None) -> None:
    """Join the world of `mpirun`'s processes (torch's signature; `init_method` and `store`
    are not needed: MPI knows the ranks). backend: "mpi" (default; "gloo" means the same) or
    "nccl" (CUDA tensors through NCCL). timeout: seconds or a timedelta, for every wait."""
    global _group
    if _group is not None:
        raise RuntimeError("trying to initialize the default process group twice")
    backend = (backend or Backend.MPI).lower()
    if backend not in (Backend.MPI, Backend.NCCL, Backend.GLOO):
        raise ValueError(f"unknown backend {backend!r}: 'mpi' or 'nccl'")
    if backend == Backend.NCCL and _launched_size() <= 1 and not is_available():
        world = _SelfComm()  # one GPU, no MPI installed: a world of one needs no broadcast
    else:
        world = _mpi().COMM_WORLD
    if world_size not in (-1, None) and int(world_size) != world.Get_size():
        raise ValueError(f"world_size={world_size}, but mpirun started {world.Get_size()} "
                         f"processes")
    if rank not in (-1, None) and int(rank) != world.Get_rank():
        raise ValueError(f"rank={rank}, but MPI says this process is rank "
                         f"{world.Get_rank()}")
    pg = ProcessGroup(Backend.MPI if backend == Backend.GLOO else backend, world.Dup(),
                      _seconds(timeout))
    if backend == Backend.NCCL:
        pg.nccl = nccl_backend.communicator(pg, device_id)
    _group = pg


def destroy_process_group(group=None) -> None:
    """Leave the world (the communicators are freed; init_process_group may be called again)."""
    global _group
    pg = _group
    if pg is None:
        return
    _group = None
    pg.close()
    if pg.nccl is not None:
        try:
            pg.nccl.destroy()
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass
    pg.comm.Free()


def is_available() -> bool:
    """Whether mpi4py imports (MPI collectives can run)."""
    try:
        _mpi()
    except RuntimeError:
        return False
    return True


def is_mpi_available() -> bool:
    """Whether the MPI backend can run (mpi4py imports)."""
    return is_available()


def is_nccl_available() -> bool:
    """Whether CuPy's NCCL bindings import (a GPU is not checked)."""
    try:
        nccl_backend.nccl()
    except RuntimeError:
        return False
    return True


def is_initialized() -> bool:
    """Whether init_process_group has run (and destroy_process_group has not)."""
    return _group is not None


def current() -> ProcessGroup:
    """The initialised world (a clear error before init_process_group)."""
    if _group is None:
        raise RuntimeError("Default process group has not been initialized, please make sure "
                           "to call dl.distributed.init_process_group() first")
    return _group


def get_rank(group=None) -> int:
    """This process's rank, 0 .. world_size - 1."""
    return current().rank


def get_world_size(group=None) -> int:
    """The number of processes (ranks)."""
    return current().size


def get_backend(group=None) -> str:
    """"mpi" or "nccl"."""
    return current().backend


def set_debug(on: bool) -> None:
    """Checked mode on or off (see the module): signatures compared before each collective."""
    global _debug
    _debug = bool(on)


def debug() -> bool:
    """Whether checked mode is on."""
    return _debug

"""NCCL collectives on CUDA tensors (CuPy's `cupy.cuda.nccl`), for the "nccl" backend.

The communicator is made from NCCL's unique id, which rank 0 draws and MPI broadcasts. The
collectives run on the dl cuda runtime's stream, in order with its kernels, on the tensors'
device pointers (no host staging); a collective's request is a CUDA event recorded after it,
which the process group polls against its timeout (on a timeout the NCCL communicator is
aborted, then the job). One GPU per rank: the rank's GPU is `device_id` or its local rank
(Open MPI's OMPI_COMM_WORLD_LOCAL_RANK) modulo the visible GPUs, chosen through
CUDA_VISIBLE_DEVICES before CuPy starts (when the cuda runtime has started already, it keeps
its GPU)."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys

from .. import devices
from ..ops.shape import assign, contiguous
from ..tensor import Tensor

# NCCL's enums (nccl.h, 2.10+), for CuPy builds that lack a name
_DT = {"float16": 6, "float32": 7, "float64": 8, "bfloat16": 9, "int32": 2, "int64": 4,
       "uint8": 1, "int8": 0, "uint32": 3, "uint64": 5}
_OP = {"sum": 0, "product": 1, "max": 2, "min": 3, "avg": 4}


def _pick_gpu(device_id) -> None:
    if "cupy" in sys.modules:
        return  # CuPy is up: its current device stays
    local = device_id if device_id is not None else os.environ.get(
        "OMPI_COMM_WORLD_LOCAL_RANK", os.environ.get("LOCAL_RANK"))
    if local is None or "CUDA_VISIBLE_DEVICES" in os.environ:
        return
    try:
        n = len(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                               timeout=30).stdout.strip().splitlines())
    except (OSError, subprocess.SubprocessError):
        return
    if n > 1:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(int(getattr(local, "index", local)) % n)


def communicator(pg, device_id=None):
    """The NCCL communicator of the world (rank 0's unique id broadcast through MPI)."""
    _pick_gpu(device_id)
    lib = nccl()
    uid = lib.get_unique_id() if pg.rank == 0 else None
    uid = pg.comm.bcast(uid, root=0)
    _ = devices.get("cuda").rt  # start the runtime (its stream) on this rank's GPU
    return lib.NcclCommunicator(pg.size, uid, pg.rank)


def nccl():
    """CuPy's NCCL bindings, imported on first use (CuPy is an optional dependency)."""
    try:
        return importlib.import_module("cupy.cuda.nccl")
    except Exception as e:  # noqa: BLE001 - any failure: no NCCL here
        raise RuntimeError(f"the nccl backend needs CuPy with NCCL on a GPU ({e}): pip "
                           f"install 'cube-lang[cuda]'") from None


class _EventRequest:
    """A CUDA event after the collective, with MPI's request interface (Test)."""

    def __init__(self, stream):
        cp = importlib.import_module("cupy")
        self.event = cp.cuda.Event(block=False, disable_timing=True)
        self.event.record(stream)

    def Test(self) -> bool:  # noqa: N802 - MPI's name
        return self.event.done


def _ptr(t: Tensor) -> int:
    return t._buf.data.data.ptr + t.offset * t.dtype.itemsize


def _contig(t: Tensor) -> tuple[Tensor, bool]:
    t._materialise()
    if t.is_contiguous():
        return t, False
    return contiguous(t)._materialise(), True


def _dt(t: Tensor) -> int:
    name = t.dtype.name
    return getattr(nccl(), "NCCL_" + name.upper(), _DT[name])


def _stream(t: Tensor):
    return t.device.rt.stream


def _done(t: Tensor, work: Tensor, copied: bool, finish=None):
    """(request, finish) for the collective just enqueued: a copy back for a staged view."""
    def fin():
        if copied:
            assign(t, work)
        if finish is not None:
            finish()
    return _EventRequest(_stream(t)), fin


def all_reduce(pg, t: Tensor, op: str):
    w, copied = _contig(t)
    s = _stream(t)
    pg.nccl.allReduce(_ptr(w), _ptr(w), w.numel(), _dt(w), _OP[op], s.ptr)
    return _done(t, w, copied)


def broadcast(pg, t: Tensor, src: int):
    w, copied = _contig(t)
    s = _stream(t)
    pg.nccl.broadcast(_ptr(w), _ptr(w), w.numel(), _dt(w), src, s.ptr)
    return _done(t, w, copied and pg.rank != src)


def all_gather(pg, out: Tensor, inp: Tensor):
    w, copied = _contig(out)
    i, _ = _contig(inp)
    s = _stream(out)
    pg.nccl.allGather(_ptr(i), _ptr(w), i.numel(), _dt(i), s.ptr)
    return _done(out, w, copied)


def all_gather_list(pg, outs: list, inp: Tensor):
    i, _ = _contig(inp)
    w = Tensor._empty((pg.size,) + tuple(inp.shape), inp.dtype, inp.device)
    s = _stream(inp)
    pg.nccl.allGather(_ptr(i), _ptr(w), i.numel(), _dt(i), s.ptr)

    def scatter():
        for r, o in enumerate(outs):
            assign(o, w[r])
    return _EventRequest(s), scatter


def reduce_scatter(pg, out: Tensor, inp: Tensor, op: str):
    w, copied = _contig(out)
    i, _ = _contig(inp)
    s = _stream(out)
    pg.nccl.reduceScatter(_ptr(i), _ptr(w), w.numel(), _dt(w), _OP[op], s.ptr)
    return _done(out, w, copied)

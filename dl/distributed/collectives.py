"""Collectives on dl tensors, with torch.distributed's names and signatures.

A collective with `async_op=True` starts a non-blocking MPI request (Iallreduce, Ibcast, ...)
and returns a `Work` whose `.wait()` polls it against the process group's timeout; without,
it makes the blocking call (MPI's tuned algorithms: Open MPI's non-blocking all-reduce of
two ranks reduces to one rank and broadcasts back, twice the traffic of a ring), watched by
the group's watchdog thread against the same timeout (dl/distributed/process_group.py).
CUDA tensors under the "nccl" backend go through NCCL instead (dl/distributed/nccl_backend.py).

Memory: a contiguous tensor on a host device (cpu, interp) is handed to MPI as a NumPy view of
its own buffer, without a copy, and the result lands in place; one in an OpenCL buffer of a
CPU device (PoCL) is mapped (no copy) for the collective's duration. Tensors on other devices
(wgpu, cuda under "mpi", OpenCL on a GPU) and non-contiguous views are staged through a host
copy and written back. MPI has no 16-bit float types: float16 and bfloat16 *reductions* run
in float32 (the values widened, reduced, and rounded once to the tensor's dtype, so a sum is
at least as accurate as a 16-bit ring's), while the moves (broadcast, all_gather) send the
16-bit storage as it is.

Inside a `dl.capture` recording each collective registers itself as a replay hook
(`cube.recording.hook`), so a replay communicates again, on the same buffers, in its place
among the launches; an async collective's `wait()` is a hook too."""
from __future__ import annotations

import importlib

import numpy as np

from cube import recording

from .. import dtypes
from ..fusion.writes import before_write
from ..io import host
from ..ops.index import stack
from ..ops.shape import assign
from ..tensor import Tensor
from . import nccl_backend
from . import process_group as _pg


class ReduceOp:
    """Reduction operations, as torch.distributed.ReduceOp."""
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"


_OPS = ("sum", "avg", "product", "min", "max")
_OP_CODES = {name: i for i, name in enumerate(_OPS)}
_WIDE = (dtypes.float16, dtypes.bfloat16)


def _mpi_op(op):
    MPI = _pg._mpi()
    op = _op_name(op)
    return {"sum": MPI.SUM, "avg": MPI.SUM, "product": MPI.PROD, "min": MPI.MIN,
            "max": MPI.MAX}[op]


def _op_name(op) -> str:
    name = str(getattr(op, "value", op)).lower().split(".")[-1]
    if name not in _OPS:
        raise ValueError(f"unknown ReduceOp {op!r}: one of {', '.join(_OPS)}")
    return name


class Work:
    """What an `async_op=True` collective returns: `wait()` blocks until it is done (and its
    result is in the tensors), `is_completed()` asks without blocking."""

    def __init__(self, pg, what: str):
        self._pg, self.what = pg, what
        self._req = None
        self._finish = None
        self._done = True

    def _wait_now(self, timeout=None) -> None:
        if self._done:
            return
        if self._req is not None:  # None: a blocking call, already done
            self._pg.wait(self._req, self.what, timeout)
        self._complete()

    def _complete(self) -> None:
        self._done = True
        if self._finish is not None:
            self._finish()
        self._req = self._finish = None

    def wait(self, timeout=None) -> bool:
        """Block until done (polling against `timeout` seconds, or the group's timeout)."""
        recording.hook(lambda: self._wait_now(None if timeout is None
                                              else _pg._seconds(timeout)))
        return True

    def is_completed(self) -> bool:
        if not self._done and (self._req is None or self._req.Test()):
            self._complete()
        return self._done

    def poll(self) -> None:
        """Drive progress (MPI moves a non-blocking collective's data inside MPI calls); the
        result is taken in by `wait` (in a capture, the replay's wait hook)."""
        if not self._done and self._req is not None:
            self._req.Test()


# ---- host arrays of tensors -------------------------------------------------------------

def _read(t: Tensor, reduce: bool) -> tuple[np.ndarray, bool]:
    """A contiguous host array MPI can use for t's values, and whether it *is* t's memory.
    reduce: float16/bfloat16 come back widened to float32 (else: their 16-bit storage)."""
    wide = reduce and t.dtype in _WIDE
    if t.device.is_host:
        raw = t._buf.share(t.offset, t.shape, t._strides) if t.numel() else \
            np.zeros(t.shape, t.dtype.storage_np)
        if not wide:
            if raw.flags.c_contiguous and t.numel():
                return _bits(raw), True
            return _bits(np.ascontiguousarray(raw)), False
        return np.ascontiguousarray(host.from_storage(raw, t.dtype), np.float32), False
    if not wide and _maps is not None and t.is_contiguous() and t.numel():
        mapped = _map_opencl(t)
        if mapped is not None:
            return _bits(mapped), True
    vals = t.numpy()  # a host copy (bfloat16 widened to float32)
    if wide:
        return np.ascontiguousarray(vals, np.float32), False
    return _bits(np.ascontiguousarray(host.to_storage(vals, t.dtype))), False


# the mapped OpenCL regions of the collective being started (released when it completes)
_maps: list | None = None


def _map_opencl(t: Tensor) -> np.ndarray | None:
    """t's memory as a NumPy array, when t lives in an OpenCL buffer of a CPU device (PoCL):
    the buffer is mapped (no copy there) until the collective completes; None elsewhere."""
    rt = t.device.rt
    mem = getattr(t._buf, "mem", None)
    if t.device.name != "opencl" or mem is None:
        return None
    try:
        cl = importlib.import_module("pyopencl")
        if not rt.device.type & cl.device_type.CPU:
            return None
        item = t.dtype.itemsize
        arr, _ = cl.enqueue_map_buffer(rt.queue, mem, cl.map_flags.READ | cl.map_flags.WRITE,
                                       t.offset * item, (t.numel(),), t.dtype.storage_np,
                                       is_blocking=True)
    except Exception:  # noqa: BLE001 - no mapping: the caller stages a copy instead
        return None
    _maps.append(arr.base)
    return arr.reshape(t.shape)


def _bits(arr: np.ndarray) -> np.ndarray:
    """float16 moves as its bits (MPI has no half type; NumPy's 'e' maps to none)."""
    return arr.view(np.uint16) if arr.dtype == np.float16 else arr


def _write(t: Tensor, arr: np.ndarray) -> None:
    """Write arr (t's storage dtype, or float32 for a 16-bit float t) into t's memory."""
    arr = arr.reshape(t.shape)
    if t.dtype is dtypes.float16 and arr.dtype == np.uint16:
        arr = arr.view(np.float16)
    if t.numel() == 0:
        return
    if t.device.is_host:
        view = t._buf.share(t.offset, t.shape, t._strides)
        view[...] = host.to_storage(arr, t.dtype) if arr.dtype != view.dtype else arr
        return
    assign(t, Tensor._from_numpy(arr, t.dtype, t.device))


def _check_tensor(t, what: str, written: bool = False) -> None:
    """t is a tensor, materialised; written: the collective overwrites it (lazy values and
    gradients that read it keep its old values: dl/fusion/writes.py)."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: expected a dl.Tensor, got {type(t).__name__}")
    t._materialise()
    if written:
        before_write(t)


def _nccl(pg, *ts) -> bool:
    return pg.nccl is not None and all(t.device.name == "cuda" for t in ts)


# ---- checked mode: the same collective on every rank ------------------------------------

_DTYPES = sorted({v.name for v in vars(dtypes).values() if isinstance(v, dtypes.DType)})
_SIG = 12  # collective, op, dtype, extra, ndim, 7 dims


def _signature(what: str, op, t: Tensor | None, extra: int) -> np.ndarray:
    sig = np.full(_SIG, -1, np.int64)
    sig[0] = _COLLECTIVES.index(what)
    sig[1] = _OP_CODES[op] if op else -1
    if t is not None:
        sig[2] = _DTYPES.index(t.dtype.name)
        sig[4] = len(t.shape)
        dims = list(t.shape)[:_SIG - 5]
        sig[5:5 + len(dims)] = dims
    sig[3] = extra
    return sig


def _describe(sig: np.ndarray) -> str:
    what = _COLLECTIVES[sig[0]]
    if sig[2] < 0:
        return what
    dt = dtypes.get(_DTYPES[sig[2]])
    shape = tuple(int(d) for d in sig[5:5 + min(int(sig[4]), _SIG - 5)])
    op = f" {_OPS[sig[1]]}" if sig[1] >= 0 else ""
    extra = f" (src/dst {sig[3]})" if sig[3] >= 0 else ""
    return f"{what}{op} of {dt.name}{list(shape)}{extra}"


def _check_signatures(pg, what: str, op, t: Tensor | None, extra: int = -1) -> None:
    mine = _signature(what, op, t, extra)
    every = np.empty((pg.size, _SIG), np.int64)
    pg.call(True, f"the signature check of {what}", pg.comm.Iallgather, pg.comm.Allgather,
            mine, every)
    if not (every == mine).all():
        lines = "; ".join(f"rank {r}: {_describe(s)}" for r, s in enumerate(every))
        raise RuntimeError(f"dl.distributed: the ranks called different collectives or "
                           f"passed tensors of different shapes or dtypes: {lines}")


_COLLECTIVES = ["all_reduce", "broadcast", "all_gather", "all_gather_into_tensor",
                "reduce_scatter", "reduce_scatter_tensor", "barrier"]


# ---- launching ---------------------------------------------------------------------------

def _launch(pg, what: str, start, async_op: bool, check=None):
    """Run start() (-> (request, finish)) now and, inside a recording, at every replay."""
    work = Work(pg, what)

    def begin():
        global _maps
        if _pg._debug and check is not None:
            _check_signatures(pg, what, *check)
        _maps = maps = []
        try:
            req, finish = start(not async_op)
        finally:
            _maps = None
        if maps:  # OpenCL buffers mapped for MPI: unmapped once the collective is done
            def finish(inner=finish):
                if inner is not None:
                    inner()
                for m in maps:
                    m.release()
        work._req, work._finish = req, finish
        work._done = False
    recording.hook(begin)
    if async_op:
        return work
    work.wait()
    return None


def _scale_avg(arr: np.ndarray, size: int) -> None:
    arr /= size


_CHUNK = 8 << 20  # bytes: a larger all-reduce runs in pieces (Open MPI's 64 MB one was slow)


def _allreduce(comm):
    """In-place blocking all-reduce, in pieces of at most _CHUNK bytes."""
    def run(arr, op):
        inplace = _pg._mpi().IN_PLACE
        flat = arr.reshape(-1)
        step = max(1, _CHUNK // max(flat.itemsize, 1))
        for i in range(0, max(flat.size, 1), step):
            comm.Allreduce(inplace, flat[i:i + step], op)
    return run


def _iallreduce(comm):
    return lambda arr, op: comm.Iallreduce(_pg._mpi().IN_PLACE, arr, op)


def all_reduce(tensor: Tensor, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce `tensor` over every rank, in place (every rank gets the result)."""
    pg = _pg.current()
    _check_tensor(tensor, "all_reduce", written=True)
    opname = _op_name(op)
    _check_avg(opname, tensor)
    if _nccl(pg, tensor):
        return _launch(pg, "all_reduce",
                       lambda blocking: nccl_backend.all_reduce(pg, tensor, opname), async_op,
                       (opname, tensor))
    mop = _mpi_op(opname)

    def start(blocking):
        arr, shared = _read(tensor, reduce=True)
        req = pg.call(blocking, "all_reduce", _iallreduce(pg.comm), _allreduce(pg.comm),
                      arr, mop)

        def finish():
            if opname == "avg":
                _scale_avg(arr, pg.size)
            if not shared:
                _write(tensor, arr)
        return req, finish
    return _launch(pg, "all_reduce", start, async_op, (opname, tensor))


def broadcast(tensor: Tensor, src: int = 0, group=None, async_op: bool = False):
    """Copy rank `src`'s `tensor` into every other rank's `tensor`, in place."""
    pg = _pg.current()
    _check_tensor(tensor, "broadcast", written=True)
    if not 0 <= src < pg.size:
        raise ValueError(f"broadcast: src={src} is not a rank of a world of {pg.size}")
    if _nccl(pg, tensor):
        return _launch(pg, "broadcast", lambda blocking: nccl_backend.broadcast(pg, tensor, src),
                       async_op, (None, tensor, src))

    def start(blocking):
        arr, shared = _read(tensor, reduce=False)
        req = pg.call(blocking, "broadcast", pg.comm.Ibcast, pg.comm.Bcast, arr, src)
        return req, (None if shared or pg.rank == src else lambda: _write(tensor, arr))
    return _launch(pg, "broadcast", start, async_op, (None, tensor, src))


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group=None,
                           async_op: bool = False):
    """Every rank's `input_tensor`, concatenated along dim 0 in rank order, into
    `output_tensor` (world_size times as long, or shaped (world_size, *input.shape))."""
    pg = _pg.current()
    _check_tensor(output_tensor, "all_gather_into_tensor", written=True)
    _check_tensor(input_tensor, "all_gather_into_tensor")
    _same_dtype("all_gather_into_tensor", output_tensor, input_tensor)
    if output_tensor.numel() != input_tensor.numel() * pg.size:
        raise ValueError(f"all_gather_into_tensor: output has {output_tensor.numel()} "
                         f"elements, needs {input_tensor.numel()} x {pg.size}")
    if _nccl(pg, output_tensor, input_tensor):
        return _launch(pg, "all_gather_into_tensor",
                       lambda blocking: nccl_backend.all_gather(pg, output_tensor, input_tensor),
                       async_op, (None, input_tensor))

    def start(blocking):
        send, _ = _read(input_tensor, reduce=False)
        recv, shared = _read(output_tensor, reduce=False)
        req = pg.call(blocking, "all_gather", pg.comm.Iallgather, pg.comm.Allgather, send,
                      recv)
        return req, (None if shared else lambda: _write(output_tensor, recv))
    return _launch(pg, "all_gather_into_tensor", start, async_op, (None, input_tensor))


def all_gather(tensor_list: list, tensor: Tensor, group=None, async_op: bool = False):
    """Every rank's `tensor` into `tensor_list[rank]` (a list of world_size tensors of
    tensor's shape and dtype), as torch.distributed.all_gather."""
    pg = _pg.current()
    _check_tensor(tensor, "all_gather")
    if len(tensor_list) != pg.size:
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors, the world "
                         f"{pg.size} ranks")
    for t in tensor_list:
        _check_tensor(t, "all_gather", written=True)
        _same_dtype("all_gather", t, tensor)
        if t.shape != tensor.shape:
            raise ValueError(f"all_gather: an output of shape {t.shape} for an input of "
                             f"shape {tensor.shape}")
    if _nccl(pg, tensor, *tensor_list):
        return _launch(pg, "all_gather",
                       lambda blocking: nccl_backend.all_gather_list(pg, tensor_list, tensor),
                       async_op, (None, tensor))

    def start(blocking):
        send, _ = _read(tensor, reduce=False)
        recv = np.empty((pg.size,) + send.shape, send.dtype)
        req = pg.call(blocking, "all_gather", pg.comm.Iallgather, pg.comm.Allgather, send,
                      recv)

        def finish():
            for t, part in zip(tensor_list, recv):
                _write(t, part)
        return req, finish
    return _launch(pg, "all_gather", start, async_op, (None, tensor))


def reduce_scatter_tensor(output: Tensor, input: Tensor, op=ReduceOp.SUM, group=None,
                          async_op: bool = False):
    """Reduce `input` (world_size times output's elements) over the ranks; rank r keeps
    the r-th slice (along dim 0) of the result in `output`."""
    pg = _pg.current()
    _check_tensor(output, "reduce_scatter_tensor", written=True)
    _check_tensor(input, "reduce_scatter_tensor")
    _same_dtype("reduce_scatter_tensor", output, input)
    if input.numel() != output.numel() * pg.size:
        raise ValueError(f"reduce_scatter_tensor: input has {input.numel()} elements, needs "
                         f"{output.numel()} x {pg.size}")
    opname = _op_name(op)
    _check_avg(opname, input)
    if _nccl(pg, output, input):
        return _launch(pg, "reduce_scatter_tensor",
                       lambda blocking: nccl_backend.reduce_scatter(pg, output, input, opname),
                       async_op, (opname, input))
    mop = _mpi_op(opname)

    def start(blocking):
        send, _ = _read(input, reduce=True)
        recv, shared = _read(output, reduce=True)
        req = pg.call(blocking, "reduce_scatter", pg.comm.Ireduce_scatter_block,
                      pg.comm.Reduce_scatter_block, send, recv, mop)

        def finish():
            if opname == "avg":
                _scale_avg(recv, pg.size)
            if not shared:
                _write(output, recv)
        return req, finish
    return _launch(pg, "reduce_scatter_tensor", start, async_op, (opname, input))


def reduce_scatter(output: Tensor, input_list: list, op=ReduceOp.SUM, group=None,
                   async_op: bool = False):
    """Reduce `input_list[r]` over the ranks into rank r's `output` (torch's signature)."""
    pg = _pg.current()
    _check_tensor(output, "reduce_scatter", written=True)
    if len(input_list) != pg.size:
        raise ValueError(f"reduce_scatter: input_list has {len(input_list)} tensors, the "
                         f"world {pg.size} ranks")
    for t in input_list:
        _check_tensor(t, "reduce_scatter")
        _same_dtype("reduce_scatter", t, output)
        if t.shape != output.shape:
            raise ValueError(f"reduce_scatter: an input of shape {t.shape} for an output of "
                             f"shape {output.shape}")
    opname = _op_name(op)
    _check_avg(opname, output)
    if _nccl(pg, output, *input_list):
        return reduce_scatter_tensor(output, stack(input_list), op, group, async_op)
    mop = _mpi_op(opname)

    def start(blocking):
        send = np.stack([_read(t, reduce=True)[0] for t in input_list])
        recv, shared = _read(output, reduce=True)
        req = pg.call(blocking, "reduce_scatter", pg.comm.Ireduce_scatter_block,
                      pg.comm.Reduce_scatter_block, send, recv, mop)

        def finish():
            if opname == "avg":
                _scale_avg(recv, pg.size)
            if not shared:
                _write(output, recv)
        return req, finish
    return _launch(pg, "reduce_scatter", start, async_op, (opname, output))


def barrier(group=None, async_op: bool = False, device_ids=None):
    """Wait until every rank has reached its barrier."""
    pg = _pg.current()
    return _launch(pg, "barrier", lambda blocking: (
        pg.call(blocking, "barrier", pg.comm.Ibarrier, pg.comm.Barrier), None), async_op,
        (None, None))


def _check_avg(opname: str, t: Tensor) -> None:
    if opname == "avg" and not t.dtype.is_float:
        raise ValueError(f"ReduceOp.AVG needs a floating-point tensor, got {t.dtype.name}")


def _same_dtype(what: str, a: Tensor, b: Tensor) -> None:
    if a.dtype != b.dtype:
        raise TypeError(f"{what}: tensors of dtypes {a.dtype.name} and {b.dtype.name}")

"""DLPack both ways for host tensors, zero-copy.

Export: a NumPy view with the tensor's shape, strides and offset over its buffer's memory
exports itself. Import: NumPy's `from_dlpack` gives a view of the producer's memory (e.g. a
PyTorch CPU tensor); the tensor wraps the flat extent of that view without copying, so writes
through either side are seen by the other."""
from __future__ import annotations

import numpy as np

from .. import devices as _device
from .. import dtypes

_KDL_CPU = 1


def _check_host(t):
    if not t.device.is_host:
        raise BufferError(f"DLPack export is only implemented for host tensors, this one is on "
                          f"'{t.device}': copy it with .cpu() first")


def export_view(t) -> np.ndarray:
    _check_host(t)
    if t.dtype is dtypes.bfloat16:
        raise BufferError("bfloat16 cannot be exported through NumPy's DLPack; use .float()")
    t._materialise()
    t._buf.pin()  # the view outlives our bookkeeping: its memory must never be reused
    flat = t._buf.array
    item = flat.itemsize
    if t.numel() == 0:
        return np.zeros(t.shape, flat.dtype)
    return np.lib.stride_tricks.as_strided(flat[t.offset:], t.shape,
                                           tuple(s * item for s in t._strides))


def export_device(t) -> tuple[int, int]:
    _check_host(t)
    return (_KDL_CPU, 0)


def from_dlpack(obj):
    """A tensor sharing memory with `obj` (any producer of CPU DLPack capsules)."""
    from runtimes.host import HostBuffer

    from ..tensor import Tensor
    if hasattr(obj, "__dlpack_device__") and obj.__dlpack_device__()[0] != _KDL_CPU:
        raise BufferError(f"from_dlpack: only CPU memory is supported, got device "
                          f"{obj.__dlpack_device__()}")
    arr = np.from_dlpack(obj)
    dt = dtypes.from_numpy(arr.dtype)
    if dt.storage_np != arr.dtype:
        raise TypeError(f"from_dlpack: NumPy dtype {arr.dtype} has no zero-copy tensor dtype")
    item = arr.itemsize
    if any(s < 0 or s % item for s in arr.strides):
        raise BufferError("from_dlpack: negative or unaligned strides are not supported")
    strides = tuple(s // item for s in arr.strides)
    extent = 1 + sum((n - 1) * s for n, s in zip(arr.shape, strides)) if arr.size else 0
    flat = np.lib.stride_tricks.as_strided(arr, (extent,), (item,))
    dev = _device.get("cpu")
    buf = HostBuffer(dev.rt, flat, dt.cube)
    buf._owner = obj  # keep the producer's memory alive
    return Tensor(buf, arr.shape, strides if arr.ndim else (), 0, dt, dev)

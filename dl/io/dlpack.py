"""DLPack import for host tensors, zero-copy: NumPy's `from_dlpack` gives a view of the
producer's memory (e.g. a PyTorch CPU tensor); the tensor wraps the flat extent of that view
without copying, so writes through either side are seen by the other. (Export is
`Tensor.__dlpack__`, dl/tensor.py: zero-copy as well, through the same shared NumPy view as
`Tensor.numpy()`, which holds the tensor's pooled memory out of the pool until the consumer
releases it.)"""
from __future__ import annotations

import numpy as np

from runtimes.host import HostBuffer

from .. import devices as _device
from .. import dtypes
from ..tensor import _KDL_CPU, Tensor


def from_dlpack(obj):
    """A tensor sharing memory with `obj` (any producer of CPU DLPack capsules)."""
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
    t = Tensor(buf, arr.shape, strides if arr.ndim else (), 0, dt, dev)
    t._share_out(None)  # the producer may write into it: ops on it are never deferred
    return t

"""The index bounds check of the ops that read or write at tensor-given positions (gather,
index_select, scatter, index_add, advanced indexing, class targets): PyTorch's CPU ops check
their indices, and an unchecked kernel would read or write outside the tensor."""
from __future__ import annotations

import numpy as np

from cube import recording

from ..kernels import scatter as K
from ..kernels.launch import launch_1d
from ..tensor import Tensor


def check_bounds(idx: Tensor, size: int, what: str, dim: int, wrap: bool = True) -> None:
    """IndexError for entries outside [-size, size) ([0, size) without `wrap`, as PyTorch's
    scatter/index_add/gather): one kernel and a host synchronisation reading its flag (as
    PyTorch's CPU check). Not inside a capture, which records no host reads."""
    n = idx.numel()
    if n == 0 or (recording.active is not None and recording.current() is not None):
        return
    idx._materialise()
    rt = idx.device.rt
    flag = rt.from_numpy(np.zeros(1, np.uint32))
    bad = rt.from_numpy(np.zeros(1, idx.dtype.storage_np))
    launch_1d(K.bounds_kernel, rt, n, idx=idx._karg(idx.shape or (1,), idx._strides or (1,)),
              idx_off=idx.offset, lo=-size if wrap else 0, size=size, flag=flag, bad=bad,
              n=n)
    if int(flag.numpy().reshape(-1)[0]):
        raise IndexError(f"{what}: index {int(bad.numpy().reshape(-1)[0])} is out of bounds "
                         f"for dimension {dim} with size {size}")

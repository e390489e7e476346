"""Host-memory buffers, shared by the CPU and interpreter runtimes."""
from __future__ import annotations

import numpy as np

from .buffer import Buffer, as_elem, elem_of_dtype


class HostBuffer(Buffer):
    def __init__(self, rt, array: np.ndarray, elem=None):
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        super().__init__(rt, array.shape, elem or elem_of_dtype(array.dtype))
        self.array = array.reshape(-1)  # flat; kernels index linearly
        self.ptr = self.array.__array_interface__["data"][0]

    def numpy(self) -> np.ndarray:
        return self.array.reshape(self.shape).copy()


class HostMemoryMixin:
    def from_numpy(self, arr, dtype=None) -> HostBuffer:
        elem = as_elem(dtype) if dtype is not None else None
        arr = np.array(arr, dtype=None if elem is None else elem.np, copy=True)
        return HostBuffer(self, arr, elem)

    def empty(self, shape, dtype=np.float32) -> HostBuffer:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        elem = as_elem(dtype)
        return HostBuffer(self, np.empty(shape, elem.np), elem)

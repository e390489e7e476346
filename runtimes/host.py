"""Host-memory buffers, shared by the CPU and interpreter runtimes.

Big allocations come from a per-runtime caching pool (runtimes/pool.py): a fresh NumPy array
of megabytes is fresh pages from the kernel, and their first touch (a page fault each 4 KiB)
cost a training step more than some of its matmuls. A pooled buffer and every view of it
share one `Block`, which goes back to the pool when the last of them is gone. A NumPy array
that shares the memory (`HostBuffer.share`: dl's `Tensor.numpy()` and DLPack export) holds the
`Block` too, so the memory is not reused while any such array (or a view of it, or a DLPack
consumer of it) is alive; `pin` keeps a block out of the pool for good."""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from .buffer import (
    Buffer,
    as_elem,
    as_shape,
    elem_of_dtype,
    is_contiguous,
    row_major_strides,
    storage_array,
)
from .pool import Block, Pool

POOL_MIN_BYTES = 64 << 10  # smaller arrays come from malloc's own free lists
POOL_CAP_BYTES = 512 << 20  # freed memory kept for reuse, at most
# Every host buffer starts on a cache line: malloc's big blocks sit at 16 mod 64, so each
# 64-byte (AVX-512) vector access split a line (sgemm 2048 at 308 GFLOP/s, 336 aligned)
ALIGN = 64


class HostBuffer(Buffer):
    def __init__(self, rt, array: np.ndarray, elem=None, block: Block | None = None):
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        super().__init__(rt, array.shape, elem or elem_of_dtype(array.dtype))
        self.array = array.reshape(-1)  # flat; kernels index linearly
        self.ptr = self.array.__array_interface__["data"][0]
        self._block = block

    @classmethod
    def _over(cls, rt, mem: tuple, block: Block | None, dt: np.dtype, shape: tuple, n: int,
              elem):
        """A contiguous buffer over `_host_block` memory (pooled when block is given): what
        __init__ makes of it, without re-checking what empty() knows (every dl op allocates
        its output here)."""
        self = object.__new__(cls)
        self.rt, self.shape, self.elem, self.dtype, self.size = rt, shape, elem, dt, n
        self.strides = row_major_strides(shape)
        mem, self.ptr = mem
        nbytes = n * dt.itemsize
        self.array = (mem if len(mem) == nbytes else mem[:nbytes]).view(dt)
        self._block = block
        return self

    @classmethod
    def _typed(cls, rt, mem: tuple, dt: np.dtype, shape: tuple, n: int, elem):
        """A contiguous buffer over `_slab_array` memory (already of n elements of dt)."""
        self = object.__new__(cls)
        self.rt, self.shape, self.elem, self.dtype, self.size = rt, shape, elem, dt, n
        self.strides = row_major_strides(shape)
        self.array, self.ptr = mem
        self._block = None
        return self

    def _host_flat(self) -> tuple[np.ndarray, bool]:
        return self.array, False

    def pin(self) -> None:
        """The memory is now shared outside the runtime for good: it must never return to the
        pool (`share` is the finer way: its arrays hold the block only while they live)."""
        if self._block is not None:
            self._block.pool = None

    def share(self, offset: int, shape: tuple, strides: tuple) -> np.ndarray:
        """A writable NumPy array of the elements at `offset` (in elements) with this shape and
        element strides, sharing this buffer's memory (no copy): writes through either side
        are seen by the other. The array keeps the memory alive, and a pooled block goes back
        to the pool only once this buffer, its views and every array sharing it are gone.
        The view must lie inside the allocation (not checked)."""
        flat, item = self.array, self.dtype.itemsize
        n = 1
        for d in shape:
            n *= d
        contiguous = is_contiguous(shape, strides) if shape else True
        if self._block is None:  # plain NumPy memory: the base chain keeps it alive
            if contiguous:
                return flat[offset:offset + n].reshape(shape)
            return np.lib.stride_tricks.as_strided(flat[offset:], shape,
                                                   tuple(s * item for s in strides))
        return np.asarray(_Shared(self._block, self.ptr + offset * item, shape,
                                  None if contiguous else tuple(s * item for s in strides),
                                  self.dtype.str))


class _Shared:
    """The base of an array `HostBuffer.share` makes over pooled memory: it holds the `Block`
    (so the memory stays out of the pool while the array lives) and describes the view."""

    __slots__ = ("__array_interface__", "block")

    def __init__(self, block: Block, ptr: int, shape: tuple, strides, typestr: str):
        self.block = block
        self.__array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                    "strides": strides, "version": 3}


_pool_lock = threading.Lock()


def _host_block(nbytes: int) -> tuple:
    """Host memory for a buffer or a pool block: (bytes array, its address), the address
    a multiple of ALIGN (a view into a slightly larger array, which its base keeps alive)
    and read once (reading it costs more than the allocation)."""
    raw = np.empty(nbytes + ALIGN - 1, np.uint8)
    # its address through ctypes (0.3 us), not `__array_interface__` (a dict: 1 us)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(raw))
    off = -addr % ALIGN
    return raw[off:off + nbytes], addr + off


# Small buffers are carved from a thread's current slab: reading an array's address costs
# ~0.8 us (more than the allocation), and every eager dl op allocates its output; a slab's
# address is read once and each buffer's is the slab's plus an offset. A live buffer keeps
# its whole slab alive (NumPy's base chain), so slabs are small and so are their buffers.
SLAB_BYTES = 16 << 10
SLAB_MAX_BYTES = 2 << 10  # bigger buffers get their own block


class _Slabs(threading.local):
    def __init__(self):
        self.by_type: dict = {}  # NumPy type char -> [typed slab, its address, used, capacity]


_slabs = _Slabs()


def _slab_array(dt: np.dtype, n: int) -> tuple:
    """(array of n elements of dt, its address) at a fresh ALIGN-aligned offset of the
    thread's slab for dt (a typed slab: a slice of it is the buffer, no dtype view)."""
    by = _slabs.by_type
    s = by.get(dt.char)
    if s is None or s[2] + n > s[3]:
        mem, addr = _host_block(SLAB_BYTES)
        s = by[dt.char] = [mem.view(dt), addr, 0, SLAB_BYTES // dt.itemsize]
    used = s[2]
    step = ALIGN // dt.itemsize
    s[2] = used + -(-max(n, 1) // step) * step  # an empty buffer too: addresses stay unique
    return s[0][used:used + n], s[1] + used * dt.itemsize


class HostMemoryMixin:
    def from_numpy(self, arr, dtype=None) -> HostBuffer:
        elem = as_elem(dtype) if dtype is not None else None
        src = storage_array(arr, elem)
        buf = self.empty(src.shape, elem or elem_of_dtype(src.dtype))
        np.copyto(buf.array.reshape(src.shape), src, casting="unsafe")
        return buf

    def empty(self, shape, dtype=np.float32) -> HostBuffer:
        shape = as_shape(shape)
        elem = as_elem(dtype)
        n = 1
        for s in shape:
            n *= s
        return self.empty_exact(shape, n, elem)

    def empty_exact(self, shape: tuple, n: int, elem) -> HostBuffer:
        """empty(shape, elem) for a caller that knows its shape (a tuple of ints), element
        count and cube element type are valid (a plan's replay): no conversions, no checks."""
        dt = elem.np
        nbytes = n * dt.itemsize
        if nbytes <= SLAB_MAX_BYTES:
            return HostBuffer._typed(self, _slab_array(dt, n), dt, shape, n, elem)
        if nbytes < POOL_MIN_BYTES:
            return HostBuffer._over(self, _host_block(nbytes), None, dt, shape, n, elem)
        block = Block(self.host_pool, nbytes)
        return HostBuffer._over(self, block.mem, block, dt, shape, n, elem)

    @property
    def host_pool(self) -> Pool:
        pool = self.__dict__.get("_host_pool")
        if pool is None:
            with _pool_lock:
                pool = self.__dict__.get("_host_pool")
                if pool is None:
                    pool = Pool(_host_block, POOL_CAP_BYTES)
                    self.__dict__["_host_pool"] = pool
        return pool

"""Buffers as kernels see them: a typed, shaped allocation and line views of it."""
from __future__ import annotations

import math

import numpy as np

from cube_ir.types import Scalar, from_numpy_dtype

from .errors import LaunchError
from .scalar_bits import bf16_bits_array


def is_contiguous(shape: tuple, strides: tuple) -> bool:
    """Row-major with no gaps (dims of extent 1 may have any stride)."""
    if len(shape) == 1:
        return strides[0] == 1 or shape[0] <= 1
    acc = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if s != acc and n != 1:
            return False
        acc *= n
    return True


_ROW_MAJOR: dict = {}  # shape -> strides: every buffer asks, few shapes recur


def row_major_strides(shape: tuple) -> tuple:
    if len(shape) == 1:  # the common case: dl's flat storage
        return (1,)
    st = _ROW_MAJOR.get(shape)
    if st is not None:
        return st
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    st = tuple(reversed(out))
    if type(shape) is tuple:
        if len(_ROW_MAJOR) > 4096:
            _ROW_MAJOR.clear()
        _ROW_MAJOR[shape] = st
    return st


class Buffer:
    """A runtime allocation with an element type, a shape and element strides.

    Subclasses hold the device memory; host runtimes (cpu, interp) keep a NumPy array in
    `.array`. `numpy()` always returns a fresh host copy of what shape and strides select.

    A view (`view`) shares the allocation and its `size` (the whole allocation's elements,
    which bound a checked kernel's accesses) under another shape and strides. `contiguous`
    is True for row-major strides, False otherwise, None while not yet known (a fresh view:
    a launch works it out only where it matters, for `Array` parameters)."""

    line_size = 1
    contiguous: bool | None = True

    def __init__(self, rt, shape: tuple, elem: Scalar, strides: tuple | None = None):
        self.rt = rt
        self.shape = shape = tuple(map(int, shape))
        self.elem = elem
        self.dtype = elem.np
        self.size = math.prod(shape)
        if strides is None:
            self.strides = row_major_strides(shape)
        else:
            self.strides = tuple(map(int, strides))
            self.contiguous = is_contiguous(shape, self.strides)

    @property
    def buffer(self) -> Buffer:
        return self

    def view(self, shape: tuple, strides: tuple) -> Buffer:
        """The same memory (and owner) under another shape and strides; a plain attribute
        copy, which copy.copy's reduce protocol made a hot spot of small launches."""
        if len(shape) != len(strides):
            raise LaunchError(f"a view's shape {shape} and strides {strides} differ in rank")
        v = object.__new__(type(self))
        v.__dict__.update(self.__dict__)
        v.shape, v.strides, v.contiguous = shape, strides, None
        return v

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def lines(self, n: int) -> LineView:
        return LineView(self, n)

    def numpy(self) -> np.ndarray:
        """A host copy of the elements shape and strides select."""
        flat, fresh = self._host_flat()
        return strided_copy(flat, self.shape, self.strides, fresh)

    def _host_flat(self) -> tuple[np.ndarray, bool]:  # pragma: no cover - per runtime
        """The whole allocation (`size` elements) on the host, and whether that array is a
        fresh writable copy (else numpy() copies it)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.elem} {self.shape} on {self.rt.name}>"


class LineView:
    """`buf.lines(n)`: the same memory seen as lines of n elements (n divides the last dim)."""

    def __init__(self, buf: Buffer, n: int):
        n = int(n)
        if n < 1:
            raise LaunchError(f"line size must be >= 1, got {n}")
        last = buf.shape[-1] if buf.shape else 1
        if last % n:
            raise LaunchError(
                f"line size {n} does not divide the buffer's last dimension {last} "
                f"(shape {buf.shape})")
        if n > 1 and buf.shape and buf.strides[-1] != 1 and last > 1:
            raise LaunchError(f"a line view of {n} elements needs a contiguous last "
                              f"dimension (strides {buf.strides})")
        self.buffer = buf
        self.line_size = n
        self.rt = buf.rt
        self.elem = buf.elem
        self.shape = buf.shape
        self.strides = buf.strides
        self.size = buf.size
        self.contiguous = buf.contiguous

    def numpy(self) -> np.ndarray:
        return self.buffer.numpy()

    def lines(self, n: int) -> LineView:
        return LineView(self.buffer, n)

    def __repr__(self) -> str:
        return f"{self.buffer!r}.lines({self.line_size})"


def contiguous(a) -> bool:
    """Whether buffer or line view `a` is row-major (remembered on it: views come fresh)."""
    c = a.contiguous
    if c is None:
        c = a.contiguous = is_contiguous(a.shape, a.strides)
    return c


def strided_copy(flat: np.ndarray, shape: tuple, strides: tuple, fresh: bool) -> np.ndarray:
    """The elements of flat (a whole allocation) that shape and element strides select, as
    a new array; a view reaching outside the allocation is an error, not garbage."""
    n = math.prod(shape)
    if n == 0:
        return np.empty(shape, flat.dtype)
    if n == flat.size and is_contiguous(shape, strides):
        out = flat.reshape(shape)
        return out if fresh and out.flags.writeable else out.copy()
    lo = sum((d - 1) * s for d, s in zip(shape, strides) if s < 0)
    hi = sum((d - 1) * s for d, s in zip(shape, strides) if s > 0)
    if lo < 0 or hi >= flat.size:
        raise LaunchError(f"a view of shape {shape} and strides {strides} reaches element "
                          f"{hi if hi >= flat.size else lo} of an allocation of {flat.size}")
    item = flat.itemsize
    return np.lib.stride_tricks.as_strided(
        flat, shape, tuple(s * item for s in strides), writeable=False).copy()


def as_shape(shape) -> tuple:
    """A buffer shape from an int or a sequence of ints (NumPy ints too), none negative."""
    if type(shape) is tuple:
        for s in shape:
            if type(s) is not int or s < 0:
                break
        else:
            return shape
    elif type(shape) is int and shape >= 0:
        return (shape,)
    items = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        items = tuple(items)
    except TypeError:
        raise LaunchError(f"a shape is an int or a tuple of ints, got {shape!r:.60}") from None
    for s in items:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)):
            raise LaunchError(f"a shape holds ints, got {s!r:.40} ({type(s).__name__}) in "
                              f"{shape!r:.60}")
        if s < 0:
            raise LaunchError(f"a shape's extents must not be negative, got {shape!r:.60}")
    return tuple(map(int, items))


def storage_array(arr, elem: Scalar | None) -> np.ndarray:
    """arr as the host array a runtime copies in: of elem's storage dtype when given (bf16:
    uint16 data is taken as the raw bits, other numbers are rounded to nearest even; a plain
    NumPy cast to uint16 would turn 1.5 into the bits 1)."""
    if hasattr(arr, "buffer") and hasattr(arr, "elem"):
        raise LaunchError(f"from_numpy takes host data (a NumPy array or numbers), got the "
                          f"runtime buffer {arr!r}: read it with .numpy() first")
    if elem is None or elem.name != "bf16":
        try:
            a = np.asarray(arr, dtype=None if elem is None else elem.np)
        except (TypeError, ValueError) as e:
            raise LaunchError(f"cannot make a {elem or 'buffer'} from {type(arr).__name__}: "
                              f"{e}") from None
        if a.dtype.hasobject:
            raise LaunchError(f"from_numpy takes numbers, got {type(arr).__name__} "
                              f"{arr!r:.40} (NumPy makes an object array of it)")
        return a
    a = np.asarray(arr)
    if a.dtype == np.uint16:
        return a
    if a.dtype.kind not in "biuf":
        raise LaunchError(f"cannot make bf16 from {a.dtype} data")
    return bf16_bits_array(a)


def zeros(rt, shape, dtype=np.float32) -> Buffer:
    """`rt.zeros` for every runtime: any element type (bf16: zero bits are +0.0)."""
    elem = as_elem(dtype)
    return rt.from_numpy(np.zeros(as_shape(shape), elem.np), elem)


def elem_of_dtype(dtype) -> Scalar:
    try:
        return from_numpy_dtype(dtype)
    except TypeError as e:
        raise LaunchError(str(e)) from None


def as_elem(dtype) -> Scalar:
    """A cube element type from a NumPy dtype or a cube type (bf16 has no NumPy dtype)."""
    if isinstance(dtype, Scalar):
        return dtype
    return elem_of_dtype(dtype)

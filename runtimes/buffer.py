"""Buffers as kernels see them: a typed, shaped allocation and line views of it."""
from __future__ import annotations

import math

import numpy as np

from cube_ir.types import Scalar, from_numpy_dtype

from .errors import LaunchError


def row_major_strides(shape: tuple) -> tuple:
    if len(shape) == 1:  # the common case: dl's flat storage
        return (1,)
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


class Buffer:
    """A runtime allocation with an element type, a shape and element strides.

    Subclasses hold the device memory; host runtimes (cpu, interp) keep a NumPy array in
    `.array`. `numpy()` always returns a fresh host copy."""

    line_size = 1

    def __init__(self, rt, shape: tuple, elem: Scalar, strides: tuple | None = None):
        self.rt = rt
        self.shape = shape = tuple(map(int, shape))
        self.elem = elem
        self.dtype = elem.np
        self.size = math.prod(shape)
        self.strides = tuple(map(int, strides)) if strides is not None else \
            row_major_strides(shape)

    @property
    def buffer(self) -> Buffer:
        return self

    def view(self, shape: tuple, strides: tuple) -> Buffer:
        """The same memory (and owner) under another shape and strides; a plain attribute
        copy, which copy.copy's reduce protocol made a hot spot of small launches."""
        v = object.__new__(type(self))
        v.__dict__.update(self.__dict__)
        v.shape, v.strides = shape, strides
        return v

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def lines(self, n: int) -> LineView:
        return LineView(self, n)

    def numpy(self) -> np.ndarray:  # pragma: no cover - per runtime
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
        if buf.shape and buf.strides[-1] != 1 and last > 1:
            raise LaunchError("a line view needs a contiguous last dimension")
        self.buffer = buf
        self.line_size = n
        self.rt = buf.rt
        self.elem = buf.elem
        self.shape = buf.shape
        self.strides = buf.strides
        self.size = buf.size

    def numpy(self) -> np.ndarray:
        return self.buffer.numpy()

    def lines(self, n: int) -> LineView:
        return LineView(self.buffer, n)

    def __repr__(self) -> str:
        return f"{self.buffer!r}.lines({self.line_size})"


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

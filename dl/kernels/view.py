"""Strided views of a buffer: same memory, another shape and element strides (a transpose is
a permutation of both). Kernels take them as `Tensor` arguments."""
from __future__ import annotations


def strided(buf, shape, strides):
    """A view of buf's memory with the given shape and element strides. The bounds that
    checked kernels use stay those of the whole allocation."""
    shape, strides = tuple(map(int, shape)), tuple(map(int, strides))
    if len(shape) != len(strides):
        raise ValueError(f"shape {shape} and strides {strides} differ in rank")
    return buf.buffer.view(shape, strides)


def permute(buf, dims):
    b = buf.buffer
    return strided(b, [b.shape[d] for d in dims], [b.strides[d] for d in dims])


def transpose(buf, d0: int = -2, d1: int = -1):
    dims = list(range(len(buf.buffer.shape)))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return permute(buf, dims)


def is_contiguous(buf) -> bool:
    b = buf.buffer
    acc = 1
    for n, s in zip(reversed(b.shape), reversed(b.strides), strict=True):
        if n != 1 and s != acc:
            return False
        acc *= n
    return True

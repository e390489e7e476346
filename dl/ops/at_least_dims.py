"""atleast_1d / atleast_2d / atleast_3d: views with leading (and, for 3-D, trailing) size-1
dims added up to a rank, as torch's."""
from __future__ import annotations

from ..tensor import Tensor
from .common import tensor_args
from .registry import register

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d"]


def _each(tensors, fn, what: str):
    """torch's forms: one tensor gives one tensor; several, or one list or tuple, a tuple."""
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    out = tuple(fn(t) for t in tensor_args(tensors, what))
    return out[0] if single else out


def _1d(t: Tensor) -> Tensor:
    return t.reshape(1) if t.ndim == 0 else t


def _2d(t: Tensor) -> Tensor:
    return t.reshape(1, 1) if t.ndim == 0 else t.unsqueeze(0) if t.ndim == 1 else t


def _3d(t: Tensor) -> Tensor:
    if t.ndim == 0:
        return t.reshape(1, 1, 1)
    if t.ndim == 1:
        return t.reshape(1, t.shape[0], 1)
    return t.unsqueeze(-1) if t.ndim == 2 else t


@register("atleast_1d")
def atleast_1d(*tensors):
    """Each tensor with at least 1 dim (a 0-d tensor as shape (1,); others as they are), as
    torch.atleast_1d: one tensor gives a tensor, several (or a list) a tuple. Views."""
    return _each(tensors, _1d, "atleast_1d")


@register("atleast_2d")
def atleast_2d(*tensors):
    """Each tensor with at least 2 dims (leading size-1 dims added), as torch.atleast_2d;
    one tensor gives a tensor, several (or a list) a tuple. Views."""
    return _each(tensors, _2d, "atleast_2d")


@register("atleast_3d")
def atleast_3d(*tensors):
    """Each tensor with at least 3 dims, as torch.atleast_3d: (n,) becomes (1, n, 1), (m, n)
    becomes (m, n, 1); one tensor gives a tensor, several (or a list) a tuple. Views."""
    return _each(tensors, _3d, "atleast_3d")

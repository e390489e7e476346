"""Flips and quarter turns, as torch's: fliplr, flipud (`flip` of dim 1 or 0) and rot90
(flips and a transpose)."""
from __future__ import annotations

from .. import shapes
from ..tensor import Tensor
from .indexing import flip
from .registry import register
from .shape import clone, transpose

__all__ = ["fliplr", "flipud", "rot90"]


@register("fliplr", method=True)
def fliplr(input: Tensor) -> Tensor:  # noqa: A002
    """A copy of input with dim 1 reversed (left-right in a matrix), as torch.fliplr; input
    must have 2 or more dims (RuntimeError, as PyTorch's). Differentiable. Also
    `t.fliplr()`."""
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, (1,))


@register("flipud", method=True)
def flipud(input: Tensor) -> Tensor:  # noqa: A002
    """A copy of input with dim 0 reversed (up-down), as torch.flipud; input must have a
    dim (RuntimeError, as PyTorch's). Differentiable. Also `t.flipud()`."""
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, (0,))


@register("rot90", method=True)
def rot90(input: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:  # noqa: A002
    """input turned by k quarter turns in the plane of `dims`, from the first dim's
    direction towards the second's, as torch.rot90 (k < 0 turns the other way): PyTorch's
    flips and transpose (a copy; k = 0 mod 4 a clone). Two distinct dims of an input of
    2 or more dims (RuntimeError, as PyTorch's). Differentiable. Also `t.rot90(k, dims)`."""
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = (shapes.norm_dim(int(d), input.ndim) for d in dims)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} "
                           f"and dim1 = {dims[1]}")
    k = int(k) % 4
    if k == 1:
        return transpose(flip(input, (d1,)), d0, d1)
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return transpose(flip(input, (d0,)), d0, d1)
    return clone(input)

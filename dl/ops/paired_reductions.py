"""Reductions that return two results, as torch's: var_mean, std_mean (a tuple) and aminmax
(a named tuple of min and max). Each is its two reductions (dl/ops/reduce.py), with their
gradients."""
from __future__ import annotations

from .. import shapes
from ..tensor import Tensor
from .elementwise import DTypeError
from .reduce import amax, amin, mean, std, var, var_args
from .registry import register

__all__ = ["aminmax", "std_mean", "var_mean"]


def _spread(what: str, input: Tensor, dim, unbiased, correction):  # noqa: A002
    """(dim, correction) by torch's overloads (var's: `reduce.var_args`), float input only."""
    if not input.dtype.is_float:
        raise DTypeError(f"{what} only support floating point and complex dtypes (got "
                         f"{input.dtype.name})")
    return var_args(what, dim, unbiased, correction)


@register("var_mean")
def var_mean(input: Tensor, dim=None, unbiased: bool | None = None,  # noqa: A002
             keepdim: bool = False, *, correction=None):
    """(var, mean) of input over `dim` (an int, a tuple, None: all dims), as torch.var_mean:
    its overloads (`var_mean(x, dim, unbiased, keepdim)`, `var_mean(x, unbiased)`,
    `var_mean(x, dim, correction=c, keepdim=k)`); the variance divides by n - correction
    (default 1). Float tensors only (DTypeError). Differentiable in both."""
    dim, c = _spread("var_mean", input, dim, unbiased, correction)
    return var(input, dim, keepdim=keepdim, correction=c), mean(input, dim, keepdim=keepdim)


@register("std_mean")
def std_mean(input: Tensor, dim=None, unbiased: bool | None = None,  # noqa: A002
             keepdim: bool = False, *, correction=None):
    """(std, mean) of input over `dim`, as torch.std_mean (var_mean's arguments).
    Differentiable in both (std's gradient is 0 where it is 0, as PyTorch's)."""
    dim, c = _spread("std_mean", input, dim, unbiased, correction)
    return std(input, dim, keepdim=keepdim, correction=c), mean(input, dim, keepdim=keepdim)


class AminmaxResult(tuple):
    """aminmax's (min, max) pair, as torch.return_types.aminmax."""

    __slots__ = ()

    def __new__(cls, min, max):  # noqa: A002
        return super().__new__(cls, (min, max))

    min = property(lambda self: self[0])  # noqa: A003
    max = property(lambda self: self[1])  # noqa: A003

    def __repr__(self) -> str:
        return f"dl.return_types.aminmax(min={self[0]!r}, max={self[1]!r})"


@register("aminmax", method=True)
def aminmax(input: Tensor, *, dim=None, keepdim: bool = False) -> AminmaxResult:  # noqa: A002
    """(min, max) of input over `dim` (an int; None: all elements), as torch.aminmax: a
    named tuple with `.min` and `.max`, in input's dtype (nan wins). Empty reductions are
    refused as PyTorch's (IndexError over a named dim, else RuntimeError). Differentiable
    (each shared evenly between tied extremes, as PyTorch's). Also `t.aminmax(dim=...)`."""
    if dim is not None:
        d = shapes.norm_dim(int(dim), input.ndim)
        if input.ndim and input.shape[d] == 0:
            raise IndexError(f"aminmax: Expected reduction dim {dim} to have non-zero size.")
        dims = d
    elif input.numel() == 0:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the "
                           "operation has no identity.")
    else:
        dims = None
    lo, hi = amin(input, dims, keepdim=keepdim), amax(input, dims, keepdim=keepdim)
    if dim is None and keepdim:  # torch keeps every dim, with size 1
        lo, hi = lo.reshape((1,) * input.ndim), hi.reshape((1,) * input.ndim)
    return AminmaxResult(lo, hi)

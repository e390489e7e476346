"""Reductions that skip nan, as torch's: nansum, nanmean (a `where` that the reduction
computes as it reads, so no masked copy is stored)."""
from __future__ import annotations

from .. import shapes
from ..autograd import no_grad, record
from ..tensor import Tensor
from .elementwise import DTypeError, isnan, logical_not, where
from .reduce import sum as _sum
from .registry import register

__all__ = ["nanmean", "nansum"]


@register("nansum", method=True)
def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A002
    """The sum over `dim` (an int, a tuple, None or (): all dims) with nan counted as 0, as
    torch.nansum: integer and bool tensors give int64 (they hold no nan: `sum`), float ones
    keep their dtype; `dtype` is the sum's. Differentiable with PyTorch's gradient, g times
    (input is not nan): nan where g is infinite, as nanmean's over only nan. Also
    `t.nansum()`."""
    x = input
    if not x.dtype.is_float:
        return _sum(x, dim, keepdim=keepdim, dtype=dtype)
    with no_grad():
        y = _sum(where(isnan(x), 0.0, x.detach()), dim, keepdim=keepdim, dtype=dtype)
    if not x.requires_grad:
        return y
    ds = range(x.ndim) if dim is None or shapes.empty_dims(dim) else \
        dim if isinstance(dim, (tuple, list)) else (dim,)
    ds = {shapes.norm_dim(int(d), x.ndim) for d in ds}
    kept = tuple(1 if d in ds else s for d, s in enumerate(x.shape))

    def back(g):
        keep = logical_not(isnan(x)).to(x.dtype)
        return ((g.reshape(kept) * keep).to(x.dtype),)
    return record(y, "nansum", (x,), back)


@register("nanmean", method=True)
def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A002
    """The mean over `dim` of the elements that are not nan (nan where all are), as
    torch.nanmean: nansum divided by the count of non-nan elements (PyTorch's formula). Float
    tensors only (a DTypeError, as PyTorch's RuntimeError). Differentiable. Also
    `t.nanmean()`."""
    if not input.dtype.is_float:
        raise DTypeError(f"nanmean(): expected input to have floating point dtype but got "
                         f"{input.dtype.name}")
    count = _sum(logical_not(isnan(input)), dim, keepdim=keepdim)
    return nansum(input, dim, keepdim, dtype=dtype) / count



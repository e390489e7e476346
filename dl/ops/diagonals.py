"""Diagonals, as torch's: diagonal (a strided view), diag_embed (a diagonal written into
zeros: a mask from `eye` and a `where`, one fused kernel), diag (either, by rank) and trace.
einsum's repeated labels (`"ii->i"`) take their diagonals from here too."""
from __future__ import annotations

from .. import dtypes, shapes
from ..autograd import record
from ..tensor import Tensor
from .creation import eye, zeros, zeros_like
from .elementwise import DTypeError, where
from .indexing import pad
from .moving_dims import movedim
from .reduce import sum as _sum
from .registry import register
from .shape import _viewing, clone

__all__ = ["diag", "diag_embed", "diagonal", "trace"]


def _diag_dims(ndim: int, dim1: int, dim2: int) -> tuple[int, int]:
    d1, d2 = shapes.norm_dim(dim1, ndim), shapes.norm_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return d1, d2


def _length(n1: int, n2: int, offset: int) -> int:
    """The length of the offset-th diagonal of an n1 x n2 matrix (0 where it misses it)."""
    return max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))


def _embed(v: Tensor, n1: int, n2: int, offset: int, d1: int, d2: int) -> Tensor:
    """Zeros of v.shape[:-1] with an n1 x n2 matrix at dims (d1, d2) of the result (d1 its
    rows), whose offset-th diagonal holds v's last dim (of length `_length`). Composed of
    differentiable ops: the diagonal's mask (a slice of eye) selects v, broadcast along the
    rows (offset >= 0) or the columns, padded to their number."""
    length, k = v.shape[-1], abs(offset)
    rest = v.shape[:-1]
    if length == 0 or n1 == 0 or n2 == 0:
        out = zeros(*rest, n1, n2, dtype=v.dtype, device=v.device)
        out = record(out, "diag_embed", (v,), lambda g: (zeros_like(v),))  # v is empty
        return movedim(out, (-2, -1), (d1, d2))
    if offset >= 0:  # mask[a, b] = (b - a == offset) = eye(n1 + k, n2)[a + k, b]
        mask = eye(n1 + k, n2, dtype=dtypes.bool_, device=v.device)[k:]
        v = v if length == n1 else pad(v, (0, n1 - length))
        v = v.unsqueeze(-1)
    else:  # mask[a, b] = (a - b == k) = eye(n1, n2 + k)[a, b + k]
        mask = eye(n1, n2 + k, dtype=dtypes.bool_, device=v.device)[:, k:]
        v = v if length == n2 else pad(v, (0, n2 - length))
        v = v.unsqueeze(-2)
    out = where(mask, v, False if v.dtype is dtypes.bool_ else 0)
    return movedim(out, (-2, -1), (d1, d2))


@register("diagonal", method=True)
def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:  # noqa: A002
    """A view of input's diagonal over dims dim1 (rows) and dim2 (columns), as
    torch.diagonal: offset > 0 above the main diagonal, < 0 below (an empty diagonal where
    it misses the matrix). The two dims are removed and the diagonal appended as the last
    dim. Identical dims are a RuntimeError, as PyTorch's. Differentiable (the gradient is
    written on the diagonal of zeros). Also `t.diagonal(...)`."""
    x = input
    offset = int(offset)
    d1, d2 = _diag_dims(x.ndim, dim1, dim2)
    n1, n2 = x.shape[d1], x.shape[d2]
    length = _length(n1, n2, offset)
    src = x._materialise()
    st = src._strides
    start = src.offset
    if length:
        start += offset * st[d2] if offset >= 0 else -offset * st[d1]
    keep = [d for d in range(x.ndim) if d not in (d1, d2)]
    y = src._view(tuple(x.shape[d] for d in keep) + (length,),
                  tuple(st[d] for d in keep) + (st[d1] + st[d2],), start)
    _viewing(y, x, lambda b: diagonal(b, offset, d1, d2))
    return record(y, "diagonal", (x,), lambda g: (_embed(g, n1, n2, offset, d1, d2),))


_diagonal = diagonal  # (diag's argument `diagonal` hides the op's name there)


@register("diag_embed", method=True)
def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:  # noqa: A002
    """A tensor with input's last dim on the offset-th diagonal of the square matrices at
    dims dim1 (rows) and dim2 (columns) of the result (one dim more than input; dim1 and
    dim2 count in the result), zeros elsewhere, as torch.diag_embed. Lazy (one fused
    kernel); differentiable. Also `t.diag_embed(...)`."""
    x = input
    offset = int(offset)
    d1, d2 = _diag_dims(x.ndim + 1, dim1, dim2)
    n = x.shape[-1] + abs(offset)
    return _embed(x, n, n, offset, d1, d2)


@register("diag", method=True)
def diag(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """As torch.diag: a 1-D input gives the square matrix with input on its diagonal-th
    diagonal (`diag_embed`), a 2-D input gives (a copy of) its diagonal-th diagonal. Other
    ranks are a RuntimeError, as PyTorch's. Differentiable. Also `t.diag(...)`."""
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim == 2:
        return clone(_diagonal(input, diagonal))
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")


@register("trace", method=True)
def trace(input: Tensor) -> Tensor:  # noqa: A002
    """The sum of the main diagonal of a matrix, as torch.trace: integer inputs give int64
    (the sum's rule); bool inputs and other ranks are refused (DTypeError; RuntimeError),
    as PyTorch's. Differentiable. Also `t.trace()`."""
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    if input.dtype is dtypes.bool_:
        raise DTypeError('"trace" not implemented for bool tensors, as in PyTorch')
    return _sum(diagonal(input))

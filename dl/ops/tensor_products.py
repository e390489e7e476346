"""Products of tensors, as torch's: tensordot (lowered to einsum), kron (a broadcast multiply
and a reshape) and cross / linalg.cross (slices along the dim of size 3)."""
from __future__ import annotations

import string
import warnings

from .. import dtypes, shapes
from ..tensor import Tensor
from . import linalg as _linalg_module
from .elementwise import DTypeError
from .index import cat
from .indexing import narrow
from .mathops import einsum
from .registry import register
from .shape import broadcast_tensors

__all__ = ["cross", "kron", "tensordot"]


def _dims_arg(v) -> list[int]:
    if isinstance(v, Tensor):
        v = v.tolist()
    vs = v if isinstance(v, (list, tuple)) else [v]
    return [int(d) for d in vs]


@register("tensordot")
def tensordot(a: Tensor, b: Tensor, dims=2) -> Tensor:
    """The sum of products of a and b over the dims `dims` pairs up, as torch.tensordot:
    an int n pairs a's last n dims with b's first n; a pair of lists (or tuples) names them
    (negative dims count from the end); a tensor gives either. The result has a's free dims,
    then b's. The tensors must share a dtype (RuntimeError, as PyTorch's). Lowered to
    einsum (one batched matmul for floats). Differentiable."""
    if a.dtype is not b.dtype:
        raise RuntimeError(f"both inputs should have same dtype (got {a.dtype.name} and "
                           f"{b.dtype.name})")
    if isinstance(dims, Tensor) and dims.ndim == 0:
        dims = int(dims.item())
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        if len(dims) != 2:
            raise RuntimeError(f"tensordot expects dims to be an int or a pair of dim lists, "
                               f"got {dims!r}")
        da = [shapes.norm_dim(d, a.ndim) for d in _dims_arg(dims[0])]
        db = [shapes.norm_dim(d, b.ndim) for d in _dims_arg(dims[1])]
        if len(da) != len(db):
            raise RuntimeError(f"both dimension lists should have same length (got {len(da)} "
                               f"and {len(db)})")
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size "
                               f"{a.shape[i]} in dim {i} and second has size {b.shape[j]} in "
                               f"dim {j}")
    if a.ndim + b.ndim - len(da) > len(string.ascii_letters):
        raise RuntimeError("tensordot: too many dims")
    letters = iter(string.ascii_letters)
    la = [next(letters) for _ in range(a.ndim)]
    lb = [next(letters) for _ in range(b.ndim)]
    for i, j in zip(da, db):
        lb[j] = la[i]
    out = [la[i] for i in range(a.ndim) if i not in da] + \
        [lb[j] for j in range(b.ndim) if j not in db]
    return einsum(f"{''.join(la)},{''.join(lb)}->{''.join(out)}", a, b)


@register("kron", method=True)
def kron(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """The Kronecker product, as torch.kron: the rank of the larger operand (the other
    padded with leading size-1 dims), each dim the product of the two sizes, block (i, j)
    holding input[i] * other. The promoted dtype. A broadcast multiply (lazy) and a reshape.
    Differentiable. Also `t.kron(other)`."""
    n = max(input.ndim, other.ndim)
    sa = (1,) * (n - input.ndim) + tuple(input.shape)
    sb = (1,) * (n - other.ndim) + tuple(other.shape)
    a = input.reshape([s for d in sa for s in (d, 1)])
    b = other.reshape([s for d in sb for s in (1, d)])
    return (a * b).reshape([x * y for x, y in zip(sa, sb)])


def linalg_cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:  # noqa: A002
    """The cross product of 3-vectors along `dim` (default the last), as
    torch.linalg.cross: input and other have the same rank and broadcast, share a dtype
    (not bool) and have size 3 along dim (else a RuntimeError, as PyTorch's). Slices and one
    fused kernel per component. Differentiable. Also `dl.linalg.cross`."""
    if input.dtype is not other.dtype:
        raise RuntimeError(f"linalg.cross: expected both inputs to have the same dtype, got "
                           f"{input.dtype.name} and {other.dtype.name}")
    if input.dtype is dtypes.bool_:
        raise DTypeError('"cross" not implemented for bool tensors, as in PyTorch')
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    d = shapes.norm_dim(dim, input.ndim)
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{input.shape[d]} and {other.shape[d]}")
    a, b = broadcast_tensors(input, other)
    a0, a1, a2 = (narrow(a, d, k, 1) for k in range(3))
    b0, b1, b2 = (narrow(b, d, k, 1) for k in range(3))
    return cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


@register("cross", method=True)
def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:  # noqa: A002
    """The cross product of 3-vectors along `dim`, as torch.cross: `linalg_cross` there;
    without a dim, input's first dim of size 3, with PyTorch's deprecation warning
    (linalg.cross's default is the last dim). Differentiable. Also `t.cross(other)`."""
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated. Please "
                      "either pass the dim explicitly or simply use torch.linalg.cross.",
                      UserWarning, stacklevel=2)
        dim = next((k for k, s in enumerate(input.shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return linalg_cross(input, other, dim=dim)


# `dl.linalg.cross` (dl.linalg is dl/ops/linalg.py, whose names dl exports)
_linalg_module.cross = linalg_cross

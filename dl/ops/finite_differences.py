"""torch.diff: the n-th forward difference along a dim, composed of slices and a subtract
(an xor for bools)."""
from __future__ import annotations

from .. import dtypes, shapes
from ..tensor import Tensor
from .index import cat
from .indexing import narrow
from .registry import register

__all__ = ["diff"]


def _joined(x: Tensor, d: int, other, what: str) -> Tensor:
    if not isinstance(other, Tensor):
        raise TypeError(f"diff(): argument '{what}' must be a tensor, not "
                        f"{type(other).__name__}")
    if other.ndim != x.ndim:
        raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    for k in range(x.ndim):
        if k != d and other.shape[k] != x.shape[k]:
            raise RuntimeError(f"diff expects the shape of tensor to prepend or append to match "
                               f"that of input except along the differencing dimension; "
                               f"input.size({k}) = {x.shape[k]}, but got tensor.size({k}) = "
                               f"{other.shape[k]}")
    return other


@register("diff", method=True)
def diff(input: Tensor, n: int = 1, dim: int = -1, prepend=None, append=None) -> Tensor:  # noqa: A002
    """The n-th forward difference of input along `dim`, x[i + 1] - x[i] applied n times, as
    torch.diff: `prepend` / `append` (tensors of input's rank, its shape but along dim) are
    joined on first (the promoted dtype); bools give x[i + 1] != x[i]. n past the length
    gives an empty dim; n = 0 returns input. Differentiable. Also `t.diff()`."""
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    n = int(n)
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = shapes.norm_dim(dim, input.ndim)
    parts = [_joined(input, d, prepend, "prepend")] if prepend is not None else []
    parts.append(input)
    if append is not None:
        parts.append(_joined(input, d, append, "append"))
    x = cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        m = x.shape[d]
        if m == 0:
            break
        hi, lo = narrow(x, d, 1, m - 1), narrow(x, d, 0, m - 1)
        x = hi != lo if x.dtype is dtypes.bool_ else hi - lo
    return x

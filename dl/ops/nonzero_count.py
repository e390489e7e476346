"""torch.count_nonzero: the number of non-zero elements over dims (a sum of a compare that
the reduction computes as it reads)."""
from __future__ import annotations

from ..tensor import Tensor
from .reduce import sum as _sum
from .registry import register

__all__ = ["count_nonzero"]


@register("count_nonzero", method=True)
def count_nonzero(input: Tensor, dim=None) -> Tensor:  # noqa: A002
    """The number of non-zero elements of input over `dim` (an int, a tuple, None or ():
    all dims), int64, as torch.count_nonzero (nan counts as non-zero). Not differentiable.
    Also `t.count_nonzero()`."""
    return _sum(input != 0, dim)

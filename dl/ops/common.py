"""Helpers shared by the ops: argument checks and conversions."""
from __future__ import annotations

from .. import dtypes
from ..tensor import Tensor
from .creation import tensor


def is_tensor(x) -> bool:
    return isinstance(x, Tensor)


def as_tensor_like(x, ref: Tensor) -> Tensor:
    """A Python scalar or array-like as a tensor on ref's device."""
    if isinstance(x, Tensor):
        return x
    return tensor(x, device=ref.device)


def result_type(*xs) -> dtypes.DType:
    """Promotion over tensors and Python scalars (docs/dl.md)."""
    ts = [x.dtype for x in xs if isinstance(x, Tensor)]
    if not ts:
        raise TypeError("at least one operand must be a tensor")
    t = ts[0]
    for d in ts[1:]:
        t = dtypes.promote(t, d)
    for x in xs:
        if not isinstance(x, Tensor) and x is not None:
            t = dtypes.promote_scalar(t, x)
    return t

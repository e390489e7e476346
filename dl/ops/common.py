"""Helpers shared by the ops: argument checks and conversions."""
from __future__ import annotations

from .. import dtypes
from ..tensor import Tensor
from .creation import tensor


def is_tensor(x) -> bool:
    return isinstance(x, Tensor)


def tensor_args(args, what: str) -> list[Tensor]:
    """The tensors of torch's variadic forms, `f(a, b, ...)` or `f([a, b, ...])`; anything
    else is a TypeError naming `what`."""
    ts = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)
    for t in ts:
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}: expected tensors, got {type(t).__name__}")
    return ts


def as_tensor_like(x, ref: Tensor) -> Tensor:
    """A Python scalar or array-like as a tensor on ref's device."""
    if isinstance(x, Tensor):
        return x
    return tensor(x, device=ref.device)


def result_type(*xs) -> dtypes.DType:
    """Promotion over tensors and Python scalars (docs/dl.md): as torch's, a 0-dim tensor
    counts only where it is of a higher category than the tensors with dims (an int32
    vector plus an int64 0-dim tensor stays int32; plus a float64 one is float64)."""
    dims = zero = None
    for x in xs:
        if isinstance(x, Tensor):
            if x.shape:
                dims = x.dtype if dims is None else dtypes.promote(dims, x.dtype)
            else:
                zero = x.dtype if zero is None else dtypes.promote(zero, x.dtype)
    if dims is None:
        if zero is None:
            raise TypeError("at least one operand must be a tensor")
        t = zero
    else:
        t = zero if zero is not None and zero.category > dims.category else dims
    for x in xs:
        if not isinstance(x, Tensor) and x is not None:
            t = dtypes.promote_scalar(t, x)
    return t

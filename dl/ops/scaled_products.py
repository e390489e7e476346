"""addcmul / addcdiv, as torch's: input + value * tensor1 * tensor2 (or / tensor2), one fused
kernel, with their in-place forms (dl/ops/inplace.py's `apply`)."""
from __future__ import annotations

from ..tensor import Tensor
from . import inplace
from .common import result_type
from .registry import register

__all__ = ["addcdiv", "addcmul"]


def _value(value, input: Tensor, tensor1: Tensor, tensor2: Tensor):
    """value in the result's category: truncated to an int for integer results, as PyTorch
    casts it to the tensors' type."""
    return int(value) if not result_type(input, tensor1, tensor2).is_float else value


@register("addcmul", method=True)
def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:  # noqa: A002
    """input + value * tensor1 * tensor2, elementwise (all three broadcast), as torch.addcmul:
    the promoted dtype; for integer results value is truncated to an int. Lazy (fuses).
    Differentiable. Also `t.addcmul(t1, t2, value=v)` and in place `t.addcmul_(...)`."""
    return input + _value(value, input, tensor1, tensor2) * tensor1 * tensor2


@register("addcdiv", method=True)
def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:  # noqa: A002
    """input + value * tensor1 / tensor2, elementwise (all three broadcast), as
    torch.addcdiv: true division, the promoted float dtype. Integer tensor1 and tensor2 are
    refused (RuntimeError), as PyTorch's (its integer division was removed). Lazy (fuses).
    Differentiable. Also `t.addcdiv(t1, t2, value=v)` and in place `t.addcdiv_(...)`."""
    if not tensor1.dtype.is_float and not tensor2.dtype.is_float:
        raise RuntimeError("Integer division with addcdiv is no longer supported (as in "
                           "PyTorch): use (input + value * torch.trunc(tensor1 / tensor2)) for "
                           "the historic behaviour, or floats for a true division")
    return input + value * tensor1 / tensor2


@register("addcmul_", method=True)
def addcmul_(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:  # noqa: A002
    """`t.addcmul_(t1, t2, value=v)`: t <- addcmul(t, t1, t2, value=v), written into t's
    storage (in place, as PyTorch's); returns t. See dl/ops/inplace.py."""
    return inplace.apply(input, "addcmul", addcmul, (tensor1, tensor2), {"value": value})


@register("addcdiv_", method=True)
def addcdiv_(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:  # noqa: A002
    """`t.addcdiv_(t1, t2, value=v)`: t <- addcdiv(t, t1, t2, value=v), written into t's
    storage (in place, as PyTorch's); returns t. See dl/ops/inplace.py."""
    return inplace.apply(input, "addcdiv", addcdiv, (tensor1, tensor2), {"value": value})

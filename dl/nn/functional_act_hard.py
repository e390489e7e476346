"""Functional activations composed of existing ops, with PyTorch's signatures and gradients:
hardtanh, relu6, hardsigmoid, softsign, tanhshrink, threshold, celu, prelu.

The piecewise-linear ones pass the gradient strictly inside their linear range (zero at the
kinks), as PyTorch's backward formulas do."""
from __future__ import annotations

from .. import ops
from ..ops import elementwise as ew
from ..tensor import Tensor
from .functional_act import _act

__all__ = ["celu", "hardsigmoid", "hardtanh", "hardtanh_", "prelu", "relu6", "softsign",
           "tanhshrink", "threshold", "threshold_"]


def _clip_linear(x: Tensor, lo: float, hi: float, scale: float = 1.0,
                 shift: float = 0.0) -> Tensor:
    """x * scale + shift for lo < x < hi, else clamped to the ends' values; the gradient
    flows only strictly inside (lo, hi)."""
    lin = x * scale + shift if (scale != 1.0 or shift != 0.0) else x
    ends = ops.clamp(lin.detach(), lo * scale + shift, hi * scale + shift)
    return ops.where((x > lo) & (x < hi), lin, ends)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,  # noqa: A002
             inplace: bool = False) -> Tensor:
    """x clamped to [min_val, max_val] elementwise; the gradient is zero outside the open
    interval (min_val, max_val), as PyTorch's."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _act(input, "hardtanh", lambda t: _clip_linear(t, min_val, max_val), inplace)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:  # noqa: A002
    """hardtanh in place: `hardtanh(input, min_val, max_val, inplace=True)`."""
    return hardtanh(input, min_val, max_val, True)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """min(max(x, 0), 6) elementwise (`hardtanh(x, 0, 6)`, as PyTorch's)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """relu6(x + 3) / 6 elementwise: 0 below -3, 1 above 3, x / 6 + 1/2 between."""
    return _act(input, "hardsigmoid",
                lambda t: _clip_linear(t, -3.0, 3.0, 1.0 / 6.0, 0.5), inplace)


def softsign(input: Tensor) -> Tensor:  # noqa: A002
    """x / (1 + |x|) elementwise."""
    return input / (ew.abs(input) + 1.0)


def tanhshrink(input: Tensor) -> Tensor:  # noqa: A002
    """x - tanh(x) elementwise."""
    return input - ew.tanh(input)


def threshold(input: Tensor, threshold: float, value: float,  # noqa: A002
              inplace: bool = False) -> Tensor:
    """x where x > threshold, else value, elementwise."""
    return _act(input, "threshold", lambda t: ops.where(t > threshold, t, value), inplace)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:  # noqa: A002
    """threshold in place: `threshold(input, threshold, value, inplace=True)`."""
    return _act(input, "threshold", lambda t: ops.where(t > threshold, t, value), True)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) elementwise (PyTorch's: elu with
    input_scale 1/alpha)."""
    if alpha == 0:
        raise ValueError("ZeroDivisionError in-place CELU (alpha == 0)")
    return _act(input, "celu", lambda t: ew.elu(t, alpha, 1.0, 1.0 / alpha), inplace)


def prelu(input: Tensor, weight: Tensor) -> Tensor:  # noqa: A002
    """x where x > 0, else weight * x, elementwise; weight has 1 element or one per channel
    (dim 1 of the input; a 1-D input takes a 1-element weight), as PyTorch's.
    Differentiable in both."""
    n = weight.numel()
    if weight.ndim > 1:
        raise RuntimeError("prelu: weight must be a scalar or a 1-D tensor")
    if n == 1:
        w = weight.reshape(())
    else:
        if input.ndim < 2 or input.shape[1] != n:
            raise RuntimeError(f"prelu: the weight has {n} elements, the input of shape "
                               f"{input.shape} has not as many channels (dim 1)")
        w = weight.reshape((n,) + (1,) * (input.ndim - 2))
    return ops.where(input > 0, input, w * input)

"""Functional activations beyond the core: softplus, mish, hardswish, leaky_relu, elu, selu, glu,
logsigmoid (PyTorch's signatures; the elementwise ones are fused ops of dl/ops/elementwise.py).

`inplace=True` writes the result into the input's storage and returns the input, where the
input takes no gradient; on a tensor that requires grad (while grad mode is on) the result is
returned out of place (PyTorch refuses in-place ops on leaves that require grad)."""
from __future__ import annotations

from ..autograd import is_grad_enabled
from ..ops import assign
from ..ops import elementwise as ew
from ..tensor import Tensor

__all__ = ["elu", "glu", "hardswish", "leaky_relu", "logsigmoid", "mish", "selu", "softplus"]


def _out(x: Tensor, y: Tensor, inplace: bool) -> Tensor:
    if not inplace or (x.requires_grad and is_grad_enabled()) or x.dtype is not y.dtype:
        return y
    return assign(x, y, internal=True)  # y is ours: one kernel, x read then written


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:  # noqa: A002
    """log(1 + exp(beta * x)) / beta elementwise; x itself where beta * x > threshold."""
    return ew.softplus_bt(input, beta, threshold)


def mish(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """x * tanh(softplus(x)) elementwise."""
    return _out(input, ew.mish(input), inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """x * relu6(x + 3) / 6 elementwise."""
    return _out(input, ew.hardswish(input), inplace)


def leaky_relu(input: Tensor, negative_slope: float = 0.01,  # noqa: A002
               inplace: bool = False) -> Tensor:
    """x where x > 0, else negative_slope * x, elementwise."""
    return _out(input, ew.leaky_relu(input, negative_slope), inplace)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """x where x > 0, else alpha * (exp(x) - 1), elementwise."""
    return _out(input, ew.elu(input, alpha), inplace)


def selu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """scale * elu(x, alpha) with PyTorch's SELU constants, elementwise."""
    return _out(input, ew.selu(input), inplace)


def logsigmoid(input: Tensor) -> Tensor:  # noqa: A002
    """log(sigmoid(x)) elementwise, stable for large |x|."""
    return ew.logsigmoid(input)


def glu(input: Tensor, dim: int = -1) -> Tensor:  # noqa: A002
    """The gated linear unit: a * sigmoid(b), a and b the two halves of x along `dim` (its
    size must be even). Views and one fused elementwise kernel; differentiable."""
    if input.ndim == 0:
        raise ValueError("glu does not support scalars because halving size must be even")
    d = dim % input.ndim if -input.ndim <= dim < input.ndim else None
    if d is None:
        raise IndexError(f"glu: dim {dim} is out of range for a tensor of shape {input.shape}")
    n = input.shape[d]
    if n % 2:
        raise ValueError(f"glu: halving dimension must be even, but dimension {d} of shape "
                         f"{input.shape} is size {n}")
    lead = (slice(None),) * d
    a, b = input[lead + (slice(0, n // 2),)], input[lead + (slice(n // 2, n),)]
    return a * ew.sigmoid(b)

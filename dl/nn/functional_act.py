"""Functional activations with PyTorch's signatures: relu, silu, softplus, mish, hardswish,
leaky_relu, elu, selu, glu, logsigmoid (the elementwise ones are fused ops of
dl/ops/elementwise.py).

`inplace=True` is PyTorch's: the result is written into the input's storage (its aliases and
views see it) and the input is returned, under autograd too (dl/ops/inplace.py: the input
takes the op's history; a leaf that requires grad is refused, as PyTorch refuses it)."""
from __future__ import annotations

from ..ops import elementwise as ew
from ..ops import inplace as _inplace
from ..tensor import Tensor

__all__ = ["elu", "glu", "hardswish", "leaky_relu", "logsigmoid", "mish", "relu", "relu_",
           "selu", "silu", "softplus"]


def _act(x: Tensor, name: str, fn, inplace: bool) -> Tensor:
    """fn(x), or with inplace x <- fn(x) in x's storage (x returned)."""
    if not inplace:
        return fn(x)
    return _inplace.apply(x, name, fn, (), {})


def relu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """max(x, 0) elementwise."""
    return _act(input, "relu", ew.relu, inplace)


def relu_(input: Tensor) -> Tensor:  # noqa: A002
    """relu in place: `relu(input, inplace=True)`."""
    return _act(input, "relu", ew.relu, True)


def silu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """x * sigmoid(x) elementwise."""
    return _act(input, "silu", ew.silu, inplace)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:  # noqa: A002
    """log(1 + exp(beta * x)) / beta elementwise; x itself where beta * x > threshold."""
    return ew.softplus_bt(input, beta, threshold)


def mish(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """x * tanh(softplus(x)) elementwise."""
    return _act(input, "mish", ew.mish, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """x * relu6(x + 3) / 6 elementwise."""
    return _act(input, "hardswish", ew.hardswish, inplace)


def leaky_relu(input: Tensor, negative_slope: float = 0.01,  # noqa: A002
               inplace: bool = False) -> Tensor:
    """x where x > 0, else negative_slope * x, elementwise."""
    return _act(input, "leaky_relu", lambda t: ew.leaky_relu(t, negative_slope), inplace)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """x where x > 0, else alpha * (exp(x) - 1), elementwise."""
    return _act(input, "elu", lambda t: ew.elu(t, alpha), inplace)


def selu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """scale * elu(x, alpha) with PyTorch's SELU constants, elementwise."""
    return _act(input, "selu", ew.selu, inplace)


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

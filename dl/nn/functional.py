"""Functional forms of the activations, dropout and losses."""
from __future__ import annotations

from .. import ops
from ..ops.elementwise import gelu, relu, sigmoid, silu, tanh
from ..tensor import Tensor

__all__ = ["dropout", "gelu", "mse_loss", "relu", "sigmoid", "silu", "tanh"]


def dropout(x: Tensor, p: float = 0.5, training: bool = True, generator=None) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1-p). The mask comes
    from the counter-based RNG inside the same fused kernel (and is recomputed, not stored,
    for the gradient)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    keep = ops.rand(*x.shape, generator=generator, dtype=x.dtype if x.dtype.is_float else None,
                    device=x.device) >= p
    return ops.where(keep, x * (1.0 / (1.0 - p)), 0.0)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:  # noqa: A002
    if input.shape != target.shape:
        raise ValueError(f"mse_loss: input shape {input.shape} and target shape "
                         f"{target.shape} differ")
    d = input - target
    sq = d * d
    if reduction == "none":
        return sq
    if reduction == "sum":
        return ops.sum(sq)
    if reduction == "mean":
        return ops.mean(sq)
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")

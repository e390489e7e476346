"""In-place random fills, as torch's: `t.normal_()`, `t.uniform_()`, `t.bernoulli_()`,
`t.exponential_()`. Each draws from the counter-based RNG (dl/ops/random.py: reproducible
under `dl.manual_seed`, not torch's numbers) and copies the draw into t's storage (one fused
kernel). Under autograd a leaf that requires grad is refused, as torch's; inside `no_grad`
(or through `.data`: `m.weight.data.normal_(0, 0.02)`) the fill is a plain write. A non-leaf
takes the fill's history: its old value gets a zero gradient, as torch's."""
from __future__ import annotations

from .. import dtypes
from ..autograd.grad_mode import is_grad_enabled
from ..autograd.overwrites import refuse_leaf_write
from ..tensor import Tensor
from .creation import rand, randn
from .registry import register
from .shape import copy_

__all__: list = []


def _float_target(x: Tensor, name: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a tensor, got {type(x).__name__}")
    if not x.dtype.is_float:
        raise RuntimeError(f'"{name}" not implemented for \'{x.dtype.name}\' (a floating '
                           f"point tensor is needed, as torch's)")


def _fill(x: Tensor, value: Tensor, name: str) -> Tensor:
    if is_grad_enabled():
        refuse_leaf_write(x, name)
    return copy_(x, value)


def _draw(kind, x: Tensor, generator) -> Tensor:
    dt = x.dtype if x.dtype.is_float else dtypes.default_float
    return kind(*x.shape, generator=generator, dtype=dt, device=x.device)


@register("normal_", method=True)
def normal_(x: Tensor, mean=0.0, std=1.0, *, generator=None) -> Tensor:
    """Fills x in place with normal numbers of mean `mean` and standard deviation `std`;
    returns x. Floating point x only. Also `t.normal_(mean, std)`."""
    _float_target(x, "normal_")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    return _fill(x, _draw(randn, x, generator) * std + mean, "normal_")


@register("uniform_", method=True)
def uniform_(x: Tensor, a=0.0, b=1.0, *, generator=None) -> Tensor:
    """Fills x in place with numbers uniform in [a, b); returns x. Floating point x only.
    Also `t.uniform_(a, b)`."""
    _float_target(x, "uniform_")
    if a > b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                           f"from={a} > to={b}")
    return _fill(x, _draw(rand, x, generator) * (b - a) + a, "uniform_")


@register("exponential_", method=True)
def exponential_(x: Tensor, lambd=1.0, *, generator=None) -> Tensor:
    """Fills x in place with exponential numbers of rate `lambd` (mean 1/lambd), as
    -log(1 - u) / lambd for u uniform in [0, 1); returns x. Floating point x only. Also
    `t.exponential_(lambd)`."""
    _float_target(x, "exponential_")
    if lambd <= 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    u = _draw(rand, x, generator)
    return _fill(x, (1 - u).log() * (-1.0 / lambd), "exponential_")


@register("bernoulli_", method=True)
def bernoulli_(x: Tensor, p=0.5, *, generator=None) -> Tensor:
    """Fills x in place with 1 where a uniform draw falls below `p` (a probability, or a
    tensor of them broadcast to x's shape), else 0; returns x. Any dtype (bool included).
    Also `t.bernoulli_(p)`."""
    if not isinstance(x, Tensor):
        raise TypeError(f"bernoulli_: expected a tensor, got {type(x).__name__}")
    if not isinstance(p, Tensor) and not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    u = _draw(rand, x, generator)
    return _fill(x, (u < p).to(x.dtype), "bernoulli_")

"""Weight initialisation as PyTorch does it (in place, on materialised parameters)."""
from __future__ import annotations

import math

from .. import ops
from ..autograd import no_grad


def _fans(t) -> tuple[int, int]:
    if t.ndim < 2:
        raise ValueError("fan in/out need a tensor of at least 2 dims")
    field = 1
    for s in t.shape[2:]:
        field *= s
    return t.shape[1] * field, t.shape[0] * field


@no_grad()
def uniform_(t, a: float = 0.0, b: float = 1.0, generator=None):
    r = ops.rand(*t.shape, generator=generator, dtype=t.dtype, device=t.device)
    return t.copy_(r * (b - a) + a)


@no_grad()
def normal_(t, mean: float = 0.0, std: float = 1.0, generator=None):
    r = ops.randn(*t.shape, generator=generator, dtype=t.dtype, device=t.device)
    return t.copy_(r * std + mean)


@no_grad()
def zeros_(t):
    return t.fill_(0.0)


@no_grad()
def ones_(t):
    return t.fill_(1.0)


def kaiming_uniform_(t, a: float = 0.0, generator=None):
    """Leaky-ReLU gain with slope a, fan in: PyTorch's default for Linear/Conv weights uses
    a = sqrt(5), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    fan_in, _ = _fans(t)
    gain = math.sqrt(2.0 / (1 + a * a))
    bound = gain * math.sqrt(3.0 / fan_in) if fan_in else 0.0
    return uniform_(t, -bound, bound, generator)


def xavier_uniform_(t, gain: float = 1.0, generator=None):
    fan_in, fan_out = _fans(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound, generator)

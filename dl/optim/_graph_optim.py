"""Shared pieces of the optimisers whose step is one fused graph per parameter (NAdam,
Adadelta, Adamax, RAdam): every parameter with a gradient steps through `_step_param`
(no multi-tensor launches), and PyTorch's elementwise helpers in its order of operations."""
from __future__ import annotations

import struct

from .optimizer import Optimizer


def lerp(start, end, weight: float):
    """aten's lerp with a scalar weight: start + w (end - start) for |w| < 0.5, else
    end - (end - start) (1 - w)."""
    if abs(weight) < 0.5:
        return start + (end - start) * weight
    return end - (end - start) * (1.0 - weight)


def round_f32(x: float) -> float:
    """x rounded to float32 (a value PyTorch keeps in a float32 0-d tensor)."""
    return struct.unpack("f", struct.pack("f", x))[0]


def check_options(name: str, lr, eps, weight_decay, capturable: bool,
                  differentiable: bool) -> None:
    """The checks the four optimisers share (PyTorch's messages)."""
    for what, v in (("learning rate", lr), ("epsilon value", eps),
                    ("weight_decay value", weight_decay)):
        if not 0.0 <= v:
            raise ValueError(f"Invalid {what}: {v}")
    if capturable or differentiable:
        raise NotImplementedError(f"{name}: capturable and differentiable are not supported")


def check_betas(betas) -> None:
    """PyTorch's range checks of betas."""
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")


class GraphOptimizer(Optimizer):
    """`Optimizer` whose step is `_step_param` for every parameter with a gradient: one
    fused elementwise kernel each (any dtype or layout); `foreach` is accepted and ignored."""

    def _step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self._step_param(group, p)

"""Adam and AdamW (PyTorch's update rule); each parameter's step is one fused kernel that
rewrites the parameter and both moment buffers."""
from __future__ import annotations

import math

from .. import ops
from ..kernels import optim as kernels
from .optimizer import Optimizer


class Adam(Optimizer):
    """Adam (PyTorch's update rule): betas, eps, L2 weight decay added to the
    gradient, maximize. No amsgrad, foreach or capturable options."""
    decoupled = False  # AdamW decays the weights directly instead of through the gradient

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, maximize: bool = False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, maximize=maximize))

    def _step(self):
        for group in self.param_groups:
            lr, (b1, b2), eps = group["lr"], group["betas"], group["eps"]
            wd = group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self._state(p)
                if not st:
                    st["step"] = 0
                    st["exp_avg"] = ops.zeros_like(p)._materialise()
                    st["exp_avg_sq"] = ops.zeros_like(p)._materialise()
                st["step"] += 1
                t = st["step"]
                m, v = st["exp_avg"], st["exp_avg_sq"]
                if self._direct(p, p.grad, m, v):
                    kernels.adam_step(p.device.rt, p, p.grad, m, v, self._scalars(group, t),
                                      wd=wd, decoupled=self.decoupled,
                                      maximize=group["maximize"])
                    self._planned(kernels.adam_kernel,
                                  lambda group=group, st=st: self._next(group, st))
                    continue
                g = -p.grad if group["maximize"] else p.grad
                param = p
                if wd and self.decoupled:
                    param = p * (1.0 - lr * wd)
                elif wd:
                    g = g + p * wd
                new_m = m * b1 + g * (1.0 - b1)
                new_v = v * b2 + g * g * (1.0 - b2)
                bc1, bc2 = 1.0 - b1 ** t, 1.0 - b2 ** t
                denom = new_v.sqrt() * (1.0 / math.sqrt(bc2)) + eps
                new_p = param - new_m / denom * (lr / bc1)
                self._update([(p, new_p), (m, new_m), (v, new_v)])

    @staticmethod
    def _scalars(group: dict, step: int) -> dict:
        """The kernel's scalar arguments for a step of the group's parameters."""
        b1, b2 = group["betas"]
        return kernels.adam_scalars(lr=group["lr"], b1=b1, b2=b2, eps=group["eps"],
                                    wd=group["weight_decay"], step=step)

    @classmethod
    def _next(cls, group: dict, st: dict) -> dict:
        """A replayed step of one parameter: its count advances, scalars from the group."""
        st["step"] += 1
        return cls._scalars(group, st["step"])


class AdamW(Adam):
    """AdamW: Adam with decoupled weight decay (the parameter is scaled by
    1 - lr * weight_decay each step; default weight_decay 1e-2, as PyTorch's)."""
    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, maximize: bool = False):
        super().__init__(params, lr, betas, eps, weight_decay, maximize)

"""Adam and AdamW (PyTorch's update rule): by default one multi-tensor kernel launch steps
a group's parameters (dl/optim/foreach.py); with foreach=False each parameter's step is one
fused kernel that rewrites the parameter and both moment buffers."""
from __future__ import annotations

import math

from .. import ops
from ..kernels import optim as kernels
from ..kernels import optim_multi
from .optimizer import Optimizer


class Adam(Optimizer):
    """Adam (PyTorch's update rule): betas, eps, L2 weight decay added to the
    gradient, amsgrad (the denominator follows the largest second moment so far), maximize;
    foreach (None or True: multi-tensor launches; False: one launch per parameter; the
    results are the same bits). No capturable option."""
    decoupled = False  # AdamW decays the weights directly instead of through the gradient

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach))

    def _new_state(self, p, amsgrad: bool = False) -> dict:
        st = self._state(p)
        if not st:
            st["step"] = 0
            st["exp_avg"] = ops.zeros_like(p)._materialise()
            st["exp_avg_sq"] = ops.zeros_like(p)._materialise()
        if amsgrad and "max_exp_avg_sq" not in st:
            st["max_exp_avg_sq"] = ops.zeros_like(p)._materialise()
        return st

    def _step_param(self, group, p):
        lr, (b1, b2), eps = group["lr"], group["betas"], group["eps"]
        wd, ams = group["weight_decay"], group["amsgrad"]
        st = self._new_state(p, ams)
        st["step"] += 1
        t = st["step"]
        m, v = st["exp_avg"], st["exp_avg_sq"]
        vmax = st["max_exp_avg_sq"] if ams else None
        if self._direct(p, p.grad, m, v, *([vmax] if ams else [])):
            kernels.adam_step(p.device.rt, p, p.grad, m, v, self._scalars(group, t),
                              wd=wd, decoupled=self.decoupled, maximize=group["maximize"],
                              vmax=vmax)
            self._planned(kernels.adam_kernel,
                          lambda group=group, st=st: self._advance(group, [st]))
            return
        g = -p.grad if group["maximize"] else p.grad
        param = p
        if wd and self.decoupled:
            param = p * (1.0 - lr * wd)
        elif wd:
            g = g + p * wd
        new_m = m + (g - m) * (1.0 - b1)  # PyTorch's lerp (the kernel's too)
        new_v = v * b2 + g * g * (1.0 - b2)
        bc1, bc2 = 1.0 - b1 ** t, 1.0 - b2 ** t
        writes = [(m, new_m), (v, new_v)]
        if ams:
            new_v = ops.maximum(vmax, new_v)
            writes.append((vmax, new_v))
        denom = new_v.sqrt() * (1.0 / math.sqrt(bc2)) + eps
        new_p = param - new_m / denom * (lr / bc1)
        self._update([(p, new_p), *writes])

    @staticmethod
    def _scalars(group: dict, step: int) -> dict:
        """The kernel's scalar arguments for a step of the group's parameters."""
        b1, b2 = group["betas"]
        return kernels.adam_scalars(lr=group["lr"], b1=b1, b2=b2, eps=group["eps"],
                                    wd=group["weight_decay"], step=step)

    # ---- the multi-tensor step's hooks (Optimizer) ---------------------------------------
    def _rule(self, group):
        return optim_multi.ADAM_AMSGRAD if group["amsgrad"] else optim_multi.ADAM

    def _group_flags(self, group) -> tuple:
        return bool(group["weight_decay"]), bool(group["maximize"]), bool(group["amsgrad"])

    def _prepare(self, p, group):
        ams = bool(group["amsgrad"])
        st = self._new_state(p, ams)
        state = (st["exp_avg"], st["exp_avg_sq"], *([st["max_exp_avg_sq"]] if ams else []))
        return st, state, st["step"]  # one launch, one step

    def _kernel_flags(self, group, bucket) -> dict:
        wd = bool(group["weight_decay"])
        return dict(MAXIMIZE=bool(group["maximize"]), COUPLED_WD=wd and not self.decoupled,
                    DECOUPLED_WD=wd and self.decoupled, AMSGRAD=bool(group["amsgrad"]))

    def _advance(self, group, states) -> dict:
        """The parameters' step counts (equal: they share the bias corrections) advance."""
        t = states[0]["step"] + 1
        for st in states:
            st["step"] = t
        return self._scalars(group, t)


class AdamW(Adam):
    """AdamW: Adam with decoupled weight decay (the parameter is scaled by
    1 - lr * weight_decay each step; default weight_decay 1e-2, as PyTorch's)."""
    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         foreach=foreach)

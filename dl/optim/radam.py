"""RAdam (PyTorch's update rule): Adam with the variance rectification term, plain
momentum SGD while the rectification is undefined (rho_t <= 5); each parameter's step is
one fused kernel."""
from __future__ import annotations

from .. import ops
from ._graph_optim import GraphOptimizer, check_betas, check_options, lerp


class RAdam(GraphOptimizer):
    """RAdam (PyTorch's update rule and defaults): betas, eps, weight_decay (L2 added to
    the gradient, or with decoupled_weight_decay the parameter scaled by 1 - lr wd),
    maximize. State: step, exp_avg, exp_avg_sq. No capturable or differentiable options;
    foreach is accepted and ignored."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False):
        check_options("RAdam", lr, eps, weight_decay, capturable, differentiable)
        check_betas(betas)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach))

    def _step_param(self, group, p):
        st = self._state(p)
        if not st:
            st["step"] = 0
            st["exp_avg"] = ops.zeros_like(p)._materialise()
            st["exp_avg_sq"] = ops.zeros_like(p)._materialise()
        st["step"] += 1
        step = float(st["step"])
        lr, (b1, b2), eps = group["lr"], group["betas"], group["eps"]
        wd = group["weight_decay"]
        m, v = st["exp_avg"], st["exp_avg_sq"]
        g = -p.grad if group["maximize"] else p.grad
        param = p
        if wd != 0:
            if group["decoupled_weight_decay"]:
                param = p * (1 - lr * wd)
            else:
                g = g + p * wd
        new_m = lerp(m, g, 1 - b1)
        new_v = v * b2 + g * g * (1 - b2)
        bc1 = 1 - b1 ** step
        bc2 = 1 - b2 ** step
        corrected = new_m / bc1
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * step * (b2 ** step) / bc2
        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf /
                    ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive = (bc2 ** 0.5) / (new_v.sqrt() + eps)
            param = param - corrected * lr * adaptive * rect
        else:
            param = param - corrected * lr
        self._update([(p, param), (m, new_m), (v, new_v)])

"""Adamax (PyTorch's update rule): Adam with the infinity norm in place of the second
moment; each parameter's step is one fused kernel."""
from __future__ import annotations

from .. import ops
from ._graph_optim import GraphOptimizer, check_betas, check_options, lerp


class Adamax(GraphOptimizer):
    """Adamax (PyTorch's update rule and defaults): betas, eps (added to |g| before the
    maximum), L2 weight_decay added to the gradient, maximize. State: step, exp_avg,
    exp_inf. No capturable or differentiable options; foreach is accepted and ignored."""

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False):
        check_options("Adamax", lr, eps, weight_decay, capturable, differentiable)
        check_betas(betas)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize))

    def _step_param(self, group, p):
        st = self._state(p)
        if not st:
            st["step"] = 0
            st["exp_avg"] = ops.zeros_like(p)._materialise()
            st["exp_inf"] = ops.zeros_like(p)._materialise()
        st["step"] += 1
        lr, (b1, b2), eps = group["lr"], group["betas"], group["eps"]
        m, u = st["exp_avg"], st["exp_inf"]
        g = -p.grad if group["maximize"] else p.grad
        if group["weight_decay"] != 0:
            g = g + p * group["weight_decay"]
        new_m = lerp(m, g, 1 - b1)
        new_u = ops.maximum(u * b2, g.abs() + eps)
        clr = lr / (1 - b1 ** float(st["step"]))
        new_p = p + new_m / new_u * (-clr)
        self._update([(p, new_p), (m, new_m), (u, new_u)])

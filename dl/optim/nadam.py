"""NAdam (PyTorch's update rule): Adam with Nesterov momentum and the momentum schedule
mu_t = beta1 (1 - 0.5 * 0.96^(t momentum_decay)); each parameter's step is one fused kernel."""
from __future__ import annotations

from .. import ops
from ..tensor import Tensor
from ._graph_optim import GraphOptimizer, check_betas, check_options, lerp, round_f32


class NAdam(GraphOptimizer):
    """NAdam (PyTorch's update rule and defaults): betas, eps, weight_decay (L2 added to
    the gradient, or with decoupled_weight_decay the parameter scaled by 1 - lr wd),
    momentum_decay, maximize. State: step, mu_product (a float, rounded to float32 each
    step as PyTorch's float32 0-d tensor), exp_avg, exp_avg_sq. No capturable or
    differentiable options; foreach is accepted and ignored."""

    _scalar_state = ("step", "mu_product")  # a state_dict gives both as float32 tensors

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False):
        check_options("NAdam", lr, eps, weight_decay, capturable, differentiable)
        check_betas(betas)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay,
                                      momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach))

    def _step_param(self, group, p):
        st = self._state(p)
        if not st:
            st["step"] = 0
            st["mu_product"] = 1.0
            st["exp_avg"] = ops.zeros_like(p)._materialise()
            st["exp_avg_sq"] = ops.zeros_like(p)._materialise()
        st["step"] += 1
        step = float(st["step"])
        lr, (b1, b2), eps = group["lr"], group["betas"], group["eps"]
        wd, md = group["weight_decay"], group["momentum_decay"]
        m, v = st["exp_avg"], st["exp_avg_sq"]
        g = -p.grad if group["maximize"] else p.grad
        bc2 = 1 - b2 ** step
        param = p
        if wd != 0:
            if group["decoupled_weight_decay"]:
                param = p * (1 - lr * wd)
            else:
                g = g + p * wd
        mu = b1 * (1.0 - 0.5 * (0.96 ** (step * md)))
        mu_next = b1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * md)))
        prev = st["mu_product"]
        prev = prev.item() if isinstance(prev, Tensor) else float(prev)  # a loaded state
        mu_product = round_f32(prev * round_f32(mu))
        st["mu_product"] = mu_product
        new_m = lerp(m, g, 1 - b1)
        new_v = v * b2 + g * g * (1 - b2)
        denom = (new_v / bc2).sqrt() + eps
        mu_product_next = mu_product * mu_next
        param = param + g / denom * (-lr * (1.0 - mu) / (1.0 - mu_product))
        param = param + new_m / denom * ((-lr * mu_next) / (1.0 - mu_product_next))
        self._update([(p, param), (m, new_m), (v, new_v)])

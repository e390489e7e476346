"""Adadelta (PyTorch's update rule); each parameter's step is one fused kernel."""
from __future__ import annotations

from .. import ops
from ._graph_optim import GraphOptimizer, check_options


class Adadelta(GraphOptimizer):
    """Adadelta (PyTorch's update rule and defaults): square_avg = rho square_avg +
    (1 - rho) g^2, delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) g, acc_delta
    follows delta^2 likewise, the parameter moves by -lr delta; L2 weight_decay added to
    the gradient, maximize. State: step, square_avg, acc_delta. No capturable or
    differentiable options; foreach is accepted and ignored."""

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False):
        check_options("Adadelta", lr, eps, weight_decay, capturable, differentiable)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, foreach=foreach))

    def _step_param(self, group, p):
        st = self._state(p)
        if not st:
            st["step"] = 0
            st["square_avg"] = ops.zeros_like(p)._materialise()
            st["acc_delta"] = ops.zeros_like(p)._materialise()
        st["step"] += 1
        lr, rho, eps = group["lr"], group["rho"], group["eps"]
        sq, acc = st["square_avg"], st["acc_delta"]
        g = -p.grad if group["maximize"] else p.grad
        if group["weight_decay"] != 0:
            g = g + p * group["weight_decay"]
        new_sq = sq * rho + g * g * (1 - rho)
        std = (new_sq + eps).sqrt()
        delta = (acc + eps).sqrt() / std * g
        new_acc = acc * rho + delta * delta * (1 - rho)
        new_p = p + delta * (-lr)
        self._update([(p, new_p), (sq, new_sq), (acc, new_acc)])

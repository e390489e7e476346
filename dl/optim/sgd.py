"""SGD with momentum, dampening, Nesterov and weight decay (PyTorch's update rule): by
default one multi-tensor kernel launch steps a group's parameters (dl/optim/foreach.py)."""
from __future__ import annotations

from .. import ops
from ..kernels import optim as kernels
from ..kernels import optim_multi
from .optimizer import Optimizer


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, Nesterov momentum and
    weight decay (PyTorch's update rule and defaults, lr=1e-3; maximize ascends); foreach
    as Adam's."""
    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False,
                 foreach: bool | None = None):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum needs momentum > 0 and dampening 0")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach))

    @staticmethod
    def _scalars(group: dict) -> dict:
        """The kernel's scalar arguments for the group's parameters."""
        return kernels.sgd_scalars(lr=group["lr"], wd=group["weight_decay"],
                                   mom=group["momentum"], damp=group["dampening"])

    def _step_param(self, group, p):
        lr, mom, damp = group["lr"], group["momentum"], group["dampening"]
        wd, nesterov = group["weight_decay"], group["nesterov"]
        if self._direct(p, p.grad):
            buf, first = None, False
            if mom:
                st = self._state(p)
                buf, first = st.get("momentum_buffer"), "momentum_buffer" not in st
                if buf is None:
                    buf = st["momentum_buffer"] = ops.empty_like(p)._materialise()
            kernels.sgd_step(p.device.rt, p, p.grad, buf, self._scalars(group),
                             wd=wd, nesterov=nesterov, maximize=group["maximize"],
                             first=first)
            # a replay relaunches with the group's scalars of the moment; a first
            # momentum step (the buffer takes the gradient) is not planned, so a
            # recording of it re-runs the whole step
            if not first:
                self._planned(kernels.sgd_kernel, lambda group=group: self._scalars(group))
            return
        g = -p.grad if group["maximize"] else p.grad
        if wd:
            g = g + p * wd
        pairs = []
        if mom:
            st = self._state(p)
            buf = st.get("momentum_buffer")
            if buf is None:
                buf = st["momentum_buffer"] = ops.empty_like(p)
                new_buf = g
            else:
                new_buf = buf * mom + g * (1.0 - damp)
            pairs.append((buf, new_buf))
            g = g + new_buf * mom if nesterov else new_buf
        pairs.insert(0, (p, p - g * lr))
        self._update(pairs)

    # ---- the multi-tensor step's hooks (Optimizer) ---------------------------------------
    def _rule(self, group):
        return optim_multi.SGD_MOMENTUM if group["momentum"] else optim_multi.SGD

    def _group_flags(self, group) -> tuple:
        return (bool(group["weight_decay"]), bool(group["maximize"]),
                bool(group["nesterov"]), bool(group["momentum"]))

    def _prepare(self, p, group):
        """The bucket: whether this is the first momentum step (the buffer takes the
        gradient)."""
        if not group["momentum"]:
            return {}, (), False
        st = self._state(p)
        first = "momentum_buffer" not in st
        if first:
            st["momentum_buffer"] = ops.empty_like(p)._materialise()
        return st, (st["momentum_buffer"],), first

    def _kernel_flags(self, group, first) -> dict:
        return dict(MAXIMIZE=bool(group["maximize"]), HAS_WD=bool(group["weight_decay"]),
                    MOMENTUM=(1 if first else 2) if group["momentum"] else 0,
                    NESTEROV=bool(group["nesterov"]))

    def _advance(self, group, states) -> dict:
        return self._scalars(group)

    def _cacheable(self, first) -> bool:
        return not first  # the next step of these parameters is not a first one

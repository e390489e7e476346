"""Adagrad (PyTorch's update rule): by default one multi-tensor kernel launch steps a group's
parameters of equal step count (dl/optim/foreach.py); with foreach=False each parameter's
step is one `@cube` kernel that rewrites the parameter and its sum of squared gradients in
place (float32/float64, contiguous); other dtypes and layouts take the fused elementwise
graph. No sparse gradients."""
from __future__ import annotations

import typing

from cube import ABSOLUTE_POS, Array, Comptime, cube, sqrt, u32

from .. import ops
from ..kernels import optim_multi
from ..kernels.launch import launch_1d
from ..kernels.optim import _grad
from .optimizer import Optimizer
from .rmsprop import StatefulOptimizer, register_helper

F = typing.TypeVar("F")


@cube
def _adagrad_at(p, g, acc, pi_: u32, gi_: u32, ai_: u32, clr, eps, wd,
                MAXIMIZE: Comptime[bool], WD: Comptime[bool]):
    """sum += g^2; p -= clr * g / (sqrt(sum) + eps), in PyTorch's order of operations (the
    one- and the multi-tensor kernels share it)."""
    pi = p[pi_]
    gi = _grad(g[gi_], pi, wd, MAXIMIZE, WD)
    s = acc[ai_] + gi * gi
    acc[ai_] = s
    p[pi_] = pi - clr * (gi / (sqrt(s) + eps))


@cube(launch=True, unchecked=True, nowrap=True)  # n units in contiguous tensors of n
def adagrad_kernel(p: Array[F], g: Array[F], acc: Array[F], n: u32, po: u32, go: u32, ao: u32,
                   clr: F, eps: F, wd: F, MAXIMIZE: Comptime[bool], WD: Comptime[bool]):
    i = ABSOLUTE_POS
    if i < n:
        _adagrad_at(p, g, acc, po + i, go + i, ao + i, clr, eps, wd, MAXIMIZE, WD)


register_helper("_adagrad_at", _adagrad_at)
RULE = optim_multi.Rule("adagrad", ("p", "g", "acc"), ("clr", "eps", "wd"),
                        (("MAXIMIZE", "bool"), ("WD", "bool")), "_adagrad_at")


class Adagrad(StatefulOptimizer):
    """Adagrad (PyTorch's update rule and defaults): the step size lr / (1 + (step - 1)
    lr_decay) divides by the root of the running sum of squared gradients (which starts at
    initial_accumulator_value) plus eps; L2 weight_decay adds to g; maximize ascends.
    foreach as Adam's. No sparse gradients, differentiable or fused options.

    The state is made at a parameter's first step (PyTorch makes it in the constructor, so
    a state_dict taken before any step differs); as PyTorch's, it starts at the constructor's
    initial_accumulator_value even where a parameter group names another."""

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0,
                 eps: float = 1e-10, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None):
        for name, v in (("learning rate", lr), ("lr_decay value", lr_decay),
                        ("weight_decay value", weight_decay),
                        ("initial_accumulator_value value", initial_accumulator_value),
                        ("epsilon value", eps)):
            if not 0.0 <= v:
                raise ValueError(f"Invalid {name}: {v}")
        if differentiable or fused:
            raise NotImplementedError("Adagrad: differentiable and fused are not supported")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      foreach=foreach, maximize=maximize))

    def _new_state(self, p, group) -> dict:
        st = self._state(p)
        if not st:
            st["step"] = 0
            # the constructor's value, not the group's: PyTorch fills every group's state
            # from its constructor argument
            init = self.defaults["initial_accumulator_value"]
            st["sum"] = ops.full_like(p, init)._materialise()
        return st

    @staticmethod
    def _scalars(group: dict, step: int) -> dict:
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        return dict(clr=float(clr), eps=float(group["eps"]), wd=float(group["weight_decay"]))

    def _flags(self) -> tuple:
        return tuple((bool(g["weight_decay"]), bool(g["maximize"])) for g in self.param_groups)

    def _step_param(self, group, p):
        st = self._new_state(p, group)
        st["step"] += 1
        acc = st["sum"]
        if self._direct(p, p.grad, acc):
            launch_1d(adagrad_kernel, p.device.rt, p.numel(), p=p._buf, g=p.grad._buf,
                      acc=acc._buf, n=p.numel(), po=p.offset, go=p.grad.offset, ao=acc.offset,
                      **self._scalars(group, st["step"]), MAXIMIZE=bool(group["maximize"]),
                      WD=bool(group["weight_decay"]))
            self._planned(adagrad_kernel,
                          lambda group=group, st=st: self._advance(group, [st]))
            return
        g = -p.grad if group["maximize"] else p.grad
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        new_acc = acc + g * g
        clr = self._scalars(group, st["step"])["clr"]
        new_p = p - g / (new_acc.sqrt() + group["eps"]) * clr
        Optimizer._update([(p, new_p), (acc, new_acc)])

    def _advance(self, group, states) -> dict:
        """The parameters' step counts (equal: they share the step size) advance."""
        t = states[0]["step"] + 1
        for st in states:
            st["step"] = t
        return self._scalars(group, t)

    # ---- the multi-tensor step's hooks (Optimizer) ---------------------------------------
    def _rule(self, group):
        return RULE

    def _group_flags(self, group) -> tuple:
        return bool(group["weight_decay"]), bool(group["maximize"])

    def _prepare(self, p, group):
        st = self._new_state(p, group)
        return st, (st["sum"],), st["step"]  # one launch, one step count

    def _kernel_flags(self, group, bucket) -> dict:
        return dict(MAXIMIZE=bool(group["maximize"]), WD=bool(group["weight_decay"]))

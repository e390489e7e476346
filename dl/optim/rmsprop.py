"""RMSprop (PyTorch's update rule): each parameter's step is one `@cube` kernel that rewrites
the parameter and its state buffers in place (float32/float64, contiguous); other dtypes and
layouts take the fused elementwise graph (one fused kernel per parameter). There is no
multi-tensor path: `foreach` is accepted and ignored.

`PerParamOptimizer` (here, shared with Adagrad) holds what both need beyond `Optimizer`:
the per-parameter step loop and `load_state_dict`."""
from __future__ import annotations

import typing

from cube import ABSOLUTE_POS, Array, Comptime, cube, sqrt, u32

from .. import ops
from ..kernels.launch import launch_1d
from ..kernels.optim import _grad
from ..tensor import Tensor
from .optimizer import Optimizer

F = typing.TypeVar("F")


class PerParamOptimizer(Optimizer):
    """An optimiser whose step is one kernel per parameter (no multi-tensor launches)."""

    def _step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self._step_param(group, p)

    def load_state_dict(self, state_dict: dict) -> None:
        """Load what `state_dict()` returned: the groups' settings and, per parameter index,
        its state (tensors copied into the parameter's dtype and device)."""
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has {len(groups)} parameter groups, the "
                             f"optimizer {len(self.param_groups)}")
        params = [p for g in self.param_groups for p in g["params"]]
        state = {}
        for i, st in state_dict["state"].items():
            i = int(i)
            if not 0 <= i < len(params):
                raise ValueError(f"loaded state dict has state for parameter {i}; the "
                                 f"optimizer has {len(params)} parameters")
            p = params[i]
            new = {}
            for k, v in st.items():
                if isinstance(v, Tensor):
                    if v.shape != p.shape:
                        raise ValueError(f"state {k!r} of parameter {i} has shape {v.shape}, "
                                         f"the parameter {p.shape}")
                    v = ops.clone(v.to(dtype=p.dtype, device=p.device))._materialise()
                new[k] = v
            state[id(p)] = new
        for g, saved in zip(self.param_groups, groups):
            g.update({k: v for k, v in saved.items() if k != "params"})
        self.state = state
        self._plans = {}


@cube
def _rmsprop_at(p, g, sq, ga, buf, pi_: u32, gi_: u32, si_: u32, ai_: u32, bi_: u32, lr, alpha,
                one_minus_alpha, eps, wd, mom, MAXIMIZE: Comptime[bool], WD: Comptime[bool],
                CENTERED: Comptime[int], MOMENTUM: Comptime[bool]):
    """One element's RMSprop step in PyTorch's order of operations (CENTERED: 0 off, 1 the
    lerp's low-weight form, 2 its high-weight form, as aten's lerp)."""
    pi = p[pi_]
    gi = _grad(g[gi_], pi, wd, MAXIMIZE, WD)
    s = sq[si_] * alpha + one_minus_alpha * gi * gi
    sq[si_] = s
    if CENTERED == 0:
        avg = sqrt(s) + eps
    else:
        a = ga[ai_]
        if CENTERED == 1:
            a = a + one_minus_alpha * (gi - a)
        else:
            a = gi - (gi - a) * alpha
        ga[ai_] = a
        avg = sqrt(s - a * a) + eps
    if MOMENTUM:
        b = buf[bi_] * mom + gi / avg
        buf[bi_] = b
        p[pi_] = pi - lr * b
    else:
        p[pi_] = pi - lr * (gi / avg)


@cube(launch=True, unchecked=True, nowrap=True)  # n units in contiguous tensors of n
def rmsprop_kernel(p: Array[F], g: Array[F], sq: Array[F], ga: Array[F], buf: Array[F], n: u32,
                   po: u32, go: u32, so: u32, ao: u32, bo: u32, lr: F, alpha: F,
                   one_minus_alpha: F, eps: F, wd: F, mom: F, MAXIMIZE: Comptime[bool],
                   WD: Comptime[bool], CENTERED: Comptime[int], MOMENTUM: Comptime[bool]):
    i = ABSOLUTE_POS
    if i < n:
        _rmsprop_at(p, g, sq, ga, buf, po + i, go + i, so + i, ao + i, bo + i, lr, alpha,
                    one_minus_alpha, eps, wd, mom, MAXIMIZE, WD, CENTERED, MOMENTUM)


class RMSprop(PerParamOptimizer):
    """RMSprop (PyTorch's update rule and defaults): square_avg = alpha square_avg +
    (1 - alpha) g^2; centered subtracts the squared running mean of g (kept by lerp, as
    PyTorch's); momentum keeps a buffer of g / (sqrt(.) + eps); L2 weight_decay adds to g;
    maximize ascends. No capturable or differentiable options; foreach is ignored."""

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False,
                 capturable: bool = False, foreach: bool | None = None,
                 maximize: bool = False, differentiable: bool = False):
        for name, v in (("learning rate", lr), ("epsilon value", eps),
                        ("momentum value", momentum), ("weight_decay value", weight_decay),
                        ("alpha value", alpha)):
            if not 0.0 <= v:
                raise ValueError(f"Invalid {name}: {v}")
        if capturable or differentiable:
            raise NotImplementedError("RMSprop: capturable and differentiable are not "
                                      "supported")
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps,
                                      centered=centered, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize))

    def _new_state(self, p, group) -> dict:
        st = self._state(p)
        if not st:
            st["step"] = 0
            st["square_avg"] = ops.zeros_like(p)._materialise()
            if group["momentum"] > 0:
                st["momentum_buffer"] = ops.zeros_like(p)._materialise()
            if group["centered"]:
                st["grad_avg"] = ops.zeros_like(p)._materialise()
        # a group's settings may change between steps (as in PyTorch, state appears then)
        if group["momentum"] > 0 and "momentum_buffer" not in st:
            st["momentum_buffer"] = ops.zeros_like(p)._materialise()
        if group["centered"] and "grad_avg" not in st:
            st["grad_avg"] = ops.zeros_like(p)._materialise()
        return st

    @staticmethod
    def _scalars(group: dict) -> dict:
        alpha = group["alpha"]
        return dict(lr=float(group["lr"]), alpha=float(alpha), one_minus_alpha=1.0 - alpha,
                    eps=float(group["eps"]), wd=float(group["weight_decay"]),
                    mom=float(group["momentum"]))

    @staticmethod
    def _centered(group: dict) -> int:
        if not group["centered"]:
            return 0
        return 1 if abs(1.0 - group["alpha"]) < 0.5 else 2

    def _flags(self) -> tuple:
        return tuple((bool(g["weight_decay"]), bool(g["maximize"]), self._centered(g),
                      g["momentum"] > 0) for g in self.param_groups)

    def _step_param(self, group, p):
        st = self._new_state(p, group)
        st["step"] += 1
        mom, centered = group["momentum"] > 0, self._centered(group)
        sq = st["square_avg"]
        ga = st.get("grad_avg") if centered else None
        buf = st.get("momentum_buffer") if mom else None
        extra = [t for t in (ga, buf) if t is not None]
        if self._direct(p, p.grad, sq, *extra):
            ga = sq if ga is None else ga  # not touched without centered / momentum
            buf = sq if buf is None else buf
            launch_1d(rmsprop_kernel, p.device.rt, p.numel(), p=p._buf, g=p.grad._buf,
                      sq=sq._buf, ga=ga._buf, buf=buf._buf, n=p.numel(), po=p.offset,
                      go=p.grad.offset, so=sq.offset, ao=ga.offset, bo=buf.offset,
                      **self._scalars(group), MAXIMIZE=bool(group["maximize"]),
                      WD=bool(group["weight_decay"]), CENTERED=centered, MOMENTUM=mom)
            self._planned(rmsprop_kernel, lambda group=group, st=st: self._advance(group, st))
            return
        self._graph_step(group, p, sq, ga, buf)

    def _advance(self, group, st) -> dict:
        st["step"] += 1
        return self._scalars(group)

    @staticmethod
    def _graph_step(group, p, sq, ga, buf):
        """The step as one fused kernel of lazy ops (any dtype or layout)."""
        alpha, lr, eps = group["alpha"], group["lr"], group["eps"]
        g = -p.grad if group["maximize"] else p.grad
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        new_sq = sq * alpha + g * (1.0 - alpha) * g
        pairs = [(sq, new_sq)]
        if ga is not None:
            w = 1.0 - alpha
            new_ga = ga + (g - ga) * w if abs(w) < 0.5 else g - (g - ga) * alpha
            pairs.append((ga, new_ga))
            avg = (new_sq - new_ga * new_ga).sqrt() + eps
        else:
            avg = new_sq.sqrt() + eps
        if buf is not None:
            new_buf = buf * group["momentum"] + g / avg
            pairs.append((buf, new_buf))
            new_p = p - new_buf * lr
        else:
            new_p = p - g / avg * lr
        Optimizer._update([(p, new_p), *pairs])

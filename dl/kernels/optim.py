"""Optimiser steps as single `@cube` kernels that update a parameter and its state in place.

The optimisers could express a step as a lazy graph and let fusion build the kernel, and do
for dtypes these kernels do not take (halves, whose storage rounds after every op); but a
graph of a dozen ops costs ~0.2 ms of Python per parameter, which made the optimiser step the
bulk of a small model's training step. Here a step is one launch."""
from __future__ import annotations

import typing

from cube import ABSOLUTE_POS, Array, Comptime, cube, sqrt, u32

from .launch import launch_1d

F = typing.TypeVar("F")


@cube
def _grad(g, p, wd, MAXIMIZE: Comptime[bool], WD: Comptime[bool]):
    """The gradient a step follows: negated to maximise, plus coupled weight decay."""
    if MAXIMIZE:
        g = -g
    if WD:
        g = g + p * wd
    return g


@cube
def _adam_at(p, g, m, v, vmax, pi_: u32, gi_: u32, mi_: u32, vi_: u32, xi_: u32, decay, wd,
             b2, omb1, omb2, eps, step_size, inv_sqrt_bc2, MAXIMIZE: Comptime[bool],
             COUPLED_WD: Comptime[bool], DECOUPLED_WD: Comptime[bool], AMSGRAD: Comptime[bool]):
    """One element's Adam step (p[pi_], g[gi_], m[mi_], v[vi_]; AMSGRAD: the denominator
    follows the largest v so far, vmax[xi_], as PyTorch's; without it vmax is not
    touched): the one- and the multi-tensor kernels share it, so their results are the
    same bits. omb1, omb2: 1 - b1 and 1 - b2 from the host (in double, as PyTorch's: 1 - b2
    in float32 is 1.3e-5 off at b2 = 0.999, 1.4e-3 at 0.99999); m moves by PyTorch's lerp."""
    pi = p[pi_]
    gi = _grad(g[gi_], pi, wd, MAXIMIZE, COUPLED_WD)
    if DECOUPLED_WD:
        pi = pi * decay
    mi = m[mi_]
    mi = mi + omb1 * (gi - mi)
    vi = v[vi_] * b2 + gi * gi * omb2
    m[mi_] = mi
    v[vi_] = vi
    if AMSGRAD:
        vi = max(vmax[xi_], vi)
        vmax[xi_] = vi
    p[pi_] = pi - mi / (sqrt(vi) * inv_sqrt_bc2 + eps) * step_size


@cube(launch=True, unchecked=True, nowrap=True)  # n units in contiguous tensors of n
def adam_kernel(p: Array[F], g: Array[F], m: Array[F], v: Array[F], x: Array[F], n: u32,
                po: u32, go: u32, mo: u32, vo: u32, xo: u32, decay: F, wd: F, b2: F,
                omb1: F, omb2: F, eps: F, step_size: F, inv_sqrt_bc2: F,
                MAXIMIZE: Comptime[bool],
                COUPLED_WD: Comptime[bool], DECOUPLED_WD: Comptime[bool],
                AMSGRAD: Comptime[bool]):
    """x: the largest v so far with AMSGRAD (else a placeholder the step never touches)."""
    i = ABSOLUTE_POS
    if i < n:
        _adam_at(p, g, m, v, x, po + i, go + i, mo + i, vo + i, xo + i, decay, wd, b2,
                 omb1, omb2, eps, step_size, inv_sqrt_bc2, MAXIMIZE, COUPLED_WD, DECOUPLED_WD,
                 AMSGRAD)


@cube
def _sgd_at(p, g, buf, pi_: u32, gi_: u32, bi_: u32, lr, wd, mom, damp,
            MAXIMIZE: Comptime[bool], HAS_WD: Comptime[bool], MOMENTUM: Comptime[int],
            NESTEROV: Comptime[bool]):
    """One element's SGD step (buf is not touched without momentum)."""
    pi = p[pi_]
    gi = _grad(g[gi_], pi, wd, MAXIMIZE, HAS_WD)
    if MOMENTUM == 1:
        buf[bi_] = gi
        if NESTEROV:
            gi = gi + gi * mom
    if MOMENTUM == 2:
        bi = buf[bi_] * mom + gi * (1 - damp)
        buf[bi_] = bi
        if NESTEROV:
            gi = gi + bi * mom
        else:
            gi = bi
    p[pi_] = pi - gi * lr


@cube(launch=True, unchecked=True, nowrap=True)
def sgd_kernel(p: Array[F], g: Array[F], buf: Array[F], n: u32, po: u32, go: u32, bo: u32,
               lr: F, wd: F, mom: F, damp: F, MAXIMIZE: Comptime[bool], HAS_WD: Comptime[bool],
               MOMENTUM: Comptime[int], NESTEROV: Comptime[bool]):
    """MOMENTUM: 0 none, 1 the first step (the buffer takes the gradient), 2 later steps."""
    i = ABSOLUTE_POS
    if i < n:
        _sgd_at(p, g, buf, po + i, go + i, bo + i, lr, wd, mom, damp, MAXIMIZE, HAS_WD,
                MOMENTUM, NESTEROV)


def adam_scalars(*, lr, b1, b2, eps, wd, step) -> dict:
    """adam_kernel's scalar arguments for a step (what changes from step to step)."""
    bc1, bc2 = 1.0 - b1 ** step, 1.0 - b2 ** step
    return dict(decay=1.0 - lr * wd, wd=float(wd), b2=float(b2), omb1=1.0 - b1,
                omb2=1.0 - b2, eps=float(eps), step_size=lr / bc1,
                inv_sqrt_bc2=1.0 / bc2 ** 0.5)


def adam_step(rt, p, g, m, v, scalars: dict, *, wd, decoupled, maximize, vmax=None):
    """p, g, m, v (and vmax, the largest v so far, for AMSGRAD): contiguous dl tensors of
    one float dtype and size; scalars: `adam_scalars`."""
    x = v if vmax is None else vmax
    launch_1d(adam_kernel, rt, p.numel(), p=p._buf, g=g._buf, m=m._buf, v=v._buf, x=x._buf,
              n=p.numel(), po=p.offset, go=g.offset, mo=m.offset, vo=v.offset, xo=x.offset,
              **scalars, MAXIMIZE=bool(maximize), COUPLED_WD=bool(wd) and not decoupled,
              DECOUPLED_WD=bool(wd) and decoupled, AMSGRAD=vmax is not None)


def sgd_scalars(*, lr, wd, mom, damp) -> dict:
    """sgd_kernel's scalar arguments."""
    return dict(lr=float(lr), wd=float(wd), mom=float(mom), damp=float(damp))


def sgd_step(rt, p, g, buf, scalars: dict, *, wd, nesterov, maximize, first):
    """buf: the momentum buffer (None without momentum); scalars: `sgd_scalars`."""
    momentum = 0 if buf is None else (1 if first else 2)
    b = p if buf is None else buf
    launch_1d(sgd_kernel, rt, p.numel(), p=p._buf, g=g._buf, buf=b._buf, n=p.numel(),
              po=p.offset, go=g.offset, bo=b.offset, **scalars, MAXIMIZE=bool(maximize),
              HAS_WD=bool(wd), MOMENTUM=momentum, NESTEROV=bool(nesterov))

"""Cross-entropy over class indices in two kernels: per-row loss (and the row's
log-sum-exp, kept for backward), and the logits' gradient softmax - onehot, scaled by the
upstream gradient, in one pass. Composed from log_softmax, gather and their backward
kernels, the same loss took seven launches."""
from __future__ import annotations

import math
import typing

import cube as cb
from cube import ABSOLUTE_POS, Array, Tensor, cube, u32

F = typing.TypeVar("F")
I = typing.TypeVar("I")  # noqa: E741


@cube(launch=True)
def xent_rows(x: Tensor[F], x_off: u32, t: Tensor[I], t_off: u32, loss: Array[F],
              lse: Array[F], neg_inf: F):
    """x (R, C), t (R,): loss[r] = logsumexp(x[r]) - x[r, t[r]]."""
    r = ABSOLUTE_POS
    if r < x.shape(0):
        base = x_off + r * x.stride(0)
        sc = x.stride(1)
        m = neg_inf
        for c in range(x.shape(1)):
            m = max(m, x[base + c * sc])
        s = F(0)
        for c in range(x.shape(1)):
            s += cb.exp(x[base + c * sc] - m)
        lv = m + cb.log(s)
        lse[r] = lv
        loss[r] = lv - x[base + u32(t[t_off + r * t.stride(0)]) * sc]


@cube(launch=True)
def xent_grad(x: Tensor[F], x_off: u32, t: Tensor[I], t_off: u32, lse: Array[F],
              g: Tensor[F], g_off: u32, gx: Array[F], scale: F):
    """gx (R, C contiguous) = (softmax(x) - onehot(t)) * g[r] * scale (g: (R,), any
    stride, 0 for a reduced loss's scalar gradient)."""
    i = ABSOLUTE_POS
    cols = x.shape(1)
    if i < x.shape(0) * cols:
        r = i // cols
        c = i % cols
        p = cb.exp(x[x_off + r * x.stride(0) + c * x.stride(1)] - lse[r])
        if u32(t[t_off + r * t.stride(0)]) == c:
            p -= F(1)
        gx[i] = p * g[g_off + r * g.stride(0)] * scale


NEG_INF = -math.inf

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
              lse: Array[F], valid: Array[F], flags: Array[u32], bad: Array[I], ignore: I,
              neg_inf: F):
    """x (R, C), t (R,): loss[r] = logsumexp(x[r]) - x[r, t[r]], valid[r] = 1. A row whose
    target is `ignore` has loss 0 and valid 0 and sets flags[1]; one whose target is outside
    [0, C) sets flags[0] and bad[0] (for the caller's IndexError; every writer writes the
    same flag) and has a nan loss, never a read outside its row."""
    r = ABSOLUTE_POS
    if r < x.shape(0):
        ti = t[t_off + r * t.stride(0)]
        if ti == ignore:
            loss[r] = F(0)
            lse[r] = F(0)
            valid[r] = F(0)
            flags[1] = u32(1)
        elif ti < I(0) or ti >= I(x.shape(1)):
            loss[r] = F(math.nan)
            lse[r] = F(math.nan)
            valid[r] = F(1)
            flags[0] = u32(1)
            bad[0] = ti
        else:
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
            loss[r] = lv - x[base + u32(ti) * sc]
            valid[r] = F(1)


@cube(launch=True)
def xent_grad(x: Tensor[F], x_off: u32, t: Tensor[I], t_off: u32, lse: Array[F],
              valid: Array[F], g: Tensor[F], g_off: u32, scale: F, gx: Array[F]):
    """gx (R, C contiguous) = (softmax(x) - onehot(t)) * (g[r] * scale) * valid[r] (g:
    (R,), any stride, 0 for a reduced loss's scalar gradient; scale: a mean's 1 / R, here
    rather than a kernel of its own; an ignored row's gradient is 0)."""
    i = ABSOLUTE_POS
    cols = x.shape(1)
    if i < x.shape(0) * cols:
        r = i // cols
        c = i % cols
        if valid[r] != F(0):
            p = cb.exp(x[x_off + r * x.stride(0) + c * x.stride(1)] - lse[r])
            if u32(t[t_off + r * t.stride(0)]) == c:
                p -= F(1)
            gx[i] = p * (g[g_off + r * g.stride(0)] * scale)
        else:  # 0, not 0 * g: a mean over no rows has an infinite g, as torch's 0 gradient
            gx[i] = F(0)


NEG_INF = -math.inf

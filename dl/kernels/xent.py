"""Cross-entropy over class indices: forward in two kernels, per-row loss (and the row's
log-sum-exp, kept for backward) and one cube that reduces the rows (sum or mean over the
counted rows, and the flags the caller raises from); backward in one, the logits' gradient
softmax - onehot, scaled by the upstream gradient. Composed from log_softmax, gather and
their backward kernels, the same loss took seven launches."""
from __future__ import annotations

import math
import typing

import cube as cb
from cube import ABSOLUTE_POS, UNIT_POS, Array, Comptime, Line, Tensor, cube, u32

from .common import is_cpu, line_size
from .launch import launch_1d, record_launch
from .rowops import block_reduce, lanes_sum

F = typing.TypeVar("F")
I = typing.TypeVar("I")  # noqa: E741


@cube(launch=True)
def xent_rows(x: Tensor[F], x_off: u32, t: Tensor[I], t_off: u32, loss: Array[F],
              loss_off: u32, st: Array[F], ignore: I, neg_inf: F):
    """x (R, C), t (R,): loss[loss_off + r] = logsumexp(x[r]) - x[r, t[r]], and in st (see
    `forward`) the row's logsumexp st[r] and valid st[R + r] = 1. A row whose target is
    `ignore` has loss 0 and valid 0; one whose target is outside [0, C) has a nan loss and
    valid -1 (`xent_finish` flags it for the caller's IndexError), never a read outside its
    row."""
    r = ABSOLUTE_POS
    rows = x.shape(0)
    if r < rows:
        ti = t[t_off + r * t.stride(0)]
        if ti == ignore:
            loss[loss_off + r] = F(0)
            st[r] = F(0)
            st[rows + r] = F(0)
        elif ti < I(0) or ti >= I(x.shape(1)):
            loss[loss_off + r] = F(math.nan)
            st[r] = F(math.nan)
            st[rows + r] = F(-1)
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
            st[r] = lv
            loss[loss_off + r] = lv - x[base + u32(ti) * sc]
            st[rows + r] = F(1)


@cube(launch=True)
def xent_finish(loss: Array[Line[F]], loss_off: u32, st: Array[F], rows: u32, out: Array[F],
                flag_at: u32, MODE: Comptime[int], BLOCK: Comptime[int]):
    """One cube over the R rows' results (loss: R values from line loss_off). MODE 1 (sum)
    or 2 (mean): out[0] = the losses' sum, divided by the counted rows' number for a mean
    (PyTorch's rule: nan where every row is ignored); st[3R] = that divisor (1 for a sum
    and for MODE 0, "none"), which the gradient divides by. out[flag_at] and
    out[flag_at + 1] = 1 or 0: a target was out of range, a row was ignored. Everything is
    written here, so no buffer needs zeroing before the launches."""
    L = cb.comptime(loss.line_size())
    smem = cb.SharedMemory(F, BLOCK)
    acc = Line[F, L](0)
    if MODE != 0:
        for i in range(UNIT_POS, rows // L, BLOCK):
            acc += loss[loss_off + i]
    counted = F(0)
    bad = F(0)
    for r in range(UNIT_POS, rows, BLOCK):
        v = st[rows + r]
        if v != F(0):
            counted += F(1)
        if v < F(0):
            bad += F(1)
    total = block_reduce(smem, lanes_sum(acc, L), BLOCK, False)
    counted = block_reduce(smem, counted, BLOCK, False)
    bad = block_reduce(smem, bad, BLOCK, False)
    if UNIT_POS == 0:
        at = rows * u32(3)
        if MODE == 2:
            out[0] = total / counted
            st[at] = counted
        else:
            if MODE == 1:
                out[0] = total
            st[at] = F(1)
        out[flag_at] = F(0)
        if bad > F(0):
            out[flag_at] = F(1)
        out[flag_at + u32(1)] = F(0)
        if counted < F(rows):
            out[flag_at + u32(1)] = F(1)


@cube(launch=True)
def xent_grad(x: Tensor[F], x_off: u32, t: Tensor[I], t_off: u32, st: Array[F],
              g: Tensor[F], g_off: u32, gx: Array[F]):
    """gx (R, C contiguous) = (softmax(x) - onehot(t)) * (g[r] / st[3R]) for a counted row
    (g: (R,), any stride, 0 for a reduced loss's scalar gradient; st: `forward`'s, whose
    st[3R] is a mean's count of rows, here rather than a kernel of its own), 0 for an
    ignored one."""
    i = ABSOLUTE_POS
    rows = x.shape(0)
    cols = x.shape(1)
    if i < rows * cols:
        r = i // cols
        c = i % cols
        if st[rows + r] != F(0):
            p = cb.exp(x[x_off + r * x.stride(0) + c * x.stride(1)] - st[r])
            if u32(t[t_off + r * t.stride(0)]) == c:
                p -= F(1)
            gx[i] = p * (g[g_off + r * g.stride(0)] / st[rows * u32(3)])
        else:  # 0, not 0 * g: a mean over no rows has an infinite g, as torch's 0 gradient
            gx[i] = F(0)


NEG_INF = -math.inf


def forward(rt, x, x_off: int, t, t_off: int, ignore: int, reduction: str) -> tuple:
    """Both forward kernels over x (R, C) and t (R,) (kernel arguments: `Tensor._karg`).
    Returns buffers (out, st): out the sum or mean, or the R losses for reduction "none",
    then the two flags (a target out of range, a row ignored: read on the host); st the
    rows' logsumexp, their valid marks (1 counted, 0 ignored, -1 out of range), the rows'
    losses (a reduction's scratch), then the gradient's divisor. Two allocations, both
    made here: a dispatch plan replays the call whole, and the loss's storage holds nothing
    the gradient reads (a user may write the loss in place)."""
    rows = x.shape[0]
    elem = x.elem
    lsz = line_size(rt, elem, rows)
    st = rt.empty((3 * rows + lsz,), elem)  # whole lines (a reduction's losses are in it)
    mode = _MODES[reduction]
    n = rows if mode == 0 else 1
    out = rt.empty((n + 2,), elem)
    loss, loss_off = (out, 0) if mode == 0 else (st, 2 * rows)
    launch_1d(xent_rows, rt, rows, x=x, x_off=x_off, t=t, t_off=t_off, loss=loss,
              loss_off=loss_off, st=st, ignore=ignore, neg_inf=NEG_INF)
    block = 1 if is_cpu(rt) else 128
    xent_finish.launch(rt, cube_count=1, cube_dim=block,
                       loss=(st if mode == 0 else loss).lines(lsz), loss_off=loss_off // lsz,
                       st=st, rows=rows, out=out, flag_at=n, MODE=mode, BLOCK=block)
    record_launch("xent_finish")
    return out, st


_MODES = {"none": 0, "sum": 1, "mean": 2}

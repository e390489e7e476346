"""Layer norm over the last axis: y = (x - mean) / sqrt(var + eps) * weight + bias.

- `row`: one unit per row, lines along the row; the mean, then the variance of (x - mean)
  (two passes over an L1-resident row: no cancellation), then the output pass.
- `shared_B`: one cube of B units per row, shared-memory trees for the two sums.
"""
from __future__ import annotations

import typing

import numpy as np

import cube as cb
from autotune import Candidate, Tunable, tune_key
from cube import ABSOLUTE_POS, CUBE_POS, UNIT_POS, Array, Comptime, Line, Tensor, cube

from .common import cdiv, is_cpu, line_size
from .rowops import block_reduce, lanes_sum
from .softmax import as_rows

F = typing.TypeVar("F")


@cube(launch=True, unchecked=True, nowrap=True)
def layer_norm_row(x: Tensor[Line[F]], w: Array[Line[F]], b: Array[Line[F]],
                   out: Tensor[Line[F]], eps: F, AFFINE: Comptime[bool]):
    L = cb.comptime(x.line_size())
    row = ABSOLUTE_POS
    if row < x.shape(0):
        cl = x.shape(1) // L
        bx = row * x.stride(0) // L
        bo = row * out.stride(0) // L
        sv = Line[F, L](0)
        for j in range(cl):
            sv += x[bx + j]
        mean = lanes_sum(sv, L) / F(x.shape(1))
        qv = Line[F, L](0)
        for j in range(cl):
            d = x[bx + j] - mean
            qv = cb.fma(d, d, qv)
        rstd = cb.rsqrt(lanes_sum(qv, L) / F(x.shape(1)) + eps)
        for j in range(cl):
            y = (x[bx + j] - mean) * rstd
            if AFFINE:
                y = cb.fma(y, w[j], b[j])
            out[bo + j] = y


@cube(launch=True)
def layer_norm_shared(x: Tensor[F], w: Array[F], b: Array[F], out: Tensor[F], eps: F,
                      AFFINE: Comptime[bool], BLOCK: Comptime[int]):
    row = CUBE_POS
    n = x.shape(1)
    bx = row * x.stride(0)
    bo = row * out.stride(0)
    smem = cb.SharedMemory(F, BLOCK)
    sv = F(0)
    for j in range(UNIT_POS, n, BLOCK):
        sv += x[bx + j]
    mean = block_reduce(smem, sv, BLOCK, False) / F(n)
    qv = F(0)
    for j in range(UNIT_POS, n, BLOCK):
        d = x[bx + j] - mean
        qv += d * d
    rstd = cb.rsqrt(block_reduce(smem, qv, BLOCK, False) / F(n) + eps)
    for j in range(UNIT_POS, n, BLOCK):
        y = (x[bx + j] - mean) * rstd
        if AFFINE:
            y = y * w[j] + b[j]
        out[bo + j] = y


@cube(launch=True, unchecked=True, nowrap=True)
def layer_norm_backward_row(x: Tensor[Line[F]], g: Tensor[Line[F]], w: Array[Line[F]],
                            gx: Tensor[Line[F]], xhat: Tensor[Line[F]], eps: F,
                            AFFINE: Comptime[bool]):
    """One unit per row: the statistics again (two passes), then
    gx = (gy - mean(gy) - xhat * mean(gy * xhat)) * rstd with gy = g * w, and xhat written
    out for the weight's gradient (a column sum the caller runs)."""
    L = cb.comptime(x.line_size())
    row = ABSOLUTE_POS
    if row < x.shape(0):
        cl = x.shape(1) // L
        n = F(x.shape(1))
        bx = row * x.stride(0) // L
        bg = row * g.stride(0) // L
        bo = row * gx.stride(0) // L
        bh = row * xhat.stride(0) // L
        sv = Line[F, L](0)
        for j in range(cl):
            sv += x[bx + j]
        mean = lanes_sum(sv, L) / n
        qv = Line[F, L](0)
        for j in range(cl):
            d = x[bx + j] - mean
            qv = cb.fma(d, d, qv)
        rstd = cb.rsqrt(lanes_sum(qv, L) / n + eps)
        s1 = Line[F, L](0)
        s2 = Line[F, L](0)
        for j in range(cl):
            h = (x[bx + j] - mean) * rstd
            xhat[bh + j] = h
            gy = g[bg + j]
            if AFFINE:
                gy = gy * w[j]
            s1 += gy
            s2 = cb.fma(gy, h, s2)
        c1 = lanes_sum(s1, L) / n
        c2 = lanes_sum(s2, L) / n
        for j in range(cl):
            gy = g[bg + j]
            if AFFINE:
                gy = gy * w[j]
            gx[bo + j] = (gy - c1 - xhat[bh + j] * c2) * rstd


def layer_norm_backward(rt, x, g, weight=None, eps: float = 1e-5):
    """(gx, xhat) for y = layer_norm(x) * weight (+ bias) over the last axis, given g = dL/dy;
    x and g are row views (any row stride, contiguous rows). gw = sum(g * xhat) and
    gb = sum(g) over the rows are left to the caller."""
    x2, g2 = as_rows(x), as_rows(g)
    rows, cols = x2.shape
    gx, xhat = rt.empty((rows, cols), x2.elem), rt.empty((rows, cols), x2.elem)
    if rows * cols == 0:
        return gx, xhat
    lsz = line_size(rt, x2.elem, cols, x2.strides[0], g2.strides[0])
    dim = 1 if is_cpu(rt) else 64
    w = weight.buffer if weight is not None else gx
    layer_norm_backward_row.launch(rt, cube_count=cdiv(rows, dim), cube_dim=dim,
                                   x=x2.lines(lsz), g=g2.lines(lsz),
                                   w=w.lines(lsz) if weight is not None else w.lines(1),
                                   gx=gx.lines(lsz), xhat=xhat.lines(lsz), eps=float(eps),
                                   AFFINE=weight is not None)
    return gx, xhat


def _run_row(rt, x, w, b, out, eps):
    rows, cols = x.shape
    lsz = line_size(rt, x.elem, cols, x.strides[0])
    dim = 1 if is_cpu(rt) else 64
    w_, b_ = (w, b) if w is not None else (out.buffer, out.buffer)
    layer_norm_row.launch(rt, cube_count=cdiv(rows, dim), cube_dim=dim, x=x.lines(lsz),
                          w=w_.lines(lsz) if w is not None else w_.lines(1),
                          b=b_.lines(lsz) if w is not None else b_.lines(1),
                          out=out.lines(lsz), eps=eps, AFFINE=w is not None)


def _run_shared(block: int):
    def run(rt, x, w, b, out, eps):
        w_, b_ = (w, b) if w is not None else (out.buffer, out.buffer)
        layer_norm_shared.launch(rt, cube_count=x.shape[0], cube_dim=block, x=x, w=w_, b=b_,
                                 out=out, eps=eps, AFFINE=w is not None, BLOCK=block)
    return run


LAYER_NORM = Tunable("layer_norm", [
    Candidate("row", _run_row, lambda rt: 100 if is_cpu(rt) else 50),
    Candidate("shared_128", _run_shared(128), lambda rt: 10 if is_cpu(rt) else 100,
              lambda rt, *a: rt.features.max_cube_dim >= 128),
    Candidate("shared_32", _run_shared(32), lambda rt: 5 if is_cpu(rt) else 60),
])


def layer_norm(rt, x, weight=None, bias=None, eps: float = 1e-5, out=None):
    bx = x.buffer
    if not bx.elem.is_float:
        raise ValueError(f"layer_norm takes floats, got {bx.elem}")
    if (weight is None) != (bias is None):
        raise ValueError("give both weight and bias, or neither")
    cols = bx.shape[-1]
    for t in (weight, bias):
        if t is not None and tuple(t.buffer.shape) != (cols,):
            raise ValueError(f"weight and bias must have shape ({cols},)")
    out = rt.empty(bx.shape, bx.elem) if out is None else out
    if bx.size == 0:
        return out
    x2, o2 = as_rows(bx), as_rows(out)
    w = None if weight is None else weight.buffer
    b = None if bias is None else bias.buffer
    LAYER_NORM(rt, tune_key("ln", bx.elem, [x2.shape], (w is not None,)), x2, w, b, o2,
               float(eps))
    return out


def reference(x, w=None, b=None, eps=1e-5):
    x = x.astype(np.float64)
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return y if w is None else y * w + b

"""Softmax and log-softmax over the last axis of a (rows, cols) view (any row stride,
contiguous columns). Candidates:

- `row`: one unit per row, lines along the row: a max pass, then exp(x - max) written out and
  summed, then a scale pass; the row stays in L1/L2 between passes, so memory sees one read
  and one write (log-softmax: sum, then x - max - log(sum)).
- `shared_B`: one cube of B units per row, shared-memory trees for the max and the sum.
"""
from __future__ import annotations

import typing

import numpy as np

import cube as cb
from autotune import Candidate, Tunable, tune_key
from cube import ABSOLUTE_POS, CUBE_POS, UNIT_POS, Comptime, Line, Tensor, cube

from .common import cdiv, is_cpu, line_size
from .rowops import block_reduce, lanes_max, lanes_sum
from .view import strided

F = typing.TypeVar("F")


@cube(launch=True, unchecked=True, nowrap=True)
def softmax_row(x: Tensor[Line[F]], out: Tensor[Line[F]], LOG: Comptime[bool]):
    L = cb.comptime(x.line_size())
    row = ABSOLUTE_POS
    if row < x.shape(0):
        cl = x.shape(1) // L
        bx = row * x.stride(0) // L
        bo = row * out.stride(0) // L
        mv = Line[F, L](-float("inf"))
        for j in range(cl):
            mv = max(mv, x[bx + j])
        m = lanes_max(mv, L)
        sv = Line[F, L](0)
        for j in range(cl):
            e = cb.exp(x[bx + j] - m)
            if not LOG:
                out[bo + j] = e
            sv += e
        s = lanes_sum(sv, L)
        if LOG:
            shift = m + cb.log(s)
            for j in range(cl):
                out[bo + j] = x[bx + j] - shift
        else:
            inv = F(1) / s
            for j in range(cl):
                out[bo + j] = out[bo + j] * inv


@cube(launch=True)
def softmax_shared(x: Tensor[F], out: Tensor[F], LOG: Comptime[bool], BLOCK: Comptime[int]):
    row = CUBE_POS
    n = x.shape(1)
    bx = row * x.stride(0)
    bo = row * out.stride(0)
    smem = cb.SharedMemory(F, BLOCK)
    mv = F(-float("inf"))
    for j in range(UNIT_POS, n, BLOCK):
        mv = max(mv, x[bx + j])
    m = block_reduce(smem, mv, BLOCK, True)
    sv = F(0)
    for j in range(UNIT_POS, n, BLOCK):
        sv += cb.exp(x[bx + j] - m)
    s = block_reduce(smem, sv, BLOCK, False)
    if LOG:
        shift = m + cb.log(s)
        for j in range(UNIT_POS, n, BLOCK):
            out[bo + j] = x[bx + j] - shift
    else:
        inv = F(1) / s
        for j in range(UNIT_POS, n, BLOCK):
            out[bo + j] = cb.exp(x[bx + j] - m) * inv


def _run_row(rt, x, out, log):
    rows, cols = x.shape
    lsz = line_size(rt, x.elem, cols, x.strides[0])
    dim = 1 if is_cpu(rt) else 64
    softmax_row.launch(rt, cube_count=cdiv(rows, dim), cube_dim=dim, x=x.lines(lsz),
                       out=out.lines(lsz), LOG=log)


def _run_shared(block: int):
    def run(rt, x, out, log):
        softmax_shared.launch(rt, cube_count=x.shape[0], cube_dim=block, x=x, out=out,
                              LOG=log, BLOCK=block)
    return run


SOFTMAX = Tunable("softmax", [
    Candidate("row", _run_row, lambda rt: 100 if is_cpu(rt) else 50),
    Candidate("shared_256", _run_shared(256), lambda rt: 10 if is_cpu(rt) else 100,
              lambda rt, *a: rt.features.max_cube_dim >= 256),
    Candidate("shared_32", _run_shared(32), lambda rt: 5 if is_cpu(rt) else 60),
])


def as_rows(x):
    """(rows, cols) view of x: the leading dims must collapse, the last be contiguous."""
    b = x.buffer
    cols = b.shape[-1] if b.shape else 1
    rows = b.size // cols if cols else 0
    if b.shape and b.strides[-1] != 1 and cols > 1:
        raise ValueError("the last axis must be contiguous")
    lead = [(n, s) for n, s in zip(b.shape[:-1], b.strides[:-1], strict=True) if n != 1]
    stride = lead[-1][1] if lead else cols
    acc = stride
    for n, s in reversed(lead):
        if s != acc:
            raise ValueError(f"the leading dims of a view with strides {b.strides} do not "
                             f"collapse into rows")
        acc *= n
    return strided(b, (rows, cols), (stride, 1))


def _launch(rt, x, out, log: bool):
    b = x.buffer
    if not b.elem.is_float:
        raise ValueError(f"softmax takes floats, got {b.elem}")
    out = rt.empty(b.shape, b.elem) if out is None else out
    if b.size == 0:
        return out
    x2, o2 = as_rows(b), as_rows(out)
    SOFTMAX(rt, tune_key("s", b.elem, [x2.shape]), x2, o2, log)
    return out


def softmax(rt, x, out=None):
    return _launch(rt, x, out, False)


def log_softmax(rt, x, out=None):
    return _launch(rt, x, out, True)


def reference(x: np.ndarray, log: bool = False) -> np.ndarray:
    x = x.astype(np.float64)
    z = x - x.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return z - lse if log else np.exp(z - lse)

"""A direct 1x1 conv2d (groups of 1): per image a matmul out (OC, P) = w (OC, C) @ x (C, P),
P = OH*OW, read and written in NCHW as it lies, no packing and no column buffer.

Each unit keeps an MR x NR register tile: MR output channels times NR lines of L
neighbouring pixels. Per input channel it loads NR lines of the input row and broadcasts MR
weights (w's rows read in place, MR streams along C), MR * NR FMAs; the output is stored as
whole lines (the blocked kernel's lines run along channels and it stores NCHW one lane at a
time). Cube x walks the output-channel blocks of one pixel block, so the pixel block's input
(NR*L pixels x C channels) stays in cache for all of them.

Stride or padding: the input is first gathered into (N, C, OH, OW) (`im2col_rows` with a
1x1 kernel), then the same matmul.
"""
from __future__ import annotations

import typing

import numpy as np

import cube as cb
from cube import CUBE_POS_X, CUBE_POS_Y, CUBE_POS_Z, Array, Comptime, Line, cube, u32

from .common import cdiv, is_cpu, line_size, registers, simd_bytes
from .epilogue import activate
from .im2col import im2col_rows
from .view import strided

F = typing.TypeVar("F")


@cube(launch=True, unchecked=True, nowrap=True)
def conv_1x1(x: Array[Line[F]], w: Array[F], bias: Array[F], out: Array[Line[F]], C: u32,
             OC: u32, PL: u32, MR: Comptime[int], NR: Comptime[int],
             HAS_BIAS: Comptime[bool], ACT: Comptime[str]):
    """x (N, C, P) and out (N, OC, P) as lines (PL lines a row), w (OC, C) contiguous.
    Cube x: block of MR output channels, y: block of NR pixel lines, z: image. Rows past OC
    read the last row (computed, not stored); lines past PL read the last line."""
    L = cb.comptime(x.line_size())
    oc0 = CUBE_POS_X * MR
    pl0 = CUBE_POS_Y * NR
    n = CUBE_POS_Z
    acc = cb.LocalArray(Line[F, L], MR * NR)
    for t in cb.range(MR * NR, unroll=True):
        acc[t] = Line[F, L](0)
    xv = cb.LocalArray(Line[F, L], NR)
    wr = cb.LocalArray(u32, MR)
    for i in cb.range(MR, unroll=True):
        wr[i] = min(oc0 + i, OC - 1) * C
    xo = cb.LocalArray(u32, NR)
    for j in cb.range(NR, unroll=True):
        xo[j] = n * C * PL + min(pl0 + j, PL - 1)
    for c in range(C):
        for j in cb.range(NR, unroll=True):
            xv[j] = x[xo[j] + c * PL]
        for i in cb.range(MR, unroll=True):
            a = Line[F, L](w[wr[i] + c])
            for j in cb.range(NR, unroll=True):
                acc[i * NR + j] = cb.fma(a, xv[j], acc[i * NR + j])
    for i in cb.range(MR, unroll=True):
        oc = oc0 + i
        if oc < OC:
            ob = (n * OC + oc) * PL
            for j in cb.range(NR, unroll=True):
                if pl0 + j < PL:
                    v = acc[i * NR + j]
                    if HAS_BIAS:
                        v += bias[oc]
                    out[ob + pl0 + j] = activate(v, ACT)


# (MR, NR) register tiles: MR*NR accumulators, NR input lines and a broadcast within the file
TILES = {32: ((6, 4), (8, 3), (12, 2), (4, 4)), 16: ((4, 3), (6, 2), (3, 4), (2, 2))}


def tile(rt, rank: int):
    """The rank-th (MR, NR) tile of the runtime's register file (None past the list)."""
    tiles = TILES[32 if registers(rt) >= 32 else 16]
    return tiles[rank] if rank < len(tiles) else None


def _lines(rt, elem, p: int) -> int:
    return line_size(rt, elem, p) if is_cpu(rt) or simd_bytes(rt) else 1


def valid(rank: int):
    """1x1, groups of 1, w's (OC, C) contiguous; on the CPU only whole SIMD lines of pixels
    (OH*OW of 49 or 196 would run lines of 1 or 4: 10x slower than the blocked tiles)."""
    def ok(rt, x, w, bias, out, cfg) -> bool:
        if not (cfg["G"] == 1 and cfg["KH"] == 1 and cfg["KW"] == 1
                and tuple(w.strides[:2]) == (w.shape[1], 1) and tile(rt, rank) is not None):
            return False
        p = out.shape[2] * out.shape[3]
        full = max(1, simd_bytes(rt) // np.dtype(x.elem.np).itemsize) if is_cpu(rt) else 1
        return _lines(rt, x.elem, p) >= full
    return ok


def run(rank: int):
    """A `conv2d` candidate: the rank-th tile; strided or padded 1x1 gathers its input."""
    def go(rt, x, w, bias, out, cfg):
        n, c, h, wd = x.shape
        _, oc, oh, ow = out.shape
        p = oh * ow
        geo = {k: cfg[k] for k in ("KH", "KW", "SH", "SW", "PH", "PW", "DH", "DW")}
        if not (geo == dict(KH=1, KW=1, SH=1, SW=1, PH=0, PW=0, DH=1, DW=1)
                and tuple(x.strides) == (c * h * wd, h * wd, wd, 1)):
            col = rt.empty((n, c, oh, ow), x.elem)
            dim = (1, 1, 1) if is_cpu(rt) else (64, 1, 1)
            im2col_rows.launch(rt, cube_count=(cdiv(oh, dim[0]), c, n), cube_dim=dim, x=x,
                               col=col, WUNIT=bool(x.strides[3] == 1 and cfg["SW"] == 1),
                               **geo)
            x = col
        mr, nr = tile(rt, rank)
        lsz = _lines(rt, x.elem, p)
        pl = p // lsz
        conv_1x1.launch(rt, cube_count=(cdiv(oc, mr), cdiv(pl, nr), n), cube_dim=1,
                        x=strided(x, (n, c, p), (c * p, p, 1)).lines(lsz), w=w,
                        bias=bias if bias is not None else w,
                        out=strided(out, (n, oc, p), (oc * p, p, 1)).lines(lsz), C=c,
                        OC=oc, PL=pl, MR=mr, NR=nr,
                        HAS_BIAS=bias is not None, ACT=cfg["ACT"])
    return go


# `cube check` (the library workload's 1x1 shapes run lines of 1-4, which the CPU refuses)
CUBE_CHECK = {
    "conv_1x1": [dict(comptime=dict(MR=6, NR=4, HAS_BIAS=False, ACT="none"),
                      line_size={"x": 4, "out": 4}),
                 dict(comptime=dict(MR=4, NR=3, HAS_BIAS=True, ACT="relu"),
                      line_size={"x": 4, "out": 4})],
}

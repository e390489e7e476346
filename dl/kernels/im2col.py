"""im2col gathers for the convolutions: the (G, C*KH*KW, N*OH*OW) column matrix of a
strided, padded input (`im2col`), the per-image (N, C*KH*KW, OH*OW) rows (`im2col_rows`)
and an output gradient's (C, N*OH*OW) rows (`grad_rows`),
shared by the general conv (`conv.py`) and the 1x1 kernel's strided or padded inputs
(`conv_1x1.py`): their own module, so neither of those imports the other."""
from __future__ import annotations

import typing

import cube as cb
from cube import (
    ABSOLUTE_POS,
    ABSOLUTE_POS_X,
    ABSOLUTE_POS_Y,
    ABSOLUTE_POS_Z,
    CUBE_POS_Y,
    Array,
    Comptime,
    Line,
    Tensor,
    cube,
    i32,
    u32,
)

from .common import cdiv, line_size

F = typing.TypeVar("F")


@cube(launch=True, unchecked=True)
def im2col(x: Tensor[F], col: Array[F], G: Comptime[int], KH: Comptime[int],
           KW: Comptime[int], SH: Comptime[int], SW: Comptime[int], PH: Comptime[int],
           PW: Comptime[int], DH: Comptime[int], DW: Comptime[int], OH: Comptime[int],
           OW: Comptime[int]):
    """col[g, (c*KH + kh)*KW + kw, (n*OH + oh)*OW + ow] = x[n, g*CG + c, h, w] (0 in padding);
    one unit per (g, c, n, oh, ow), the KH x KW taps unrolled. x walks the pixels, the cube's
    y the channels; the output size is compile-time, so no unit divides by a runtime value
    (which cost more than the copy on small images)."""
    cg = x.shape(1) // G
    npix = x.shape(0) * OH * OW
    pix = ABSOLUTE_POS_X
    gc = CUBE_POS_Y
    if pix < npix:
        ow = pix % OW
        oh = (pix // OW) % OH
        n = pix // (OW * OH)
        h0 = i32(oh * SH) - PH
        w0 = i32(ow * SW) - PW
        base = n * x.stride(0) + gc * x.stride(1)
        row0 = ((gc // cg) * cg * KH * KW + (gc % cg) * KH * KW) * npix + pix
        for kh in cb.range(KH, unroll=True):
            h = h0 + kh * DH
            for kw in cb.range(KW, unroll=True):
                w = w0 + kw * DW
                v = F(0)
                if h >= 0 and h < i32(x.shape(2)) and w >= 0 and w < i32(x.shape(3)):
                    v = x[base + u32(h) * x.stride(2) + u32(w) * x.stride(3)]
                col[row0 + (kh * KW + kw) * npix] = v


@cube(launch=True, unchecked=True)
def im2col_rows(x: Tensor[F], col: Tensor[F], KH: Comptime[int], KW: Comptime[int],
                SH: Comptime[int], SW: Comptime[int], PH: Comptime[int], PW: Comptime[int],
                DH: Comptime[int], DW: Comptime[int], WUNIT: Comptime[bool]):
    """col[n, (c*KH + kh)*KW + kw, oh*OW + ow] = x[n, c, h, w] (0 in padding), groups of 1;
    one unit per (oh, (c, kh, kw), n) from a 3-D grid (no divisions but the tap's), writing
    one contiguous row of OW columns: interior columns without bounds tests in a loop LLVM
    vectorises (WUNIT: unit strides along w in x), the padding columns as zeros."""
    oh = ABSOLUTE_POS_X
    r = ABSOLUTE_POS_Y
    n = ABSOLUTE_POS_Z
    if oh < col.shape(2) and r < col.shape(1) and n < col.shape(0):
        own = col.shape(3)
        kw = r % KW
        kh = (r // KW) % KH
        c = r // (KW * KH)
        h = i32(oh * SH) - PH + i32(kh * DH)
        ob = n * col.stride(0) + r * col.stride(1) + oh * col.stride(2)
        if h < 0 or h >= i32(x.shape(2)):
            for ow in range(own):
                col[ob + ow] = F(0)
        else:
            off = i32(kw * DW) - PW  # input column of ow is ow * SW + off
            wn = i32(x.shape(3))
            lo = i32(0)
            if off < 0:
                lo = (SW - 1 - off) // SW
            lo = min(lo, i32(own))
            hi = i32(0)
            if wn - off > 0:
                hi = (wn - off + SW - 1) // SW
            hi = max(min(hi, i32(own)), lo)
            xb = i32(n * x.stride(0) + c * x.stride(1) + u32(h) * x.stride(2))
            xs = i32(1) if WUNIT else i32(x.stride(3))
            for ow in range(u32(lo)):
                col[ob + ow] = F(0)
            xo = xb + off * xs
            for ow in range(u32(lo), u32(hi)):
                col[ob + ow] = x[u32(xo + i32(ow * SW) * xs)]
            for ow in range(u32(hi), own):
                col[ob + ow] = F(0)


@cube(launch=True)
def nchw_rows(g: Array[Line[F]], out: Array[Line[F]], C: u32, P: u32):
    """out (C, N, P) = g (N, C, P), contiguous, P counted in lines: one line per unit, read
    in g's order."""
    i = ABSOLUTE_POS
    if i < g.len():
        p = i % P
        t = i // P
        out[((t % C) * (g.len() // (C * P)) + t // C) * P + p] = g[i]


def grad_rows(rt, g):
    """An output gradient g (N, C, OH, OW), contiguous, as a new (C, N*OH*OW) buffer: the
    rows the matmul formulations of a conv's gradients read."""
    n, c, oh, ow = g.shape
    p = oh * ow
    lsz = line_size(rt, g.elem, p)
    out = rt.empty((c, n * p), g.elem)
    count = g.size // lsz
    flat = g.view((g.size,), (1,))  # lines along OH*OW: a row of pixels may be shorter
    nchw_rows.launch(rt, cube_count=cdiv(count, 256), cube_dim=256,
                     g=flat.lines(lsz), out=out.lines(lsz), C=c, P=p // lsz)
    return out

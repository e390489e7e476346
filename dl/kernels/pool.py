"""max_pool2d / avg_pool2d with kernel, stride, padding and dilation, NCHW or NHWC (a layout
is only a choice of strides: the kernel indexes (n, c, h, w) through them).

Candidates:
- `rows` (the CPU's): one unit per output row, interior columns without bounds tests in a
  loop LLVM vectorises (see `pool2d_rows`).
- `unit_D`: one unit per output element (per line of channels in NHWC, where channels are
  contiguous), cubes of D units; padding is skipped by a per-tap test. Output positions are
  numbered with w fastest (NCHW) or c fastest (NHWC), so neighbouring units read
  neighbouring memory.
Every candidate unrolls the KH x KW window at compile time and combines taps in the same
order (kh, then kw), so sums round identically whichever runs."""
from __future__ import annotations

import functools
import math
import typing

import numpy as np

import cube as cb
from autotune import Candidate, Tunable, tune_key
from cube import (
    ABSOLUTE_POS,
    ABSOLUTE_POS_X,
    ABSOLUTE_POS_Y,
    ABSOLUTE_POS_Z,
    Comptime,
    Line,
    Tensor,
    cube,
    i32,
    u32,
)

from .common import cdiv, is_cpu, line_size
from .view import permute, strided

F = typing.TypeVar("F")


@cube(launch=True, unchecked=True)
def pool2d(x: Tensor[Line[F]], out: Tensor[Line[F]], KH: Comptime[int], KW: Comptime[int],
           SH: Comptime[int], SW: Comptime[int], PH: Comptime[int], PW: Comptime[int],
           DH: Comptime[int], DW: Comptime[int], MAX: Comptime[bool], CLAST: Comptime[bool],
           COUNT_PAD: Comptime[bool]):
    """x (N, H, W, C) and out (N, OH, OW, C) in that index order, by strides (element units;
    lines run along C, which needs C contiguous: NHWC)."""
    L = cb.comptime(x.line_size())
    cl = out.shape(3) // L
    oh_n = out.shape(1)
    ow_n = out.shape(2)
    g = ABSOLUTE_POS
    c = g % cl
    t = g // cl
    ow = t % ow_n
    t = t // ow_n
    if not CLAST:
        ow = g % ow_n
        t = g // ow_n
        c = t // oh_n % cl
    oh = t % oh_n
    n = t // oh_n if CLAST else t // oh_n // cl
    if n < out.shape(0):
        h0 = i32(oh * SH) - PH
        w0 = i32(ow * SW) - PW
        hn = i32(x.shape(1))
        wn = i32(x.shape(2))
        # the launcher's line size divides the strides, so line units are exact
        xb = (n * x.stride(0) + c * L * x.stride(3)) // L
        ident = Line[F, L](-float("inf")) if MAX else Line[F, L](0)
        out[(n * out.stride(0) + oh * out.stride(1) + ow * out.stride(2)
             + c * L * out.stride(3)) // L] = _window(
            x, xb, x.stride(1) // L, x.stride(2) // L, h0, w0, hn, wn, ident, F,
            KH, KW, DH, DW, MAX, COUNT_PAD, PH, PW)


@cube
def u32_(v):
    return cb.cast(v, cb.u32)


# A NaN tap makes the window's max NaN, as PyTorch's max pool (Python's max keeps only a NaN
# that comes first): each window keeps Python's max (one maxps) and, beside it, whether a tap
# was NaN (cmpunordps, orps), applied once at its end. A select per tap instead cost 1.2-4x
# (the scalar candidates stopped vectorising).
@cube
def _nan_seen(seen, v):
    return seen | cb.isnan(v)


@cube
def _max_or_nan(acc, seen):
    """The window's max, or NaN where one of its taps was."""
    return cb.select(seen, math.nan, acc)


@cube
def padded_extent(start, K: Comptime[int], n, P: Comptime[int]):
    """The taps of a K-tap window from `start` before the padding's far edge (n + P along
    an axis of n): K, less a ceil_mode window's part past it (count_include_pad's divisor,
    PyTorch's). Forward and backward kernels share it."""
    return min(start + K, n + P) - start


@cube
def _window(x, xb, xs1, xs2, h0, w0, hn, wn, ident, T, KH: Comptime[int], KW: Comptime[int],
            DH: Comptime[int], DW: Comptime[int], MAX: Comptime[bool],
            COUNT_PAD: Comptime[bool], PH: Comptime[int], PW: Comptime[int]):
    """One output of a window at (h0, w0) with a bounds test per tap (line units); T is the
    kernel's element type."""
    acc = ident
    seen = cb.isnan(ident)  # False, shaped as a tap
    cnt = 0
    for kh in cb.range(KH, unroll=True):
        h = h0 + kh * DH
        for kw in cb.range(KW, unroll=True):
            w = w0 + kw * DW
            if h >= 0 and h < hn and w >= 0 and w < wn:
                v = x[xb + u32_(h) * xs1 + u32_(w) * xs2]
                if MAX:
                    acc = max(acc, v)
                    seen = _nan_seen(seen, v)
                else:
                    acc += v
                cnt += 1
    if MAX:
        acc = _max_or_nan(acc, seen)
    else:
        if COUNT_PAD:
            rows = padded_extent(h0, KH, hn, PH)
            cols = padded_extent(w0, KW, wn, PW)
            if rows * cols == KH * KW:
                acc = acc * T(1.0 / (KH * KW))
            else:  # a ceil_mode window past the padding: torch's divisor stops there
                acc = acc * (T(1.0) / T(rows * cols))
        else:
            acc = acc / T(max(cnt, 1))
    return acc


_SEG = 128  # outputs per column pass of the separable max (its tmp stays in L1)


def _sep_cols(kw: int, sw: int, dw: int) -> int:
    g = math.gcd(sw, dw)
    return ((_SEG - 1) * sw + (kw - 1) * dw) // g + 1


@cube
def _taps(x, xb, xs1, xs2, h0, w, hn, ident, KH: Comptime[int], KW: Comptime[int],
          DH: Comptime[int], DW: Comptime[int], MAX: Comptime[bool], HEDGE: Comptime[bool]):
    """The KH x KW window at input column w (all columns inside), rows h0 + kh*DH: with
    HEDGE some rows may be outside, so their (clamped, in-bounds) reads are replaced by the
    identity in a select (a loop-invariant condition: the loop over w still vectorises).
    Taps are combined in the per-element kernel's order, so sums round identically."""
    acc = ident
    seen = cb.isnan(ident)
    for kh in cb.range(KH, unroll=True):
        h = h0 + kh * DH
        if HEDGE:
            h = min(max(h, 0), hn - 1)
        r = xb + u32_(h) * xs1
        for kw in cb.range(KW, unroll=True):
            v = x[r + (w + kw * DW) * xs2]
            if HEDGE:
                v = cb.select(h0 + kh * DH >= 0 and h0 + kh * DH < hn, v, ident)
            if MAX:
                acc = max(acc, v)
                seen = _nan_seen(seen, v)
            else:
                acc += v
    if MAX:
        acc = _max_or_nan(acc, seen)
    return acc


@cube
def _row_span(x, out, xb, xs1, xs2, ob, os2, h0, hn, lo, hi, ident, div, KH: Comptime[int],
              KW: Comptime[int], SW: Comptime[int], PW: Comptime[int], DH: Comptime[int],
              DW: Comptime[int], MAX: Comptime[bool], COUNT_PAD: Comptime[bool],
              HEDGE: Comptime[bool]):
    """Output columns [lo, hi) of one row, all of whose windows lie inside along w; avg
    divides by div (as the per-element kernel does: a product by 1 / (KH*KW) with
    COUNT_PAD)."""
    for ow in range(lo, hi):
        acc = _taps(x, xb, xs1, xs2, h0, ow * SW - PW, hn, ident, KH, KW, DH, DW, MAX, HEDGE)
        if not MAX:
            if COUNT_PAD:
                acc = acc * div
            else:
                acc = acc / div
        out[ob + ow * os2] = acc


@cube
def _max_row_sep(x, out, tmp, xb, xs1, xs2, ob, os2, h0, hn, wn, own, ident,
                 KH: Comptime[int], KW: Comptime[int], SW: Comptime[int], PW: Comptime[int],
                 DH: Comptime[int], DW: Comptime[int], HEDGE: Comptime[bool]):
    """Max over one output row, separably (exact for max): a column pass (KH taps) into tmp,
    then a row pass (KW taps) over tmp: KH + KW maxima per output instead of KH * KW, and
    no bounds test at all: tmp holds the identity for columns in the padding. Only every
    G-th input column is read (G = gcd(SW, DW)); tmp holds SEG outputs' worth of columns.
    Both passes start from the identity and keep a NaN (_max_or_nan), as the per-element
    kernel."""
    G = cb.comptime(math.gcd(SW, DW))
    SEG = cb.comptime(_SEG)
    for ow0 in range(u32(0), own, SEG):
        cnt = min(own - ow0, u32(SEG))
        ncol = ((cnt - 1) * SW + (KW - 1) * DW) // G + 1
        w0 = i32(ow0 * SW) - PW  # tmp[j] is input column w0 + j * G
        jlo = min(u32(max((G - 1 - w0) // G, 0)), ncol)
        jhi = u32(max(min(i32(ncol), (wn - w0 + G - 1) // G), i32(jlo)))
        for j in range(jlo):
            tmp[j] = ident
        wlo = u32(w0 + i32(jlo) * G)
        for t in range(jhi - jlo):
            acc = ident
            seen = cb.isnan(ident)
            for kh in cb.range(KH, unroll=True):
                h = h0 + kh * DH
                if HEDGE:
                    h = min(max(h, 0), hn - 1)
                v = x[xb + u32_(h) * xs1 + (wlo + t * G) * xs2]
                if HEDGE:
                    v = cb.select(h0 + kh * DH >= 0 and h0 + kh * DH < hn, v, ident)
                acc = max(acc, v)
                seen = _nan_seen(seen, v)
            tmp[jlo + t] = _max_or_nan(acc, seen)
        for j in range(jhi, ncol):
            tmp[j] = ident
        for i in range(cnt):
            acc = ident
            seen = cb.isnan(ident)
            for kw in cb.range(KW, unroll=True):
                v = tmp[i * (SW // G) + kw * (DW // G)]
                acc = max(acc, v)
                seen = _nan_seen(seen, v)
            out[ob + (ow0 + i) * os2] = _max_or_nan(acc, seen)


@cube(launch=True, unchecked=True)
def pool2d_rows(x: Tensor[Line[F]], out: Tensor[Line[F]], KH: Comptime[int], KW: Comptime[int],
                SH: Comptime[int], SW: Comptime[int], PH: Comptime[int], PW: Comptime[int],
                DH: Comptime[int], DW: Comptime[int], MAX: Comptime[bool],
                COUNT_PAD: Comptime[bool], WUNIT: Comptime[bool], SEP: Comptime[bool]):
    """One unit per output row (n, oh, line of c), its position from a 3-D grid (no
    divisions). SEP (max only): `_max_row_sep`. Otherwise columns whose window lies inside
    the input run without bounds tests in a loop over w that LLVM vectorises along w (NCHW,
    WUNIT: w contiguous, lines of 1) or that moves lines of channels (NHWC); rows cut by the
    padding take the same loop with selects; the few edge columns take per-tap tests."""
    L = cb.comptime(x.line_size())
    oh = ABSOLUTE_POS_X
    c = ABSOLUTE_POS_Y
    n = ABSOLUTE_POS_Z
    if oh < out.shape(1) and c < out.shape(3) // L and n < out.shape(0):
        hn = i32(x.shape(1))
        wn = i32(x.shape(2))
        own = i32(out.shape(2))
        h0 = i32(oh * SH) - PH
        xb = (n * x.stride(0) + c * L * x.stride(3)) // L
        ob = (n * out.stride(0) + oh * out.stride(1) + c * L * out.stride(3)) // L
        xs1 = x.stride(1) // L
        xs2 = u32(1) if WUNIT else x.stride(2) // L
        os2 = u32(1) if WUNIT else out.stride(2) // L
        ident = Line[F, L](-float("inf")) if MAX else Line[F, L](0)
        full = h0 >= 0 and h0 + (KH - 1) * DH < hn  # every row of the window is inside
        if SEP:
            tmp = cb.LocalArray(Line[F, L], cb.comptime(_sep_cols(KW, SW, DW)))
            if full:
                _max_row_sep(x, out, tmp, xb, xs1, xs2, ob, os2, h0, hn, wn, u32(own), ident,
                             KH, KW, SW, PW, DH, DW, False)
            else:
                _max_row_sep(x, out, tmp, xb, xs1, xs2, ob, os2, h0, hn, wn, u32(own), ident,
                             KH, KW, SW, PW, DH, DW, True)
        else:
            # interior columns: ow * SW - PW >= 0 and ow * SW - PW + (KW - 1) * DW < wn
            lo = u32(min(cb.comptime((PW + SW - 1) // SW), own))
            hi = u32(max(min(own, (wn - 1 - (KW - 1) * DW + PW) // SW + 1), i32(lo)))
            if full:
                div = F(1.0 / (KH * KW)) if COUNT_PAD else F(KH * KW)
                _row_span(x, out, xb, xs1, xs2, ob, os2, h0, hn, lo, hi, ident, div,
                          KH, KW, SW, PW, DH, DW, MAX, COUNT_PAD, False)
            else:
                hcnt = 0
                for kh in cb.range(KH, unroll=True):
                    if h0 + kh * DH >= 0 and h0 + kh * DH < hn:
                        hcnt += KW
                div = F(max(hcnt, 1))
                if COUNT_PAD:
                    div = F(1.0 / (KH * KW))
                    hrows = padded_extent(h0, KH, hn, PH)
                    if hrows != KH:  # a ceil_mode row past the padding (see _window)
                        div = F(1.0) / F(hrows * KW)
                _row_span(x, out, xb, xs1, xs2, ob, os2, h0, hn, lo, hi, ident, div,
                          KH, KW, SW, PW, DH, DW, MAX, COUNT_PAD, True)
            # only the few edge columns (a test inside a loop over all of them would be
            # vectorised by LLVM into masked gathers)
            for e in range(lo + u32(own) - hi):
                ow = e if e < lo else hi + (e - lo)
                out[ob + ow * os2] = _window(x, xb, xs1, xs2, h0, i32(ow * SW) - PW, hn, wn,
                                             ident, F, KH, KW, DH, DW, MAX, COUNT_PAD,
                                             PH, PW)


def _run(dim_cpu: int, dim_gpu: int):
    def run(rt, x, out, cfg):
        n, oh, ow, c = out.shape
        clast = x.strides[3] == 1 and out.strides[3] == 1 and c > 1
        lsz = line_size(rt, x.elem, c, x.strides[0], x.strides[1], x.strides[2],
                        out.strides[0], out.strides[1], out.strides[2]) if clast else 1
        dim = dim_cpu if is_cpu(rt) else dim_gpu
        total = n * (c // lsz) * oh * ow
        lv = (lambda v: v.lines(lsz)) if lsz > 1 else (lambda v: v)
        pool2d.launch(rt, cube_count=cdiv(total, dim), cube_dim=dim, x=lv(x), out=lv(out),
                      **cfg, CLAST=bool(clast))
    return run


def _cpu_first(cpu: int, gpu: int):
    return lambda rt: cpu if is_cpu(rt) else gpu


def _run_rows(rt, x, out, cfg, sep=False):
    n, oh, ow, c = out.shape
    clast = x.strides[3] == 1 and out.strides[3] == 1 and c > 1
    lsz = line_size(rt, x.elem, c, x.strides[0], x.strides[1], x.strides[2],
                    out.strides[0], out.strides[1], out.strides[2]) if clast else 1
    wunit = x.strides[2] == 1 and out.strides[2] == 1
    dim = (1, 1, 1) if is_cpu(rt) else (64, 1, 1)
    lv = (lambda v: v.lines(lsz)) if lsz > 1 else (lambda v: v)
    pool2d_rows.launch(rt, cube_count=(cdiv(oh, dim[0]), c // lsz, n), cube_dim=dim,
                       x=lv(x), out=lv(out), **cfg, WUNIT=bool(wunit and lsz == 1),
                       SEP=sep)


POOL = Tunable("pool2d", [
    Candidate("rows_sep", functools.partial(_run_rows, sep=True), _cpu_first(130, 5),
              lambda rt, x, out, cfg: cfg["MAX"]),
    Candidate("rows", _run_rows, _cpu_first(120, 10)),
    Candidate("unit_64", _run(64, 64), 100),
    Candidate("unit_256", _run(256, 256), 90),
])


def _pair(v) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))


def out_size(n: int, k: int, s: int, p: int, d: int, ceil: bool = False) -> int:
    """Outputs along an axis of n inputs; ceil (a pool's ceil_mode): a last, partial window
    too, provided it starts inside the input or the left padding (PyTorch's rule)."""
    span = n + 2 * p - d * (k - 1) - 1
    if not ceil:
        return span // s + 1
    out = -(-span // s) + 1
    return out - 1 if (out - 1) * s >= n + p else out


def geometry(h: int, w: int, kernel, stride, padding, dilation, ceil_mode: bool = False
             ) -> tuple:
    """Validated (kh, kw, sh, sw, ph, pw, dh, dw, oh, ow) of a pool over an h x w input."""
    kh, kw = _pair(kernel)
    sh, sw = _pair(stride if stride is not None else kernel)
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    if min(kh, kw, sh, sw, dh, dw) < 1 or ph > kh // 2 or pw > kw // 2 or min(ph, pw) < 0:
        raise ValueError("pool2d: kernel/stride/dilation >= 1 and 0 <= padding <= kernel // 2")
    oh, ow = out_size(h, kh, sh, ph, dh, ceil_mode), out_size(w, kw, sw, pw, dw, ceil_mode)
    if oh < 1 or ow < 1:
        raise ValueError(f"pool2d: the window does not fit the {h}x{w} input")
    return kh, kw, sh, sw, ph, pw, dh, dw, oh, ow


def _pool(rt, x, kernel, stride, padding, dilation, layout, is_max, count_include_pad,
          ceil_mode=False):
    b = x.buffer
    if len(b.shape) != 4 or layout not in ("NCHW", "NHWC"):
        raise ValueError(f"pool2d takes a 4-D NCHW or NHWC input, got {b.shape} {layout}")
    xv = permute(b, (0, 2, 3, 1)) if layout == "NCHW" else b  # index order N, H, W, C
    n, h, w, c = xv.shape
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = geometry(h, w, kernel, stride, padding, dilation,
                                                      ceil_mode)
    if layout == "NCHW":
        out = rt.empty((n, c, oh, ow), b.elem)
        ov = permute(out, (0, 2, 3, 1))
    else:
        out = rt.empty((n, oh, ow, c), b.elem)
        ov = strided(out, out.shape, out.strides)
    if out.size == 0:
        return out
    cfg = dict(KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw, DH=dh, DW=dw, MAX=is_max,
               COUNT_PAD=bool(count_include_pad))
    key = tune_key("max" if is_max else "avg", b.elem, [xv.shape],
                   (layout, kh, kw, sh, sw, dh, dw))
    POOL(rt, key, xv, ov, cfg)
    return out


def max_pool2d(rt, x, kernel, stride=None, padding=0, dilation=1, layout="NCHW",
               ceil_mode=False):
    return _pool(rt, x, kernel, stride, padding, dilation, layout, True, False, ceil_mode)


def avg_pool2d(rt, x, kernel, stride=None, padding=0, layout="NCHW", count_include_pad=True,
               ceil_mode=False):
    return _pool(rt, x, kernel, stride, padding, 1, layout, False, count_include_pad,
                 ceil_mode)


def reference(x, kernel, stride=None, padding=0, dilation=1, is_max=True,
              count_include_pad=True, ceil_mode=False):
    """NCHW NumPy float64 reference (a window by a loop: ceil_mode's last windows clipped,
    with count_include_pad their divisor stops at the padding, as PyTorch's)."""
    kh, kw = _pair(kernel)
    sh, sw = _pair(stride if stride is not None else kernel)
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    x = x.astype(np.float64)
    n, c, h, w = x.shape
    oh, ow = out_size(h, kh, sh, ph, dh, ceil_mode), out_size(w, kw, sw, pw, dw, ceil_mode)
    out = np.empty((n, c, oh, ow))
    for i in range(oh):
        rows = range(i * sh - ph, i * sh - ph + (kh - 1) * dh + 1, dh)
        inside_rows = [r for r in rows if 0 <= r < h]
        for j in range(ow):
            cols = range(j * sw - pw, j * sw - pw + (kw - 1) * dw + 1, dw)
            taps = x[:, :, inside_rows][:, :, :, [q for q in cols if 0 <= q < w]]
            if is_max:
                out[:, :, i, j] = taps.max(axis=(2, 3))
                continue
            if count_include_pad:  # the window clipped at the padding's far edge
                div = (sum(r < h + ph for r in rows)) * (sum(q < w + pw for q in cols))
            else:
                div = taps.shape[2] * taps.shape[3]
            out[:, :, i, j] = taps.sum(axis=(2, 3)) / div
    return out

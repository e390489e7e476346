"""Pooling gradients (the forward passes are dl/kernels/pool.py).

The geometry (channels, sizes) is compile-time: a network pools a few fixed shapes, and
constant divisors turn the per-element index arithmetic into multiplies (runtime divisors
made these kernels cost more than the pooling itself).

- `max_pool2d_indices`: for each output, the flat position h * W + w of its window's first
  maximum, or its last NaN (PyTorch's `return_indices` and its NaN rule), one unit per
  output.
  `max_pool2d_indices_unpadded` is the same without padding (no bounds tests).
- `max_pool2d_backward_tiles`: windows that tile the input exactly (the common 2x2 stride 2),
  one unit per window writing its inputs.
- `max_pool2d_backward` / `avg_pool2d_backward`: one unit per *input* element, gathering the
  gradients of the windows that read it (a deterministic scatter: no atomics). A window
  reaches input h through tap kh when h + PH - kh * DH is a multiple of SH."""
from __future__ import annotations

import math
import typing

import cube as cb
from cube import ABSOLUTE_POS, Array, Comptime, Line, Tensor, cube, i32, u32

from .common import line_size
from .launch import launch_1d
from .pool import padded_extent
from .view import is_contiguous

F = typing.TypeVar("F")


@cube
def window_source(x, P: Comptime[int], k, D: Comptime[int], S: Comptime[int],
                  N: Comptime[int]):
    """The output position (along one axis) whose window reads input position x through
    tap k, or -1 when none does: x + P - k * D must be a non-negative multiple of S below
    N * S (N: the output size). Shared by the gradients that gather their windows (pools,
    col2im)."""
    t = i32(x) + P - k * D
    o = t // S
    r = i32(-1)
    if t >= 0 and t % S == 0 and o < i32(N):
        r = o
    return r


@cube(launch=True, unchecked=True)
def max_pool2d_indices(x: Tensor[F], y: Array[F], idx: Array[i32], C: Comptime[int],
                       OH: Comptime[int],
                       OW: Comptime[int], KH: Comptime[int],
                       KW: Comptime[int], SH: Comptime[int], SW: Comptime[int],
                       PH: Comptime[int], PW: Comptime[int], DH: Comptime[int],
                       DW: Comptime[int]):
    """x (N, C, H, W) by strides; y (the max) and idx (N, C, OH, OW) contiguous: the
    forward pass of a max pool that needs a gradient, in one launch."""
    g = ABSOLUTE_POS
    if g < idx.len():
        ow = g % OW
        oh = (g // OW) % OH
        c = (g // (OW * OH)) % C
        n = g // (OW * OH * C)
        base = n * x.stride(0) + c * x.stride(1)
        best = F(-float("inf"))
        best_i = i32(-1)
        for kh in cb.range(KH, unroll=True):
            h = i32(oh * SH) - PH + kh * DH
            for kw in cb.range(KW, unroll=True):
                w = i32(ow * SW) - PW + kw * DW
                if h >= 0 and h < i32(x.shape(2)) and w >= 0 and w < i32(x.shape(3)):
                    v = x[base + u32(h) * x.stride(2) + u32(w) * x.stride(3)]
                    # torch's rule (the last NaN wins) as selects, the value through
                    # Python's max (one maxss) and a NaN test LLVM predicts: an `if` on the
                    # two compares was a branch per tap, 1.5x slower on random data
                    nan = cb.isnan(v)
                    best_i = cb.select((v > best) | (best_i < 0) | nan,
                                       h * i32(x.shape(3)) + w, best_i)
                    best = cb.select(nan, v, max(best, v))
        idx[g] = best_i
        y[g] = best


@cube(launch=True, unchecked=True)
def max_pool2d_indices_unpadded(x: Tensor[F], y: Array[F], idx: Array[i32], C: Comptime[int],
                                OH: Comptime[int], OW: Comptime[int], W: Comptime[int],
                                KH: Comptime[int], KW: Comptime[int], SH: Comptime[int],
                                SW: Comptime[int], DH: Comptime[int], DW: Comptime[int]):
    """max_pool2d_indices without padding: every tap lies inside the input (no bounds
    tests, the first tap starts the maximum; 2-5x faster). W: the input's width."""
    g = ABSOLUTE_POS
    if g < idx.len():
        ow = g % OW
        oh = (g // OW) % OH
        nc = g // (OW * OH)
        base = (nc // C) * x.stride(0) + (nc % C) * x.stride(1)
        h0 = oh * SH
        w0 = ow * SW
        best = x[base + h0 * x.stride(2) + w0 * x.stride(3)]
        best_i = i32(h0 * W + w0)
        seen = cb.isnan(best)
        for kh in cb.range(KH, unroll=True):
            for kw in cb.range(KW, unroll=True):
                if kh + kw > 0:
                    h = h0 + kh * DH
                    w = w0 + kw * DW
                    v = x[base + h * x.stride(2) + w * x.stride(3)]
                    # torch's rule with no float select per tap (LLVM makes those
                    # branches): Python's max keeps a NaN best, `seen` a NaN tap, the index
                    # moves to a greater tap before any NaN, then to each later NaN
                    nan = cb.isnan(v)
                    best_i = cb.select(((v > best) & (not seen)) | nan, i32(h * W + w),
                                       best_i)
                    best = max(best, v)
                    seen = seen | nan
        if seen:
            best = F(math.nan)
        idx[g] = best_i
        y[g] = best


@cube(launch=True, unchecked=True)
def max_pool2d_backward_tiles(g: Array[F], idx: Array[i32], out: Array[F], W: Comptime[int],
                              OH: Comptime[int], OW: Comptime[int], KH: Comptime[int],
                              KW: Comptime[int]):
    """max_pool2d_backward where the windows tile the input exactly (stride = kernel, no
    padding or dilation, sizes divisible): one unit per window writes its KH x KW inputs,
    the gradient at the selected one and 0 elsewhere (10x faster than a unit per input
    gathering its windows)."""
    o = ABSOLUTE_POS
    if o < g.len():
        ow = o % OW
        oh = (o // OW) % OH
        base = (o // (OW * OH)) * (OH * KH * W)
        sel = idx[o]
        v = g[o]
        for kh in cb.range(KH, unroll=True):
            for kw in cb.range(KW, unroll=True):
                h = oh * KH + kh
                w = ow * KW + kw
                r = F(0)
                if i32(h * W + w) == sel:
                    r = v
                out[base + h * W + w] = r


def _tile_pos(t: int, lane: int, L: int, OW: int, KH: int, KW: int) -> int:
    """Where tap t (kh * KW + kw) of output lane `lane` lies among the KH * KW lines a
    tiled pool's line of L outputs reads (`max_pool2d_tiles_lines`): with OW < L the lines
    are L // OW whole output rows' inputs, one contiguous run; else KW lines of each of the
    KH input rows."""
    kh, kw = divmod(t, KW)
    if OW < L:
        return (lane // OW) * KH * KW * OW + kh * KW * OW + (lane % OW) * KW + kw
    return kh * KW * L + lane * KW + kw


def _tile_src(p: int, L: int, OW: int, KH: int, KW: int) -> int:
    """The (tap, lane) as tap * L + lane whose input lies at position p (`_tile_pos`'s
    inverse: the windows tile the lines exactly)."""
    for t in range(KH * KW):
        for lane in range(L):
            if _tile_pos(t, lane, L, OW, KH, KW) == p:
                return t * L + lane
    raise AssertionError(p)


@cube
def _tile_lines_at(q, OW: Comptime[int], KH: Comptime[int], KW: Comptime[int],
                   L: Comptime[int]):
    """The line index of the first input line of row kh = 0 for output line q (OW >= L;
    the rows kh follow KW * OW / L lines apart)."""
    j0 = q * L
    return ((j0 // OW) * KH * KW * OW + (j0 % OW) * KW) // L


@cube
def _tile_base(q, OH: Comptime[int], OW: Comptime[int], KH: Comptime[int],
               KW: Comptime[int], L: Comptime[int]):
    """Per lane of output line q: the flat position (h * W + w) of its window's first tap
    in its plane (torch's index before the tap's kh * W + kw)."""
    b = Line[i32, L](0)
    j0 = q * L
    for lane in cb.range(L, unroll=True):
        j = j0 + lane
        b[lane] = i32(((j // OW) % OH) * (KH * KW * OW) + (j % OW) * KW)
    return b


@cube(launch=True, unchecked=True)
def max_pool2d_tiles_lines(x: Array[Line[F]], y: Array[Line[F]], idx: Array[Line[i32]],
                           OH: Comptime[int], OW: Comptime[int], KH: Comptime[int],
                           KW: Comptime[int], INDICES: Comptime[bool]):
    """A max pool whose KH x KW windows tile a contiguous (N, C, OH * KH, OW * KW) input
    exactly (stride = kernel, the common 2x2), as lines: a unit per line of L outputs
    (contiguous in y and idx, L dividing OW or OW dividing L) reads its windows' KH * KW
    lines whole, gathers each tap's values into a line by lane shuffles and keeps the
    maximum and its index with torch's rule (the first maximum; the last NaN, and NaN), as
    `max_pool2d_indices_unpadded` does a value at a time (a unit per output of scalar code
    took 55 us for the digits CNN's 64x16x8x8). Without INDICES, idx is not written (a
    pool that needs no gradient)."""
    L = cb.comptime(y.line_size())
    T = cb.comptime(KH * KW)
    W = cb.comptime(KW * OW)
    q = ABSOLUTE_POS
    if q < y.len():
        src = cb.LocalArray(Line[F, L], T)
        if OW < L:
            for t in cb.range(T, unroll=True):
                src[t] = x[q * T + t]
        else:
            at = _tile_lines_at(q, OW, KH, KW, L)
            for kh in cb.range(KH, unroll=True):
                for kw in cb.range(KW, unroll=True):
                    src[kh * KW + kw] = x[at + kh * (W // L) + kw]
        best = Line[F, L](0)
        bi = Line[i32, L](0)
        seen = cb.isnan(best)
        for t in cb.range(T, unroll=True):
            v = Line[F, L](0)
            for lane in cb.range(L, unroll=True):
                p = cb.comptime(_tile_pos(t, lane, L, OW, KH, KW))
                line = src[p // L]
                v[lane] = line[p % L]
            off = Line[i32, L](cb.comptime((t // KW) * W + t % KW))
            if t == 0:
                best = v
                bi = off
                seen = cb.isnan(v)
            else:
                nan = cb.isnan(v)
                bi = cb.select((v > best) & (seen == False) | nan, off, bi)  # noqa: E712
                best = max(best, v)
                seen = seen | nan
        y[q] = cb.select(seen, math.nan, best)
        if INDICES:
            idx[q] = _tile_base(q, OH, OW, KH, KW, L) + bi


@cube(launch=True, unchecked=True)
def max_pool2d_backward_tiles_lines(g: Array[Line[F]], idx: Array[Line[i32]],
                                    out: Array[Line[F]], OH: Comptime[int], OW: Comptime[int],
                                    KH: Comptime[int], KW: Comptime[int]):
    """`max_pool2d_backward_tiles` as lines (`max_pool2d_tiles_lines`'s layout): each tap's
    gradients (g where idx selects the tap, else 0) as a line, shuffled back into the
    windows' KH * KW input lines and stored whole."""
    L = cb.comptime(g.line_size())
    T = cb.comptime(KH * KW)
    W = cb.comptime(KW * OW)
    q = ABSOLUTE_POS
    if q < g.len():
        gv = g[q]
        rel = idx[q] - _tile_base(q, OH, OW, KH, KW, L)
        vals = cb.LocalArray(Line[F, L], T)
        for t in cb.range(T, unroll=True):
            off = Line[i32, L](cb.comptime((t // KW) * W + t % KW))
            vals[t] = cb.select(rel == off, gv, Line[F, L](0))
        at = u32(0)
        if OW >= L:
            at = _tile_lines_at(q, OW, KH, KW, L)
        for d in cb.range(T, unroll=True):
            o = Line[F, L](0)
            for m in cb.range(L, unroll=True):
                s = cb.comptime(_tile_src(d * L + m, L, OW, KH, KW))
                line = vals[s // L]
                o[m] = line[s % L]
            if OW < L:
                out[q * T + d] = o
            else:
                out[at + (d // KW) * (W // L) + d % KW] = o


@cube(launch=True, unchecked=True)
def max_pool2d_backward(g: Array[F], idx: Array[i32], out: Array[F], H: Comptime[int],
                        W: Comptime[int], OH: Comptime[int], OW: Comptime[int],
                        KH: Comptime[int], KW: Comptime[int],
                        SH: Comptime[int], SW: Comptime[int], PH: Comptime[int],
                        PW: Comptime[int], DH: Comptime[int], DW: Comptime[int]):
    """g, idx (N, C, OH, OW) and out (N, C, H, W), all contiguous."""
    i = ABSOLUTE_POS
    if i < out.len():
        w = i % W
        h = (i // W) % H
        nc = i // (W * H)
        me = i32(h * W + w)
        acc = F(0)
        for kh in cb.range(KH, unroll=True):
            oh = window_source(h, PH, kh, DH, SH, OH)
            if oh >= 0:
                for kw in cb.range(KW, unroll=True):
                    ow = window_source(w, PW, kw, DW, SW, OW)
                    if ow >= 0:
                        o = (nc * OH + u32(oh)) * OW + u32(ow)
                        if idx[o] == me:
                            acc += g[o]
        out[i] = acc


@cube(launch=True, unchecked=True)
def avg_pool2d_backward(g: Array[F], out: Array[F], H: Comptime[int], W: Comptime[int],
                        OH: Comptime[int], OW: Comptime[int], KH: Comptime[int],
                        KW: Comptime[int], SH: Comptime[int], SW: Comptime[int],
                        PH: Comptime[int], PW: Comptime[int],
                        COUNT_PAD: Comptime[bool]):
    """g (N, C, OH, OW) and out (N, C, H, W), contiguous; each window's gradient is shared
    by its divisor (KH * KW, less a ceil_mode window's part past the padding; or its taps
    inside the input without COUNT_PAD)."""
    i = ABSOLUTE_POS
    if i < out.len():
        w = i % W
        h = (i // W) % H
        nc = i // (W * H)
        acc = F(0)
        for kh in cb.range(KH, unroll=True):
            oh = window_source(h, PH, kh, 1, SH, OH)
            if oh >= 0:
                for kw in cb.range(KW, unroll=True):
                    ow = window_source(w, PW, kw, 1, SW, OW)
                    if ow >= 0:
                        h0 = oh * SH - PH
                        w0 = ow * SW - PW
                        if COUNT_PAD:  # the window up to the padding's far edge (ceil_mode)
                            rows = padded_extent(h0, KH, i32(H), PH)
                            cols = padded_extent(w0, KW, i32(W), PW)
                        else:
                            rows = min(h0 + KH, i32(H)) - max(h0, 0)
                            cols = min(w0 + KW, i32(W)) - max(w0, 0)
                        div = F(rows * cols)
                        acc += g[(nc * OH + u32(oh)) * OW + u32(ow)] / div
        out[i] = acc


def _tiles_line(rt, t, geo: tuple, shape: tuple | None = None) -> int:
    """The line size of the tiled-window kernels (`max_pool2d_tiles_lines`) for a pool of
    geometry geo over an input of `shape` (t's own by default), or 1 where they do not
    apply: windows that do not tile the input exactly, or no line of at least 4 outputs
    that lies within a row or spans whole rows."""
    n, c, h, w = shape or t.shape
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = geo
    if (kh, kw) != (sh, sw) or ph or pw or dh != 1 or dw != 1 or h != oh * kh or \
            w != ow * kw:
        return 1
    lsz = line_size(rt, t.elem, n * c * oh * ow)
    while lsz > 1 and ow % lsz and lsz % ow:
        lsz //= 2
    return lsz if lsz >= 4 else 1


def _flat(b, lsz: int):
    """A contiguous buffer (view) b as one row of lines of lsz."""
    n = 1
    for d in b.shape:
        n *= d
    return b.view((n,), (1,)).lines(lsz)


def tiles_line(rt, x, geo: tuple) -> int:
    """`_tiles_line` for a max pool's input x (a library operand): 1 unless x is contiguous
    too (the tiled kernels read it as one row of lines)."""
    return _tiles_line(rt, x, geo) if is_contiguous(x) else 1


def max_pool_tiled(rt, x, geo: tuple, lsz: int):
    """The maxima (no indices: no gradient needed) of a pool whose `tiles_line` is lsz > 1."""
    n, c, h, w = x.shape
    kh, kw, oh, ow = geo[0], geo[1], geo[8], geo[9]
    y, nothing = rt.empty((n, c, oh, ow), x.elem), rt.empty((lsz,), i32)
    launch_1d(max_pool2d_tiles_lines, rt, y.size // lsz, x=_flat(x, lsz), y=_flat(y, lsz),
              idx=nothing.lines(lsz), OH=oh, OW=ow, KH=kh, KW=kw, INDICES=False)
    return y


def max_pool_with_indices(rt, x, geo: tuple):
    """(y, idx) buffers of a max pool's maxima and their positions (the forward pass that
    needs a gradient) for x (N, C, H, W) by strides; geo: `pool.geometry`'s tuple. A
    library call (one key per shape): a dispatch plan replays it."""
    n, c, h, w = x.shape
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = geo
    y, idx = rt.empty((n, c, oh, ow), x.elem), rt.empty((n, c, oh, ow), i32)
    lsz = tiles_line(rt, x, geo)
    if lsz > 1:
        launch_1d(max_pool2d_tiles_lines, rt, idx.size // lsz, x=_flat(x, lsz),
                  y=_flat(y, lsz), idx=_flat(idx, lsz), OH=oh, OW=ow, KH=kh, KW=kw,
                  INDICES=True)
    elif ph == 0 and pw == 0 and (oh - 1) * sh + (kh - 1) * dh < h and \
            (ow - 1) * sw + (kw - 1) * dw < w:  # every tap inside (not so with ceil_mode)
        launch_1d(max_pool2d_indices_unpadded, rt, idx.size, x=x, y=y, idx=idx, C=c, OH=oh,
                  OW=ow, W=w, KH=kh, KW=kw, SH=sh, SW=sw, DH=dh, DW=dw)
    else:
        launch_1d(max_pool2d_indices, rt, idx.size, x=x, y=y, idx=idx, C=c, OH=oh, OW=ow,
                  KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw, DH=dh, DW=dw)
    return y, idx


def max_pool_grad(rt, g, idx, x_shape: tuple, geo: tuple):
    """The input's gradient of a max pool: g and idx (N, C, OH, OW) contiguous buffers."""
    n, c, h, w = x_shape
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = geo
    gx = rt.empty(tuple(x_shape), g.elem)
    lsz = _tiles_line(rt, g, geo, x_shape)
    if lsz > 1:
        launch_1d(max_pool2d_backward_tiles_lines, rt, g.size // lsz, g=_flat(g, lsz),
                  idx=_flat(idx, lsz), out=_flat(gx, lsz), OH=oh, OW=ow, KH=kh, KW=kw)
    elif (kh, kw) == (sh, sw) and ph == pw == 0 and dh == dw == 1 and h == oh * kh and \
            w == ow * kw:  # the windows tile the input exactly
        launch_1d(max_pool2d_backward_tiles, rt, g.size, g=g, idx=idx, out=gx, W=w, OH=oh,
                  OW=ow, KH=kh, KW=kw)
    else:
        launch_1d(max_pool2d_backward, rt, gx.size, g=g, idx=idx, out=gx, H=h, W=w, OH=oh,
                  OW=ow, KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw, DH=dh, DW=dw)
    return gx

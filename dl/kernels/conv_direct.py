"""Direct conv2d (groups of 1) in a blocked layout: no column buffer.

Each unit keeps an RW x NB register tile: RW neighbouring output pixels of one output row
times NB lines of L output channels (L: the SIMD width, 16 f32 on AVX-512). Per input
channel and tap it loads NB weight lines and broadcasts RW input scalars, RW * NB FMAs.

- weights are packed once per call into `OIhw{NB*L}o` panels (`pack_weights`): for a group
  of NB*L output channels, the (c, kh, kw) steps in order, NB lines each, zero past OC, so
  the unit's weight stream is contiguous. FLIP packs the transposed, spatially flipped
  weights that an input gradient convolves with.
- the input is read as scalars straight from NCHW (any stride or dilation alike); the
  padding is never materialised: rows outside the image are skipped, and only tiles at
  the left/right edges test their columns (a padded copy cost ~10% of the conv).
- the output is written NCHW, one scalar per lane (~7% of the tile's work: a lane extract
  and a store each; the language has no in-register transpose).

The weight gradient (`conv_wgrad_blocked`) turns the tile around: one unit per input
channel and NB lines of output channels keeps KH*KW*NB line accumulators while it walks
every pixel of the output gradient, read pixel-major (`pixel_major`: output channels
contiguous), broadcasting the input under each tap (no column buffer).
"""
from __future__ import annotations

import typing

import numpy as np

import cube as cb
from cube import (
    ABSOLUTE_POS,
    CUBE_DIM_X,
    CUBE_POS_X,
    CUBE_POS_Y,
    CUBE_POS_Z,
    UNIT_POS_X,
    Array,
    Comptime,
    Line,
    Tensor,
    cube,
    i32,
    u32,
)

from . import reduce
from .common import cdiv, is_cpu, line_size, registers, simd_bytes
from .epilogue import activate
from .rowops import transpose_lines
from .view import is_contiguous, strided

F = typing.TypeVar("F")


@cube(launch=True, unchecked=True, nowrap=True)
def conv_blocked(x: Tensor[F], w: Array[Line[F]], bias: Array[F], out: Tensor[F],
                 outl: Array[Line[F]], KH: Comptime[int], KW: Comptime[int],
                 SH: Comptime[int], SW: Comptime[int],
                 PH: Comptime[int], PW: Comptime[int], DH: Comptime[int], DW: Comptime[int],
                 RW: Comptime[int], NB: Comptime[int], HAS_BIAS: Comptime[bool],
                 ACT: Comptime[str], LINES: Comptime[bool], OUT0: u32):
    """x (N, C, H, W), unit stride along w; w: `pack_weights`' panels; out (N, OC, OH, OW)
    from element OUT0 of its buffer (a strided input gradient writes one phase of it).
    LINES: out is also `outl`, the same contiguous memory as lines of RW pixels (OW a
    multiple of RW, OUT0 0): the tile goes out as one line per channel, its lanes gathered
    from the accumulators (LLVM's shuffles), instead of RW * NB * L scalar stores (~15% of a
    64-channel 3x3 conv at 56x56 with AVX2). Otherwise outl is unused.
    Cube x: (output row, RW-pixel tile), y: group of NB*L output channels, z: image.
    Padding is never read: a kernel row outside the image is skipped (one test per row and
    channel, the same for the whole tile), and a tile whose columns reach past either side
    tests each input column; interior tiles test nothing."""
    L = cb.comptime(w.line_size())
    ow_n = out.shape(3)
    oc_n = out.shape(1)
    c_n = x.shape(1)
    h_n = i32(x.shape(2))
    w_n = i32(x.shape(3))
    tiles = (ow_n + RW - 1) // RW
    oh = CUBE_POS_X // tiles
    ow0 = (CUBE_POS_X % tiles) * RW
    grp = CUBE_POS_Y
    n = CUBE_POS_Z
    if oh < out.shape(2):
        sx2 = x.stride(2)
        h0 = i32(oh * SH) - PH
        c0 = i32(ow0 * SW) - PW  # the tile's first input column
        span = cb.comptime((RW - 1) * SW + (KW - 1) * DW + 1)  # columns the tile reads
        inside = c0 >= 0 and c0 + span <= w_n
        acc = cb.LocalArray(Line[F, L], RW * NB)
        for t in cb.range(RW * NB, unroll=True):
            acc[t] = Line[F, L](0)
        wv = cb.LocalArray(Line[F, L], KW * NB)
        wo = grp * c_n * (KH * KW * NB)
        xo = n * x.stride(0)
        for _ in range(c_n):
            for kh in cb.range(KH, unroll=True):
                h = h0 + kh * DH
                if h >= 0 and h < h_n:
                    for q in cb.range(KW * NB, unroll=True):
                        wv[q] = w[wo + kh * KW * NB + q]
                    # input columns in order, each broadcast once into every (pixel, tap)
                    # that reads it: taps in order read the same column again, and LLVM
                    # kept those loads live across taps (spilling accumulators)
                    if inside:  # one base, the columns at constant distances from it
                        xr = xo + u32(h) * sx2 + u32(c0)
                        for u in cb.range(span, unroll=True):
                            a = Line[F, L](x[xr + u])
                            for kw in cb.range(KW, unroll=True):
                                if cb.comptime(_reads(u, kw, RW, SW, DW)):
                                    r = cb.comptime((u - kw * DW) // SW)
                                    for j in cb.range(NB, unroll=True):
                                        acc[r * NB + j] = cb.fma(a, wv[kw * NB + j],
                                                                 acc[r * NB + j])
                    else:
                        xr = xo + u32(h) * sx2
                        for u in cb.range(span, unroll=True):
                            col = c0 + u
                            if col >= 0 and col < w_n:
                                a = Line[F, L](x[xr + u32(col)])
                                for kw in cb.range(KW, unroll=True):
                                    if cb.comptime(_reads(u, kw, RW, SW, DW)):
                                        r = cb.comptime((u - kw * DW) // SW)
                                        for j in cb.range(NB, unroll=True):
                                            acc[r * NB + j] = cb.fma(a, wv[kw * NB + j],
                                                                     acc[r * NB + j])
            xo += x.stride(1)
            wo += KH * KW * NB
        so = OUT0 + n * out.stride(0) + oh * out.stride(2)
        oc0 = grp * NB * L
        s1 = out.stride(1)
        if LINES:
            plane = out.shape(2) * (ow_n // RW)  # lines of one output channel
            lo = (n * oc_n + oc0) * plane + oh * (ow_n // RW) + ow0 // RW
            for j in cb.range(NB, unroll=True):
                for q in cb.range(L, unroll=True):
                    oc = oc0 + j * L + q
                    if oc < oc_n:
                        v = Line[F, RW](0)
                        for r in cb.range(RW, unroll=True):
                            v[r] = acc[r * NB + j][q]
                        if HAS_BIAS:
                            v += bias[oc]
                        outl[lo + (j * L + q) * plane] = activate(v, ACT)
        elif oc0 + NB * L <= oc_n and ow0 + RW <= ow_n:  # a whole tile: no test per store
            for r in cb.range(RW, unroll=True):
                po = so + (ow0 + r) * out.stride(3) + oc0 * s1
                for j in cb.range(NB, unroll=True):
                    v = acc[r * NB + j]
                    for q in cb.range(L, unroll=True):
                        e = v[q]
                        if HAS_BIAS:
                            e += bias[oc0 + j * L + q]
                        out[po + (j * L + q) * s1] = activate(e, ACT)
        else:
            for r in cb.range(RW, unroll=True):
                ow = ow0 + r
                if ow < ow_n:
                    po = so + ow * out.stride(3)
                    for j in cb.range(NB, unroll=True):
                        v = acc[r * NB + j]
                        for q in cb.range(L, unroll=True):
                            oc = oc0 + j * L + q
                            if oc < oc_n:
                                e = v[q]
                                if HAS_BIAS:
                                    e += bias[oc]
                                out[po + oc * s1] = activate(e, ACT)


def _reads(u: int, kw: int, rw: int, sw: int, dw: int) -> bool:
    """Whether tap kw of some pixel r < rw reads input column u (u = r*sw + kw*dw)."""
    d = u - kw * dw
    return d >= 0 and d % sw == 0 and d // sw < rw


@cube(launch=True, unchecked=True, nowrap=True)
def pack_weights(w: Tensor[F], out: Array[F], NB: Comptime[int], L: Comptime[int],
                 FLIP: Comptime[bool], KH: Comptime[int], KW: Comptime[int], W0: u32):
    """w (OC, C, KH, KW) -> out[((g * C + c) * KH*KW + kh*KW + kw) * NB*L + o] =
    w[g*NB*L + o, c, kh, kw] (0 past OC); one unit per (c: cube x, g: cube y) writes its
    KH*KW*NB*L panel rows, each output channel's KH*KW taps (contiguous in w) in turn.
    FLIP: the input gradient's weights, out channels C and in channels OC:
    w[c, g*NB*L + o, KH-1-kh, KW-1-kw]. w starts at element W0 of its buffer.
    (A unit per (g, c, kh, kw) run of NB*L, its position split by four runtime divisions,
    spent ~25 ns a run: 1.9 ms for 512x512x3x3, half of that conv.)"""
    c = CUBE_POS_X
    g = CUBE_POS_Y
    oc_n = w.shape(1) if FLIP else w.shape(0)
    c_n = w.shape(0) if FLIP else w.shape(1)
    blk = NB * L
    if c < c_n:
        so = w.stride(1) if FLIP else w.stride(0)
        src = W0 + (c * w.stride(0) if FLIP else c * w.stride(1))
        ob = (g * c_n + c) * (KH * KW * blk)
        for o in range(blk):
            oc = g * blk + o
            if oc < oc_n:
                s = src + oc * so
                for kh in cb.range(KH, unroll=True):
                    for kw in cb.range(KW, unroll=True):
                        if FLIP:
                            v = w[s + (KH - 1 - kh) * w.stride(2) + (KW - 1 - kw) * w.stride(3)]
                        else:
                            v = w[s + kh * w.stride(2) + kw * w.stride(3)]
                        out[ob + (kh * KW + kw) * blk + o] = v
            else:
                for k in cb.range(KH * KW, unroll=True):
                    out[ob + k * blk + o] = F(0)


@cube(launch=True, unchecked=True)
def pad_input(x: Tensor[F], out: Tensor[F], PH: Comptime[int], PW: Comptime[int]):
    """out (N, C, Hp, Wp) = x shifted by (PH, PW), zero around it; one unit per (n, c)
    plane (a unit per row spent more on its launch than on the copy), the interior of each
    row copied in a loop LLVM vectorises."""
    nc = ABSOLUTE_POS
    if nc < out.shape(0) * out.shape(1):
        wp_n = out.shape(3)
        w_n = x.shape(3)
        h_n = i32(x.shape(2))
        hi = min(w_n + PW, wp_n)
        xb = (nc // x.shape(1)) * x.stride(0) + (nc % x.shape(1)) * x.stride(1)
        for hp in range(out.shape(2)):
            ob = nc * out.stride(1) + hp * out.stride(2)
            h = i32(hp) - PH
            if h < 0 or h >= h_n:
                for q in range(wp_n):
                    out[ob + q] = F(0)
            else:
                xr = xb + u32(h) * x.stride(2)
                for q in range(PW):
                    out[ob + q] = F(0)
                if x.stride(3) == 1:
                    for q in range(PW, hi):
                        out[ob + q] = x[xr + q - PW]
                else:
                    for q in range(PW, hi):
                        out[ob + q] = x[xr + (q - PW) * x.stride(3)]
                for q in range(hi, wp_n):
                    out[ob + q] = F(0)


def _line(rt, elem) -> int:
    return line_size(rt, elem, 1 << 20)


def tile_width(rt, ow: int, kw: int, nb: int) -> int:
    """RW for an NB-line tile: the accumulators, a kernel row's KW x NB weight lines and the
    broadcast input fit the register file; of those widths, the one with the fewest pixels
    computed per row (the last tile's waste) plus one per tile (its fixed cost: weight
    loads, stores); on a tie, a width whose tiles go out as lines (`line_store`), then the
    widest. 0: NB lines do not fit."""
    most = min((registers(rt) - 2 - kw * nb) // nb, ow)  # one spare: a full file spilled
    if most < 1:
        return 0
    return min(range(1, most + 1), key=lambda r: (cdiv(ow, r) * (r + 1),
                                                  not _line_width(rt, r, ow, 4), -r))


def unit_w(rt, x):
    """x, or a contiguous copy when its w stride is not 1 (the kernel's constant offsets)."""
    if x.strides[3] == 1 or x.shape[3] == 1:
        return x
    n, c, h, w = x.shape
    out = rt.empty((n, c, h, w), x.elem)
    dim = 1 if is_cpu(rt) else 64
    pad_input.launch(rt, cube_count=cdiv(n * c, dim), cube_dim=dim, x=x, out=out, PH=0, PW=0)
    return out


def packed(rt, w, nb: int, flip: bool = False, w0: int = 0):
    """`pack_weights`' panels of w (from element w0 of its buffer) as lines of the runtime's
    width."""
    lsz = _line(rt, w.elem)
    oc = w.shape[1] if flip else w.shape[0]
    c, kh, kw = (w.shape[0] if flip else w.shape[1]), w.shape[2], w.shape[3]
    total = cdiv(oc, nb * lsz) * c * kh * kw * nb * lsz
    out = rt.empty((total,), w.elem)
    pack_weights.launch(rt, cube_count=(c, cdiv(oc, nb * lsz)), cube_dim=1, w=w, out=out,
                        NB=nb, L=lsz, FLIP=flip, KH=kh, KW=kw, W0=w0)
    return out.lines(lsz)


def conv(rt, x, wp, bias, out, geo: dict, rw: int, nb: int, act: str = "none",
         out0: int = 0):
    """out = act(conv(x, weights) + bias), x with unit w stride, wp from `packed`, out from
    element out0 of its buffer."""
    n, oc, oh, ow = out.shape
    lsz = wp.line_size
    lines = line_store(rt, out, rw, out0)
    conv_blocked.launch(rt, cube_count=(oh * cdiv(ow, rw), cdiv(oc, nb * lsz), n),
                        cube_dim=1, x=x, w=wp, bias=bias if bias is not None else wp.buffer,
                        out=out, outl=out.lines(rw) if lines else wp, RW=rw, NB=nb,
                        HAS_BIAS=bias is not None, ACT=act, LINES=lines, OUT0=out0, **geo)


def line_store(rt, out, rw: int, out0: int) -> bool:
    """Whether `conv_blocked` stores its tiles as lines of RW pixels: a line width
    (`_line_width`), out contiguous from its buffer's start."""
    return out0 == 0 and _line_width(rt, rw, out.shape[3], np.dtype(out.elem.np).itemsize) \
        and is_contiguous(out)


def _line_width(rt, rw: int, ow: int, itemsize: int) -> bool:
    """RW pixels make a line: a power of two above 1 that fits a SIMD register and divides
    OW."""
    return 1 < rw and rw & (rw - 1) == 0 and rw * itemsize <= simd_bytes(rt) and ow % rw == 0


def run(nb: int):
    """A `conv2d` candidate with tiles of NB lines of output channels: pad, pack, convolve."""
    def go(rt, x, w, bias, out, cfg):
        rw = tile_width(rt, out.shape[3], cfg["KW"], nb)
        geo = {k: cfg[k] for k in ("KH", "KW", "SH", "SW", "PH", "PW", "DH", "DW")}
        conv(rt, unit_w(rt, x), packed(rt, w, nb), bias, out, geo, rw, nb, cfg["ACT"])
    return go


def needed(rt, channels: int, nb: int, elem) -> bool:
    """Whether NB lines of output channels are not just padding past NB - 1: at most
    (NB - 1) * L channels fit a narrower tile in as many groups, and the NB-line tile would
    compute zeros (16 channels on AVX-512: blocked_2 computed twice the work, 1.9-2.5x the
    time of blocked_1 at 64x1x8x8 and 64x1x28x28)."""
    return nb == 1 or channels > (nb - 1) * _line(rt, elem)


def valid(nb: int):
    def ok(rt, x, w, bias, out, cfg) -> bool:
        return cfg["G"] == 1 and tile_width(rt, out.shape[3], cfg["KW"], nb) > 0 \
            and needed(rt, out.shape[1], nb, out.elem)
    return ok


def grad_input_ok(rt, g, g_rows, w, out, cfg, nb: int = 2) -> bool:
    """A stride-1 convolution's input gradient is a direct conv of the output gradient
    (padded by D*(K-1) - P, so P may not exceed the kernel's reach) with the flipped,
    transposed weights."""
    return (cfg["SH"], cfg["SW"]) == (1, 1) \
        and cfg["DH"] * (cfg["KH"] - 1) >= cfg["PH"] and cfg["DW"] * (cfg["KW"] - 1) >= cfg["PW"] \
        and tile_width(rt, out.shape[3], cfg["KW"], nb) > 0 \
        and needed(rt, out.shape[1], nb, out.elem)


def grad_input(nb: int):
    """A candidate of the input gradient (args: the output gradient g (N, OC, OH, OW), its
    (OC, N*OH*OW) rows, the weights, out (N, C, H, W), the geometry)."""
    def go(rt, g, g_rows, w, out, cfg):
        kh, kw, dh, dw = cfg["KH"], cfg["KW"], cfg["DH"], cfg["DW"]
        qh, qw = dh * (kh - 1) - cfg["PH"], dw * (kw - 1) - cfg["PW"]
        rw = tile_width(rt, out.shape[3], kw, nb)
        conv(rt, unit_w(rt, g), packed(rt, w, nb, flip=True), None, out,
             dict(KH=kh, KW=kw, SH=1, SW=1, PH=qh, PW=qw, DH=dh, DW=dw), rw, nb)
    return go


def _phases(k: int, s: int, p: int, n: int):
    """Per output phase r < s of a stride-s input gradient along one axis: (first tap k0,
    taps, outputs of the phase, padding of the stride-1 conv over g that computes it).
    Input position i = s*a + r is read by taps k = k0 + s*j (k0 = (r + p) % s) from output
    (i + p - k) / s = a + e - j, e = (r + p - k0) / s: flipped, a stride-1 correlation of g
    padded by taps - 1 - e."""
    out = []
    for r in range(s):
        k0 = (r + p) % s
        taps = (k - k0 + s - 1) // s if k > k0 else 0
        e = (r + p - k0) // s
        out.append((k0, taps, (n - r + s - 1) // s if n > r else 0, taps - 1 - e))
    return out


def grad_input_strided_ok(rt, g, g_rows, w, out, cfg, nb: int = 2) -> bool:
    """Strides above 1 (dilation 1): each of the s*s output phases a stride-1 direct conv
    of g with a strided slice of the flipped weights; every phase needs a tap, and its
    padding within the slice's reach (as the stride-1 gradient)."""
    if (cfg["SH"], cfg["SW"]) == (1, 1) or (cfg["DH"], cfg["DW"]) != (1, 1) \
            or not needed(rt, out.shape[1], nb, out.elem):
        return False
    for k, s, p, n in ((cfg["KH"], cfg["SH"], cfg["PH"], out.shape[2]),
                       (cfg["KW"], cfg["SW"], cfg["PW"], out.shape[3])):
        for _, taps, m, q in _phases(k, s, p, n):
            if taps < 1 or m < 1 or not 0 <= q <= taps - 1:
                return False
    return all(tile_width(rt, m, taps, nb) > 0
               for _, taps, m, _ in _phases(cfg["KW"], cfg["SW"], cfg["PW"], out.shape[3]))


def grad_input_strided(nb: int):
    """A candidate of a strided conv's input gradient: per phase (rh, rw) the blocked kernel
    over g with w[:, :, kh0::SH, kw0::SW] flipped, writing out[:, :, rh::SH, rw::SW]."""
    def go(rt, g, g_rows, w, out, cfg):
        sh, sw = cfg["SH"], cfg["SW"]
        n, c, h, wd = out.shape
        gu = unit_w(rt, g)
        ws = w.strides
        for rh, (kh0, th, mh, qh) in enumerate(_phases(cfg["KH"], sh, cfg["PH"], h)):
            for rw_, (kw0, tw, mw, qw) in enumerate(_phases(cfg["KW"], sw, cfg["PW"], wd)):
                wv = w.view((w.shape[0], w.shape[1], th, tw), (ws[0], ws[1], sh * ws[2],
                                                              sw * ws[3]))
                wp = packed(rt, wv, nb, flip=True, w0=kh0 * ws[2] + kw0 * ws[3])
                ov = out.view((n, c, mh, mw), (c * h * wd, h * wd, sh * wd, sw))
                conv(rt, gu, wp, None, ov, dict(KH=th, KW=tw, SH=1, SW=1, PH=qh, PW=qw, DH=1,
                                                DW=1), tile_width(rt, mw, tw, nb), nb,
                     out0=rh * wd + rw_)
    return go


# ---- the weight gradient ---------------------------------------------------------------------

@cube(launch=True, unchecked=True)
def pixel_major(g: Tensor[F], out: Array[F], OCP: Comptime[int]):
    """g (N, OC, OH, OW) -> out (N, OH, OW, OCP), zero past OC: output channels contiguous
    (lines), one unit per (n, oh) row."""
    row = ABSOLUTE_POS
    oh_n = g.shape(2)
    ow_n = g.shape(3)
    oc_n = g.shape(1)
    if row < g.shape(0) * oh_n:
        oh = row % oh_n
        gb = (row // oh_n) * g.stride(0) + oh * g.stride(2)
        for ow in range(ow_n):
            ob = (row * ow_n + ow) * OCP
            for oc in range(OCP):
                v = F(0)
                if oc < oc_n:
                    v = g[gb + oc * g.stride(1) + ow * g.stride(3)]
                out[ob + oc] = v


@cube(launch=True, unchecked=True, nowrap=True)
def pixel_major_lines(g: Array[Line[F]], out: Array[Line[F]], OC: u32, PL: u32,
                      OCL: u32):
    """`pixel_major` where an image's OH*OW pixels are whole lines (PL of them), contiguous:
    a unit (x: a line of pixels, y: a line of output channels, z: the image) reads L
    channels' lines of pixels, transposes the square in registers (`transpose_lines`) and
    writes L pixels' lines of channels (OCL lines a pixel; channels past OC zero)."""
    L = cb.comptime(g.line_size())
    pl = CUBE_POS_X * CUBE_DIM_X + UNIT_POS_X
    oc0 = CUBE_POS_Y * L
    n = CUBE_POS_Z
    if pl < PL:
        rows = cb.LocalArray(Line[F, L], L)
        src = (n * OC + oc0) * PL + pl
        for i in cb.range(L, unroll=True):
            rows[i] = Line[F, L](0)
            if oc0 + i < OC:
                rows[i] = g[src + i * PL]
        transpose_lines(rows, L)
        dst = (n * PL + pl) * L * OCL + CUBE_POS_Y
        for r in cb.range(L, unroll=True):
            out[dst + r * OCL] = rows[r]


@cube(launch=True, unchecked=True, nowrap=True)
def conv_wgrad_blocked(x: Tensor[F], g: Array[Line[F]], out: Tensor[F], OH: u32, OW: u32,
                       RLO: u32, RHI: u32, LO: u32, HI: u32, OCN: u32, NPER: u32,
                       KH: Comptime[int],
                       KW: Comptime[int], SH: Comptime[int], SW: Comptime[int],
                       PH: Comptime[int], PW: Comptime[int], DH: Comptime[int],
                       DW: Comptime[int], NB: Comptime[int], PX: Comptime[int]):
    """out (OC, C, KH, KW) = sum over pixels of g (`pixel_major`, lines of output channels)
    x the input under each tap. One unit per (input channel: cube x, group of NB lines of
    output channels: cube y) keeps KH*KW*NB line accumulators; per pixel it loads NB lines
    of g and broadcasts KH*KW inputs. Pixels in rows [RLO, RHI) and columns [LO, HI) have
    every tap inside the image (no tests); the others test each tap. Interior pixels go PX
    at a time: each input column under the PX windows is broadcast once for every (pixel,
    tap) that reads it ((PX-1)*SW + (KW-1)*DW + 1 columns a kernel row instead of PX*KW).
    Cube z sums images [z*NPER, z*NPER + NPER) into the z-th of out's stacked (OCN, C, KH,
    KW) partial gradients (`grad_weight` adds them up when there is more than one)."""
    L = cb.comptime(g.line_size())
    c = CUBE_POS_X
    grp = CUBE_POS_Y
    h_n = i32(x.shape(2))
    w_n = i32(x.shape(3))
    oc_n = OCN
    n0 = CUBE_POS_Z * NPER
    n1 = min(x.shape(0), n0 + NPER)
    gl = g.len() // (x.shape(0) * OH * OW)  # lines per pixel
    if c < x.shape(1):
        sx2 = x.stride(2)
        acc = cb.LocalArray(Line[F, L], KH * KW * NB)
        for t in cb.range(KH * KW * NB, unroll=True):
            acc[t] = Line[F, L](0)
        gv = cb.LocalArray(Line[F, L], NB)
        gw = cb.LocalArray(Line[F, L], PX * NB)
        span = cb.comptime((PX - 1) * SW + (KW - 1) * DW + 1)
        for n in range(n0, n1):
            xb = n * x.stride(0) + c * x.stride(1)
            for oh in range(OH):
                h0 = i32(oh * SH) - PH
                row_in = oh >= RLO and oh < RHI
                gb = (n * OH + oh) * OW * gl + grp * NB
                nblk = (HI - LO) // PX if row_in else u32(0)
                for b in range(nblk):
                    ow0 = LO + b * PX
                    for pp in cb.range(PX, unroll=True):
                        for j in cb.range(NB, unroll=True):
                            gw[pp * NB + j] = g[gb + (ow0 + pp) * gl + j]
                    xr = xb + u32(h0) * sx2 + u32(i32(ow0 * SW) - PW)
                    for kh in cb.range(KH, unroll=True):
                        for u in cb.range(span, unroll=True):
                            a = Line[F, L](x[xr + kh * DH * sx2 + u])
                            for kw in cb.range(KW, unroll=True):
                                if cb.comptime(_reads(u, kw, PX, SW, DW)):
                                    pp = cb.comptime((u - kw * DW) // SW)
                                    for j in cb.range(NB, unroll=True):
                                        ti = (kh * KW + kw) * NB + j
                                        acc[ti] = cb.fma(a, gw[pp * NB + j], acc[ti])
                done = LO + nblk * PX
                for ow in range(OW):
                    if ow >= LO and ow < done:
                        continue
                    for j in cb.range(NB, unroll=True):
                        gv[j] = g[gb + ow * gl + j]
                    w0 = i32(ow * SW) - PW
                    if row_in and ow >= LO and ow < HI:
                        xr = xb + u32(h0) * sx2 + u32(w0)
                        for kh in cb.range(KH, unroll=True):
                            for kw in cb.range(KW, unroll=True):
                                a = Line[F, L](x[xr + kh * DH * sx2 + kw * DW])
                                for j in cb.range(NB, unroll=True):
                                    t = (kh * KW + kw) * NB + j
                                    acc[t] = cb.fma(a, gv[j], acc[t])
                    else:
                        for kh in cb.range(KH, unroll=True):
                            h = h0 + kh * DH
                            for kw in cb.range(KW, unroll=True):
                                ww = w0 + kw * DW
                                if h >= 0 and h < h_n and ww >= 0 and ww < w_n:
                                    a = Line[F, L](x[xb + u32(h) * sx2 + u32(ww)])
                                    for j in cb.range(NB, unroll=True):
                                        t = (kh * KW + kw) * NB + j
                                        acc[t] = cb.fma(a, gv[j], acc[t])
        for kh in cb.range(KH, unroll=True):
            for kw in cb.range(KW, unroll=True):
                ob = (CUBE_POS_Z * OCN) * out.stride(0) + c * out.stride(1) \
                    + kh * out.stride(2) + kw * out.stride(3)
                for j in cb.range(NB, unroll=True):
                    v = acc[(kh * KW + kw) * NB + j]
                    for q in cb.range(L, unroll=True):
                        oc = (grp * NB + j) * L + q
                        if oc < oc_n:
                            out[ob + oc * out.stride(0)] = v[q]


def wgrad_pixels(rt, kh: int, kw: int, nb: int) -> int:
    """PX for the weight gradient: up to 4 pixels' NB lines of g beside the accumulators."""
    return max(1, min(4, (registers(rt) - 2 - kh * kw * nb) // nb))


def wgrad_lines(rt, kh: int, kw: int) -> int:
    """NB for the weight gradient: the widest of 4, 2, 1 whose KH*KW*NB accumulators, NB
    lines of g and a broadcast fit the register file with one spare."""
    for nb in (4, 2, 1):
        if kh * kw * nb + nb + 2 <= registers(rt):
            return nb
    return 0


def _inside(o_n: int, s: int, p: int, d: int, k: int, n: int) -> tuple[int, int]:
    """[lo, hi): the outputs whose every tap o*s - p + t*d (t < k) lies in [0, n)."""
    lo = cdiv(p, s)
    hi = (n - 1 - (k - 1) * d + p) // s + 1 if n - 1 - (k - 1) * d + p >= 0 else 0
    hi = max(lo, min(hi, o_n))
    return min(lo, o_n), hi


WGRAD_MIN_UNITS = 16  # units the weight gradient keeps for the pool (splitting the batch)
WGRAD_MIN_PIXELS = 256  # output pixels a split sums at least


def wgrad_splits(units: int, n: int, pixels: int) -> int:
    """Batch splits of the weight gradient: a unit per (input channel, group of output
    channels) leaves cores idle at few channels, so the batch is split until there are
    WGRAD_MIN_UNITS units, each summing WGRAD_MIN_PIXELS pixels or more, and the partial
    gradients are added up. The digits CNN's first conv (1 -> 16 channels, 64 images of
    8x8): one unit summed the whole batch on one core in 59 us; 4 splits took 49 us, 16
    splits 23 us."""
    if units >= WGRAD_MIN_UNITS:
        return 1
    per = max(1, cdiv(WGRAD_MIN_PIXELS, max(pixels, 1)))  # images a split takes at least
    return max(1, min(cdiv(WGRAD_MIN_UNITS, units), n // per))


def grad_weight_ok(rt, x, g, g_rows, out, cfg) -> bool:
    return x.strides[3] == 1 and wgrad_lines(rt, cfg["KH"], cfg["KW"]) > 0


def grad_weight(rt, x, g, g_rows, out, cfg):
    """A candidate of the weight gradient: `pixel_major` g, then `conv_wgrad_blocked`."""
    n, oc, oh, ow = g.shape
    c = x.shape[1]
    nb = wgrad_lines(rt, cfg["KH"], cfg["KW"])
    lsz = _line(rt, g.elem)
    ocp = cdiv(oc, nb * lsz) * nb * lsz
    gt = rt.empty((n * oh * ow * ocp,), g.elem)
    dim = 1 if is_cpu(rt) else 64
    if (oh * ow) % lsz == 0 and lsz > 1 and is_contiguous(g):
        pl = oh * ow // lsz
        pixel_major_lines.launch(rt, cube_count=(cdiv(pl, 64), cdiv(oc, lsz), n),
                                 cube_dim=(64, 1), g=g.view((g.size,), (1,)).lines(lsz),
                                 out=gt.lines(lsz), OC=oc, PL=pl, OCL=ocp // lsz)
    else:
        pixel_major.launch(rt, cube_count=cdiv(n * oh, dim), cube_dim=dim, g=g, out=gt,
                           OCP=ocp)
    rlo, rhi = _inside(oh, cfg["SH"], cfg["PH"], cfg["DH"], cfg["KH"], x.shape[2])
    lo, hi = _inside(ow, cfg["SW"], cfg["PW"], cfg["DW"], cfg["KW"], x.shape[3])
    geo = {k: cfg[k] for k in ("KH", "KW", "SH", "SW", "PH", "PW", "DH", "DW")}
    groups = ocp // (nb * lsz)
    splits = wgrad_splits(c * groups, n, oh * ow)
    per = max(1, cdiv(n, splits))
    splits = max(1, cdiv(n, per))  # an empty batch: one split, all zeros
    kh, kw = cfg["KH"], cfg["KW"]
    part = out if splits == 1 else rt.empty((splits * oc, c, kh, kw), out.elem)
    conv_wgrad_blocked.launch(rt, cube_count=(c, groups, splits), cube_dim=1, x=x,
                              g=gt.lines(lsz), out=part, OH=oh, OW=ow, RLO=rlo, RHI=rhi,
                              LO=lo, HI=hi, OCN=oc, NPER=per, NB=nb,
                              PX=wgrad_pixels(rt, kh, kw, nb), **geo)
    if splits > 1:
        size = oc * c * kh * kw
        reduce.run_unit(rt, strided(part, (1, splits, size), (0, size, 1)),
                        strided(out, (1, size), (size, 1)), None, "sum")

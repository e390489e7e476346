"""Direct conv2d (groups of 1) in a blocked layout: no column buffer.

Each unit keeps an RW x NB register tile: RW neighbouring output pixels of one output row
times NB lines of L output channels (L: the SIMD width, 16 f32 on AVX-512). Per input
channel and tap it loads NB weight lines and broadcasts RW input scalars, RW * NB FMAs.

- weights are packed once per call into `OIhw{NB*L}o` panels (`pack_weights`): for a group
  of NB*L output channels, the (c, kh, kw) steps in order, NB lines each, zero past OC, so
  the unit's weight stream is contiguous. FLIP packs the transposed, spatially flipped
  weights that an input gradient convolves with.
- the input is read as scalars from a zero-padded NCHW copy (`pad_input`; skipped when
  there is no padding), so the inner loop has no bounds tests and any stride or dilation
  reads it alike.
- the output is written NCHW, one scalar per lane (stores are ~3% of the tile's work).
"""
from __future__ import annotations

import typing

import cube as cb
from cube import (
    ABSOLUTE_POS,
    ABSOLUTE_POS_X,
    ABSOLUTE_POS_Y,
    CUBE_POS_X,
    CUBE_POS_Y,
    CUBE_POS_Z,
    Array,
    Comptime,
    Line,
    Tensor,
    cube,
    i32,
    u32,
)

from .common import cdiv, is_cpu, line_size, simd_bytes
from .epilogue import activate
from .view import is_contiguous, strided

F = typing.TypeVar("F")


@cube(launch=True, unchecked=True, nowrap=True)
def conv_blocked(x: Tensor[F], w: Array[Line[F]], bias: Array[F], out: Tensor[F],
                 KH: Comptime[int], KW: Comptime[int], SH: Comptime[int], SW: Comptime[int],
                 DH: Comptime[int], DW: Comptime[int], RW: Comptime[int], NB: Comptime[int],
                 HAS_BIAS: Comptime[bool], ACT: Comptime[str]):
    """x: the padded input (N, C, Hp, Wp), unit stride along w; w: `pack_weights`' panels;
    out (N, OC, OH, OW).
    Cube x: (output row, RW-pixel tile), y: group of NB*L output channels, z: image."""
    L = cb.comptime(w.line_size())
    ow_n = out.shape(3)
    oc_n = out.shape(1)
    c_n = x.shape(1)
    tiles = (ow_n + RW - 1) // RW
    oh = CUBE_POS_X // tiles
    ow0 = (CUBE_POS_X % tiles) * RW
    grp = CUBE_POS_Y
    n = CUBE_POS_Z
    if oh < out.shape(2):
        sx2 = x.stride(2)
        # one base offset, the tile's pixels and taps at constant distances from it (unit
        # stride along w); an edge tile reads on past its row (x has slack at its end) into
        # outputs whose stores it skips
        xo = n * x.stride(0) + oh * SH * sx2 + ow0 * SW
        acc = cb.LocalArray(Line[F, L], RW * NB)
        for t in cb.range(RW * NB, unroll=True):
            acc[t] = Line[F, L](0)
        wv = cb.LocalArray(Line[F, L], KW * NB)
        wo = grp * c_n * (KH * KW * NB)
        for _ in range(c_n):
            for kh in cb.range(KH, unroll=True):
                xr = xo + kh * DH * sx2
                for q in cb.range(KW * NB, unroll=True):
                    wv[q] = w[wo + kh * KW * NB + q]
                # input columns in order, each broadcast once into every (pixel, tap) that
                # reads it: taps in order read the same column again, and LLVM kept those
                # loads live across taps (spilling accumulators)
                for u in cb.range((RW - 1) * SW + (KW - 1) * DW + 1, unroll=True):
                    a = Line[F, L](x[xr + u])
                    for kw in cb.range(KW, unroll=True):
                        if cb.comptime(_reads(u, kw, RW, SW, DW)):
                            r = cb.comptime((u - kw * DW) // SW)
                            for j in cb.range(NB, unroll=True):
                                acc[r * NB + j] = cb.fma(a, wv[kw * NB + j], acc[r * NB + j])
            xo += x.stride(1)
            wo += KH * KW * NB
        so = n * out.stride(0) + oh * out.stride(2)
        oc0 = grp * NB * L
        full = oc0 + NB * L <= oc_n
        for r in cb.range(RW, unroll=True):
            ow = ow0 + r
            if ow < ow_n:
                po = so + ow * out.stride(3)
                for j in cb.range(NB, unroll=True):
                    v = acc[r * NB + j]
                    for q in cb.range(L, unroll=True):
                        oc = oc0 + j * L + q
                        if full or oc < oc_n:
                            e = v[q]
                            if HAS_BIAS:
                                e += bias[oc]
                            out[po + oc * out.stride(1)] = activate(e, ACT)


def _reads(u: int, kw: int, rw: int, sw: int, dw: int) -> bool:
    """Whether tap kw of some pixel r < rw reads input column u (u = r*sw + kw*dw)."""
    d = u - kw * dw
    return d >= 0 and d % sw == 0 and d // sw < rw


@cube(launch=True, unchecked=True)
def pack_weights(w: Tensor[F], out: Array[F], NB: Comptime[int], L: Comptime[int],
                 FLIP: Comptime[bool]):
    """w (OC, C, KH, KW) -> out[((g * C + c) * KH*KW + kh*KW + kw) * NB*L + o] =
    w[g*NB*L + o, c, kh, kw] (0 past OC); one unit per (g, c, kh, kw) writes its NB*L run.
    FLIP: the input gradient's weights, out channels C and in channels OC:
    w[c, g*NB*L + o, KH-1-kh, KW-1-kw]."""
    t = ABSOLUTE_POS
    kh_n = w.shape(2)
    kw_n = w.shape(3)
    oc_n = w.shape(1) if FLIP else w.shape(0)
    c_n = w.shape(0) if FLIP else w.shape(1)
    blk = NB * L
    if t < ((oc_n + blk - 1) // blk) * c_n * kh_n * kw_n:
        kw = t % kw_n
        kh = (t // kw_n) % kh_n
        c = (t // (kw_n * kh_n)) % c_n
        oc0 = (t // (kw_n * kh_n * c_n)) * blk
        so = w.stride(1) if FLIP else w.stride(0)
        src = c * w.stride(1) + kh * w.stride(2) + kw * w.stride(3)
        if FLIP:
            src = c * w.stride(0) + (kh_n - 1 - kh) * w.stride(2) \
                + (kw_n - 1 - kw) * w.stride(3)
        for o in cb.range(blk, unroll=True):
            v = F(0)
            if oc0 + o < oc_n:
                v = w[src + (oc0 + o) * so]
            out[t * blk + o] = v


@cube(launch=True, unchecked=True)
def pad_input(x: Tensor[F], out: Tensor[F], PH: Comptime[int], PW: Comptime[int]):
    """out (N, C, Hp, Wp) = x shifted by (PH, PW), zero around it; one unit per output row
    (x: the row, y: the (n, c) plane), the interior copied in a loop LLVM vectorises."""
    hp = ABSOLUTE_POS_X
    nc = ABSOLUTE_POS_Y
    wp_n = out.shape(3)
    if hp < out.shape(2) and nc < out.shape(0) * out.shape(1):
        ob = nc * out.stride(1) + hp * out.stride(2)
        h = i32(hp) - PH
        w_n = x.shape(3)
        if h < 0 or h >= i32(x.shape(2)):
            for q in range(wp_n):
                out[ob + q] = F(0)
        else:
            c = nc % x.shape(1)
            n = nc // x.shape(1)
            xb = n * x.stride(0) + c * x.stride(1) + u32(h) * x.stride(2)
            hi = min(w_n + PW, wp_n)
            for q in range(PW):
                out[ob + q] = F(0)
            if x.stride(3) == 1:
                for q in range(PW, hi):
                    out[ob + q] = x[xb + q - PW]
            else:
                for q in range(PW, hi):
                    out[ob + q] = x[xb + (q - PW) * x.stride(3)]
            for q in range(hi, wp_n):
                out[ob + q] = F(0)


def _line(rt, elem) -> int:
    return line_size(rt, elem, 1 << 20)


def registers(rt) -> int:
    """Vector registers of the target: 32 zmm with AVX-512, 16 ymm with AVX2."""
    feats = getattr(rt.features, "vector_registers", None)
    if feats:
        return int(feats)
    return 32 if is_cpu(rt) and simd_bytes(rt) == 64 else 16


def tile_width(rt, ow: int, kw: int, nb: int) -> int:
    """RW for an NB-line tile: the accumulators, a kernel row's KW x NB weight lines and the
    broadcast input fit the register file; of those widths, the one with the fewest pixels
    computed per row (the last tile's waste) plus one per tile (its fixed cost: weight
    loads, stores), the widest on a tie. 0: NB lines do not fit."""
    most = min((registers(rt) - 2 - kw * nb) // nb, ow)  # one spare: a full file spilled
    if most < 1:
        return 0
    return min(range(1, most + 1), key=lambda r: (cdiv(ow, r) * (r + 1), -r))


def padded(rt, x, ph: int, pw: int, hp: int, wp: int, slack: int):
    """x (N, C, H, W) zero-padded to (N, C, hp, wp), with `slack` more elements after it
    (x itself when it is contiguous, with nothing to pad and no slack needed)."""
    n, c, h, w = x.shape
    if (hp, wp) == (h, w) and (ph, pw) == (0, 0) and not slack and is_contiguous(x):
        return x
    flat = rt.empty((n * c * hp * wp + slack,), x.elem)
    out = strided(flat, (n, c, hp, wp), (c * hp * wp, hp * wp, wp, 1))
    dim = (1, 1) if is_cpu(rt) else (64, 1)
    pad_input.launch(rt, cube_count=(cdiv(hp, dim[0]), n * c), cube_dim=dim, x=x, out=out,
                     PH=ph, PW=pw)
    return out


def slack(ow: int, rw: int, sw: int) -> int:
    """Elements an edge tile reads past the end of the input: its missing pixels."""
    return (cdiv(ow, rw) * rw - ow) * sw


def packed(rt, w, nb: int, flip: bool = False):
    """`pack_weights`' panels of w as lines of the runtime's width."""
    lsz = _line(rt, w.elem)
    oc = w.shape[1] if flip else w.shape[0]
    c, kh, kw = (w.shape[0] if flip else w.shape[1]), w.shape[2], w.shape[3]
    total = cdiv(oc, nb * lsz) * c * kh * kw * nb * lsz
    out = rt.empty((total,), w.elem)
    units = total // (nb * lsz)
    dim = 1 if is_cpu(rt) else 64
    pack_weights.launch(rt, cube_count=cdiv(units, dim), cube_dim=dim, w=w, out=out, NB=nb,
                        L=lsz, FLIP=flip)
    return out.lines(lsz)


def conv(rt, xp, wp, bias, out, geo: dict, rw: int, nb: int, act: str = "none"):
    """out = act(conv(xp, weights) + bias), xp already padded, wp from `packed`."""
    n, oc, oh, ow = out.shape
    lsz = wp.line_size
    conv_blocked.launch(rt, cube_count=(oh * cdiv(ow, rw), cdiv(oc, nb * lsz), n),
                        cube_dim=1, x=xp, w=wp, bias=bias if bias is not None else out,
                        out=out, RW=rw, NB=nb, HAS_BIAS=bias is not None, ACT=act, **geo)


def run(nb: int):
    """A `conv2d` candidate with tiles of NB lines of output channels: pad, pack, convolve."""
    def go(rt, x, w, bias, out, cfg):
        _, _, h, wd = x.shape
        ph, pw = cfg["PH"], cfg["PW"]
        rw = tile_width(rt, out.shape[3], cfg["KW"], nb)
        xp = padded(rt, x, ph, pw, h + 2 * ph, wd + 2 * pw, slack(out.shape[3], rw, cfg["SW"]))
        geo = {k: cfg[k] for k in ("KH", "KW", "SH", "SW", "DH", "DW")}
        conv(rt, xp, packed(rt, w, nb), bias, out, geo, rw, nb, cfg["ACT"])
    return go


def valid(nb: int):
    def ok(rt, x, w, bias, out, cfg) -> bool:
        return cfg["G"] == 1 and tile_width(rt, out.shape[3], cfg["KW"], nb) > 0
    return ok


def grad_input_ok(rt, g, g_rows, w, out, cfg, nb: int = 2) -> bool:
    """A stride-1 convolution's input gradient is a direct conv of the output gradient
    (padded by D*(K-1) - P, so P may not exceed the kernel's reach) with the flipped,
    transposed weights."""
    return (cfg["SH"], cfg["SW"]) == (1, 1) \
        and cfg["DH"] * (cfg["KH"] - 1) >= cfg["PH"] and cfg["DW"] * (cfg["KW"] - 1) >= cfg["PW"] \
        and tile_width(rt, out.shape[3], cfg["KW"], nb) > 0


def grad_input(nb: int):
    """A candidate of the input gradient (args: the output gradient g (N, OC, OH, OW), its
    (OC, N*OH*OW) rows, the weights, out (N, C, H, W), the geometry)."""
    def go(rt, g, g_rows, w, out, cfg):
        kh, kw, dh, dw = cfg["KH"], cfg["KW"], cfg["DH"], cfg["DW"]
        qh, qw = dh * (kh - 1) - cfg["PH"], dw * (kw - 1) - cfg["PW"]
        h, wd = out.shape[2], out.shape[3]
        rw = tile_width(rt, wd, kw, nb)
        gp = padded(rt, g, qh, qw, h + dh * (kh - 1), wd + dw * (kw - 1), slack(wd, rw, 1))
        conv(rt, gp, packed(rt, w, nb, flip=True), None, out,
             dict(KH=kh, KW=kw, SH=1, SW=1, DH=dh, DW=dw), rw, nb)
    return go

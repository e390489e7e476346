"""Resampling of NCHW images (`F.interpolate`): nearest, nearest-exact and (bi)linear, with
PyTorch's source-index rules, and their gradients.

- `interp2d`: the forward pass, one unit per output element, x read through its strides.
  Nearest rounds its source index in f32 as PyTorch does (floorf(dst * scale)), whatever the
  element type; linear computes in the element type (PyTorch's opmath for f32/f64).
- `interp1d_backward`: the gradient along one axis of a (A, NO, B) array into (A, NI, B); the
  2-D gradient is two such passes (the weights are separable). Deterministic: each input
  position gathers the outputs that read it from a window of K candidates around
  (i - 1) * inv_scale (K covers every output that can reach it; the host sizes it), testing
  each with the forward's own index rule, so no atomics.

Geometry is compile-time (constant divisors), scales are runtime scalars."""
from __future__ import annotations

import math
import typing

import cube as cb
from cube import ABSOLUTE_POS, Array, Comptime, Tensor, cube, f32, i32, u32

from .launch import cube_count

F = typing.TypeVar("F")

NEAREST, NEAREST_EXACT, LINEAR = 0, 1, 2


@cube
def nearest_src(o, scale, NI: Comptime[int], EXACT: Comptime[bool]):
    """PyTorch's nearest source index: min(floor(o * scale), NI - 1) in f32 (nearest-exact:
    floor((o + 0.5) * scale))."""
    s = f32(o) * scale
    if EXACT:
        s = (f32(o) + 0.5) * scale
    return min(i32(cb.floor(s)), NI - 1)


@cube
def linear_src(o, scale, T, ALIGN: Comptime[bool]):
    """PyTorch's linear source coordinate (>= 0): scale * o with align_corners, else
    scale * (o + 0.5) - 0.5 clamped at 0."""
    s = scale * T(o)
    if not ALIGN:
        s = max(scale * (T(o) + 0.5) - 0.5, T(0))
    return s


@cube
def _lerp_taps(s, NI: Comptime[int]):
    """The lower tap of source coordinate s (clamped into the input)."""
    return min(i32(s), NI - 1)


@cube(launch=True, unchecked=True)
def interp2d(x: Tensor[F], out: Array[F], C: Comptime[int], IH: Comptime[int],
             IW: Comptime[int], OH: Comptime[int], OW: Comptime[int], nh: f32, nw: f32,
             lh: F, lw: F, MODE: Comptime[int], ALIGN: Comptime[bool]):
    """out (N, C, OH, OW) contiguous from x (N, C, IH, IW) by strides; nh, nw: the nearest
    modes' scales, lh, lw: the linear mode's."""
    i = ABSOLUTE_POS
    if i < out.len():
        ow = i % OW
        oh = (i // OW) % OH
        c = (i // (OW * OH)) % C
        n = i // (OW * OH * C)
        base = n * x.stride(0) + c * x.stride(1)
        if MODE == LINEAR:
            sh = linear_src(oh, lh, F, ALIGN)
            sw = linear_src(ow, lw, F, ALIGN)
            h0 = _lerp_taps(sh, IH)
            w0 = _lerp_taps(sw, IW)
            h1 = min(h0 + 1, IH - 1)
            w1 = min(w0 + 1, IW - 1)
            ah = sh - F(h0)
            aw = sw - F(w0)
            r0 = base + u32(h0) * x.stride(2)
            r1 = base + u32(h1) * x.stride(2)
            c0 = u32(w0) * x.stride(3)
            c1 = u32(w1) * x.stride(3)
            top = (1 - aw) * x[r0 + c0] + aw * x[r0 + c1]
            bot = (1 - aw) * x[r1 + c0] + aw * x[r1 + c1]
            out[i] = (1 - ah) * top + ah * bot
        else:
            h = nearest_src(oh, nh, IH, MODE == NEAREST_EXACT)
            w = nearest_src(ow, nw, IW, MODE == NEAREST_EXACT)
            out[i] = x[base + u32(h) * x.stride(2) + u32(w) * x.stride(3)]


@cube(launch=True, unchecked=True)
def interp1d_backward(g: Array[F], out: Array[F], NI: Comptime[int], NO: Comptime[int],
                      B: Comptime[int], ns: f32, ls: F, inv: f32, K: Comptime[int],
                      FULL: Comptime[bool], MODE: Comptime[int], ALIGN: Comptime[bool]):
    """out (A, NI, B) = the gradient of resampling axis 1 of (A, NI, B) into (A, NO, B), given
    g (A, NO, B), both contiguous: each input gathers the outputs o that read it, o in a
    window of K from (i - 1) * inv - 2 (or all NO with FULL)."""
    p = ABSOLUTE_POS
    if p < out.len():
        b = p % B
        ii = i32((p // B) % NI)
        a = p // (B * NI)
        start = i32(0)
        if not FULL:
            start = max(i32(cb.floor(f32(ii - 1) * inv)) - 2, 0)
        gb = a * (NO * B) + b
        acc = F(0)
        for k in range(K):
            o = start + i32(k)
            # each tap of output o that reads ii adds its weight times g, as torch's scatter
            # does (an inf or nan g reaches only the inputs o reads; a 0 weight times inf
            # is nan there too); outputs reading other inputs add nothing
            if o < NO:
                if MODE == LINEAR:
                    s = linear_src(o, ls, F, ALIGN)
                    i0 = _lerp_taps(s, NI)
                    i1 = min(i0 + 1, NI - 1)
                    lam = s - F(i0)
                    if i0 == ii:
                        acc += (1 - lam) * g[gb + u32(o) * B]
                    if i1 == ii:
                        acc += lam * g[gb + u32(o) * B]
                else:
                    if nearest_src(o, ns, NI, MODE == NEAREST_EXACT) == ii:
                        acc += g[gb + u32(o) * B]
        out[p] = acc


def window(inv_scale: float, out_size: int) -> tuple[int, bool]:
    """(K, FULL): how many candidate outputs one input position tests in the gradient."""
    k = int(math.ceil(2.5 * inv_scale)) + 5
    return (out_size, True) if k >= out_size else (k, False)


def interpolate(rt, x, oh: int, ow: int, mode: int, align: bool, nearest_scales,
                linear_scales):
    """x: a strided (N, C, IH, IW) view -> a new contiguous (N, C, OH, OW) buffer."""
    xb = x.buffer
    n, c, ih, iw = xb.shape
    out = rt.empty((n, c, oh, ow), xb.elem)
    if out.size:
        interp2d.launch(rt, cube_count=cube_count(out.size, 256), cube_dim=256, x=xb,
                        out=out, C=c, IH=ih, IW=iw, OH=oh, OW=ow,
                        nh=float(nearest_scales[0]), nw=float(nearest_scales[1]),
                        lh=float(linear_scales[0]), lw=float(linear_scales[1]), MODE=mode,
                        ALIGN=bool(align))
    return out


def _identity(i: int, o: int, scale: float) -> bool:
    return i == o and (i == 1 or scale == 1.0)


def interpolate_backward(rt, g, ih: int, iw: int, mode: int, align: bool, nearest_scales,
                         linear_scales, inv_scales):
    """The input gradient (N, C, IH, IW) of `interpolate` given g (N, C, OH, OW)
    contiguous: a pass along W, then one along H (either skipped where it is the
    identity)."""
    g = g.buffer
    n, c, oh, ow = g.shape
    scale = linear_scales if mode == LINEAR else nearest_scales
    skip_w = _identity(iw, ow, scale[1])
    skip_h = _identity(ih, oh, scale[0]) and not skip_w  # one pass runs, at least
    if not skip_w:
        t = rt.empty((n, c, oh, iw), g.elem)
        _axis(rt, g, t, n * c * oh, iw, ow, 1, mode, align, nearest_scales[1],
              linear_scales[1], inv_scales[1])
        g = t
    if not skip_h:
        t = rt.empty((n, c, ih, iw), g.elem)
        _axis(rt, g, t, n * c, ih, oh, iw, mode, align, nearest_scales[0], linear_scales[0],
              inv_scales[0])
        g = t
    return g


def _axis(rt, g, out, a: int, i: int, o: int, b: int, mode: int, align: bool,
          scale_nearest: float, scale_linear: float, inv: float):
    """One separable pass of the gradient: g (a, o, b) -> out (a, i, b), both contiguous."""
    if out.size == 0:
        return
    k, full = window(inv, o)
    interp1d_backward.launch(rt, cube_count=cube_count(out.size, 256), cube_dim=256, g=g,
                             out=out, NI=i, NO=o, B=b, ns=float(scale_nearest),
                             ls=float(scale_linear), inv=float(inv), K=k, FULL=full,
                             MODE=mode, ALIGN=bool(align))

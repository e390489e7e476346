"""max_pool2d / avg_pool2d with kernel, stride, padding and dilation, NCHW or NHWC (a layout
is only a choice of strides: the kernel indexes (n, c, h, w) through them).

One unit per output element (per line of channels in NHWC, where channels are contiguous);
the KH x KW window is unrolled at compile time and padding is skipped by a per-tap test.
Output positions are numbered with w fastest (NCHW) or c fastest (NHWC), so neighbouring
units read neighbouring memory."""
from __future__ import annotations

import typing

import numpy as np

import cube as cb
from autotune import Candidate, Tunable, tune_key
from cube import ABSOLUTE_POS, Comptime, Line, Tensor, cube, i32

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
        base = n * x.stride(0) + c * L * x.stride(3)
        acc = Line[F, L](-float("inf")) if MAX else Line[F, L](0)
        cnt = 0
        for kh in cb.range(KH, unroll=True):
            h = h0 + kh * DH
            for kw in cb.range(KW, unroll=True):
                w = w0 + kw * DW
                if h >= 0 and h < hn and w >= 0 and w < wn:
                    v = x[(base + u32_(h) * x.stride(1) + u32_(w) * x.stride(2)) // L]
                    if MAX:
                        acc = max(acc, v)
                    else:
                        acc += v
                    cnt += 1
        if not MAX:
            if COUNT_PAD:
                acc = acc * F(1.0 / (KH * KW))
            else:
                acc = acc / F(max(cnt, 1))
        out[(n * out.stride(0) + oh * out.stride(1) + ow * out.stride(2)
             + c * L * out.stride(3)) // L] = acc


@cube
def u32_(v):
    return cb.cast(v, cb.u32)


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


POOL = Tunable("pool2d", [
    Candidate("unit_64", _run(64, 64), 100),
    Candidate("unit_256", _run(256, 256), 90),
])


def _pair(v) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))


def out_size(n: int, k: int, s: int, p: int, d: int) -> int:
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _pool(rt, x, kernel, stride, padding, dilation, layout, is_max, count_include_pad):
    kh, kw = _pair(kernel)
    sh, sw = _pair(stride if stride is not None else kernel)
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    b = x.buffer
    if len(b.shape) != 4 or layout not in ("NCHW", "NHWC"):
        raise ValueError(f"pool2d takes a 4-D NCHW or NHWC input, got {b.shape} {layout}")
    if min(kh, kw, sh, sw, dh, dw) < 1 or ph > kh // 2 or pw > kw // 2 or min(ph, pw) < 0:
        raise ValueError("pool2d: kernel/stride/dilation >= 1 and 0 <= padding <= kernel // 2")
    xv = permute(b, (0, 2, 3, 1)) if layout == "NCHW" else b  # index order N, H, W, C
    n, h, w, c = xv.shape
    oh, ow = out_size(h, kh, sh, ph, dh), out_size(w, kw, sw, pw, dw)
    if oh < 1 or ow < 1:
        raise ValueError(f"pool2d: the window does not fit the {h}x{w} input")
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


def max_pool2d(rt, x, kernel, stride=None, padding=0, dilation=1, layout="NCHW"):
    return _pool(rt, x, kernel, stride, padding, dilation, layout, True, False)


def avg_pool2d(rt, x, kernel, stride=None, padding=0, layout="NCHW", count_include_pad=True):
    return _pool(rt, x, kernel, stride, padding, 1, layout, False, count_include_pad)


def reference(x, kernel, stride=None, padding=0, dilation=1, is_max=True,
              count_include_pad=True):
    """NCHW NumPy float64 reference."""
    kh, kw = _pair(kernel)
    sh, sw = _pair(stride if stride is not None else kernel)
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    x = x.astype(np.float64)
    n, c, h, w = x.shape
    fillv = -np.inf if is_max else 0.0
    xp = np.full((n, c, h + 2 * ph, w + 2 * pw), fillv)
    xp[:, :, ph:ph + h, pw:pw + w] = x
    ones = np.zeros((h + 2 * ph, w + 2 * pw))
    ones[ph:ph + h, pw:pw + w] = 1
    oh, ow = out_size(h, kh, sh, ph, dh), out_size(w, kw, sw, pw, dw)
    taps = [xp[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
            for i in range(kh) for j in range(kw)]
    if is_max:
        return np.max(taps, axis=0)
    s = np.sum(taps, axis=0)
    if count_include_pad:
        return s / (kh * kw)
    cnt = sum(ones[i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
              for i in range(kh) for j in range(kw))
    return s / cnt

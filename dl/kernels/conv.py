"""conv2d (NCHW input, OIHW weights) with stride, padding, dilation and groups.

- `rows` (groups of 1): unfold each image into (C*KH*KW, OH*OW) columns, one unit per
  output row of one tap (interior columns without bounds tests, vectorised), then ONE batched
  matmul, the weights broadcast over the batch (stride 0), writing straight into the output
  viewed as (N, OC, OH*OW); bias (per row of that matmul) in a small in-place pass.
- `im2col`: unfold the input into columns (G, C/G*KH*KW, N*OH*OW), multiply by the weights
  with the tuned matmul (G, OC/G, C/G*KH*KW) @ columns, then one pass writes NCHW output with
  bias and activation. Most of the work is in the matmul.
- `direct`: one unit per output element, the C/G x KH x KW loop in the kernel (no extra
  memory; for small problems and as the reference-like candidate).
- `blocked_NB` (groups of 1, dl/kernels/conv_direct.py): the CPU's direct convolution, a
  register tile of a row of output pixels x NB lines of output channels, weights packed in
  OIhw(NB*L)o panels, no column buffer.

`conv2d_grad_input` tunes the input gradient the same way: the blocked kernel on flipped,
transposed weights (stride 1) beside weights^T @ output-gradient rows + col2im;
`conv2d_grad_weight` the weight gradient: a direct blocked kernel beside output-gradient
rows @ im2col(x)^T.
"""
from __future__ import annotations

import typing

import numpy as np

import cube as cb
from autotune import Candidate, Tunable, tune_key
from cube import (
    ABSOLUTE_POS,
    Array,
    Comptime,
    Tensor,
    cube,
    i32,
    u32,
)

from . import conv_1x1 as c1
from . import conv_direct as cd
from . import matmul as mm
from .common import cdiv, is_cpu
from .epilogue import ACTIVATIONS, activate
from .im2col import grad_rows, im2col, im2col_rows
from .pool import out_size
from .tensor_conv import col2im
from .view import strided

F = typing.TypeVar("F")


@cube(launch=True, unchecked=True)
def bias_rows(out: Array[F], bias: Array[F], OC: u32, P: u32, ACT: Comptime[str]):
    """out[n, oc, p] = act(out[n, oc, p] + bias[oc]) in place: one unit per (n, oc) row."""
    row = ABSOLUTE_POS
    if row < out.len() // P:
        b = bias[row % OC]
        base = row * P
        for p in range(P):
            out[base + p] = activate(out[base + p] + b, ACT)


@cube(launch=True, unchecked=True)
def col2out(tmp: Array[F], bias: Array[F], out: Array[F], OCG: Comptime[int],
            G: Comptime[int], HAS_BIAS: Comptime[bool], ACT: Comptime[str], NB: u32, P: u32):
    """out[n, g*OCG + o, p] = act(tmp[g, o, n*P + p] + bias[g*OCG + o])."""
    i = ABSOLUTE_POS
    if i < out.len():
        p = i % P
        oc = (i // P) % (G * OCG)
        n = i // (P * G * OCG)
        v = tmp[oc * NB * P + n * P + p]
        if HAS_BIAS:
            v += bias[oc]
        out[i] = activate(v, ACT)


@cube(launch=True, unchecked=True)
def conv_direct(x: Tensor[F], w: Tensor[F], bias: Array[F], out: Tensor[F], G: Comptime[int],
                KH: Comptime[int], KW: Comptime[int], SH: Comptime[int], SW: Comptime[int],
                PH: Comptime[int], PW: Comptime[int], DH: Comptime[int], DW: Comptime[int],
                HAS_BIAS: Comptime[bool], ACT: Comptime[str]):
    oh_n = out.shape(2)
    ow_n = out.shape(3)
    oc_n = out.shape(1)
    g = ABSOLUTE_POS
    ow = g % ow_n
    oh = (g // ow_n) % oh_n
    oc = (g // (ow_n * oh_n)) % oc_n
    n = g // (ow_n * oh_n * oc_n)
    if n < out.shape(0):
        cg = x.shape(1) // G
        c0 = (oc // (oc_n // G)) * cg
        h0 = i32(oh * SH) - PH
        w0 = i32(ow * SW) - PW
        acc = F(0)
        for c in range(cg):
            xb = n * x.stride(0) + (c0 + c) * x.stride(1)
            wb = oc * w.stride(0) + c * w.stride(1)
            for kh in cb.range(KH, unroll=True):
                h = h0 + kh * DH
                for kw in cb.range(KW, unroll=True):
                    ww = w0 + kw * DW
                    if h >= 0 and h < i32(x.shape(2)) and ww >= 0 and ww < i32(x.shape(3)):
                        acc += x[xb + u32(h) * x.stride(2) + u32(ww) * x.stride(3)] \
                            * w[wb + kh * w.stride(2) + kw * w.stride(3)]
        if HAS_BIAS:
            acc += bias[oc]
        out[n * out.stride(0) + oc * out.stride(1) + oh * out.stride(2) + ow * out.stride(3)] \
            = activate(acc, ACT)


def _run_im2col(rt, x, w, bias, out, cfg):
    n, c, h, wd = x.shape
    oc = w.shape[0]
    g = cfg["G"]
    _, _, oh, ow = out.shape
    kh, kw = cfg["KH"], cfg["KW"]
    ck = c // g * kh * kw
    npix = n * oh * ow
    col = rt.empty((g, ck, npix), x.elem)
    geo = {k: cfg[k] for k in ("G", "KH", "KW", "SH", "SW", "PH", "PW", "DH", "DW")}
    im2col.launch(rt, cube_count=(cdiv(npix, 256), c), cube_dim=256, x=x, col=col,
                  OH=oh, OW=ow, **geo)
    wv = strided(w, (g, oc // g, ck), (oc // g * ck, ck, 1))
    tmp = rt.empty((g, oc // g, npix), x.elem)
    mm.matmul(rt, wv, col, out=tmp)
    col2out.launch(rt, cube_count=cdiv(out.size, 256), cube_dim=256, tmp=tmp,
                   bias=bias if bias is not None else tmp, out=out, OCG=oc // g, G=g,
                   HAS_BIAS=bias is not None, ACT=cfg["ACT"], NB=n, P=oh * ow)


def _run_rows(rt, x, w, bias, out, cfg):
    """Groups of 1: col (N, C*KH*KW, OH*OW) per image, then one batched matmul, the weights
    broadcast over the batch (stride 0), straight into out viewed as (N, OC, OH*OW)."""
    n, c, h, wd = x.shape
    oc = w.shape[0]
    _, _, oh, ow = out.shape
    kh, kw = cfg["KH"], cfg["KW"]
    ck, p = c * kh * kw, oh * ow
    geo = {k: cfg[k] for k in ("KH", "KW", "SH", "SW", "PH", "PW", "DH", "DW")}
    if geo == dict(KH=1, KW=1, SH=1, SW=1, PH=0, PW=0, DH=1, DW=1) \
            and x.strides[1:] == (h * wd, wd, 1):
        col = x  # a 1x1 conv's columns are its input: no copy
    else:
        col = rt.empty((n, ck, oh, ow), x.elem)
        dim = (1, 1, 1) if is_cpu(rt) else (64, 1, 1)
        im2col_rows.launch(rt, cube_count=(cdiv(oh, dim[0]), ck, n), cube_dim=dim, x=x,
                           col=col, WUNIT=bool(x.strides[3] == 1 and cfg["SW"] == 1), **geo)
    a = strided(w, (n, oc, ck), (0, ck, 1))
    ov = strided(out, (n, oc, p), (oc * p, p, 1))
    act = cfg["ACT"]
    mm.matmul(rt, a, strided(col, (n, ck, p), (col.strides[0], p, 1)), out=ov,
              act=act if bias is None else "none")
    if bias is not None:
        rows = n * oc
        bias_rows.launch(rt, cube_count=cdiv(rows, 64), cube_dim=64, out=out, bias=bias,
                         OC=oc, P=p, ACT=act)


def _run_direct(rt, x, w, bias, out, cfg):
    conv_direct.launch(rt, cube_count=cdiv(out.size, 64), cube_dim=64, x=x, w=w,
                       bias=bias if bias is not None else out, out=out,
                       HAS_BIAS=bias is not None, **cfg)


def _direct_first(cpu: int, gpu: int):
    return lambda rt: cpu if is_cpu(rt) else gpu


CONV = Tunable("conv2d", [
    # direct blocked tiles (dl/kernels/conv_direct.py): NB lines of output channels times
    # the widest row of pixels that fits the register file and wastes least on the row
    Candidate("blocked_2", cd.run(2), _direct_first(120, 5), cd.valid(2)),
    Candidate("blocked_4", cd.run(4), _direct_first(119, 4), cd.valid(4)),
    # one line: timed beside the others (small images: 64x16x4x4 -> 32 channels at 87 us
    # against blocked_2's 137, the second group doubling the cubes)
    Candidate("blocked_1", cd.run(1), _direct_first(117, 3), cd.valid(1)),
    # a 1x1 conv is a plain matmul of the input: the direct one (dl/kernels/conv_1x1.py:
    # pixels along lines, weights broadcast, whole-line stores) beside the library matmul
    Candidate("pix_1x1_r0", c1.run(0), _direct_first(121, 2), c1.valid(0),
              prefer=lambda rt, x, w, bias, out, cfg: is_cpu(rt)),
    Candidate("pix_1x1_r1", c1.run(1), _direct_first(118, 1), c1.valid(1),
              prefer=lambda rt, x, w, bias, out, cfg: is_cpu(rt)),
    Candidate("rows", _run_rows, 110, lambda rt, x, w, bias, out, cfg: cfg["G"] == 1,
              prefer=lambda rt, x, w, bias, out, cfg: is_cpu(rt) and cfg["KH"] * cfg["KW"] == 1),
    Candidate("im2col", _run_im2col, 100),
    Candidate("direct", _run_direct, 50),
])


def _grad_input_cols(rt, g, g_rows, w, out, cfg):
    """weights^T @ the output gradient's rows, then col2im gathers the columns."""
    oc, c, kh, kw = w.shape
    ck = c * kh * kw
    if g_rows is None:
        g_rows = grad_rows(rt, g)
    npix = g_rows.shape[1]
    gcol = rt.empty((ck, npix), w.elem)
    mm.matmul(rt, strided(w, (ck, oc), (1, ck)), g_rows, out=gcol)
    _, _, h, wd = out.shape
    _, _, oh, ow = g.shape
    geo = {k: cfg[k] for k in ("KH", "KW", "SH", "SW", "PH", "PW", "DH", "DW")}
    col2im.launch(rt, cube_count=cdiv(out.size, 256), cube_dim=256, col=gcol, out=out, C=c,
                  H=h, W=wd, OH=oh, OW=ow, NP=npix, **geo)


# the input gradient of a groups=1 conv2d: args (g (N, OC, OH, OW) contiguous, g as
# contiguous (OC, N*OH*OW) rows or None (made when a candidate reads them), weights,
# out (N, C, H, W), geometry)
CONV_GRAD_INPUT = Tunable("conv2d_grad_input", [
    Candidate("blocked_2", cd.grad_input(2), _direct_first(120, 5),
              lambda rt, *a: cd.grad_input_ok(rt, *a, nb=2)),
    Candidate("blocked_4", cd.grad_input(4), _direct_first(119, 4),
              lambda rt, *a: cd.grad_input_ok(rt, *a, nb=4)),
    Candidate("blocked_1", cd.grad_input(1), _direct_first(117, 2),
              lambda rt, *a: cd.grad_input_ok(rt, *a, nb=1)),
    # strides above 1: one stride-1 blocked conv per output phase
    Candidate("phases_2", cd.grad_input_strided(2), _direct_first(118, 3),
              lambda rt, *a: cd.grad_input_strided_ok(rt, *a, nb=2)),
    Candidate("phases_1", cd.grad_input_strided(1), _direct_first(116, 1),
              lambda rt, *a: cd.grad_input_strided_ok(rt, *a, nb=1)),
    Candidate("col2im", _grad_input_cols, 110),
])


def conv2d_grad_input(rt, g, g_rows, w, x_shape, stride, padding, dilation):
    """The input gradient (N, C, H, W) = x_shape of a groups=1 conv2d with weights w, given
    the output gradient g (contiguous NCHW) and the same as (OC, N*OH*OW) rows, or None:
    the candidates that read rows make them (the direct ones do not)."""
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    g, w = g.buffer, w.buffer
    g_rows = None if g_rows is None else g_rows.buffer
    out = rt.empty(tuple(x_shape), g.elem)
    oc, _, kh, kw = w.shape
    cfg = dict(KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw, DH=dh, DW=dw)
    key = tune_key("conv_gx", out.elem, [out.shape, w.shape], (sh, sw, ph, pw, dh, dw))
    CONV_GRAD_INPUT(rt, key, g, g_rows, w, out, cfg)
    return out


def _grad_weight_cols(rt, x, g, g_rows, out, cfg):
    """The output gradient's rows @ im2col(x)^T."""
    oc, c, kh, kw = out.shape
    _, _, oh, ow = g.shape
    npix, ck = x.shape[0] * oh * ow, c * kh * kw
    if g_rows is None:
        g_rows = grad_rows(rt, g)
    col = rt.empty((1, ck, npix), x.elem)
    geo = {k: cfg[k] for k in ("KH", "KW", "SH", "SW", "PH", "PW", "DH", "DW")}
    im2col.launch(rt, cube_count=(cdiv(npix, 256), c), cube_dim=256, x=x, col=col, G=1,
                  OH=oh, OW=ow, **geo)
    mm.matmul(rt, g_rows, strided(col, (npix, ck), (1, npix)),
              out=strided(out, (oc, ck), (ck, 1)))


# the weight gradient of a groups=1 conv2d: args (x, g (N, OC, OH, OW) contiguous, g as
# (OC, N*OH*OW) rows or None, out (OC, C, KH, KW), geometry)
CONV_GRAD_WEIGHT = Tunable("conv2d_grad_weight", [
    Candidate("blocked", cd.grad_weight, _direct_first(120, 5), cd.grad_weight_ok),
    Candidate("im2col", _grad_weight_cols, 110),
])


def conv2d_grad_weight(rt, x, g, g_rows, w_shape, stride, padding, dilation):
    """The weight gradient (OC, C, KH, KW) = w_shape of a groups=1 conv2d of x, given the
    output gradient g (contiguous NCHW) and the same as (OC, N*OH*OW) rows, or None (as
    `conv2d_grad_input`'s)."""
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    x, g = x.buffer, g.buffer
    g_rows = None if g_rows is None else g_rows.buffer
    out = rt.empty(tuple(w_shape), g.elem)
    cfg = dict(KH=w_shape[2], KW=w_shape[3], SH=sh, SW=sw, PH=ph, PW=pw, DH=dh, DW=dw)
    key = tune_key("conv_gw", out.elem, [x.shape, out.shape], (sh, sw, ph, pw, dh, dw))
    CONV_GRAD_WEIGHT(rt, key, x, g, g_rows, out, cfg)
    return out


def _pair(v) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))


def conv2d(rt, x, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1,
           act: str = "none"):
    """x (N, C, H, W), weight (OC, C/groups, KH, KW), bias (OC,) -> (N, OC, OH, OW)."""
    xb, wb = x.buffer, weight.buffer
    if len(xb.shape) != 4 or len(wb.shape) != 4:
        raise ValueError("conv2d takes a 4-D input and 4-D weights")
    if act not in ACTIVATIONS:
        raise ValueError(f"act must be one of {ACTIVATIONS}")
    n, c, h, w = xb.shape
    oc, cg, kh, kw = wb.shape
    g = int(groups)
    if g < 1 or c % g or oc % g or cg != c // g:
        raise ValueError(f"conv2d: {c} channels, {oc} filters of {cg} do not fit groups={g}")
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    oh, ow = out_size(h, kh, sh, ph, dh), out_size(w, kw, sw, pw, dw)
    if oh < 1 or ow < 1:
        raise ValueError("conv2d: the kernel does not fit the input")
    if bias is not None and tuple(bias.buffer.shape) != (oc,):
        raise ValueError(f"bias must have shape ({oc},)")
    out = rt.empty((n, oc, oh, ow), xb.elem)
    if out.size == 0:
        return out
    cfg = dict(G=g, KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw, DH=dh, DW=dw, ACT=act)
    key = tune_key("conv", xb.elem, [xb.shape, wb.shape], (sh, sw, ph, pw, dh, dw, g))
    CONV(rt, key, xb, wb, None if bias is None else bias.buffer, out, cfg)
    return out


def reference(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    x, w = x.astype(np.float64), w.astype(np.float64)
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    n, c, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    oh, ow = out_size(h, kh, sh, ph, dh), out_size(wd, kw, sw, pw, dw)
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    out = np.zeros((n, oc, oh, ow))
    ocg = oc // groups
    for gi in range(groups):
        xs = xp[:, gi * cg:(gi + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                           j * dw:j * dw + sw * (ow - 1) + 1:sw]
                out[:, gi * ocg:(gi + 1) * ocg] += np.einsum(
                    "nchw,oc->nohw", patch, w[gi * ocg:(gi + 1) * ocg, :, i, j])
    if bias is not None:
        out += bias.astype(np.float64)[None, :, None, None]
    return out

"""conv2d, max_pool2d and avg_pool2d (NCHW) on the kernel library, with gradients:

- conv2d: the input gradient is tuned (`lib_conv.conv2d_grad_input`): a direct conv of the
  output gradient with the flipped weights (stride 1), or weights^T @ (output gradient as
  columns) then col2im (dl/kernels/tensor_conv.py); the weight gradient is (output
  gradient as rows) @ im2col(x)^T, with the library's own im2col kernel and tuned matmul.
  Groups run group by group.
- pools: the library's forward; the gradients gather per input element (max: through the
  argmax indices of `dl/kernels/tensor_pool.py`)."""
from __future__ import annotations

from .. import dtypes
from ..autograd import record
from ..autograd.grad_mode import is_grad_enabled
from ..kernels import conv as lib_conv
from ..kernels import pool as lib_pool
from ..kernels.launch import launch_1d
from ..kernels.tensor_pool import (
    avg_pool2d_backward,
    max_pool_grad,
    max_pool_tiled,
    max_pool_with_indices,
    tiles_line,
)
from ..tensor import Tensor
from .index import cat
from .libcall import copy, counted, operand, result
from .registry import register

_F = (dtypes.float32, dtypes.float64)


def _pair(v) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _float(x: Tensor, what: str) -> Tensor:
    if x.dtype not in _F:
        raise TypeError(f"{what} takes float32/float64 tensors, got {x.dtype}")
    if x.ndim != 4:
        raise ValueError(f"{what} takes a 4-D NCHW input, got shape {x.shape}")
    return x._materialise()


def _contig(t: Tensor) -> Tensor:
    t = t._materialise()
    return t if t.is_contiguous() and not t.offset else copy(t)


def string_padding(padding: str, kernel, stride, dilation) -> tuple[tuple, tuple]:
    """PyTorch's padding='valid' (none) or 'same' (stride 1: the output keeps the input's
    size; an odd total puts the extra zero after, on the right and bottom) as (symmetric
    padding, leading outputs to drop) per spatial dim: the larger half on both sides, then
    the first output dropped where the total is odd."""
    n = len(kernel)
    if padding == "valid":
        return (0,) * n, (0,) * n
    if padding != "same":
        raise ValueError(f"padding must be an int, a tuple, 'valid' or 'same', got "
                         f"{padding!r}")
    if any(s != 1 for s in stride):
        raise ValueError("padding='same' is not supported for strided convolutions")
    totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
    return tuple(t - t // 2 for t in totals), tuple(t % 2 for t in totals)


@register("conv2d")
def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1, act: str = "none") -> Tensor:
    """x (N, C, H, W), weight (OC, C/groups, KH, KW) -> (N, OC, OH, OW); `act` (relu, gelu,
    tanh) is fused into the output pass when no gradient is needed. padding: an int, a
    pair, 'valid' or 'same' (`string_padding`). An unbatched (C, H, W) x gives (OC, OH, OW)."""
    if x.ndim == 3:
        return conv2d(x.unsqueeze(0), weight, bias, stride, padding, dilation, groups,
                      act).squeeze(0)
    if isinstance(padding, str):
        pads, trim = string_padding(padding, weight.shape[2:], _pair(stride), _pair(dilation))
        y = conv2d(x, weight, bias, stride, pads, dilation, groups, act)
        return y[:, :, trim[0]:, trim[1]:] if any(trim) else y
    _float(x, "conv2d")
    if min(_pair(padding)) < 0:  # (it cropped the input)
        raise ValueError("conv2d: negative padding is not supported (PyTorch raises too)")
    grad = is_grad_enabled() and any(t is not None and t.requires_grad
                                     for t in (x, weight, bias))
    fused = act if not grad else "none"
    buf = counted("conv2d", lib_conv.conv2d, x.device.rt, operand(x),
                  operand(weight, contiguous=True),
                  bias=None if bias is None else operand(bias, contiguous=True), stride=stride,
                  padding=padding, dilation=dilation, groups=groups, act=fused)
    y = result(buf, x.dtype, x.device)
    geo = dict(stride=_pair(stride), padding=_pair(padding), dilation=_pair(dilation))

    def back(g):
        g = _contig(g)
        xd, wd = x.detach(), weight.detach()
        gb = None
        if groups == 1:
            # no (OC, N*OH*OW) rows of g: the library makes them where its chosen kernels
            # read them (the matmul formulations), and the direct kernels read g as it is
            # (the permuted copy was a kernel and ~20 us of Python a conv in every step)
            gx, gw = _conv_grads(xd, wd, None, geo, x.requires_grad, weight.requires_grad, g)
            if bias is not None and bias.requires_grad:
                gb = g.sum((0, 2, 3))
        else:
            cg, ocg = x.shape[1] // groups, weight.shape[0] // groups
            parts = [_conv_grads(_contig(xd[:, k * cg:(k + 1) * cg]),
                                 wd[k * ocg:(k + 1) * ocg],
                                 _contig(g[:, k * ocg:(k + 1) * ocg].permute(1, 0, 2, 3))
                                 .reshape(ocg, -1), geo, True, True)
                     for k in range(groups)]
            gx = cat([p[0] for p in parts], 1) if x.requires_grad else None
            gw = cat([p[1] for p in parts], 0) if weight.requires_grad else None
            if bias is not None and bias.requires_grad:
                gb = g.sum((0, 2, 3))
        return gx, gw, gb
    # the closure reads geo and groups beyond its operands (one plan: dl/autograd/planned.py)
    record(y, "conv2d", (x, weight, bias), back,
           plan=(("conv2d", *geo.values(), groups), ()))
    if fused != act:
        y = {"relu": Tensor.relu, "gelu": Tensor.gelu, "tanh": Tensor.tanh}[act](y)
    return y


def _conv_grads(x: Tensor, w: Tensor, g_rows: Tensor | None, geo: dict, want_x: bool,
                want_w: bool, g: Tensor | None = None):
    """Gradients of a groups=1 convolution; g_rows: the output gradient (N, OC, OH, OW) as
    contiguous (OC, N*OH*OW) rows, or None (the library makes them where it reads them);
    g: the same as it is (contiguous), if at hand (needed when g_rows is None)."""
    rt = x.device.rt
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = geo["stride"], geo["padding"], geo["dilation"]
    oh, ow = (lib_pool.out_size(s_, k, st, p_, d) for s_, k, st, p_, d in
              ((h, kh, sh, ph, dh), (wd, kw, sw, pw, dw)))
    gx = gw = None
    gn = g if g is not None else _contig(g_rows.reshape(oc, n, oh, ow).permute(1, 0, 2, 3))
    rows = None if g_rows is None else operand(g_rows)
    if want_w:  # tuned: a direct kernel, or g's rows @ im2col(x)^T
        buf = counted("conv2d_grad_weight", lib_conv.conv2d_grad_weight, rt, operand(x),
                      operand(gn), rows, tuple(w.shape), geo["stride"],
                      geo["padding"], geo["dilation"])
        gw = result(buf, w.dtype, w.device)
    if want_x:
        # tuned: a direct conv of g with the flipped weights (stride 1), or
        # weights^T @ g's rows then col2im
        buf = counted("conv2d_grad_input", lib_conv.conv2d_grad_input, rt, operand(gn),
                      rows, operand(w, contiguous=True), tuple(x.shape),
                      geo["stride"], geo["padding"], geo["dilation"])
        gx = result(buf, x.dtype, x.device)
    return gx, gw


def _pool_geo(kernel_size, stride, padding, dilation=1):
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride if stride is not None and stride != () else kernel_size)
    (ph, pw), (dh, dw) = _pair(padding), _pair(dilation)
    return kh, kw, sh, sw, ph, pw, dh, dw


def refuse_indices(return_indices: bool) -> None:
    if return_indices:
        raise NotImplementedError("max_pool2d: return_indices=True is not supported (dl has "
                                  "no max_unpool2d to use them)")


@register("max_pool2d")
def max_pool2d(x: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False) -> Tensor:
    """2-D max pooling of an (N, C, H, W) (or unbatched (C, H, W)) float32/float64 tensor.

    kernel_size, stride (default: kernel_size), padding, dilation: ints or pairs;
    ceil_mode as PyTorch's (a last, partial window where it starts inside the input or the
    left padding). No return_indices. Differentiable (to the first maximum of each
    window)."""
    refuse_indices(return_indices)
    if x.ndim == 3:
        return max_pool2d(x.unsqueeze(0), kernel_size, stride, padding, dilation,
                          ceil_mode).squeeze(0)
    _float(x, "max_pool2d")
    kh, kw, sh, sw, ph, pw, dh, dw = _pool_geo(kernel_size, stride, padding, dilation)
    ceil_mode = bool(ceil_mode)
    n, c, h, w = x.shape
    geo = lib_pool.geometry(h, w, (kh, kw), (sh, sw), (ph, pw), (dh, dw), ceil_mode)
    if not (is_grad_enabled() and x.requires_grad):
        xo = operand(x)
        lsz = tiles_line(x.device.rt, xo, geo)
        if lsz > 1:  # windows that tile the input: lines of outputs
            return result(counted("max_pool2d", max_pool_tiled, x.device.rt, xo, geo, lsz),
                          x.dtype, x.device)
        buf = counted("max_pool2d", lib_pool.max_pool2d, x.device.rt, xo, (kh, kw),
                      (sh, sw), (ph, pw), (dh, dw), ceil_mode=ceil_mode)
        return result(buf, x.dtype, x.device)
    # with a gradient, one kernel writes the maxima and their positions
    y_b, idx_b = counted("max_pool2d", max_pool_with_indices, x.device.rt, operand(x), geo)
    y = result(y_b, x.dtype, x.device)

    def back(g):
        gx = counted("max_pool2d_backward", max_pool_grad, x.device.rt,
                     operand(g, contiguous=True), idx_b, x.shape, geo)
        return (result(gx, x.dtype, x.device),)
    return record(y, "max_pool2d", (x,), back, plan=(("max_pool2d", geo), (idx_b,)))


@register("avg_pool2d")
def avg_pool2d(x: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override=None) -> Tensor:
    """2-D average pooling of an (N, C, H, W) (or unbatched (C, H, W)) float32/float64
    tensor, with PyTorch's arguments in its order.

    kernel_size, stride (default: kernel_size), padding: ints or pairs; ceil_mode and
    count_include_pad as PyTorch's (a ceil_mode window's divisor stops at the padding).
    No divisor_override. Differentiable."""
    if divisor_override is not None:
        raise NotImplementedError("avg_pool2d: divisor_override is not supported")
    if x.ndim == 3:
        return avg_pool2d(x.unsqueeze(0), kernel_size, stride, padding, ceil_mode,
                          count_include_pad).squeeze(0)
    _float(x, "avg_pool2d")
    kh, kw, sh, sw, ph, pw, _, _ = _pool_geo(kernel_size, stride, padding)
    buf = counted("avg_pool2d", lib_pool.avg_pool2d, x.device.rt, operand(x), (kh, kw),
                  (sh, sw), (ph, pw), count_include_pad=bool(count_include_pad),
                  ceil_mode=bool(ceil_mode))
    y = result(buf, x.dtype, x.device)
    n, c, h, w = x.shape
    oh, ow = y.shape[2:]

    def back(g):
        g = _contig(g)
        gx = Tensor._empty(x.shape, x.dtype, x.device)
        launch_1d(avg_pool2d_backward, x.device.rt, gx.numel(), g=g._buf, out=gx._buf, H=h,
                  W=w, OH=oh, OW=ow, KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw,
                  COUNT_PAD=bool(count_include_pad))
        return (gx,)
    return record(y, "avg_pool2d", (x,), back)

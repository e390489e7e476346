"""Functional layers beyond the core: conv1d, conv_transpose1d/2d, group/rms/instance norm,
interpolate, adaptive_avg_pool1d/2d, embedding (with padding_idx), with PyTorch's signatures.

Each runs on the kernel library: conv1d is conv2d over a height-1 image; conv_transpose2d is
conv2d's input-gradient path (its gradients: a conv2d and conv2d's weight gradient);
group/instance norm are the layer-norm row kernel over reshaped rows plus a per-channel
affine; interpolate and adaptive_avg_pool2d are their own kernels (dl/kernels/interpolate.py,
dl/kernels/adaptive_pool.py) with gather-style gradient kernels."""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes, ops, shapes
from ..autograd import no_grad, record
from ..kernels import adaptive_pool as lib_ap
from ..kernels import conv as lib_conv
from ..kernels import interpolate as lib_interp
from ..ops.conv import conv2d, string_padding
from ..ops.libcall import copy, counted, operand, result
from ..ops.rows import layer_norm
from ..tensor import Tensor

__all__ = ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "conv1d", "conv_transpose1d",
           "conv_transpose2d", "embedding", "group_norm", "instance_norm", "interpolate",
           "rms_norm", "upsample"]

_F = (dtypes.float32, dtypes.float64)


def _one(v, what: str) -> int:
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise ValueError(f"{what} must be an int or a 1-tuple, got {v}")
        v = v[0]
    return int(v)


def _pair(v) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _contig(t: Tensor) -> Tensor:
    t = t._materialise()
    return t if t.is_contiguous() and not t.offset else copy(t)


def _check_float(x: Tensor, what: str) -> None:
    if x.dtype not in _F:
        raise TypeError(f"{what} takes float32/float64 tensors, got {x.dtype}")


# ---- convolutions ------------------------------------------------------------------------
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,  # noqa: A002
           padding=0, dilation=1, groups: int = 1) -> Tensor:
    """input (N, C, L) or (C, L), weight (OC, C/groups, K) -> (N, OC, OL): conv2d over a
    height-1 image. padding: an int, "valid" or "same" (stride 1; an odd total padding puts
    the extra zero on the right, as PyTorch's)."""
    if input.ndim == 2:
        return conv1d(input.unsqueeze(0), weight, bias, stride, padding, dilation,
                      groups).squeeze(0)
    if input.ndim != 3 or weight.ndim != 3:
        raise ValueError(f"conv1d takes (N, C, L) input and (OC, C/groups, K) weights, got "
                         f"{input.shape} and {weight.shape}")
    s, d, k = _one(stride, "stride"), _one(dilation, "dilation"), weight.shape[2]
    trim = 0
    if isinstance(padding, str):
        (p,), (trim,) = string_padding(padding, (k,), (s,), (d,))
    else:
        p = _one(padding, "padding")
    y = conv2d(input.unsqueeze(2), weight.unsqueeze(2), bias, (1, s), (0, p), (1, d), groups)
    y = y.squeeze(2)
    return y[:, :, trim:] if trim else y


def _conv_t_out(size: int, k: int, s: int, p: int, op: int, d: int) -> int:
    return (size - 1) * s - 2 * p + d * (k - 1) + op + 1


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None,  # noqa: A002
                     stride=1, padding=0, output_padding=0, groups: int = 1,
                     dilation=1) -> Tensor:
    """The transposed convolution (the gradient of conv2d with respect to its input):
    input (N, Cin, H, W) or (Cin, H, W), weight (Cin, Cout/groups, KH, KW) ->
    (N, Cout, (H-1)*stride - 2*padding + dilation*(KH-1) + output_padding + 1, ...)."""
    if input.ndim == 3:
        return conv_transpose2d(input.unsqueeze(0), weight, bias, stride, padding,
                                output_padding, groups, dilation).squeeze(0)
    _check_float(input, "conv_transpose2d")
    if input.ndim != 4 or weight.ndim != 4:
        raise ValueError(f"conv_transpose2d takes (N, Cin, H, W) input and (Cin, Cout/groups, "
                         f"KH, KW) weights, got {input.shape} and {weight.shape}")
    n, cin, h, w = input.shape
    g = int(groups)
    if weight.shape[0] != cin or cin % g:
        raise ValueError(f"conv_transpose2d: weights {weight.shape} do not fit {cin} input "
                         f"channels in {g} groups")
    st, pd, op, dl_ = _pair(stride), _pair(padding), _pair(output_padding), _pair(dilation)
    cout = weight.shape[1] * g
    if bias is not None and tuple(bias.shape) != (cout,):  # (a size-1 bias broadcast)
        raise ValueError(f"conv_transpose2d: bias must have shape ({cout},), got "
                         f"{tuple(bias.shape)}")
    if min(pd) < 0 or min(op) < 0:
        raise ValueError("conv_transpose2d: negative padding is not supported")
    for i in range(2):
        if op[i] >= max(st[i], dl_[i]):
            raise ValueError("output padding must be smaller than either stride or dilation")
    if g > 1:  # group by group, then the bias once
        cg = cin // g
        parts = [conv_transpose2d(input[:, k * cg:(k + 1) * cg], weight[k * cg:(k + 1) * cg],
                                  None, st, pd, op, 1, dl_) for k in range(g)]
        y = ops.cat(parts, 1)
        return y if bias is None else y + bias.reshape(1, -1, 1, 1)
    cout, kh, kw = weight.shape[1:]
    oh = _conv_t_out(h, kh, st[0], pd[0], op[0], dl_[0])
    ow = _conv_t_out(w, kw, st[1], pd[1], op[1], dl_[1])
    if oh < 1 or ow < 1:
        raise ValueError(f"conv_transpose2d: the output size ({oh}, {ow}) is too small")
    rt = input.device.rt
    xc = _contig(input)
    x_rows = _contig(xc.permute(1, 0, 2, 3)).reshape(cin, -1)
    buf = counted("conv_transpose2d", lib_conv.conv2d_grad_input, rt, operand(xc),
                  operand(x_rows), operand(weight, contiguous=True), (n, cout, oh, ow), st,
                  pd, dl_)
    y = result(buf, input.dtype, input.device)

    def back(gy):
        gy = _contig(gy)
        gx = gw = None
        if input.requires_grad:
            b = counted("conv2d", lib_conv.conv2d, rt, operand(gy),
                        operand(weight.detach(), contiguous=True), stride=st, padding=pd,
                        dilation=dl_)
            gx = result(b, input.dtype, input.device)
            if gx.shape != input.shape:  # output_padding >= stride (with dilation)
                gx = _contig(gx[:, :, :h, :w])
        if weight.requires_grad:
            b = counted("conv2d_grad_weight", lib_conv.conv2d_grad_weight, rt, operand(gy),
                        operand(xc), operand(x_rows), tuple(weight.shape), st, pd, dl_)
            gw = result(b, weight.dtype, weight.device)
        return gx, gw
    record(y, "conv_transpose2d", (input, weight), back)
    return y if bias is None else y + bias.reshape(1, -1, 1, 1)


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None,  # noqa: A002
                     stride=1, padding=0, output_padding=0, groups: int = 1,
                     dilation=1) -> Tensor:
    """The 1-d transposed convolution: conv_transpose2d over a height-1 image."""
    if input.ndim == 2:
        return conv_transpose1d(input.unsqueeze(0), weight, bias, stride, padding,
                                output_padding, groups, dilation).squeeze(0)
    y = conv_transpose2d(input.unsqueeze(2), weight.unsqueeze(2), bias,
                         (1, _one(stride, "stride")), (0, _one(padding, "padding")),
                         (0, _one(output_padding, "output_padding")), groups,
                         (1, _one(dilation, "dilation")))
    return y.squeeze(2)


# ---- normalisation -----------------------------------------------------------------------
def _channel_affine(y: Tensor, weight, bias) -> Tensor:
    shape = (1, y.shape[1]) + (1,) * (y.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,  # noqa: A002
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalises (N, C, *) over each group of C/num_groups channels (and every spatial
    position), then a per-channel weight and bias: the layer-norm row kernel over
    (N * num_groups, C/num_groups * S) rows."""
    if input.ndim < 2:
        raise ValueError(f"group_norm takes (N, C, *) input, got {input.shape}")
    n, c = input.shape[:2]
    if c % num_groups:
        raise ValueError(f"group_norm: {c} channels do not split into {num_groups} groups")
    rows = input.reshape(n * num_groups, -1)
    y = layer_norm(rows, (rows.shape[1],), None, None, eps).reshape(input.shape)
    return _channel_affine(y, weight, bias)


def instance_norm(input: Tensor, running_mean: Tensor | None = None,  # noqa: A002
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalises each (sample, channel) of (N, C, *) over its positions (group_norm with a
    group per channel), then a per-channel weight and bias. With use_input_stats and
    running statistics, these are updated (momentum, the unbiased variance, averaged over
    the batch) as PyTorch's; use_input_stats=False normalises with them instead."""
    if input.ndim < 3:
        raise ValueError(f"instance_norm takes (N, C, *) input, got {input.shape}")
    n, c = input.shape[:2]
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm without input statistics needs running ones")
        shape = (1, c) + (1,) * (input.ndim - 2)
        y = (input - running_mean.reshape(shape)) * (running_var.reshape(shape) + eps).rsqrt()
        return _channel_affine(y, weight, bias)
    if shapes.numel(input.shape[2:]) <= 1:  # (the statistics of one value: zeros)
        raise ValueError(f"instance_norm: expected more than 1 spatial element when "
                         f"training, got input size {tuple(input.shape)} (as PyTorch)")
    if running_mean is not None and running_var is not None:
        with no_grad():
            x3 = input.detach().reshape(n, c, -1)
            s = x3.shape[2]
            mean = ops.mean(x3, 2, keepdim=True)
            dev = x3 - mean
            var = ops.sum(dev * dev, 2) * (1.0 / max(s - 1, 1))
            ops.assign(running_mean, running_mean * (1.0 - momentum)
                       + ops.mean(mean.reshape(n, c), 0) * momentum, internal=True)
            ops.assign(running_var, running_var * (1.0 - momentum)
                       + ops.mean(var, 0) * momentum, internal=True)
    return group_norm(input, c, weight, bias, eps)


def _finfo_eps(dt) -> float:
    """torch.finfo(dt).eps."""
    return 0.0078125 if dt is dtypes.bfloat16 else float(np.finfo(dt.name).eps)


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,  # noqa: A002
             eps: float | None = None) -> Tensor:
    """x * rsqrt(mean(x**2 over the last dims, those of normalized_shape) + eps) * weight;
    eps=None: the dtype's machine epsilon, as PyTorch's."""
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(input.shape[input.ndim - len(ns):]) != ns:
        raise ValueError(f"rms_norm: normalized_shape {ns} is not the end of {input.shape}")
    e = _finfo_eps(input.dtype) if eps is None else float(eps)
    dims = tuple(range(input.ndim - len(ns), input.ndim))
    y = input * (ops.mean(input * input, dims, keepdim=True) + e).rsqrt()
    return y * weight if weight is not None else y


# ---- resampling and adaptive pooling -----------------------------------------------------
_MODES = {"nearest": lib_interp.NEAREST, "nearest-exact": lib_interp.NEAREST_EXACT,
          "linear": lib_interp.LINEAR, "bilinear": lib_interp.LINEAR}


def _f32(v: float) -> float:
    return float(np.float32(v))


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",  # noqa: A002
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resamples (N, C, L) (modes nearest, nearest-exact, linear) or (N, C, H, W) (nearest,
    nearest-exact, bilinear) to `size` or by `scale_factor`, with PyTorch's source-index
    rules (align_corners for the linear modes; a scale_factor is used as given unless
    recompute_scale_factor). No antialias, bicubic, trilinear or area."""
    if antialias:
        raise NotImplementedError("interpolate: antialias is not supported")
    if mode not in _MODES:
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported (nearest, "
                                  f"nearest-exact, linear, bilinear)")
    sp = input.ndim - 2
    if sp not in (1, 2):
        raise ValueError(f"interpolate takes (N, C, L) or (N, C, H, W) input, got "
                         f"{input.shape}")
    if (mode == "linear" and sp != 1) or (mode == "bilinear" and sp != 2):
        raise NotImplementedError(f"interpolate: mode {mode!r} needs a "
                                  f"{'3' if mode == 'linear' else '4'}-D input, got "
                                  f"{input.ndim}-D")
    linear = _MODES[mode] == lib_interp.LINEAR
    if align_corners is not None and not linear:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    align = bool(align_corners)
    _check_float(input, "interpolate")
    ins = tuple(input.shape[2:])
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None and recompute_scale_factor:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size")
    if size is not None:
        outs = tuple(int(s) for s in size) if isinstance(size, (tuple, list)) \
            else (int(size),) * sp
        scales = (None,) * sp
    else:
        sf = tuple(float(s) for s in scale_factor) if isinstance(scale_factor, (tuple, list)) \
            else (float(scale_factor),) * sp
        outs = tuple(int(math.floor(float(i) * f)) for i, f in zip(ins, sf))
        scales = (None,) * sp if recompute_scale_factor else sf
    if len(outs) != sp:
        raise ValueError(f"interpolate: size/scale_factor of {len(outs)} dims for {sp} "
                         f"spatial dims")
    if any(o <= 0 for o in outs):
        raise ValueError(f"interpolate: output size {outs} must be positive")
    if sp == 1:  # a height-1 image
        ins, outs, scales = (1,) + ins, (1,) + outs, (None,) + scales
        x4 = input.unsqueeze(2)
    else:
        x4 = input
    f64 = input.dtype is dtypes.float64
    near, lin, inv = [], [], []
    for i, o, s in zip(ins, outs, scales):
        ns = _f32(1.0 / s) if s is not None and s > 0 else float(np.float32(i) / np.float32(o))
        # PyTorch's 2-D nearest kernel takes sizes kept or doubled as scales 1 and 1/2
        # whatever the scale_factor; its 1-D kernel uses the scale as given
        if mode == "nearest" and sp == 2 and o == i:
            ns = 1.0
        elif mode == "nearest" and sp == 2 and o == 2 * i:
            ns = 0.5
        if align:
            ls = (i - 1) / (o - 1) if o > 1 else 0.0
        elif o == i:  # PyTorch copies an axis that keeps its size (a scale_factor of 1.2
            ls = 1.0  # on 3 values is 3 values, not resampled at 1 / 1.2)
        else:
            ls = 1.0 / s if s is not None and s > 0 else i / o
        ls = ls if f64 else _f32(ls)
        near.append(ns)
        lin.append(ls)
        inv.append(float(o) / i)
    y = _interp(x4, outs, _MODES[mode], align, tuple(near), tuple(lin), tuple(inv))
    return y.squeeze(2) if sp == 1 else y


def _interp(x: Tensor, outs, mode: int, align: bool, near, lin, inv) -> Tensor:
    x = x._materialise()
    rt = x.device.rt
    n, c, ih, iw = x.shape
    buf = counted("interpolate", lib_interp.interpolate, rt, operand(x), outs[0], outs[1],
                  mode, align, near, lin)
    y = result(buf, x.dtype, x.device)

    def back(g):
        b = counted("interpolate_backward", lib_interp.interpolate_backward, rt,
                    operand(_contig(g)), ih, iw, mode, align, near, lin, inv)
        return (result(b, x.dtype, x.device),)
    return record(y, "interpolate", (x,), back)


def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",  # noqa: A002
             align_corners: bool | None = None) -> Tensor:
    """The deprecated F.upsample: interpolate."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:  # noqa: A002
    """Average pooling of (N, C, H, W) or (C, H, W) into output_size (an int, or a pair
    whose None entries keep the input's size): output (i, j) averages input rows
    [floor(i*H/OH), ceil((i+1)*H/OH)) and the like for columns, as PyTorch's."""
    if input.ndim == 3:
        return adaptive_avg_pool2d(input.unsqueeze(0), output_size).squeeze(0)
    if input.ndim != 4:
        raise ValueError(f"adaptive_avg_pool2d takes (N, C, H, W) input, got {input.shape}")
    _check_float(input, "adaptive_avg_pool2d")
    osz = (output_size, output_size) if isinstance(output_size, int) or output_size is None \
        else tuple(output_size)
    n, c, h, w = input.shape
    oh, ow = (h if osz[0] is None else int(osz[0])), (w if osz[1] is None else int(osz[1]))
    if oh <= 0 or ow <= 0:
        raise ValueError(f"adaptive_avg_pool2d: output size ({oh}, {ow}) must be positive")
    x = input._materialise()
    rt = x.device.rt
    buf = counted("adaptive_avg_pool2d", _ap_forward, rt, operand(x), oh, ow)
    y = result(buf, x.dtype, x.device)

    def back(g):
        b = counted("adaptive_avg_pool2d_backward", _ap_backward, rt, operand(_contig(g)), h, w)
        return (result(b, x.dtype, x.device),)
    return record(y, "adaptive_avg_pool2d", (x,), back)


def _ap_forward(rt, x, oh: int, ow: int):
    xb = x.buffer
    n, c = xb.shape[:2]
    return lib_ap.adaptive_avg_pool2d(rt, xb, rt.empty((n, c, oh, ow), xb.elem))


def _ap_backward(rt, g, h: int, w: int):
    gb = g.buffer
    n, c = gb.shape[:2]
    return lib_ap.adaptive_avg_pool2d_backward(rt, gb, rt.empty((n, c, h, w), gb.elem))


def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:  # noqa: A002
    """Adaptive average pooling of (N, C, L) or (C, L): adaptive_avg_pool2d of a height-1
    image."""
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, _one(output_size, "output_size"))
                               ).squeeze(-2)


# ---- embedding ---------------------------------------------------------------------------
def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,  # noqa: A002
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of `weight` (num_embeddings, dim) picked by the int tensor input:
    (*input.shape, dim). The row padding_idx (negative counts from the end) gets no
    gradient. No max_norm, scale_grad_by_freq or sparse."""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: max_norm, scale_grad_by_freq and sparse are not "
                                  "supported")
    flat = input.reshape(-1)
    rows = ops.index_select(weight, 0, flat)
    if padding_idx is not None:
        num = weight.shape[0]
        if not -num <= padding_idx < num:
            raise ValueError(f"padding_idx {padding_idx} is out of range for {num} embeddings")
        pad = padding_idx % num
        if rows.requires_grad:  # the padding row's uses pass no gradient
            keep = (flat != pad).unsqueeze(1)
            rows = ops.where(keep, rows, rows.detach())
    return rows.reshape(*input.shape, weight.shape[1])

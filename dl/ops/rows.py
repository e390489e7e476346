"""Row ops on the kernel library: softmax, log_softmax (any dim) and layer_norm, with their
gradients written as lazy elementwise ops and fused reductions."""
from __future__ import annotations

import warnings

from .. import dtypes, shapes
from ..autograd import record, saved_output
from ..autograd.tape import needs_grad
from ..kernels import norm as lib_norm
from ..kernels import softmax as lib_softmax
from ..tensor import Tensor
from .creation import ones_like, zeros_like
from .libcall import counted, operand, planned_result, result
from .reduce import mean, sum
from .registry import register

_F = (dtypes.float32, dtypes.float64)


def _rows_call(name, fn, x: Tensor, *args, **kwargs) -> Tensor:
    """Runs a library row op (last axis) on x; halves go through float32."""
    dt = x.dtype
    if dt not in _F:
        if not dt.is_float:
            raise TypeError(f"{name} takes float tensors, got {dt}")
        x = x.to(dtypes.float32)
    x._materialise()
    try:
        buf = counted(name, fn, x.device.rt, operand(x), *args, **kwargs)
    except ValueError:  # leading dims that do not collapse into rows: copy
        buf = counted(name, fn, x.device.rt, operand(x, contiguous=True), *args, **kwargs)
    y = result(buf, x.dtype, x.device, x.shape)
    return y if y.dtype is dt else y.to(dt)


def _softmax_raw(x: Tensor, d: int, log: bool) -> Tensor:
    last = x.ndim - 1
    src = x if d == last else x.transpose(d, last)._materialise()  # copied by operand()
    fn = lib_softmax.log_softmax if log else lib_softmax.softmax
    y = _rows_call("log_softmax" if log else "softmax", fn, src)
    return y if d == last else y.transpose(d, last)


def _softmax(x: Tensor, dim: int, log: bool) -> Tensor:
    if x.ndim == 0:
        x1 = _softmax(x.reshape(1), 0, log)
        return x1.reshape(())
    d = shapes.norm_dim(dim, x.ndim)
    y = planned_result((_softmax, d, log), (x,), lambda: _softmax_raw(x, d, log))
    if y is None:
        y = _softmax_raw(x, d, log)

    ys = saved_output(y)

    def back(g):
        yd = ys
        if log:
            return (g - yd.exp() * sum(g, d, keepdim=True),)
        return (yd * (g - sum(g * yd, d, keepdim=True)),)
    return record(y, "log_softmax" if log else "softmax", (x,), back, saved=ys,
                  plan=(("softmax", d, log), (), True))


def implicit_dim(name: str, ndim: int) -> int:
    """PyTorch's legacy dim for softmax-like ops called without one (0 for 0-, 1- and 3-D
    inputs, else 1), with its warning: a default of the last dim gave other values than
    PyTorch on 3-D and 4-D inputs, silently."""
    dim = 0 if ndim in (0, 1, 3) else 1
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated (PyTorch's "
                  f"rule, kept for its values: dim={dim} here). Change the call to include "
                  f"dim=X as an argument.", UserWarning, stacklevel=3)
    return dim


@register("softmax", method=True)
def softmax(x: Tensor, dim: int | None = None) -> Tensor:
    """exp(x) / sum(exp(x)) along `dim`, computed stably. Without a dim, PyTorch's legacy
    choice (`implicit_dim`: 1 for 2-D and 4-D inputs, 0 for 1-D and 3-D) and its warning.

    Float tensors only (float16/bfloat16 through float32); no `dtype` argument. Differentiable.
    Also `t.softmax(dim)`."""
    return _softmax(x, implicit_dim("softmax", x.ndim) if dim is None else dim, False)


@register("log_softmax", method=True)
def log_softmax(x: Tensor, dim: int | None = None) -> Tensor:
    """log(softmax(x)) along `dim`, computed stably (no dim: as `softmax`).

    Float tensors only. Differentiable. Also `t.log_softmax(dim)`."""
    return _softmax(x, implicit_dim("log_softmax", x.ndim) if dim is None else dim, True)


@register("layer_norm")
def layer_norm(x: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Layer normalisation over the last dims, those of normalized_shape.

    (x - mean) / sqrt(var + eps) * weight + bias, with the biased variance, as PyTorch's.
    weight and bias (of normalized_shape) are optional. Float tensors only. Differentiable."""
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if x.shape[x.ndim - len(ns):] != ns:
        raise ValueError(f"layer_norm: normalized_shape {ns} is not the end of {x.shape}")
    eps = float(eps)
    if (weight is None) == (bias is None):
        # a repeated eager call: one tensor-level plan, the autograd record on x itself
        y = planned_result((layer_norm, ns, eps), (x, weight, bias),
                           lambda: _ln_forward(*_ln_parts(x, ns, weight, bias), eps)
                           .reshape(x.shape))
        if y is not None:
            if needs_grad(x, weight, bias):
                x2, w, b = _ln_parts(x.detach(), ns, weight, bias)
                back2 = _ln_backward(x2, w, b, eps)

                def back(g):
                    gx, gw, gb = back2(g.reshape(x2.shape))
                    return (gx.reshape(x.shape), None if gw is None else gw.reshape(ns),
                            None if gb is None else gb.reshape(ns))
                # the closure reads x's rows (x itself, or a copy of a strided x)
                record(y, "layer_norm", (x, weight, bias), back,
                       plan=(("layer_norm", ns, eps), (x2,)))
            return y
    x2, w, b = _ln_parts(x, ns, weight, bias)
    y2 = _ln_forward(x2, w, b, eps)
    record(y2, "layer_norm", (x2, w, b), _ln_backward(x2, w, b, eps),
           plan=(("layer_norm_rows", eps), ()))
    return y2.reshape(x.shape)


def _ln_parts(x: Tensor, ns: tuple, weight, bias) -> tuple:
    """x as (rows, cols) and the weight and bias as (cols,) (both or neither)."""
    cols = shapes.numel(ns)
    x2 = x.reshape(shapes.numel(x.shape[:x.ndim - len(ns)]), cols)
    w = weight.reshape(cols) if weight is not None else None
    b = bias.reshape(cols) if bias is not None else None
    if (w is None) != (b is None):  # the library takes both or neither
        w = w if w is not None else ones_like(b)
        b = b if b is not None else zeros_like(w)
    return x2, w, b


def _ln_forward(x2: Tensor, w, b, eps: float) -> Tensor:
    args = () if w is None else (operand(w.to(dtypes.float32) if w.dtype not in _F else w,
                                         contiguous=True),
                                 operand(b.to(dtypes.float32) if b.dtype not in _F else b,
                                         contiguous=True))
    return _rows_call("layer_norm", lib_norm.layer_norm, x2, *args, eps=eps)


def _ln_backward(x2: Tensor, w, b, eps: float):
    """The gradients (gx, gw, gb) of layer norm's (rows, cols) form from its output's."""
    def back(g):
        g2 = g.reshape(x2.shape)
        if x2.dtype in _F and g2.dtype is x2.dtype and (w is None or w.dtype is x2.dtype):
            # one row kernel: gx, and xhat for the weight's column sum
            gx_b, xhat_b = counted("layer_norm_backward", lib_norm.layer_norm_backward,
                                   x2.device.rt, operand(x2, contiguous=True),
                                   operand(g2, contiguous=True),
                                   None if w is None else operand(w, contiguous=True),
                                   eps=eps)
            gx = result(gx_b, x2.dtype, x2.device, x2.shape)
            xhat = result(xhat_b, x2.dtype, x2.device, x2.shape)
            gw = sum(g2 * xhat, 0) if w is not None and w.requires_grad else None
            gb = sum(g2, 0) if b is not None and b.requires_grad else None
            return gx, gw, gb
        # other dtypes: xhat and rstd from two fused reductions; the rest is lazy and fuses
        xd = x2.detach()
        mu = mean(xd, 1, keepdim=True)
        xc = xd - mu
        rstd = (mean(xc * xc, 1, keepdim=True) + eps).rsqrt()
        xhat = xc * rstd
        gx_hat = g2 * w.detach() if w is not None else g2
        gx = (gx_hat - mean(gx_hat, 1, keepdim=True)
              - xhat * mean(gx_hat * xhat, 1, keepdim=True)) * rstd
        gw = sum(g2 * xhat, 0) if w is not None and w.requires_grad else None
        gb = sum(g2, 0) if b is not None and b.requires_grad else None
        return gx, gw, gb
    return back

"""Batch norm in training mode on the kernel library's per-channel sums (dl/kernels/batchnorm):
one launch for the statistics (and the running statistics), the normalisation a lazy graph
that fuses with what follows (a ReLU); backward one launch for the two gradient sums and one
fused graph for the input's gradient."""
from __future__ import annotations

from .. import dtypes, shapes
from ..autograd import record
from ..fusion import elementwise
from ..fusion.emit_ops import emitter
from ..fusion.writes import before_writes
from ..kernels import batchnorm as lib
from ..kernels.view import strided
from ..tensor import Tensor
from .libcall import copy, counted, result

_F = (dtypes.float32, dtypes.float64)


# The normalisation and the input's gradient are one lazy node each, not a chain of eager
# ops (4 in the forward, 8 in the backward: ~5 us of Python each, every step); the fused
# kernels compute the same expressions in the same order. attrs (has_w, has_b) say which
# of the trailing weight and bias inputs are there (no `* 1` or `+ 0`: -0.0 stays -0.0).
@emitter("bn_norm")
def _norm_math(ctx, node, a):
    """(x - mean) * invstd [* w] [+ b]."""
    ir, (x, mean, invstd, *wb) = ctx.b, a
    y = ir.mul(ir.sub(x, mean), invstd)
    has_w, has_b = node.attrs
    if has_w:
        y = ir.mul(y, wb[0])
    if has_b:
        y = ir.add(y, wb[-1])
    return y


@emitter("bn_grad_input")
def _grad_input_math(ctx, node, a):
    """(g * m - sum(g) - (x - mean) * invstd * sum(g * xhat)) * invstd [* w] * (1 / m)."""
    ir, (g, x, mean, invstd, sg, sgx, m, inv_m, *w) = ctx.b, a
    t = ir.sub(ir.sub(ir.mul(g, m), sg), ir.mul(ir.mul(ir.sub(x, mean), invstd), sgx))
    t = ir.mul(t, invstd)
    if node.attrs[0]:
        t = ir.mul(t, w[0])
    return ir.mul(t, inv_m)


def _node(op: str, inputs: list, dt, attrs: tuple) -> Tensor:
    return elementwise(op, inputs, [dt.compute] * len(inputs), dt, attrs=attrs)


def _as_ncs(t: Tensor):
    """t (N, C, ...) as a contiguous (N, C, S) library view (copied when it is not)."""
    t._materialise()
    if t.offset or not t.is_contiguous():
        t = copy(t)
    n, c = t.shape[:2]
    s = shapes.numel(t.shape[2:])
    return strided(t._buf, (n, c, s), (c * s, s, 1))


def _per_channel(t: Tensor, shape: tuple) -> Tensor:
    """The (C,) tensor t as a (1, C, 1, ...) view without history (what
    `t.detach().reshape(shape)` gives, without the op's checks where t is (C,))."""
    if t.shape != (shape[1],):
        return t.detach().reshape(shape)  # its error names the sizes
    t._materialise()
    st = t._strides[0]
    return Tensor(t._buf, shape, (shape[1] * st, st) + (1,) * (len(shape) - 2), t.offset,
                  t.dtype, t.device)


def _running_ok(r: Tensor | None, x: Tensor) -> bool:
    """A running statistic the kernel can update in place."""
    if r is None or r.dtype is not x.dtype or r.device != x.device or \
            r.shape != (x.shape[1],):
        return False
    r._materialise()  # a lazy one (zeros(C)) becomes the buffer it stands for
    return r.offset == 0 and r.is_contiguous()


def supported(x: Tensor, running_mean, running_var) -> bool:
    if x.dtype not in _F or x.ndim < 2 or x.numel() == 0:
        return False
    if (running_mean is None) != (running_var is None):
        return False
    return running_mean is None or (_running_ok(running_mean, x) and
                                    _running_ok(running_var, x))


def batch_norm_train(x: Tensor, running_mean, running_var, weight, bias, momentum: float,
                     eps: float) -> Tensor:
    """Callers check `supported` first."""
    rt, dev, dt = x.device.rt, x.device, x.dtype
    c = x.shape[1]
    shape = (1, c) + (1,) * (x.ndim - 2)
    x3 = _as_ncs(x)
    rm, rv = (None, None) if running_mean is None else (running_mean._buf, running_var._buf)
    if rm is not None:  # the kernel writes them: lazy values reading them are computed first
        before_writes([rm, rv])
    mean_b, invstd_b = counted("batch_norm_stats", lib.stats, rt, x3, eps, rm, rv, momentum)
    mean, invstd = result(mean_b, dt, dev, shape), result(invstd_b, dt, dev, shape)
    w = _per_channel(weight, shape) if weight is not None else None
    b = _per_channel(bias, shape) if bias is not None else None
    y = _node("bn_norm", [x.detach(), mean, invstd, *(t for t in (w, b) if t is not None)],
              dt, (w is not None, b is not None))

    def back(g):
        m = x3.shape[0] * x3.shape[2]
        sg_b, sgx_b = counted("batch_norm_grad_sums", lib.grad_sums, rt, x3,
                                     _as_ncs(g), mean_b, invstd_b)
        sg, sgx = result(sg_b, dt, dev, (c,)), result(sgx_b, dt, dev, (c,))
        gx = None
        if x.requires_grad:
            # (g - mean(g) - xhat * mean(g * xhat)) * invstd * w, written so that every
            # per-channel operand is a leaf of the one fused graph (a lazy (1, C, 1, 1)
            # product would be computed on its own first)
            gx = _node("bn_grad_input", [g, x.detach(), mean, invstd,
                                         result(sg_b, dt, dev, shape),
                                         result(sgx_b, dt, dev, shape), float(m), 1.0 / m,
                                         *(() if w is None else (w,))], dt, (w is not None,))
        gw = sgx if weight is not None and weight.requires_grad else None
        gb = sg if bias is not None and bias.requires_grad else None
        return gx, gw, gb
    # beyond its operands, the closure reads x's (N, C, S) view or copy and the statistics
    return record(y, "batch_norm", (x, weight, bias), back,
                  plan=(("batch_norm",), (x3, mean_b, invstd_b)))

"""Scaled dot-product attention through the fused kernel (dl/kernels/attention.py) where it
applies: no gradient wanted, no mask but causality, (B, H, L, D) or (B, L, D) float operands
with the same leading dims, the kernel's line and size limits. The views are read where they
lie (a multi-head layer's q, k and v are slices of one projection)."""
from __future__ import annotations

from .. import dtypes
from ..autograd.grad_mode import is_grad_enabled
from ..kernels import attention as lib
from ..kernels.view import strided
from ..tensor import Tensor
from .libcall import counted

_F = (dtypes.float32, dtypes.float64)


def _view4(t: Tensor):
    """t's (B, H, L, D) view of its storage (a 3-D t as one head) and its offset."""
    t._materialise()
    shape, strides = t.shape, t._strides
    if t.ndim == 3:
        shape, strides = (shape[0], 1, *shape[1:]), (strides[0], 0, *strides[1:])
    return strided(t._buf, shape, strides), t.offset


def fused(q: Tensor, k: Tensor, v: Tensor, scale: float, causal: bool,
          heads_last: bool = False) -> Tensor | None:
    """softmax(scale * q @ k^T [causal]) @ v by the fused kernel, or None where it does not
    apply (the caller runs the unfused ops). heads_last: the result is a (B, H, Lq, D) view
    of (B, Lq, H, D) memory (its transpose(1, 2) is contiguous)."""
    if q.ndim not in (3, 4) or k.ndim != q.ndim or v.ndim != q.ndim or q.dtype not in _F \
            or k.dtype is not q.dtype or v.dtype is not q.dtype \
            or k.device != q.device or v.device != q.device \
            or q.shape[:-2] != k.shape[:-2] or k.shape != v.shape or q.shape[-1] != k.shape[-1] \
            or 0 in q.shape or 0 in k.shape:
        return None
    if is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return None
    rt = q.device.rt
    (qv, q0), (kv, k0), (vv, v0) = _view4(q), _view4(k), _view4(v)
    if not lib.supported(rt, qv, kv, vv, (q0, k0, v0)):
        return None
    heads_last = bool(heads_last) and q.ndim == 4
    buf = counted("attention", lib.attention, rt, qv, kv, vv, q0, k0, v0, float(scale),
                  bool(causal), heads_last)
    b, h, lq, d = qv.shape
    strides = lib.out_strides(b, h, lq, d, heads_last)
    if q.ndim == 3:  # one head: drop its dim
        return Tensor(buf.buffer, (b, lq, d), (strides[0], *strides[2:]), 0, q.dtype, q.device)
    return Tensor(buf.buffer, (b, h, lq, d), strides, 0, q.dtype, q.device)

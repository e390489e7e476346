"""Summing over axes, as autodiff needs it (broadcast gradients, mse_loss's mean).

STOPGAP: permutes the reduced axes innermost, copies that view contiguous (a fused cast to the
accumulation type) and sums rows with `dl/kernels/tensor_reduce_grad.py`.
TODO(issue 5): use the kernel library's reduction over any axis when it merges."""
from __future__ import annotations

from .. import dtypes, shapes
from ..autograd import record
from ..fusion import elementwise
from ..kernels.launch import launch_1d
from ..kernels.tensor_reduce_grad import sum_rows_stopgap
from ..tensor import Tensor


def _acc_type(d: dtypes.DType) -> dtypes.DType:
    if d.is_float:
        return dtypes.float64 if d is dtypes.float64 else dtypes.float32
    return dtypes.int64


def sum_dims(x: Tensor, dims, keepdim: bool = False) -> Tensor:
    """Sum of x over `dims` (differentiable). Internal: the public `sum` is issue 5's."""
    dims = sorted({shapes.norm_dim(d, x.ndim) for d in dims}) if x.ndim else []
    kept = [d for d in range(x.ndim) if d not in dims]
    out_shape = tuple(1 if d in dims else x.shape[d] for d in range(x.ndim)) if keepdim \
        else tuple(x.shape[d] for d in kept)
    acc = _acc_type(x.dtype)
    rows = shapes.numel(x.shape[d] for d in kept)
    cols = shapes.numel(x.shape[d] for d in dims)
    if not dims:
        y = x.to(acc)
    else:
        from .shape import permute
        block = elementwise("cast", [permute(x, *kept, *dims)], [x.dtype.compute], acc)
        block._materialise()
        if rows and cols:
            y = Tensor._empty(out_shape, acc, x.device)
            launch_1d(sum_rows_stopgap, x.device.rt, rows, x=block._buf, out=y._buf,
                      rows=rows, cols=cols)
        else:  # nothing to add up: zeros (or an empty result)
            from .creation import zeros
            y = zeros(out_shape, dtype=acc, device=x.device)
    y = y.to(x.dtype) if x.dtype.is_float else y
    if x.dtype.is_float:
        shape = x.shape
        keep_shape = tuple(1 if d in dims else x.shape[d] for d in range(x.ndim))
        record(y, "sum", (x,), lambda g: (g.reshape(keep_shape).expand(*shape),))
    return y


def sum_to(g: Tensor, shape) -> Tensor:
    """Sum a broadcast gradient back to `shape` (the input's shape)."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    dims = list(range(lead)) + [lead + d for d, s in enumerate(shape)
                                if s == 1 and g.shape[lead + d] != 1]
    return sum_dims(g, dims, keepdim=False).reshape(shape)

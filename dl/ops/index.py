"""Indexing ops that move data between positions: index_select, gather, cat, stack, repeat."""
from __future__ import annotations

from .. import dtypes, shapes
from ..autograd import no_grad, record
from ..kernels.launch import launch_1d
from ..kernels.scatter import ADD
from ..kernels.tensor_index import gather_kernel, index_select_kernel
from ..tensor import Tensor
from .bounds import check_bounds
from .common import result_type
from .creation import zeros
from .elementwise import cast
from .registry import register
from .shape import assign, contiguous, getitem, reshape, unsqueeze

# the gradients scatter with dl/ops/indexing.py's kernels; that module builds on this one and
# installs its entry points here when it is imported
SCATTER: dict = {}


def _check_index(idx: Tensor, what: str) -> Tensor:
    if idx.dtype not in (dtypes.int32, dtypes.int64):
        raise TypeError(f"{what}: the index must be int32 or int64, got {idx.dtype}")
    return idx._materialise()


def _acc(x: Tensor) -> Tensor:
    """Gradient kernels accumulate halves in f32."""
    return cast(x, dtypes.float32) if x.dtype.itemsize == 2 and x.dtype.is_float else x


@register("index_select", method=True)
def index_select(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """The entries of x at positions `index` along `dim`.

    index: a 1-D int32/int64 tensor; the result has x's shape with dim's size replaced by
    len(index) (a copy). Differentiable (the gradient is an index_add into zeros: repeated
    indices accumulate in index order, deterministically). Also `t.index_select(dim, index)`."""
    idx = _check_index(index, "index_select")
    if idx.ndim != 1:
        raise ValueError(f"index_select needs a 1-D index, got shape {idx.shape}")
    if x.ndim == 0:
        raise ValueError("index_select on a 0-d tensor")
    d = shapes.norm_dim(dim, x.ndim)
    idx = contiguous(idx)._materialise()
    check_bounds(idx, x.shape[d], "index_select", d, wrap=False)
    x._materialise()
    shape = x.shape[:d] + (idx.shape[0],) + x.shape[d + 1:]
    y = Tensor._empty(shape, x.dtype, x.device)
    n = y.numel()
    launch_1d(index_select_kernel, x.device.rt, n, x=x._karg(), x_off=x.offset,
              idx=idx._buf, idx_off=idx.offset, out=y._karg(), n=n, dim=d)
    xshape = x.shape

    def back(g):  # index_add of g into zeros: repeated indices summed in index order
        g = _acc(g)
        gx = zeros(xshape, dtype=g.dtype, device=g.device)._materialise()
        SCATTER["index_add_into"](gx, d, idx, g, 1)
        return (cast(gx, x.dtype),)
    return record(y, "index_select", (x,), back)


@register("gather", method=True)
def gather(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """out[i][j][k] = x[index[i][j][k]][j][k] for dim 0 (likewise for other dims).

    index: an int32/int64 tensor of x's rank, no larger than x outside `dim`; the result has
    index's shape. Differentiable (the gradient is a scatter_add into zeros: repeated indices
    accumulate in index order, deterministically). Also `t.gather(dim, index)`."""
    idx = _check_index(index, "gather")
    d = shapes.norm_dim(dim, x.ndim)
    if idx.ndim != x.ndim:
        raise ValueError(f"gather: index of shape {idx.shape} must have the rank of the "
                         f"input's shape {x.shape}")
    for k in range(x.ndim):
        if k != d and idx.shape[k] > x.shape[k]:
            raise ValueError(f"gather: index shape {idx.shape} exceeds the input's shape "
                             f"{x.shape} in dimension {k}")
    check_bounds(idx, x.shape[d], "gather", d, wrap=False)
    x._materialise()
    y = Tensor._empty(idx.shape, x.dtype, x.device)
    n = y.numel()
    launch_1d(gather_kernel, x.device.rt, n, x=x._karg(), x_off=x.offset, idx=idx._karg(),
              idx_off=idx.offset, out=y._karg(), n=n, dim=d)
    xshape = x.shape

    def back(g):  # scatter_add of g into zeros: repeated indices summed in index order
        g = _acc(g)._materialise()
        gx = zeros(xshape, dtype=g.dtype, device=g.device)._materialise()
        SCATTER["scatter_into"](gx, d, idx, g, ADD, check=False)
        return (cast(gx, x.dtype),)
    return record(y, "gather", (x,), back)


@register("cat", "concat", "concatenate")
def cat(tensors, dim: int = 0) -> Tensor:
    """The tensors joined along an existing `dim` (their shapes agree elsewhere).

    The result has their promoted dtype. Empty 1-D tensors of shape (0,) are skipped (as
    PyTorch's legacy rule), though their dtypes promote too (as PyTorch's). Registered also
    as `concat` and `concatenate`. Differentiable."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat needs at least one tensor")
    ref = next((t for t in tensors if t.shape != (0,)), tensors[0])
    parts = [t for t in tensors if t.shape != (0,) or ref.shape == (0,)]  # legacy empty 1-D
    d = shapes.norm_dim(dim, ref.ndim)
    for t in parts:
        if t.ndim != ref.ndim or any(t.shape[k] != ref.shape[k] for k in range(ref.ndim)
                                     if k != d):
            raise ValueError(f"cat along dim {d}: shapes {[tuple(p.shape) for p in parts]} "
                             f"differ outside that dimension")
    dt = result_type(*tensors)  # a skipped empty one too, as torch's
    size = sum(t.shape[d] for t in parts)
    y = Tensor._empty(ref.shape[:d] + (size,) + ref.shape[d + 1:], dt, ref.device)
    pos, spans = 0, []
    for t in parts:
        sl = (slice(None),) * d + (slice(pos, pos + t.shape[d]),)
        with no_grad():
            assign(getitem(y, sl), t)
        spans.append(sl)
        pos += t.shape[d]
    return record(y, "cat", tuple(parts), lambda g: tuple(
        cast(getitem(g, sl), t.dtype) for sl, t in zip(spans, parts)))


@register("stack")
def stack(tensors, dim: int = 0) -> Tensor:
    """The tensors (all of one shape) joined along a new `dim`."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack needs at least one tensor")
    shape = tensors[0].shape
    for t in tensors:
        if t.shape != shape:
            raise ValueError(f"stack needs tensors of one shape, got "
                             f"{[tuple(t.shape) for t in tensors]}")
    d = shapes.norm_dim(dim, len(shape) + 1)
    return cat([unsqueeze(t, d) for t in tensors], d)


@register("repeat", method=True)
def repeat(x: Tensor, *sizes) -> Tensor:
    """Tile x: an expanded view over interleaved size-1 dims, copied contiguous."""
    sizes = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) \
        else tuple(sizes)
    if len(sizes) < x.ndim:
        raise ValueError(f"repeat: {len(sizes)} sizes for a tensor of rank {x.ndim}")
    xs = reshape(x, *((1,) * (len(sizes) - x.ndim) + x.shape))
    inter = []
    for s in xs.shape:
        inter += [1, s]
    target = []
    for r, s in zip(sizes, xs.shape):
        target += [r, s]
    big = reshape(xs, *inter).expand(*target)
    return reshape(big, *(r * s for r, s in zip(sizes, xs.shape)))

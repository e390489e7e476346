"""Indexing and data movement: scatter, index_add, index_put, masked ops, advanced indexing,
take_along_dim, chunk/split/unbind/narrow, flip/roll, tril/triu, pad, nonzero (issue 17).

The kernels are in dl/kernels/scatter.py; chunk/split/unbind/narrow are views, pad is
composed of views, flip and cat (reflect/replicate/circular) or a fill and a copy (constant),
masked_fill is a fused elementwise `where`. In-place variants (`t.scatter_`, `t.index_add_`,
...) write into t's storage; under autograd they compute the out-of-place result from t's old
value, copy it back and move the history onto t.

Where dl differs from PyTorch:
- accumulation (scatter_add, index_add, index_put(accumulate=True), the gradients of
  advanced indexing) is deterministic, summed in index order without atomics: each target's
  first unit sums its run; long index rows (> SORT_ABOVE) are sorted first with dl.sort, whose
  bitonic sort then dominates the cost;
- repeated indices without accumulation (scatter, index_put, setitem): one of the values
  wins (PyTorch: unspecified);
- scatter(reduce="add") has a gradient (PyTorch has none for reduce=), "multiply" has none;
- nonzero, masked_select and boolean-mask indexing synchronise with the host (the count
  decides the shape); nonzero's result is int32 on devices without 64-bit integers (WGSL),
  where index tensors must be int32 too;
- 0-d boolean masks (`t[True]`) are not supported; slices need a positive step.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes, shapes
from ..autograd import no_grad, overwrites, record
from ..autograd.grad_mode import enable_grad, is_grad_enabled
from ..autograd.tape import needs_grad
from ..fusion import elementwise, writes
from ..fusion.writes import before_write
from ..kernels import scatter as K
from ..kernels.launch import launch_1d
from ..tensor import VIEW_HISTORY, Tensor
from .bounds import check_bounds as _check_bounds
from .creation import full, tensor, zeros
from .elementwise import cast, ne, where
from .index import SCATTER, cat, gather, index_select
from .reduce import sum_to
from .registry import register
from .shape import ADVANCED, assign, contiguous, expand, getitem, reshape, setitem
from .sorting import sort

__all__ = ["scatter", "scatter_", "scatter_add", "scatter_add_", "index_add", "index_add_",
           "index_put", "index_put_", "masked_fill", "masked_fill_", "masked_select",
           "take_along_dim", "chunk", "split", "unbind", "narrow", "select", "flip", "roll", "tril",
           "triu", "tril_", "triu_", "pad", "nonzero"]


# ---- helpers -------------------------------------------------------------------------------
# accumulation with index rows longer than this sorts the indices first (O(K log K) instead of
# each unit scanning the row before it, O(K^2))
SORT_ABOVE = 64


def _check_index(idx, what: str) -> Tensor:
    if not isinstance(idx, Tensor):
        raise TypeError(f"{what}: the index must be a tensor, got {type(idx).__name__}")
    if idx.dtype not in (dtypes.int32, dtypes.int64):
        raise TypeError(f"{what}: the index must be int32 or int64, got {idx.dtype}")
    return idx._materialise()


def _wrap(idx: Tensor, size: int) -> Tensor:
    return where(idx < 0, idx + size, idx)


def _alias(x: Tensor) -> Tensor:
    """Another Tensor object for x's storage and history (an in-place op's old value)."""
    x._materialise()
    a = Tensor(x._buf, x.shape, x._strides, x.offset, x.dtype, x.device)
    a.requires_grad, a._grad_fn, a._hist_at = x.requires_grad, x._grad_fn, x._hist_at
    return a


def _inplace(x: Tensor, name: str, out_of_place, direct) -> Tensor:
    """x <- the op's result: `direct(x)` writes into x (callers pass it when no autograd is
    needed); else the result is computed from an alias of x, copied back, and x takes over
    its history."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a tensor, got {type(x).__name__}")
    if is_grad_enabled():
        overwrites.refuse_leaf_write(x, name)
        overwrites.check_history((x,))  # a view written through its base: its new history,
        # which the op's result continues
    x._materialise()
    if direct is not None:
        before_write(x)
        direct(x)
        x._hist_at = writes.count[0]
        return x
    write_back(x, out_of_place(_alias(x)))
    return x


def _region(t: Tensor, idx) -> Tensor:
    """t[idx], or for a view made by a shape op (`shape._viewing`: idx is the op) the op
    applied to t."""
    return idx(t) if callable(idx) else getitem(t, idx)


def _write_region(b: Tensor, idx, y: Tensor) -> None:
    """`b[idx] = y`, where idx may be a shape op's (`_region`): recorded for autograd when
    b or y needs it, as setitem's."""
    if not callable(idx):
        setitem(b, idx, y)
    elif is_grad_enabled() and (b.requires_grad or y.requires_grad):
        _inplace(b, "setitem", lambda a: _setitem_out(a, idx, y), None)
    else:
        with no_grad():
            view = idx(b)
        assign(view, y)
        b._hist_at = view._hist_at


def _base_view(b: Tensor, idx) -> Tensor:
    """The view `_region(b, idx)` with b's current history, through an alias of b (a leaf
    base is its own edge: an alias object of it would collect its gradient)."""
    return _region(b if b._grad_fn is None else _alias(b), idx)


def regenerate(x: Tensor) -> bool:
    """Give x, a view made by indexing or a shape op whose storage was written through
    another tensor, the history of its base's current value (the view of it again); False
    where x is no such view or its base's history is stale too (the tape then refuses x)."""
    src = x._index_of
    if src is None:
        return False
    b, idx = src
    if writes.written_since(b, b._hist_at):
        if b._grad_fn is not None:
            if not regenerate(b):
                return False
        else:
            _view_history(b)  # a view of b's base without history: b takes the base's
    nv = _base_view(b, idx)
    x.requires_grad, x._grad_fn, x._hist_at = nv.requires_grad, nv._grad_fn, \
        writes.count[0]
    return True


def _view_history(x: Tensor) -> bool:
    """`x.requires_grad` of a view x without history (tensor.py): where x's storage was
    written since x's history was set, x takes its base's current one, which requires grad
    when an in-place write gave the base (or its base) a value that does. With grad mode on
    whatever mode the read is in: that history is a fact of x's value, as torch's view
    regeneration is."""
    if not writes.written_since(x, x._hist_at):
        return False
    with enable_grad():
        regenerate(x)
    return x._rg


overwrites.REGENERATE[0] = regenerate
VIEW_HISTORY[0] = _view_history


def write_back(x: Tensor, y: Tensor) -> None:
    """x <- y (x's shape) in x's storage, x taking y's history (an in-place op recorded for
    autograd). A view made by basic indexing (`x = b[idx]`) or a shape op (a reshape, a
    transpose: `shape._viewing`) writes through b instead, `b[idx] = y`, so b takes the
    history too (PyTorch rebases a view's base), and x then views b's new value; recursively
    where b is such a view itself."""
    src = x._index_of
    if src is not None:
        b, idx = src
        _write_region(b, idx, y)
        nv = _base_view(b, idx)  # of b's history now (a later op on b makes b another)
        x.requires_grad, x._grad_fn, x._hist_at = nv.requires_grad, nv._grad_fn, \
            nv._hist_at
        return
    lazy = y._buf is None
    # the op's gradient closure reads y through an alias on y's node (`saved_output`): it
    # is y's value as much as y is
    saved = y._grad_fn.saved if lazy and y._grad_fn is not None else None
    also = (saved,) if saved is not None and saved._node is y._node else ()
    with no_grad():
        assign(x, y, internal=lazy, also=also)  # y is the caller's: computed in the write
    if lazy:  # y's value is x's storage now (a gradient reading y reads it there)
        for t in (y, *also):
            t._buf, t._node, t._strides, t.offset = x._buf, None, x._strides, x.offset
    if y.requires_grad:
        x.requires_grad, x._grad_fn = True, y._grad_fn
        if lazy:  # the write made the op's output: it is not a later change of it
            y._grad_fn.at = writes.count[0]
    x._hist_at = writes.count[0]


def _grad_needed(*xs) -> bool:
    return needs_grad(*[t for t in xs if isinstance(t, Tensor)])


def _fresh(x: Tensor) -> Tensor:
    """A contiguous copy of x at offset 0 (no autograd)."""
    with no_grad():
        return elementwise("identity", [x], [x.dtype.compute], x.dtype)._materialise()


def _value_tensor(value, like: Tensor) -> Tensor:
    if isinstance(value, Tensor):
        return value
    return full((1,), value, dtype=like.dtype, device=like.device)._materialise()


# ---- scatter ------------------------------------------------------------------------------
_MODES = {None: K.SET, "add": K.ADD, "sum": K.ADD, "multiply": K.MUL, "prod": K.MUL}


def _scatter_check(x: Tensor, dim, idx: Tensor, src, what: str) -> int:
    d = shapes.norm_dim(dim, max(x.ndim, 1))
    if idx.ndim != max(x.ndim, 1) and not (idx.ndim == 0 and x.ndim == 0):
        raise RuntimeError(f"{what}: index of shape {idx.shape} must have the rank of the "
                           f"input's shape {x.shape}")
    for k in range(idx.ndim):
        xs = x.shape[k] if x.ndim else 1
        if k != d and idx.shape[k] > xs:
            raise RuntimeError(f"{what}: index shape {idx.shape} exceeds the input's shape "
                               f"{x.shape} in dimension {k}")
        if isinstance(src, Tensor) and (src.ndim != idx.ndim or idx.shape[k] > src.shape[k]):
            raise RuntimeError(f"{what}: index shape {idx.shape} exceeds the source's shape "
                               f"{src.shape} in dimension {k}")
    if isinstance(src, Tensor) and src.dtype is not x.dtype:
        raise RuntimeError(f"{what}: expected self.dtype to be equal to src.dtype, got "
                           f"{x.dtype} and {src.dtype}")
    return d


def _scatter_into(dst: Tensor, d: int, idx: Tensor, src, mode: int, check: bool = True) -> None:
    """dst (materialised) updated in place along dim d (`check`: the indices' bounds)."""
    if dst.dtype is dtypes.bool_ and mode in (K.ADD, K.MUL):
        mode = K.OR if mode == K.ADD else K.AND
    n = idx.numel()
    if n == 0:
        return
    shape = dst.shape or (1,)
    dstrides = dst._strides or (1,)
    ishape = idx.shape or (1,)
    s = _value_tensor(src, dst)
    s._materialise()
    sstr = (0,) * len(ishape) if s.numel() == 1 and not isinstance(src, Tensor) else \
        (s._strides or (1,))
    if check:
        _check_bounds(idx, shape[d], "scatter", d, wrap=False)
    if mode in (K.ADD, K.MUL) and ishape[d] > SORT_ABOVE:
        with no_grad():
            srt = sort(idx if idx.ndim else reshape(idx, 1), d, stable=True)
        sidx = contiguous(srt.values)._materialise()
        perm = contiguous(srt.indices)._materialise()
        launch_1d(K.scatter_sorted_kernel, dst.device.rt, n, x=dst._karg(shape, dstrides),
                  x_off=dst.offset, sidx=sidx._karg(ishape, sidx._strides or (1,)),
                  perm=perm._karg(ishape, perm._strides or (1,)), src=s._karg(ishape, sstr),
                  src_off=s.offset, n=n, dim=d, mode=mode)
        return
    launch_1d(K.scatter_kernel, dst.device.rt, n, x=dst._karg(shape, dstrides),
              x_off=dst.offset, idx=idx._karg(ishape, idx._strides or (1,)),
              idx_off=idx.offset, src=s._karg(ishape, sstr), src_off=s.offset, n=n, dim=d,
              mode=mode)


def _scatter(x, dim, index, src, mode, what):
    idx = _check_index(index, what)
    d = _scatter_check(x, dim, idx, src, what)
    y = _fresh(x)
    _scatter_into(y, d, idx, src, mode)
    st = src if isinstance(src, Tensor) else None

    def back(g):
        if mode == K.MUL:
            raise RuntimeError(f"{what} with reduce='multiply' has no gradient in dl")
        gx = g if mode == K.ADD else scatter(g, d, idx, 0.0)
        gs = None if st is None else _pad_to(gather(g, d, idx), st.shape)
        return gx, gs
    return record(y, what, (x, st), back)


def _pad_to(g: Tensor, shape) -> Tensor:
    """g (a gradient of index's shape) padded with zeros to the source's shape."""
    if g.shape == tuple(shape):
        return g
    out = zeros(shape, dtype=g.dtype, device=g.device)._materialise()
    assign(getitem(out, tuple(slice(0, s) for s in g.shape)), g)
    return out


@register("scatter", method=True)
def scatter(input: Tensor, dim: int, index: Tensor, src=None, *, value=None,  # noqa: A002
            reduce: str | None = None) -> Tensor:
    """A copy of input with `src` (a tensor of index's rank, or a scalar; or `value=`)
    written along `dim` at `index`: out[index[i][j]][j] = src[i][j] for dim 0.

    reduce: None (write), "add" or "multiply" (combine with the existing values, repeated
    indices all applied). As PyTorch, which entry wins for repeated indices without reduce
    is unspecified (dl: one of them). Indices out of range raise IndexError (a host check).
    Differentiable in input and src (not with reduce="multiply"). Also `t.scatter(...)`."""
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter needs src (a tensor) or value (a scalar)")
    if reduce not in ("add", "multiply", None):
        raise ValueError(f"scatter: reduce must be 'add' or 'multiply', got {reduce!r}")
    return _scatter(input, dim, index, src, _MODES[reduce], "scatter")


@register("scatter_", method=True)
def scatter_(input: Tensor, dim: int, index: Tensor, src=None, *, value=None,  # noqa: A002
             reduce: str | None = None) -> Tensor:
    """In-place `scatter` (see there); returns input."""
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter_ needs src (a tensor) or value (a scalar)")
    if reduce not in ("add", "multiply", None):
        raise ValueError(f"scatter_: reduce must be 'add' or 'multiply', got {reduce!r}")
    mode = _MODES[reduce]
    if not _grad_needed(input, src):
        idx = _check_index(index, "scatter_")
        d = _scatter_check(input, dim, idx, src, "scatter_")
        return _inplace(input, "scatter_", lambda a: a, lambda x: _scatter_into(
            x, d, idx, src, mode))
    return _inplace(input, "scatter_", lambda a: _scatter(a, dim, index, src, mode,
                                                          "scatter"), None)


@register("scatter_add", method=True)
def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:  # noqa: A002
    """A copy of input with src added along `dim` at `index` (out[index[i][j]][j] +=
    src[i][j] for dim 0); repeated indices accumulate, in index order (deterministic).
    Differentiable in input and src. Also `t.scatter_add(...)`."""
    if not isinstance(src, Tensor):
        raise TypeError("scatter_add: src must be a tensor")
    return _scatter(input, dim, index, src, K.ADD, "scatter_add")


@register("scatter_add_", method=True)
def scatter_add_(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:  # noqa: A002
    """In-place `scatter_add` (see there); returns input."""
    if not isinstance(src, Tensor):
        raise TypeError("scatter_add_: src must be a tensor")
    if not _grad_needed(input, src):
        idx = _check_index(index, "scatter_add_")
        d = _scatter_check(input, dim, idx, src, "scatter_add_")
        return _inplace(input, "scatter_add_", lambda a: a, lambda x: _scatter_into(
            x, d, idx, src, K.ADD))
    return _inplace(input, "scatter_add_", lambda a: scatter_add(a, dim, index, src), None)


# ---- take / put through element offsets ------------------------------------------------------
def _take(x: Tensor, off: Tensor, pre: tuple, post: tuple) -> Tensor:
    """out[pre..., k, post...] = x's storage at x.offset + off[k] + pre/post coordinates
    times the strides `pre`/`post` (tuples of (size, stride)); contiguous, no autograd."""
    k = off.shape[0]
    shape = tuple(s for s, _ in pre) + (k,) + tuple(s for s, _ in post)
    y = Tensor._empty(shape, x.dtype, x.device)
    n = y.numel()
    if n:
        st = tuple(t for _, t in pre) + (0,) + tuple(t for _, t in post)
        launch_1d(K.take_kernel, x.device.rt, n, x=x._karg(shape, st), x_off=x.offset,
                  off=off._buf, out=y._karg(), n=n, dim=len(pre))
    return y


def _put(dst: Tensor, off: Tensor, pre_st: tuple, post_st: tuple, v: Tensor, mode: int):
    """dst's storage at dst.offset + off[k] + coordinates times pre_st/post_st <- v (shape
    (pre, K, post), strided); mode 0 write, 1 add (unique offsets), 2 add (repeats summed)."""
    n = v.numel()
    if n == 0:
        return
    v._materialise()
    if dst.dtype is dtypes.bool_ and mode:
        mode = K.OR
    st = tuple(pre_st) + (0,) + tuple(post_st)
    if mode == 2 and off.shape[0] > SORT_ABOVE:
        with no_grad():
            srt = sort(off, 0, stable=True)
        soff = contiguous(srt.values)._materialise()
        perm = contiguous(srt.indices)._materialise()
        launch_1d(K.sorted_put_kernel, dst.device.rt, n, x=dst._karg(v.shape, st),
                  x_off=dst.offset, soff=soff._buf, perm=perm._buf, v=v._karg(),
                  v_off=v.offset, n=n, dim=len(pre_st))
        return
    launch_1d(K.put_kernel, dst.device.rt, n, x=dst._karg(v.shape, st), x_off=dst.offset,
              off=off._buf, v=v._karg(), v_off=v.offset, n=n, dim=len(pre_st), mode=mode)


def _offsets(idxs, strides, sizes, dev) -> Tensor:
    """sum_m wrap(idxs[m]) * strides[m] over broadcast index tensors, flattened, contiguous."""
    it = dtypes.index_dtype(dev)
    off = None
    for i, st, size in zip(idxs, strides, sizes):
        term = cast(_wrap(i, size), it) * st
        off = term if off is None else off + term
    return contiguous(reshape(off, -1))._materialise()


class _Adv:
    """An advanced index on x: the basic part as a view, then index tensors on some of the
    view's dims. `pre`/`post`: the view's dims before/after the indexed block (all after
    when the indexed dims are not adjacent, as PyTorch puts the index dims first). Ints are
    basic indices (PyTorch's rule, unlike NumPy's): x[1, :, j] has j's dims in place."""

    def __init__(self, x: Tensor, idx, what: str):
        if not isinstance(idx, tuple):
            idx = (idx,)
        items, unique = [], True
        n_masks = 0
        for i in idx:
            if isinstance(i, (list, np.ndarray)) or (isinstance(i, bool)):
                i = tensor(i, device=x.device)
            if isinstance(i, Tensor) and i.dtype is dtypes.bool_:
                n_masks += 1
                items.append(("mask", i))
            elif isinstance(i, Tensor):
                if i.dtype.is_float:
                    raise IndexError("tensors used as indices must be long, int or bool "
                                     f"tensors, got {i.dtype}")
                unique = False
                items.append(("int", i))
            else:
                items.append(("basic", i))
        consumed = sum(i[1].ndim if i[0] == "mask" else 0 if i[1] is None or i[1] is Ellipsis
                       else 1 for i in items)
        if consumed > x.ndim:
            raise IndexError(f"too many indices for a tensor of shape {x.shape}: {consumed} "
                             f"dims indexed")
        if sum(1 for i in items if i[1] is Ellipsis) > 1:
            raise IndexError("an index can only have a single ellipsis")
        expanded = []
        for kind, i in items:
            if kind == "basic" and i is Ellipsis:
                expanded += [("basic", slice(None))] * (x.ndim - consumed)
            else:
                expanded.append((kind, i))
        expanded += [("basic", slice(None))] * (x.ndim - sum(
            1 for k, i in expanded if k != "mask" and i is not None) - sum(
            i.ndim for k, i in expanded if k == "mask"))
        basic, tens, vd, xd = [], [], 0, 0  # tens: (view dim, int tensor)
        for kind, i in expanded:
            if kind == "mask":
                for k in range(i.ndim):
                    if i.shape[k] != x.shape[xd + k]:
                        raise IndexError(
                            f"the shape of the mask {list(i.shape)} at index {k} does not "
                            f"match the shape of the indexed tensor {list(x.shape)} at index "
                            f"{xd + k}")
                if i.ndim == 0:
                    raise IndexError("0-d boolean masks are not supported")
                for c in nonzero(i, as_tuple=True):
                    basic.append(slice(None))
                    tens.append((vd, c))
                    vd += 1
                xd += i.ndim
            elif kind == "int":
                basic.append(slice(None))
                tens.append((vd, i))
                vd += 1
                xd += 1
            elif i is None:
                basic.append(None)
                vd += 1
            elif isinstance(i, slice):
                basic.append(i)
                vd += 1
                xd += 1
            else:
                basic.append(i)
                xd += 1
        self.basic = tuple(basic)
        self.unique = unique and n_masks == 1
        with no_grad():
            view = getitem(x, self.basic)
        self.view_shape = view.shape
        self.dims = [d for d, _ in tens]
        bshape = shapes.broadcast_shapes(*(t.shape for _, t in tens))
        self.bshape = bshape
        self.idxs = []
        for d, t in tens:
            if not unique or n_masks != 1:
                _check_bounds(t, view.shape[d], what, d)
            self.idxs.append(expand(t, *bshape))
        adjacent = self.dims == list(range(self.dims[0], self.dims[-1] + 1))
        rest = [d for d in range(view.ndim) if d not in self.dims]
        self.pre = [d for d in rest if adjacent and d < self.dims[0]]
        self.post = [d for d in rest if d not in self.pre]
        self.out_shape = tuple(view.shape[d] for d in self.pre) + bshape + tuple(
            view.shape[d] for d in self.post)
        self.kshape = tuple(view.shape[d] for d in self.pre) + (shapes.numel(bshape),) + tuple(
            view.shape[d] for d in self.post)

    def offsets(self, t: Tensor) -> Tensor:
        """The flat element offsets of the index into a tensor t of the view's shape."""
        return _offsets(self.idxs, [t._strides[d] for d in self.dims],
                        [self.view_shape[d] for d in self.dims], t.device)

    def take(self, v: Tensor) -> Tensor:
        """v (the view's shape) at the index, shaped as the result."""
        off = self.offsets(v)
        y = _take(v, off, [(v.shape[d], v._strides[d]) for d in self.pre],
                  [(v.shape[d], v._strides[d]) for d in self.post])
        return y._view(self.out_shape, shapes.contiguous_strides(self.out_shape), 0)

    def put(self, dst: Tensor, value, accumulate: bool) -> None:
        """dst (materialised, the view's shape) at the index <- value (broadcast)."""
        if isinstance(value, Tensor):
            if value.dtype is not dst.dtype:
                value = cast(value, dst.dtype)
            try:
                ok = shapes.broadcast_shapes(value.shape, self.out_shape) == self.out_shape
            except ValueError:
                ok = False
            if not ok:
                raise RuntimeError(f"shape mismatch: value tensor of shape {list(value.shape)} "
                                   f"cannot be broadcast to indexing result of shape "
                                   f"{list(self.out_shape)}")
            v = expand(value, *self.out_shape)
        else:
            v = expand(_value_tensor(value, dst), *self.out_shape)
        v = reshape(v, *self.kshape)
        off = self.offsets(dst)
        mode = 0 if not accumulate else 1 if self.unique else 2
        _put(dst, off, [dst._strides[d] for d in self.pre],
             [dst._strides[d] for d in self.post], v, mode)


def _is_advanced(idx) -> bool:
    items = idx if isinstance(idx, tuple) else (idx,)
    return any(isinstance(i, (Tensor, list, np.ndarray)) or isinstance(i, bool) for i in items)


def advanced_getitem(x: Tensor, idx) -> Tensor:
    """x[idx] with index tensors (int or bool) among the entries: a copy (see getitem)."""
    adv = _Adv(x, idx, "index")
    view = getitem(x, adv.basic)
    y = adv.take(view)
    vshape, dt = view.shape, view.dtype

    def back(g):
        gv = zeros(vshape, dtype=g.dtype, device=g.device)._materialise()
        adv.put(gv, g, accumulate=True)
        return (cast(gv, dt),)
    return record(y, "index", (view,), back)


def setitem_autograd(x: Tensor, idx, value) -> None:
    """`x[idx] = value` recorded for autograd (x non-leaf, or value requiring grad)."""
    _inplace(x, "setitem", lambda a: _setitem_out(a, idx, value), None)


def overwrite_autograd(x: Tensor, value, name: str) -> Tensor:
    """x <- value (a tensor broadcast to x's shape, or a scalar: `copy_`, `fill_`, `zero_`)
    recorded for autograd, as PyTorch's: x takes the write's history, in which x's old
    value gets a zero gradient and value its own."""
    return _inplace(x, name, lambda a: _overwritten(a, value, name), None)


def _overwritten(a: Tensor, value, name: str) -> Tensor:
    vt = None
    if isinstance(value, Tensor):
        v = value if value.device == a.device else value.to(a.device)
        v = v if v.dtype is a.dtype else cast(v, a.dtype)
        vt = v if v.shape == a.shape else expand(v, *a.shape)
        with no_grad():  # a value of its own (the write makes it x's storage)
            y = elementwise("identity", [vt], [a.dtype.compute], a.dtype)
    else:
        y = full(a.shape, value, dtype=a.dtype, device=a.device)

    def back(g):
        return zeros(a.shape, dtype=a.dtype, device=a.device), g
    return record(y, name, (a, vt), back)


def _setitem_out(x: Tensor, idx, value) -> Tensor:
    if _is_advanced(idx):
        return _index_put(x, idx, value, False, "setitem")
    y = _fresh(x)
    with no_grad():
        assign(_region(y, idx), value)
    vt = value if isinstance(value, Tensor) else None

    def back(g):
        gx = _fresh(g)
        assign(_region(gx, idx), 0.0)
        gv = None if vt is None else cast(sum_to(_region(g, idx), vt.shape), vt.dtype)
        return gx, gv
    return record(y, "setitem", (x, vt), back)


def advanced_setitem(x: Tensor, idx, value, accumulate: bool = False) -> None:
    """x[idx] = value with index tensors among the entries, in place."""
    adv = _Adv(x, idx, "index_put")
    x._materialise()
    with no_grad():
        view = getitem(x, adv.basic)
    before_write(x)
    adv.put(view, value, accumulate)


# ---- index_put / index_add ------------------------------------------------------------------
def _index_put(x, indices, values, accumulate, what):
    if what != "setitem":
        if not isinstance(indices, (tuple, list)):
            raise TypeError(f"{what}: indices must be a tuple of tensors")
        indices = tuple(indices)
    y = _fresh(x)
    adv = _Adv(y, indices, what)
    adv.put(getitem(y, adv.basic), values, accumulate)
    vt = values if isinstance(values, Tensor) else None

    def back(g):
        if accumulate:
            gx = g
        else:
            gx = _fresh(g)
            adv.put(getitem(gx, adv.basic), 0.0, False)
        gv = None
        if vt is not None:
            gv = cast(sum_to(adv.take(getitem(g, adv.basic)), vt.shape), vt.dtype)
        return gx, gv
    return record(y, what, (x, vt), back)


@register("index_put", method=True)
def index_put(input: Tensor, indices, values, accumulate: bool = False) -> Tensor:  # noqa: A002
    """A copy of input with `values` (broadcast to the indexed shape) written at `indices` (a
    tuple of int or bool tensors, as `input[indices] = values`). accumulate=True adds instead,
    repeated indices summing (deterministically, in index order). Differentiable in input and
    values. Also `t.index_put(...)`."""
    return _index_put(input, indices, values, accumulate, "index_put")


@register("index_put_", method=True)
def index_put_(input: Tensor, indices, values, accumulate: bool = False) -> Tensor:  # noqa: A002
    """In-place `index_put` (see there); returns input."""
    if not _grad_needed(input, values):
        return _inplace(input, "index_put_", lambda a: a, lambda x: advanced_setitem(
            x, tuple(indices), values, accumulate))
    return _inplace(input, "index_put_", lambda a: index_put(a, indices, values, accumulate),
                    None)


def _index_add_check(x, dim, index, source, what):
    idx = _check_index(index, what)
    if idx.ndim > 1:
        raise IndexError(f"{what}: index must be a vector (0-d or 1-d), got shape {idx.shape}")
    idx = reshape(idx, -1)._materialise()
    d = shapes.norm_dim(dim, max(x.ndim, 1))
    xs, ss = x.shape or (1,), source.shape or (1,)
    if len(ss) != len(xs) or any(ss[k] != xs[k] for k in range(len(xs)) if k != d) or \
            ss[d] != idx.shape[0]:
        raise RuntimeError(f"{what}: source of shape {source.shape} does not match the "
                           f"input's shape {x.shape} with dimension {d} of size "
                           f"{idx.shape[0]} (the index's length)")
    _check_bounds(idx, xs[d], what, d, wrap=False)
    return idx, d


def _index_add_into(dst, d, idx, source, alpha):
    if alpha != 1:
        source = source * alpha
    if source.dtype is not dst.dtype:
        source = cast(source, dst.dtype)
    xs, xst = dst.shape or (1,), dst._strides or (1,)
    src = source if source.ndim else reshape(source, 1)
    it = dtypes.index_dtype(dst.device)
    off = contiguous(cast(_wrap(idx, xs[d]), it) * xst[d])._materialise()
    _put(dst, off, xst[:d], xst[d + 1:], src, 2)


@register("index_add", method=True)
def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *,  # noqa: A002
              alpha=1) -> Tensor:
    """A copy of input with alpha * source added at positions `index` (1-D) along `dim`;
    repeated indices accumulate (deterministically, in index order). Differentiable in input
    and source. Also `t.index_add(...)`."""
    idx, d = _index_add_check(input, dim, index, source, "index_add")
    y = _fresh(input)
    with no_grad():
        _index_add_into(y, d, idx, source, alpha)

    def back(g):
        gs = index_select(g, d, idx) if g.ndim else g
        return g, (gs * alpha if alpha != 1 else gs)
    return record(y, "index_add", (input, source), back)


@register("index_add_", method=True)
def index_add_(input: Tensor, dim: int, index: Tensor, source: Tensor, *,  # noqa: A002
               alpha=1) -> Tensor:
    """In-place `index_add` (see there); returns input."""
    if not _grad_needed(input, source):
        idx, d = _index_add_check(input, dim, index, source, "index_add_")
        return _inplace(input, "index_add_", lambda a: a,
                        lambda x: _index_add_into(x, d, idx, source, alpha))
    return _inplace(input, "index_add_", lambda a: index_add(a, dim, index, source,
                                                              alpha=alpha), None)


# ---- masks ---------------------------------------------------------------------------------
def _mask_check(mask, what):
    if not isinstance(mask, Tensor) or mask.dtype is not dtypes.bool_:
        raise TypeError(f"{what}: the mask must be a bool tensor, got "
                        f"{getattr(mask, 'dtype', type(mask).__name__)}")


@register("masked_fill", method=True)
def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:  # noqa: A002
    """input with `value` (a scalar or a 0-d tensor) where mask is true, input and mask
    broadcast together (as torch: a mask of more dims widens the result). Keeps input's
    dtype; lazy (fuses). Differentiable in input (and a tensor value)."""
    _mask_check(mask, "masked_fill")
    shape = shapes.broadcast_shapes(input.shape, mask.shape)
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"masked_fill only supports a 0-dimensional value tensor, but got "
                           f"one with {value.ndim} dimension(s)")
    dt = input.dtype
    y = elementwise("where", [mask, value, input], [dtypes.bool_, dt.compute, dt.compute], dt,
                    shape=shape)
    if not dt.is_float:
        return y
    vt = value if isinstance(value, Tensor) else None
    return record(y, "masked_fill", (input, vt), lambda g: (
        sum_to(where(mask, 0.0, g), input.shape), None if vt is None else cast(
            where(mask, g, 0.0).sum(), vt.dtype).reshape(())))


@register("masked_fill_", method=True)
def masked_fill_(input: Tensor, mask: Tensor, value) -> Tensor:  # noqa: A002
    """In-place `masked_fill` (see there); returns input, whose shape the mask must
    broadcast to."""
    _mask_check(mask, "masked_fill_")
    if shapes.broadcast_shapes(input.shape, mask.shape) != input.shape:
        raise RuntimeError(f"masked_fill_: the mask of shape {mask.shape} cannot be broadcast "
                           f"to the input's shape {input.shape}")
    return _inplace(input, "masked_fill_", lambda a: masked_fill(a, mask, value), None)


@register("masked_select", method=True)
def masked_select(input: Tensor, mask: Tensor) -> Tensor:  # noqa: A002
    """A 1-D copy of input's entries where mask is true (input and mask broadcast), in
    row-major order. Host-synchronising: the result's length is the mask's count, read back
    from the device (as `nonzero`). Differentiable in input."""
    _mask_check(mask, "masked_select")
    shape = shapes.broadcast_shapes(input.shape, mask.shape)
    xb, mb = expand(input, *shape), expand(mask, *shape)
    if not shape:
        xb, mb = reshape(xb, 1), reshape(mb, 1)
    return advanced_getitem(xb, mb)


@register("nonzero", method=True)
def nonzero(input: Tensor, *, as_tuple: bool = False):  # noqa: A002
    """The coordinates of input's nonzero (true) entries, in row-major order: an int64 tensor
    of shape (count, ndim), or with `as_tuple=True` a tuple of ndim 1-D tensors (one per dim).

    Host-synchronising: the count decides the result's shape, so it is read back from the
    device after a counting pass (counts per chunk, an on-device prefix sum, then the
    coordinates written in order). On devices without 64-bit integers (WGSL) the result is
    int32. Not differentiable. Also `t.nonzero()`."""
    x = input
    m = x if x.dtype is dtypes.bool_ else ne(x, 0)
    m._materialise()
    it = dtypes.index_dtype(x.device)
    rank = m.ndim
    mv = m if rank else reshape(m, 1)
    n = mv.numel()
    total = 0
    if n:
        rt = x.device.rt
        chunk = 256 if n > 4096 else 16
        chunks = -(-n // chunk)
        counts = Tensor._empty((chunks,), dtypes.uint32, x.device)
        starts = Tensor._empty((chunks + 1,), dtypes.uint32, x.device)
        launch_1d(K.count_kernel, rt, chunks, m=mv._karg(), m_off=mv.offset, counts=counts._buf,
                  chunk=chunk, n=n, chunks=chunks)
        launch_1d(K.scan_kernel, rt, 1, counts=counts._buf, starts=starts._buf, chunks=chunks)
        total = int(getitem(starts, chunks).item())
    out = Tensor._empty((total, rank), it, x.device)
    if total:
        launch_1d(K.nonzero_kernel, rt, chunks, m=mv._karg(), m_off=mv.offset,
                  starts=starts._buf, out=out._buf, chunk=chunk, n=n, chunks=chunks)
    if as_tuple:
        if rank == 0:
            return (reshape(out, -1) if total == 0 else zeros((total,), dtype=it,
                                                              device=x.device),)
        return tuple(getitem(out, (slice(None), d)) for d in range(rank))
    return out


# ---- views: chunk, split, unbind, narrow -------------------------------------------------------
@register("narrow", method=True)
def narrow(input: Tensor, dim: int, start, length: int) -> Tensor:  # noqa: A002
    """A view of `length` entries of input along `dim` from `start` (negative counts from the
    end). Differentiable. Also `t.narrow(...)`."""
    if input.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor")
    d = shapes.norm_dim(dim, input.ndim)
    size = input.shape[d]
    start = int(start)
    if not -size <= start <= size:
        raise IndexError(f"narrow: start {start} is out of range for dimension {d} of size "
                         f"{size}")
    start = start + size if start < 0 else start
    if length < 0 or start + length > size:
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds dimension "
                           f"{d} of size {size}")
    return getitem(input, (slice(None),) * d + (slice(start, start + length),))


@register("select", method=True)
def select(input: Tensor, dim: int, index: int) -> Tensor:  # noqa: A002
    """A view of input at `index` along `dim`, that dim removed (negative values count from
    the end): `t.select(1, 2)` is `t[:, 2]`. Differentiable. Also `t.select(...)`."""
    if input.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = shapes.norm_dim(dim, input.ndim)
    size = input.shape[d]
    i = int(index)
    if not -size <= i < size:
        raise IndexError(f"select(): index {i} out of range for tensor of size "
                         f"{list(input.shape)} at dimension {d}")
    return getitem(input, (slice(None),) * d + (i,))


@register("split", method=True)
def split(tensor, split_size_or_sections, dim: int = 0):
    """Views of `tensor` along `dim`: pieces of `split_size_or_sections` entries (an int; the
    last may be smaller) or of the listed sizes (they must sum to the dim's size)."""
    x = tensor
    d = shapes.norm_dim(dim, max(x.ndim, 1))
    if x.ndim == 0:
        raise RuntimeError("split: a 0-dim tensor cannot be split")
    size = x.shape[d]
    if isinstance(split_size_or_sections, int):
        s = split_size_or_sections
        if s < 0 or (s == 0 and size):
            raise RuntimeError(f"split expects split_size be non-negative (and nonzero for a "
                               f"non-empty dimension), but got split_size={s}")
        sizes = [min(s, size - p) for p in range(0, size, s)] if size else [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != size or any(s < 0 for s in sizes):
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} "
                               f"(input tensor's size at dimension {d}), but got split_sizes="
                               f"{sizes}")
    out, p = [], 0
    for s in sizes:
        out.append(narrow(x, d, p, s))
        p += s
    return tuple(out)


@register("chunk", method=True)
def chunk(input: Tensor, chunks: int, dim: int = 0):  # noqa: A002
    """`chunks` views along `dim` of ceil(size / chunks) entries each (fewer when the size
    runs out first, as PyTorch)."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = shapes.norm_dim(dim, max(input.ndim, 1))
    size = input.shape[d]
    step = max(-(-size // chunks), 1) if size else 0
    if size == 0:
        return tuple(narrow(input, d, 0, 0) for _ in range(chunks))
    return split(input, step, d)


@register("unbind", method=True)
def unbind(input: Tensor, dim: int = 0):  # noqa: A002
    """The slices of input along `dim`, as a tuple of views without that dim."""
    d = shapes.norm_dim(dim, max(input.ndim, 1))
    if input.ndim == 0:
        raise IndexError("unbind: dimension specified as 0 but tensor has no dimensions")
    return tuple(getitem(input, (slice(None),) * d + (k,)) for k in range(input.shape[d]))


# ---- flip, roll, tril, triu ---------------------------------------------------------------------
def _remap(x: Tensor, shifts, flips: int) -> Tensor:
    x._materialise()
    y = Tensor._empty(x.shape, x.dtype, x.device)
    n = y.numel()
    if n:
        sh = x.device.rt.from_numpy(np.asarray(list(shifts) or [0], np.uint32))
        launch_1d(K.remap_kernel, x.device.rt, n, x=x._karg(x.shape or (1,),
                                                            x._strides or (1,)),
                  x_off=x.offset, sh=sh, out=y._karg(), n=n, flips=flips)
    return y


def _dimlist(dims, ndim, what):
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    out = [shapes.norm_dim(d, max(ndim, 1)) for d in dims]
    if len(set(out)) != len(out):
        raise RuntimeError(f"{what}: dims {dims} repeat a dimension")
    return out


@register("flip", method=True)
def flip(input: Tensor, dims) -> Tensor:  # noqa: A002
    """A copy of input with the order of entries reversed along each of `dims` (an int or a
    tuple). Differentiable. Also `t.flip(dims)`."""
    ds = _dimlist(dims, input.ndim, "flip")
    mask = 0
    for d in ds:
        if input.ndim:
            mask |= 1 << d
    y = _remap(input, [0] * input.ndim, mask)
    return record(y, "flip", (input,), lambda g: (flip(g, ds),))


@register("roll", method=True)
def roll(input: Tensor, shifts, dims=None) -> Tensor:  # noqa: A002
    """A copy of input rotated by `shifts` along `dims` (ints or tuples of one length); with
    dims None, rotated as a flattened tensor and shaped back. Differentiable."""
    x = input
    if dims is None:
        if not isinstance(shifts, int):
            if len(shifts) != 1:
                raise RuntimeError(f"roll: shifts {shifts} need dims")
            shifts = shifts[0]
        return reshape(roll(reshape(x, -1), shifts, 0), *x.shape)
    sh = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    ds = _dimlist(dims, x.ndim, "roll")
    if len(sh) != len(ds):
        raise RuntimeError(f"roll: shifts {sh} and dims {tuple(ds)} must have one length")
    per = [0] * max(x.ndim, 1)
    for s, d in zip(sh, ds):
        size = x.shape[d] if x.ndim else 1
        per[d] = (per[d] - int(s)) % size if size else 0
    y = _remap(x, per[:x.ndim] if x.ndim else [0], 0)
    return record(y, "roll", (x,), lambda g: (roll(g, tuple(-int(s) for s in sh), ds),))


def _tri(x: Tensor, diagonal: int, lower: bool, what: str) -> Tensor:
    if x.ndim < 2:
        raise RuntimeError(f"{what}: input tensor must have at least 2 dimensions, got shape "
                           f"{x.shape}")
    x._materialise()
    y = Tensor._empty(x.shape, x.dtype, x.device)
    n = y.numel()
    if n:
        launch_1d(K.tri_kernel, x.device.rt, n, x=x._karg(), x_off=x.offset, out=y._karg(),
                  n=n, k=int(diagonal), lower=lower)
    return record(y, what, (x,), lambda g: (_tri(g, diagonal, lower, what),))


@register("tril", method=True)
def tril(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """The lower triangle of the last two dims (entries with column - row <= diagonal), the
    rest zero. Differentiable. Also `t.tril()`."""
    return _tri(input, diagonal, True, "tril")


@register("triu", method=True)
def triu(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """The upper triangle of the last two dims (entries with column - row >= diagonal), the
    rest zero. Differentiable. Also `t.triu()`."""
    return _tri(input, diagonal, False, "triu")


@register("tril_", method=True)
def tril_(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """In-place `tril`; returns input."""
    return _inplace(input, "tril_", lambda a: tril(a, diagonal), None)


@register("triu_", method=True)
def triu_(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """In-place `triu`; returns input."""
    return _inplace(input, "triu_", lambda a: triu(a, diagonal), None)


# ---- pad ---------------------------------------------------------------------------------------
def _pad_dim(x: Tensor, d: int, lo: int, hi: int, mode: str) -> Tensor:
    n = x.shape[d]

    def sl(a, b):
        return getitem(x, (slice(None),) * d + (slice(a, b),))
    if mode == "reflect":
        if lo >= n or hi >= n:
            raise RuntimeError(f"pad (reflect): padding ({lo}, {hi}) should be less than the "
                               f"dimension {d} of size {n} of the input of shape {x.shape}")
        parts = ([flip(sl(1, lo + 1), d)] if lo else []) + [x] + (
            [flip(sl(n - 1 - hi, n - 1), d)] if hi else [])
    elif mode == "replicate":
        if n == 0:
            raise RuntimeError(f"pad (replicate): dimension {d} of the input of shape "
                               f"{x.shape} is empty")
        rep = list(x.shape)
        parts = []
        if lo:
            rep[d] = lo
            parts.append(expand(sl(0, 1), *rep))
        parts.append(x)
        if hi:
            rep[d] = hi
            parts.append(expand(sl(n - 1, n), *rep))
    else:  # circular
        if lo > n or hi > n:
            raise RuntimeError(f"pad (circular): padding ({lo}, {hi}) exceeds dimension {d} "
                               f"of size {n}")
        parts = ([sl(n - lo, n)] if lo else []) + [x] + ([sl(0, hi)] if hi else [])
    return cat(parts, d) if len(parts) > 1 else x


@register("pad")
def pad(input: Tensor, pad, mode: str = "constant", value=None) -> Tensor:  # noqa: A002
    """input padded (as torch.nn.functional.pad): `pad` lists (left, right) amounts from the
    last dim backwards, (last_lo, last_hi, second_last_lo, ...). mode "constant" (with
    `value`, default 0; negative amounts crop), "reflect", "replicate" or "circular"
    (reflect/replicate/circular pad at most the last 3 dims, as PyTorch). Differentiable."""
    x = input
    pad = [int(p) for p in pad]
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise RuntimeError(f"pad: the padding {tuple(pad)} must have an even length of at most "
                           f"2 * {x.ndim} (the input's shape is {x.shape})")
    k = len(pad) // 2
    amounts = {x.ndim - 1 - i: (pad[2 * i], pad[2 * i + 1]) for i in range(k)}
    if mode == "constant":
        crop = tuple(slice(max(-amounts.get(d, (0, 0))[0], 0),
                           x.shape[d] - max(-amounts.get(d, (0, 0))[1], 0))
                     for d in range(x.ndim))
        xc = getitem(x, crop) if crop else x
        shape = tuple(xc.shape[d] + max(amounts.get(d, (0, 0))[0], 0) +
                      max(amounts.get(d, (0, 0))[1], 0) for d in range(x.ndim))
        want = tuple(x.shape[d] + sum(amounts.get(d, (0, 0))) for d in range(x.ndim))
        if shape != want:  # a crop past the other side (the size is negative, or the crop
            # and the padding overlap): PyTorch raises too
            raise RuntimeError(f"pad: the padding {tuple(pad)} crops more than the input of "
                               f"shape {x.shape} has")
        y = full(shape, 0 if value is None else value, dtype=x.dtype,
                 device=x.device)._materialise()
        inner = tuple(slice(max(amounts.get(d, (0, 0))[0], 0),
                            max(amounts.get(d, (0, 0))[0], 0) + xc.shape[d])
                      for d in range(x.ndim))
        with no_grad():
            assign(getitem(y, inner), xc)
        return record(y, "pad", (xc,), lambda g: (getitem(g, inner),))
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"pad: mode {mode!r} (constant, reflect, replicate or "
                                  f"circular)")
    if value not in (None, 0):
        raise RuntimeError(f"pad: padding mode {mode!r} doesn't take in value argument")
    if k > 3 or x.ndim not in (k + 1, k + 2):  # PyTorch's combinations
        raise NotImplementedError(
            f"pad ({mode}): padding of length {len(pad)} for a {x.ndim}-d input; the modes "
            f"other than constant pad the last 1, 2 or 3 dims of an input with one or two "
            f"dims more (lengths 2, 4, 6 for 2-3, 3-4, 4-5 dims), as PyTorch's")
    y = x
    for d, (lo, hi) in sorted(amounts.items(), reverse=True):
        if lo >= 0 and hi >= 0:
            y = _pad_dim(y, d, lo, hi, mode)
            continue
        # a negative amount crops, as PyTorch's: circular crops before it pads, reflect and
        # replicate pad the original dim first (their padding reads the cropped-off edge)
        first = mode == "circular"
        if not first:
            y = _pad_dim(y, d, max(lo, 0), max(hi, 0), mode)
        n, cut = y.shape[d], max(-lo, 0)
        keep = n - cut - max(-hi, 0)
        if keep < 1 if first else keep < 0:
            raise RuntimeError(f"pad ({mode}): the padding {tuple(pad)} crops more than "
                               f"dimension {d} of size {x.shape[d]} has")
        y = narrow(y, d, cut, keep)
        if first:
            y = _pad_dim(y, d, max(lo, 0), max(hi, 0), mode)
    if all(y.shape[d] == 0 for d in amounts):  # PyTorch's check, once all are cropped away
        raise RuntimeError(f"pad ({mode}): the input of shape {x.shape} is too small: the "
                           f"padding {tuple(pad)} leaves no element in the padded dims")
    return contiguous(y) if y is x else y


# ---- take_along_dim -----------------------------------------------------------------------------
@register("take_along_dim", method=True)
def take_along_dim(input: Tensor, indices: Tensor, dim=None) -> Tensor:  # noqa: A002
    """input's entries at `indices` along `dim` (input and indices broadcast in the other
    dims), as torch.take_along_dim; dim None: into the flattened input. Differentiable."""
    idx = _check_index(indices, "take_along_dim")
    if dim is None:
        return gather(reshape(input, -1), 0, reshape(idx, -1))
    if input.ndim != idx.ndim:
        raise RuntimeError(f"take_along_dim: input and indices should have the same number of "
                           f"dimensions, but got {input.ndim} dimensions for the input of "
                           f"shape {input.shape} and {idx.ndim} for indices of shape "
                           f"{idx.shape}")
    d = shapes.norm_dim(dim, max(input.ndim, 1))
    xs, is_ = list(input.shape), list(idx.shape)
    xs[d] = is_[d] = 1
    b = list(shapes.broadcast_shapes(tuple(xs), tuple(is_)))
    bx, bi = list(b), list(b)
    bx[d], bi[d] = input.shape[d], idx.shape[d]
    return gather(expand(input, *bx), d, expand(idx, *bi))


ADVANCED.update(is_advanced=_is_advanced, getitem=advanced_getitem, setitem=advanced_setitem,
                setitem_autograd=setitem_autograd, overwrite_autograd=overwrite_autograd)
SCATTER.update(index_add_into=_index_add_into, scatter_into=_scatter_into)

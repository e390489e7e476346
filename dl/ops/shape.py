"""Shape ops. Views (reshape where strides allow, permute, transpose, slicing, expand,
squeeze/unsqueeze) share storage and launch nothing; the rest copy through a fused kernel."""
from __future__ import annotations

from .. import devices as _device
from .. import dtypes, shapes
from ..autograd import backward as _backward
from ..autograd import record
from ..autograd.grad_mode import is_grad_enabled, no_grad
from ..autograd.overwrites import check_history
from ..fusion import elementwise, writes
from ..fusion.graph import Node
from ..fusion.lazy import write_into
from ..fusion.writes import before_write
from ..io import host
from ..tensor import Tensor
from .creation import zeros
from .elementwise import cast
from .reduce import sum_to
from .registry import register, tensor_method


def _dims(args) -> tuple:
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


@register("contiguous", method=True)
def contiguous(x: Tensor) -> Tensor:
    """x if it is contiguous (or lazy), else a contiguous copy (one kernel).
    Differentiable. Also `t.contiguous()`."""
    if x.is_lazy or x.is_contiguous():
        return x
    y = Tensor._lazy(Node("identity", (x,), (x.dtype.compute,), x.dtype, x.shape), x.device)
    y._materialise()
    return record(y, "contiguous", (x,), lambda g: (g,))


@register("clone", method=True)
def clone(x: Tensor) -> Tensor:
    """A copy of x in new storage (lazy: computed with the graph it belongs to).
    Differentiable, as PyTorch's (the gradient flows back to x). Also `t.clone()`."""
    y = elementwise("identity", [x], [x.dtype.compute], x.dtype)
    return record(y, "clone", (x,), lambda g: (g,))


@register("detach", method=True)
def detach(x: Tensor) -> Tensor:
    """x without its autograd history: a tensor sharing x's storage (or lazy value)
    that does not require grad. Also `t.detach()`."""
    if x.is_lazy:
        return Tensor._lazy(x._node, x.device)
    return Tensor(x._buf, x.shape, x._strides, x.offset, x.dtype, x.device)


def _viewing(y: Tensor, x: Tensor, redo) -> None:
    """y views x's storage as redo(x) does (a reshape, a permute) or as `x[redo]` does (a
    basic index): an in-place op on y under autograd writes through x, so x takes the op's
    history, and y takes x's history when it was written through x or another view of it
    (dl/ops/indexing.py: `write_back`, `regenerate`). A callable redo(t) must pick t's
    elements as y picks x's for any t of x's shape."""
    y._index_of = (x, redo)
    y._hist_at = writes.count[0]  # its history (none, or record's) is of x's value now


@register("reshape", "view", method=("reshape", "view"))
def reshape(x: Tensor, *shape) -> Tensor:
    """x with a new shape (sizes as arguments or a tuple; one may be -1).

    A view sharing x's storage when its strides allow (PyTorch's rule), else a contiguous
    copy. Registered also as `view`, which likewise copies where PyTorch's `view` would
    raise. Differentiable. Also `t.reshape(...)`, `t.view(...)`."""
    shape = shapes.infer_shape(_dims(shape), x.numel())
    if shape == x.shape:
        return x
    # a lazy value will be contiguous; a view needs compatible strides, else a copy
    st = shapes.contiguous_strides(shape) if x.is_lazy else \
        shapes.view_strides(x.shape, x._strides, shape)
    src = x if st is not None else contiguous(x)
    y = src._view(shape, st or shapes.contiguous_strides(shape), src.offset)
    if st is not None:
        _viewing(y, x, lambda b: reshape(b, shape))
    old = x.shape
    return record(y, "reshape", (src,), lambda g: (reshape(g, old),))


@register("flatten", method=True)
def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """x with dims start_dim..end_dim (inclusive) merged into one; a 0-d tensor
    gives shape (1,). A view when the strides allow (see reshape). Also `t.flatten()`."""
    if x.ndim == 0:
        return reshape(x, 1)
    s, e = shapes.norm_dim(start_dim, x.ndim), shapes.norm_dim(end_dim, x.ndim)
    return reshape(x, *x.shape[:s], shapes.numel(x.shape[s:e + 1]), *x.shape[e + 1:])


@register("permute", method=True)
def permute(x: Tensor, *dims) -> Tensor:
    """A view of x with its dims reordered: dims (as arguments or a tuple) is a
    permutation of 0..ndim-1; negative dims count from the end. Differentiable. Also
    `t.permute(...)`."""
    if not dims:  # as torch: no dims is a missing argument, even for a 0-d x
        raise TypeError('permute() missing 1 required positional arguments: "dims"')
    dims = tuple(shapes.norm_dim(d, x.ndim) for d in _dims(dims))
    if sorted(dims) != list(range(x.ndim)):
        raise ValueError(f"permute dims {dims} are not a permutation of 0..{x.ndim - 1}")
    y = x._view(tuple(x.shape[d] for d in dims), tuple(x._strides[d] for d in dims),
                x.offset)
    _viewing(y, x, lambda b: permute(b, dims))
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d] = i
    return record(y, "permute", (x,), lambda g: (permute(g, tuple(inv)),))


@register("transpose", "swapaxes", method=("transpose", "swapaxes"))
def transpose(x: Tensor, dim0: int = 0, dim1: int = 1) -> Tensor:
    """A view of x with dims dim0 and dim1 swapped (x itself below rank 2).
    Registered also as `swapaxes`. Differentiable. Also `t.transpose(dim0, dim1)` and
    `t.swapaxes(dim0, dim1)`."""
    if x.ndim < 2:
        return x
    d = list(range(x.ndim))
    a, b = shapes.norm_dim(dim0, x.ndim), shapes.norm_dim(dim1, x.ndim)
    d[a], d[b] = d[b], d[a]
    return permute(x, *d)


@register("t", method=True)
def t(x: Tensor) -> Tensor:
    """The transpose of a tensor of rank <= 2 (a view; rank 0 and 1 are returned as
    they are). Also `t.t()`; see `t.T` and `t.mT` for other ranks."""
    if x.ndim > 2:
        raise ValueError(f"t() expects a tensor of rank <= 2, got shape {x.shape}")
    return transpose(x, 0, 1)


@register("squeeze", method=True)
def squeeze(x: Tensor, dim=None) -> Tensor:
    """A view of x without size-1 dims: all of them (dim None), or those among
    `dim` (an int or a tuple; dims of another size are kept, as PyTorch's). Differentiable.
    Also `t.squeeze()`."""
    if dim is None:
        keep = [d for d in range(x.ndim) if x.shape[d] != 1]
    else:
        ds = {shapes.norm_dim(d, x.ndim) for d in (dim if isinstance(dim, (tuple, list))
                                                   else (dim,))}
        keep = [d for d in range(x.ndim) if d not in ds or x.shape[d] != 1]
    new = tuple(x.shape[d] for d in keep)
    y = x._view(new, tuple(x._strides[d] for d in keep), x.offset)
    _viewing(y, x, lambda b: reshape(b, new))
    old = x.shape
    return record(y, "squeeze", (x,), lambda g: (reshape(g, old),))


@register("unsqueeze", method=True)
def unsqueeze(x: Tensor, dim: int) -> Tensor:
    """A view of x with a size-1 dim inserted at position `dim` (-1: at the
    end). Differentiable. Also `t.unsqueeze(dim)`."""
    d = shapes.norm_dim(dim, x.ndim + 1)
    st = x._strides[d] * x.shape[d] if d < x.ndim else 1
    new = x.shape[:d] + (1,) + x.shape[d:]
    y = x._view(new, x._strides[:d] + (st,) + x._strides[d:], x.offset)
    _viewing(y, x, lambda b: reshape(b, new))
    old = x.shape
    return record(y, "unsqueeze", (x,), lambda g: (reshape(g, old),))


@register("expand", method=True)
def expand(x: Tensor, *size) -> Tensor:
    """A view of x broadcast to `size` (as arguments or a tuple) without copying:
    size-1 dims repeat with stride 0, new leading dims may be added, -1 keeps a dim's size.
    The gradient is summed back to x's shape. Also `t.expand(...)`."""
    size = _dims(size)
    if len(size) < x.ndim:
        raise ValueError(f"expand: the target {tuple(size)} has fewer dims than the tensor's "
                         f"shape {x.shape}")
    pad = len(size) - x.ndim
    shape = tuple(x.shape[d - pad] if s == -1 and d >= pad else s for d, s in enumerate(size))
    for d in range(x.ndim):
        if x.shape[d] != 1 and x.shape[d] != shape[d + pad]:
            raise ValueError(f"cannot expand shape {x.shape} to {shape}: dimension {d} is "
                             f"{x.shape[d]}, not 1 or {shape[d + pad]}")
    if shape == x.shape:
        return x
    y = x._view(shape, shapes.broadcast_strides(x.shape, x._strides, shape), x.offset)
    old = x.shape
    return record(y, "expand", (x,), lambda g: (sum_to(g, old),))


@register("expand_as", method=True)
def expand_as(x: Tensor, other: Tensor) -> Tensor:
    """x expanded to `other`'s shape (see expand). Also `t.expand_as(other)`."""
    return expand(x, *other.shape)


@register("broadcast_to", method=True)
def broadcast_to(x: Tensor, shape) -> Tensor:
    """x expanded to `shape` (see expand). Also `t.broadcast_to(shape)`."""
    return expand(x, *shape)


def broadcast_tensors(*xs):
    """The tensors expanded to their common broadcast shape (NumPy rules),
    as a tuple of views."""
    shape = shapes.broadcast_shapes(*(x.shape for x in xs))
    return tuple(expand(x, *shape) for x in xs)


# ---- indexing ------------------------------------------------------------------------------
def _index_view(x: Tensor, idx):
    """(shape, strides, offset) of basic indexing: ints, slices (step > 0), None, Ellipsis."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n_real > x.ndim:
        raise IndexError(f"too many indices ({n_real}) for a tensor of shape {x.shape}")
    if sum(1 for i in idx if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis")
    if Ellipsis in [i for i in idx if not isinstance(i, Tensor)]:
        k = [i is Ellipsis for i in idx].index(True)
        idx = idx[:k] + (slice(None),) * (x.ndim - n_real) + idx[k + 1:]
    else:
        idx = idx + (slice(None),) * (x.ndim - n_real)
    shape, strides, off, d = [], [], x.offset, 0
    for i in idx:
        if i is None:
            shape.append(1)
            strides.append(0)
        elif isinstance(i, slice):
            start, stop, step = i.indices(x.shape[d])
            if step <= 0:
                raise IndexError("slices need a positive step")
            n = len(range(start, stop, step))
            shape.append(n)
            strides.append(x._strides[d] * step)
            off += start * x._strides[d] if n else 0
            d += 1
        elif isinstance(i, int) or hasattr(i, "__index__"):
            i = int(i)
            if not -x.shape[d] <= i < x.shape[d]:
                raise IndexError(f"index {i} is out of bounds for dimension {d} with size "
                                 f"{x.shape[d]}")
            off += (i % x.shape[d]) * x._strides[d]
            d += 1
        else:
            raise IndexError(f"unsupported index {i!r} (ints, slices, None, ... and 1-D "
                             f"integer tensors are supported)")
    return tuple(shape), tuple(strides), off


# Advanced indexing (index tensors, masks) and setitem's autograd live in dl/ops/indexing.py,
# which builds on this module: it installs its entry points here when it is imported.
ADVANCED: dict = {}


def _ranges_as_lists(idx):
    """An index with each `range` entry as the list of its ints (NumPy's and PyTorch's
    `x[range(n), target]`)."""
    if isinstance(idx, range):
        return list(idx)
    if isinstance(idx, tuple) and any(isinstance(i, range) for i in idx):
        return tuple(list(i) if isinstance(i, range) else i for i in idx)
    return idx


@register("getitem", dunder="__getitem__")
def getitem(x: Tensor, idx) -> Tensor:
    """`x[idx]`: basic indexing is a view (ints, slices with a positive step, None, ...).
    Advanced indexing, as PyTorch, gives a copy: integer tensors (or lists) broadcast together
    and pick entries along the dims they index (several index tensors side by side put the
    index's dims in their place, apart they go first); a bool mask selects its true entries
    (a host synchronisation: the count decides the shape, see `nonzero`). Differentiable
    (repeated indices accumulate their gradients). A `range` is a list of its ints."""
    idx = _ranges_as_lists(idx)
    if ADVANCED["is_advanced"](idx):
        return ADVANCED["getitem"](x, idx)
    shape, strides, off = _index_view(x, idx)
    y = x._view(shape, strides, off)
    _viewing(y, x, idx)
    old, dt, dev = x.shape, x.dtype, x.device

    def back(g):
        return (PiecewiseGrad(old, dt, dev, [(idx, g)]),)
    return record(y, "getitem", (x,), back)


class PiecewiseGrad:
    """The gradient of a tensor indexed by views (x[idx], basic indexing): zeros with each
    view's gradient written in. Autograd sums such gradients of one tensor by joining their
    pieces and writes them all into one zero tensor when the gradient is used (`dense`): the
    q, k and v slices of an attention projection took a zero fill, a write and then an add
    of the whole (b, s, 3e) tensor per slice."""

    __slots__ = ("shape", "dtype", "device", "pieces")

    def __init__(self, shape, dtype, device, pieces: list):
        self.shape, self.dtype, self.device, self.pieces = shape, dtype, device, pieces

    def __add__(self, other):
        if isinstance(other, PiecewiseGrad):
            return PiecewiseGrad(self.shape, self.dtype, self.device,
                                 self.pieces + other.pieces)
        return self.dense() + other

    __radd__ = __add__

    def dense(self) -> Tensor:
        gx = zeros(self.shape, dtype=self.dtype, device=self.device)._materialise()
        for k, (idx, g) in enumerate(self.pieces):
            if k == 0:
                setitem(gx, idx, g)
            else:  # pieces may overlap (x[:2] and x[1:]): each adds to what is there
                view = getitem(gx, idx)
                assign(view, view + g)
        return gx


@register("setitem", dunder="__setitem__")
def setitem(x: Tensor, idx, value) -> None:
    """`x[idx] = value`: writes value (a tensor broadcast to the indexed shape, or a scalar)
    into x's storage, in place; with index tensors or masks among idx, as PyTorch's
    `index_put_` (repeated indices: one of the values wins). Differentiable in x and value
    as PyTorch's (x takes the result's history; a leaf that requires grad is refused)."""
    idx = _ranges_as_lists(idx)
    if isinstance(value, Tensor) and value.ndim and value.shape[0] == 1:
        # value's leading size-1 dims are dropped first, as torch's (`x[0] = y[None]`)
        k = next((d for d, n in enumerate(value.shape) if n != 1), value.ndim)
        value = value.reshape(value.shape[k:])
    if is_grad_enabled() and (x.requires_grad or getattr(value, "requires_grad", False)):
        ADVANCED["setitem_autograd"](x, idx, value)
        return
    if ADVANCED["is_advanced"](idx):
        ADVANCED["setitem"](x, idx, value)
        return
    with no_grad():
        view = getitem(x, idx)
    assign(view, value)
    x._hist_at = view._hist_at  # x's own write: its history (if any) stays its own


def assign(dst: Tensor, value, internal: bool = False, also: tuple = ()) -> Tensor:
    """Write `value` (a tensor broadcastable to dst, or a scalar) into dst's storage.
    internal: value is the caller's own (no one else reads it later), so a lazy value is
    computed in the write even where it reads dst (`x += 1`: one kernel). also: more lazy
    tensors on value's node that the caller points at dst's storage after the write (a
    gradient closure's alias of value, `saved_output`)."""
    dst._materialise()
    if dst.numel() == 0:
        return dst
    if isinstance(value, Tensor):
        writes.refuse_overlap(dst)
        if value.device != dst.device:
            value = value.to(dst.device)
        if shapes.broadcast_shapes(value.shape, dst.shape) != dst.shape:
            raise ValueError(f"cannot assign a value of shape {value.shape} to a view of "
                             f"shape {dst.shape}")
        if _reads(value, dst):  # overlapping read and write: compute the value first
            value = clone(value)._materialise()
        if internal and value._node is not None and value.shape == dst.shape and \
                value.dtype is dst.dtype:
            lazy = value  # the caller's own lazy value is the write's graph: no cast node
        else:
            lazy = elementwise("cast", [value], [value.dtype.compute], dst.dtype,
                               shape=dst.shape)
    else:
        lazy = elementwise("full", [value], [dst.dtype.compute], dst.dtype, device=dst.device,
                           shape=dst.shape)
    before_write(dst, (lazy, value, *also) if internal else (lazy,))
    write_into(lazy, dst)
    dst._hist_at = writes.count[0]
    return dst


def _reads(value: Tensor, dst: Tensor) -> bool:
    """Whether computing value reads dst's storage through a different view."""
    seen, stack = set(), [value._node if value.is_lazy else value]
    while stack:
        x = stack.pop()
        if isinstance(x, Node):
            if id(x) in seen:
                continue
            seen.add(id(x))
            stack.extend(x.inputs if x.result is None else [x.result])
        elif isinstance(x, Tensor) and x._buf is dst._buf:
            if (x.shape, x._strides, x.offset) != (dst.shape, dst._strides, dst.offset):
                return True
    return False


def _overwrite(x: Tensor, value, name: str) -> Tensor:
    if is_grad_enabled() and (x.requires_grad or getattr(value, "requires_grad", False)):
        return ADVANCED["overwrite_autograd"](x, value, name)
    return assign(x, value)


@register("zero_", method=True)
def zero_(x: Tensor) -> Tensor:
    """Fills x with zeros in place and returns x. Under autograd x's old value then gets a
    zero gradient, as in PyTorch. Also `t.zero_()`."""
    return _overwrite(x, 0, "zero_")


@register("fill_", method=True)
def fill_(x: Tensor, value) -> Tensor:
    """Fills x with `value` (a scalar, or a tensor broadcast to x's shape) in place
    and returns x; recorded for autograd as `copy_`. Also `t.fill_(value)`."""
    return _overwrite(x, value, "fill_")


@register("copy_", method=True)
def copy_(x: Tensor, src) -> Tensor:
    """Copies src (a tensor broadcast to x's shape, converted to x's dtype and
    device, or a scalar) into x in place and returns x. Under autograd x takes the copy's
    history, as PyTorch's: src gets the gradient, x's old value a zero one (a leaf that
    requires grad, or a view of one, is refused). Also `t.copy_(src)`."""
    return _overwrite(x, src, "copy_")


# ---- conversions ---------------------------------------------------------------------------
def to_args(args: tuple, dtype=None, device=None) -> tuple:
    """(device, dtype) of `to`'s arguments: positional ones are a device (a Device, or a
    runtime name such as "cpu", "cuda:0"), a tensor (its device and dtype) or a dtype."""
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, str) and a.split(":")[0] not in {d.name for d in dtypes.ALL} \
                or isinstance(a, _device.Device):
            device = a
        else:
            dtype = a
    return device, dtype


@register("to", method=True)
def to(x: Tensor, *args, dtype=None, device=None) -> Tensor:
    """x on another device and/or with another dtype; x itself when nothing changes.

    Positional arguments are recognised as a device (a Device, or a runtime name such as
    "cpu", "cuda:0"), a tensor (its device and dtype) or a dtype (anything else); or pass
    `dtype=`/`device=`. A device change copies through the host. Differentiable. Also
    `t.to(...)`."""
    device, dtype = to_args(args, dtype, device)
    y = x
    if device is not None and _device.get(device) != x.device:
        y = _to_device(y, _device.get(device))
    if dtype is not None:
        y = cast(y, dtype)
    return y


_LEGACY = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
           "bfloat16": "BFloat16Tensor", "int32": "IntTensor", "int64": "LongTensor",
           "bool": "BoolTensor"}


@tensor_method("type")
def _type(x: Tensor, dtype=None):
    """`t.type()`: the legacy type name ("dl.FloatTensor"); `t.type(dtype)`: t converted
    to dtype (a dtype, or such a name), as PyTorch's."""
    if dtype is None:
        return f"dl.{_LEGACY[x.dtype.name]}"
    if isinstance(dtype, str):
        names = {v: k for k, v in _LEGACY.items()}
        name = names.get(dtype.split(".")[-1])
        if name is None:
            raise ValueError(f"invalid type: {dtype!r}")
        dtype = name
    return to(x, dtype=dtype)


def _to_device(x: Tensor, dev) -> Tensor:
    data = x.numpy()
    y = Tensor._from_numpy(host.to_storage(data, x.dtype) if x.dtype is dtypes.bfloat16
                           else data, x.dtype, dev)
    src = x.device
    return record(y, "to", (x,), lambda g: (_to_device(g, src),))


def _caster(name, dt):
    def fn(x):
        return cast(x, dt)
    fn.__name__ = name
    fn.__doc__ = f"`t.{name}()`: t cast to {dt.name}; t itself if it has that dtype (see cast)."
    return register(name, method=True)(fn)


float_, double, half, bfloat16, int_, long, bool_ = (
    _caster(n, d) for n, d in (("float", dtypes.float32), ("double", dtypes.float64),
                               ("half", dtypes.float16), ("bfloat16", dtypes.bfloat16),
                               ("int", dtypes.int32), ("long", dtypes.int64),
                               ("bool", dtypes.bool_)))


@register("cpu", method=True)
def cpu(x: Tensor) -> Tensor:
    """x on the "cpu" device (x itself if already there). Also `t.cpu()`."""
    return to(x, device="cpu")


@register("type_as", method=True)
def type_as(x: Tensor, other: Tensor) -> Tensor:
    """x cast to other's dtype. Also `t.type_as(other)`."""
    return cast(x, other.dtype)


@register("requires_grad_", method=True)
def requires_grad_(x: Tensor, requires_grad: bool = True) -> Tensor:
    """Sets whether autograd records ops on x (a leaf; in place) and returns
    x. Only float tensors can require grad; a lazy x is computed first. Also
    `t.requires_grad_()`."""
    if x._grad_fn is not None and not requires_grad:
        raise RuntimeError("requires_grad_(False) on a non-leaf tensor")
    if requires_grad and not x.dtype.is_float:
        raise RuntimeError(f"only floating point tensors can require grad, got {x.dtype}")
    x._materialise()
    x.requires_grad = requires_grad
    return x


@register("backward", method=True)
def backward(x: Tensor, gradient=None, retain_graph: bool = False) -> None:
    """Backpropagates from x, accumulating into the `.grad` of the leaves that
    require grad.

    gradient: the gradient of x (may be omitted for a one-element x, as in PyTorch).
    The graph walked is freed unless `retain_graph=True`. No higher-order gradients.
    Also `t.backward()`."""
    _backward(x, gradient, retain_graph)


@tensor_method("retain_grad")
def _retain_grad(x: Tensor) -> None:
    """`t.retain_grad()`: a tensor made by ops (not a leaf) keeps its gradient in `.grad`
    at each backward (accumulated, as a leaf's), as PyTorch's; a no-op on a leaf."""
    if not x.requires_grad:
        raise RuntimeError("can't retain_grad on a tensor that does not require grad")
    if x._grad_fn is not None:
        x._retains_grad = True


@tensor_method("retains_grad", prop=True)
def _retains_grad(x: Tensor) -> bool:
    """Whether `retain_grad()` was called on this non-leaf tensor."""
    return x._grad_fn is not None and x.__dict__.get("_retains_grad", False)


@tensor_method("grad_fn", prop=True)
def _grad_fn(x: Tensor):
    """The node of the graph that made this tensor (None for a leaf or without autograd),
    as PyTorch's `grad_fn` (its repr names the op: `<mulBackward>`). A view whose base
    was written in place since it was made has the view of the base's new history."""
    if x.requires_grad and x._grad_fn is not None:  # (the read gives a view its history)
        check_history((x,))
    return x._grad_fn


@tensor_method("T", prop=True)
def _T(x: Tensor) -> Tensor:
    """`t.T`: t with all dims reversed (a view)."""
    return permute(x, tuple(reversed(range(x.ndim))))


@tensor_method("mT", prop=True)
def _mT(x: Tensor) -> Tensor:
    """`t.mT`: t with its last two dims swapped (a view; batched matrix transpose)."""
    return transpose(x, -2, -1)


def _set_data(x: Tensor, value: Tensor) -> None:
    """`t.data = v`: t now stands for v's values (its storage and view, or its lazy value;
    its dtype and device too), keeping its own autograd flags and history, as PyTorch's.
    A lazy value made from t before keeps t's old values (it is computed first)."""
    if not isinstance(value, Tensor):
        raise TypeError(f"t.data = ... takes a tensor, got {type(value).__name__}")
    if x._buf is not None and x._buf is not value._buf:
        writes.compute_readers([x._buf])  # they read t's storage through t: not the new one
    x._buf, x._node, x.shape = value._buf, value._node, value.shape
    x.dtype, x.device = value.dtype, value.device
    x._strides, x.offset = value._strides, value.offset
    # no longer a view of what it viewed: an in-place op must not write through that base
    # (`_index_of`), and the new storage's earlier writes are no change of x's history
    for stale in ("_lib_view", "_index_of"):
        x.__dict__.pop(stale, None)
    x._hist_at = writes.count[0]


@tensor_method("data", prop=True, setter=_set_data)
def _data(x: Tensor) -> Tensor:
    """`t.data`: t's values without autograd (`t.detach()`: a tensor sharing t's storage,
    so an in-place write through it is t's: a lazy t is computed first); assignable
    (`_set_data`)."""
    return detach(x._materialise())


@tensor_method("detach_")
def _detach_(x: Tensor) -> Tensor:
    """`t.detach_()`: t itself, cut from its history (requires_grad off); returns t."""
    x._grad_fn = None
    x.requires_grad = False
    return x


@tensor_method("__deepcopy__")
def _deepcopy(x: Tensor, memo) -> Tensor:
    t = clone(detach(x))._materialise()
    t.requires_grad = x.requires_grad
    return t

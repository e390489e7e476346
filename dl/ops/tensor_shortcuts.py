"""Small torch conveniences composed of existing ops: `view_as`, `reshape_as`, the in-place
view ops `unsqueeze_ squeeze_ t_ transpose_`, `clip`/`clip_` methods, `nelement`,
`ndimension`, `is_floating_point`, and the functions `dl.equal`, `dl.numel`, `dl.is_tensor`,
`dl.is_floating_point`."""
from __future__ import annotations

from ..autograd.grad_mode import is_grad_enabled
from ..autograd.overwrites import refuse_leaf_write
from ..fusion import writes
from ..tensor import Tensor
from .indexing import _alias, _region
from .registry import OPS, add_method, register
from .shape import reshape, squeeze, t, transpose, unsqueeze

__all__ = ["equal", "is_floating_point", "is_tensor", "numel"]


@register("view_as", method=True)
def view_as(x: Tensor, other: Tensor) -> Tensor:
    """x viewed with other's shape (`x.view(other.size())`). Also `t.view_as(other)`."""
    return reshape(x, other.shape)


@register("reshape_as", method=True)
def reshape_as(x: Tensor, other: Tensor) -> Tensor:
    """x reshaped to other's shape (`x.reshape(other.size())`). Also `t.reshape_as(other)`."""
    return reshape(x, other.shape)


def _restride(x: Tensor, name: str, view, *args) -> Tensor:
    """x <- view(x, *args) in place: x's own shape and strides change (same storage), and
    under autograd x takes the view's history (a leaf that requires grad is refused, as
    torch's)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a tensor, got {type(x).__name__}")
    if is_grad_enabled():
        refuse_leaf_write(x, name)
    # a lazy value made from x reads x's storage through x when computed: with x's old view
    # (it read the new shape's strides, out of bounds); and, as torch bumps the version, a
    # backward that reads x as saved before is refused (it read x with its new strides)
    writes.before_writes([x._materialise()._buf])
    # the view x had before this write: a backward of an op recorded earlier sees x so
    # (dl/autograd/overwrites.py: backward_of), as torch's graph keeps its inputs' metadata
    x.__dict__.setdefault("_views_before", []).append(
        (writes.count[0], x.shape, x._strides, x.offset))
    y = view(_alias(x), *args)  # from an alias: x's old history stays the view's operand
    y._materialise()
    x._buf, x.shape, x._strides, x.offset = y._buf, y.shape, y._strides, y.offset
    if y._index_of is not None:  # x was a view of a base: it stays one, re-viewed
        old, (_, redo) = x._index_of, y._index_of
        x._index_of = y._index_of if old is None else \
            (old[0], lambda b, r0=old[1]: redo(_region(b, r0)))
    if y.requires_grad and is_grad_enabled():
        x._grad_fn, x._hist_at = y._grad_fn, y._hist_at
    return x


@register("unsqueeze_", method=True)
def unsqueeze_(x: Tensor, dim: int) -> Tensor:
    """Inserts a size-1 dim at `dim` into x itself (no copy); returns x. Also
    `t.unsqueeze_(dim)`."""
    return _restride(x, "unsqueeze_", unsqueeze, dim)


@register("squeeze_", method=True)
def squeeze_(x: Tensor, dim=None) -> Tensor:
    """Removes x's size-1 dims (all, or those among `dim`) in x itself; returns x. Also
    `t.squeeze_(dim)`."""
    return _restride(x, "squeeze_", squeeze, dim)


@register("t_", method=True)
def t_(x: Tensor) -> Tensor:
    """Transposes x (rank <= 2) in itself; returns x. Also `t.t_()`."""
    return _restride(x, "t_", t)


@register("transpose_", method=True)
def transpose_(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swaps dims dim0 and dim1 of x in itself; returns x. Also `t.transpose_(a, b)`."""
    return _restride(x, "transpose_", transpose, dim0, dim1)


add_method("clip")  # `clip` is registered as clamp's alias; `clip_` as clamp_'s
OPS["clip_"] = OPS["clamp_"]
add_method("clip_")


@register("nelement", method=True)
def nelement(x: Tensor) -> int:
    """The number of elements of x (`x.numel()`). Also `t.nelement()`."""
    return x.numel()


@register("ndimension", method=True)
def ndimension(x: Tensor) -> int:
    """The number of dims of x (`x.dim()`). Also `t.ndimension()`."""
    return x.ndim


@register("is_floating_point", method=True)
def is_floating_point(x: Tensor) -> bool:
    """Whether x's dtype is a floating point one. Also `t.is_floating_point()`."""
    return bool(x.dtype.is_float)


@register("numel")
def numel(x: Tensor) -> int:
    """The number of elements of x, as torch.numel."""
    return x.numel()


def is_tensor(obj) -> bool:
    """Whether obj is a dl Tensor, as torch.is_tensor."""
    return isinstance(obj, Tensor)


@register("equal", method=True)
def equal(a: Tensor, b: Tensor) -> bool:
    """True when a and b have the same shape and equal elements (compared after type
    promotion, as torch.equal; a nan is equal to nothing). Also `t.equal(other)`."""
    if a.shape != b.shape:
        return False
    if a.numel() == 0:
        return True
    return bool((a == b).all().item())

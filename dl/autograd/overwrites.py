"""Autograd and storages overwritten in place (dl/fusion/writes.py numbers every in-place
write and stamps the storage it writes).

- `check_history` (at record): an operand whose storage was written through another view
  after its history was recorded no longer has the value its history computes. A view made
  by indexing or a shape op (a reshape, a transpose) takes its base's current history
  (`REGENERATE`, set by dl.ops.indexing, as PyTorch regenerates a view's); an alias made by
  `detach()` or `.data` rebases nothing, in torch as here: the tensors sharing its storage
  keep their histories, and a backward that reads a value overwritten since is refused below.
- `backward_of` (at backward): an op whose operands or output were overwritten after it ran
  is run with those storages unreadable (their class swapped for one whose every attribute
  read raises), its gradients computed inside: a backward that reads them is PyTorch's
  "modified by an inplace operation" error, one that does not (an add's) goes on."""
from __future__ import annotations

from ..fusion import realise, writes
from ..fusion.materialise import settled
from ..tensor import Tensor
from .planned import backward as planned

# regenerate(x) -> bool: gives a view made by indexing or a shape op the history of its
# base's current value (set by dl.ops.indexing, above the tape)
REGENERATE: list = [None]


def check_history(inputs: tuple) -> None:
    """Give an input whose storage was written through another tensor since its history was
    recorded its base's current history where it is a view made by indexing or a shape op
    (as PyTorch regenerates a view's). Any other input keeps its history (a write through a
    detached alias, as in torch: a backward that reads the overwritten value is refused by
    `backward_of`)."""
    for x in inputs:
        if isinstance(x, Tensor) and x._grad_fn is not None and \
                writes.written_since(x, x._hist_at):
            REGENERATE[0](x)


def refuse_leaf_write(x: Tensor, name: str) -> None:
    """Under autograd, refuse an in-place write to a leaf that requires grad or to a view of
    one (a transpose, slice or reshape sharing its storage), as PyTorch does: the write
    would change the leaf's value behind the gradients that use it."""
    if not x.requires_grad:
        return
    if x._grad_fn is None:
        raise RuntimeError(f"{name}: a leaf tensor that requires grad is used in an in-place "
                           f"operation (wrap it in dl.no_grad())")
    buf = x._buf
    if buf is None:  # a lazy value is no view
        return
    stack, seen = [x._grad_fn], set()
    while stack:  # the view's history: the ops whose operands share its storage
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        for o in n.operands:
            if isinstance(o, Tensor) and o._buf is buf:
                if o._grad_fn is not None:
                    stack.append(o._grad_fn)
                elif o.requires_grad:
                    raise RuntimeError(
                        f"{name}: a view of a leaf tensor that requires grad is used in an "
                        f"in-place operation (wrap it in dl.no_grad())")


class _StaleRead(BaseException):
    """A backward read a storage overwritten since its op ran (BaseException: no `except
    Exception` inside an op may take it for a failure it can work around)."""


_STALE_CLASSES: dict = {}


def _stale_class(cls):
    """cls with every attribute read raising _StaleRead."""
    sub = _STALE_CLASSES.get(cls)
    if sub is None:
        def read(self, name):
            raise _StaleRead
        sub = _STALE_CLASSES[cls] = type(f"Overwritten{cls.__name__}", (cls,),
                                         {"__getattribute__": read})
    return sub


def view_at(x: Tensor, at: int) -> tuple:
    """(shape, strides, offset) x had when write number `at` was the latest: an in-place
    view op (`x.t_()`) records the view it replaced (`_views_before`)."""
    for stamp, shape, strides, offset in x.__dict__.get("_views_before", ()):
        if stamp > at:
            return shape, strides, offset
    return x.shape, x._strides, x.offset


def backward_of(fn, g):
    """fn.backward(g) where a storage that fn's output or one of its operands views was
    written in place after fn was recorded. The backward may still not read it (an add's
    does not), so it runs with those storages made unreadable, its gradients computed
    inside; a read is PyTorch's error, not a gradient of the new values."""
    stale = {}
    out = fn.out() if fn.out is not None else None  # gone: only `saved` can read it
    saved = fn.saved
    if saved is not None:
        settled(saved)  # the storage its node was computed into (then written), if any
    for x in (out, saved, *fn.operands):
        if isinstance(x, Tensor) and writes.written_since(x, fn.at):
            stale[id(x._buf)] = x._buf
    if not stale:
        return planned(fn, g)
    if isinstance(g, Tensor):  # a lazy g (made by a later op's backward from the values
        g._materialise()       # then current) is computed before those storages close
    classes = [(b, b.__class__) for b in stale.values()]
    for b, cls in classes:
        b.__class__ = _stale_class(cls)
    views = []  # operands re-viewed in place since: as they were when fn was recorded
    for x in fn.operands:
        if isinstance(x, Tensor) and "_views_before" in x.__dict__:
            views.append((x, (x.shape, x._strides, x.offset)))
            x.shape, x._strides, x.offset = view_at(x, fn.at)
    try:
        gxs = tuple(fn.backward(g))
        # only the gradients an input takes: a lazy one nobody takes (mul's for an operand
        # without grad, which reads the other operand) is never computed, as torch's op
        # never saves what it does not need
        realise([x for e, x in zip(fn.inputs, gxs) if e is not None and isinstance(x, Tensor)])
    except _StaleRead:
        raise RuntimeError(
            f"backward through {fn.name}: a tensor it saved was modified by an in-place "
            f"operation after {fn.name} used it (x[...] = ..., x += ..., x.copy_(...), an "
            f"optimiser step); make the change out of place (x = x + ...) or on a "
            f"clone") from None
    finally:
        for b, cls in classes:
            object.__setattr__(b, "__class__", cls)
        for x, v in views:
            x.shape, x._strides, x.offset = v
    return gxs

"""The op registry, and with it the Tensor method surface, declared once.

Every tensor-level op registers by name in `OPS`, and its declaration says which Tensor
methods and operators call it:

    @register("add", method=True, dunder="__add__", rdunder="__radd__")
    def add(a, b, alpha=None): ...          # dl.ops.add, Tensor.add, a + b, 2 + a

A method is the op function itself, set on the class: a call costs no forwarding. (The only
Tensor attributes declared elsewhere are the core ones in dl/tensor.py — storage, views, host
I/O — and `_compute`, which dl.fusion supplies.) Registering a name again rebinds the
methods and operators declared for it, so a later package can replace an op, and
`add_method(name)` exposes a registered op as a method afterwards:

    dl.ops.register("cube3")(lambda t: Cube.apply(t)); dl.ops.add_method("cube3")
"""
from __future__ import annotations

from ..tensor import Tensor

OPS: dict = {}
_BOUND: dict[str, list] = {}  # op name -> [(Tensor attribute, operands swapped)]


def _swapped(fn, attr: str):
    def method(self, other):
        return fn(other, self)
    method.__name__ = attr
    return method


def _bind(attr: str, name: str, swapped: bool = False) -> None:
    fn = OPS[name]
    setattr(Tensor, attr, _swapped(fn, attr) if swapped else fn)
    bound = _BOUND.setdefault(name, [])
    if (attr, swapped) not in bound:
        bound.append((attr, swapped))


def register(*names, method: bool | str | tuple = False, dunder: str | None = None,
             rdunder: str | None = None):
    """Registers the decorated op under `names` (default: its own name). `method`: True makes
    the first name a Tensor method, a name or a tuple of names makes those methods. `dunder`:
    the operator that calls it (`"__add__"`); `rdunder`: the reflected operator, which calls it
    with the operands swapped (`"__radd__"`: `2 + t` is `add(2, t)`)."""
    def wrap(fn):
        ns = names or (fn.__name__,)
        for n in ns:
            OPS[n] = fn
            for attr, swapped in _BOUND.get(n, ()):
                _bind(attr, n, swapped)
        ms = (ns[0],) if method is True else (method,) if isinstance(method, str) else method
        for m in ms or ():
            _bind(m, m)
        if dunder:
            _bind(dunder, ns[0])
        if rdunder:
            _bind(rdunder, ns[0], swapped=True)
        return fn
    return wrap


def add_method(name: str) -> None:
    """Expose a registered op as a Tensor method of the same name."""
    _bind(name, name)


def tensor_method(attr: str, prop: bool = False, setter=None):
    """A Tensor method (or, with `prop`, a property, assignable with `setter`) that is not
    an op of its own: `T`, `mT`, `data`, `__deepcopy__`."""
    def wrap(fn):
        setattr(Tensor, attr, property(fn, setter) if prop else fn)
        return fn
    return wrap

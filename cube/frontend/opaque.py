"""Runtime values passing through a compile-time call of a plain Python function.

`zip((x, y), ws)`, `reversed((x, y))` or a user's helper returning `(b, a)` only move the
values and are fine; `sorted`, `map(abs, ...)` or `any(...)` would look at them, and an IR
value as a Python object is true and equal only to itself, which silently decided
`any((x > 5.0, ...))` as true. So the call sees each runtime value as an `_Opaque` that can
be moved but not looked at, and its result gets the values back."""
from __future__ import annotations

import collections.abc

from .arith import is_runtime


class _Opaque:
    """A runtime value that may be moved around but not looked at: its truth, comparisons
    and arithmetic raise."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def _refuse(self, *_):
        raise TypeError(f"a runtime {getattr(self.value.type, 'name', self.value.type)} value "
                        f"has no compile-time value (use a @cube helper, or the value's own "
                        f"operators in the kernel)")

    __bool__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __index__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _refuse
    __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = _refuse
    __rpow__ = __neg__ = __pos__ = __abs__ = __float__ = __int__ = _refuse
    __hash__ = object.__hash__


def shield(x):
    """x with every runtime value inside a tuple, list or dict made `_Opaque`; x itself
    when there is none."""
    if is_runtime(x):
        return _Opaque(x)
    if isinstance(x, (tuple, list)):
        items = [shield(v) for v in x]
        if all(a is b for a, b in zip(items, x)):
            return x
        return type(x)(items)
    if isinstance(x, dict):
        items = {k: shield(v) for k, v in x.items()}
        return x if all(items[k] is v for k, v in x.items()) else items
    return x


def unshield(x):
    """The call's result with the runtime values back; an iterator (`zip`, `reversed`) is
    drawn into a tuple, which a kernel's for loop walks alike."""
    if isinstance(x, _Opaque):
        return x.value
    if isinstance(x, (tuple, list)):
        return type(x)(unshield(v) for v in x)
    if isinstance(x, collections.abc.Iterator):
        return tuple(unshield(v) for v in x)
    return x

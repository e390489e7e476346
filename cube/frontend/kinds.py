"""What kind of value each name and expression of a kernel holds, decided in one place.

A kernel's Python produces values of these kinds (the compile-time boundary, in the style of
Triton's `constexpr`):

- runtime values (`ir.Var`/`ir.Const`): computed on the device;
- memories (`MemRef`) and their methods (`BoundMethod`);
- compile-time values of the allowed types: numbers and bools (NumPy scalars become Python
  numbers), element and line types, `None`, strings, and tuples of those;
- things that can only be called or looked into: `@cube` helpers, the language's functions,
  plain Python functions, modules.

Builtins (`UNIT_POS`, ...) become runtime values as soon as they are read, whether by a bare
name, through `cb.UNIT_POS` or `import cube.lang as L; L.UNIT_POS`: no other kind of object
ever reaches Python's operators. Folding (arithmetic, comparisons, truth tests on compile-time
values) accepts only the allowed types and refuses anything else with a message in the
user's words."""
from __future__ import annotations

import types

import numpy as np

from cube_ir import ir
from cube_ir.types import Scalar, Vec

from .. import lang
from .values import BoundMethod, MemRef

_NUMBER = (bool, int, float)


def is_runtime(x) -> bool:
    return isinstance(x, (ir.Var, ir.Const))


def normalise(x):
    """A compile-time value in its canonical Python form: NumPy scalars become Python numbers
    (a `Comptime[int]` given as `np.int64(8)` is the int 8), lists become tuples."""
    if isinstance(x, np.generic) and not isinstance(x, np.void):
        return x.item()
    if isinstance(x, list):
        return tuple(normalise(v) for v in x)
    if type(x) is tuple:
        return tuple(normalise(v) for v in x)
    return x


def is_number(x) -> bool:
    return isinstance(x, _NUMBER) or isinstance(x, (np.number, np.bool_))


def is_type_value(x) -> bool:
    return isinstance(x, (Scalar, Vec, lang.LineSpec))


def is_plain(x) -> bool:
    """A compile-time value Python's operators may fold: numbers, bools, types, None,
    strings and tuples of those."""
    if is_number(x) or x is None or isinstance(x, str) or is_type_value(x):
        return True
    if isinstance(x, tuple):
        return all(is_plain(v) for v in x)
    return False


def _name_of(ref: MemRef) -> str:
    return getattr(ref.mem, "name", None) or ref.kind


def describe(x) -> str:
    """A value as the user would name it, for error messages."""
    if isinstance(x, MemRef):
        kinds = {"array": "the array", "tensor": "the tensor", "scalar": "the scalar",
                 "shared": "the shared memory", "local": "the local array"}
        return f"{kinds.get(x.kind, 'the memory')} `{_name_of(x)}`"
    if isinstance(x, BoundMethod):
        call = f"{_name_of(x.ref)}.{x.name}({'0' if x.name in ('shape', 'stride') else ''})"
        return f"`{_name_of(x.ref)}.{x.name}`, a method (call it: `{call}`)"
    if is_runtime(x):
        return f"a runtime {x.type} value"
    if isinstance(x, lang.BuiltinVar):
        return f"the builtin {x.name}"
    if isinstance(x, types.ModuleType):
        return f"the module `{x.__name__}`"
    if is_type_value(x):
        return f"the type {x}"
    if isinstance(x, bool):
        return f"the bool {x}"
    if is_number(x):
        return f"the number {x!r}"
    if x is None:
        return "None"
    if isinstance(x, str):
        return f"the string {x!r}"
    if isinstance(x, tuple):
        return f"the tuple {x!r}" if is_plain(x) else "a tuple"
    cube_fn = getattr(x, "is_kernel", None)
    if cube_fn is not None and hasattr(x, "fn"):
        return f"the @cube {'kernel' if cube_fn else 'helper'} `{x.__name__}`"
    if callable(x):
        name = getattr(x, "__name__", None)
        return f"the function `{name}`" if name else f"a {type(x).__name__} object"
    return f"a {type(x).__name__} object"


def foldable(op: str, *xs) -> bool:
    """May Python's operator `op` fold these compile-time values? Arithmetic needs numbers
    (or tuples, for + and *); equality also takes types, None and strings."""
    if all(is_number(x) for x in xs):
        return True
    if not all(is_plain(x) for x in xs):
        return False
    if op in ("eq", "ne", "not"):
        return True
    if op in ("add", "mul", "lt", "le", "gt", "ge"):
        return any(isinstance(x, tuple) for x in xs) and all(
            isinstance(x, tuple) or (op == "mul" and isinstance(x, int)) for x in xs)
    return False


def refuse(op_text: str, *xs) -> str:
    """The message for values that cannot be folded by `op_text`."""
    bad = [x for x in xs if not is_number(x)] or list(xs)
    return f"{op_text} cannot be applied to {describe(bad[0])}" + (
        "" if len(xs) < 2 else f" (operands: {', '.join(describe(x) for x in xs)})")


def truthable(x) -> bool:
    """A compile-time value whose truth Python may decide (`if N:`, `not flag`)."""
    return is_plain(x)

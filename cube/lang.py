"""The kernel language's names: annotations, builtins and intrinsic functions.

Intrinsics are plain Python functions so they also work on compile-time values (the frontend
calls them directly when every argument is known at compile time); on runtime values the
frontend emits IR instead (see cube/frontend/intrinsics.py)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from cube_ir.types import Scalar, Vec, boolean, f32, i32

# ---- annotations -----------------------------------------------------------------------


@dataclass(frozen=True)
class LineSpec:
    elem: Any  # Scalar or TypeVar
    lanes: int | None  # None: taken from the argument at launch


class Line:
    """`Line[T, n]`: n lanes of T; `Line[T]` takes n from the argument (`buf.lines(n)`)."""

    def __class_getitem__(cls, item):
        if isinstance(item, tuple):
            elem, lanes = item
            return LineSpec(elem, int(lanes))
        return LineSpec(item, None)


@dataclass(frozen=True)
class MemSpec:
    kind: str  # "array" | "tensor"
    elem: Any  # Scalar, TypeVar or LineSpec


class Array:
    """`Array[T]` / `Array[Line[T]]`: a 1-D buffer argument with `len()`."""

    def __class_getitem__(cls, item):
        return MemSpec("array", item)


class Tensor:
    """`Tensor[T]`: an n-D buffer argument with `shape(d)`, `stride(d)`, `rank()`; indexed by a
    linear offset into its buffer (in units of its element, a line for line tensors)."""

    def __class_getitem__(cls, item):
        return MemSpec("tensor", item)


@dataclass(frozen=True)
class ComptimeSpec:
    type: Any


class Comptime:
    """`Comptime[int]`: a compile-time parameter; each value gets its own specialisation."""

    def __class_getitem__(cls, item):
        return ComptimeSpec(item)


# ---- builtins --------------------------------------------------------------------------


class BuiltinVar:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


_BUILTIN_NAMES = """UNIT_POS UNIT_POS_X UNIT_POS_Y UNIT_POS_Z CUBE_POS CUBE_POS_X CUBE_POS_Y
CUBE_POS_Z CUBE_DIM CUBE_DIM_X CUBE_DIM_Y CUBE_DIM_Z CUBE_COUNT CUBE_COUNT_X CUBE_COUNT_Y
CUBE_COUNT_Z ABSOLUTE_POS ABSOLUTE_POS_X ABSOLUTE_POS_Y ABSOLUTE_POS_Z PLANE_DIM
UNIT_POS_PLANE""".split()
BUILTINS = {n: BuiltinVar(n) for n in _BUILTIN_NAMES}
globals().update(BUILTINS)


# ---- compile-time helpers --------------------------------------------------------------


def comptime(value):
    """Force compile-time evaluation: the value is a constant of the specialisation."""
    return value


def range(*args, unroll: bool = False):  # noqa: A001 - the kernel language's range
    """`cb.range(a, b, step, unroll=True)`: like range; unrolled at compile time if asked."""
    import builtins
    return builtins.range(*args)


# ---- math (Python fallbacks for compile-time arguments) --------------------------------


def sqrt(x): return math.sqrt(x)
def rsqrt(x): return 1.0 / math.sqrt(x)
def exp(x): return math.exp(x)
def log(x): return math.log(x)
def log1p(x): return math.log1p(x)
def sin(x): return math.sin(x)
def cos(x): return math.cos(x)
def tanh(x): return math.tanh(x)
def erf(x): return math.erf(x)
def floor(x): return math.floor(x)
def ceil(x): return math.ceil(x)
def round(x): return builtins_round(x)  # noqa: A001
def pow(x, y): return x ** y  # noqa: A001
def fma(a, b, c): return a * b + c
def clamp(x, lo, hi): return min(max(x, lo), hi)
def select(cond, a, b): return a if cond else b
def abs(x): return builtins_abs(x)  # noqa: A001
def min(a, b): return builtins_min(a, b)  # noqa: A001
def max(a, b): return builtins_max(a, b)  # noqa: A001
def cast(x, t): return t(x)


import builtins as _b  # noqa: E402

builtins_round, builtins_abs, builtins_min, builtins_max = _b.round, _b.abs, _b.min, _b.max


# ---- memory, barriers, atomics, plane ops (kernel-only) --------------------------------


def _kernel_only(name):
    def f(*args, **kwargs):
        raise RuntimeError(f"cb.{name} can only be used inside a @cube function")
    f.__name__ = name
    return f


SharedMemory = _kernel_only("SharedMemory")
LocalArray = _kernel_only("LocalArray")
sync_cube = _kernel_only("sync_cube")
ATOMICS = ("atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_and", "atomic_or",
           "atomic_xor", "atomic_exchange", "atomic_cas")
PLANE = ("plane_sum", "plane_prod", "plane_max", "plane_min", "plane_all", "plane_any",
         "plane_broadcast", "plane_shuffle", "plane_shuffle_xor", "plane_inclusive_sum",
         "plane_exclusive_sum", "plane_inclusive_prod", "plane_exclusive_prod")
for _n in ATOMICS + PLANE:
    globals()[_n] = _kernel_only(_n)


def is_type(x) -> bool:
    return isinstance(x, (Scalar, Vec))


# Python's number types where the language takes an element type: annotations, casts
PY_TYPES = {int: i32, float: f32, bool: boolean}

"""The kernel language's names: annotations, builtins and intrinsic functions.

Intrinsics are plain Python functions so they also work on compile-time values (the frontend
calls them directly when every argument is known at compile time); on runtime values the
frontend emits IR instead (see cube/frontend/intrinsics.py)."""
from __future__ import annotations

import math
import textwrap
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
            if len(item) != 2 or isinstance(item[1], bool) or \
                    not hasattr(item[1], "__index__"):
                raise TypeError(f"Line takes an element type and optionally a line size: "
                                f"Line[T] or Line[T, n], got Line[{_items(item)}]")
            elem, lanes = item
            return LineSpec(elem, int(lanes))
        return LineSpec(item, None)


def _items(item: tuple) -> str:
    text = ", ".join(getattr(v, "__name__", None) or repr(v) for v in item)
    return text + "," if len(item) == 1 else text


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



_FLOAT_MATH = ("Used inside `@cube` kernels, per unit; takes a float value or line (f16, "
               "bf16, f32, f64; lines lane by lane) and gives its type. An integer argument "
               "is a compile error: cast it first (`f32(i)`).")


def _float_math(fn):
    """Adds the float math functions' shared paragraph to fn's one-line docstring."""
    fn.__doc__ = f"{fn.__doc__}\n\n{_FLOAT_MATH}"
    return fn


@_float_math
def sqrt(x):
    """Square root of x, elementwise."""
    return math.sqrt(x)


@_float_math
def rsqrt(x):
    """Reciprocal square root, 1 / sqrt(x)."""
    return 1.0 / math.sqrt(x)


@_float_math
def exp(x):
    """e raised to x."""
    return math.exp(x)


@_float_math
def log(x):
    """Natural logarithm of x."""
    return math.log(x)


@_float_math
def log1p(x):
    """log(1 + x), accurate for x near 0."""
    return math.log1p(x)


@_float_math
def sin(x):
    """Sine of x (radians)."""
    return math.sin(x)


@_float_math
def cos(x):
    """Cosine of x (radians)."""
    return math.cos(x)


@_float_math
def tanh(x):
    """Hyperbolic tangent of x."""
    return math.tanh(x)


@_float_math
def erf(x):
    """The error function of x."""
    return math.erf(x)


@_float_math
def floor(x):
    """x rounded down to an integral value (in x's float type)."""
    return math.floor(x)


@_float_math
def ceil(x):
    """x rounded up to an integral value (in x's float type)."""
    return math.ceil(x)


@_float_math
def round(x):  # noqa: A001
    """x rounded to the nearest integral value, ties to even (as Python's `round`).

    Unlike C's `round`, which rounds ties away from zero: `round(2.5)` is 2.0."""
    return builtins_round(x)


@_float_math
def tan(x):
    """Tangent of x (radians)."""
    return math.tan(x)


@_float_math
def asin(x):
    """Arc sine of x, in [-pi/2, pi/2] (NaN outside [-1, 1])."""
    return math.asin(x)


@_float_math
def acos(x):
    """Arc cosine of x, in [0, pi] (NaN outside [-1, 1])."""
    return math.acos(x)


@_float_math
def atan(x):
    """Arc tangent of x, in [-pi/2, pi/2]."""
    return math.atan(x)


@_float_math
def sinh(x):
    """Hyperbolic sine of x."""
    return math.sinh(x)


@_float_math
def cosh(x):
    """Hyperbolic cosine of x."""
    return math.cosh(x)


@_float_math
def asinh(x):
    """Inverse hyperbolic sine of x."""
    return math.asinh(x)


@_float_math
def acosh(x):
    """Inverse hyperbolic cosine of x (NaN below 1)."""
    return math.acosh(x)


@_float_math
def atanh(x):
    """Inverse hyperbolic tangent of x (+-inf at +-1, NaN outside [-1, 1])."""
    return math.atanh(x)


@_float_math
def log2(x):
    """Base-2 logarithm of x."""
    return math.log2(x)


@_float_math
def log10(x):
    """Base-10 logarithm of x."""
    return math.log10(x)


@_float_math
def exp2(x):
    """2 raised to x."""
    return 2.0 ** x


@_float_math
def expm1(x):
    """exp(x) - 1, accurate for x near 0."""
    return math.expm1(x)


@_float_math
def trunc(x):
    """x rounded toward zero to an integral value (in x's float type)."""
    return math.trunc(x)


_FLOAT_MATH2 = ("Used inside `@cube` kernels, per unit; takes two float values or lines (f16, "
                "bf16, f32, f64; lines lane by lane), promoted as in arithmetic (a Python "
                "number takes the other operand's type), and gives their type. Integer "
                "arguments are a compile error: cast them first.")


def _float_math2(fn):
    fn.__doc__ = f"{fn.__doc__}\n\n{_FLOAT_MATH2}"
    return fn


@_float_math2
def atan2(y, x):
    """The angle of the point (x, y) from the x axis, in [-pi, pi] (Python's quadrants and
    signed zeros: atan2(0.0, -1.0) is pi, atan2(-0.0, -1.0) is -pi)."""
    return math.atan2(y, x)


@_float_math2
def hypot(x, y):
    """sqrt(x*x + y*y) without overflow or underflow in between (hypot(1e30, 1e30) in f32 is
    1.414e30); inf if either is infinite, even with a NaN."""
    return math.hypot(x, y)


@_float_math2
def fmod(x, y):
    """x - n*y for the integer n that truncates x/y, exact, with the sign of x (C's and
    Python's math.fmod; Python's `x % y` takes y's sign instead). NaN for y = 0 or an
    infinite x."""
    return math.fmod(x, y)


@_float_math2
def copysign(x, y):
    """|x| with the sign bit of y (copysign(1.0, -0.0) is -1.0)."""
    return math.copysign(x, y)


def pow(x, y):  # noqa: A001
    """x raised to the power y (`cb.pow(x, y)`, also `math.pow` and `x ** y`).

    Used inside `@cube` kernels, per unit. The operands are promoted as in arithmetic and must
    be floats (lines lane by lane); only `x ** n` with a constant integer exponent 0..4 also
    works on integers (it becomes multiplications)."""
    return x ** y


def fma(a, b, c):
    """a * b + c as one fused multiply-add (a single rounding where the target has one).

    Used inside `@cube` kernels, per unit. The three operands are promoted to one type, which
    must be a float type (scalars or lines)."""
    return a * b + c


def clamp(x, lo, hi):
    """min(max(x, lo), hi): x limited to [lo, hi].

    Used inside `@cube` kernels, per unit. Ints or floats, scalars or lines; the operands are
    promoted to one type as in arithmetic (literals take the other operands' type). A NaN x
    gives NaN (Python's max and min keep a NaN that comes first)."""
    return min(max(x, lo), hi)


def isnan(x):
    """True where x is NaN (also `math.isnan` in kernels).

    Used inside `@cube` kernels, per unit, on floats (scalars or lines: a line of bool); an
    int is never NaN. Exact on every target, including those whose compilers may assume
    finite floats (WGSL, SPIR-V: tested on the bits there)."""
    return math.isnan(x)


def isinf(x):
    """True where x is +inf or -inf (also `math.isinf` in kernels); as `isnan`."""
    return math.isinf(x)


def isfinite(x):
    """True where x is neither NaN nor infinite (also `math.isfinite` in kernels); as
    `isnan`."""
    return math.isfinite(x)


def select(cond, a, b):
    """`a if cond else b` without branching: both a and b are evaluated.

    Used inside `@cube` kernels, per unit. `cond` must be a bool; a and b are promoted to one
    type. A choice between two literals is weak like a literal (it takes the type of what it
    meets; alone it is i32, or f32 if either is a float). A compile-time `cond` picks its
    operand at compile time. Use `x if c else y` when an operand must not be evaluated (a
    read that may be out of bounds)."""
    return a if cond else b


def abs(x):  # noqa: A001
    """Absolute value (also Python's `abs` and `math.fabs` in kernels).

    Used inside `@cube` kernels, per unit, on ints and floats (scalars or lines; the result
    has x's type). On an unsigned int it returns x."""
    return builtins_abs(x)


def min(a, b):  # noqa: A001
    """The smaller of two or more values (Python's `min` means the same in kernels).

    Used inside `@cube` kernels, per unit. Operands are promoted as in arithmetic (a signed
    with an unsigned int, or an int with a float, is an error); lines compare lane by lane.
    With more than two values they are folded left to right. As Python's: `b if b < a else
    a`, so a NaN is kept when it comes first (`min(nan, 1.0)` is nan, `min(1.0, nan)` is 1.0)
    and the first of equal values wins (`min(0.0, -0.0)` is 0.0)."""
    return builtins_min(a, b)


def max(a, b):  # noqa: A001
    """The larger of two or more values (Python's `max` means the same in kernels).

    Used inside `@cube` kernels, per unit. Operands are promoted as in arithmetic (a signed
    with an unsigned int, or an int with a float, is an error); lines compare lane by lane.
    With more than two values they are folded left to right. As Python's: `b if b > a else
    a` (a NaN is kept when it comes first)."""
    return builtins_max(a, b)


def cast(x, t):
    """x converted to the element or line type t (`cb.cast(x, f16)` is `f16(x)`).

    Used inside `@cube` kernels, per unit. Float to int saturates at the target type's range
    and truncates toward zero (`u8(300.5)` is 255, NaN is 0), identically on every target,
    unlike C (undefined) and Python's unbounded `int()`. Int to int wraps; casting a line to
    a scalar type converts each lane; a scalar cast to a line type is splat."""
    return t(x)


import builtins as _b  # noqa: E402

builtins_round, builtins_abs, builtins_min, builtins_max = _b.round, _b.abs, _b.min, _b.max


# ---- memory, barriers, atomics, plane ops (kernel-only) --------------------------------


def _kernel_only(name, doc=None):
    def f(*args, **kwargs):
        raise RuntimeError(f"cb.{name} can only be used inside a @cube function")
    f.__name__ = name
    f.__doc__ = doc
    return f


def _doc(summary: str, *paragraphs: str) -> str:
    """A docstring from a summary line and paragraphs, wrapped as if written in place."""
    body = [textwrap.fill(" ".join(p.split()), 88, initial_indent="    ",
                          subsequent_indent="    ", break_on_hyphens=False)
            for p in paragraphs]
    return "\n\n".join([summary, *body])


SharedMemory = _kernel_only("SharedMemory", _doc(
    "`cb.SharedMemory(T, n)`: n elements of T shared by the units of one cube.",
    """Kernel-only (calling it outside a `@cube` function raises RuntimeError); CUDA's
    `__shared__`, WGSL's `var<workgroup>`. T is an element type or a line type
    (`Line[f32, 4]`); n must be a positive compile-time int (a literal or a `Comptime`
    parameter), or a tuple of them for a row-major multi-dimensional array indexed
    `s[i, j]` (`cb.SharedMemory(f32, (16, 16))`). It is not initialised: write before
    reading, with `cb.sync_cube()` between one unit's writes and another's reads. Indexing
    is checked like any memory (out-of-bounds reads give 0, writes are dropped). Shared
    memory beyond the target's limit is a `CapabilityError`."""))
LocalArray = _kernel_only("LocalArray", _doc(
    "`cb.LocalArray(T, n)`: n elements of T private to each unit.",
    """Kernel-only (calling it outside a `@cube` function raises RuntimeError). T is an
    element type or a line type; n must be a positive compile-time int, or a tuple of them
    (a row-major multi-dimensional array indexed `a[i, j]`). It is not initialised.
    Indexing is checked (out-of-bounds reads give 0, writes are dropped)."""))
sync_cube = _kernel_only("sync_cube", _doc(
    "`cb.sync_cube()`: a barrier for the units of a cube.",
    """Kernel-only. Each unit of the cube waits until all have reached it; shared-memory
    writes made before it are visible to every unit after it. It must be reached by every
    unit: a barrier under a condition that depends on `UNIT_POS`/`ABSOLUTE_POS` (or values
    derived from them), or after an early `return` that depends on them, is a compile
    error."""))

_ATOMIC = """Kernel-only. `arr` is an array, tensor, shared memory or local array of scalar
elements (not lines); `v` converts to its element type as a store does. Which (op, element
type, memory space) a target supports is its capability table's to say: an unsupported one
is a `CapabilityError` at compile time. In a checked kernel an out-of-bounds index changes
nothing."""


def _atomic_doc(op: str, what: str, ints: bool = False) -> str:
    return _doc(f"`cb.atomic_{op}(arr, i, v)`: atomically {what}; returns the old `arr[i]`.",
                _ATOMIC + (" Integer arrays only." if ints else ""))


_PLANE = """A plane is a group of `PLANE_DIM` units that execute together (a warp or subgroup);
`UNIT_POS_PLANE` is a unit's lane in it, and only the plane's active units (those executing
the call) take part. The CPU runtime has a plane size of 1, so the plane is the unit
itself; the wgpu runtimes use the device's subgroup size and then need a 1-D cube_dim or
one whose x is a multiple of it. A target without plane operations refuses the call with a
`CapabilityError`."""


def _plane_doc(sig: str, what: str, detail: str) -> str:
    return _doc(f"`cb.{sig}`: {what}", "Kernel-only. " + detail, _PLANE)


_VALUE = "v is a numeric value or line (lane by lane; bool is refused)."
_LANE = "v is a numeric value or line; the lane or mask is an integer (converted to u32)."
_BOOL = "c is a bool (a number is compared with 0)."

_DOCS = {
    "atomic_add": _atomic_doc("add", "adds v to `arr[i]`"),
    "atomic_sub": _atomic_doc("sub", "subtracts v from `arr[i]`"),
    "atomic_min": _atomic_doc("min", "sets `arr[i]` to min(arr[i], v)"),
    "atomic_max": _atomic_doc("max", "sets `arr[i]` to max(arr[i], v)"),
    "atomic_and": _atomic_doc("and", "sets `arr[i]` to `arr[i] & v`", True),
    "atomic_or": _atomic_doc("or", "sets `arr[i]` to `arr[i] | v`", True),
    "atomic_xor": _atomic_doc("xor", "sets `arr[i]` to `arr[i] ^ v`", True),
    "atomic_exchange": _atomic_doc("exchange", "stores v into `arr[i]`"),
    "atomic_cas": _doc(
        "`cb.atomic_cas(arr, i, cmp, v)`: atomic compare-and-swap; returns the old `arr[i]`.",
        "Stores v into `arr[i]` if it equals cmp (the returned old value equals cmp exactly "
        "when the swap happened); cmp converts like v. " + _ATOMIC),
    "plane_sum": _plane_doc("plane_sum(v)", "the sum of v over the plane, in every unit.",
                            _VALUE + " The order of the additions is the target's."),
    "plane_prod": _plane_doc("plane_prod(v)", "the product of v over the plane, in every "
                             "unit.", _VALUE),
    "plane_max": _plane_doc("plane_max(v)", "the maximum of v over the plane, in every unit.",
                            _VALUE),
    "plane_min": _plane_doc("plane_min(v)", "the minimum of v over the plane, in every unit.",
                            _VALUE),
    "plane_all": _plane_doc("plane_all(c)", "whether c is true in every unit of the plane.",
                            _BOOL + " Every unit gets the same bool."),
    "plane_any": _plane_doc("plane_any(c)", "whether c is true in any unit of the plane.",
                            _BOOL + " Every unit gets the same bool."),
    "plane_broadcast": _plane_doc(
        "plane_broadcast(v, lane)", "v of the unit at `lane`, in every unit.",
        _LANE + " A lane outside the plane gives each unit its own v (at plane size 1 it is "
        "always v)."),
    "plane_shuffle": _plane_doc(
        "plane_shuffle(v, src)", "v of the unit at lane `src` (each unit names its source).",
        _LANE + " A source lane outside the plane gives the unit its own v."),
    "plane_shuffle_xor": _plane_doc(
        "plane_shuffle_xor(v, mask)", "v of the unit at lane `UNIT_POS_PLANE ^ mask`.",
        _LANE + " The butterfly exchange of tree reductions; a lane outside the plane gives "
        "the unit its own v."),
    "plane_inclusive_sum": _plane_doc(
        "plane_inclusive_sum(v)", "the sum of v over lanes 0..UNIT_POS_PLANE (a prefix sum).",
        _VALUE + " At plane size 1 it is v."),
    "plane_exclusive_sum": _plane_doc(
        "plane_exclusive_sum(v)", "the sum of v over the lanes below UNIT_POS_PLANE.",
        _VALUE + " Lane 0 gets 0; at plane size 1 it is always 0."),
    "plane_inclusive_prod": _plane_doc(
        "plane_inclusive_prod(v)", "the product of v over lanes 0..UNIT_POS_PLANE.",
        _VALUE + " At plane size 1 it is v."),
    "plane_exclusive_prod": _plane_doc(
        "plane_exclusive_prod(v)", "the product of v over the lanes below UNIT_POS_PLANE.",
        _VALUE + " Lane 0 gets 1; at plane size 1 it is always 1."),
}

ATOMICS = ("atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_and", "atomic_or",
           "atomic_xor", "atomic_exchange", "atomic_cas")
PLANE = ("plane_sum", "plane_prod", "plane_max", "plane_min", "plane_all", "plane_any",
         "plane_broadcast", "plane_shuffle", "plane_shuffle_xor", "plane_inclusive_sum",
         "plane_exclusive_sum", "plane_inclusive_prod", "plane_exclusive_prod")
for _n in ATOMICS + PLANE:
    globals()[_n] = _kernel_only(_n, _DOCS[_n])


def is_type(x) -> bool:
    return isinstance(x, (Scalar, Vec))


# Python's number types where the language takes an element type: annotations, casts
PY_TYPES = {int: i32, float: f32, bool: boolean}

"""A Python-semantics oracle for `@cube` kernels: run the kernel's own Python function once per
unit, as ordinary Python, in the style of Triton's interpreter mode or Numba's CUDA simulator.

    from cube.simulate import simulate, lines
    simulate(kernel, cube_count=(3,), cube_dim=(32,), x=lines(xs, 4), out=ys, n=np.int32(5))

Unlike the IR interpreter (`runtimes/interp`), this never looks at the frontend's IR: the
decorated function's code object runs under CPython with the builtins of each unit bound, so a
frontend bug (a builtin read through the module folded away, a tuple assignment translated in
the wrong order, a name read on a path that never assigned it) shows up as a disagreement.

How a unit runs
---------------
`kernel.fn.__code__` is wrapped in a new function (`types.FunctionType`) whose globals are a
copy of the kernel module's globals with, per unit:
- every `cube.lang` builtin (`ABSOLUTE_POS`, `UNIT_POS_X`, ... under any alias) replaced by
  the unit's value;
- every module (`cube`, `cube.lang`, `math`, any other) replaced by a proxy whose attributes
  go through the same mapping (`cb.UNIT_POS_X`, `L.ABSOLUTE_POS`, `cb.sqrt`, `math.exp`,
  `cb.lang.UNIT_POS`);
- the language's functions (`cb.sqrt`, `cb.select`, `cb.min`, `cb.range`, atomics, ...) and
  the builtins the language redefines (`range`, `len`, `int`, `float`, `bool`, `abs`, `min`,
  `max`, `round`, `pow`) replaced by NumPy implementations;
- element types (`f32`, `u32`, `Line[f32, 4]`, a bound type variable `F`) replaced by casts;
- `@cube` helpers replaced by proxies that run the helper's code the same way (its own
  module's globals patched likewise); closures keep their cells (copied, with the same
  mapping applied to their contents).
Units run one after another in order: cube by cube (x fastest, then y, then z), and within a
cube unit by unit (x fastest). Kernels must not race.

Semantic decisions (docs/language.md is the reference; where it says "like Python" this is
Python, where it defines kernel semantics this follows them with NumPy types)
-------------------------------------------------------------------------------------------
- Builtins are `np.uint32` (docs: all builtins and lengths are u32), linear forms as in the
  docs: `UNIT_POS = x + y*dx + z*dx*dy`, `CUBE_POS` likewise over the cube count,
  `ABSOLUTE_POS = CUBE_POS * CUBE_DIM + UNIT_POS`, `ABSOLUTE_POS_X = CUBE_POS_X * CUBE_DIM_X +
  UNIT_POS_X`. `PLANE_DIM` is `plane_dim` (default 1, pass `rt.plane_size` to compare with a
  runtime) and `UNIT_POS_PLANE = UNIT_POS % plane_dim` (planes are runs of consecutive units).
- Runtime values are NumPy scalars of the kernel's types (`np.float32`, `np.int32`,
  `np.uint32`, ...), so integer arithmetic wraps and f32 rounds per operation. NumPy 2's weak
  Python scalars (NEP 50) give the language's weak literals: `x + 1` keeps x's type, a float
  literal with an f32 is f32, `u + -1` with `u: u32` raises (docs: an error), and `UNIT_POS >
  -1` is True (docs: comparisons of signed with unsigned are exact).
- Compile-time values (literals, `Comptime` parameters, `line.size`, `t.rank()`, unrolled
  counters) are plain Python numbers, evaluated in Python exactly as the frontend folds them
  (docs: "evaluated in Python"). A NumPy scalar given for a `Comptime` parameter is turned into
  the Python number (`.item()`), which is how the frontend combines it with runtime values.
  Intrinsics called with only Python numbers run the `cube.lang` fallback, as the frontend does.
- Not modelled: a name assigned a literal and then reassigned in a runtime `if`/loop becomes
  an i32/f32 runtime variable in the kernel (docs: "seeded with the value it holds then"); here
  it stays a Python int (no wrap) / float (f64) until combined with a NumPy value. Likewise
  operations the language rejects (mixing signed and unsigned, an int with a float literal)
  follow NumPy's promotion here instead of raising; the oracle is meant for valid kernels.
- `/` is true division; `//` and `%` are floor division / Python's modulo on every type (docs:
  "follow Python"; NumPy's scalar `//` and `%` do). Integer division or modulo by zero gives 0
  (docs). `**` is NumPy's power (docs: a constant exponent 0..4 multiplies; the result agrees
  to rounding).
- `range(a, b, s)` and `cb.range` without `unroll` yield NumPy counters of the documented
  type: u32 when counting up over non-negative compile-time bounds, i32 when counting down or
  a bound is negative, the bounds' promoted type when one is a runtime value.
  `cb.range(..., unroll=True)` and tuples yield Python ints (compile-time values).
- Control flow, `break`/`continue`/`return`, early returns in helpers, tuple assignment,
  augmented assignment: CPython's. A name read on a path that never assigned it raises
  `UnboundLocalError`; a helper that falls off its end returns None. These are reported as
  `SimulationError` with the unit.
- `x if c else y`, `and`, `or`: Python's (docs: only the deciding operand is evaluated, and
  `p or q` on ints is `p` when `p != 0`, else `q`).
- Memory is checked (docs "Checked mode"): a read out of bounds gives 0 (a zero line), a write
  out of bounds is dropped, a negative index is out of bounds (no wrap-around). Indices must be
  integers (Python or NumPy ints).
- Stores convert like the kernel (docs: within a kind, f32 into f16, i64 into i32 wrapping; a
  scalar splats into a line); a float into int memory or an int into float memory raises
  unless it is a Python literal that converts (an int literal into float memory). A Python
  int that does not fit int memory wraps (it is a seeded i32 runtime variable in the kernel).
- Lines are 1-D NumPy vectors (`LineValue`) of their line size, at line size 1 too (the
  language's `Line[T, 1]` is T; here a 1-vector, so `v.size` is 1 and `v[0]` works; storing a
  1-vector into scalar memory stores its lane). Lane `k` is `v[k]`; `Line[f32, 4](x)` splats. A lane
  index out of range raises (IndexError; a negative one wraps, as NumPy's): the kernel refuses
  a compile-time one and reads 0 for a runtime one, so keep generated lane indices in range.
  Lines are values in the kernel: `w = v; w += v` leaves v alone (LineValue's augmented
  operators build new vectors). A lane assignment `w[k] = x` writes into the vector, so after
  `w = v` it changes v too (the kernel rebinds w only): the simulator cannot see the alias.
- Casts `f32(x)`, `cb.cast(x, t)`, `int(x)` (i32), `float(x)` (f32), `bool(x)`: C-style
  conversion (int to int wraps, float to int truncates and saturates, NaN gives 0, like the IR
  interpreter), Python numbers included. The kernel refuses a *literal* that does not fit
  (`u32(-4)`), but a Python number here may stand for a runtime value: `p if c else -4`
  gives the Python int -4 here, while the kernel types the ternary from both sides (a runtime
  i32), so `u32(p if c else -4)` is valid and wraps. bf16 is not supported (refused).
- Arguments: arrays must hold the declared element type; a scalar is converted to its
  declared type and range-checked, never wrapped (docs: as a launch checks it).
- Math (`cb.sqrt`, `math.exp`, ...): NumPy in the argument's dtype; `erf` through `math.erf` in
  f64 rounded to the dtype; `round` is round-half-to-even (`np.rint`); `rsqrt` is 1/sqrt;
  `fma` is computed in f64 and rounded once; `min`/`max`/`clamp`/`select` pair their operands
  like the kernel (a Python literal takes the other side's type) and return NumPy values;
  min/max are Python's on each lane (`b if b < a else a`: a NaN first is kept).
  Float-only functions on an int raise (docs: "needs a float argument").
- Tensors: an n-D C-contiguous NumPy array; `t.shape(d)`/`t.stride(d)` are u32 in scalar
  elements (an out-of-range dimension gives 0 when d is a runtime value), `t.rank()` is a
  Python int, `t[i]` indexes the flat buffer (in lines for a line tensor), `t.len()` is the
  buffer's length in elements (lines).
- Races are refused (`SimulationError`): units run one at a time here but together on a
  device, and the simulator has no barrier (`sync_cube` is refused), so an element of an
  argument that one unit stores and another unit loads or stores (through any argument over
  the same NumPy memory) has no defined value. Atomics are exempt. The message names both
  units and the element.
- Atomics run sequentially (each unit in turn): `cb.atomic_add(a, i, v)` etc. return the old
  value; out of bounds they are dropped and return 0. `cb.LocalArray(T, n)` is a fresh array
  per call; reading an element no write has set raises `UninitialisedRead` (docs: it is not
  initialised, so a device reads anything there). `cb.SharedMemory`, `cb.sync_cube` and
  plane operations are refused with `SimulationUnsupported` before anything runs (they need
  units running together).
- Floating-point warnings (overflow, invalid) are silenced: results are IEEE values.
"""
from __future__ import annotations

import builtins
import math
import types
import typing

import numpy as np

from cube_ir.interpreter import storage_of
from cube_ir.types import SCALARS, Scalar, Vec, bf16, boolean, f32, i32, promote_scalars

from . import lang
from .kernel import CubeFunction

__all__ = ["SimulationError", "SimulationUnsupported", "lines", "Lines", "simulate"]

_UNSUPPORTED_NAMES = frozenset({"SharedMemory", "sync_cube"} | {"plane_" + op for op in (
    "sum", "prod", "max", "min", "all", "any", "broadcast", "shuffle", "shuffle_xor",
    "inclusive_sum", "exclusive_sum", "inclusive_prod", "exclusive_prod")})


class SimulationError(Exception):
    """A kernel failed while running as Python (the unit is in the message)."""


class SimulationUnsupported(SimulationError):
    """The kernel uses something units running one by one cannot model."""


class UninitialisedRead(SimulationError):
    """A read of a local array's element that no write set: undefined in the language."""


# ---- arguments ---------------------------------------------------------------------------

class Lines:
    """A NumPy array passed to an `Array[Line[T]]` / `Tensor[Line[T]]` parameter as lines of
    `n` elements (the simulator's `buf.lines(n)`)."""

    def __init__(self, array: np.ndarray, n: int):
        self.array, self.n = array, int(n)


def lines(array: np.ndarray, n: int) -> Lines:
    return Lines(array, n)


def _np_dtype(t: Scalar) -> np.dtype:
    if t == bf16:
        raise SimulationUnsupported("bf16 is not supported by the simulator")
    return t.np


def _scalar_of(dtype) -> Scalar:
    for t in SCALARS.values():
        if t != bf16 and t.np == np.dtype(dtype):
            return t
    raise SimulationError(f"no cube element type for dtype {dtype}")


def _zero(dtype, lanes):
    return np.zeros(lanes, dtype).view(LineValue) if lanes is not None else \
        np.dtype(dtype).type(0)


def _is_py_number(x) -> bool:
    return isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)


def _is_np(x) -> bool:
    return isinstance(x, (np.generic, np.ndarray))


class LineValue(np.ndarray):
    """A line in a simulated kernel: a NumPy vector with value semantics for augmented
    assignment (`w += v` rebinds w to a new vector, as the kernel does, instead of writing
    into the vector that `w` shares with `v` after `w = v`)."""

    def __iadd__(self, o):
        return self + o

    def __isub__(self, o):
        return self - o

    def __imul__(self, o):
        return self * o

    def __itruediv__(self, o):
        return self / o

    def __ifloordiv__(self, o):
        return self // o

    def __imod__(self, o):
        return self % o

    def __ipow__(self, o):
        return self ** o

    def __iand__(self, o):
        return self & o

    def __ior__(self, o):
        return self | o

    def __ixor__(self, o):
        return self ^ o

    def __ilshift__(self, o):
        return self << o

    def __irshift__(self, o):
        return self >> o


def _scalarise(a):
    """A 0-d array back to a NumPy scalar; a vector as a LineValue."""
    if isinstance(a, np.ndarray):
        if a.ndim == 0:
            return a[()]
        if type(a) is not LineValue:
            return a.view(LineValue)
    return a


def _to_index(idx) -> int:
    if isinstance(idx, np.ndarray):
        if idx.size != 1:
            raise TypeError(f"an index must be an integer, got a line of {idx.size}")
        idx = idx.reshape(())[()]
    if isinstance(idx, (bool, np.bool_)) or not isinstance(idx, (int, np.integer)):
        raise TypeError(f"an index must be an integer, got {type(idx).__name__} {idx!r}")
    return int(idx)


def _wrap_int(v: int, dtype) -> np.generic:
    dt = np.dtype(dtype)
    bits = dt.itemsize * 8
    v &= (1 << bits) - 1
    if dt.kind == "i" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return dt.type(v)


def _convert_store(value, dtype, lanes):
    """A value stored into memory of `dtype` (a line of `lanes` if not None)."""
    dt = np.dtype(dtype)
    if _is_py_number(value):
        if isinstance(value, bool):
            if dt.kind != "b":
                raise TypeError(f"cannot store the bool {value} into {dt} memory")
            v = np.bool_(value)
        elif isinstance(value, int):
            if dt.kind == "b":
                raise TypeError(f"cannot store the number {value} into bool memory")
            v = dt.type(value) if dt.kind == "f" else _wrap_int(value, dt)
        else:
            if dt.kind != "f":
                raise TypeError(f"cannot store the float literal {value} into {dt} memory")
            v = dt.type(value)
        return np.full(lanes, v, dt) if lanes is not None else v
    a = np.asarray(value)
    vk, k = a.dtype.kind, dt.kind
    same = vk == k or (vk in "iu" and k in "iu")
    if not same:
        raise TypeError(f"cannot store a {a.dtype} value into {dt} memory; cast it explicitly")
    with np.errstate(all="ignore"):
        a = a.astype(dt)
    if lanes is None:
        if a.size != 1:
            raise TypeError(f"cannot store a line of {a.size} into scalar memory")
        return a.reshape(())[()]
    if a.ndim == 0 or a.size == 1:
        return np.full(lanes, a.reshape(-1)[0], dt)
    if a.shape != (lanes,):
        raise TypeError(f"cannot store a line of {a.size} into lines of {lanes}")
    return a


class _Races:
    """Which unit stored and which unit(s) loaded each element of the arguments' memory in
    one `simulate` call (per NumPy storage and element size, so aliased arguments share it);
    `unit` is the unit running now, as (cube, unit) positions."""

    def __init__(self):
        self.unit: tuple = ()
        self._by: dict = {}

    def track(self, a: np.ndarray) -> tuple:
        """(stored, loaded, first element of a in them) for an argument array a."""
        key, at, _ = storage_of(a)
        hit = self._by.get(key)
        if hit is None:
            hit = self._by[key] = ({}, {})
        return hit[0], hit[1], at

    def check(self, arr: SimArray, i: int, store: bool) -> None:
        stored, loaded, at = arr.track
        width = arr.lanes or 1
        me = self.unit
        for e in builtins.range(at + i * width, at + (i + 1) * width):
            other = stored.get(e)
            how = "stored"
            if (other is None or other == me) and store:
                seen = loaded.get(e)
                if seen is not None and seen != me:
                    other, how = (seen if seen != "many" else None), "loaded"
                    if other is None:
                        other = "several units"
            if other is not None and other != me:
                who = other if isinstance(other, str) else \
                    f"unit {other[1]} of cube {other[0]}"
                raise SimulationError(
                    f"data race: unit {me[1]} of cube {me[0]} "
                    f"{'stores to' if store else 'loads'} {arr.name}[{i}], which {who} "
                    f"{how} (units run together on a device: give each element one unit, "
                    f"or use atomics)")
            if store:
                stored[e] = me
            else:
                seen = loaded.get(e)
                loaded[e] = me if seen is None or seen == me else "many"


class SimArray:
    """A checked view of a NumPy buffer: what an Array/Tensor parameter or a local array is."""

    def __init__(self, flat: np.ndarray, lanes: int | None, kind: str = "array",
                 shape: tuple = (), strides: tuple = (), name: str = "",
                 races: _Races | None = None):
        self.flat, self.lanes, self.kind, self.name = flat, lanes, kind, name
        self._shape, self._strides = shape, strides
        self.n = flat.size // (lanes or 1)
        self.races = races
        self.track = races.track(flat) if races is not None else None
        self.unset = None  # a local array: which elements were never written (reads refused)

    # indexing (checked)
    def _linear(self, idx: tuple):
        """NumPy's element of a tuple index (a tensor, or a local array of several sizes),
        or None when an index lies outside its own dimension (out of bounds)."""
        if not self._dimensioned():
            raise TypeError(f"the {self.kind} '{self.name}' takes one linear index")
        if len(idx) != len(self._shape):
            raise IndexError(f"the {self.kind} '{self.name}' has {len(self._shape)} "
                             f"dimensions, indexed with {len(idx)}")
        at = 0
        for i, n, st in zip(idx, self._shape, self._strides):
            i = _to_index(i)
            if not 0 <= i < n:
                return None
            at += i * st
        return at

    def __getitem__(self, idx):
        i = self._linear(idx) if isinstance(idx, tuple) else _to_index(idx)
        if i is None or not 0 <= i < self.n:
            return _zero(self.flat.dtype, self.lanes)
        if self.races is not None:
            self.races.check(self, i, False)
        if self.unset is not None and self.unset[i]:
            raise UninitialisedRead(f"reads element {i} of the local array '{self.name}' "
                                    f"before any write: cb.LocalArray is not initialised, "
                                    f"its contents are undefined (a target may read anything)")
        if self.lanes is None:
            return self.flat[i]
        return self.flat[i * self.lanes:(i + 1) * self.lanes].copy().view(LineValue)

    def __setitem__(self, idx, value):
        i = self._linear(idx) if isinstance(idx, tuple) else _to_index(idx)
        v = _convert_store(value, self.flat.dtype, self.lanes)
        if i is None or not 0 <= i < self.n:
            return
        if self.races is not None:
            self.races.check(self, i, True)
        if self.unset is not None:
            self.unset[i] = False
        if self.lanes is None:
            self.flat[i] = v
        else:
            self.flat[i * self.lanes:(i + 1) * self.lanes] = v

    # methods of the language
    def len(self):
        if self.kind == "local" and self._shape:
            raise TypeError(f"the {self.kind} '{self.name}' has {len(self._shape)} "
                            f"dimensions: write shape(d) for a size")
        return np.uint32(self.n)

    buffer_len = len

    def __len__(self):
        return self.n

    def line_size(self):
        return self.lanes or 1

    def rank(self):
        self._tensor("rank()")
        return len(self._shape)

    @property
    def shape(self):
        """`t.shape(d)`, and NumPy's `t.shape[d]`."""
        return _Shape(self)

    def stride(self, d):
        return self._dim(self._strides, d, "stride")

    def _dimensioned(self) -> bool:
        """A tensor, or a local array allocated with a tuple of sizes (those have shapes)."""
        return self.kind == "tensor" or (self.kind == "local" and bool(self._shape))

    def _tensor(self, what):
        if not self._dimensioned():
            raise TypeError(f"{what} is only defined on tensors, not the {self.kind} "
                            f"'{self.name}'")

    def _dim(self, table, d, what):
        self._tensor(f"{what}(d)")
        if _is_py_number(d):
            d = int(d)
            if d < 0:
                d += len(table)
            if not 0 <= d < len(table):
                raise IndexError(f"dimension {d} is out of range for a rank-{len(table)} "
                                 f"tensor")
            return np.uint32(table[d])
        d = _to_index(d) & 0xFFFFFFFF
        return np.uint32(table[d] if d < len(table) else 0)

    def __repr__(self):
        return f"<sim {self.kind} {self.name} {self.flat.dtype} x{self.lanes or 1} n={self.n}>"


class _Shape:
    __slots__ = ("arr",)

    def __init__(self, arr: SimArray):
        self.arr = arr

    def __call__(self, d):
        return self.arr._dim(self.arr._shape, d, "shape")

    __getitem__ = __call__


# ---- types and casts ---------------------------------------------------------------------

def _cast_value(x, t: Scalar, lanes: int | None = None):
    """`t(x)` in a kernel: a C-style conversion of runtime values, a checked literal."""
    dt = _np_dtype(t)
    if _is_py_number(x):
        if isinstance(x, bool):
            if t != boolean and not t.is_int and not t.is_float:
                raise TypeError(f"cannot cast the bool {x} to {t}")
            v = dt.type(x)
        elif isinstance(x, int):
            if t.is_bool:
                raise TypeError(f"cannot combine the number {x} with a bool value")
            v = _wrap_int(x, dt) if t.is_int else dt.type(x)
        elif t.is_float:
            v = dt.type(x)
        else:
            return _cast_value(np.float64(x), t, lanes)
        return _scalarise(np.full(lanes, v, dt)) if lanes is not None else v
    if isinstance(x, SimArray):
        raise TypeError(f"cannot cast an array to {t}")
    a = np.asarray(x)
    with np.errstate(all="ignore"):
        if a.dtype.kind == "f" and dt.kind in "iu":
            info = np.iinfo(dt)
            a = np.where(np.isnan(a), 0, np.clip(np.trunc(a.astype(np.float64)),
                                                 info.min, info.max))
            r = a.astype(dt)
        elif dt.kind == "b":
            r = a != 0
        else:
            r = a.astype(dt)
    if lanes is not None:
        if r.ndim == 0 or r.size == 1:
            return _scalarise(np.full(lanes, r.reshape(-1)[0], dt))
        if r.shape != (lanes,):
            raise TypeError(f"cannot cast a line of {r.size} to a line of {lanes}")
    return _scalarise(r)


class SimType:
    """An element type in a simulated kernel: calling it casts."""

    def __init__(self, t: Scalar, lanes: int | None = None):
        self.t, self.lanes = t, lanes

    def __call__(self, x):
        return _cast_value(x, self.t, self.lanes)

    @property
    def np(self):
        return _np_dtype(self.t)

    def __repr__(self):
        return f"sim {self.t}" + (f" x{self.lanes}" if self.lanes is not None else "")


class SimLine:
    """`Line[T, n]` in a simulated kernel: a cast that splats."""

    def __class_getitem__(cls, item):
        if not isinstance(item, tuple):
            return lang.Line[_unsim_type(item)]
        elem, n = item
        return SimType(_resolve_type(elem), int(n))


def _unsim_type(t):
    return t.t if isinstance(t, SimType) else t


def _resolve_type(t) -> Scalar:
    t = _unsim_type(t)
    if isinstance(t, lang.LineSpec):
        raise TypeError("a line type has no single element type here")
    if isinstance(t, type) and t in lang.PY_TYPES:
        return lang.PY_TYPES[t]
    if isinstance(t, Scalar):
        return t
    raise TypeError(f"{t!r} is not an element type")


def _resolve_type_lanes(t):
    if isinstance(t, SimType):
        return t.t, t.lanes
    if isinstance(t, lang.LineSpec):
        return _resolve_type(t.elem), t.lanes
    if isinstance(t, Vec):
        return t.elem, t.lanes
    return _resolve_type(t), None


# ---- arithmetic helpers ------------------------------------------------------------------

def _dtype_of(x):
    return x.dtype if _is_np(x) else None


def _pair(a, b):
    """Two operands converted to one NumPy dtype like the kernel pairs them (a Python literal
    takes the other side's type)."""
    da, db = _dtype_of(a), _dtype_of(b)
    if da is None and db is None:
        a, b = np.asarray(a), np.asarray(b)
        return a, b
    if da is None:
        a = _literal_as(a, db)
    elif db is None:
        b = _literal_as(b, da)
    else:
        ta, tb = _scalar_of(da), _scalar_of(db)
        try:
            t = promote_scalars(ta, tb)
        except TypeError:
            t = _scalar_of(np.result_type(da, db))
        a, b = np.asarray(a).astype(t.np), np.asarray(b).astype(t.np)
    return np.asarray(a), np.asarray(b)


def _literal_as(x, dtype):
    dt = np.dtype(dtype)
    if isinstance(x, float) and dt.kind != "f":
        raise TypeError(f"cannot combine the float literal {x} with {dt}")
    if isinstance(x, int) and not isinstance(x, bool) and dt.kind in "iu":
        info = np.iinfo(dt)
        if not info.min <= x <= info.max:
            raise OverflowError(f"the literal {x} does not fit in {dt}")
    return dt.type(x)


def _math1(name, npfn, float_only=True):
    pyfn = getattr(lang, name)

    def f(x):
        if _is_py_number(x):
            return pyfn(x)
        a = np.asarray(x)
        if float_only and a.dtype.kind != "f":
            raise TypeError(f"{name} needs a float argument, got {a.dtype}; cast it first")
        with np.errstate(all="ignore"):
            return _scalarise(npfn(a).astype(a.dtype))
    f.__name__ = name
    return f


def _erf(a):
    return np.vectorize(math.erf, otypes=[np.float64])(a.astype(np.float64))


def _rsqrt(a):
    return a.dtype.type(1) / np.sqrt(a)


def _abs(x):
    if _is_py_number(x):
        return builtins.abs(x)
    a = np.asarray(x)
    if a.dtype.kind in "ub":
        return x
    with np.errstate(all="ignore"):
        return _scalarise(np.abs(a))


def _minmax(name, npfn, pyfn):
    def two(a, b):
        if _is_py_number(a) and _is_py_number(b):
            return pyfn(a, b)
        x, y = _pair(a, b)
        return _scalarise(npfn(x, y))

    def f(a, b, *more):  # more than two: folded left to right, as the kernel's
        acc = two(a, b)
        for v in more:
            acc = two(acc, v)
        return acc
    f.__name__ = name
    return f


# Python's min/max on each lane: the second operand only where it is strictly smaller
# (larger), so a NaN or a signed zero that comes first is kept, as the kernel's
_min = _minmax("min", lambda x, y: np.where(y < x, y, x), builtins.min)
_max = _minmax("max", lambda x, y: np.where(y > x, y, x), builtins.max)


def _nonfinite(name):
    pyfn, npfn = getattr(math, name), getattr(np, name)

    def f(x):
        if _is_py_number(x):
            return pyfn(x)
        a = np.asarray(x)
        if a.dtype.kind == "b":
            raise TypeError(f"{name} needs a number, got bool")
        return _scalarise(npfn(a))
    f.__name__ = name
    return f


def _py_minmax(pyfn, simfn):
    def f(*args, **kwargs):
        if len(args) == 2 and not kwargs and (_is_np(args[0]) or _is_np(args[1])):
            return simfn(*args)
        return pyfn(*args, **kwargs)
    return f


def _pow(x, y):
    if _is_py_number(x) and _is_py_number(y):
        return x ** y
    if _is_np(x) and _is_py_number(y) and float(y) == int(y) and 0 <= int(y) <= 4:
        acc = np.asarray(x).dtype.type(1) if int(y) == 0 else x
        with np.errstate(all="ignore"):
            for _ in builtins.range(int(y) - 1):
                acc = acc * x
        return acc
    a, b = _pair(x, y)
    if a.dtype.kind != "f":
        raise TypeError(f"'**' on {a.dtype} needs a float type or a small constant exponent")
    with np.errstate(all="ignore"):
        return _scalarise(np.power(a, b))


def _math2(name, npfn):
    """A two-argument float function (atan2, hypot, fmod, copysign) on NumPy values in their
    promoted dtype, Python's on two Python numbers."""
    pyfn = getattr(lang, name)

    def f(x, y):
        if _is_py_number(x) and _is_py_number(y):
            return pyfn(x, y)
        a, b = _pair(x, y)
        if a.dtype.kind != "f":
            raise TypeError(f"{name} needs float arguments, got {a.dtype}; cast them first")
        with np.errstate(all="ignore"):
            return _scalarise(npfn(a, b).astype(a.dtype))
    f.__name__ = name
    return f


def _fma(a, b, c):
    if _is_py_number(a) and _is_py_number(b) and _is_py_number(c):
        return lang.fma(a, b, c)
    ref = next(v for v in (a, b, c) if _is_np(v))
    dt = np.asarray(ref).dtype
    vals = [np.asarray(v if _is_np(v) else _literal_as(v, dt)) for v in (a, b, c)]
    t = dt
    for v in vals:
        t = np.result_type(t, v.dtype)
    if t.kind != "f":
        raise TypeError("fma needs float arguments")
    x, y, z = (v.astype(np.float64) for v in vals)
    with np.errstate(all="ignore"):
        return _scalarise((x * y + z).astype(t))


def _clamp(x, lo, hi):
    if _is_py_number(x) and _is_py_number(lo) and _is_py_number(hi):
        return lang.clamp(x, lo, hi)
    return _min(_max(x, lo), hi)


def _truth(c):
    if isinstance(c, np.ndarray) and c.size != 1:
        return c.astype(bool) if c.dtype.kind == "b" else c != 0
    return np.bool_(bool(np.asarray(c).reshape(-1)[0]) if _is_np(c) else bool(c))


def _select(cond, a, b):
    if _is_py_number(cond):
        return a if cond else b
    if not _is_np(a) and not _is_np(b):
        a = _cast_value(a, i32 if isinstance(a, int) and not isinstance(a, bool) else (
            f32 if isinstance(a, float) else boolean))
    x, y = _pair(a, b)
    c = _truth(cond)
    return _scalarise(np.where(c, x, y))


def _cast(x, t):
    elem, lanes = _resolve_type_lanes(t)
    return _cast_value(x, elem, lanes)


def _py_int(x, *rest):
    if _is_np(x) and not rest:
        return _cast_value(x, i32)
    return builtins.int(x, *rest)


def _py_float(x=0.0):
    if _is_np(x):
        return _cast_value(x, f32)
    return builtins.float(x)


def _py_bool(x=False):
    if _is_np(x):
        return _cast_value(x, boolean)
    return builtins.bool(x)


def _py_len(x):
    if isinstance(x, SimArray):
        return x.len()
    return builtins.len(x)


def _py_round(x, *nd):
    if _is_np(x) and not nd:
        return _math1("round", np.rint)(x)
    return builtins.round(x, *nd)


def _range(*args, unroll: bool = False):
    """`range` / `cb.range` in a kernel (see the module docstring for the counter's type)."""
    if not 1 <= builtins.len(args) <= 3:
        raise TypeError("range takes 1 to 3 arguments")
    start, end, step = (0, args[0], 1) if builtins.len(args) == 1 else \
        (args[0], args[1], args[2] if builtins.len(args) == 3 else 1)
    if _is_np(step):
        raise TypeError("the step of a range must be known at compile time")
    if step == 0:
        raise ValueError("range step must not be zero")
    if unroll:
        if _is_np(start) or _is_np(end):
            raise TypeError("an unrolled range needs compile-time bounds")
        return builtins.range(builtins.int(start), builtins.int(end), builtins.int(step))
    for v in (start, end):
        if _is_np(v):
            if np.asarray(v).dtype.kind not in "iu":
                raise TypeError(f"range bounds must be integers, got {np.asarray(v).dtype}")
        elif isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"range bounds must be integers, got {v!r}")
    if not _is_np(start) and not _is_np(end):
        dt = np.dtype(np.uint32 if step > 0 and start >= 0 and end >= 0 else np.int32)
    else:
        s, e = _pair(start, end)
        dt = s.dtype
    return _typed_range(builtins.int(start), builtins.int(end), builtins.int(step), dt)


def _typed_range(start, end, step, dt):
    for v in builtins.range(start, end, step):
        yield _wrap_int(v, dt)


def _local_array(t, n):
    elem, lanes = _resolve_type_lanes(t)
    if _is_np(n) and not isinstance(n, np.integer):
        raise TypeError("the size of cb.LocalArray must be known at compile time")
    dims = tuple(builtins.int(d) for d in n) if isinstance(n, tuple) else (builtins.int(n),)
    if not dims or min(dims) <= 0:
        raise ValueError(f"the size of cb.LocalArray must be a positive integer or a tuple "
                         f"of them, got {n}")
    size = math.prod(dims)
    multi = len(dims) > 1  # a tuple index, row-major, as the kernel's (frontend/indexing)
    strides = tuple(math.prod(dims[k + 1:]) for k in range(len(dims)))
    a = SimArray(np.zeros(size * (lanes or 1), _np_dtype(elem)), lanes, "local",
                 shape=dims if multi else (), strides=strides if multi else (), name="local")
    a.unset = np.ones(size, bool)  # not initialised (docs): a read before a write is refused
    return a


def _atomic(op):
    def f(arr, idx, *vals):
        want = 2 if op == "cas" else 1
        if not isinstance(arr, SimArray):
            raise TypeError(f"the first argument of cb.atomic_{op} must be an array")
        if builtins.len(vals) != want:
            raise TypeError(f"cb.atomic_{op} takes {want + 2} arguments")
        if arr.lanes is not None:
            raise TypeError("atomics work on scalar elements")
        dt = arr.flat.dtype
        vals = [_convert_store(v, dt, None) for v in vals]
        i = _to_index(idx)
        if not 0 <= i < arr.n:
            return dt.type(0)
        old = arr.flat[i]
        v = vals[-1]
        with np.errstate(all="ignore"):
            new = {"add": lambda: old + v, "sub": lambda: old - v,
                   # NaN ignored, as every target's float atomics (docs/language.md)
                   "min": lambda: np.fmin(old, v), "max": lambda: np.fmax(old, v),
                   "and": lambda: old & v, "or": lambda: old | v, "xor": lambda: old ^ v,
                   "exchange": lambda: v,
                   "cas": lambda: v if old == vals[0] else old}[op]()
        arr.flat[i] = new
        return old
    f.__name__ = "atomic_" + op
    return f


def _unsupported(name):
    def f(*args, **kwargs):
        raise SimulationUnsupported(f"cb.{name} is not supported by the simulator (units run "
                                    f"one at a time)")
    f.__name__ = name
    return f


_SIM_FUNCS: dict[str, typing.Callable] = {
    "sqrt": _math1("sqrt", np.sqrt), "rsqrt": _math1("rsqrt", _rsqrt),
    "exp": _math1("exp", np.exp), "log": _math1("log", np.log),
    "log1p": _math1("log1p", np.log1p), "sin": _math1("sin", np.sin),
    "cos": _math1("cos", np.cos), "tanh": _math1("tanh", np.tanh),
    "erf": _math1("erf", _erf), "floor": _math1("floor", np.floor),
    "ceil": _math1("ceil", np.ceil), "round": _math1("round", np.rint),
    "tan": _math1("tan", np.tan), "asin": _math1("asin", np.arcsin),
    "acos": _math1("acos", np.arccos), "atan": _math1("atan", np.arctan),
    "sinh": _math1("sinh", np.sinh), "cosh": _math1("cosh", np.cosh),
    "asinh": _math1("asinh", np.arcsinh), "acosh": _math1("acosh", np.arccosh),
    "atanh": _math1("atanh", np.arctanh), "log2": _math1("log2", np.log2),
    "log10": _math1("log10", np.log10), "exp2": _math1("exp2", np.exp2),
    "expm1": _math1("expm1", np.expm1), "trunc": _math1("trunc", np.trunc),
    "atan2": _math2("atan2", np.arctan2), "hypot": _math2("hypot", np.hypot),
    "fmod": _math2("fmod", np.fmod), "copysign": _math2("copysign", np.copysign),
    "abs": _abs, "min": _min, "max": _max, "pow": _pow, "fma": _fma, "clamp": _clamp,
    "isnan": _nonfinite("isnan"), "isinf": _nonfinite("isinf"),
    "isfinite": _nonfinite("isfinite"),
    "select": _select, "cast": _cast, "comptime": lambda v: v, "range": _range,
    "LocalArray": _local_array, "SharedMemory": _unsupported("SharedMemory"),
    "sync_cube": _unsupported("sync_cube"),
}
for _op in ("add", "sub", "min", "max", "and", "or", "xor", "exchange", "cas"):
    _SIM_FUNCS["atomic_" + _op] = _atomic(_op)
for _name in _UNSUPPORTED_NAMES - {"SharedMemory", "sync_cube"}:
    _SIM_FUNCS[_name] = _unsupported(_name)

# by identity of the real objects a kernel may call
_BY_ID: dict[int, typing.Callable] = {}
for _name, _fn in _SIM_FUNCS.items():
    _BY_ID[id(getattr(lang, _name))] = _fn
for _name in ("sqrt", "exp", "log", "log1p", "sin", "cos", "tanh", "erf", "floor", "ceil",
              "pow", "isnan", "isinf", "isfinite", "tan", "asin", "acos", "atan", "sinh",
              "cosh", "asinh", "acosh", "atanh", "log2", "log10", "exp2", "expm1", "trunc",
              "atan2", "hypot", "fmod", "copysign"):
    _BY_ID[id(getattr(math, _name))] = _SIM_FUNCS[_name]
_BY_ID[id(math.fabs)] = _abs

_SIM_BUILTINS = {
    "range": _range, "len": _py_len, "int": _py_int, "float": _py_float, "bool": _py_bool,
    "abs": _abs, "min": _py_minmax(builtins.min, _min), "max": _py_minmax(builtins.max, _max),
    "round": _py_round, "pow": _pow,
}
_BY_ID.update({id(getattr(builtins, k)): v for k, v in _SIM_BUILTINS.items()})
_KEEP = {id(x) for x in (lang.Array, lang.Tensor, lang.Comptime)}


# ---- the per-unit environment ------------------------------------------------------------

class _Unit:
    """The values of the builtins for the unit now running."""

    def __init__(self):
        self.values: dict[str, np.uint32] = {}


class _ModuleProxy:
    """A module seen from a simulated kernel: its attributes go through the mapping."""

    def __init__(self, env: _Env, module: types.ModuleType):
        object.__setattr__(self, "_env", env)
        object.__setattr__(self, "_module", module)

    def __getattr__(self, name):
        return self._env.sim(getattr(self._module, name))

    def __repr__(self):
        return f"<sim proxy of {self._module!r}>"


class _BuiltinRef:
    """A builtin read through a module proxy resolves to the unit's value."""


class _Helper:
    """A `@cube` helper called from a simulated kernel: its code runs under patched globals."""

    def __init__(self, env: _Env, cf: CubeFunction):
        self.env, self.cf, self._fn = env, cf, None

    def __call__(self, *args, **kwargs):
        if self.cf.is_kernel:
            raise TypeError(f"'{self.cf.__name__}' is a launchable kernel; kernels cannot be "
                            f"called from kernels")
        if self._fn is None:
            self._fn = self.env.function(self.cf.fn)
        return self._fn(*args, **kwargs)


class _Env:
    def __init__(self, tvars: dict):
        self.unit = _Unit()
        self.tvars = tvars  # TypeVar name -> Scalar
        self._globals: dict[int, dict] = {}
        self._builtin_slots: list = []  # (dict, key, name) and (cell, None, name)
        self._proxies: dict[int, object] = {}
        self.builtins = dict(vars(builtins))
        self.builtins.update(_SIM_BUILTINS)

    def sim(self, v):
        """What a kernel sees for the Python object `v`."""
        if isinstance(v, lang.BuiltinVar):
            return self.unit.values[v.name]
        f = _BY_ID.get(id(v))
        if f is not None:
            return f
        if id(v) in _KEEP:
            return v
        if isinstance(v, Scalar):
            return SimType(v)
        if isinstance(v, Vec):
            return SimType(v.elem, v.lanes)
        if isinstance(v, lang.LineSpec):
            if v.lanes is None:
                return v
            return SimType(_resolve_type(v.elem), v.lanes)
        if v is lang.Line:
            return SimLine
        if isinstance(v, typing.TypeVar) and v.__name__ in self.tvars:
            return SimType(self.tvars[v.__name__])
        if isinstance(v, (types.ModuleType, CubeFunction)):
            p = self._proxies.get(id(v))
            if p is None:
                p = _ModuleProxy(self, v) if isinstance(v, types.ModuleType) else \
                    _Helper(self, v)
                self._proxies[id(v)] = p
            return p
        return v

    def _patched_globals(self, g: dict) -> dict:
        d = self._globals.get(id(g))
        if d is None:
            d = {}
            for k, v in g.items():
                if isinstance(v, lang.BuiltinVar):
                    self._builtin_slots.append((d, k, v.name))
                    d[k] = None
                else:
                    d[k] = self.sim(v)
            for name, t in self.tvars.items():
                if isinstance(g.get(name), typing.TypeVar):
                    d[name] = SimType(t)
            d["__builtins__"] = self.builtins
            self._globals[id(g)] = d
            self._refresh_slots()
        return d

    def _patched_closure(self, fn):
        if not fn.__closure__:
            return None
        cells = []
        for name, c in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                v = c.cell_contents
            except ValueError:
                cells.append(types.CellType())
                continue
            if isinstance(v, lang.BuiltinVar):
                cell = types.CellType(None)
                self._builtin_slots.append((cell, None, v.name))
                cells.append(cell)
                continue
            if isinstance(v, typing.TypeVar) and name in self.tvars:
                cells.append(types.CellType(SimType(self.tvars[name])))
                continue
            cells.append(types.CellType(self.sim(v)))
        self._refresh_slots()
        return tuple(cells)

    def function(self, fn):
        f = types.FunctionType(fn.__code__, self._patched_globals(fn.__globals__),
                               fn.__name__, fn.__defaults__, self._patched_closure(fn))
        f.__kwdefaults__ = fn.__kwdefaults__
        return f

    def set_unit(self, values: dict):
        self.unit.values = values
        self._refresh_slots()

    def _refresh_slots(self):
        vals = self.unit.values
        if not vals:
            return
        for obj, key, name in self._builtin_slots:
            if key is None:
                obj.cell_contents = vals[name]
            else:
                obj[key] = vals[name]


# ---- static checks -----------------------------------------------------------------------

def _used_names(fn, seen=None) -> set:
    """Names (globals and attributes) the code of `fn` and the helpers it reaches read."""
    seen = set() if seen is None else seen
    if id(fn) in seen:
        return set()
    seen.add(id(fn))
    out = set()

    def walk(code):
        out.update(code.co_names)
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                walk(c)
    walk(fn.__code__)
    refs = [fn.__globals__.get(n) for n in list(out)]
    if fn.__closure__:
        for c in fn.__closure__:
            try:
                refs.append(c.cell_contents)
            except ValueError:
                pass
    for r in refs:
        if isinstance(r, CubeFunction):
            out |= _used_names(r.fn, seen)
        elif isinstance(r, types.ModuleType):
            for n in list(out):
                v = getattr(r, n, None)
                if isinstance(v, CubeFunction):
                    out |= _used_names(v.fn, seen)
    return out


# ---- simulate ----------------------------------------------------------------------------

def _dim3(d) -> tuple[int, int, int]:
    if isinstance(d, (int, np.integer)):
        return (int(d), 1, 1)
    d = tuple(int(x) for x in d)
    if not 1 <= len(d) <= 3:
        raise SimulationError(f"a cube count/dim has 1 to 3 entries, got {d}")
    return d + (1,) * (3 - len(d))


def _bind(kernel: CubeFunction, args: dict, races: _Races | None = None):
    specs = kernel._param_specs()
    names = [n for n, _, _ in specs]
    args = {**kernel.defaults(), **args}  # a missing argument takes its Python default
    for a in args:
        if a not in names:
            raise SimulationError(f"{kernel.__name__}() got an unexpected argument '{a}'")
    for n in names:
        if n not in args:
            raise SimulationError(f"{kernel.__name__}() is missing the argument '{n}'")
    tvars: dict = {}
    bound = {}
    for name, kind, spec in specs:  # memories first: they bind type variables
        if kind != 0:
            continue
        a = args[name]
        n_lines = None
        if isinstance(a, tuple) and len(a) == 2:
            a = Lines(*a)
        if isinstance(a, Lines):
            a, n_lines = a.array, a.n
        if not isinstance(a, np.ndarray):
            raise SimulationError(f"argument '{name}' must be a NumPy array, got "
                                  f"{type(a).__name__}")
        if not a.flags.c_contiguous:
            raise SimulationError(f"argument '{name}' must be C-contiguous")
        elem_spec, lanes_spec, is_line = spec.elem, None, False
        if isinstance(elem_spec, lang.LineSpec):
            elem_spec, lanes_spec, is_line = elem_spec.elem, elem_spec.lanes, True
        elem = _scalar_of(a.dtype)
        if isinstance(elem_spec, typing.TypeVar):
            bound_t = tvars.setdefault(elem_spec.__name__, elem)
            if bound_t != elem:
                raise SimulationError(f"argument '{name}' has element type {elem} but "
                                      f"{elem_spec.__name__} is already {bound_t}")
        elif elem_spec != elem:
            raise SimulationError(f"argument '{name}' must hold {elem_spec} elements, got "
                                  f"{elem}")
        lanes = n_lines if n_lines is not None else (lanes_spec or 1)
        if lanes_spec is not None and lanes != lanes_spec:
            raise SimulationError(f"argument '{name}' has line size {lanes} but the kernel "
                                  f"expects {lanes_spec}")
        if not is_line and lanes != 1:
            raise SimulationError(f"argument '{name}' is not a line parameter; got lines of "
                                  f"{lanes}")
        last = a.shape[-1] if a.ndim else 1
        if last % lanes:
            raise SimulationError(f"line size {lanes} does not divide the last dimension "
                                  f"{last} of '{name}'")
        flat = a.reshape(-1)
        shape = a.shape if a.ndim else (1,)
        strides = tuple(s // a.itemsize for s in a.strides) if a.ndim else (1,)
        bound[name] = SimArray(flat, lanes if is_line else None, spec.kind, shape, strides,
                               name, races)
    for name, kind, spec in specs:
        a = args[name]
        if kind == 1:
            if isinstance(spec, typing.TypeVar):
                t = tvars.get(spec.__name__)
                if t is None:
                    t = _scalar_of(a.dtype) if isinstance(a, np.generic) else (
                        boolean if isinstance(a, bool) else i32 if isinstance(a, int) else f32)
                    tvars[spec.__name__] = t
            elif spec in (int, float, bool):
                t = lang.PY_TYPES[spec]
            else:
                t = spec
            if isinstance(a, int) and not isinstance(a, bool) and t.is_int:
                info = np.iinfo(_np_dtype(t))
                if not info.min <= a <= info.max:  # docs: checked, never wrapped
                    raise SimulationError(f"argument '{name}' is {t} but got {a}")
            if isinstance(a, float) and not t.is_float:
                raise SimulationError(f"argument '{name}' is {t} but got the float {a!r}")
            bound[name] = _cast_value(a, t)
        elif kind == 2:
            bound[name] = a.item() if isinstance(a, np.generic) else a
    return bound, tvars


def _unit_values(cc, cd, cpos, upos, plane_dim) -> dict:
    ux, uy, uz = upos
    cx, cy, cz = cpos
    dx, dy, dz = cd
    nx, ny, nz = cc
    m = 0xFFFFFFFF
    unit = (ux + uy * dx + uz * dx * dy) & m
    cube = (cx + cy * nx + cz * nx * ny) & m
    dim = (dx * dy * dz) & m
    count = (nx * ny * nz) & m
    vals = {
        "UNIT_POS": unit, "UNIT_POS_X": ux, "UNIT_POS_Y": uy, "UNIT_POS_Z": uz,
        "CUBE_POS": cube, "CUBE_POS_X": cx, "CUBE_POS_Y": cy, "CUBE_POS_Z": cz,
        "CUBE_DIM": dim, "CUBE_DIM_X": dx, "CUBE_DIM_Y": dy, "CUBE_DIM_Z": dz,
        "CUBE_COUNT": count, "CUBE_COUNT_X": nx, "CUBE_COUNT_Y": ny, "CUBE_COUNT_Z": nz,
        "ABSOLUTE_POS": (cube * dim + unit) & m,
        "ABSOLUTE_POS_X": (cx * dx + ux) & m, "ABSOLUTE_POS_Y": (cy * dy + uy) & m,
        "ABSOLUTE_POS_Z": (cz * dz + uz) & m,
        "PLANE_DIM": plane_dim, "UNIT_POS_PLANE": unit % plane_dim,
    }
    return {k: np.uint32(v & m) for k, v in vals.items()}


def simulate(kernel: CubeFunction, cube_count, cube_dim, *, plane_dim: int = 1, **args):
    """Run `kernel` as Python once per unit. Array arguments are NumPy arrays, written in
    place (`lines(a, n)` or `(a, n)` for line parameters); scalars are Python or NumPy
    numbers; comptime parameters any Python value. Returns None, like a launch."""
    if not isinstance(kernel, CubeFunction) or not kernel.is_kernel:
        raise SimulationError(f"{kernel!r} is not a @cube(launch=True) kernel")
    bad = sorted(_used_names(kernel.fn) & _UNSUPPORTED_NAMES)
    if bad:
        raise SimulationUnsupported(f"{kernel.__name__} uses {', '.join(bad)}: the simulator "
                                    f"runs units one at a time and cannot model it")
    cc, cd = _dim3(cube_count), _dim3(cube_dim)
    races = _Races()
    bound, tvars = _bind(kernel, args, races)
    env = _Env(tvars)
    fn = None
    with np.errstate(all="ignore"):
        for cz in builtins.range(cc[2]):
            for cy in builtins.range(cc[1]):
                for cx in builtins.range(cc[0]):
                    for uz in builtins.range(cd[2]):
                        for uy in builtins.range(cd[1]):
                            for ux in builtins.range(cd[0]):
                                env.set_unit(_unit_values(cc, cd, (cx, cy, cz), (ux, uy, uz),
                                                          plane_dim))
                                races.unit = ((cx, cy, cz), (ux, uy, uz))
                                if fn is None:
                                    fn = env.function(kernel.fn)
                                try:
                                    fn(**bound)
                                except SimulationError:
                                    raise
                                except Exception as e:
                                    raise SimulationError(
                                        f"{kernel.__name__}: unit {(ux, uy, uz)} of cube "
                                        f"{(cx, cy, cz)}: {type(e).__name__}: {e}") from e

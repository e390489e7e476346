"""Element types, line (vector) types and the promotion rules.

The rules (also in docs/language.md):
- A Python literal is *weak*: it takes the type of the other operand (`x + 1` with x: f16 is f16).
  Alone, an int literal is i32, a float literal is f32, a bool literal is bool.
- Two floats of different widths give the wider (`f16 * f32` -> f32); bf16 with f16 gives f32.
- Two ints of the same signedness give the wider (`i32 + i64` -> i64).
- A signed with an unsigned int, or an int with a float (both typed, neither a literal), is a
  type error in arithmetic: cast explicitly (`i32(x)`, `f32(n)`). Comparisons of a signed with
  an unsigned int of at most 32 bits are allowed and exact (both sides widen to i64).
- A line `Line[T, n]` combined with a scalar broadcasts the scalar; two lines need the same n.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Scalar:
    name: str
    kind: str  # "float" | "int" | "uint" | "bool"
    bits: int

    def __repr__(self) -> str:
        return self.name

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_signed(self) -> bool:
        return self.kind == "int"

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def int_range(self) -> tuple[int, int]:
        """(lowest, highest) value of an integer type."""
        if self.kind == "uint":
            return 0, (1 << self.bits) - 1
        return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1

    @property
    def np(self) -> np.dtype:
        return _NP_DTYPES[self.name]  # read per launch argument: a dict, not np.dtype()

    @property
    def elem(self) -> Scalar:
        return self

    @property
    def lanes(self) -> int:
        return 1

    def __call__(self, value):  # pragma: no cover - replaced in kernels by the frontend
        """Outside a kernel, `f32(1.5)` builds a NumPy scalar; inside, it is a cast."""
        return self.np.type(value)


@dataclass(frozen=True)
class Vec:
    """A line: `n` lanes of a scalar element type (n >= 2; a line of 1 is the scalar)."""

    elem: Scalar
    lanes: int

    def __repr__(self) -> str:
        return f"Line[{self.elem.name}, {self.lanes}]"

    @property
    def is_float(self) -> bool:
        return self.elem.is_float

    @property
    def is_int(self) -> bool:
        return self.elem.is_int

    @property
    def is_signed(self) -> bool:
        return self.elem.is_signed

    @property
    def is_bool(self) -> bool:
        return self.elem.is_bool

    @property
    def name(self) -> str:
        return repr(self)


Type = Scalar | Vec

f16 = Scalar("f16", "float", 16)
bf16 = Scalar("bf16", "float", 16)
f32 = Scalar("f32", "float", 32)
f64 = Scalar("f64", "float", 64)
i8 = Scalar("i8", "int", 8)
i16 = Scalar("i16", "int", 16)
i32 = Scalar("i32", "int", 32)
i64 = Scalar("i64", "int", 64)
u8 = Scalar("u8", "uint", 8)
u16 = Scalar("u16", "uint", 16)
u32 = Scalar("u32", "uint", 32)
u64 = Scalar("u64", "uint", 64)
boolean = Scalar("bool", "bool", 8)

SCALARS: dict[str, Scalar] = {
    t.name: t for t in (f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, boolean)
}

# bf16 has no NumPy dtype: it is stored as its 16 raw bits (uint16), converted in kernels.
_NP_NAMES = {
    "f16": "float16", "bf16": "uint16", "f32": "float32", "f64": "float64",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "bool": "bool",
}
_NP_DTYPES = {k: np.dtype(v) for k, v in _NP_NAMES.items()}
_FROM_NP = {np.dtype(v): SCALARS[k] for k, v in _NP_NAMES.items() if k != "bf16"}


def from_numpy_dtype(dt) -> Scalar:
    try:
        return _FROM_NP[dt]  # a np.dtype (dl's path); a type like np.float32 or a name
        # hashes otherwise, misses, and is converted below
    except (KeyError, TypeError):
        pass
    dt = np.dtype(dt)
    try:
        return _FROM_NP[dt]
    except KeyError:
        raise TypeError(f"no cube element type for NumPy dtype {dt}") from None


def vec(elem: Scalar, lanes: int) -> Type:
    return elem if lanes == 1 else Vec(elem, lanes)


def with_elem(t: Type, elem: Scalar) -> Type:
    """The same shape (scalar or line of the same lanes) with another element type."""
    return vec(elem, t.lanes)


class PromotionError(TypeError):
    pass


def promote_scalars(a: Scalar, b: Scalar) -> Scalar:
    if a == b:
        return a
    if a.is_float and b.is_float:
        if a.bits == b.bits:  # f16 with bf16
            return f32
        return a if a.bits > b.bits else b
    if a.kind == b.kind:  # both int or both uint (or both bool: equal)
        return a if a.bits > b.bits else b
    raise PromotionError(
        f"cannot mix {a} and {b} implicitly; cast one side explicitly (e.g. {a.name}(x))"
    )


def promote(a: Type, b: Type) -> Type:
    if a.lanes != 1 and b.lanes != 1 and a.lanes != b.lanes:
        raise PromotionError(f"line sizes differ: {a} and {b}")
    elem = promote_scalars(a.elem, b.elem)
    return vec(elem, max(a.lanes, b.lanes))

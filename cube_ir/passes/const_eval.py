"""Evaluating ops on constants with the IR's exact semantics (see ir.py's docstring).

Each function returns the result as a Python bool/int/float (a float exactly representable in
the result type), or None where folding would pin down something the IR leaves open or we do
not model exactly: bf16, float->int casts out of range, NaN/-0.0 in min/max/clamp, a fused
multiply-add whose product is inexact. Leaving such an op alone is always correct."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..types import Scalar, Type, bf16


def wrap(v: int, t: Scalar) -> int:
    """v reduced to the range of the int type t (two's complement wraparound)."""
    v &= (1 << t.bits) - 1
    if t.is_signed and v >= 1 << (t.bits - 1):
        v -= 1 << t.bits
    return v


def _ftype(t: Scalar):
    return t.np.type  # np.float16 / np.float32 / np.float64


def _f(x, t: Scalar):
    """x rounded to the float type t, as a NumPy scalar."""
    return _ftype(t)(float(x))


def _out(x, t: Scalar):
    """A computed NumPy/Python value as the Python value of a Const of type t."""
    if t.is_bool:
        return bool(x)
    if t.is_int:
        return wrap(int(x), t)
    return float(_ftype(t)(x))


def _no_fold(t: Type) -> bool:
    return t.elem == bf16


_MATH = {
    "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "exp": np.exp, "log": np.log,
    "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "floor": np.floor,
    "ceil": np.ceil, "round": np.rint,  # round: half to even, like Python's round()
    "erf": lambda x: math.erf(float(x)),
    "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh,
    "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "log2": np.log2, "log10": np.log10, "exp2": np.exp2, "expm1": np.expm1, "trunc": np.trunc,
}


def unary(op: str, x, t: Type):
    """op applied to x of operand type t."""
    e = t.elem
    if _no_fold(t):
        return None
    with np.errstate(all="ignore"):
        if op == "not":
            return not x
        if op == "bitnot":
            return (not x) if e.is_bool else wrap(~int(x), e)
        if e.is_bool:
            return None
        if e.is_int:
            if op == "neg":
                return wrap(-int(x), e)
            if op == "abs":
                return wrap(abs(int(x)), e)
            return None
        if op == "neg":
            return float(-_f(x, e))
        if op == "abs":
            return float(abs(_f(x, e)))
        fn = _MATH.get(op)
        if fn is None:
            return None
        # transcendental functions: computed in f64, rounded once to the type
        return _out(fn(np.float64(_f(x, e))), e)


def _int_binary(op: str, a: int, b: int, e: Scalar):
    if op in ("add", "sub", "mul"):
        return wrap(a + b if op == "add" else a - b if op == "sub" else a * b, e)
    if op in ("div", "rem"):
        if b == 0:
            return 0  # the IR: integer division by zero gives 0
        q = abs(a) // abs(b)
        if (a < 0) != (b < 0):
            q = -q
        return wrap(q if op == "div" else a - b * q, e)
    if op == "pow":
        return wrap(pow(a, b, 1 << e.bits), e) if b >= 0 else None
    if op in ("min", "max"):
        return min(a, b) if op == "min" else max(a, b)
    if op in ("and", "or", "xor"):
        return wrap(a & b if op == "and" else a | b if op == "or" else a ^ b, e)
    if op in ("shl", "shr"):
        n = b % e.bits  # shift counts are taken modulo the bit width
        return wrap(a << n, e) if op == "shl" else wrap(a >> n, e)
    return None


def _unsafe_minmax(*xs) -> bool:
    """NaN and signed zeros: backends' min/max disagree there, so do not fold."""
    return any(math.isnan(x) or (x == 0.0 and math.copysign(1.0, x) < 0) for x in xs)


def _float_binary(op: str, a, b, e: Scalar):
    x, y = _f(a, e), _f(b, e)
    with np.errstate(all="ignore"):
        match op:
            case "add":
                return _out(x + y, e)
            case "sub":
                return _out(x - y, e)
            case "mul":
                return _out(x * y, e)
            case "div":
                return _out(x / y, e)
            case "rem":
                return _out(np.fmod(x, y), e)
            case "pow":
                return _out(np.power(np.float64(x), np.float64(y)), e)
            case "atan2":
                return _out(np.arctan2(np.float64(x), np.float64(y)), e)
            case "hypot":
                return _out(np.hypot(np.float64(x), np.float64(y)), e)
            case "copysign":
                return _out(np.copysign(x, y), e)
            case "min" | "max":
                if _unsafe_minmax(float(x), float(y)):
                    return None
                return _out(min(x, y) if op == "min" else max(x, y), e)
    return None


_COMPARE = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}


def binary(op: str, a, b, t: Type):
    """op applied to a and b, both of operand type t (comparisons give a bool)."""
    e = t.elem
    if _no_fold(t):
        return None
    if e.is_float:
        x, y = float(_f(a, e)), float(_f(b, e))
    else:
        x, y = int(a), int(b)
    if op in _COMPARE:
        return bool(_COMPARE[op](x, y))
    if e.is_bool:
        x, y = bool(x), bool(y)
        return {"and": x and y, "or": x or y, "xor": x != y}.get(op)
    if e.is_int:
        return _int_binary(op, x, y, e)
    return _float_binary(op, x, y, e)


def ternary(op: str, a, b, c, t: Type):
    e = t.elem
    if _no_fold(t) or e.is_bool:
        return None
    if e.is_int:
        a, b, c = int(a), int(b), int(c)
        if op == "fma":
            return wrap(a * b + c, e)
        return min(max(a, b), c) if op == "clamp" else None
    x, y, z = (_f(v, e) for v in (a, b, c))
    if op == "clamp":
        if _unsafe_minmax(float(x), float(y), float(z)):
            return None
        return float(min(max(x, y), z))
    if op != "fma" or not all(math.isfinite(float(v)) for v in (x, y, z)):
        return None
    # fused or not, the result is the same when the product is exact in the type
    with np.errstate(all="ignore"):
        p = x * y
    if not math.isfinite(float(p)) or Fraction(float(p)) != Fraction(float(x)) * Fraction(
            float(y)):
        return None
    with np.errstate(all="ignore"):
        return _out(p + z, e)


def cast(x, src: Type, dst: Type):
    """x of type src converted to dst (lanes aside: a splat keeps the value)."""
    se, de = src.elem, dst.elem
    if _no_fold(src) or _no_fold(dst):
        return None
    if se.is_bool:
        x = int(bool(x))
    elif se.is_float:
        x = float(_f(x, se))
    else:
        x = int(x)
    if de.is_bool:
        return x != 0  # NaN != 0 is true, as in the IR
    if de.is_float:
        if isinstance(x, int) and abs(x) > 1 << 53:
            return None  # float(x) would round once before the real rounding
        return _out(_f(x, de), de)
    if isinstance(x, float):  # float -> int truncates; out of range is not promised
        if not math.isfinite(x):
            return None
        x = math.trunc(x)
        lo = -(1 << (de.bits - 1)) if de.is_signed else 0
        hi = (1 << (de.bits - (1 if de.is_signed else 0))) - 1
        return x if lo <= x <= hi else None
    return wrap(x, de)

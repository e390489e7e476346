"""WGSL types and literals for cube types.

Registers: f32, f16 (with `enable f16`), i32, u32, bool. Narrower ints live in i32/u32 and
are wrapped to their width after every op that could leave it; bf16 lives in f32, rounded
to bf16 after every inexact op. A line of 2-4 lanes is a `vecN<T>`; a longer line is an
`array<T, N>` and its ops are emitted lane by lane.
"""
from __future__ import annotations

import math
import struct

from cube_ir.types import Scalar, Type, Vec

UNSUPPORTED = frozenset({"f64", "i64", "u64"})


class Unsupported(NotImplementedError):
    """A type or op the target cannot express (the frontend normally rejects it first)."""


def scalar(e: Scalar) -> str:
    if e.name in UNSUPPORTED:
        raise Unsupported(f"{e.name} is not supported by the wgsl target")
    if e.is_bool:
        return "bool"
    if e.is_float:
        return "f16" if e.name == "f16" else "f32"
    return "i32" if e.is_signed else "u32"


def wide(t: Type) -> bool:
    """A line too long for a WGSL vector: emitted lane by lane."""
    return isinstance(t, Vec) and t.lanes > 4


def reg(t: Type) -> str:
    s = scalar(t.elem)
    if isinstance(t, Vec):
        return f"array<{s}, {t.lanes}>" if t.lanes > 4 else f"vec{t.lanes}<{s}>"
    return s


def lane_type(t: Type) -> str:
    """The WGSL type one emitted expression has: the scalar of a wide line, else reg(t)."""
    return scalar(t.elem) if wide(t) else reg(t)


def splat(x: str, t: Type) -> str:
    """x (a scalar expression of t's element register type) as a value of lane_type(t)."""
    if isinstance(t, Vec) and not wide(t):
        return f"{reg(t)}({x})"
    return x


def lit(value, e: Scalar) -> str:
    """A scalar literal of e's register type."""
    if e.is_bool:
        return "true" if value else "false"
    if e.is_float:
        v = float(value)
        if e.name == "f16":
            if math.isnan(v) or math.isinf(v) or abs(v) > 65504:
                bits = {True: 0x7C00, False: 0xFC00}[v > 0] if not math.isnan(v) else 0x7E00
                # naga 0.32 types bitcast<vec2<f16>>(u32) as f32 (its `.x` is refused): the
                # half comes from its bits through unpack2x16float, exact in f32
                return f"f16(unpack2x16float({bits}u).x)"
            import numpy as np
            return f"{float(np.float16(v))!r}h"
        if e.name == "bf16":
            from cube_ir.interpreter import round_bf16
            v = float(round_bf16(v))
        b = struct.unpack("<I", struct.pack("<f", v))[0] if not math.isnan(v) else 0x7FC00000
        if v != 0 and (math.isinf(v) or math.isnan(v) or b & 0x7F800000 == 0):
            return f"bitcast<f32>({b:#x}u)"  # specials and subnormals, bit-exact
        f = struct.unpack("<f", struct.pack("<I", b))[0]
        return f"{f!r}f"
    n = int(value) & ((1 << e.bits) - 1)
    if e.is_signed:
        if n >= 1 << (e.bits - 1):
            n -= 1 << e.bits
        return f"i32({n + 1}i - 1i)" if n == -(1 << 31) else f"{n}i"
    return f"{n}u"


def const(value, t: Type) -> str:
    return splat(lit(value, t.elem), t)

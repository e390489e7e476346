"""Cube types as LLVM types, and constants as LLVM literals.

Registers and memory differ for two element types: `bool` is `i1` in registers and `i8` in
memory; `bf16` is a `float` in registers (always holding a bf16-exact value) and its raw `i16`
bits in memory. Lines are `<n x T>` in both.
"""
from __future__ import annotations

import struct

import numpy as np

from cube_ir.types import Scalar, Type, Vec


def elem_reg(s: Scalar) -> str:
    if s.is_bool:
        return "i1"
    if s.is_float:
        return {"f16": "half", "bf16": "float", "f32": "float", "f64": "double"}[s.name]
    return f"i{s.bits}"


def elem_mem(s: Scalar) -> str:
    if s.is_bool:
        return "i8"
    if s.name == "bf16":
        return "i16"
    return elem_reg(s)


def _shape(t: Type, e: str) -> str:
    return f"<{t.lanes} x {e}>" if isinstance(t, Vec) else e


def reg(t: Type) -> str:
    return _shape(t, elem_reg(t.elem))


def mem(t: Type) -> str:
    return _shape(t, elem_mem(t.elem))


def suffix(ll: str) -> str:
    """Intrinsic overload suffix of an LLVM type: float -> f32, <4 x half> -> v4f16."""
    names = {"half": "f16", "float": "f32", "double": "f64"}
    if ll.startswith("<"):
        n, _, e = ll[1:-1].split(" ")
        return f"v{n}{names.get(e, e)}"
    return names.get(ll, ll)


def elem_of(ll: str) -> str:
    return ll[1:-1].split(" ")[2] if ll.startswith("<") else ll


def lanes_of(ll: str) -> int:
    return int(ll[1:].split(" ")[0]) if ll.startswith("<") else 1


def with_elem(ll: str, e: str) -> str:
    return f"<{lanes_of(ll)} x {e}>" if ll.startswith("<") else e


def mem_bytes(s: Scalar) -> int:
    return 1 if s.is_bool else s.bits // 8


def reg_bytes(t: Type) -> int:
    e = t.elem
    size = 1 if e.is_bool else (4 if e.name == "bf16" else e.bits // 8)
    return size * t.lanes


def _hex_double(v: float) -> str:
    return f"0x{struct.unpack('<Q', struct.pack('<d', v))[0]:016X}"


def bf16_value(v: float) -> float:
    """v rounded to bf16 (nearest even), as a Python float."""
    with np.errstate(all="ignore"):
        bits = int(np.array([v], np.float32).view(np.uint32)[0])
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:
        bits |= 0x400000
    else:
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFFFFFF
    return float(np.array([bits & 0xFFFF0000], np.uint32).view(np.float32)[0])


def float_lit(v: float, e: str) -> str:
    """A literal of LLVM float type e ('half', 'float', 'double') holding v rounded to it."""
    v = float(v)
    with np.errstate(all="ignore"):
        if e == "half":
            return f"0xH{int(np.array([v], np.float16).view(np.uint16)[0]):04X}"
        if e == "float":
            v = float(np.float32(v))
    return _hex_double(v)


def int_lit(v: int, bits: int) -> str:
    v = int(v) & ((1 << bits) - 1)
    if bits > 1 and v >= 1 << (bits - 1):
        v -= 1 << bits
    return str(v)


def scalar_lit(value, s: Scalar) -> str:
    if s.is_bool:
        return "true" if value else "false"
    if s.is_float:
        if s.name == "bf16":
            return float_lit(bf16_value(float(value)), "float")
        return float_lit(float(value), elem_reg(s))
    return int_lit(int(value), s.bits)


def splat_lit(lit: str, ll: str) -> str:
    """A constant of LLVM type ll whose every lane is the scalar literal lit."""
    if not ll.startswith("<"):
        return lit
    e = elem_of(ll)
    return "<" + ", ".join([f"{e} {lit}"] * lanes_of(ll)) + ">"


def const(value, t: Type) -> str:
    return splat_lit(scalar_lit(value, t.elem), reg(t))


def lit(value, ll: str) -> str:
    """A constant of any LLVM register type ll (scalar or vector) from a Python number."""
    e = elem_of(ll)
    if e in ("half", "float", "double"):
        s = float_lit(value, e)
    elif e == "i1":
        s = "true" if value else "false"
    else:
        s = int_lit(value, int(e[1:]))
    return splat_lit(s, ll)

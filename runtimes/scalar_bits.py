"""Scalar kernel arguments as the 64-bit slot values the GPU ABIs take (low bits hold the
value: f32 as its 32 bits, bool 0/1, f16/bf16 raw)."""
from __future__ import annotations

import numpy as np

from cube_ir.types import Scalar


def f16_bits(v) -> int:
    with np.errstate(all="ignore"):
        return int(np.array([v], np.float16).view(np.uint16)[0])


def bf16_bits(v) -> int:
    with np.errstate(all="ignore"):
        b = int(np.array([v], np.float32).view(np.uint32)[0])
    if (b & 0x7F800000) == 0x7F800000 and b & 0x7FFFFF:
        return (b >> 16) | 0x40
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def bf16_bits_array(a) -> np.ndarray:
    """Host numbers as bf16 bits (uint16), rounded to nearest even; NaNs stay quiet NaNs."""
    with np.errstate(all="ignore"):
        bits = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    nan = ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x7FFFFF) != 0)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF
    return np.where(nan, (bits >> 16) | 0x40, rounded).astype(np.uint16)


def slot_bits(v, t: Scalar) -> int:
    """The unsigned 64-bit slot value of scalar v as type t."""
    if t.name == "f16":
        return f16_bits(v)
    if t.name == "bf16":
        return bf16_bits(v)
    if t.is_float:
        dt = np.float32 if t.bits == 32 else np.float64
        with np.errstate(all="ignore"):
            return int(np.array([v], dt).view(np.uint32 if t.bits == 32 else np.uint64)[0])
    if t.is_bool:
        return 1 if v else 0
    return int(v) & ((1 << t.bits) - 1)

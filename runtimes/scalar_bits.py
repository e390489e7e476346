"""Half-precision bit patterns of host numbers: f16/bf16 scalars as kernel arguments
(runtimes.args packs them as their raw 16 bits) and bf16 arrays for host copies."""
from __future__ import annotations

import numpy as np


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

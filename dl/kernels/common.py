"""Small helpers the launchers share: line sizes per device, cube counts, dtype names."""
from __future__ import annotations

import numpy as np


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def is_cpu(rt) -> bool:
    """Units of a cube run as a loop on one core: tiles per unit, few units per cube."""
    return rt.target == "llvm"


def simd_bytes(rt) -> int:
    if is_cpu(rt):
        return 64 if "avx512f" in rt.device_id() else 32
    return 16  # a vec4 of f32 on GPUs


def line_size(rt, elem, n: int, *strides: int, cap: int | None = None) -> int:
    """The widest power-of-two line (up to a SIMD register) that divides n and every stride."""
    size = max(1, simd_bytes(rt) // np.dtype(elem.np).itemsize)
    if cap:
        size = min(size, cap)
    while size > 1 and (n % size or any(s % size for s in strides)):
        size //= 2
    return size


def has_f64(rt) -> bool:
    return getattr(rt.features, "f64", True)

"""Small helpers the launchers share: line sizes per device, cube counts, dtype names."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def is_cpu(rt) -> bool:
    """Units of a cube run as a loop on one core: tiles per unit, few units per cube."""
    return rt.target == "llvm"


_L2: list = []


def l2_bytes() -> int:
    """The host CPU's per-core L2 size as the kernel declares it (sysfs), 1 MiB where it is
    not readable: the cache that blocking keeps a matmul's A block in."""
    if not _L2:
        size = 1 << 20
        try:
            base = Path("/sys/devices/system/cpu/cpu0/cache")
            for d in base.glob("index*"):
                if (d / "level").read_text().strip() == "2" and \
                        (d / "type").read_text().strip() in ("Unified", "Data"):
                    text = (d / "size").read_text().strip().upper()
                    mult = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
                    size = int(text.rstrip("KM")) * mult
        except (OSError, ValueError):
            pass
        _L2.append(size)
    return _L2[0]


def simd_bytes(rt) -> int:
    if is_cpu(rt):
        return 64 if "avx512f" in rt.device_id() else 32
    return 16  # a vec4 of f32 on GPUs


def registers(rt) -> int:
    """Vector registers of the target: 32 zmm with AVX-512, 16 ymm with AVX2 (what a
    kernel's register tile is sized for; GPUs: 16, their kernels still run)."""
    feats = getattr(rt.features, "vector_registers", None)
    if feats:
        return int(feats)
    return 32 if is_cpu(rt) and simd_bytes(rt) == 64 else 16


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

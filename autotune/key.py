"""Tune keys: shapes are bucketed to powers of two so nearby sizes share one tuning."""
from __future__ import annotations


def bucket(n: int) -> int:
    """The smallest power of two >= n (0 and 1 stay themselves)."""
    n = int(n)
    return n if n <= 1 else 1 << (n - 1).bit_length()


def tune_key(op: str, dtype, shapes=(), extra=()) -> str:
    """A stable string key: op, dtype, each shape bucketed, then extra (exact) values.
    The device is not part of it: every device has its own store."""
    dims = ";".join("x".join(str(bucket(d)) for d in s) for s in shapes)
    parts = [op, str(dtype), dims, *(str(e) for e in extra)]
    return "|".join(parts)

"""Tune keys: shapes are bucketed to powers of two so nearby sizes share one tuning."""
from __future__ import annotations


def bucket(n: int) -> int:
    """The smallest power of two >= n (0 and 1 stay themselves)."""
    n = int(n)
    return n if n <= 1 else 1 << (n - 1).bit_length()


_memo: dict = {}  # (op, dtype, shapes, extra) -> key: ops look theirs up on every call
_MEMO_CAP = 1 << 16


def tune_key(op: str, dtype, shapes=(), extra=()) -> str:
    """A stable string key: op, dtype, each shape bucketed, then extra (exact) values.
    The device is not part of it: every device has its own store."""
    try:
        memo = (op, dtype, tuple(map(tuple, shapes)), tuple(extra))
        hit = _memo.get(memo)
    except TypeError:  # an unhashable extra value: build the key every time
        memo = hit = None
    if hit is not None:
        return hit
    dims = ";".join("x".join(str(bucket(d)) for d in s) for s in shapes)
    key = "|".join([op, str(dtype), dims, *(str(e) for e in extra)])
    if memo is not None and len(_memo) < _MEMO_CAP:
        _memo[memo] = key
    return key

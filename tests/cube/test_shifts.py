"""Shifts mean Python's `<<` and `>>` on the kernel's fixed-width ints, on every runtime: the
result is Python's (unbounded) shift wrapped to the type, so a count of the width or more
shifts every bit out (0, or the sign for `>>` of a signed int) where C, LLVM and the shader
languages take the count modulo the width. A negative runtime count reads as unsigned (a
huge count), as NumPy and PyTorch have it; a negative constant count is a compile error, as
Python raises.

No `from __future__ import annotations` here: _kernel builds kernels over a closure type."""

import numpy as np
import pytest

import cube as cb
from cube import ABSOLUTE_POS, Array, Line, cube, i32, u32

COUNTS = [0, 1, 5, 30, 31, 32, 33, 63, 64, 65, 100, -1, -32]
VALUES = [5, -5, 7, -1, 1 << 20, -(1 << 30), 0x7FFFFFFF]


def _wrap(v: int, bits: int, signed: bool) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >> (bits - 1) else v


def _py_shift(x: int, c: int, op: str, bits: int, signed: bool) -> int:
    if c < 0:  # NumPy's and PyTorch's reading of a negative count: past the width
        c = 1 << 20
    return _wrap(x << c if op == "shl" else x >> c, bits, signed)


def _kernel(T):
    @cube(launch=True)
    def k(a: Array[T], c: Array[T], out: Array[T]):
        i = ABSOLUTE_POS
        if i < a.len():
            x = a[i]
            n = c[i]
            out[4 * i] = x << n
            out[4 * i + 1] = x >> n
            out[4 * i + 2] = (x << 33) + (x >> 40)  # constant counts past 32 bits
            out[4 * i + 3] = (x << 3) ^ (x >> 2)
    return k


_KERNELS = {"i32": _kernel(i32), "u32": _kernel(u32), "i64": _kernel(cb.i64)}


@pytest.mark.parametrize("tname", ["i32", "u32", "i64"])
def test_shifts_follow_python(rt, tname):
    bits, signed = int(tname[1:]), tname[0] == "i"
    if bits == 64 and not getattr(rt.features, "int64", True):
        pytest.skip(f"{rt.name} has no 64-bit ints")
    dt = np.dtype(f"{'int' if signed else 'uint'}{bits}")
    pairs = [(_wrap(v, bits, signed), c) for v in VALUES for c in COUNTS
             if signed or c >= 0]
    a = np.array([v for v, _ in pairs], dt)
    c = np.array([_wrap(n, bits, signed) for _, n in pairs], dt)
    out = rt.empty((4 * a.size,), dt)
    _KERNELS[tname].launch(rt, cube_count=(a.size + 31) // 32, cube_dim=32,
                           a=rt.from_numpy(a), c=rt.from_numpy(c), out=out)
    got = out.numpy().reshape(-1, 4).tolist()
    for (v, n), g in zip(pairs, got):
        want = [_py_shift(v, n, "shl", bits, signed), _py_shift(v, n, "shr", bits, signed),
                _wrap(_py_shift(v, 33, "shl", bits, signed) +
                      _py_shift(v, 40, "shr", bits, signed), bits, signed),
                _py_shift(v, 3, "shl", bits, signed) ^ _py_shift(v, 2, "shr", bits, signed)]
        assert g == want, f"{rt.name} {tname}: x={v} count={n}: {g}, Python {want}"


@cube(launch=True)
def _line_shifts(a: Array[Line[i32]], c: Array[Line[i32]], out: Array[Line[i32]]):
    i = ABSOLUTE_POS
    if i < a.len():
        out[2 * i] = a[i] << c[i]
        out[2 * i + 1] = a[i] >> c[i]


def test_line_shifts_follow_python(rt):
    pairs = [(v, c) for v in VALUES for c in COUNTS[:12]]
    a = np.array([v for v, _ in pairs], np.int32)
    c = np.array([n for _, n in pairs], np.int32)
    out = rt.empty((2 * a.size,), np.int32)
    _line_shifts.launch(rt, cube_count=1, cube_dim=a.size // 4, a=rt.from_numpy(a).lines(4),
                        c=rt.from_numpy(c).lines(4), out=out.lines(4))
    got = out.numpy().reshape(-1, 2, 4)
    want_l = np.array([_py_shift(v, n, "shl", 32, True) for v, n in pairs]).reshape(-1, 4)
    want_r = np.array([_py_shift(v, n, "shr", 32, True) for v, n in pairs]).reshape(-1, 4)
    np.testing.assert_array_equal(got[:, 0], want_l)
    np.testing.assert_array_equal(got[:, 1], want_r)


def test_negative_constant_count_is_a_located_error():
    @cube(launch=True)
    def k(a: Array[i32]):
        i = ABSOLUTE_POS
        if i < a.len():
            a[i] = a[i] << -1

    rt = cb.runtime("interp")
    with pytest.raises(cb.CompileError, match=r"negative shift count -1[\s\S]*a\[i\] << -1"):
        k.launch(rt, cube_count=1, cube_dim=4, a=rt.from_numpy(np.zeros(4, np.int32)))

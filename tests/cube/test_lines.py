"""Lines of every size 1..16 through arithmetic, comparisons, selects, casts, math and plane
ops on every runtime, against NumPy. The C-family dialects hold some sizes as native vectors
(OpenCL 2/3/4/8/16, MSL 2/3/4) and the rest as lanes, so each size takes its own path."""
from __future__ import annotations

import typing

import numpy as np
import pytest

import cube as cb
from cube import ABSOLUTE_POS, Array, Line, cube, f32, i8, i32, u8, u32

F = typing.TypeVar("F")
I = typing.TypeVar("I")  # noqa: E741

SIZES = list(range(1, 17))


@cube(launch=True)
def line_float(x: Array[Line[F]], y: Array[Line[F]], o_ar: Array[Line[F]],
               o_math: Array[Line[F]], o_sel: Array[Line[F]], o_cmp: Array[Line[cb.bool_]],
               o_plane: Array[Line[F]]):
    i = ABSOLUTE_POS
    a = x[i]
    b = y[i]
    o_plane[i] = cb.plane_sum(a) + cb.plane_broadcast(b, 0)  # every unit: full planes
    if i < x.len():
        o_ar[i] = (a * b + a / b - cb.fma(a, b, 1.5) + cb.min(a, b) - cb.max(a, b * 2.0)
                   + abs(a) - (-a) + a % b)
        o_math[i] = (cb.exp(cb.clamp(a, -3.0, 3.0)) + cb.sqrt(b) + cb.rsqrt(b) + cb.log(b)
                     + cb.log1p(b) + cb.erf(a) + cb.tanh(a) + cb.sin(a) + cb.cos(a)
                     + cb.floor(a) + cb.ceil(a) + cb.round(a) + b ** 2)
        c = a > b
        w = cb.select(c, a, b * 2.0) + cb.select(i % 2 == 0, a, b)
        if a.size > 1:  # lane insert/extract
            w[0] = w[a.size - 1] + (a if i % 3 == 0 else b)[0]
        o_sel[i] = w
        o_cmp[i] = c | (a == b) | (a < -2.5)


def _float_ref(x, y, plane):
    a, b = x.astype(np.float64), y.astype(np.float64)
    ar = (a * b + a / b - (a * b + 1.5) + np.minimum(a, b) - np.maximum(a, 2 * b) + np.abs(a)
          + a + np.mod(a, b))
    from math import erf
    math = (np.exp(np.clip(a, -3, 3)) + np.sqrt(b) + 1 / np.sqrt(b) + np.log(b) + np.log1p(b)
            + np.vectorize(erf)(a) + np.tanh(a) + np.sin(a) + np.cos(a) + np.floor(a)
            + np.ceil(a) + np.rint(a) + b * b)
    return ar, math


def _check_float(rt, dtype, n_lines, line, tol):
    n = n_lines * line
    rng = np.random.default_rng(line)
    x = (rng.standard_normal(n) * 2).astype(dtype)
    y = rng.uniform(0.5, 2.0, n).astype(dtype)
    x[::7] = y[::7]  # some equal lanes for ==
    bufs = {k: rt.empty(n, dtype) for k in ("o_ar", "o_math", "o_sel", "o_plane")}
    cmp = rt.empty(n, cb.bool_)
    line_float.launch(rt, cube_count=n_lines // 32, cube_dim=32,
                      x=rt.from_numpy(x).lines(line), y=rt.from_numpy(y).lines(line),
                      o_cmp=cmp.lines(line), **{k: v.lines(line) for k, v in bufs.items()})
    ar, math = _float_ref(x, y, rt.plane_size)
    np.testing.assert_allclose(bufs["o_ar"].numpy(), ar, rtol=tol, atol=tol)
    np.testing.assert_allclose(bufs["o_math"].numpy(), math, rtol=tol, atol=tol)
    a, b = x.reshape(-1, line), y.reshape(-1, line)
    idx = np.arange(n_lines)[:, None]
    w = np.where(a > b, a, 2 * b) + np.where(idx % 2 == 0, a, b)
    if line > 1:
        w[:, 0] = w[:, -1] + np.where(idx[:, 0] % 3 == 0, a[:, 0], b[:, 0])
    np.testing.assert_allclose(bufs["o_sel"].numpy().reshape(-1, line), w, rtol=tol)
    np.testing.assert_array_equal(cmp.numpy(), (x > y) | (x == y) | (x < -2.5))
    p = rt.plane_size
    g = a.reshape(-1, p, line)  # planes of units, lanes kept apart
    ref = g.astype(np.float64).sum(1, keepdims=True) + b.reshape(-1, p, line)[:, :1]
    np.testing.assert_allclose(bufs["o_plane"].numpy(),
                               np.broadcast_to(ref, g.shape).reshape(-1), rtol=tol, atol=tol)


@pytest.mark.parametrize("line", SIZES)
def test_float_lines(rt, line):
    _check_float(rt, np.float32, 64, line, 2e-5)


@pytest.mark.parametrize("line", [1, 3, 4, 16])
def test_f64_lines(rt, line):
    if not rt.features.f64:
        pytest.skip(f"{rt.name} has no f64")
    _check_float(rt, np.float64, 32, line, 1e-12)


@cube(launch=True)
def line_int(x: Array[Line[I]], y: Array[Line[I]], o_ar: Array[Line[I]],
             o_bits: Array[Line[I]], o_div: Array[Line[I]]):
    i = ABSOLUTE_POS
    if i < x.len():
        a = x[i]
        b = y[i]
        o_ar[i] = a * b + a - b * 3 + cb.min(a, b) - cb.max(a, b) + abs(a) + (-b)
        o_bits[i] = ((a & b) | (a ^ 5)) + (a << 3) + (b >> 1) + ~a
        o_div[i] = a // b + a % b


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int64, np.int16])
@pytest.mark.parametrize("line", [1, 3, 4, 16])
def test_int_lines(rt, dtype, line):
    n = 32 * line
    info = np.iinfo(dtype)
    rng = np.random.default_rng(line)
    x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    y = rng.integers(max(info.min, -9), 9, n, dtype=dtype, endpoint=True)  # zeros too
    x[:3] = info.min
    outs = {k: rt.empty(n, dtype) for k in ("o_ar", "o_bits", "o_div")}
    line_int.launch(rt, cube_count=1, cube_dim=32, x=rt.from_numpy(x).lines(line),
                    y=rt.from_numpy(y).lines(line), **{k: v.lines(line) for k, v in outs.items()})
    with np.errstate(all="ignore"):
        a, b = x, y
        absa = np.where(a < 0, (0 - a.astype(np.uint64)).astype(dtype), a) if info.min else a
        ar = a * b + a - b * dtype(3) + np.minimum(a, b) - np.maximum(a, b) + absa + (0 - b)
        bits = ((a & b) | (a ^ dtype(5))) + (a << dtype(3)) + (b >> dtype(1)) + ~a
        # Python's // and % with integer division by zero giving 0 (C division, fixed up)
        a64, b64 = a.astype(np.int64), b.astype(np.int64)
        safe = np.where(b64 == 0, 1, b64)
        q = np.where(b64 == 0, 0, (np.abs(a64) // np.abs(safe)) * np.sign(a64) * np.sign(safe))
        r = np.where(b64 == 0, 0, a64 - q * safe)
        fix = (r != 0) & ((r < 0) != (b64 < 0))
        div = (np.where(fix, q - 1, q) + np.where(fix, r + b64, r)).astype(dtype)
    np.testing.assert_array_equal(outs["o_ar"].numpy(), ar)
    np.testing.assert_array_equal(outs["o_bits"].numpy(), bits)
    if dtype != np.int64:  # int64 min / -1 overflows the float-free reference above
        np.testing.assert_array_equal(outs["o_div"].numpy(), div)


@cube(launch=True)
def line_cast(x: Array[Line[f32]], oi: Array[Line[i32]], ou8: Array[Line[u8]],
              oi8: Array[Line[i8]], of: Array[Line[f32]], ob: Array[Line[cb.bool_]]):
    i = ABSOLUTE_POS
    if i < x.len():
        a = x[i]
        k = i32(a)
        oi[i] = k
        ou8[i] = u8(a)
        oi8[i] = i8(k)
        of[i] = f32(k) + f32(u32(k)) + f32(a > 0.5)
        ob[i] = k != 0


@pytest.mark.parametrize("line", [1, 3, 4, 8, 16])
def test_cast_lines(rt, line):
    n = 32 * line
    rng = np.random.default_rng(line)
    x = (rng.standard_normal(n) * 1e3).astype(np.float32)
    x[:8] = [np.nan, np.inf, -np.inf, 3e9, -3e9, 255.9, -0.9, 300.0]
    o = {k: rt.empty(n, t) for k, t in (("oi", np.int32), ("ou8", np.uint8), ("oi8", np.int8),
                                         ("of", np.float32), ("ob", cb.bool_))}
    line_cast.launch(rt, cube_count=1, cube_dim=32, x=rt.from_numpy(x).lines(line),
                     **{k: v.lines(line) for k, v in o.items()})
    xs = np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=1e300, neginf=-1e300)
    k = np.trunc(np.clip(xs, -2.0 ** 31, 2.0 ** 31 - 1)).astype(np.int32)
    np.testing.assert_array_equal(o["oi"].numpy(), k)
    np.testing.assert_array_equal(o["ou8"].numpy(), np.trunc(np.clip(xs, 0, 255)).astype(np.uint8))
    np.testing.assert_array_equal(o["oi8"].numpy(), k.astype(np.int8))
    ref = (k.astype(np.float32) + k.astype(np.uint32).astype(np.float32)
           + (x > 0.5).astype(np.float32))
    np.testing.assert_array_equal(o["of"].numpy(), ref)
    np.testing.assert_array_equal(o["ob"].numpy(), k != 0)


@cube(launch=True)
def _double_lines(x: Array[Line[f32]]):
    i = ABSOLUTE_POS
    if i < x.len():
        x[i] = x[i] * 2.0


@pytest.mark.parametrize("size,line", [(5, 2), (7, 4), (10, 4)])
def test_lines_over_a_view_of_storage_ending_mid_line(rt, size, line):
    """Lines of a view whose storage ends in part of a line (the first 4 of 5 floats as
    lines of 2, as a reduce over `x[:4]` reads them): the whole lines are the array, its
    tail no line reaches, on every runtime alike (the interpreter raised 'not a multiple of
    its line size')."""
    a = np.arange(size, dtype=np.float32) + 1
    b = rt.from_numpy(a)
    whole = size - size % line
    _double_lines.launch(rt, cube_count=1, cube_dim=8,
                         x=b.view((whole,), (1,)).lines(line))
    want = a.copy()
    want[:whole] *= 2
    np.testing.assert_array_equal(b.numpy(), want)

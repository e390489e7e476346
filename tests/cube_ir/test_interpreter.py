"""The reference interpreter against independent NumPy / Python references.

Kernels are built with `cube_ir.builder.Builder`; references are computed in Python ints or
float64 (math module where it matters), never with the interpreter's own helpers."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest

from cube_ir import ir
from cube_ir.builder import Builder
from cube_ir.errors import IRError
from cube_ir.interpreter import run
from cube_ir.types import (
    Vec,
    bf16,
    boolean,
    f16,
    f32,
    f64,
    i8,
    i32,
    i64,
    u8,
    u32,
)

RNG = np.random.default_rng(1234)


# ---- helpers ---------------------------------------------------------------------------------

def launch(kernel, n, args, block=64, plane_size=None):
    run(kernel, (max(1, -(-n // block)),), (block,), args, plane_size)


def map_kernel(in_types, out_type, fn, name="map"):
    """out[i] = fn(b, in0[i], in1[i], ...) for i < len(out)."""
    b = Builder(name)
    ins = [b.array(f"in{j}", t) for j, t in enumerate(in_types)]
    out = b.array("out", out_type)
    i = b.builtin("ABSOLUTE_POS")
    with b.if_(b.lt(i, b.len(out))):
        b.store(out, i, fn(b, *[b.load(p, i) for p in ins]))
    return b.finish()


def apply(fn, in_arrays, in_types, out_type, out_dtype=None, out_len=None):
    k = map_kernel(in_types, out_type, fn)
    n = out_len if out_len is not None else len(in_arrays[0])
    out = np.zeros(n * out_type.lanes, out_dtype or out_type.elem.np)
    launch(k, n, list(in_arrays) + [out])
    return out


def wrap(v: int, bits: int, signed: bool) -> int:
    v &= (1 << bits) - 1
    if signed and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def c_div(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def bf16_bits_ref(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even f32 -> bf16 by integer arithmetic on the bits (non-NaN)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_to_f32(bits):
    return (np.asarray(bits, np.uint32) << 16).view(np.float32)


# ---- elementwise arithmetic ------------------------------------------------------------------

def _pow(x: float, y: float) -> float:
    try:
        return x ** y  # C pow: pow(1, nan) = 1, pow(nan, 0) = 1
    except OverflowError:
        return math.inf


FLOAT_BIN = ["add", "sub", "mul", "div", "rem", "pow", "min", "max"]


@pytest.mark.parametrize("t", [f32, f64])
@pytest.mark.parametrize("op", FLOAT_BIN)
def test_float_binary(t, op):
    dt = t.np
    a = (RNG.standard_normal(500) * 10).astype(dt)
    bb = (RNG.standard_normal(500) * 10).astype(dt)
    a[:6] = [np.nan, 1.0, np.inf, -0.0, 5.0, np.nan]
    bb[:6] = [2.0, np.nan, 3.0, 0.0, 0.0, np.nan]
    if op == "pow":
        a, bb = np.abs(a), bb / 4
    out = apply(lambda b, x, y: b.binary(op, x, y), [a, bb], [t, t], t)
    a64, b64 = a.astype(np.float64), bb.astype(np.float64)
    if op in ("min", "max"):
        pick = min if op == "min" else max
        ref = [y if math.isnan(x) else x if math.isnan(y) else pick(x, y)
               for x, y in zip(a64.tolist(), b64.tolist(), strict=True)]
        np.testing.assert_array_equal(out, np.array(ref, dt))
    elif op == "pow":
        ref = np.array([_pow(x, y) for x, y in zip(a64.tolist(), b64.tolist(), strict=True)])
        with np.errstate(over="ignore"):
            np.testing.assert_allclose(out, ref.astype(dt), rtol=1e-6 if t == f32 else 1e-14)
    else:
        with np.errstate(all="ignore"):
            ref = {"add": a + bb, "sub": a - bb, "mul": a * bb, "div": a / bb,
                   "rem": np.fmod(a64, b64).astype(dt)}[op]
        np.testing.assert_array_equal(out, ref)


def test_f16_arithmetic_rounds_per_op():
    a = RNG.uniform(-4, 4, 300).astype(np.float16)
    c = RNG.uniform(-4, 4, 300).astype(np.float16)
    out = apply(lambda b, x, y: b.add(b.mul(x, y), x), [a, c], [f16, f16], f16)
    a64, c64 = a.astype(np.float64), c.astype(np.float64)
    ref = ((a64 * c64).astype(np.float16).astype(np.float64) + a64).astype(np.float16)
    np.testing.assert_array_equal(out, ref)


UNARY_REF = {
    "neg": lambda x: -x, "abs": abs, "sqrt": math.sqrt, "rsqrt": lambda x: 1 / math.sqrt(x),
    "exp": math.exp, "log": math.log, "log1p": math.log1p, "sin": math.sin, "cos": math.cos,
    "tanh": math.tanh, "erf": math.erf, "floor": math.floor, "ceil": math.ceil,
    "round": round,  # Python's round is half to even
}


@pytest.mark.parametrize("t", [f32, f64, f16])
@pytest.mark.parametrize("op", sorted(UNARY_REF))
def test_unary_math(t, op):
    if op in ("sqrt", "rsqrt", "log"):
        x = RNG.uniform(0.01, 50, 400)
    elif op == "log1p":
        x = RNG.uniform(-0.99, 50, 400)
    elif op == "exp":
        x = RNG.uniform(-10, 10, 400)
    else:
        x = RNG.uniform(-8, 8, 400)
    if op == "round":
        x[:6] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5]
    x = x.astype(t.np)
    out = apply(lambda b, v: b.unary(op, v), [x], [t], t)
    ref = np.array([float(UNARY_REF[op](v)) for v in x.astype(np.float64).tolist()])
    rtol = {f64: 1e-14, f32: 2e-7, f16: 1e-3}[t]
    np.testing.assert_allclose(out.astype(np.float64), ref.astype(t.np).astype(np.float64),
                               rtol=rtol, atol=0 if op not in ("sin", "cos", "erf") else rtol)
    if op == "round":
        assert out[:6].tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, -2.0]


def test_unary_specials():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], np.float64)
    assert np.isnan(apply(lambda b, v: b.unary("erf", v), [x], [f64], f64)[0])
    np.testing.assert_array_equal(apply(lambda b, v: b.unary("erf", v), [x], [f64], f64)[1:3],
                                  [1.0, -1.0])
    r = apply(lambda b, v: b.unary("rsqrt", v), [x], [f64], f64)
    assert r[1] == 0.0 and r[3] == np.inf


def test_lines_and_broadcast():
    n = 64
    x = RNG.standard_normal(n * 4).astype(np.float32)
    y = RNG.standard_normal(n * 4).astype(np.float32)
    v4 = Vec(f32, 4)
    b = Builder("lines")
    px, py, out = b.array("x", v4), b.array("y", v4), b.array("out", v4)
    s = b.scalar_param_value(b.scalar("s", f32))
    i = b.builtin("ABSOLUTE_POS")
    with b.if_(b.lt(i, b.len(out))):
        a, c = b.load(px, i), b.load(py, i)
        t = b.add(b.mul(a, s), 1.5)  # line * scalar param, line + literal
        t = b.select(b.lt(a, c), t, c)  # lane-wise select
        e = b.extract(a, 2)
        t = b.insert(t, 0, b.add(e, b.extract(c, 3)))
        b.store(out, i, t)
    o = np.zeros(n * 4, np.float32)
    launch(b.finish(), n, [x, y, o, 3.0])
    xr, yr = x.reshape(n, 4), y.reshape(n, 4)
    ref = np.where(xr < yr, xr * np.float32(3) + np.float32(1.5), yr)
    ref[:, 0] = xr[:, 2] + yr[:, 3]
    np.testing.assert_array_equal(o.reshape(n, 4), ref)


def test_line_scalar_select_and_splat_cast():
    b = Builder("splat")
    out = b.array("out", Vec(f32, 4))
    i = b.builtin("ABSOLUTE_POS")
    ii = b.cast(i, i32)
    line = b.cast(ii, Vec(f32, 4))  # int scalar -> f32 line: convert and splat
    odd = b.binary("eq", b.binary("rem", ii, 2), 1)
    b.store(out, i, b.select(odd, line, b.unary("neg", line)))
    o = np.zeros(4 * 8, np.float32)
    run(b.finish(), (1,), (8,), [o])
    ref = np.array([[k if k % 2 else -k] * 4 for k in range(8)], np.float32)
    np.testing.assert_array_equal(o.reshape(8, 4), ref)


# ---- integers --------------------------------------------------------------------------------

@pytest.mark.parametrize("t", [i8, i32, i64, u8, u32])
def test_int_div_rem(t):
    info = np.iinfo(t.np)
    lo, hi = max(int(info.min), -1000), min(int(info.max), 1000)
    a = RNG.integers(lo, hi, 400, endpoint=True).astype(t.np)
    c = RNG.integers(max(lo, -20), 20, 400, endpoint=True).astype(t.np)
    a[:5] = [info.min, info.min, info.max, 7 if t.is_signed else 9, 0]
    c[:5] = [-1 if t.is_signed else 1, 0, 0, -2 if t.is_signed else 4, 0]
    q = apply(lambda b, x, y: b.div(x, y), [a, c], [t, t], t)
    r = apply(lambda b, x, y: b.binary("rem", x, y), [a, c], [t, t], t)
    al, cl = a.tolist(), c.tolist()
    ref_q = [wrap(c_div(x, y), t.bits, t.is_signed) for x, y in zip(al, cl, strict=True)]
    ref_r = [0 if y == 0 else wrap(x - c_div(x, y) * y, t.bits, t.is_signed)
             for x, y in zip(al, cl, strict=True)]
    assert q.tolist() == ref_q
    assert r.tolist() == ref_r
    if t.is_signed:
        assert q[0] == info.min  # INT_MIN / -1 wraps
        assert (q[3], r[3]) == (-3, 1)  # 7 / -2: toward zero, remainder takes the dividend's sign


@pytest.mark.parametrize("t", [i8, i32, i64, u8, u32])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "and", "or", "xor"])
def test_int_wraparound(t, op):
    info = np.iinfo(t.np)
    a = RNG.integers(info.min, info.max, 300, endpoint=True, dtype=t.np)
    c = RNG.integers(info.min, info.max, 300, endpoint=True, dtype=t.np)
    out = apply(lambda b, x, y: b.binary(op, x, y), [a, c], [t, t], t)
    f = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
         "and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y}[op]
    assert out.tolist() == [wrap(f(x, y), t.bits, t.is_signed)
                            for x, y in zip(a.tolist(), c.tolist(), strict=True)]


@pytest.mark.parametrize("t", [i8, i32, i64, u8, u32])
def test_shifts(t):
    info = np.iinfo(t.np)
    a = RNG.integers(info.min, info.max, 300, endpoint=True, dtype=t.np)
    hi = min(int(info.max), 3 * t.bits)
    c = RNG.integers(-5 if t.is_signed else 0, hi, 300, endpoint=True).astype(t.np)
    c[:4] = [0, t.bits - 1, t.bits, t.bits + 1]
    shl = apply(lambda b, x, y: b.binary("shl", x, y), [a, c], [t, t], t)
    shr = apply(lambda b, x, y: b.binary("shr", x, y), [a, c], [t, t], t)
    for x, y, left, right in zip(a.tolist(), c.tolist(), shl.tolist(), shr.tolist(),
                                 strict=True):
        s = y % t.bits  # counts are taken modulo the width (two's complement bits)
        assert left == wrap(x << s, t.bits, t.is_signed)
        assert right == x >> s  # Python's >> is arithmetic; unsigned x is >= 0 (logical)


def test_int_unary_pow_and_compare():
    a = np.array([-(2**31), -5, -1, 0, 1, 7, 2**31 - 1], np.int32)
    e = np.array([3, 2, -3, 0, -1, 11, 2], np.int32)
    assert apply(lambda b, x: b.unary("neg", x), [a], [i32], i32).tolist() == \
        [wrap(-x, 32, True) for x in a.tolist()]
    assert apply(lambda b, x: b.unary("abs", x), [a], [i32], i32).tolist() == \
        [wrap(abs(x), 32, True) for x in a.tolist()]
    assert apply(lambda b, x: b.unary("bitnot", x), [a], [i32], i32).tolist() == \
        [~x for x in a.tolist()]
    p = apply(lambda b, x, y: b.binary("pow", x, y), [a, e], [i32, i32], i32)
    # wrapping powers; a negative exponent truncates the real result (1, -1 or 0)
    assert p.tolist() == [0, 25, -1, 1, 1, 7**11, 1]
    for op, f in (("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                  ("ge", np.greater_equal), ("eq", np.equal), ("ne", np.not_equal)):
        out = apply(lambda b, x, y, op=op: b.binary(op, x, y), [a, e], [i32, i32], boolean)
        np.testing.assert_array_equal(out, f(a, e))
    x = np.array([np.nan, 1.0, 2.0], np.float32)
    y = np.array([np.nan, 1.0, np.nan], np.float32)
    assert apply(lambda b, p, q: b.binary("ne", p, q), [x, y], [f32, f32],
                 boolean).tolist() == [True, False, True]
    assert apply(lambda b, p, q: b.binary("eq", p, q), [x, y], [f32, f32],
                 boolean).tolist() == [False, True, False]
    n = apply(lambda b, v: b.unary("not", v), [np.array([True, False])], [boolean], boolean)
    assert n.tolist() == [False, True]


def test_ternary():
    a = RNG.standard_normal(200).astype(np.float32)
    c = RNG.standard_normal(200).astype(np.float32)
    d = RNG.standard_normal(200).astype(np.float32)
    out = apply(lambda b, x, y, z: b.fma(x, y, z), [a, c, d], [f32] * 3, f32)
    ref = (a.astype(np.float64) * c + d.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(out, ref)
    x = np.array([-3.0, 0.5, 9.0, np.nan], np.float32)
    cl = apply(lambda b, v: b.ternary("clamp", v, 0.0, 1.0), [x], [f32], f32)
    np.testing.assert_array_equal(cl, [0.0, 0.5, 1.0, 0.0])  # min(max(NaN, 0), 1) = 0
    xi = np.array([-3, 5, 12], np.int32)
    assert apply(lambda b, v: b.ternary("clamp", v, 0, 10), [xi], [i32], i32).tolist() == \
        [0, 5, 10]
    assert apply(lambda b, v: b.ternary("fma", v, 3, 1), [xi], [i32], i32).tolist() == \
        [-8, 16, 37]


# ---- casts -----------------------------------------------------------------------------------

def test_casts_float_int():
    x = np.array([-2.7, -0.5, 0.5, 2.7, 126.9, -128.9, 1e6], np.float32)
    out = apply(lambda b, v: b.cast(v, i32), [x], [f32], i32)
    assert out.tolist() == [int(v) for v in x.tolist()]  # int() truncates toward zero
    out8 = apply(lambda b, v: b.cast(v, u8), [x[2:5]], [f32], u8)
    assert out8.tolist() == [0, 2, 126]
    big = np.array([16777217, -16777219, 3], np.int32)
    np.testing.assert_array_equal(apply(lambda b, v: b.cast(v, f32), [big], [i32], f32),
                                  [16777216.0, -16777220.0, 3.0])  # round to nearest even
    w = np.array([300, -1, 255, -129], np.int32)
    assert apply(lambda b, v: b.cast(v, u8), [w], [i32], u8).tolist() == [44, 255, 255, 127]
    s = np.array([-128, -1, 5], np.int8)
    assert apply(lambda b, v: b.cast(v, i64), [s], [i8], i64).tolist() == [-128, -1, 5]
    u = np.array([2**32 - 1, 2**31], np.uint32)
    assert apply(lambda b, v: b.cast(v, i32), [u], [u32], i32).tolist() == [-1, -(2**31)]
    # out of range / NaN: not promised by the IR, but must not crash
    apply(lambda b, v: b.cast(v, i32), [np.array([np.nan, 1e20, -np.inf], np.float32)],
          [f32], i32)


def test_casts_f16_round_to_nearest_even():
    one = 1.0
    x = np.array([one + 2**-11, one + 3 * 2**-11, one + 2**-11 + 2**-30, 65520.0, 1e-8,
                  -(one + 2**-11)], np.float64)
    out = apply(lambda b, v: b.cast(v, f16), [x], [f64], f16)
    ref = [1.0, 1.0 + 2**-9, 1.0 + 2**-10, math.inf, 0.0, -1.0]
    assert out.astype(np.float64).tolist() == ref


def test_casts_bf16():
    # random f32 bit patterns (no NaN) stored as bf16 round to nearest even
    bits = RNG.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[~np.isnan(x)]
    ties = np.array([0x3F808000, 0x3F818000, 0x3F80_7FFF, 0x3F80_8001, 0x7F7FFFFF,
                     0x00008000, 0x00018000, 0x80000000], np.uint32).view(np.float32)
    x = np.concatenate([ties, x])
    out = apply(lambda b, v: b.cast(v, bf16), [x], [f32], bf16, out_dtype=np.uint16)
    np.testing.assert_array_equal(out, bf16_bits_ref(x))
    assert out[:4].tolist() == [0x3F80, 0x3F82, 0x3F80, 0x3F81]
    # NaN stays NaN
    nan = apply(lambda b, v: b.cast(v, bf16), [np.array([np.nan], np.float32)], [f32], bf16,
                out_dtype=np.uint16)
    assert np.isnan(bf16_to_f32(nan)[0])
    # bf16 -> f32 is exact (bits << 16); bf16 -> i32 truncates
    h = bf16_bits_ref(RNG.standard_normal(300).astype(np.float32) * 100)
    np.testing.assert_array_equal(apply(lambda b, v: b.cast(v, f32), [h], [bf16], f32),
                                  bf16_to_f32(h))
    assert apply(lambda b, v: b.cast(v, i32), [h], [bf16], i32).tolist() == \
        [int(v) for v in bf16_to_f32(h).tolist()]


def test_bf16_arithmetic_rounds_each_result():
    a = bf16_bits_ref(RNG.standard_normal(500).astype(np.float32))
    c = bf16_bits_ref(RNG.standard_normal(500).astype(np.float32) * 1000)
    fa, fc = bf16_to_f32(a), bf16_to_f32(c)
    mul = apply(lambda b, x, y: b.mul(x, y), [a, c], [bf16, bf16], bf16, out_dtype=np.uint16)
    np.testing.assert_array_equal(mul, bf16_bits_ref(fa * fc))
    # (a + c) * a with the intermediate rounded to bf16
    chain = apply(lambda b, x, y: b.mul(b.add(x, y), x), [a, c], [bf16, bf16], bf16,
                  out_dtype=np.uint16)
    mid = bf16_to_f32(bf16_bits_ref(fa + fc))
    np.testing.assert_array_equal(chain, bf16_bits_ref(mid * fa))
    # a literal in bf16 arithmetic is rounded to bf16 too: 1.001 -> 1.0
    lit = apply(lambda b, x: b.mul(x, 1.001), [a], [bf16], bf16, out_dtype=np.uint16)
    np.testing.assert_array_equal(lit, a)


def test_casts_bool():
    x = np.array([0.0, -0.0, 0.1, np.nan, -3.0], np.float32)
    assert apply(lambda b, v: b.cast(v, boolean), [x], [f32], boolean).tolist() == \
        [False, False, True, True, True]
    xi = np.array([0, 5, -1], np.int32)
    assert apply(lambda b, v: b.cast(v, boolean), [xi], [i32], boolean).tolist() == \
        [False, True, True]
    bo = np.array([True, False, True])
    assert apply(lambda b, v: b.cast(v, i32), [bo], [boolean], i32).tolist() == [1, 0, 1]
    assert apply(lambda b, v: b.cast(v, f32), [bo], [boolean], f32).tolist() == [1.0, 0.0, 1.0]
    assert apply(lambda b, v: b.cast(v, bf16), [bo], [boolean], bf16,
                 out_dtype=np.uint16).tolist() == [0x3F80, 0, 0x3F80]


# ---- scalars, builtins, meta -----------------------------------------------------------------

def test_scalar_params():
    b = Builder("scalars")
    out_i, out_f = b.array("oi", i32), b.array("of", f32)
    out_u = b.array("ou", u32)
    si, sf, su = b.scalar("si", i32), b.scalar("sf", f32), b.scalar("su", u32)
    b.store(out_i, 0, b.scalar_param_value(si))
    b.store(out_f, 0, b.scalar_param_value(sf))
    b.store(out_u, 0, b.scalar_param_value(su))
    oi, of, ou = np.zeros(1, np.int32), np.zeros(1, np.float32), np.zeros(1, np.uint32)
    run(b.finish(), (1,), (1,), [oi, of, ou, -42, 0.1, -1])
    assert oi[0] == -42 and of[0] == np.float32(0.1) and ou[0] == 2**32 - 1


BUILTIN_NAMES = sorted(ir.BUILTINS)


def test_builtins_3d():
    b = Builder("builtins", plane_size=4)
    out = b.array("out", u32)
    g = b.builtin("ABSOLUTE_POS")
    base = b.mul(g, len(BUILTIN_NAMES))
    for k, name in enumerate(BUILTIN_NAMES):
        b.store(out, b.add(base, k), b.builtin(name))
    cc, cd = (2, 3, 2), (3, 2, 5)  # 30 units per cube: a partial last plane of 4
    n = 12 * 30
    out_a = np.zeros(n * len(BUILTIN_NAMES), np.uint32)
    run(b.finish(), cc, cd, [out_a])
    got = out_a.reshape(n, len(BUILTIN_NAMES))
    rows = {}
    for cz in range(2):
        for cy in range(3):
            for cx in range(2):
                for uz in range(5):
                    for uy in range(2):
                        for ux in range(3):
                            cube = cx + cy * 2 + cz * 6
                            unit = ux + uy * 3 + uz * 6
                            rows[cube * 30 + unit] = {
                                "UNIT_POS": unit, "UNIT_POS_X": ux, "UNIT_POS_Y": uy,
                                "UNIT_POS_Z": uz, "CUBE_POS": cube, "CUBE_POS_X": cx,
                                "CUBE_POS_Y": cy, "CUBE_POS_Z": cz, "CUBE_DIM": 30,
                                "CUBE_DIM_X": 3, "CUBE_DIM_Y": 2, "CUBE_DIM_Z": 5,
                                "CUBE_COUNT": 12, "CUBE_COUNT_X": 2, "CUBE_COUNT_Y": 3,
                                "CUBE_COUNT_Z": 2, "ABSOLUTE_POS": cube * 30 + unit,
                                "ABSOLUTE_POS_X": cx * 3 + ux, "ABSOLUTE_POS_Y": cy * 2 + uy,
                                "ABSOLUTE_POS_Z": cz * 5 + uz, "PLANE_DIM": 4,
                                "UNIT_POS_PLANE": unit % 4}
    assert len(rows) == n
    for g_, row in rows.items():
        assert got[g_].tolist() == [row[nm] for nm in BUILTIN_NAMES], g_


def test_tensor_meta_and_len():
    b = Builder("meta")
    t = b.tensor("t", f32, 3)
    lines = b.array("lines", Vec(f32, 4))
    out = b.array("out", u32)
    u = b.builtin("UNIT_POS")
    b.store(out, b.mul(u, 2), b.shape(t, u))  # runtime dim, 3..5 out of range
    b.store(out, b.add(b.mul(u, 2), 1), b.stride(t, u))
    with b.if_(b.binary("eq", u, 0)):
        b.store(out, 12, b.shape(t, 2))
        b.store(out, 13, b.len(t))
        b.store(out, 14, b.len(lines))
    o = np.zeros(15, np.uint32)
    data = np.zeros(24, np.float32)
    run(b.finish(), (1,), (6,), [(data, (2, 3, 4), (1, 2, 6)), np.zeros(32, np.float32), o])
    assert o.tolist() == [2, 1, 3, 2, 4, 6, 0, 0, 0, 0, 0, 0, 4, 24, 8]


# ---- control flow ----------------------------------------------------------------------------

def test_if_else_and_masked_vars():
    b = Builder("ifelse")
    x, out = b.array("x", i32), b.array("out", i32)
    i = b.builtin("ABSOLUTE_POS")
    v = b.load(x, i)
    acc = b.var(i32)
    b.assign(acc, 100)
    with b.if_(b.binary("gt", v, 0)) as h:
        b.assign(acc, b.mul(v, 2))
        with h.else_():
            with b.if_(b.binary("lt", v, -5)):
                b.assign(acc, b.unary("neg", v))
    b.store(out, i, acc)
    xs = RNG.integers(-20, 20, 300).astype(np.int32)
    o = np.zeros(300, np.int32)
    run(b.finish(), (3,), (100,), [xs, o])
    assert o.tolist() == [2 * v if v > 0 else -v if v < -5 else 100 for v in xs.tolist()]


def test_loop_break_collatz():
    b = Builder("collatz")
    out = b.array("out", u32)
    i = b.builtin("ABSOLUTE_POS")
    x, steps = b.var(u32), b.var(u32)
    b.assign(x, b.add(i, 1))
    b.assign(steps, 0)
    with b.loop():
        with b.if_(b.binary("eq", x, 1)):
            b.break_()
        even = b.binary("eq", b.binary("and", x, 1), 0)
        b.assign(x, b.select(even, b.binary("shr", x, 1), b.add(b.mul(x, 3), 1)))
        b.assign(steps, b.add(steps, 1))
    b.store(out, i, steps)
    n = 1000
    o = np.zeros(n, np.uint32)
    launch(b.finish(), n, [o], block=125)

    def ref(v):
        s = 0
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            s += 1
        return s

    assert o.tolist() == [ref(k + 1) for k in range(n)]


def test_range_negative_step_and_continue():
    b = Builder("rng")
    out = b.array("out", i32)
    i = b.cast(b.builtin("ABSOLUTE_POS"), i32)
    acc = b.var(i32)
    b.assign(acc, 0)
    with b.range(i, -1, -2) as k:  # i, i-2, ... > -1
        with b.if_(b.binary("eq", b.binary("rem", k, 3), 0)):
            b.continue_()
        b.assign(acc, b.add(b.mul(acc, 3), k))
    b.store(out, b.builtin("ABSOLUTE_POS"), acc)
    o = np.zeros(50, np.int32)
    launch(b.finish(), 50, [o], block=10)

    def ref(v):
        a = 0
        for k in range(v, -1, -2):
            if k % 3 == 0:
                continue
            a = wrap(a * 3 + k, 32, True)
        return a

    assert o.tolist() == [ref(v) for v in range(50)]


def test_nested_loops_break_inner_only():
    b = Builder("nested")
    out = b.array("out", u32)
    g = b.builtin("ABSOLUTE_POS")
    acc = b.var(u32)
    b.assign(acc, 0)
    with b.range(0, g, 1, t=u32) as a:
        with b.range(0, 100, 1, t=u32) as c:
            with b.if_(b.binary("gt", c, a)):
                b.break_()
            b.assign(acc, b.add(acc, c))
        b.assign(acc, b.add(acc, 1000))
    b.store(out, g, acc)
    o = np.zeros(20, np.uint32)
    launch(b.finish(), 20, [o], block=10)
    assert o.tolist() == [sum(sum(range(a + 1)) + 1000 for a in range(g)) for g in range(20)]


def test_return():
    b = Builder("ret")
    out = b.array("out", i32)
    g = b.builtin("ABSOLUTE_POS")
    b.store(out, g, 1)
    with b.if_(b.binary("eq", b.binary("rem", g, 3), 0)):
        b.return_()
    b.store(out, g, 2)
    with b.loop():  # a return inside a loop leaves the kernel, not just the loop
        with b.if_(b.binary("eq", b.binary("rem", g, 3), 1)):
            b.return_()
        b.break_()
    b.store(out, g, 3)
    o = np.zeros(30, np.int32)
    launch(b.finish(), 30, [o], block=10)
    assert o.tolist() == [[1, 2, 3][v % 3] for v in range(30)]


def test_infinite_loop_is_reported(monkeypatch):
    import cube_ir.interpreter as interp
    monkeypatch.setattr(interp, "MAX_LOOP_ITERATIONS", 500)
    b = Builder("forever")
    out = b.array("out", u32)
    with b.loop():
        b.store(out, 0, 1)
    with pytest.raises(IRError, match="still running after 500 iterations"):
        run(b.finish(), (1,), (2,), [np.zeros(1, np.uint32)])


# ---- memory ----------------------------------------------------------------------------------

def test_shared_tree_reduction():
    dim, cubes = 256, 5
    b = Builder("reduce")
    x, out = b.array("x", i32), b.array("out", i32)
    sh = b.shared(i32, dim)
    u, g = b.builtin("UNIT_POS"), b.builtin("ABSOLUTE_POS")
    b.store(sh, u, b.load(x, g))
    b.sync_cube()
    stride = b.var(u32)
    b.assign(stride, dim // 2)
    with b.loop():
        with b.if_(b.binary("eq", stride, 0)):
            b.break_()
        with b.if_(b.lt(u, stride)):
            b.store(sh, u, b.add(b.load(sh, u), b.load(sh, b.add(u, stride))))
        b.sync_cube()
        b.assign(stride, b.binary("shr", stride, 1))
    with b.if_(b.binary("eq", u, 0)):
        b.store(out, b.builtin("CUBE_POS"), b.load(sh, 0))
    k = b.finish()
    assert k.uses_barrier()
    xs = RNG.integers(-1000, 1000, dim * cubes).astype(np.int32)
    o = np.zeros(cubes, np.int32)
    run(k, (cubes,), (dim,), [xs, o])
    assert o.tolist() == xs.reshape(cubes, dim).sum(axis=1).tolist()


def test_shared_memory_is_per_cube():
    b = Builder("percube")
    out = b.array("out", u32)
    sh = b.shared(u32, 1)
    u, c = b.builtin("UNIT_POS"), b.builtin("CUBE_POS")
    with b.if_(b.binary("eq", u, 0)):
        b.store(sh, 0, b.mul(c, 10))
    b.sync_cube()
    b.store(out, b.builtin("ABSOLUTE_POS"), b.add(b.load(sh, 0), u))
    o = np.zeros(12, np.uint32)
    run(b.finish(), (3,), (4,), [o])
    assert o.tolist() == [c * 10 + u for c in range(3) for u in range(4)]


def test_local_arrays():
    b = Builder("local")
    x, out = b.array("x", i32), b.array("out", i32)
    lines_out = b.array("lo", Vec(i32, 2))
    loc = b.local(i32, 4)
    lv = b.local(Vec(i32, 2), 2)
    g = b.builtin("ABSOLUTE_POS")
    with b.range(0, 4, 1, t=u32) as k:
        b.store(loc, k, b.load(x, b.add(b.mul(g, 4), k)))
    with b.range(0, 4, 1, t=u32) as k:  # reversed copy
        b.store(out, b.add(b.mul(g, 4), k), b.load(loc, b.sub(3, k)))
    b.store(lv, 1, b.cast(b.cast(g, i32), Vec(i32, 2)))
    b.store(lv, 0, b.load(lv, 1))
    b.store(lines_out, g, b.add(b.load(lv, 0), b.load(lv, 1)))
    n = 50
    xs = RNG.integers(-99, 99, 4 * n).astype(np.int32)
    o, lo = np.zeros(4 * n, np.int32), np.zeros(2 * n, np.int32)
    launch(b.finish(), n, [xs, o, lo], block=10)
    np.testing.assert_array_equal(o.reshape(n, 4), xs.reshape(n, 4)[:, ::-1])
    np.testing.assert_array_equal(lo.reshape(n, 2), np.repeat(2 * np.arange(n), 2).reshape(n, 2))


def test_out_of_bounds_raises():
    k = map_kernel([f32], f32, lambda b, v: v)  # guarded by len(out), not len(in0)
    with pytest.raises(IRError, match=r"out-of-bounds load: index 10 of @in0 \(size 10\)"):
        run(k, (1,), (16,), [np.zeros(10, np.float32), np.zeros(16, np.float32)])
    b = Builder("oob_store")
    out = b.array("out", f32)
    b.store(out, b.builtin("ABSOLUTE_POS"), 1.0)
    with pytest.raises(IRError, match=r"out-of-bounds store: index 8 of @out \(size 8\)"):
        run(b.finish(), (1,), (9,), [np.zeros(8, np.float32)])
    b = Builder("neg")
    out = b.array("out", i32)
    idx = b.sub(b.cast(b.builtin("UNIT_POS"), i32), 2)
    b.store(out, idx, 1)
    with pytest.raises(IRError, match="index -2 of @out"):
        run(b.finish(), (1,), (4,), [np.zeros(8, np.int32)])
    b = Builder("shared_oob")
    sh = b.shared(f32, 4)
    b.store(sh, b.builtin("UNIT_POS"), 1.0)
    with pytest.raises(IRError, match="out-of-bounds store: index 4"):
        run(b.finish(), (1,), (5,), [])
    # inactive units may hold any index
    o = np.zeros(4, np.float32)
    run(map_kernel([f32], f32, lambda b, v: v), (1,), (64,), [np.ones(4, np.float32), o])
    assert o.tolist() == [1.0] * 4


# ---- atomics ---------------------------------------------------------------------------------

def test_atomic_histogram_and_counter():
    n, bins = 5000, 16
    b = Builder("hist")
    xs, hist = b.array("x", u32), b.array("hist", u32)
    counter, tickets = b.array("counter", u32), b.array("tickets", u32)
    g = b.builtin("ABSOLUTE_POS")
    with b.if_(b.lt(g, b.len(xs))):
        b.atomic("add", hist, b.load(xs, g), 1, want_result=False)
        b.store(tickets, g, b.atomic("add", counter, 0, 1))
    vals = RNG.integers(0, bins, n).astype(np.uint32)
    h, c, t = np.zeros(bins, np.uint32), np.zeros(1, np.uint32), np.zeros(n, np.uint32)
    launch(b.finish(), n, [vals, h, c, t], block=256)
    np.testing.assert_array_equal(h, np.bincount(vals, minlength=bins))
    assert c[0] == n
    np.testing.assert_array_equal(np.sort(t), np.arange(n))


@pytest.mark.parametrize("t", [i32, u32, i64])
@pytest.mark.parametrize("op", ["add", "sub", "min", "max", "and", "or", "xor", "exchange"])
def test_atomic_ops_sequential(t, op):
    """Any sequential order gives the final value; old values form a chain from the start."""
    n = 300
    info = np.iinfo(t.np)
    b = Builder("atomics")
    mem, vals, olds = b.array("mem", t), b.array("vals", t), b.array("olds", t)
    g = b.builtin("ABSOLUTE_POS")
    with b.if_(b.lt(g, b.len(vals))):
        with b.if_(b.binary("ne", b.binary("rem", g, 7), 3)):  # some units inactive
            b.store(olds, g, b.atomic(op, mem, b.binary("rem", g, 3), b.load(vals, g)))
    lo = max(int(info.min), -(2**40))
    hi = min(int(info.max), 2**40)
    vs = RNG.integers(lo, hi, n).astype(t.np)
    init = RNG.integers(lo, hi, 3).astype(t.np)
    m, o = init.copy(), np.zeros(n, t.np)
    launch(b.finish(), n, [m, vs, o], block=64)
    fn = {"add": lambda a, v: a + v, "sub": lambda a, v: a - v, "min": min, "max": max,
          "and": lambda a, v: a & v, "or": lambda a, v: a | v, "xor": lambda a, v: a ^ v,
          "exchange": lambda a, v: v}[op]
    for slot in range(3):
        units = [u for u in range(n) if u % 3 == slot and u % 7 != 3]
        cur = int(init[slot])
        for u in units:  # the interpreter applies units in linear order
            assert int(o[u]) == cur, (slot, u)
            cur = wrap(fn(cur, int(vs[u])), t.bits, t.is_signed)
        assert int(m[slot]) == cur
    assert all(o[u] == 0 for u in range(n) if u % 7 == 3)


def test_atomic_cas_and_floats():
    n, slots = 200, 8
    b = Builder("cas")
    mem, olds = b.array("mem", i32), b.array("olds", i32)
    fsum, fmin = b.array("fsum", f32), b.array("fmin", f32)
    g = b.builtin("ABSOLUTE_POS")
    gi = b.cast(g, i32)
    b.store(olds, g, b.atomic("cas", mem, b.binary("rem", g, slots), b.add(gi, 1), cmp=0))
    b.atomic("add", fsum, 0, 0.5, want_result=False)
    b.atomic("add", fsum, 1, 0.1, want_result=False)
    b.atomic("min", fmin, 0, b.sub(b.cast(g, f32), 50.0), want_result=False)
    m, o = np.zeros(slots, np.int32), np.zeros(n, np.int32)
    fs, fm = np.zeros(2, np.float32), np.array([np.nan], np.float32)
    launch(b.finish(), n, [m, o, fs, fm], block=40)
    for s in range(slots):
        units = list(range(s, n, slots))
        winners = [u for u in units if o[u] == 0]
        assert len(winners) == 1  # exactly one unit per slot saw the initial 0
        assert m[s] == winners[0] + 1
        assert all(o[u] == winners[0] + 1 for u in units if u != winners[0])
    assert fs[0] == n * 0.5
    seq = np.float32(0)
    for _ in range(n):  # sequential f32 additions
        seq = np.float32(seq + np.float32(0.1))
    assert fs[1] == seq
    assert fm[0] == -50.0  # min ignores the initial NaN (fmin)


def test_atomic_shared_histogram():
    b = Builder("shist")
    xs, out = b.array("x", u32), b.array("out", u32)
    sh = b.shared(u32, 4)
    u, c, g = b.builtin("UNIT_POS"), b.builtin("CUBE_POS"), b.builtin("ABSOLUTE_POS")
    with b.if_(b.lt(u, 4)):
        b.store(sh, u, 0)
    b.sync_cube()
    b.atomic("add", sh, b.load(xs, g), 1, want_result=False)
    b.sync_cube()
    with b.if_(b.lt(u, 4)):
        b.store(out, b.add(b.mul(c, 4), u), b.load(sh, u))
    vals = RNG.integers(0, 4, 6 * 32).astype(np.uint32)
    o = np.zeros(24, np.uint32)
    run(b.finish(), (6,), (32,), [vals, o])
    ref = [np.bincount(vals[k * 32:(k + 1) * 32], minlength=4) for k in range(6)]
    np.testing.assert_array_equal(o.reshape(6, 4), ref)


# ---- plane ops -------------------------------------------------------------------------------

PLANE_OPS = ["sum", "prod", "max", "min", "all", "any", "broadcast", "shuffle", "shuffle_xor",
             "inclusive_sum", "exclusive_sum", "inclusive_prod", "exclusive_prod"]


def plane_ref(op, vals, active, lanes_arg, ps, cube_dim, n):
    """out[u] for every active unit by walking each plane of each cube in Python."""
    out = {}
    for c0 in range(0, n, cube_dim):
        for p0 in range(c0, c0 + cube_dim, ps):
            members = list(range(p0, min(p0 + ps, c0 + cube_dim)))  # a partial last plane
            act = [u for u in members if active[u]]
            for u in act:
                lane = u - p0
                if op in ("sum", "prod", "max", "min", "all", "any"):
                    vs = [vals[a] for a in act]
                    r = {"sum": sum, "prod": math.prod, "max": max, "min": min,
                         "all": lambda x: int(all(x)), "any": lambda x: int(any(x))}[op](vs)
                elif op in ("broadcast", "shuffle", "shuffle_xor"):
                    src = lanes_arg[u] ^ lane if op == "shuffle_xor" else lanes_arg[u]
                    ok = 0 <= src < ps and p0 + src < c0 + cube_dim and active[p0 + src]
                    r = vals[p0 + src] if ok else vals[u]
                else:
                    before = [vals[a] for a in act if a - p0 < lane]
                    if op.startswith("inclusive"):
                        before.append(vals[u])
                    r = sum(before) if op.endswith("sum") else math.prod(before)
                out[u] = wrap(r, 32, True)
    return out


@pytest.mark.parametrize("ps", [1, 4, 32])
@pytest.mark.parametrize("op", PLANE_OPS)
def test_plane_ops(op, ps):
    cube_dim, cubes = 70, 3  # 70 is not a multiple of 4 or 32: partial last planes
    n = cube_dim * cubes
    b = Builder("plane", plane_size=ps)
    x, act, lanes, out = (b.array(nm, i32) for nm in ("x", "act", "lanes", "out"))
    g = b.builtin("ABSOLUTE_POS")
    v = b.load(x, g)
    with b.if_(b.binary("ne", b.load(act, g), 0)):
        if op in ("all", "any"):
            r = b.cast(b.plane(op, b.binary("gt", v, 0)), i32)
        elif op in ("broadcast", "shuffle", "shuffle_xor"):
            r = b.plane(op, v, b.cast(b.load(lanes, g), u32))
        else:
            r = b.plane(op, v)
        b.store(out, g, r)
    vals = RNG.integers(-3, 4, n).astype(np.int32)
    if op in ("all", "any"):
        vals = np.where(RNG.random(n) < 0.9, np.abs(vals) + 1, -1).astype(np.int32)
    active = (RNG.random(n) < 0.75).astype(np.int32)
    active[:ps] = 1  # at least one full plane
    lanes_arg = RNG.integers(0, ps + 3, n).astype(np.int32)
    if op == "broadcast":
        lanes_arg[:] = min(1, ps - 1)
    o = np.full(n, -999, np.int32)
    run(b.finish(), (cubes,), (cube_dim,), [vals, active, lanes_arg, o])
    vl = vals.tolist()
    if op in ("all", "any"):
        vl = [int(v > 0) for v in vl]
    ref = plane_ref(op, vl, active.tolist(), lanes_arg.tolist(), ps, cube_dim, n)
    got = {u: int(o[u]) for u in range(n) if active[u]}
    assert got == ref
    assert all(o[u] == -999 for u in range(n) if not active[u])


def test_plane_ops_float_and_lines():
    ps, n = 8, 24
    b = Builder("plane_f", plane_size=ps)
    x, out = b.array("x", f32), b.array("out", f32)
    xl, outl = b.array("xl", Vec(i32, 2)), b.array("outl", Vec(i32, 2))
    fmax = b.array("fmax", f32)
    g = b.builtin("ABSOLUTE_POS")
    b.store(out, g, b.plane("sum", b.load(x, g)))
    b.store(fmax, g, b.plane("max", b.load(x, g)))
    b.store(outl, g, b.plane("inclusive_sum", b.load(xl, g)))
    xs = RNG.standard_normal(n).astype(np.float32)
    xs[3] = np.nan  # max ignores NaN like fmax; sum propagates it
    xls = RNG.integers(-9, 9, 2 * n).astype(np.int32)
    o, ol, fm = np.zeros(n, np.float32), np.zeros(2 * n, np.int32), np.zeros(n, np.float32)
    run(b.finish(), (1,), (n,), [xs, o, xls, ol, fm])
    for p in range(0, n, ps):
        grp = xs[p:p + ps].astype(np.float64)
        ref = np.float32(grp.sum())
        if p == 0:
            assert np.isnan(o[:ps]).all()
            assert (fm[:ps] == np.float32(np.nanmax(grp))).all()
        else:
            np.testing.assert_allclose(o[p:p + ps], ref, rtol=1e-6)
            assert (fm[p:p + ps] == xs[p:p + ps].max()).all()
    ref_l = np.concatenate([np.cumsum(xls.reshape(n, 2)[p:p + ps], axis=0)
                            for p in range(0, n, ps)])
    np.testing.assert_array_equal(ol.reshape(n, 2), ref_l)


def test_plane_size_defaults_to_kernels():
    b = Builder("pd", plane_size=16)
    out = b.array("out", u32)
    g = b.builtin("ABSOLUTE_POS")
    b.store(out, g, b.plane("sum", b.cast(1, u32)))
    o = np.zeros(40, np.uint32)
    run(b.finish(), (1,), (40,), [o])
    assert o.tolist() == [16] * 32 + [8] * 8
    run(b.finish(), (1,), (40,), [o], plane_size=32)
    assert o.tolist() == [32] * 32 + [8] * 8


# ---- the runtime and speed -------------------------------------------------------------------

def test_interp_runtime():
    from runtimes.errors import LaunchError
    from runtimes.interp import InterpRuntime

    rt = InterpRuntime()
    assert rt.name == "interp" and rt.target == "ir" and rt.plane_size == 4
    assert InterpRuntime(plane_size=8).plane_size == 8
    b = Builder("rt", plane_size=4)
    x, t = b.array("x", Vec(f32, 4)), b.tensor("t", f32, 2)
    s = b.scalar_param_value(b.scalar("s", f32))
    g = b.builtin("ABSOLUTE_POS")
    with b.if_(b.lt(g, b.len(x))):
        b.store(x, g, b.mul(b.load(x, g), s))
    with b.if_(b.binary("eq", g, 0)):
        b.store(t, 0, b.cast(b.add(b.shape(t, 0), b.stride(t, 0)), f32))
    k = b.finish()
    assert "store @x" in rt.generate(k)
    exe = rt.compile(k)
    xb = rt.from_numpy(np.arange(16, dtype=np.float32))
    tb = rt.from_numpy(np.zeros((2, 3), np.float32))
    exe.launch((1, 1, 1), (8, 1, 1), [xb.lines(4), tb, 2.0])
    np.testing.assert_array_equal(xb.numpy(), np.arange(16) * 2)
    assert tb.numpy()[0, 0] == 2 + 3
    bad = Builder("bad")
    o = bad.array("o", f32)
    bad.store(o, bad.builtin("ABSOLUTE_POS"), 0.0)
    with pytest.raises(LaunchError, match="out-of-bounds store"):
        rt.compile(bad.finish()).launch((1, 1, 1), (9, 1, 1), [rt.empty(8)])


def test_speed_1e5_units():
    k = map_kernel([f32, f32], f32, lambda b, x, y: b.unary("tanh", b.add(b.mul(x, y), x)))
    n = 100_000
    a, c = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
    o = np.zeros(n, np.float32)
    t0 = time.perf_counter()
    launch(k, n, [a, c, o], block=256)
    assert time.perf_counter() - t0 < 1.0
    np.testing.assert_allclose(o, np.tanh(a.astype(np.float64) * c + a), rtol=1e-5, atol=1e-6)


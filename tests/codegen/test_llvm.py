"""codegen.llvm: kernels built with the IR builder, run on the CPU runtime, checked against
NumPy (float64 references where precision matters). Every generated module is verified by
LLVM itself when the runtime compiles it."""
from __future__ import annotations

import math

import numpy as np
import pytest

from codegen.llvm import emit_module
from cube_ir import ir
from cube_ir.builder import Builder
from cube_ir.types import (
    Scalar,
    bf16,
    boolean,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
    vec,
)

llvm = pytest.importorskip("llvmlite.binding")
from runtimes.cpu import CpuRuntime  # noqa: E402

RT = CpuRuntime()
RNG = np.random.default_rng(7)


# ---- helpers -----------------------------------------------------------------------------

def to_bf16(x) -> np.ndarray:
    """float values -> bf16 bits (uint16), round to nearest even."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    nan = np.isnan(np.asarray(x, np.float32))
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, np.uint16(0x7FC0), r)


def from_bf16(bits) -> np.ndarray:
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def buf(arr, elem: Scalar):
    if elem == bf16:
        return RT.from_numpy(to_bf16(arr), dtype=bf16)
    return RT.from_numpy(np.asarray(arr, elem.np))


def host(b, elem: Scalar) -> np.ndarray:
    a = b.numpy()
    return from_bf16(a) if elem == bf16 else a


def arg(b, lanes: int):
    return b.lines(lanes) if lanes > 1 else b


def elementwise(ins: list[tuple[Scalar, np.ndarray]], outs: list[Scalar], body, lanes=1,
                name="ew", cube_dim=64):
    """out_j[i] = body(b, loaded inputs)[j] over lines of `lanes`; returns host outputs."""
    n = len(ins[0][1])
    b = Builder(name)
    ps = [b.array(f"x{k}", vec(t, lanes)) for k, (t, _) in enumerate(ins)]
    os_ = [b.array(f"y{k}", vec(t, lanes)) for k, t in enumerate(outs)]
    i = b.builtin("ABSOLUTE_POS")
    with b.if_(b.lt(i, b.len(os_[0]))):
        vals = [b.load(p, i) for p in ps]
        res = body(b, *vals)
        for o, r in zip(os_, res):
            b.store(o, i, r)
    exe = RT.compile(b.finish())
    in_bufs = [buf(a, t) for t, a in ins]
    out_bufs = [RT.from_numpy(np.zeros(n, t.np), dtype=t) for t in outs]
    nl = n // lanes
    exe.launch(((nl + cube_dim - 1) // cube_dim, 1, 1), (cube_dim, 1, 1),
               [arg(x, lanes) for x in in_bufs + out_bufs])
    return [host(o, t) for o, t in zip(out_bufs, outs)]


def ulp_err(got, ref, dtype=np.float32) -> float:
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    both_nan = np.isnan(got) & np.isnan(ref)
    same = (got == ref) | both_nan
    spacing = np.spacing(np.abs(ref).astype(dtype)).astype(np.float64)
    tiny = np.finfo(dtype).smallest_subnormal
    with np.errstate(invalid="ignore"):
        err = np.where(same, 0.0, np.abs(got - ref) / np.maximum(spacing, tiny))
    return float(np.nanmax(np.where(np.isnan(err), np.inf, err)))


# ---- module-level checks -----------------------------------------------------------------

def _add_kernel(t=f32):
    b = Builder("add")
    x, y, o = b.array("a", t), b.array("b", t), b.array("out", t)
    i = b.builtin("ABSOLUTE_POS")
    with b.if_(b.lt(i, b.len(o))):
        b.store(o, i, b.add(b.load(x, i), b.load(y, i)))
    return b.finish()


def test_module_text_and_abi():
    m = emit_module(_add_kernel())
    assert m.entry == "cube_add"
    assert f"define void @{m.entry}(ptr" in m.text
    assert [p.offset for p in m.params] == [6, 8, 10] and m.nslots == 12
    assert not m.barrier
    mod = llvm.parse_assembly(m.text)
    mod.verify()


def _offset_kernel(nowrap: bool):
    """out[i] = a[i * s + o]: u32 index arithmetic the kernel may promise never wraps."""
    b = Builder("offset", nowrap=nowrap)
    x, o = b.array("a", f32), b.array("out", f32)
    s, off = b.scalar("s", u32), b.scalar("o", u32)
    i = b.builtin("ABSOLUTE_POS")
    with b.if_(b.lt(i, b.len(o))):
        j = b.add(b.mul(i, b.scalar_param_value(s)), b.scalar_param_value(off))
        b.store(o, i, b.load(x, j))
    return b.finish()


def test_nowrap_kernels_mark_unsigned_index_math():
    """A nowrap kernel's u32 adds and multiplies are compiled no-unsigned-wrap (what lets
    LLVM step pointers through a matmul's K loop); other kernels keep u32's wrapping
    arithmetic (the emitter's own position math is nuw in both). Both gather alike."""
    from cube_ir.printer import format_kernel
    texts = {}
    for nowrap in (False, True):
        k = _offset_kernel(nowrap)
        texts[nowrap] = emit_module(k).text
        assert ("nowrap" in format_kernel(k)) == nowrap  # part of the compile cache key
        a = np.arange(40, dtype=np.float32)
        out = RT.from_numpy(np.zeros(12, np.float32))
        RT.compile(k).launch((1, 1, 1), (16, 1, 1), [RT.from_numpy(a), out, 3, 2])
        np.testing.assert_array_equal(out.numpy(), a[np.arange(12) * 3 + 2])
    assert texts[True].count(" nuw i32") == texts[False].count(" nuw i32") + 2


def test_elementwise_loop_vectorises():
    from runtimes import cpu_jit
    opt = cpu_jit.optimised_ir(emit_module(_add_kernel()).text)
    assert "vector.body" in opt and "x float>" in opt


def test_gelu_lines_vectorise_without_libm_calls():
    from runtimes import cpu_jit
    b = Builder("gelu")
    x, o = b.array("x", vec(f32, 8)), b.array("o", vec(f32, 8))
    i = b.builtin("ABSOLUTE_POS")
    with b.if_(b.lt(i, b.len(o))):
        v = b.load(x, i)
        e = b.unary("erf", b.mul(v, 0.7071067811865476))
        b.store(o, i, b.mul(b.mul(v, 0.5), b.add(e, 1.0)))
    opt = cpu_jit.optimised_ir(emit_module(b.finish()).text)
    assert "call float @erff" not in opt and "@expf" not in opt
    assert "<8 x float>" in opt or "<16 x float>" in opt


# ---- arithmetic --------------------------------------------------------------------------

FLOAT_TYPES = [f32, f64, f16, bf16]
BIN_FLOAT = ["add", "sub", "mul", "div", "rem", "min", "max", "pow"]


def _np_float(t: Scalar):
    return np.float32 if t == bf16 else t.np.type


def _round_to(t: Scalar, x):
    x = np.asarray(x, np.float64)
    if t == bf16:
        return from_bf16(to_bf16(x.astype(np.float32)))
    return x.astype(t.np)


@pytest.mark.parametrize("lanes", [1, 4])
@pytest.mark.parametrize("t", FLOAT_TYPES, ids=str)
def test_float_binary(t, lanes):
    n = 64
    a = _round_to(t, RNG.uniform(0.1, 4, n))
    c = _round_to(t, RNG.uniform(0.1, 4, n) * np.where(RNG.random(n) < 0.5, -1, 1))
    a[:4] = [np.nan, 1.0, np.inf, -0.0]
    c[:4] = [2.0, np.nan, 1.0, 3.0]
    outs = elementwise([(t, a), (t, c)], [t] * len(BIN_FLOAT),
                       lambda b, x, y: [b.binary(op, x, y) for op in BIN_FLOAT], lanes)
    a64, c64 = a.astype(np.float64), c.astype(np.float64)
    with np.errstate(all="ignore"):
        refs = {"add": a64 + c64, "sub": a64 - c64, "mul": a64 * c64, "div": a64 / c64,
                "rem": np.fmod(a64, c64), "min": np.fmin(a64, c64), "max": np.fmax(a64, c64),
                "pow": np.power(a64, c64)}
    for op, got in zip(BIN_FLOAT, outs):
        ref = _round_to(t, refs[op])
        tol = 0 if op in ("add", "sub", "mul", "div", "rem", "min", "max") else 2
        if t in (f16, bf16) and op == "pow":
            tol = 1
        dt = np.float32 if t == bf16 else t.np
        if t == bf16:  # ulps of bf16 are 2^16 f32 ulps
            err = ulp_err(got, ref) / 65536
        else:
            err = ulp_err(got, ref, dt)
        assert err <= tol, (t, op, err)


@pytest.mark.parametrize("t", FLOAT_TYPES, ids=str)
def test_float_compare_select(t):
    n = 32
    a = _round_to(t, RNG.integers(-3, 3, n))
    c = _round_to(t, RNG.integers(-3, 3, n))
    a[0], c[1] = np.nan, np.nan
    ops = ["eq", "ne", "lt", "le", "gt", "ge"]
    outs = elementwise([(t, a), (t, c)], [boolean] * 6 + [t],
                       lambda b, x, y: [b.binary(op, x, y) for op in ops]
                       + [b.select(b.binary("lt", x, y), x, y)])
    with np.errstate(invalid="ignore"):
        refs = [a == c, a != c, a < c, a <= c, a > c, a >= c]
    for op, got, ref in zip(ops, outs, refs):
        assert np.array_equal(got, ref), op
    np.testing.assert_array_equal(outs[-1], np.where(a < c, a, c))


INT_TYPES = [i8, i16, i32, i64, u8, u16, u32, u64]
BIN_INT = ["add", "sub", "mul", "div", "rem", "min", "max", "and", "or", "xor", "shl", "shr"]


def _c_div(x: int, y: int, bits: int, signed: bool) -> int:
    if y == 0:
        return 0
    q = abs(x) // abs(y)
    return _wrap(q if (x < 0) == (y < 0) else -q, bits, signed)


def _c_rem(x: int, y: int, bits: int, signed: bool) -> int:
    if y == 0:
        return 0
    q = abs(x) // abs(y)
    return _wrap(x - y * (q if (x < 0) == (y < 0) else -q), bits, signed)


def _wrap(v: int, bits: int, signed: bool) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v


def _int_ref(op: str, x: int, y: int, bits: int, sg: bool) -> int:
    s = y % bits
    if op == "div":
        return _c_div(x, y, bits, sg)
    if op == "rem":
        return _c_rem(x, y, bits, sg)
    if op == "shl":
        return x << s
    if op == "shr":
        return x >> s if sg else (x % (1 << bits)) >> s
    return {"add": x + y, "sub": x - y, "mul": x * y, "min": min(x, y), "max": max(x, y),
            "and": x & y, "or": x | y, "xor": x ^ y}[op]


@pytest.mark.parametrize("lanes", [1, 8])
@pytest.mark.parametrize("t", INT_TYPES, ids=str)
def test_int_binary(t, lanes):
    n = 64
    info = np.iinfo(t.np)
    a = RNG.integers(info.min, info.max, n, dtype=t.np, endpoint=True)
    c = RNG.integers(info.min, info.max, n, dtype=t.np, endpoint=True)
    c[:8] = 0
    c[8:12] = [1, 2, 3, t.bits + 3]  # shift counts beyond the width wrap
    if t.is_signed:
        a[12], c[12] = info.min, -1  # INT_MIN / -1 wraps, no trap
        c[13] = -7
    outs = elementwise([(t, a), (t, c)], [t] * len(BIN_INT),
                       lambda b, x, y: [b.binary(op, x, y) for op in BIN_INT], lanes)
    bits, sg = t.bits, t.is_signed
    for op, got in zip(BIN_INT, outs):
        ref = [_wrap(_int_ref(op, x, y, bits, sg), bits, sg)
               for x, y in zip(a.tolist(), c.tolist())]
        np.testing.assert_array_equal(got, np.array(ref, t.np), err_msg=op)


@pytest.mark.parametrize("t", [i32, u8, i64], ids=str)
def test_int_unary_compare_pow(t):
    n = 40
    info = np.iinfo(t.np)
    a = RNG.integers(max(info.min, -9), min(info.max, 9), n, dtype=t.np, endpoint=True)
    e = RNG.integers(0, 6, n, dtype=t.np)
    if t.is_signed:
        e[:3] = [-1, -2, -3]
        a[:3] = [1, -1, 2]
    outs = elementwise([(t, a), (t, e)], [t, t, t, boolean, boolean, t],
                       lambda b, x, y: [b.unary("neg", x), b.unary("abs", x),
                                        b.unary("bitnot", x), b.unary("not", x),
                                        b.binary("lt", x, y), b.binary("pow", x, y)])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(outs[0], (-a.astype(np.int64)).astype(t.np))
        np.testing.assert_array_equal(outs[1], np.abs(a.astype(np.int64)).astype(t.np)
                                      if t.is_signed else a)
    np.testing.assert_array_equal(outs[2], ~a)
    np.testing.assert_array_equal(outs[3], a == 0)
    np.testing.assert_array_equal(outs[4], a < e)
    ref = []
    for x, y in zip(a.tolist(), e.tolist()):
        if y < 0:
            r = 1 if x == 1 else ((-1 if y % 2 else 1) if x == -1 else 0)
        else:
            r = x ** y
        ref.append(_wrap(r, t.bits, t.is_signed))
    np.testing.assert_array_equal(outs[5], np.array(ref, t.np))


def test_bool_ops_lines():
    n = 32
    a = RNG.random(n) < 0.5
    c = RNG.random(n) < 0.5
    outs = elementwise([(boolean, a), (boolean, c)], [boolean] * 6,
                       lambda b, x, y: [b.binary("and", x, y), b.binary("or", x, y),
                                        b.binary("xor", x, y), b.unary("not", x),
                                        b.binary("eq", x, y), b.select(x, y, False)], lanes=4)
    refs = [a & c, a | c, a ^ c, ~a, a == c, np.where(a, c, False)]
    for got, ref in zip(outs, refs):
        np.testing.assert_array_equal(got, ref)


# ---- math --------------------------------------------------------------------------------

def _math_inputs(op: str, n: int = 4096) -> np.ndarray:
    r = {"exp": (-110, 95), "log": (0, 1e6), "log1p": (-1, 100), "sin": (-50, 50),
         "cos": (-50, 50), "tanh": (-12, 12), "erf": (-5, 5), "sqrt": (0, 1e4),
         "rsqrt": (1e-4, 1e4), "floor": (-100, 100), "ceil": (-100, 100),
         "round": (-100, 100), "abs": (-5, 5), "neg": (-5, 5)}[op]
    x = RNG.uniform(*r, n)
    extra = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 1e-30, 2.5, -2.5, 0.5, 1.5,
             88.72, 88.73, -87.3, -103.5, 1e-8, -1e-8, 0.625, 0.9277, -0.9278, 3.9, 10.0]
    x[:len(extra)] = extra
    if op == "log":
        x[len(extra):len(extra) + 200] = np.geomspace(1e-45, 1e38, 200)
    if op in ("log1p", "tanh", "erf", "exp"):
        x[len(extra):len(extra) + 200] = np.geomspace(1e-30, 1, 200) * np.where(
            np.arange(200) % 2, -1, 1)
    return x


UNARY_REF = {"exp": np.exp, "log": np.log, "log1p": np.log1p, "sin": np.sin, "cos": np.cos,
             "tanh": np.tanh, "erf": np.vectorize(math.erf, otypes=[float]), "sqrt": np.sqrt,
             "rsqrt": lambda x: 1 / np.sqrt(x), "floor": np.floor, "ceil": np.ceil,
             "round": np.round, "abs": np.abs, "neg": np.negative}
# tanh and erf are one branch-free rational each on the CPU target (codegen/llvm/math.py)
UNARY_ULP_F32 = {"exp": 2, "log": 2, "log1p": 3, "tanh": 6, "erf": 7, "sin": 1, "cos": 1,
                 "sqrt": 0, "rsqrt": 1, "floor": 0, "ceil": 0, "round": 0, "abs": 0, "neg": 0}


def _erf_ref(x):
    out = np.full(x.shape, np.nan)
    ok = ~np.isnan(x)
    out[ok] = [math.erf(v) for v in x[ok]]
    return out


@pytest.mark.parametrize("lanes", [1, 8])
@pytest.mark.parametrize("t", [f32, f64], ids=str)
def test_unary_math(t, lanes):
    ops = list(UNARY_ULP_F32)
    xs = {op: _math_inputs(op).astype(t.np) for op in ops}
    for chunk in (ops[:7], ops[7:]):
        outs = elementwise([(t, xs[op]) for op in chunk], [t] * len(chunk),
                           lambda b, *v, chunk=chunk: [b.unary(op, x) for op, x in zip(chunk, v)],
                           lanes)
        for op, got in zip(chunk, outs):
            x = xs[op].astype(np.float64)
            with np.errstate(all="ignore"):
                ref = _erf_ref(x) if op == "erf" else UNARY_REF[op](x)
            tol = UNARY_ULP_F32[op] if t == f32 else 2  # f64: glibc's own accuracy
            if t == f64 and op in ("floor", "ceil", "round", "abs", "neg", "sqrt"):
                tol = 0
            with np.errstate(over="ignore"):
                err = ulp_err(got, ref.astype(t.np), t.np)
            assert err <= tol, (op, t, err, x[np.argmax(np.abs(got - ref))])


@pytest.mark.parametrize("t", [f16, bf16], ids=str)
def test_unary_math_half(t):
    ops = ["exp", "log", "log1p", "sin", "cos", "tanh", "erf", "sqrt", "rsqrt", "floor",
           "round", "abs"]
    xs = {op: _round_to(t, np.clip(_math_inputs(op, 512), -60000, 60000)) for op in ops}
    outs = elementwise([(t, xs[op]) for op in ops], [t] * len(ops),
                       lambda b, *v: [b.unary(op, x) for op, x in zip(ops, v)], lanes=2)
    for op, got in zip(ops, outs):
        x = xs[op].astype(np.float64)
        with np.errstate(all="ignore"):
            ref = _round_to(t, _erf_ref(x) if op == "erf" else UNARY_REF[op](x))
        g = got.astype(np.float64)
        r = ref.astype(np.float64)
        bad = ~((g == r) | (np.isnan(g) & np.isnan(r)))
        # within one unit of the last place of the narrow type
        scale = 2.0 ** (-10 if t == f16 else -7)
        with np.errstate(all="ignore"):
            close = np.abs(g - r) <= np.abs(r) * scale * 1.01 + 2.0 ** -24
        assert not np.any(bad & ~close), (op, x[bad & ~close][:5], g[bad & ~close][:5])


@pytest.mark.parametrize("t", [f32, f64, f16, bf16], ids=str)
def test_fma_clamp(t):
    n = 64
    a, c, d = (_round_to(t, RNG.uniform(-3, 3, n)) for _ in range(3))
    outs = elementwise([(t, a), (t, c), (t, d)], [t, t],
                       lambda b, x, y, z: [b.fma(x, y, z), b.ternary("clamp", x, y, z)])
    from fractions import Fraction
    exact = [float(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))
             for x, y, z in zip(a, c, d)]  # one rounding (to f64), then to t: innocuous
    np.testing.assert_array_equal(outs[0], _round_to(t, exact))
    np.testing.assert_array_equal(outs[1], np.minimum(np.maximum(a, c), d))


def test_fma_is_fused():
    a = np.array([1 + 2.0 ** -23], np.float32)
    c = np.array([1 - 2.0 ** -23], np.float32)
    d = np.array([-1.0], np.float32)
    (got,) = elementwise([(f32, a), (f32, c), (f32, d)], [f32],
                         lambda b, x, y, z: [b.fma(x, y, z)])
    assert got[0] == np.float32(-(2.0 ** -46))


# ---- casts -------------------------------------------------------------------------------

CAST_SRC = [f32, f64, f16, bf16, i8, i32, u8, u32, i64, u64, boolean]


def _sample(t: Scalar, n: int) -> np.ndarray:
    if t.is_bool:
        return RNG.random(n) < 0.5
    if t.is_float:
        x = RNG.uniform(-300, 300, n)
        x[:6] = [np.nan, np.inf, -np.inf, 0.0, 2.5, -3.5]
        return _round_to(t, x)
    info = np.iinfo(t.np)
    return RNG.integers(info.min, info.max, n, dtype=t.np, endpoint=True)


def _cast_ref(x: np.ndarray, s: Scalar, d: Scalar) -> np.ndarray:
    if d.is_bool:
        return x != 0 if not s.is_float else (x != 0) | np.isnan(x)
    if s.is_float and d.is_int:  # truncation, saturating, NaN -> 0 (what we promise)
        info = np.iinfo(d.np)
        y = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0))
        return np.array([min(max(int(v), int(info.min)), int(info.max)) for v in y], d.np)
    if d.is_float:
        if s.is_float:
            # bf16 from f64 goes through f32 (both within an ulp); f16/f32 exact roundings
            y = x.astype(np.float32) if d == bf16 else x
            return _round_to(d, y) if d == bf16 else np.asarray(y).astype(d.np)
        return _round_to(d, x.astype(np.float64)) if d == bf16 else x.astype(d.np)
    return x.astype(d.np)  # ints wrap, bool -> 0/1


@pytest.mark.parametrize("s", CAST_SRC, ids=str)
def test_casts(s):
    n = 64
    x = _sample(s, n)
    dsts = [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64, boolean]
    outs = elementwise([(s, x)], dsts, lambda b, v: [b.cast(v, d) for d in dsts])
    for d, got in zip(dsts, outs):
        with np.errstate(all="ignore"):
            ref = _cast_ref(x, s, d)
        if s.is_float and d.is_float:
            np.testing.assert_array_equal(np.asarray(got, np.float64),
                                          np.asarray(ref, np.float64), err_msg=f"{s}->{d}")
        elif s.is_float and d.is_int and not d.is_signed:
            ok = x >= 0  # negative floats to unsigned: C leaves it undefined
            np.testing.assert_array_equal(got[ok], ref[ok], err_msg=f"{s}->{d}")
        elif d == bf16 and s.bits == 64:
            # int64 -> bf16 goes through f32 (double rounding): within one bf16 ulp
            np.testing.assert_allclose(got, ref, rtol=2 ** -7)
        else:
            np.testing.assert_array_equal(got, ref, err_msg=f"{s}->{d}")


def test_bf16_rounding_ties_even():
    x = np.array([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 1.0 + 2 ** -8 + 2 ** -20, -(1.0 + 2 ** -8)],
                 np.float32)
    (got,) = elementwise([(f32, x)], [bf16], lambda b, v: [b.cast(v, bf16)])
    np.testing.assert_array_equal(got, [1.0, 1.0 + 2 ** -6, 1.0 + 2 ** -7, -1.0])


def test_scalar_to_line_splat_extract_insert():
    n = 16
    x = RNG.uniform(-1, 1, n).astype(np.float32)
    b = Builder("lanes")
    xs, o = b.array("x", f32), b.array("o", vec(f32, 4))
    i = b.builtin("ABSOLUTE_POS")
    with b.if_(b.lt(i, b.len(o))):
        v = b.cast(b.load(xs, i), vec(f32, 4))  # splat
        v = b.insert(v, 2, b.mul(b.extract(v, 1), 2.0))
        b.store(o, i, v)
    exe = RT.compile(b.finish())
    xb, ob = RT.from_numpy(x), RT.empty(n * 4)
    exe.launch((1, 1, 1), (32, 1, 1), [xb, ob.lines(4)])
    ref = np.repeat(x[:, None], 4, 1)
    ref[:, 2] *= 2
    np.testing.assert_array_equal(ob.numpy().reshape(n, 4), ref)


# ---- control flow ------------------------------------------------------------------------

def _run_scalar_kernel(build, n_out: int, cube_count=(1, 1, 1), cube_dim=(1, 1, 1),
                       t: Scalar = i32) -> np.ndarray:
    b = Builder("cf")
    o = b.array("o", t)
    build(b, o)
    exe = RT.compile(b.finish())
    ob = RT.from_numpy(np.full(n_out, -1).astype(t.np))
    exe.launch(cube_count, cube_dim, [ob])
    return ob.numpy()


def test_range_positive_negative_step_break_continue():
    def build(b, o):
        acc = b.var(i32, "acc")
        b.assign(acc, 0)
        with b.range(b.const(10, i32), b.const(-3, i32), -2) as k:  # 10, 8, ..., -2
            with b.if_(b.binary("eq", k, 4)):
                b.continue_()
            b.assign(acc, b.add(acc, k))
        b.store(o, 0, acc)
        cnt = b.var(i32, "cnt")
        b.assign(cnt, 0)
        with b.range(b.const(0, u32), b.const(100, u32), 3) as k:
            with b.if_(b.binary("ge", k, b.const(20, u32))):
                b.break_()
            b.assign(cnt, b.add(cnt, 1))
        b.store(o, 1, cnt)
        # while-style Loop: x = 1; while x < 1000: x *= 3
        x = b.var(i32, "x")
        b.assign(x, 1)
        with b.loop():
            with b.if_(b.unary("not", b.lt(x, 1000))):
                b.break_()
            b.assign(x, b.mul(x, 3))
        b.store(o, 2, x)
        # nested loops: break only leaves the inner one
        s = b.var(i32, "s")
        b.assign(s, 0)
        with b.range(0, 5) as ii:
            with b.range(0, 100) as jj:
                with b.if_(b.binary("gt", jj, ii)):
                    b.break_()
                b.assign(s, b.add(s, 1))
        b.store(o, 3, s)
        # empty range, if/else
        e = b.var(i32, "e")
        b.assign(e, 7)
        with b.range(5, 5):
            b.assign(e, 0)
        with b.if_(b.binary("eq", e, 7)) as h:
            b.store(o, 4, 1)
            with h.else_():
                b.store(o, 4, 2)
        with b.if_(b.binary("ne", e, 7)) as h:
            b.store(o, 5, 1)
            with h.else_():
                b.store(o, 5, 2)

    got = _run_scalar_kernel(build, 6)
    assert got.tolist() == [10 + 8 + 6 + 2 + 0 - 2, 7, 2187, 15, 1, 2]


def test_return_ends_only_that_unit():
    def build(b, o):
        i = b.builtin("ABSOLUTE_POS")
        with b.if_(b.binary("eq", b.binary("rem", i, 3), b.const(0, u32))):
            b.return_()
        with b.loop():
            with b.if_(b.binary("gt", i, b.const(10, u32))):
                b.return_()  # a return inside a loop ends the unit
            b.break_()
        b.store(o, i, b.cast(i, i32))

    got = _run_scalar_kernel(build, 40, (5, 1, 1), (8, 1, 1))
    ref = [-1 if (k % 3 == 0 or k > 10) else k for k in range(40)]
    assert got.tolist() == ref


def test_builtins_3d():
    cc, cd = (3, 2, 2), (4, 2, 3)
    names = ["UNIT_POS", "UNIT_POS_X", "UNIT_POS_Y", "UNIT_POS_Z", "CUBE_POS", "CUBE_POS_X",
             "CUBE_POS_Y", "CUBE_POS_Z", "CUBE_DIM", "CUBE_DIM_X", "CUBE_DIM_Y", "CUBE_DIM_Z",
             "CUBE_COUNT", "CUBE_COUNT_X", "CUBE_COUNT_Y", "CUBE_COUNT_Z", "ABSOLUTE_POS",
             "ABSOLUTE_POS_X", "ABSOLUTE_POS_Y", "ABSOLUTE_POS_Z", "PLANE_DIM", "UNIT_POS_PLANE"]
    total = np.prod(cc) * np.prod(cd)

    def build(b, o):
        g = b.builtin("ABSOLUTE_POS")
        for k, nm in enumerate(names):
            b.store(o, b.add(b.mul(g, len(names)), k), b.builtin(nm))

    got = _run_scalar_kernel(build, total * len(names), cc, cd, t=u32).reshape(total, -1)
    for cz in range(cc[2]):
        for cy in range(cc[1]):
            for cx in range(cc[0]):
                for uz in range(cd[2]):
                    for uy in range(cd[1]):
                        for ux in range(cd[0]):
                            cpos = cx + cc[0] * (cy + cc[1] * cz)
                            upos = ux + cd[0] * (uy + cd[1] * uz)
                            dim = int(np.prod(cd))
                            ref = [upos, ux, uy, uz, cpos, cx, cy, cz, dim, *cd,
                                   int(np.prod(cc)), *cc, cpos * dim + upos,
                                   cx * cd[0] + ux, cy * cd[1] + uy, cz * cd[2] + uz, 1, 0]
                            assert got[cpos * dim + upos].tolist() == ref


def test_plane_ops_with_plane_size_one():
    ops = ["sum", "prod", "max", "min", "broadcast", "shuffle", "shuffle_xor",
           "inclusive_sum", "exclusive_sum", "inclusive_prod", "exclusive_prod"]
    x = RNG.uniform(1, 2, 32).astype(np.float32)

    def body(b, v):
        out = []
        for op in ops:
            lane = b.const(3, u32) if op in ir.PLANE_OPS_WITH_LANE else None
            out.append(b.plane(op, v, lane))
        return out

    outs = elementwise([(f32, x)], [f32] * len(ops), body, lanes=2)
    for op, got in zip(ops, outs):
        ref = {"exclusive_sum": np.zeros_like(x), "exclusive_prod": np.ones_like(x)}.get(op, x)
        np.testing.assert_array_equal(got, ref, err_msg=op)
    flags = RNG.random(32) < 0.5
    outs = elementwise([(boolean, flags)], [boolean, boolean],
                       lambda b, v: [b.plane("all", v), b.plane("any", v)])
    np.testing.assert_array_equal(outs[0], flags)


# ---- memory, meta, params ----------------------------------------------------------------

def test_tensor_meta_runtime_dim_and_scalar_params():
    b = Builder("meta")
    t = b.tensor("t", f32, 3)
    o = b.array("o", u32)
    d = b.scalar("d", u32)
    dv = b.scalar_param_value(d)
    vals = [b.len(t), b.shape(t, dv), b.stride(t, dv), b.shape(t, 2), b.stride(t, 0),
            b.shape(t, b.add(dv, 5))]  # out of range -> 0
    for k, v in enumerate(vals):
        b.store(o, k, v)
    exe = RT.compile(b.finish())
    tb = RT.from_numpy(np.zeros((2, 3, 4), np.float32))
    for dim in range(3):
        ob = RT.from_numpy(np.zeros(6, np.uint32))
        exe.launch((1, 1, 1), (1, 1, 1), [tb, ob, dim])
        assert ob.numpy().tolist() == [24, (2, 3, 4)[dim], (12, 4, 1)[dim], 4, 12, 0]
    ob = RT.from_numpy(np.zeros(6, np.uint32))
    exe.launch((1, 1, 1), (1, 1, 1), [tb.lines(4), ob, 1])
    assert ob.numpy().tolist()[:3] == [6, 3, 4]  # len in lines, shape/stride in elements


@pytest.mark.parametrize("t", [f32, f64, f16, bf16, i8, i32, u32, i64, u64, boolean], ids=str)
def test_scalar_param_types(t):
    b = Builder("sp")
    o = b.array("o", t)
    s = b.scalar("s", t)
    b.store(o, 0, b.scalar_param_value(s))
    exe = RT.compile(b.finish())
    ob = RT.from_numpy(np.zeros(1, t.np), dtype=t)
    v = {f32: 1.25, f64: -2.5e100, f16: 0.333, bf16: 3.140625, i8: -5, i32: -123456,
         u32: 4000000000, i64: -(2 ** 60), u64: 2 ** 64 - 3, boolean: True}[t]
    exe.launch((1, 1, 1), (1, 1, 1), [ob, v])
    got = host(ob, t)[0]
    if t == f16:
        assert got == np.float16(v)
    else:
        assert got == v


def test_local_array_and_index_types():
    b = Builder("local")
    x, o = b.array("x", f32), b.array("o", f32)
    loc = b.local(f32, 8)
    i = b.builtin("ABSOLUTE_POS")
    with b.range(0, 8) as k:
        b.store(loc, k, b.add(b.load(x, i), b.cast(k, f32)))
    acc = b.var(f32, "acc")
    b.assign(acc, 0.0)
    with b.range(b.const(7, i64), b.const(-1, i64), -1) as k:  # signed i64 index
        b.assign(acc, b.add(b.mul(acc, 0.5), b.load(loc, k)))
    b.store(o, i, acc)
    exe = RT.compile(b.finish())
    xv = RNG.uniform(0, 1, 64).astype(np.float32)
    xb, ob = RT.from_numpy(xv), RT.empty(64)
    exe.launch((2, 1, 1), (32, 1, 1), [xb, ob])
    ref = np.zeros(64, np.float32)
    for k in range(7, -1, -1):
        ref = ref * np.float32(0.5) + (xv + np.float32(k))
    np.testing.assert_allclose(ob.numpy(), ref, rtol=1e-6)


def test_bool_and_bf16_memory_roundtrip():
    n = 32
    flags = RNG.random(n) < 0.5
    vals = _round_to(bf16, RNG.uniform(-10, 10, n))
    outs = elementwise([(boolean, flags), (bf16, vals)], [boolean, bf16, bf16],
                       lambda b, f, v: [b.unary("not", f), b.select(f, v, b.unary("neg", v)),
                                        b.mul(v, v)], lanes=4)
    np.testing.assert_array_equal(outs[0], ~flags)
    np.testing.assert_array_equal(outs[1], np.where(flags, vals, -vals))
    np.testing.assert_array_equal(outs[2], _round_to(bf16, vals.astype(np.float64) ** 2))

"""Accuracy of the CPU target's inline f32 transcendentals (codegen/llvm/math.py) in ulps,
against float64 references, through the real CPU runtime: a @cube kernel applies the function
to a buffer. The sweep walks the whole f32 range (every 4099th bit pattern, both signs), then
the tails and special values: +-0, +-inf, NaN, subnormals, the overflow and underflow
boundaries and the points where erf and tanh saturate. Lines of 16 (the kernel's own vector
code) and of 1 (scalar code the loop vectoriser widens) both run, on the host's instruction
set and on the runtime's AVX2-only model.

The ulp bounds asserted here are the ones the docstrings of math.py state."""
from __future__ import annotations

import math

import numpy as np
import pytest

import cube as cb
from cube import ABSOLUTE_POS, Array, Line, cube, f32

F32_MAX = float(np.finfo(np.float32).max)
TINY = 2.0 ** -149  # the smallest subnormal


@cube(launch=True)
def k_exp(inp: Array[Line[f32]], out: Array[Line[f32]]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = cb.exp(inp[i])


@cube(launch=True)
def k_log(inp: Array[Line[f32]], out: Array[Line[f32]]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = cb.log(inp[i])


@cube(launch=True)
def k_log1p(inp: Array[Line[f32]], out: Array[Line[f32]]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = cb.log1p(inp[i])


@cube(launch=True)
def k_tanh(inp: Array[Line[f32]], out: Array[Line[f32]]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = cb.tanh(inp[i])


@cube(launch=True)
def k_erf(inp: Array[Line[f32]], out: Array[Line[f32]]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = cb.erf(inp[i])


@cube(launch=True)
def k_silu(inp: Array[Line[f32]], out: Array[Line[f32]]):
    i = ABSOLUTE_POS
    if i < out.len():
        x = inp[i]
        out[i] = x / (1.0 + cb.exp(-x))


def _erf64(x: np.ndarray) -> np.ndarray:
    return np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)


REF = {"exp": np.exp, "log": np.log, "log1p": np.log1p, "tanh": np.tanh, "erf": _erf64}
KERNELS = {"exp": k_exp, "log": k_log, "log1p": k_log1p, "tanh": k_tanh, "erf": k_erf}
# the bounds stated in math.py's docstrings
MAX_ULP = {"exp": 1, "log": 2, "log1p": 3, "tanh": 6, "erf": 7}


def _f32(*vals) -> np.ndarray:
    return np.array(vals, np.float64).astype(np.float32)


def _around(v: float, k: int = 8) -> np.ndarray:
    """The k floats on each side of v (v rounded to f32) and v itself."""
    b = int(np.float32(v).view(np.int32))
    return np.arange(b - k, b + k + 1, dtype=np.int64).astype(np.int32).view(np.float32)


def sweep() -> np.ndarray:
    """Every 4099th bit pattern of the 2^32 (both signs: all finite f32 magnitudes, inf and
    NaN patterns included), about 1.05 M inputs."""
    return np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)


def specials(op: str) -> np.ndarray:
    base = [_f32(0.0, -0.0, np.inf, -np.inf, np.nan, TINY, -TINY, 1e-45, 2.0 ** -126,
                 -(2.0 ** -126), 2.0 ** -127, F32_MAX, -F32_MAX, 1.0, -1.0, 0.5, 2.0),
            np.array([1e-40, -1e-40, 1e-30, -1e-30, 1e-8, -1e-8], np.float32)]
    edges = {"exp": [math.log(F32_MAX), math.log(2.0 ** -126), math.log(TINY),
                     math.log(TINY / 2), -104.0, 88.76, 0.0, math.log(2) / 2],
             "log": [1.0, 2.0 ** -126, TINY * 7, F32_MAX, math.e],
             "log1p": [0.0, -1.0, 1e-7, -1e-7, F32_MAX, 1.0],
             "tanh": [0.0, 9.01090145111084, 9.0, 0.625, 1e-4],
             "erf": [0.0, 3.8325071334838867, 3.7, 0.9277, 2.0, 1e-4]}[op]
    for e in edges:
        base += [_around(e), _around(-e)]
    return np.concatenate(base)


def _ulp_error(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| in units of the f32 spacing at ref (subnormal spacing below 2^-126); a ref
    beyond the f32 range must round to inf and a NaN ref needs a NaN."""
    with np.errstate(all="ignore"):
        return _ulp_error64(got.astype(np.float64), ref)


def _ulp_error64(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    err = np.zeros(got.shape)
    nan = np.isnan(ref)
    err[nan ^ np.isnan(got)] = np.inf
    fin = ~nan & ~np.isnan(got)
    ref32 = ref[fin].astype(np.float32)  # inf where it overflows the f32 range
    over = np.isinf(ref32)
    e = np.where(over, np.where(got[fin] == ref32, 0.0, np.inf), 0.0)
    r, g = ref[fin][~over], got[fin][~over]
    sp = np.maximum(np.spacing(np.abs(ref32[~over])).astype(np.float64), TINY)
    e[~over] = np.where(np.isinf(g), np.inf, np.abs(g - r) / sp)
    err[fin] = e
    return err


def run_op(rt, op: str, x: np.ndarray, line: int) -> np.ndarray:
    n = -(-x.size // line) * line
    xp = np.zeros(n, np.float32)
    xp[:x.size] = x
    dx = rt.from_numpy(xp)
    dy = rt.empty_like(dx)
    lines = n // line
    KERNELS[op].launch(rt, cube_count=((lines + 255) // 256,), cube_dim=(256,),
                       inp=dx.lines(line), out=dy.lines(line))
    return dy.numpy()[:x.size]


@pytest.fixture(scope="module", params=["host", "avx2"])
def cpu(request):
    """The CPU runtime compiling for the host, and for its AVX2-only model (haswell, AVX-512
    off): the same IR through both instruction selections."""
    try:
        return cb.runtime("cpu", isa=request.param)
    except (cb.RuntimeUnavailable, ValueError) as e:
        pytest.skip(f"cpu runtime ({request.param}) unavailable: {e}")


@pytest.mark.parametrize("line", [16, 1])
@pytest.mark.parametrize("op", list(KERNELS))
def test_ulps_over_the_f32_range(cpu, op, line):
    x = np.concatenate([sweep(), specials(op)])
    got = run_op(cpu, op, x, line)
    with np.errstate(all="ignore"):
        ref = REF[op](x.astype(np.float64))
    err = _ulp_error(got, ref)
    worst = int(np.argmax(err))
    assert err[worst] <= MAX_ULP[op], (op, line, float(x[worst]), float(got[worst]),
                                       float(ref[worst]), float(err[worst]))


@pytest.mark.parametrize("op", list(KERNELS))
def test_special_values_exact(cpu, op):
    """Where f32 has an exact answer the kernel gives it: signed zeros, infinities, NaN,
    saturation to +-1, overflow to inf and underflow to 0."""
    x = _f32(0.0, -0.0, np.inf, -np.inf, np.nan)
    want = {"exp": [1.0, 1.0, np.inf, 0.0, np.nan],
            "log": [-np.inf, -np.inf, np.inf, np.nan, np.nan],
            "log1p": [0.0, -0.0, np.inf, np.nan, np.nan],
            "tanh": [0.0, -0.0, 1.0, -1.0, np.nan],
            "erf": [0.0, -0.0, 1.0, -1.0, np.nan]}[op]
    got = run_op(cpu, op, x, 16)
    np.testing.assert_array_equal(got, np.array(want, np.float32))
    if op in ("tanh", "erf", "log1p"):  # odd at 0: the sign of zero is kept
        assert np.signbit(got[1]) and not np.signbit(got[0])
    tails = {"exp": (_f32(88.73, 100.0, -104.0, -200.0), [np.inf, np.inf, 0.0, 0.0]),
             "tanh": (_f32(9.0109015, 20.0, -9.0109015, -1e30), [1.0, 1.0, -1.0, -1.0]),
             "erf": (_f32(3.8325072, 5.0, -3.8325072, -1e30), [1.0, 1.0, -1.0, -1.0]),
             "log": (_f32(-1.0, -TINY, 1.0, F32_MAX), [np.nan, np.nan, 0.0, math.log(F32_MAX)]),
             "log1p": (_f32(-1.0, -2.0, F32_MAX), [-np.inf, np.nan, math.log(F32_MAX)])}[op]
    got = run_op(cpu, op, tails[0], 16)
    np.testing.assert_array_equal(got, np.array(tails[1], np.float32))


def test_exp_subnormal_results(cpu):
    """exp's gradual underflow: results between 2^-149 and 2^-126 within 1 ulp of the
    subnormal grid (the two-factor scale rounds once)."""
    x = np.linspace(math.log(TINY) - 0.5, math.log(2.0 ** -126), 20001).astype(np.float32)
    got = run_op(cpu, "exp", x, 16)
    err = _ulp_error(got, np.exp(x.astype(np.float64)))
    assert err.max() <= 1, float(x[np.argmax(err)])
    assert np.all(got[x < np.float32(math.log(TINY / 2)) - 1e-3] == 0)


def test_silu_through_exp(cpu):
    """x / (1 + exp(-x)): the sigmoid-style use of exp, over the whole range and its tails
    (exp(-x) overflowing to inf gives -0, not NaN)."""
    x = np.concatenate([sweep(), specials("exp")])
    x = x[np.isfinite(x)]  # at -inf IEEE gives -inf / inf = NaN
    dx = cpu.from_numpy(x)
    dy = cpu.empty_like(dx)
    k_silu.launch(cpu, cube_count=((x.size + 255) // 256,), cube_dim=(256,), inp=dx, out=dy)
    got = dy.numpy()
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):  # where exp(-x) overflows f32 the formula gives -0
        ref = np.where(-x64 > math.log(F32_MAX), -0.0, x64 / (1.0 + np.exp(-x64)))
    err = _ulp_error(got, ref)
    assert err.max() <= 3, float(x[np.argmax(err)])

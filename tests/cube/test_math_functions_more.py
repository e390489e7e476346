"""The math functions added for ports from Numba, Triton and Warp (n-body, polar coordinates,
geometry): math.tan asin acos atan atan2 sinh cosh asinh acosh atanh log2 log10 exp2 expm1
hypot fmod copysign trunc, both as `math.f` and `cb.f`, on every runtime that starts, in f32
and f64 (where the runtime has it), on scalars and lines, against float64 NumPy.

Errors are in ulps of the result's type (the distance to the float64 reference divided by
the spacing of floats at the reference), measured over dense sweeps of each function's domain
with its edges (0, -0, subnormals, huge values, both signs, every atan2 quadrant). Measured
maxima, f32 (this machine; `python3 tests/cube/test_math_functions_more.py` prints them):

- interp: 0.5 everywhere (f64 rounded once).
- cpu (LLVM; llvm.tan/asin/acos/atan/sinh/cosh/log2/log10/exp2/atan2, which x86 lowers to
  glibc's tanf ... per lane, glibc's asinhf acoshf atanhf expm1f hypotf per lane,
  llvm.trunc/copysign inline, frem = fmodf): f32 <= 1 ulp except acosh 1.5 (printed
  rounded: acosh 2); f64 <= 0.5.
- opencl (PoCL's builtins): f32 <= 1 ulp except tan 3, sinh/cosh/acosh 2; f64 <= 2.
- wgpu (the WGSL prelude's own atan, atan2, asin, acos, log2, log10, expm1, sinh, cosh,
  asinh, acosh, atanh, hypot, fmod, copysign; lavapipe's tan, exp2, trunc): within 4 ulp,
  but sinh, cosh, expm1 80 (lavapipe runs the prelude's exp within ~60 ulp for large
  arguments), and where they go through the prelude's log1p near 0 (asinh, atanh, acosh
  near 1): lavapipe folds its (1 + x) - 1 to x, so there log1p, and they, lose up to
  ~2e-4 relative (pre-existing in log1p; WGSL_NEAR_ZERO below).
- wgpu-spirv (GLSL.std.450 Atan2/Asin/Acos/Atan/Tan/Log2/Exp2/Trunc, the rest composed of
  the driver's Exp and Log, OpFRem): lavapipe's atan family is within 2e-4 relative and its
  Exp/Log lose digits near 1, and its OpFRem is x - y trunc(x / y) (Vulkan's precision), so
  the SPIR-V tolerances are relative (SPIRV_RTOL, 1e-2 near 0 for SPIRV_NEAR_ZERO) and
  fmod is checked where x / y < 2^8.
fmod and copysign are exact on every target but wgpu-spirv; trunc everywhere.
"""
from __future__ import annotations

import math
import sys
import typing

import numpy as np
import pytest

import cube as cb
from cube import ABSOLUTE_POS, Array, Line, cube, f32, f64

F = typing.TypeVar("F")

UNARY = {  # name: (cube function, math function, NumPy reference)
    "tan": (cb.tan, math.tan, np.tan), "asin": (cb.asin, math.asin, np.arcsin),
    "acos": (cb.acos, math.acos, np.arccos), "atan": (cb.atan, math.atan, np.arctan),
    "sinh": (cb.sinh, math.sinh, np.sinh), "cosh": (cb.cosh, math.cosh, np.cosh),
    "asinh": (cb.asinh, math.asinh, np.arcsinh), "acosh": (cb.acosh, math.acosh, np.arccosh),
    "atanh": (cb.atanh, math.atanh, np.arctanh), "log2": (cb.log2, math.log2, np.log2),
    "log10": (cb.log10, math.log10, np.log10), "exp2": (cb.exp2, math.exp2, np.exp2),
    "expm1": (cb.expm1, math.expm1, np.expm1), "trunc": (cb.trunc, math.trunc, np.trunc),
}
BINARY = {
    "atan2": (cb.atan2, math.atan2, np.arctan2), "hypot": (cb.hypot, math.hypot, np.hypot),
    "fmod": (cb.fmod, math.fmod, np.fmod), "copysign": (cb.copysign, math.copysign,
                                                        np.copysign),
}
EXACT = {"trunc", "copysign", "fmod"}

# ulps allowed on f32 per runtime (f64: 2 on cpu/opencl/interp)
ULPS = {"interp": 1, "cpu": 2, "opencl": 4, "wgpu": 4}
# wgpu: lavapipe runs the prelude's exp within ~60 ulp for large arguments (e^36: the
# prelude's exp is 1 ulp where fma is fused and nothing is reassociated): the measured
# maxima of the functions built on it
WGPU_ULPS = {"sinh": 80, "cosh": 80, "expm1": 80}
SPIRV_RTOL = 5e-4
SPIRV_NEAR_ZERO = {"expm1", "sinh", "asinh", "atanh", "acosh"}
# (wgpu) below these |x| (acosh: x - 1) the prelude's log1p loses digits on lavapipe
WGSL_NEAR_ZERO = {"asinh": 0.5, "atanh": 0.5, "acosh": 0.5}


def _unary_kernel(fn):
    @cube(launch=True)
    def k(x: Array[F], out: Array[F]):
        i = ABSOLUTE_POS
        if i < out.len():
            out[i] = fn(x[i])
    return k


def _binary_kernel(fn):
    @cube(launch=True)
    def k(x: Array[F], y: Array[F], out: Array[F]):
        i = ABSOLUTE_POS
        if i < out.len():
            out[i] = fn(x[i], y[i])
    return k


def _unary_line_kernel(fn):
    @cube(launch=True)
    def k(x: Array[Line[F]], out: Array[Line[F]]):
        i = ABSOLUTE_POS
        if i < out.len():
            out[i] = fn(x[i])
    return k


def _binary_line_kernel(fn):
    @cube(launch=True)
    def k(x: Array[Line[F]], y: Array[Line[F]], out: Array[Line[F]]):
        i = ABSOLUTE_POS
        if i < out.len():
            out[i] = fn(x[i], y[i])
    return k


# math.f in the scalar kernels, cb.f in the line kernels: both spellings everywhere
KERNELS = {n: _unary_kernel(f[1]) for n, f in UNARY.items()}
KERNELS.update({n: _binary_kernel(f[1]) for n, f in BINARY.items()})
LINE_KERNELS = {n: _unary_line_kernel(f[0]) for n, f in UNARY.items()}
LINE_KERNELS.update({n: _binary_line_kernel(f[0]) for n, f in BINARY.items()})


def _logs(lo, hi, n, rng):
    return np.exp(rng.uniform(np.log(lo), np.log(hi), n))


def sweep(name: str, dtype, n: int = 4096):
    """Inputs over the function's domain and its edges (x, or x and y)."""
    rng = np.random.default_rng(hash(name) % 1000)
    big = 3e38 if dtype == np.float32 else 1e300
    tiny = 1e-45 if dtype == np.float32 else 5e-324
    pm = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    if name == "tan":
        x = np.concatenate([rng.uniform(-10, 10, n // 2), pm[:n // 2] * _logs(1e-30, 1e4, n // 2,
                                                                                 rng)])
    elif name in ("asin", "acos"):
        x = np.concatenate([rng.uniform(-1, 1, n // 2), pm[:n // 2] * _logs(1e-30, 1, n // 2,
                                                                              rng)])
        x = np.concatenate([x, [1, -1, 0.999999, -0.999999]])
    elif name in ("atan", "asinh"):
        x = pm * _logs(1e-30, big, n, rng)
    elif name in ("sinh", "cosh"):
        lim = 88.0 if dtype == np.float32 else 709.0
        x = np.concatenate([rng.uniform(-lim, lim, n // 2), pm[:n // 2] * _logs(1e-30, 1, n // 2,
                                                                                   rng)])
    elif name == "acosh":
        x = 1 + _logs(1e-7, big, n, rng)
        x = np.concatenate([x, [1.0]])
    elif name == "atanh":
        x = np.concatenate([rng.uniform(-1, 1, n // 2), pm[:n // 2] * _logs(1e-30, 1, n // 2,
                                                                              rng)])
        x = np.concatenate([x, [0.99999994, -0.99999994, 0.5, -0.5]])
    elif name in ("log2", "log10"):
        x = np.concatenate([_logs(1e-37, big, n, rng), [1.0, 2.0, 10.0, 1000.0]])
    elif name == "exp2":
        lim = 127.0 if dtype == np.float32 else 1023.0
        x = np.concatenate([rng.uniform(-lim, lim, n // 2), pm[:n // 2] * _logs(1e-30, 1, n // 2,
                                                                                   rng)])
    elif name == "expm1":
        lim = 88.0 if dtype == np.float32 else 709.0
        x = np.concatenate([rng.uniform(-30, lim, n // 2), pm[:n // 2] * _logs(1e-30, 1, n // 2,
                                                                                  rng)])
    elif name == "trunc":
        x = pm * _logs(1e-3, 1e9, n, rng)
    elif name in ("atan2", "hypot", "copysign"):
        x = pm * _logs(1e-30, 1e30, n, rng)
        y = np.where(rng.random(n) < 0.5, -1.0, 1.0) * _logs(1e-30, 1e30, n, rng)
        y[: n // 4] = x[: n // 4] * rng.uniform(0.1, 10, n // 4)  # similar magnitudes
        if name == "hypot":
            x[:8], y[:8] = 1e30, [1e30, -1e30, 3e30, 1e29, 1, 0, 1e-30, 2e30]
        return x.astype(dtype), y.astype(dtype)
    elif name == "fmod":
        x = pm * _logs(1e-10, 1e30, n, rng)
        y = np.where(rng.random(n) < 0.5, -1.0, 1.0) * _logs(1e-10, 1e10, n, rng)
        y[: n // 2] = x[: n // 2] / rng.uniform(0.5, 300, n // 2)  # quotients below 2^8
        x[:4], y[:4] = [-2.5, 2.5, 1e30, 5.5], [1e-3, -1e-3, 3.0, 2.0]
        return x.astype(dtype), y.astype(dtype)
    else:  # pragma: no cover
        raise KeyError(name)
    x = np.concatenate([x, [0.0, -0.0, tiny, -tiny]]) if name not in ("acosh", "log2",
                                                                       "log10") else x
    with np.errstate(all="ignore"):
        return (x.astype(dtype),)


def ref(name: str, *args):
    fn = {**UNARY, **BINARY}[name][2]
    with np.errstate(all="ignore"):
        return fn(*(a.astype(np.float64) for a in args))


def ulps(got, want, dtype) -> np.ndarray:
    """|got - want| in units of the spacing of dtype at want (0 where both are the same
    NaN/inf or equal)."""
    got = got.astype(np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(all="ignore"):
        sp = np.spacing(np.abs(want).astype(dtype)).astype(np.float64)
        err = np.abs(got - want) / sp
    return np.where(same, 0.0, np.where(np.isfinite(err), err, np.inf))


def run(rt, name: str, dtype, line: int = 1, args=None):
    args = sweep(name, dtype) if args is None else args
    n = len(args[0])
    pad = (-n) % line
    bufs = [rt.from_numpy(np.concatenate([a, np.ones(pad, dtype)])) for a in args]
    out = rt.empty(n + pad, dtype)
    names = ("x", "y")[:len(args)]
    if line == 1:
        KERNELS[name].launch(rt, cube_count=(n + 63) // 64, cube_dim=64, out=out,
                             **dict(zip(names, bufs)))
    else:
        m = (n + pad) // line
        LINE_KERNELS[name].launch(rt, cube_count=(m + 63) // 64, cube_dim=64,
                                  out=out.lines(line),
                                  **{k: b.lines(line) for k, b in zip(names, bufs)})
    return args, out.numpy()[:n]


def _skip_f64(rt, dtype):
    if dtype == np.float64 and not rt.features.f64:
        pytest.skip(f"{rt.name} has no f64")


def _check(rt, name, dtype, args, got):
    want = ref(name, *args)
    if dtype == np.float32:
        # the reference rounded to f32 overflows where float64's result does not
        with np.errstate(all="ignore"):
            want = want.astype(np.float32).astype(np.float64)
    keep = np.ones(len(want), bool)
    if rt.name == "wgpu-spirv":
        if name == "fmod":  # OpFRem: x - y trunc(x / y) on lavapipe
            keep = np.abs(args[0] / args[1]) < 256
            tol = np.abs(args[0]) * 4e-7
        else:
            tol = SPIRV_RTOL * np.abs(want)
            if name in SPIRV_NEAR_ZERO:  # the driver's Exp and Log near 1
                tol = np.where(np.abs(args[0] - (name == "acosh")) < 0.5,
                               1e-2 * np.abs(want), tol)
        tiny = np.finfo(dtype).tiny
        bad = keep & ~((np.abs(got - want) <= tol + tiny * 4) | (got == want)
                       | (np.isnan(got) & np.isnan(want)))
        assert not bad.any(), (name, args[0][bad][:5], got[bad][:5], want[bad][:5])
        return
    if rt.name == "wgpu" and name in WGSL_NEAR_ZERO:
        a = np.abs(args[0] - (1.0 if name == "acosh" else 0.0))
        near = a < WGSL_NEAR_ZERO[name]
        np.testing.assert_allclose(got[near], want[near], rtol=5e-4, atol=1e-37)
        keep = ~near
    if rt.name in ("wgpu",):  # lavapipe may flush subnormal results
        keep &= ~(np.abs(want) < np.finfo(dtype).tiny)
    e = ulps(got[keep], want[keep], dtype)
    limit = 0 if name in EXACT else (ULPS.get(rt.name, 4) if dtype == np.float32 else 2)
    if rt.name == "wgpu":
        limit = WGPU_ULPS.get(name, limit)
    if name in EXACT and name != "fmod":
        limit = 0
    worst = int(np.argmax(e)) if len(e) else 0
    assert e.max(initial=0) <= max(limit, 0.5 if limit == 0 else limit), (
        name, rt.name, float(e.max()), [a[keep][worst] for a in args], got[keep][worst],
        want[keep][worst])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(UNARY) + list(BINARY))
def test_scalar(rt, name, dtype):
    _skip_f64(rt, dtype)
    args, got = run(rt, name, dtype)
    _check(rt, name, dtype, args, got)


@pytest.mark.parametrize("line", [2, 4, 8, 16])
@pytest.mark.parametrize("name", ["atan2", "hypot", "fmod", "copysign", "tan", "asinh",
                                  "expm1", "log10", "trunc", "acos"])
def test_lines(rt, name, line):
    """Each lane as the scalar function (native vectors on OpenCL/MSL/WGSL/LLVM, lanes
    elsewhere), f32."""
    args = tuple(a[:512] for a in sweep(name, np.float32))
    args, got = run(rt, name, np.float32, line, args)
    _check(rt, name, np.float32, args, got)


def test_f64_lines(rt):
    _skip_f64(rt, np.float64)
    for name in ("atan2", "expm1", "fmod"):
        args = tuple(a[:256] for a in sweep(name, np.float64))
        args, got = run(rt, name, np.float64, 4, args)
        _check(rt, name, np.float64, args, got)


SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-45, -1e-45, 3e38, -3e38, 1.0, -1.0,
           0.5, -2.0]


@pytest.mark.parametrize("name", list(UNARY) + list(BINARY))
def test_special_values(rt, name):
    """Python's value (through float64 NumPy, which agrees with math where math returns)
    for zeros, infinities, NaN, subnormals and huge values, every pair for the two-argument
    functions: the signs of zero results, atan2's quadrants (atan2(0, -0) is pi, atan2(-0,
    -1) is -pi, atan2(inf, -inf) is 3pi/4), hypot(inf, nan) = inf, fmod(x, inf) = x,
    copysign(1, -0) = -1. Shader targets may assume finite values (WGSL allows it; lavapipe
    does), so there only finite operands and NaN are compared: a NaN argument gives NaN
    (lavapipe's Atan(NaN) was 0, and NMin(NaN, 9) is 9, which made sinh(NaN) 4051.5)."""
    vals = np.array(SPECIAL, np.float32)
    if rt.target in ("wgsl", "spirv"):
        vals = vals[np.isfinite(vals) & (np.abs(vals) > 1e-37) | (vals == 0) | np.isnan(vals)]
        if name in ("tan", "sinh", "cosh"):  # Vulkan's sin/cos are defined on [-pi, pi]
            vals = vals[np.abs(vals) < 1e4]
    if name in BINARY:
        x, y = (a.ravel() for a in np.meshgrid(vals, vals))
        args = (x, y)
    else:
        args = (vals,)
    args, got = run(rt, name, np.float32, 1, args)
    want = ref(name, *args)
    with np.errstate(all="ignore"):
        want = want.astype(np.float32)
    if rt.target == "spirv":
        if name == "fmod":  # OpFRem: x - y trunc(x / y)
            keep = np.abs(args[0] / np.where(args[1] == 0, 1, args[1])) < 256
        else:
            keep = np.ones(len(want), bool)
        close = np.isclose(got, want, rtol=SPIRV_RTOL, atol=1e-30, equal_nan=True)
        assert (close | ~keep).all(), (name, [a[~close] for a in args], got[~close],
                                       want[~close])
        return
    e = ulps(got, want.astype(np.float64), np.float32)
    if rt.target == "wgsl":
        e = np.where(np.abs(want) < 1.2e-38, 0, e)  # subnormal results may be flushed
    ok = e <= (0 if name in EXACT else 4)
    # the sign of a zero result as Python's (atan2's, fmod's, copysign's, trunc's)
    zero = (want == 0) & (got == 0)
    ok &= ~zero | (np.signbit(got) == np.signbit(want))
    assert ok.all(), (name, [a[~ok] for a in args], got[~ok], want[~ok])


# ---- the frontend ----------------------------------------------------------------------

@cube(launch=True)
def polar(x: Array[f32], y: Array[f32], r: Array[f32], th: Array[f32]):
    """Cartesian to polar, as a Warp/Taichi user writes it."""
    i = ABSOLUTE_POS
    if i < x.len():
        r[i] = math.hypot(x[i], y[i])
        th[i] = math.atan2(y[i], x[i])


def test_polar_coordinates(rt):
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((2, 256)).astype(np.float32)
    r, th = rt.empty(256), rt.empty(256)
    polar.launch(rt, cube_count=4, cube_dim=64, x=rt.from_numpy(x), y=rt.from_numpy(y), r=r,
                 th=th)
    tol = 1e-6 if rt.target != "spirv" else SPIRV_RTOL
    np.testing.assert_allclose(r.numpy(), np.hypot(x, y), rtol=tol)
    np.testing.assert_allclose(th.numpy(), np.arctan2(y, x), rtol=tol, atol=1e-6)


@cube(launch=True)
def folded(out: Array[f64]):
    out[0] = math.atan2(1.0, -1.0) + cb.hypot(3.0, 4.0) + math.fmod(-7.5, 2.0)
    out[1] = cb.copysign(1.0, -0.0) + math.trunc(-2.7) + math.log10(1000.0) + cb.exp2(10.0)
    out[2] = math.acosh(1.0) + cb.asinh(0.0) + math.expm1(1e-10) * 1e10


def test_compile_time_arguments_fold_with_python(interp):
    out = interp.empty(3, np.float64)
    folded.launch(interp, cube_count=1, cube_dim=1, out=out)
    np.testing.assert_allclose(out.numpy(), [
        math.atan2(1.0, -1.0) + 5.0 + math.fmod(-7.5, 2.0),
        -1.0 - 2 + 3.0 + 1024.0, math.expm1(1e-10) * 1e10], rtol=1e-15)
    ir = folded.source("ir")
    assert "atan2" not in ir and "hypot" not in ir and "rem" not in ir


@cube(launch=True)
def int_atan2(x: Array[cb.i32], out: Array[f32]):
    out[0] = math.atan2(x[0], x[1])


@cube(launch=True)
def atan2_one_arg(x: Array[f32], out: Array[f32]):
    out[0] = cb.atan2(x[0])


@cube(launch=True)
def int_tan(x: Array[cb.i32], out: Array[f32]):
    out[0] = math.tan(x[0])


@cube(launch=True)
def domain_error(out: Array[f32]):
    out[0] = math.acos(2.0)


@cube(launch=True)
def no_kernel_form(x: Array[f32], out: Array[f32]):
    out[0] = math.gamma(x[0])


@pytest.mark.parametrize("kernel, text", [
    (int_atan2, "atan2 needs float arguments, got i32"),
    (atan2_one_arg, "atan2 takes 2 arguments"),
    (int_tan, "tan needs a float argument, got i32"),
    (domain_error, "acos(2.0) at compile time failed: math domain error"),
    (no_kernel_form, "math.gamma has no kernel form"),
], ids=lambda v: getattr(v, "__name__", None) or "")
def test_bad_calls_are_located_errors(kernel, text):
    with pytest.raises(cb.CompileError) as e:
        kernel.source("ir")
    msg = str(e.value)
    assert text in msg and "test_math_functions_more.py:" in msg, msg
    assert "Traceback" not in msg


def test_mixed_literal_and_half_types(rt):
    """A Python number takes the other operand's type (atan2(y, 1.0) on f32 stays f32);
    f16 computes in f32 and rounds once."""
    if not rt.features.f16:
        pytest.skip(f"{rt.name} has no f16")
    x = np.array([0.5, -1.5, 3.0, -0.25], np.float16)
    out = rt.empty(4, np.float16)
    KERNELS["atan2"].launch(rt, cube_count=1, cube_dim=64, x=rt.from_numpy(x),
                            y=rt.from_numpy(np.full(4, -1.0, np.float16)), out=out)
    np.testing.assert_allclose(out.numpy().astype(np.float64),
                               np.arctan2(x.astype(np.float64), -1.0), rtol=1e-3)


CHECK_FILE = """
import math
import typing

import cube as cb
from cube import ABSOLUTE_POS, Array, cube, f16, f32, f64

F = typing.TypeVar("F")


@cube(launch=True)
def every_new_math(x: Array[f32], y: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    a, b = x[i], y[i]
    out[i] = (math.tan(a) + math.asin(a) + math.acos(a) + math.atan(a) + math.atan2(a, b)
              + math.sinh(a) + math.cosh(a) + math.asinh(a) + math.acosh(b) + math.atanh(a)
              + math.log2(b) + math.log10(b) + math.exp2(a) + math.expm1(a)
              + math.hypot(a, b) + math.fmod(a, b) + math.copysign(a, b) + math.trunc(a))


@cube(launch=True)
def every_new_math_generic(x: Array[F], y: Array[F], out: Array[F]):
    i = ABSOLUTE_POS
    a, b = x[i], y[i]
    out[i] = (cb.tan(a) + cb.asin(a) + cb.acos(a) + cb.atan(a) + cb.atan2(a, b)
              + cb.sinh(a) + cb.cosh(a) + cb.asinh(a) + cb.acosh(b) + cb.atanh(a)
              + cb.log2(b) + cb.log10(b) + cb.exp2(a) + cb.expm1(a) + cb.hypot(a, b)
              + cb.fmod(a, b) + cb.copysign(a, b) + cb.trunc(a))


CUBE_CHECK = {
    every_new_math_generic: [
        dict(type={"F": f32}, line_size={"x": 4, "y": 4, "out": 4}),
        dict(type={"F": f32}, line_size={"x": 8, "y": 8, "out": 8}),
        dict(type={"F": f64}), dict(type={"F": f16}, line_size={"x": 2, "y": 2, "out": 2}),
    ],
}
"""


def test_every_target_compiles_them(tmp_path, capsys):
    """The generated CUDA (nvcc + ptxas), HIP (hipcc), MSL (clang with the Metal shim),
    SPIR-V (spirv-val), WGSL (naga) and OpenCL C of a kernel using every new function, as
    scalars, lines of 4 and 8 and in f64 and f16, pass `cube check --targets all` (a
    target whose tool is not installed is skipped, as the check does)."""
    from cube import cli
    p = tmp_path / "every_new_math.py"
    p.write_text(CHECK_FILE)
    rc = cli.main(["check", "--targets", "all", str(p)])
    out = capsys.readouterr().out
    assert rc == 0, out[-8000:]
    assert "FAIL" not in out


if __name__ == "__main__":  # print the measured maximum ulp errors, f32 (and f64)
    for rname in sys.argv[1:] or cb.available_runtimes():
        r = cb.runtime(rname)
        for dt in (np.float32, np.float64):
            if dt == np.float64 and not r.features.f64:
                continue
            row = []
            for fname in list(UNARY) + list(BINARY):
                a, g = run(r, fname, dt)
                w = ref(fname, *a)
                if dt == np.float32:
                    with np.errstate(all="ignore"):
                        w = w.astype(np.float32).astype(np.float64)
                e = ulps(g, w, dt)
                e = e[np.abs(w) >= np.finfo(dt).tiny]
                row.append(f"{fname} {e.max():.3g}")
            print(rname, np.dtype(dt).name, ", ".join(row))

"""dl's elementwise math against PyTorch (dl/ops/elementwise_math.py, and hypot/copysign/fmod
now on the kernel language's ops): values in float64 and float32 over each function's
domain with its edges (0, -0, +-inf, nan, the domain's ends and beyond), in float16 and
bfloat16, on non-contiguous and broadcast views, integer and bool inputs (promoted as
torch promotes them), gradients (torch's inf and nan at the domain edges included), the
in-place forms, aliases and methods, on every runtime the dl suite runs (`dev`).

Tolerances, in ulps of the result's type against torch's result in the same dtype:
- interp, cpu (LLVM), opencl: float64 within 2 ulp (1e-12 relative asserted: libm, PoCL),
  float32 within 4 ulp (PoCL's tan/sinh/cosh are 2-3 ulp from the true value, torch's
  float32 another 1); erfc (a Cephes composition here) within 8 ulp in both.
  Measured maxima (this machine): float64 1 ulp (opencl: tan and acosh 2, erfc 8), float32
  1 ulp (opencl: tan/sinh/cosh 2; erfc 7).
- wgpu, wgpu-spirv (lavapipe: float32 only): the kernel math's documented precision
  (tests/cube/test_math_functions_more.py: the WGSL prelude within 4 ulp but exp-based
  sinh/cosh/expm1 80, log1p-based asinh/atanh/acosh ~2e-4 relative near 0; SPIR-V's
  GLSL.std.450 atan family within 5e-4 relative, its Exp/Log near 1 within 1e-2 relative),
  `_shader_ok` below. Subnormal results are not compared there (lavapipe may flush them).
  A nan argument gives nan there too (it gave a finite value for sinh, cosh, asinh, acosh
  and atan before the shader lowerings passed NaN through).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import dl

SHADERS = ("wgpu", "wgpu-spirv")
EDGE = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-30, -1e-30, 1.0, -1.0, 0.5, -0.5, 2.0,
        -2.0, 1e-300, 3e38, -3e38]


def _u(rng, lo, hi, n=600):
    return rng.uniform(lo, hi, n)


def _tiny(rng, n=200):
    return np.exp(rng.uniform(-30, 0, n)) * np.where(rng.uniform(size=n) < 0.5, -1, 1)


# name: (dense samples, edges beyond EDGE, ulps on interp/cpu/opencl where not 4 f32 / 2 f64)
UNARY = {
    "tan": (lambda r: np.concatenate([_u(r, -1.5, 1.5), _tiny(r)]), [1.5707963, -1.5707963]),
    "asin": (lambda r: np.concatenate([_u(r, -1, 1), _tiny(r)]), [1.0000001, 0.9999999]),
    "acos": (lambda r: _u(r, -1, 1), [1.0000001, -0.9999999]),
    "atan": (lambda r: np.concatenate([_u(r, -20, 20), _tiny(r)]), [1e30, -1e30]),
    "sinh": (lambda r: np.concatenate([_u(r, -20, 20), _tiny(r)]), [89.0, 90.0, 710.0, -711.0]),
    "cosh": (lambda r: _u(r, -20, 20), [89.0, -90.0, 710.0, -711.0]),
    "asinh": (lambda r: np.concatenate([_u(r, -20, 20), _tiny(r)]), [1e30, -1e300]),
    "acosh": (lambda r: 1 + np.exp(_u(r, -20, 5)), [0.999, 1e30, 1e300]),
    "atanh": (lambda r: np.concatenate([_u(r, -1, 1), _tiny(r)]), [0.9999999, -0.9999999]),
    "log2": (lambda r: np.exp(_u(r, -60, 60)), [1024.0, 1e-310, 5e-324]),
    "log10": (lambda r: np.exp(_u(r, -60, 60)), [1000.0, 1e-310]),
    "exp2": (lambda r: _u(r, -120, 120), [128.0, -149.0, -150.0, 1023.0, 1024.0, -1075.0]),
    "expm1": (lambda r: np.concatenate([_u(r, -5, 5), _tiny(r)]), [88.0, 89.0, -100.0]),
    "trunc": (lambda r: np.concatenate([_u(r, -1e3, 1e3), np.arange(-8, 8) * 0.5]),
              [4503599627370495.5, 8388607.5, -0.3]),
    "fix": (lambda r: _u(r, -10, 10), []),
    "erfc": (lambda r: np.concatenate([_u(r, -6, 12), _u(r, 12, 27, 100)]),
             [26.5, 27.2, 9.1, 10.5, -0.99, 0.99]),
    "deg2rad": (lambda r: _u(r, -1e3, 1e3), []),
    "rad2deg": (lambda r: _u(r, -10, 10), []),
    "logit": (lambda r: _u(r, 0, 1), [1e-7, 1 - 1e-7]),
    "sgn": (lambda r: _u(r, -2, 2), []),
}
ALIASES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh",
           "arccosh": "acosh", "arctanh": "atanh", "fix": "trunc", "sgn": "sign"}
ULPS_CPU = {"erfc": 8}
EXACT = {"trunc", "fix", "sgn", "deg2rad", "rad2deg"}
NP = {np.float64: (dl.float64, torch.float64), np.float32: (dl.float32, torch.float32)}


def _sample(name, dtype):
    rng = np.random.default_rng(sorted(UNARY).index(name))
    dense, edges = UNARY[name]
    with np.errstate(all="ignore"):
        return np.concatenate([dense(rng), EDGE, edges]).astype(dtype)


def ulps(got, want, dtype) -> np.ndarray:
    """|got - want| in units of the spacing of `dtype` at want (0 where equal, nan both)."""
    got, want = got.astype(np.float64), want.astype(np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    sp = np.spacing(np.abs(want).astype(dtype)).astype(np.float64)
    with np.errstate(all="ignore"):
        e = np.abs(got - want) / sp
    return np.where(same, 0.0, np.where(np.isnan(e), np.inf, e))


def _shader_ok(dev, name, x, got, want):
    """The elements within the shader runtimes' documented precision (module docstring)."""
    x = x.astype(np.float64)
    near = np.abs(x - (1.0 if name == "acosh" else 0.0)) < 0.5
    if dev == "wgpu":
        rtol = {"sinh": 1e-5, "cosh": 1e-5, "expm1": 1e-5, "erfc": 1e-5}.get(name, 5e-7)
        rtol = np.where(near & (name in ("asinh", "atanh", "acosh")), 5e-4, rtol)
    else:
        rtol = np.where(near & (name in ("expm1", "sinh", "asinh", "atanh", "acosh")), 1e-2,
                        5e-4)
    atol = 0.0
    if dev == "wgpu-spirv" and name in ("logit", "log2", "log10"):
        atol = 2e-5  # the driver's Log near 1: a result near 0 (logit(0.5) is 0)
    with np.errstate(all="ignore"):
        ok = np.abs(got - want) <= rtol * np.abs(want) + atol
    return ok | (got == want) | (np.isnan(got) & np.isnan(want))


def check_values(dev, name, x, got, want, dtype, ulps_cpu=None):
    """got against torch's want: ulps on interp/cpu/opencl, the shader precision on wgpu;
    returns the largest error in ulps seen."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    keep = np.ones(got.shape, bool)
    if dev in SHADERS:
        tiny = np.finfo(np.float32).tiny  # zero, subnormal or flushed results: not compared
        keep &= ~((np.abs(want) < tiny) | (np.abs(got) < tiny))
        if name == "tan":  # Vulkan's precision for sin and cos holds on [-pi, pi] only
            keep &= ~(np.abs(x) > math.pi)
        ok = _shader_ok(dev, name, x, got, want) | ~keep
        assert ok.all(), (dev, name, x[~ok][:5], got[~ok][:5], want[~ok][:5])
        return float(ulps(got[keep], want[keep], dtype).max(initial=0))
    limit = 0.0 if name in EXACT else ulps_cpu or ULPS_CPU.get(
        name, 2 if dtype == np.float64 else 4)
    e = ulps(got, want, dtype)
    bad = e > max(limit, 0.5 if limit == 0 else limit)
    assert not bad.any(), (dev, name, x[bad][:5], got[bad][:5], want[bad][:5], e[bad][:5])
    if dtype == np.float64 and name not in EXACT:  # the brief's bound, stated directly
        fin = np.isfinite(want) & (np.abs(want) > 1e-300)
        np.testing.assert_allclose(got[fin], want[fin], rtol=1e-12 if name != "erfc" else
                                   4e-15, atol=0)
    return float(e.max(initial=0))


def _torch(name):
    return getattr(torch, name)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_values(dev, name, dtype):
    if dtype == np.float64 and dev in SHADERS:
        pytest.skip(f"{dev} has no float64")
    a = _sample(name, dtype)
    got = getattr(dl, name)(dl.tensor(a, device=dev))
    want = _torch(name)(torch.from_numpy(a))
    assert got.dtype is NP[dtype][0]
    check_values(dev, name, a, got.numpy(), want.numpy(), dtype)
    # the sign of zero results (trunc(-0.3), asin(-0.0), ...): not promised on shaders
    if dev not in SHADERS:
        z = want.numpy() == 0
        assert (np.signbit(got.numpy()[z]) == np.signbit(want.numpy()[z])).all(), name


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_lines(dev, name):
    """A tensor large enough for the line kernels (SIMD lines on the CPU, 16-byte lines on
    the interpreter), fused with a neighbour: the same values as the scalar kernel."""
    rng = np.random.default_rng(3)
    dense, _ = UNARY[name]
    a = np.resize(dense(rng), 1 << 15).astype(np.float32)
    x = dl.tensor(a, device=dev)
    got = (getattr(dl, name)(x) * 2.0).numpy()
    want = (_torch(name)(torch.from_numpy(a)) * 2.0).numpy()
    check_values(dev, name, a, got, want, np.float32)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_views_and_promotion(name):
    """Transposed, sliced and broadcast (stride 0) inputs; int32, int64 and bool inputs
    give float32 as torch's (trunc and sgn keep integer dtypes; trunc refuses bool)."""
    rng = np.random.default_rng(5)
    dense, _ = UNARY[name]
    a = np.resize(dense(rng), 48).reshape(6, 8)
    x, t = dl.tensor(a), torch.from_numpy(a)
    f, tf = getattr(dl, name), _torch(name)
    for v, tv in ((x.t(), t.t()), (x[1::2, ::3], t[1::2, ::3]),
                  (x[:1].expand(4, 8), t[:1].expand(4, 8))):
        check_values("interp", name, tv.numpy(), f(v).numpy(), tf(tv).numpy(), np.float64)
    for idt, tdt in ((dl.int32, torch.int32), (dl.int64, torch.int64), (dl.bool, torch.bool)):
        ia = np.array([[-3, -1, 0], [1, 2, 7]]) if idt is not dl.bool else \
            np.array([[True, False, True]])
        ti = torch.tensor(ia, dtype=tdt)
        try:
            want = tf(ti)
        except RuntimeError:
            with pytest.raises(RuntimeError):
                f(dl.tensor(ia, dtype=idt))
            continue
        got = f(dl.tensor(ia, dtype=idt))
        assert got.dtype.name == str(want.dtype).removeprefix("torch."), (name, idt)
        np.testing.assert_allclose(got.numpy().astype(np.float64),
                                   want.numpy().astype(np.float64), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_half(name):
    """float16 and bfloat16 compute in float32 and round once, as torch's CPU ops."""
    rng = np.random.default_rng(7)
    dense, _ = UNARY[name]
    a = np.concatenate([dense(rng)[:200], [0.0, -0.0, math.inf, -math.inf, math.nan]])
    if name in ("exp2",):
        a = a / 8  # within float16's range
    for dt, tdt, rtol in ((dl.float16, torch.float16, 1e-3), (dl.bfloat16, torch.bfloat16,
                                                              8e-3)):
        tx = torch.from_numpy(a).to(tdt)
        x = dl.tensor(tx.float().numpy()).to(dt)
        got, want = getattr(dl, name)(x), _torch(name)(tx)
        if name == "logit":  # torch's half logit computes x / (1 - x) in half; dl in float32
            want = _torch(name)(tx.float()).to(tdt)
        assert got.dtype is dt
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=rtol,
                                   atol=1e-5 if dt is dl.float16 else 1e-30)


# gradients: interior points and the edges where torch's is inf, nan or merely large
GRAD = {
    "tan": [-1.2, 0.0, 0.3, 1.5],
    "asin": [-0.9, 0.0, 0.5, 1.0, -1.0, 2.0, -3.0],
    "acos": [-0.9, 0.0, 0.5, 1.0, -1.0, 2.0],
    "atan": [-3.0, 0.0, 0.5, 1e10],
    "sinh": [-3.0, 0.0, 0.5, 10.0],
    "cosh": [-3.0, 0.0, 0.5, 10.0],
    "asinh": [-3.0, 0.0, 0.5, 1e200],
    "acosh": [1.5, 3.0, 1.0, 0.5, -2.0, 1e200],
    "atanh": [-0.5, 0.0, 0.9, 1.0, -1.0, 2.0],
    "log2": [0.5, 3.0, 0.0, -1.0, math.inf],
    "log10": [0.5, 3.0, 0.0, -1.0],
    "exp2": [-3.0, 0.0, 2.5, 2000.0],
    "expm1": [-3.0, 0.0, 1e-8, 2.5],
    "trunc": [-1.5, 0.0, 2.5],
    "fix": [-1.5, 2.5],
    "erfc": [-2.0, 0.0, 0.5, 3.0, 30.0],
    "deg2rad": [-2.0, 0.0, 90.0],
    "rad2deg": [-2.0, 0.0, 3.0],
    "logit": [0.25, 0.5, 0.0, 1.0, -0.5, 1.5],
    "sgn": [-2.0, 0.0, 3.0],
}


def _grad_pair(dev, fn, tfn, arrays, dtype):
    xs = [dl.tensor(a.astype(dtype), device=dev, requires_grad=True) for a in arrays]
    ts = [torch.from_numpy(a.astype(dtype)).requires_grad_(True) for a in arrays]
    y, ty = fn(*xs), tfn(*ts)
    w = np.linspace(-1.5, 2.0, int(np.prod(ty.shape))).reshape(ty.shape).astype(dtype)
    (y * dl.tensor(w, device=dev)).sum().backward()
    (ty * torch.from_numpy(w)).sum().backward()
    return [x.grad for x in xs], [t.grad for t in ts]


def _close_grad(dev, got, want, dtype):
    if want is None:
        assert got is None or not np.any(got.numpy()), got
        return
    assert got is not None
    g, w = got.numpy().astype(np.float64), want.numpy(force=True).astype(np.float64)
    assert g.dtype == w.dtype and g.shape == w.shape
    rtol = 1e-12 if dtype == np.float64 else 2e-6 if dev not in SHADERS else 1e-3
    np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-300, equal_nan=True)


@pytest.mark.parametrize("name", sorted(GRAD))
def test_unary_grad(dev, name):
    """The gradient against torch's, float64 (float32 on runtimes without it), at interior
    points and at the domain edges where torch's is inf or nan."""
    dtype = np.float32 if dev in SHADERS else np.float64
    a = np.array(GRAD[name])
    if dtype == np.float32:
        a = a[np.abs(a) < 1e30]
    got, want = _grad_pair(dev, getattr(dl, name), _torch(name), [a], dtype)
    _close_grad(dev, got[0], want[0], dtype)


def test_unary_grad_float32_and_dtype():
    for name in sorted(GRAD):
        a = np.array(GRAD[name])
        a = a[np.abs(a) < 1e30]
        got, want = _grad_pair("interp", getattr(dl, name), _torch(name), [a], np.float32)
        assert got[0].dtype is dl.float32
        _close_grad("interp", got[0], want[0], np.float32)


def test_aliases_methods_and_inplace():
    x = dl.tensor([0.25, -0.5])
    for alias, name in ALIASES.items():
        assert getattr(dl, alias) is getattr(dl, name) is dl.ops.OPS[alias], alias
        np.testing.assert_array_equal(getattr(x, alias)().numpy(), getattr(x, name)().numpy())
    assert dl.arctan2 is dl.atan2
    np.testing.assert_array_equal(x.arctan2(x + 1).numpy(), dl.atan2(x, x + 1).numpy())
    for name in list(UNARY) + list(ALIASES):
        assert hasattr(dl.Tensor, name) and hasattr(dl.Tensor, name + "_") == hasattr(
            torch.Tensor, name + "_"), name
    assert not hasattr(dl.Tensor, "signbit_") and not hasattr(dl.Tensor, "fmax_")


INPLACE = sorted({*UNARY, *ALIASES} - {"sign"})


@pytest.mark.parametrize("name", INPLACE)
def test_inplace(name):
    """t.name_() writes torch's value into t's storage (a view's base sees it) and returns
    t; under autograd on a non-leaf the gradient is torch's."""
    base = name if name not in ALIASES else ALIASES[name]
    a = np.array(GRAD.get(base, [0.25, -0.5, 0.75]))[:3]
    a = np.clip(a, -0.9, 0.9) if base in ("asin", "acos", "atanh", "logit") else a
    a = np.abs(a) + 1.5 if base == "acosh" else a
    a = np.abs(a) + 0.5 if base in ("log2", "log10") else a
    b = dl.tensor(np.stack([a, a]))
    t = torch.from_numpy(np.stack([a, a]))
    assert getattr(b[1], name + "_")() is not None
    getattr(t[1], name + "_")()
    np.testing.assert_allclose(b.numpy(), t.numpy(), rtol=1e-12)
    x = dl.tensor(a, requires_grad=True)
    y = x * 1.0
    assert getattr(y, name + "_")() is y
    (y * dl.tensor(a)).sum().backward()
    tx = torch.from_numpy(a).requires_grad_(True)
    try:
        ty = getattr(tx * 1.0, name + "_")()
        (ty * torch.from_numpy(a)).sum().backward()
    except NotImplementedError:  # torch has no derivative for in-place asinh_, acosh_,
        tx.grad = None           # atanh_: its out-of-place one
        (_torch(base)(tx * 1.0) * torch.from_numpy(a)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(force=True), rtol=1e-12,
                               equal_nan=True)


# ---- logit ---------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [None, 0.0, 0.1, 1e-6, -1.0])
def test_logit_eps(dev, eps):
    dtype = np.float32 if dev in SHADERS else np.float64
    a = np.array([0.0, 1.0, 0.5, 0.05, 0.95, 0.1, 0.9, 2.0, -1.0, math.nan, 1e-7, 0.3])
    if dev in SHADERS:  # the driver's Log loses digits near 1 (logit near 0.5)
        a = a[[0, 1, 3, 4, 5, 6, 7, 8, 9]]
    got, want = _grad_pair(dev, lambda x: dl.logit(x, eps), lambda x: torch.logit(x, eps),
                           [a], dtype)
    y = dl.logit(dl.tensor(a.astype(dtype), device=dev), eps)
    ty = torch.logit(torch.from_numpy(a.astype(dtype)), eps)
    check_values(dev, "logit", a.astype(dtype), y.numpy(), ty.numpy(), dtype)
    _close_grad(dev, got[0], want[0], dtype)
    x = dl.tensor(a)
    assert x.logit_(eps) is x
    np.testing.assert_allclose(x.numpy(), torch.from_numpy(a).logit_(eps).numpy(),
                               rtol=1e-12, equal_nan=True)


# ---- signs -----------------------------------------------------------------------------------
def test_signbit_and_sgn(dev):
    a = np.array([-0.0, 0.0, -math.nan, math.nan, -1.0, 2.0, -math.inf, math.inf, -1e-30])
    t = torch.from_numpy(a)
    t[2] = -torch.tensor(math.nan, dtype=torch.float64)  # a nan with its sign bit set
    a = t.numpy()
    for dt in ((np.float32,) if dev in SHADERS else (np.float32, np.float64)):
        got = dl.signbit(dl.tensor(a.astype(dt), device=dev))
        assert got.dtype is dl.bool
        np.testing.assert_array_equal(got.numpy(), torch.signbit(t.to(NP[dt][1])).numpy())
    for ia, tdt in ((np.array([-3, 0, 4]), torch.int64), (np.array([True, False]), torch.bool)):
        ti = torch.tensor(ia, dtype=tdt)
        got = dl.signbit(dl.tensor(ia, device=dev))
        np.testing.assert_array_equal(got.numpy(), torch.signbit(ti).numpy())
        got = dl.sgn(dl.tensor(ia, device=dev))
        assert got.dtype.name == str(torch.sgn(ti).dtype).removeprefix("torch.")
        np.testing.assert_array_equal(got.numpy(), torch.sgn(ti).numpy())
    x = dl.tensor(a.astype(np.float32), device=dev)
    np.testing.assert_array_equal(x.signbit().numpy(), dl.signbit(x).numpy())


# ---- binary ops ------------------------------------------------------------------------------
BE = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -3.0, math.inf, -math.inf, math.nan, 1e-30])


def _pairs(n=400, seed=0, scale=10.0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n) * np.exp(rng.uniform(-3, 3, n)) * scale
    b = rng.standard_normal(n) * np.exp(rng.uniform(-3, 3, n))
    return np.concatenate([a, np.repeat(BE, len(BE))]), np.concatenate([b, np.tile(BE,
                                                                                  len(BE))])


@pytest.mark.parametrize("name", ["fmax", "fmin", "hypot", "copysign", "fmod", "heaviside",
                                  "atan2", "ldexp"])
def test_binary_values(dev, name):
    """Values against torch over random pairs and every pair of edge values, float32 and
    float64; the sign of zero results (copysign of -0.0 and of a negative nan, fmod's sign
    of the dividend) on every runtime but the shader ones (not promised there)."""
    a, b = _pairs()
    if name == "ldexp":
        b = np.round(np.clip(b * 20, -160, 160))
    if name == "fmod" and dev == "wgpu-spirv":  # OpFRem: x - y trunc(x / y) (Vulkan's)
        with np.errstate(all="ignore"):
            keep = ~(np.abs(a / np.where(b == 0, 1, b)) >= 256)
        a, b = a[keep], b[keep]
    tb = torch.from_numpy(b)
    if name == "copysign":  # negative nans: torch's copysign reads the sign bit
        tb = torch.where(torch.isnan(tb) & (torch.arange(len(b)) % 2 == 0), -tb, tb)
        b = tb.numpy()
    for dt in ((np.float32,) if dev in SHADERS else (np.float64, np.float32)):
        x, y = dl.tensor(a.astype(dt), device=dev), dl.tensor(b.astype(dt), device=dev)
        got = getattr(dl, name)(x, y).numpy()
        want = getattr(torch, name)(torch.from_numpy(a.astype(dt)), tb.to(NP[dt][1])).numpy()
        limit = {"hypot": 1, "atan2": 2, "ldexp": 0}.get(name, 0)
        if dev in SHADERS:
            limit = {"hypot": 2, "atan2": 4, "ldexp": 4}.get(name, 0)
        e = ulps(got, want, dt)
        bad = e > max(limit, 0.5)
        if name == "fmod" and dev == "wgpu-spirv":  # OpFRem's x - y trunc(x / y)
            bad = np.abs(got - want) > np.abs(a) * 4e-7
        if dev in SHADERS:  # lavapipe may flush subnormal results
            bad &= ~(np.abs(want) < np.finfo(np.float32).tiny)
        assert not bad.any(), (name, dt, a[bad][:5], b[bad][:5], got[bad][:5], want[bad][:5])
        if dev not in SHADERS:  # (fmax(0.0, -0.0) may be either zero, as C's)
            z = (want == 0) & ((name not in ("fmax", "fmin")) | (a != b))
            assert (np.signbit(got[z]) == np.signbit(want[z])).all(), (name, a[z], b[z])


@pytest.mark.parametrize("name", ["fmax", "fmin", "hypot", "copysign", "fmod", "ldexp"])
def test_binary_grad(dev, name):
    """Gradients against torch's: ties and nans (fmax/fmin: a tie's goes to a), zeros
    (copysign), broadcast operands summed back, a Python scalar operand."""
    dtype = np.float32 if dev in SHADERS else np.float64
    a = np.array([[1.0, 2.0, math.nan, math.nan, 3.0, -0.5, 0.0, 4.0]])
    b = np.array([[2.0], [1.0], [3.0]]) if name != "fmod" else np.array([[1.5], [-0.7], [2.5]])
    b = np.concatenate([b, [[math.nan]]]) if name in ("fmax", "fmin") else b
    if name == "ldexp":
        a = np.nan_to_num(a)
    got, want = _grad_pair(dev, getattr(dl, name), getattr(torch, name), [a, b], dtype)
    for g, w in zip(got, want):
        _close_grad(dev, g, w, dtype)
    s = 1.25 if name != "ldexp" else 3.0
    x = dl.tensor(a.astype(dtype), device=dev, requires_grad=True)
    tx = torch.from_numpy(a.astype(dtype)).requires_grad_(True)
    getattr(dl, name)(x, s).sum().backward()
    getattr(torch, name)(tx, torch.tensor(s, dtype=tx.dtype)).sum().backward()
    _close_grad(dev, x.grad, tx.grad, dtype)


def test_fmax_fmin_dtypes():
    for ta, tb in ((torch.tensor([1, 5, -2]), torch.tensor([3, 2, -2])),
                   (torch.tensor([True, False, False]), torch.tensor([False, False, True])),
                   (torch.tensor([1, 5], dtype=torch.int32), torch.tensor([2.5, 1.0])),
                   (torch.tensor([1.0, math.nan], dtype=torch.float16),
                    torch.tensor([math.nan, 2.0], dtype=torch.float16))):
        for f in ("fmax", "fmin"):
            x = dl.tensor(ta.float().numpy() if ta.dtype == torch.float16 else ta.numpy())
            y = dl.tensor(tb.float().numpy() if tb.dtype == torch.float16 else tb.numpy())
            if ta.dtype == torch.float16:
                x, y = x.half(), y.half()
            got, want = getattr(dl, f)(x, y), getattr(torch, f)(ta, tb)
            assert got.dtype.name == str(want.dtype).removeprefix("torch."), (f, ta.dtype)
            np.testing.assert_array_equal(got.float().numpy() if got.dtype is dl.float16
                                          else got.numpy(), want.float().numpy()
                                          if want.dtype == torch.float16 else want.numpy())
    np.testing.assert_array_equal(dl.fmax(dl.tensor([1.0, math.nan]), math.nan).numpy(),
                                  [1.0, math.nan])


def test_heaviside_dtypes():
    for a, v in ((torch.tensor([-1.0, 0.0, -0.0, 2.0, math.nan, -math.inf]),
                  torch.tensor([0.5])),
                 (torch.tensor([-3, 0, 4]), torch.tensor([7, 8, 9])),
                 (torch.tensor([True, False, False]), torch.tensor([False, True, False]))):
        got = dl.heaviside(dl.tensor(a.numpy()), dl.tensor(v.numpy()))
        want = torch.heaviside(a, v)
        assert got.dtype.name == str(want.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(dl.tensor(a.numpy()).heaviside(
            dl.tensor(v.numpy())).numpy(), want.numpy())
    with pytest.raises(RuntimeError, match="different dtypes"):
        torch.heaviside(torch.tensor([1.0]), torch.tensor([1]))
    with pytest.raises(RuntimeError, match="different dtypes"):
        dl.heaviside(dl.tensor([1.0]), dl.tensor([1]))
    np.testing.assert_array_equal(dl.heaviside(dl.tensor([-1.0, 0.0, 3.0]), 0.25).numpy(),
                                  [0.0, 0.25, 1.0])
    x = dl.tensor([-1.0, 0.0, 3.0])
    assert x.heaviside_(dl.tensor([0.5])) is x
    np.testing.assert_array_equal(x.numpy(), [0.0, 0.5, 1.0])


def test_ldexp_dtypes():
    """The promoted float dtype, integers giving float32, as torch's (a float16 mantissa with
    integer exponents stays float16 and overflows to inf)."""
    dts = {torch.float16: dl.float16, torch.float32: dl.float32, torch.float64: dl.float64,
           torch.int32: dl.int32, torch.int64: dl.int64, torch.bfloat16: dl.bfloat16}
    for ta in dts:
        for tb in (torch.float16, torch.float32, torch.float64, torch.int32, torch.int64):
            a, b = torch.tensor([1.5, -3.0, 1.0]).to(ta), torch.tensor([3, -2, 20]).to(tb)
            got = dl.ldexp(dl.tensor(a.float().numpy()).to(dts[ta]),
                           dl.tensor(b.float().numpy()).to(dts[tb]))
            want = torch.ldexp(a, b)
            assert got.dtype.name == str(want.dtype).removeprefix("torch."), (ta, tb)
            np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    # integer exponents exactly (torch's: 1e-30 * 2^200 is finite in float32); float ones
    # as torch's a * pow(2, b), 2^b rounded to b's dtype first (inf in float32 here)
    for a, b in ((torch.tensor([1e-30, 3.0, 1e30]), torch.tensor([200, -130, -230])),
                 (torch.tensor([1e-30], dtype=torch.float64), torch.tensor([200.0])),
                 (torch.tensor([1.0], dtype=torch.float64), torch.tensor([0.1]))):
        got = dl.ldexp(dl.tensor(a.numpy()), dl.tensor(b.numpy()))
        np.testing.assert_array_equal(got.numpy(), torch.ldexp(a, b).numpy())
    x = dl.tensor([1.5, 2.0])
    assert x.ldexp_(dl.tensor([2, -1])) is x
    np.testing.assert_array_equal(x.numpy(), [6.0, 1.0])


def test_float_power():
    for a, b in ((torch.tensor([2, 3, -2]), 2), (torch.tensor([2.0, 0.5]), torch.tensor([0.5, 3])),
                 (torch.tensor([2.0, 4.0], dtype=torch.float16), -0.5),
                 (3, torch.tensor([1.0, -1.0])), (torch.tensor([-8.0, 0.0]), 1 / 3)):
        da = dl.tensor(a.float().numpy()).to(str(a.dtype).removeprefix("torch.")) \
            if isinstance(a, torch.Tensor) else a
        db = dl.tensor(b.numpy()) if isinstance(b, torch.Tensor) else b
        got, want = dl.float_power(da, db), torch.float_power(a, b)
        assert got.dtype is dl.float64
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-15, equal_nan=True)
    got, want = _grad_pair("interp", lambda x, y: dl.float_power(x, y),
                           lambda x, y: torch.float_power(x, y),
                           [np.array([2.0, 0.5, 3.0]), np.array([1.5, -2.0, 0.0])],
                           np.float32)
    for g, w in zip(got, want):
        assert g.dtype is dl.float32
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="float_power_"):
        dl.tensor([2.0]).float_power_(2)
    x = dl.tensor(np.array([2.0, 3.0]))
    assert x.float_power_(2) is x
    np.testing.assert_array_equal(x.numpy(), [4.0, 9.0])


def test_erfc_tail(dev):
    """erfc where it is tiny (relative accuracy, not 1 - erf's absolute): float64 to 26.5,
    float32 to 9, against torch (glibc's erfc)."""
    dts = [np.float32] if dev in SHADERS else [np.float32, np.float64]
    for dt in dts:
        hi = 9.0 if dt == np.float32 else 26.5
        a = np.linspace(-hi, hi, 1001).astype(dt)
        got = dl.erfc(dl.tensor(a, device=dev)).numpy()
        want = torch.erfc(torch.from_numpy(a)).numpy()
        check_values(dev, "erfc", a, got, want, dt)


def test_fusion_chain(dev):
    """Several of the new ops and their gradients in one lazy chain (one fused kernel)."""
    a = np.linspace(-0.9, 0.9, 24).reshape(4, 6)
    dt = np.float32 if dev in SHADERS else np.float64
    f = (lambda m, x: m.atan(m.asin(x) * 0.5 + m.expm1(x)) * m.cosh(x) + m.log2(m.exp2(x)))
    got, want = _grad_pair(dev, lambda x: f(dl, x), lambda x: f(torch, x), [a], dt)
    y = f(dl, dl.tensor(a.astype(dt), device=dev)).numpy()
    ty = f(torch, torch.from_numpy(a.astype(dt))).numpy()
    tol = 1e-12 if dt == np.float64 else 1e-5 if dev not in SHADERS else 2e-3
    np.testing.assert_allclose(y, ty, rtol=tol, atol=tol)
    np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=tol, atol=tol)

"""Fused elementwise kernels over lines (SIMD): where every operand is contiguous, a repeated
row or one element, the fused kernel computes lines of L elements (16 f32 on AVX-512, 4 on
the interpreter, 1 on GPU targets). Each case is checked against NumPy float64 and, bit for
bit, against the same graph run by the scalar (one element per unit) kernel."""
from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from dl_helpers import rand_np

import dl
import dl.nn.functional as F

mat = sys.modules["dl.fusion.materialise"]
_erf = np.vectorize(math.erf)


def _lines_expected(dev) -> bool:
    return mat.line_bytes(dl.device(dev).rt) > 0


def _run(fn, scalar: bool = False):
    """fn()'s result as NumPy, and the lanes of the fused kernels it launched; scalar: with
    the line kernels off (every graph below the size lines start at)."""
    mat._hot.clear()
    old = mat.LINE_MIN_ELEMS
    mat.LINE_MIN_ELEMS = 1 << 62 if scalar else old
    try:
        out = fn().numpy()
    finally:
        mat.LINE_MIN_ELEMS = old
    return out, sorted({key[1][7] for key in mat._hot})


def _check(dev, fn, want, rtol=1e-5, atol=1e-6, lines=True):
    """fn() over lines (where the runtime has them) matches want, and the scalar kernel."""
    got, lanes = _run(fn)
    if lines and _lines_expected(dev):
        assert max(lanes) > 1, lanes
    else:
        assert lanes == [1], lanes
    ref, ref_lanes = _run(fn, scalar=True)
    assert ref_lanes == [1]
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)  # lines and scalars: the same bits
    w = np.asarray(want)
    if got.dtype == bool or w.dtype == bool:
        np.testing.assert_array_equal(got, w)
    else:
        np.testing.assert_allclose(got.astype(np.float64), w.astype(np.float64),
                                   rtol=rtol, atol=atol)
    return got


N = 1 << 14  # a multiple of every line size, and as many elements as lines start at

UNARY = {
    "exp": (lambda t: t.exp(), np.exp),
    "log": (lambda t: (t.abs() + 0.1).log(), lambda a: np.log(np.abs(a) + 0.1)),
    "log1p": (lambda t: t.abs().log1p(), lambda a: np.log1p(np.abs(a))),
    "tanh": (lambda t: t.tanh(), np.tanh),
    "erf": (lambda t: t.erf(), _erf),
    "sigmoid": (lambda t: t.sigmoid(), lambda a: 1 / (1 + np.exp(-a))),
    "gelu": (F.gelu, lambda a: 0.5 * a * (1 + _erf(a / math.sqrt(2)))),
    "gelu_tanh": (lambda t: F.gelu(t, approximate="tanh"),
                  lambda a: 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) *
                                                    (a + 0.044715 * a ** 3)))),
    "silu": (lambda t: t.silu(), lambda a: a / (1 + np.exp(-a))),
    "softplus": (lambda t: (t * 12.0).softplus(),
                 lambda a: np.where(a * 12 > 20, a * 12, np.log1p(np.exp(a * 12)))),
    "sqrt": (lambda t: t.abs().sqrt(), lambda a: np.sqrt(np.abs(a))),
    "rsqrt": (lambda t: (t.abs() + 0.5).rsqrt(), lambda a: 1 / np.sqrt(np.abs(a) + 0.5)),
    "sin": (lambda t: t.sin(), np.sin),
    "cos": (lambda t: t.cos(), np.cos),
    "relu": (lambda t: t.relu(), lambda a: np.maximum(a, 0)),
    "sign": (lambda t: t.sign(), np.sign),
    "floor": (lambda t: (t * 3.0).floor(), lambda a: np.floor(a.astype(np.float32) * 3)),
    "ceil": (lambda t: (t * 3.0).ceil(), lambda a: np.ceil(a.astype(np.float32) * 3)),
    "round": (lambda t: (t * 3.0).round(), lambda a: np.round(a.astype(np.float32) * 3)),
    "abs_neg": (lambda t: -t.abs(), lambda a: -np.abs(a)),
    "pow": (lambda t: t.abs() ** 1.5, lambda a: np.abs(a) ** 1.5),
    "clamp": (lambda t: t.clamp(-0.5, 0.75), lambda a: np.clip(a, -0.5, 0.75)),
}


@pytest.mark.parametrize("op", list(UNARY))
def test_unary_math_over_lines(dev, op):
    fn, ref = UNARY[op]
    a = rand_np((N,), 1)
    x = dl.tensor(a, device=dev)
    _check(dev, lambda: fn(x), ref(a.astype(np.float64)), rtol=2e-5, atol=2e-6)


def test_a_chain_over_lines_fused_equals_unfused(dev):
    a, b = rand_np((32, 512), 2), rand_np((32, 512), 3)
    x, y = dl.tensor(a, device=dev), dl.tensor(b, device=dev)

    def chain():
        return ((x * y + 1.0).exp() - y).sigmoid()
    got = _check(dev, chain, 1 / (1 + np.exp(-(np.exp(a * b.astype(np.float64) + 1) - b))))
    with dl.fusion(False):
        np.testing.assert_array_equal(got, chain().numpy())


@pytest.mark.parametrize("case", ["row", "row_3d", "scalar_tensor", "python_scalar",
                                  "compare_where", "offset_view", "per_row", "layernorm",
                                  "per_channel", "per_channel_3d", "per_channel_offset"])
def test_binary_with_broadcast_over_lines(dev, case):
    a, b = rand_np((512, 48), 4), rand_np((48,), 5)
    x, bias = dl.tensor(a, device=dev), dl.tensor(b, device=dev)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if case == "row":  # a bias: the row's lines, repeated over the rows
        _check(dev, lambda: (x + bias) * 2.0, (a64 + b64) * 2.0)
    elif case == "row_3d":  # (64, 8, 32) + (8, 32): one row of 256 after merging dims
        c, d = rand_np((64, 8, 32), 6), rand_np((8, 32), 7)
        xc, xd = dl.tensor(c, device=dev), dl.tensor(d, device=dev)
        _check(dev, lambda: (xc - xd).tanh(), np.tanh(c.astype(np.float64) - d))
    elif case == "scalar_tensor":  # a 0-d tensor: one element to every lane
        s = dl.tensor(np.float32(1.75), device=dev)
        _check(dev, lambda: x * s + x, a64 * 1.75 + a64)
    elif case == "python_scalar":
        _check(dev, lambda: 2.5 - x / 3.0, 2.5 - a.astype(np.float32) / np.float32(3.0),
               rtol=1e-6)
    elif case == "compare_where":
        _check(dev, lambda: dl.where(x > bias, x, bias * 0.5),
               np.where(a > b, a64, b64 * 0.5))
    elif case == "per_row":  # a (rows, 1) operand: one element per row to every lane
        m = x.amax(1, keepdim=True)
        m._materialise()
        _check(dev, lambda: (x - m).exp(), np.exp(a64 - a64.max(1, keepdims=True)))
    elif case == "layernorm":  # per-row mean and scale, per-column weight and bias
        mu, sd = x.mean(1, keepdim=True), (x.var(1, keepdim=True) + 1e-5).rsqrt()
        mu._materialise()
        sd._materialise()
        w = dl.tensor(b * 0.5, device=dev)
        mu64, sd64 = mu.numpy().astype(np.float64), sd.numpy().astype(np.float64)
        _check(dev, lambda: (x - mu) * sd * w + bias, (a64 - mu64) * sd64 * (b64 * 0.5) + b64)
    elif case.startswith("per_channel"):
        # (1, C, 1, 1) operands of an (N, C, H, W) graph (batch norm's statistics, weight
        # and bias): one element per row of H*W, repeating every C rows; a (C, 1, 1) one
        # over (N, C, D, H, W) repeats over N and D both; one at an offset (a view of a
        # longer vector) reads from there
        shape, pshape = ((4, 8, 4, 8, 16), (8, 1, 1, 1)) if case == "per_channel_3d" else \
            ((16, 8, 8, 16), (1, 8, 1, 1))
        c = rand_np(shape, 8)
        ms = [rand_np(pshape, 9 + k) for k in range(3)]
        xc = dl.tensor(c, device=dev)
        pm = [dl.tensor(m, device=dev) for m in ms]
        if case == "per_channel_offset":
            long = rand_np((15,), 12)
            pm[0] = dl.tensor(long, device=dev)[7:].reshape(pshape)
            ms[0] = long[7:].reshape(pshape)
        m64 = [m.astype(np.float64) for m in ms]
        _check(dev, lambda: (xc - pm[0]) * pm[1] + pm[2],
               (c.astype(np.float64) - m64[0]) * m64[1] + m64[2])
    else:  # views at offsets: a multiple of every line (16, 64), or not (3: scalar kernel)
        flat = a.reshape(-1)
        xf = dl.tensor(flat, device=dev)
        _check(dev, lambda: xf[16:N + 16] * xf[64:N + 64],
               flat[16:N + 16].astype(np.float64) * flat[64:N + 64])
        _check(dev, lambda: xf[3:N + 3] + 1.0, flat[3:N + 3].astype(np.float64) + 1.0,
               lines=False)


@pytest.mark.parametrize("case", ["f16_roundtrip", "bf16", "int_float", "f16_f32", "f64",
                                  "f64_f32", "int64", "bool_to_float", "float_to_int"])
def test_casts_and_mixed_dtypes_over_lines(dev, case):
    a, b = rand_np((N,), 8), rand_np((N,), 9)
    x, y = dl.tensor(a, device=dev), dl.tensor(b, device=dev)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if case == "f16_roundtrip":  # every op rounds to f16 (f32 compute): as NumPy's f16
        h = x.to(dl.float16)
        want = (a.astype(np.float16) * np.float16(3.0)).astype(np.float32)
        _check(dev, lambda: (h * 3.0).to(dl.float32), want, rtol=0, atol=0)
    elif case == "bf16":
        h = x.to(dl.bfloat16)
        _check(dev, lambda: (h * y).to(dl.float32), a64 * b64, rtol=2e-2, atol=1e-2)
    elif case == "int_float":
        i = dl.tensor((a * 100).astype(np.int32), device=dev)
        _check(dev, lambda: i + y, (a * 100).astype(np.int32) + b64)
    elif case == "f16_f32":
        h = dl.tensor(a.astype(np.float16), device=dev)
        _check(dev, lambda: h * y, a.astype(np.float16).astype(np.float64) * b64)
    elif case == "f64":  # lanes of 8 on AVX-512; the interpreter's lines of 2: scalar
        if not getattr(dl.device(dev).rt.features, "f64", True):
            pytest.skip("no f64 on this device")
        xd = dl.tensor(a64, device=dev)
        _check(dev, lambda: (xd * 1.5).exp(), np.exp(a64 * 1.5), rtol=1e-12, atol=1e-12,
               lines=dl.device(dev).rt.target == "llvm")
    elif case == "f64_f32":
        if not getattr(dl.device(dev).rt.features, "f64", True):
            pytest.skip("no f64 on this device")
        xd = dl.tensor(a64, device=dev)
        _check(dev, lambda: xd + y, a64 + b64, rtol=1e-12, atol=1e-12,
               lines=dl.device(dev).rt.target == "llvm")
    elif case == "int64":
        if not getattr(dl.device(dev).rt.features, "int64", True):
            pytest.skip("no int64 on this device")
        i = dl.tensor((a * 1000).astype(np.int64), device=dev)
        _check(dev, lambda: i * 3 - 7, (a * 1000).astype(np.int64) * 3 - 7,
               lines=dl.device(dev).rt.target == "llvm")
    elif case == "bool_to_float":
        _check(dev, lambda: (x > y).to(dl.float32) * 2.0, (a > b) * 2.0)
    else:
        _check(dev, lambda: (x * 50.0).to(dl.int32), (a * np.float32(50)).astype(np.int32))


@pytest.mark.parametrize("n", [0, 1, 5, 1003, N + 2, N + 4, 70001])
def test_sizes_no_line_divides(dev, n):
    """Narrower lines where they divide, lines plus a scalar tail kernel from 64K elements
    (the CPU), else the scalar kernel; empty and one-element graphs too."""
    a = rand_np((n,), 10)
    x = dl.tensor(a, device=dev)
    with dl.count_kernels() as c:
        got, lanes = _run(lambda: (x * 2.0).exp())
    np.testing.assert_allclose(got, np.exp(a.astype(np.float64) * 2), rtol=2e-5)
    ref, _ = _run(lambda: (x * 2.0).exp(), scalar=True)
    np.testing.assert_array_equal(got, ref)
    if n == 0:
        assert c.launches == 0
        return
    rt = dl.device(dev).rt
    if n == 70001 and rt.target == "llvm":
        assert lanes == [1, mat.line_bytes(rt) // 4] and c.launches == 2
    elif n == N + 4 and _lines_expected(dev):
        assert lanes == [4]
    elif n in (1, 5, 1003, N + 2):
        assert lanes == [1]


@pytest.mark.parametrize("gen", ["arange", "rand", "randn", "full"])
def test_generators_over_lines_match_the_scalar_kernel(dev, gen):
    """Generators read a line of element indices: the same values as one index per unit."""
    def make():
        dl.manual_seed(7)
        if gen == "arange":
            return dl.arange(N, dtype=dl.float32, device=dev) * 0.5
        if gen == "full":
            return dl.full((N,), 2.5, device=dev) + 1.0
        return getattr(dl, gen)(N, device=dev) * 1.0
    got, lanes = _run(make)
    ref, _ = _run(make, scalar=True)
    np.testing.assert_array_equal(got, ref)
    if dl.device(dev).rt.target == "llvm":  # (arange's 8-byte types: 2 lanes on interp)
        assert max(lanes) > 1
    if gen == "arange":
        np.testing.assert_array_equal(got, np.arange(N, dtype=np.float32) * 0.5)
    elif gen == "full":
        assert (got == 3.5).all()
    elif gen == "rand":
        assert 0 <= got.min() and got.max() < 1 and abs(got.mean() - 0.5) < 0.03
    else:
        assert abs(got.mean()) < 0.1 and abs(got.std() - 1) < 0.1


def test_strided_operands_keep_the_scalar_kernel(dev):
    a = rand_np((128, 128), 11)
    x = dl.tensor(a, device=dev)
    _check(dev, lambda: x.t() * 2.0 + x, a.T * 2.0 + a.astype(np.float64), lines=False)


@pytest.mark.parametrize("case", ["slice", "permute", "two_slices", "slice_of_permute"])
def test_gathered_rows_over_lines(dev, case):
    """Operands whose last dim is contiguous but whose rows lie anywhere (a slice along the
    last dim, a permute keeping it last) are read a line at a time, each row from its
    coordinates: NumPy's values, and the scalar kernel's bits."""
    a = rand_np((16, 32, 96), 21)  # N elements a result: as many as lines start at
    c = rand_np((16, 32, 32), 22)
    x, y = dl.tensor(a, device=dev), dl.tensor(c, device=dev)
    if case == "slice":
        _check(dev, lambda: x[..., 32:64] * 2.0 + y, a[..., 32:64] * 2.0 + c)
    elif case == "permute":
        p = rand_np((4, 8, 16, 32), 23)
        t = dl.tensor(p, device=dev)
        _check(dev, lambda: t.permute(0, 2, 1, 3) * 3.0 - 1.0,
               p.transpose(0, 2, 1, 3) * 3.0 - 1.0)
    elif case == "two_slices":
        _check(dev, lambda: x[..., :32] * x[..., 64:96] + x[..., 32:64],
               a[..., :32] * a[..., 64:96] + a[..., 32:64])
    else:  # the q of a packed (b, s, 3, h, d) projection, heads first
        q = x.reshape(16, 32, 3, 2, 16).permute(2, 0, 3, 1, 4)[1]
        _check(dev, lambda: q.exp(),
               np.exp(a.reshape(16, 32, 3, 2, 16).transpose(2, 0, 3, 1, 4)[1]
                      .astype(np.float64)), rtol=2e-6)


def test_rows_not_on_line_boundaries_keep_the_scalar_kernel(dev):
    a = rand_np((16, 32, 96), 24)
    x = dl.tensor(a, device=dev)
    _check(dev, lambda: x[..., 1:33] + 1.0, a[..., 1:33] + 1.0, lines=False)
    _check(dev, lambda: x[..., :30] * 2.0, a[..., :30] * 2.0, lines=False)


def test_writing_gathered_rows_over_lines(dev):
    """A slice of a bigger tensor as the output (a slice's gradient, a setitem): written a
    line at a time into its rows, nothing else touched."""
    a = rand_np((16, 32, 32), 25)
    x = dl.tensor(a, device=dev)
    for lo in (0, 32, 64):
        big = dl.zeros((16, 32, 96), device=dev)
        big._materialise()
        mat._hot.clear()
        mat.materialise([x * 2.0 + 1.0], [big[..., lo:lo + 32]])
        if _lines_expected(dev):
            assert max(key[1][7] for key in mat._hot) > 1
        want = np.zeros((16, 32, 96), np.float32)
        want[..., lo:lo + 32] = a * np.float32(2) + np.float32(1)
        np.testing.assert_array_equal(big.numpy(), want)
    w = dl.zeros((4, 16, 8, 32), device=dev)
    p = rand_np((4, 8, 16, 32), 26)
    w.permute(0, 2, 1, 3).copy_(dl.tensor(p, device=dev) - 0.5)
    np.testing.assert_array_equal(w.numpy(), p.transpose(0, 2, 1, 3) - np.float32(0.5))


def test_a_stored_bool_leaf_over_lines(dev):
    a = rand_np((N,), 12)
    x = dl.tensor(a, device=dev)
    m = x > 0.1
    m._materialise()  # a bool tensor in memory: read as a line of bools
    _check(dev, lambda: dl.where(m, x, 0.0), np.where(a > 0.1, a, 0.0), rtol=0, atol=0)
    _check(dev, lambda: m.to(dl.float32) * 2.0, (a > 0.1) * 2.0, rtol=0, atol=0)


def test_several_roots_and_given_outputs_over_lines(dev):
    """One line kernel computing two roots of different dtypes; and one writing into a
    contiguous slice (at an offset of whole lines) of a bigger tensor."""
    a = rand_np((N,), 13)
    x = dl.tensor(a, device=dev)
    y1, y2 = (x * 2.0).exp(), (x * 2.0).to(dl.float16)
    mat._hot.clear()
    mat.materialise([y1, y2])
    if _lines_expected(dev):
        assert max(key[1][7] for key in mat._hot) > 1
    np.testing.assert_allclose(y1.numpy(), np.exp(a.astype(np.float64) * 2), rtol=2e-5)
    np.testing.assert_array_equal(y2.numpy(), (a * np.float32(2)).astype(np.float16))
    big = dl.zeros((3 * N,), device=dev)
    big._materialise()
    mat.materialise([x + 1.0], [big[N:2 * N]])
    got = big.numpy()
    np.testing.assert_array_equal(got[N:2 * N], a + np.float32(1))
    assert not got[:N].any() and not got[2 * N:].any()


red = sys.modules["dl.fusion.reduce"]


def _reduce(t, op, *dim):
    """op over dim (every dim without one): amax/amin for max/min (max(dim) is an argmax)."""
    return getattr(t, {"max": "amax", "min": "amin"}.get(op, op))(*dim)


def _reduce_run(fn, monkeypatch, scalar: bool = False):
    """fn()'s result and how many fused reductions ran over lines."""
    calls = []
    real = red._reduce_lines
    monkeypatch.setattr(red, "_reduce_lines", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(red, "LINE_MIN_ELEMS", 1 << 62 if scalar else mat.LINE_MIN_ELEMS)
    out = fn()
    out = out.numpy()
    return out, len(calls)


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("case", ["rows", "per_row_leaf", "half", "all_dims", "int",
                                  "row_not_divisible"])
def test_fused_reductions_over_lines(dev, monkeypatch, op, case):
    """A lazy graph reduced along its contiguous last dims a line at a time (lanes of
    partial results, combined at the end): NumPy float64 within rounding, and close to the
    scalar kernel (the order of the additions differs)."""
    a = rand_np((64, 512), 14) * (0.01 if op == "prod" else 1.0)
    x = dl.tensor(a, device=dev)
    a64 = a.astype(np.float64)
    lines = _lines_expected(dev)
    # sums of 512 f32 values of a few units; products of 512 roundings (of exp's too)
    tol = dict(rtol=1e-4 if op == "prod" else 1e-5, atol=1e-4)
    if case == "rows":
        def fn():
            return _reduce((x * 2.0).exp(), op, 1)
        want = getattr(np, op)(np.exp(a64 * 2), axis=1)
    elif case == "per_row_leaf":  # softmax's denominator: a (rows, 1) operand
        m = x.amax(1, keepdim=True)
        m._materialise()

        def fn():
            return _reduce((x - m).exp(), op, 1)
        want = getattr(np, op)(np.exp(a64 - a64.max(1, keepdims=True)), axis=1)
    elif case == "half":
        h = dl.tensor(a.astype(np.float16), device=dev)

        def fn():
            return _reduce(h * 0.5, op, 1)
        want = getattr(np, op)((a.astype(np.float16) * np.float16(0.5)).astype(np.float64),
                               axis=1)
        tol = dict(rtol=1e-3, atol=1e-3)
    elif case == "all_dims":
        def fn():
            return _reduce(x + 1.0, op)
        want = getattr(np, op)(a64 + 1.0)
        tol = dict(rtol=1e-4, atol=1e-4) if op != "prod" else dict(rtol=1e-3, atol=0)
        lines = False  # one long row: dl computes the graph and the library reduces it
    elif case == "int":
        i = dl.tensor((a * 100).astype(np.int32), device=dev)

        def fn():
            return _reduce(i * 3, op, 1)
        want = getattr(np, op)((a * 100).astype(np.int32).astype(np.int64) * 3, axis=1)
        if op == "prod":
            pytest.skip("an int product of 512 values overflows")
        # an int64 accumulator (sum) is 8 bytes: lines of 8 on the CPU, scalar on interp
        lines = lines and (dl.device(dev).rt.target == "llvm" or op in ("max", "min"))
    else:
        b = dl.tensor(rand_np((64, 498), 15) * (0.01 if op == "prod" else 1.0), device=dev)

        def fn():
            return _reduce(b * 2.0, op, 1)
        want = getattr(np, op)(b.numpy().astype(np.float64) * 2, axis=1)
        lines = False
    if op == "mean" and case == "int":
        pytest.skip("mean of ints is refused")
    got, n_lines = _reduce_run(fn, monkeypatch)
    ref, n_ref = _reduce_run(fn, monkeypatch, scalar=True)
    assert n_ref == 0
    assert n_lines == (1 if lines else 0), n_lines
    np.testing.assert_allclose(got.astype(np.float64), want, **tol)
    np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), **tol)

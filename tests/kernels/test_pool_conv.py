"""Pooling and convolution: every candidate against NumPy float64, NCHW and NHWC."""
import numpy as np
import pytest
from kutil import candidate, names

from dl.kernels import conv as C
from dl.kernels import pool as P

POOL_CASES = [((1, 3, 7, 9), 3, 1, 1, 1), ((2, 16, 9, 8), 2, 2, 0, 1),
              ((1, 1, 5, 5), (3, 2), (2, 1), (1, 1), (2, 1)), ((1, 5, 11, 10), 5, 2, 2, 2),
              # rows wide enough for the vectorised interior loop of `rows`, plus remainders
              ((2, 3, 6, 67), 3, 1, 1, 1), ((1, 2, 9, 70), (5, 3), (1, 2), (2, 1), (1, 2)),
              # ceil_mode: last windows cut by the input's end, or past the padding
              ((1, 2, 7, 67), 2, 2, 0, 1, True), ((2, 3, 6, 68), 3, 2, 1, 1, True),
              ((1, 2, 10, 70), (5, 3), (3, 2), (2, 1), (1, 2), True)]


@pytest.mark.parametrize("name", names(P.POOL))
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("kind", ["max", "avg", "avg_nopad"])
@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_pool_candidates(rt, name, layout, kind, case, monkeypatch):
    shape, k, s, p, d, *ceil = case
    ceil = bool(ceil)
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    if kind == "max":  # a NaN tap makes its windows NaN (torch's, and NumPy's max here)
        x.reshape(-1)[5::97] = np.nan
    xi = x if layout == "NCHW" else np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    with candidate(P.POOL, name, monkeypatch):
        if kind == "max":
            out = P.max_pool2d(rt, rt.from_numpy(xi), k, s, p, d, layout, ceil_mode=ceil)
        else:
            out = P.avg_pool2d(rt, rt.from_numpy(xi), k, s, p, layout, kind == "avg",
                               ceil_mode=ceil)
    got = out.numpy() if layout == "NCHW" else out.numpy().transpose(0, 3, 1, 2)
    ref = P.reference(x, k, s, p, d if kind == "max" else 1, kind == "max", kind == "avg",
                      ceil_mode=ceil)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["max", "avg", "avg_nopad"])
def test_pool_candidates_agree_bitwise(rt, kind, monkeypatch):
    """Tuning never changes results: every candidate sums the taps in the same order."""
    x = np.random.default_rng(7).standard_normal((1, 3, 9, 70)).astype(np.float32)
    monkeypatch.setenv("CUBE_AUTOTUNE", "off")
    outs = []
    for name in names(P.POOL):
        if name == "rows_sep" and kind != "max":
            continue  # max only
        with P.POOL.only(name):
            if kind == "max":
                out = P.max_pool2d(rt, rt.from_numpy(x), (5, 3), (1, 2), (2, 1), (1, 2))
            else:
                out = P.avg_pool2d(rt, rt.from_numpy(x), (5, 3), (1, 2), (2, 1),
                                   count_include_pad=kind == "avg")
        outs.append(out.numpy())
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])


CONV_CASES = [((1, 3, 7, 6), (4, 3, 3, 3), 1, 1, 1, 1),
              ((2, 4, 9, 8), (6, 2, 3, 2), (2, 1), (1, 0), (1, 2), 2),
              ((1, 1, 1, 1), (2, 1, 1, 1), 1, 0, 1, 1),
              # groups of 1 with strides, dilation and rows wide enough for `rows`' vector loop
              ((2, 3, 9, 67), (5, 3, 3, 2), (2, 3), (1, 2), (2, 1), 1),
              ((1, 2, 6, 40), (3, 2, 3, 3), 1, 1, 1, 1)]


@pytest.mark.parametrize("name", names(C.CONV))
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv_candidates(rt, name, with_bias, case, monkeypatch):
    xs, ws, s, p, d, g = case
    rng = np.random.default_rng(sum(xs))
    x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    bias = rng.standard_normal(ws[0]).astype(np.float32) if with_bias else None
    with candidate(C.CONV, name, monkeypatch):
        out = C.conv2d(rt, rt.from_numpy(x), rt.from_numpy(w),
                       None if bias is None else rt.from_numpy(bias), s, p, d, g)
    np.testing.assert_allclose(out.numpy(), C.reference(x, w, bias, s, p, d, g), rtol=1e-4,
                               atol=1e-4)


def test_conv_relu_epilogue(rt):
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((1, 2, 5, 5)).astype(np.float32), \
        rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    out = C.conv2d(rt, rt.from_numpy(x), rt.from_numpy(w), padding=1, act="relu")
    np.testing.assert_allclose(out.numpy(), np.maximum(C.reference(x, w, padding=1), 0),
                               rtol=1e-4, atol=1e-4)

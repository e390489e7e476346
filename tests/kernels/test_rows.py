"""softmax, log-softmax and layer norm over the last axis: every candidate vs NumPy float64."""
import numpy as np
import pytest
from kutil import candidate, names, need

from dl.kernels import norm as N
from dl.kernels import softmax as S

SHAPES = [(1, 1), (3, 7), (5, 48), (2, 3, 33), (4, 64)]


@pytest.mark.parametrize("name", names(S.SOFTMAX))
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_softmax_candidates(rt, name, log, shape, monkeypatch):
    x = (np.random.default_rng(sum(shape)).standard_normal(shape) * 4).astype(np.float32)
    with candidate(S.SOFTMAX, name, monkeypatch):
        f = S.log_softmax if log else S.softmax
        got = f(rt, rt.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, S.reference(x, log), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", names(N.LAYER_NORM))
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_layer_norm_candidates(rt, name, affine, shape, monkeypatch):
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    w = rng.standard_normal(shape[-1]).astype(np.float32)
    b = rng.standard_normal(shape[-1]).astype(np.float32)
    with candidate(N.LAYER_NORM, name, monkeypatch):
        got = N.layer_norm(rt, rt.from_numpy(x), rt.from_numpy(w) if affine else None,
                           rt.from_numpy(b) if affine else None).numpy()
    ref = N.reference(x, w if affine else None, b if affine else None)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_softmax_f64_rows_sum_to_one(rt):
    need(rt, np.float64)
    x = np.random.default_rng(0).standard_normal((3, 50)) * 30
    got = S.softmax(rt, rt.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, S.reference(x), rtol=1e-12, atol=1e-15)

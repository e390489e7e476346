"""dl.nn.init against torch.nn.init: gains and exact fills compared directly, random
initialisers by their distributions (sample moments and CDF beside the analytic ones and
torch's samples), orthogonal_ against NumPy's float64 QR of the same normal matrix."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import dl
from dl.nn import init

NONLINEARITIES = [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None),
                  ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None)]


@pytest.mark.parametrize("name,param", NONLINEARITIES)
def test_calculate_gain_is_torchs(name, param):
    assert init.calculate_gain(name, param) == pytest.approx(
        torch.nn.init.calculate_gain(name, param), rel=1e-12)


def test_calculate_gain_refuses_unknown_names():
    with pytest.raises(ValueError, match="unsupported nonlinearity"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match="not a valid number"):
        init.calculate_gain("leaky_relu", "0.1")


def test_constant_and_eye_are_torchs(dev):
    for shape in [(3, 5), (4, 2), (3, 3)]:
        t, tt = dl.zeros(*shape, device=dev), torch.zeros(*shape)
        assert init.eye_(t) is t
        np.testing.assert_array_equal(t.numpy(), torch.nn.init.eye_(tt).numpy())
        init.constant_(t, 0.25)
        np.testing.assert_array_equal(t.numpy(), torch.nn.init.constant_(tt, 0.25).numpy())
    with pytest.raises(ValueError, match="2-D"):
        init.eye_(dl.zeros(2, 3, 4, device=dev))


def _std_formula(fn, shape, kwargs):
    """The standard deviation torch's initialiser aims at, from its own formula (fans as
    torch computes them)."""
    fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    if fn in ("kaiming_normal_", "kaiming_uniform_"):
        fan = fan_in if kwargs.get("mode", "fan_in") == "fan_in" else fan_out
        gain = torch.nn.init.calculate_gain(kwargs.get("nonlinearity", "leaky_relu"),
                                            kwargs.get("a", 0.0))
        return gain / math.sqrt(fan)
    return kwargs.get("gain", 1.0) * math.sqrt(2.0 / (fan_in + fan_out))


@pytest.mark.parametrize("fn,kwargs", [
    ("kaiming_normal_", {}), ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "relu"}),
    ("kaiming_uniform_", {"a": math.sqrt(5)}), ("kaiming_uniform_", {"mode": "fan_out"}),
    ("xavier_normal_", {}), ("xavier_normal_", {"gain": 2.0}), ("xavier_uniform_", {}),
])
def test_scaled_initialisers_have_torchs_spread(dev, fn, kwargs):
    """The sample standard deviation is the formula's (and torch's sample's) within the
    sampling error of 131072 values (~0.4%); normal ones are symmetric, uniform ones
    bounded by sqrt(3) std."""
    dl.manual_seed(1)
    shape = (256, 128, 2, 2)
    t = dl.zeros(*shape, device=dev)
    assert getattr(init, fn)(t, **kwargs) is t
    a = t.numpy().astype(np.float64)
    want = _std_formula(fn, shape, kwargs)
    tt = getattr(torch.nn.init, fn)(torch.zeros(shape, dtype=torch.float64), **kwargs)
    assert a.std() == pytest.approx(want, rel=0.02)
    assert tt.numpy().std() == pytest.approx(want, rel=0.02)
    assert abs(a.mean()) < 0.02 * want
    if fn.endswith("uniform_"):
        assert np.abs(a).max() <= math.sqrt(3) * want * (1 + 1e-6)


def test_kaiming_refuses_an_unknown_mode():
    with pytest.raises(ValueError, match="fan_in"):
        init.kaiming_normal_(dl.zeros(3, 4), mode="fan_avg")


def _truncated_cdf(x, mean, std, a, b):
    def phi(v):
        return 0.5 * (1 + math.erf((v - mean) / (std * math.sqrt(2))))
    return (phi(x) - phi(a)) / (phi(b) - phi(a))


@pytest.mark.parametrize("mean,std,a,b", [(0.0, 1.0, -2.0, 2.0), (1.0, 2.0, -1.0, 4.0),
                                          (0.0, 0.02, -0.04, 0.04), (0.0, 1.0, 1.5, 6.0)])
def test_trunc_normal_is_the_truncated_normal(dev, mean, std, a, b):
    """Every value in [a, b]; the empirical CDF within 0.01 of the analytic truncated normal
    CDF at nine points (Kolmogorov-Smirnov at 100k samples: ~0.005 at 99.9%); torch's sample
    checked the same way."""
    dl.manual_seed(3)
    n = 100_000
    t = dl.zeros(n, device=dev)
    assert init.trunc_normal_(t, mean, std, a, b) is t
    got = np.sort(t.numpy().astype(np.float64))
    ref = np.sort(torch.nn.init.trunc_normal_(torch.zeros(n, dtype=torch.float64), mean, std,
                                              a, b).numpy())
    assert got[0] >= a and got[-1] <= b
    for q in np.linspace(a, b, 11)[1:-1]:
        want = _truncated_cdf(q, mean, std, a, b)
        for sample in (got, ref):
            assert abs(np.searchsorted(sample, q) / n - want) < 0.01, (q, want)


def test_erfinv_matches_float64():
    """trunc_normal_'s inverse error function: within 4e-6 relative in float32 and 1e-12
    in float64 of torch's float64 erfinv, out to |y| = 1 - 1e-6."""
    y = np.linspace(-0.999999, 0.999999, 4001)
    ref = torch.special.erfinv(torch.tensor(y)).numpy()
    for dt, tol in ((np.float32, 4e-6), (np.float64, 1e-12)):
        yd = y.astype(dt)
        want = torch.special.erfinv(torch.tensor(yd.astype(np.float64))).numpy()
        got = init._erfinv(dl.tensor(yd)).numpy().astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=tol, atol=1e-30)
    assert ref[0] < -3.4  # the range reaches the tail polynomial


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 2, 3), (32, 32)])
def test_orthogonal_is_q_of_the_same_normal_matrix(dev, shape):
    """orthogonal_ gives gain * Q of the QR of a normal matrix with R's diagonal positive, as
    torch's: the same Q as NumPy's float64 QR (signs fixed) of the matrix dl's generator
    draws with the same seed, and (semi-)orthogonal."""
    rows = shape[0]
    cols = math.prod(shape) // rows
    dl.manual_seed(7)
    a = dl.randn(rows, cols, device=dev).numpy().astype(np.float64)
    dl.manual_seed(7)
    t = dl.zeros(*shape, device=dev)
    assert init.orthogonal_(t, gain=1.5) is t
    got = t.numpy().reshape(rows, cols).astype(np.float64)
    tall = a if rows >= cols else a.T
    q, r = np.linalg.qr(tall)
    q = q * np.sign(np.diag(r))
    want = 1.5 * (q if rows >= cols else q.T)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5)
    gram = got @ got.T if rows < cols else got.T @ got
    np.testing.assert_allclose(gram, 2.25 * np.eye(min(rows, cols)), rtol=0, atol=2e-5)


def test_orthogonal_refuses_a_vector():
    with pytest.raises(ValueError, match="at least 2 dims"):
        init.orthogonal_(dl.zeros(5))

"""NaN and infinities through dl's predicates, comparisons, max/min family and shifts on every
runtime, against PyTorch. The shader runtimes (wgpu, wgpu-spirv) matter most here: WGSL and
Vulkan let a compiler assume floats are finite, and before the shader targets spelled these
cases in bit tests, lavapipe gave `isnan(nan)` False, `x != nan` False and amax of a row with
a NaN -inf."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import dl

X = np.array([np.nan, 1.0, -2.0, np.nan, np.inf, -np.inf, 0.0, -0.0, 3.5, -np.inf, 2.0,
              np.nan], np.float32)
Y = np.array([0.5, np.nan, 3.0, np.nan, 1.0, np.inf, -0.0, 0.0, np.inf, -1.0, 2.0, -np.inf],
             np.float32)

CASES = {
    "isnan": lambda m, x, y: m.isnan(x),
    "isinf": lambda m, x, y: m.isinf(x),
    "isfinite": lambda m, x, y: m.isfinite(x),
    "eq": lambda m, x, y: x == y,
    "ne": lambda m, x, y: x != y,
    "ne_self": lambda m, x, y: x != x,
    "lt": lambda m, x, y: x < y,
    "ge": lambda m, x, y: x >= y,
    "lt_inf": lambda m, x, y: x < float("inf"),
    "eq_neg_inf": lambda m, x, y: x == float("-inf"),
    "maximum": lambda m, x, y: m.maximum(x, y),
    "minimum": lambda m, x, y: m.minimum(x, y),
    "clamp": lambda m, x, y: m.clamp(x, -1.0, 0.7),
    "relu": lambda m, x, y: m.relu(x),
    "amax_rows": lambda m, x, y: m.stack([x, y]).amax(0),
    "amin_rows": lambda m, x, y: m.stack([x, y]).amin(0),
    "amax": lambda m, x, y: y.reshape(3, 4).amax(1),
    "argmax": lambda m, x, y: x.reshape(3, 4).argmax(1),
    "where_nan": lambda m, x, y: m.where(x != x, y, x),
    "nan_to_num": lambda m, x, y: m.nan_to_num(x),
    "sign": lambda m, x, y: m.sign(x),
}


def _np(t):
    return np.asarray(t.detach().numpy() if isinstance(t, torch.Tensor) else t.numpy())


@pytest.mark.parametrize("name", sorted(CASES))
def test_nonfinite_values_match_torch(dev, name):
    f = CASES[name]
    got = _np(f(dl, dl.tensor(X, device=dev), dl.tensor(Y, device=dev)))
    want = _np(f(torch, torch.from_numpy(X), torch.from_numpy(Y)))
    assert got.shape == want.shape
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got.astype(want.dtype), want, err_msg=f"{dev}: {name}")
    else:
        np.testing.assert_array_equal(got, want, err_msg=f"{dev}: {name}")


def test_shifts_past_the_width_match_torch(dev):
    """A count of the width or more, or a negative one, shifts every bit out (0, or the
    sign), as PyTorch's; the targets' own shifts take the count modulo the width."""
    a = np.array([5, -5, 7, -1, 1 << 20, 3], np.int32)
    c = np.array([31, 32, -1, 63, 64, 2], np.int32)
    x, n = dl.tensor(a, device=dev), dl.tensor(c, device=dev)
    tx, tn = torch.from_numpy(a), torch.from_numpy(c)
    for got, want in [(x << n, tx << tn), (x >> n, tx >> tn), (x << 33, tx << 33),
                      (x >> 40, tx >> 40), (x << -1, tx << -1), (3 << n, 3 << tn),
                      (dl.bitwise_left_shift(x, n), torch.bitwise_left_shift(tx, tn))]:
        np.testing.assert_array_equal(_np(got), _np(want))


@pytest.mark.parametrize("geo", [dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1),
                                 dict(kernel_size=(1, 4), stride=(1, 2))], ids=str)
def test_max_pool_of_nan_is_torchs(dev, geo):
    """A NaN tap makes the window's max NaN, and its gradient goes to the window's last NaN
    (PyTorch's `val > max or isnan(val)`); Python's max, which the pool kernels used, kept a
    NaN only as a window's first tap."""
    x = np.random.default_rng(5).standard_normal((2, 3, 6, 8)).astype(np.float32)
    x.reshape(-1)[[3, 17, 18, 40, 95, 96, 200, 201, 250]] = np.nan
    x.reshape(-1)[[60, 61]] = [np.inf, -np.inf]
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.max_pool2d(tx, **geo)
    with dl.no_grad():  # the forward kernels (no indices)
        y0 = dl.nn.functional.max_pool2d(dl.tensor(x, device=dev), **geo)
    np.testing.assert_array_equal(_np(y0), _np(ty), err_msg=f"{dev}: forward")
    dx = dl.tensor(x, device=dev, requires_grad=True)
    y = dl.nn.functional.max_pool2d(dx, **geo)  # the kernels that keep indices
    np.testing.assert_array_equal(_np(y), _np(ty), err_msg=f"{dev}: forward with indices")
    g = np.random.default_rng(6).uniform(0.5, 1.5, tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.from_numpy(g))
    y.backward(dl.tensor(g, device=dev))
    # overlapping windows add their gradients in another order: to rounding, zeros exact
    np.testing.assert_allclose(_np(dx.grad), _np(tx.grad), rtol=1e-6, atol=0,
                               err_msg=f"{dev}: gradient")


@pytest.mark.parametrize("form", ["relu", "F.relu", "linear act=relu"])
def test_relu_gradient_at_nan_is_torchs(dev, form):
    """relu passes a NaN on and so does its gradient (torch's threshold_backward: 0 where the
    output is <= 0, else g); dl's `where(y > 0, g, 0)` gave 0 there. Infinite and NaN
    gradients stay where the output is positive and vanish where it is not."""
    g = np.array([1, 2, 3, 4, 5, np.nan, np.inf, -np.inf, 6, 7, 8, 9], np.float32)
    x = dl.tensor(X, device=dev, requires_grad=True)
    tx = torch.tensor(X, requires_grad=True)
    if form == "linear act=relu":
        eye = np.eye(12, dtype=np.float32)
        y = dl.nn.functional.linear(x.reshape(1, 12), dl.tensor(eye, device=dev), act="relu")
        ty = torch.relu(tx.reshape(1, 12) @ torch.from_numpy(eye))
        y, ty = y.reshape(12), ty.reshape(12)
    else:
        y = dl.relu(x) if form == "relu" else dl.nn.functional.relu(x)
        ty = torch.relu(tx)
    np.testing.assert_array_equal(_np(y), _np(ty))
    y.backward(dl.tensor(g, device=dev))
    ty.backward(torch.from_numpy(g))
    np.testing.assert_array_equal(_np(x.grad), _np(tx.grad), err_msg=f"{dev}: {form}")

"""dl.nn.utils gradient clipping against torch.nn.utils on the same gradients, on every
runtime: clip_grad_norm_ (norm types 2, 1, inf and others), clip_grad_value_, get_total_norm,
clip_grads_with_norm_, parameters_to_vector / vector_to_parameters; the norm stays on the
device (a captured step replays it without a host read)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import dl
from dl import nn
from dl.nn import utils as U

# more gradients than a WebGPU kernel binds (8 buffers), several of one shape (scaled in one
# kernel), ranks 1-3, one 0-d
SHAPES = [(3, 4), (5,), (2, 3, 4), (3, 4), (1,), (), (7, 3), (3, 4), (5,), (300,), (3, 4),
          (3, 4), (3, 4)]


def _pair(dev, shapes=SHAPES, seed=0, scale=1.0, grads=True):
    rng = np.random.default_rng(seed)
    tps, dps = [], []
    for s in shapes:
        w = rng.standard_normal(s).astype(np.float32)
        tp, dp = torch.nn.Parameter(torch.tensor(w)), nn.Parameter(dl.tensor(w, device=dev))
        if grads:
            g = (rng.standard_normal(s) * scale).astype(np.float32)
            tp.grad, dp.grad = torch.tensor(g), dl.tensor(g, device=dev)
        tps.append(tp)
        dps.append(dp)
    return tps, dps


def _check_grads(tps, dps, rtol=1e-5, atol=1e-6):
    for tp, dp in zip(tps, dps):
        if tp.grad is None:
            assert dp.grad is None
            continue
        np.testing.assert_allclose(dp.grad.numpy(), tp.grad.numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, 3.0, "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 1e4])  # clipped, and left as is (coefficient 1)
def test_clip_grad_norm_matches_torch(dev, norm_type, max_norm):
    tps, dps = _pair(dev)
    want = torch.nn.utils.clip_grad_norm_(tps, max_norm, norm_type)
    got = U.clip_grad_norm_(dps, max_norm, norm_type)
    assert isinstance(got, dl.Tensor) and got.shape == () and got.dtype is dl.float32
    assert got.device == dps[0].device
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    _check_grads(tps, dps)


@pytest.mark.parametrize("foreach", [None, False])
def test_clip_grad_norm_foreach_and_parameter_forms(dev, foreach):
    """A single tensor, a generator, parameters without gradients; foreach=False (one
    kernel per gradient) gives the same values."""
    tps, dps = _pair(dev, shapes=[(4, 5), (6,), (4, 5)], seed=1)
    tps[1].grad = dps[1].grad = None
    want = torch.nn.utils.clip_grad_norm_(iter(tps), 0.3, foreach=foreach)
    got = U.clip_grad_norm_((p for p in dps), 0.3, foreach=foreach)
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    _check_grads(tps, dps)
    want = torch.nn.utils.clip_grad_norm_(tps[0], 0.1, math.inf)
    got = U.clip_grad_norm_(dps[0], 0.1, math.inf)
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
    _check_grads(tps, dps)


def test_clip_grad_norm_no_grads(dev):
    _, dps = _pair(dev, shapes=[(3,)], grads=False)
    assert U.clip_grad_norm_(dps, 1.0).item() == 0.0
    assert dps[0].grad is None
    with pytest.warns(UserWarning, match="empty generator"):
        assert U.clip_grad_norm_((p for p in []), 1.0).item() == 0.0


def test_clip_grad_norm_nonfinite(dev):
    tps, dps = _pair(dev, shapes=[(3,), (2, 2)])
    g = np.array([1.0, np.nan, 2.0], np.float32)
    tps[0].grad, dps[0].grad = torch.tensor(g), dl.tensor(g, device=dev)
    with pytest.raises(RuntimeError, match="non-finite"):
        U.clip_grad_norm_(dps, 1.0, error_if_nonfinite=True)
    want = torch.nn.utils.clip_grad_norm_(tps, 1.0)
    got = U.clip_grad_norm_(dps, 1.0)  # as torch: the NaN norm scales every gradient
    assert math.isnan(want.item()) and math.isnan(got.item())
    assert np.isnan(dps[1].grad.numpy()).all()


def test_clip_grad_norm_other_norm_types(dev):
    """Norms torch also takes: 0 (torch counts the nonzero gradients), -inf, 0.5."""
    for nt in (0.0, -math.inf, 0.5):
        tps, dps = _pair(dev, shapes=[(3, 4), (5,), (2, 3)], seed=2)
        tps[1].grad.zero_()
        dps[1].grad.zero_()
        want = torch.nn.utils.clip_grad_norm_(tps, 0.7, nt)
        got = U.clip_grad_norm_(dps, 0.7, nt)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        _check_grads(tps, dps)


def test_get_total_norm_and_clip_with_norm(dev):
    tps, dps = _pair(dev, shapes=[(3, 4), (5,)], seed=3)
    want = torch.nn.utils.get_total_norm([p.grad for p in tps], 2.0)
    got = U.get_total_norm([p.grad for p in dps], 2.0)
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
    torch.nn.utils.clip_grads_with_norm_(tps, 1.0, want)
    U.clip_grads_with_norm_(dps, 1.0, got)
    _check_grads(tps, dps)


def test_clip_grad_value(dev):
    tps, dps = _pair(dev, seed=4, scale=2.0)
    torch.nn.utils.clip_grad_value_(tps, 0.75)
    U.clip_grad_value_(dps, 0.75)
    _check_grads(tps, dps, rtol=0, atol=0)
    assert max(float(np.abs(p.grad.numpy()).max()) for p in dps) == 0.75


def test_clip_in_place_keeps_grad_objects(dev):
    """The gradients are scaled in place (the same tensors, storage written)."""
    _, dps = _pair(dev, shapes=[(4,), (4,)], seed=5, scale=10.0)
    before = [p.grad for p in dps]
    U.clip_grad_norm_(dps, 1.0)
    assert all(p.grad is g for p, g in zip(dps, before))
    total = math.sqrt(sum(float((p.grad.numpy() ** 2).sum()) for p in dps))
    np.testing.assert_allclose(total, 1.0, rtol=1e-5)


def test_clip_after_backward_lazy_grads(dev):
    """Gradients made by backward (possibly lazy or broadcast) are clipped as torch's."""
    rng = np.random.default_rng(6)
    w, b, x = (rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (3,), (5, 4)))
    tw, tb = torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)
    dw = dl.tensor(w, device=dev, requires_grad=True)
    db = dl.tensor(b, device=dev, requires_grad=True)
    ((torch.tensor(x) @ tw.T + tb) ** 2).sum().backward()
    ((dl.tensor(x, device=dev) @ dw.T + db) ** 2).sum().backward()
    want = torch.nn.utils.clip_grad_norm_([tw, tb], 2.0)
    got = U.clip_grad_norm_([dw, db], 2.0)
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    _check_grads([tw, tb], [dw, db], rtol=1e-4, atol=1e-5)


def test_clip_in_captured_step_replays(dev):
    """No host read: a training step with clip_grad_norm_ records under dl.capture (which
    refuses host reads) and its replays match the eager run."""
    rng = np.random.default_rng(7)
    w0 = rng.standard_normal((4, 3)).astype(np.float32)
    xs = [rng.standard_normal((6, 3)).astype(np.float32) * 3 for _ in range(4)]

    def run(capture):
        w = nn.Parameter(dl.tensor(w0, device=dev))
        opt = dl.optim.SGD([w], lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = ((x @ w.T) ** 2).mean()
            loss.backward()
            norm = U.clip_grad_norm_([w], 0.5)
            opt.step()
            return loss, norm
        f = dl.capture(step) if capture else step
        out = []
        for x in xs:
            loss, norm = f(dl.tensor(x, device=dev))
            out.append((loss.item(), norm.item()))
        return out, w.numpy().copy()
    eager, w_eager = run(False)
    replayed, w_replayed = run(True)
    np.testing.assert_allclose(replayed, eager, rtol=1e-5)
    np.testing.assert_allclose(w_replayed, w_eager, rtol=1e-5, atol=1e-6)


def test_parameters_vector_round_trip(dev):
    tps, dps = _pair(dev, shapes=[(2, 3), (4,), ()], grads=False)
    want = torch.nn.utils.parameters_to_vector(tps)
    vec = U.parameters_to_vector(dps)
    np.testing.assert_array_equal(vec.numpy(), want.detach().numpy())
    vec.sum().backward()  # differentiable
    assert all(np.all(p.grad.numpy() == 1) for p in dps)
    new = np.arange(11, dtype=np.float32)
    torch.nn.utils.vector_to_parameters(torch.tensor(new), tps)
    U.vector_to_parameters(dl.tensor(new, device=dev), dps)
    for tp, dp in zip(tps, dps):
        np.testing.assert_array_equal(dp.numpy(), tp.detach().numpy())
    with pytest.raises(ValueError):
        U.vector_to_parameters(dl.tensor(new[:5], device=dev), dps)


def test_torch_names():
    """The functions are reachable where torch has them."""
    for name in ("clip_grad_norm_", "clip_grad_value_", "get_total_norm",
                 "clip_grads_with_norm_", "parameters_to_vector", "vector_to_parameters"):
        assert getattr(dl.nn.utils, name) is not None
        assert hasattr(torch.nn.utils, name)


def test_clip_grad_norm_half_grads(dev):
    """float16 gradients: a float16 norm (as torch's) when every gradient is float16, the
    promoted float32 one beside a float32 gradient. dl sums the halves' squares in float32
    (torch rounds each tensor's norm to float16 first): agreement to float16's precision."""
    rng = np.random.default_rng(8)
    a = rng.standard_normal((4, 5)).astype(np.float16)
    b = rng.standard_normal(7).astype(np.float32)
    for arrs in ([a], [a, b]):
        tps = [torch.zeros(x.shape, dtype=torch.from_numpy(x).dtype, requires_grad=True)
               for x in arrs]
        dps = [dl.tensor(np.zeros_like(x), device=dev, requires_grad=True) for x in arrs]
        for x, tp, dp in zip(arrs, tps, dps):
            tp.grad, dp.grad = torch.tensor(x), dl.tensor(x, device=dev)
        want = torch.nn.utils.clip_grad_norm_(tps, 1.0)
        got = U.clip_grad_norm_(dps, 1.0)
        assert got.dtype.name == str(want.dtype).removeprefix("torch.")
        np.testing.assert_allclose(float(got.item()), float(want.item()), rtol=2e-3)
        for tp, dp in zip(tps, dps):
            np.testing.assert_allclose(dp.grad.numpy().astype(np.float32),
                                       tp.grad.numpy().astype(np.float32), rtol=2e-3,
                                       atol=2e-3)

"""dl.capture: replayed training steps match eager ones (the reference), on every runtime;
host reads and random draws are refused while recording; outputs are static tensors."""
from __future__ import annotations

import numpy as np
import pytest

import dl
from dl import nn


def _model(dev, seed=0):
    dl.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 16, act="relu"),
                         nn.Linear(16, 5)).to(dev)


def _batches(dev, n, batch=8, seed=0):
    rng = np.random.default_rng(seed)
    return [(dl.tensor(rng.standard_normal((batch, 1, 8, 8)).astype(np.float32), device=dev),
             dl.tensor(rng.integers(0, 5, batch).astype(np.int32), device=dev))
            for _ in range(n)]


def _step_fn(model, opt, calls=None):
    loss_fn = nn.CrossEntropyLoss()

    def step(x, y):
        if calls is not None:
            calls.append(1)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


@pytest.mark.parametrize("optim", ["adam", "sgd"])
def test_replayed_steps_match_eager_steps(dev, optim):
    make = {"adam": lambda m: dl.optim.Adam(m.parameters(), lr=1e-2),
            "sgd": lambda m: dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)}[optim]
    eager_m, cap_m = _model(dev), _model(dev)
    eager = _step_fn(eager_m, make(eager_m))
    calls = []
    captured = dl.capture(_step_fn(cap_m, make(cap_m), calls))
    for i, (x, y) in enumerate(_batches(dev, 5)):
        want = eager(x, y).item()
        got = captured(x, y)
        assert got.item() == pytest.approx(want, rel=1e-5, abs=1e-6), i
    assert len(calls) == 2  # the warm-up and the recording; three replays ran no Python of it
    assert captured.launches > 5
    for (name, a), b in zip(eager_m.state_dict().items(), cap_m.state_dict().values()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


def test_a_scheduler_changes_the_replayed_learning_rate(dev):
    models = [_model(dev), _model(dev)]
    opts = [dl.optim.SGD(m.parameters(), lr=0.1) for m in models]
    scheds = [dl.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.5) for o in opts]
    eager, captured = _step_fn(models[0], opts[0]), dl.capture(_step_fn(models[1], opts[1]))
    for x, y in _batches(dev, 4):
        a, b = eager(x, y).item(), captured(x, y).item()
        assert b == pytest.approx(a, rel=1e-5, abs=1e-6)
        for s in scheds:
            s.step()
    for p, q in zip(models[0].parameters(), models[1].parameters()):
        np.testing.assert_allclose(q.numpy(), p.numpy(), rtol=1e-5, atol=1e-6)


def _count_steps(opt):
    calls = []
    inner = opt._step
    opt._step = lambda: (calls.append(1), inner())
    return calls


@pytest.mark.parametrize("case", ["adamw_schedule", "sgd_first_step", "flag_changes"])
def test_replayed_optimiser_kernels_refresh_their_scalars(dev, case):
    """A replay relaunches the optimiser's kernels with new scalars (step counts, the
    scheduled rate) without running its Python step; a recording of a first momentum step,
    or a compile-time setting changed between replays (weight decay on), re-runs the whole
    step. Every case matches eager steps."""
    make = {"adamw_schedule": lambda m: dl.optim.AdamW(m.parameters(), lr=1e-2),
            "sgd_first_step": lambda m: dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
            "flag_changes": lambda m: dl.optim.Adam(m.parameters(), lr=1e-2)}[case]
    models = [_model(dev), _model(dev)]
    opts = [make(m) for m in models]
    scheds = [dl.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.7) for o in opts]
    steps = _count_steps(opts[1])
    warmup = 0 if case == "sgd_first_step" else 1
    eager = _step_fn(models[0], opts[0])
    captured = dl.capture(_step_fn(models[1], opts[1]), warmup=warmup)
    for i, (x, y) in enumerate(_batches(dev, 6)):
        if case == "flag_changes" and i == 4:
            for o in opts:
                o.param_groups[0]["weight_decay"] = 0.1
        a, b = eager(x, y).item(), captured(x, y).item()
        assert b == pytest.approx(a, rel=1e-5, abs=1e-6), i
        for s in scheds:
            s.step()
    want = {"adamw_schedule": 2, "sgd_first_step": 6, "flag_changes": 4}[case]
    assert len(steps) == want
    for (name, a), b in zip(models[0].state_dict().items(), models[1].state_dict().values()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    if case != "sgd_first_step":  # Adam's step counts advanced at every replay
        assert opts[1].state_dict()["state"][0]["step"] == \
            opts[0].state_dict()["state"][0]["step"] == 6


def test_inputs_are_copied_and_outputs_are_static(dev):
    w = dl.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device=dev)
    captured = dl.capture(lambda x: ((x @ w) * 2.0, x.sum(1)))
    rng = np.random.default_rng(1)
    outs = []
    for _ in range(4):
        xn = rng.standard_normal((5, 2)).astype(np.float32)
        x = dl.tensor(xn, device=dev)
        y, s = captured(x)
        np.testing.assert_allclose(y.numpy(), (xn @ w.numpy()) * 2.0, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(s.numpy(), xn.sum(1), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(x.numpy(), xn)  # the caller's tensor is only read
        outs.append(y)
    assert outs[2] is outs[3]  # replays return the recorded outputs, overwritten
    assert outs[0] is not outs[2]  # the warm-up call ran eagerly


def test_a_new_signature_gets_its_own_recording(dev):
    calls = []

    def f(x, scale):
        calls.append(x.shape)
        return x * scale
    captured = dl.capture(f, warmup=0)
    for n in (3, 4, 3, 4):
        for scale in (2.0, 3.0):
            x = dl.tensor(np.arange(n, dtype=np.float32), device=dev)
            np.testing.assert_allclose(captured(x, scale).numpy(), np.arange(n) * scale)
    assert len(calls) == 4  # recorded once per (shape, scale)


@pytest.mark.parametrize("what", ["item", "numpy", "dlpack", "dropout", "returns_float",
                                  "nested"])
def test_what_a_replay_cannot_repeat_is_refused(what):
    x = dl.tensor(np.ones((4, 4), np.float32), device="cpu")
    inner = dl.capture(lambda x: x * 2, warmup=0)
    body = {"item": lambda x: x * float((x.sum()).item()),
            "numpy": lambda x: x + dl.tensor(x.numpy()),
            "dlpack": lambda x: x + dl.tensor(np.from_dlpack(x)),
            "dropout": lambda x: dl.nn.functional.dropout(x, 0.5, training=True),
            "returns_float": lambda x: (x * 2).sum().item(),
            "nested": lambda x: inner(x) + 1}[what]
    captured = dl.capture(body, warmup=0)
    with pytest.raises(dl.CaptureError, match="capture|captured"):
        captured(x)
    # nothing is left recording: eager work goes on
    assert float((x * 2).sum().item()) == 32.0

"""RMSprop, Adagrad, the learning-rate schedulers and the loss modules against PyTorch:
optimisers step for step on the same parameters and gradient sequence (both the one-kernel
and the fused-graph path, param groups, state_dict round trips); schedulers step for step
(optimizer.step() then scheduler.step(), as PyTorch users do) over every phase."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import dl
from dl import nn

STEPS = 6


def _grads(shape, n=STEPS, seed=100):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for _ in range(n)]


# name -> (dl kwargs, torch kwargs are the same); groups: per-group overrides
OPTIMS = {
    "rmsprop": ("RMSprop", dict(lr=0.01)),
    "rmsprop_momentum": ("RMSprop", dict(lr=0.01, momentum=0.9)),
    "rmsprop_centered": ("RMSprop", dict(lr=0.01, centered=True)),
    "rmsprop_all": ("RMSprop", dict(lr=0.02, alpha=0.9, eps=1e-6, momentum=0.5, centered=True,
                                    weight_decay=0.1)),
    "rmsprop_low_alpha_max": ("RMSprop", dict(lr=0.01, alpha=0.3, centered=True,
                                              maximize=True, weight_decay=0.05)),
    "adagrad": ("Adagrad", dict(lr=0.1)),
    "adagrad_all": ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1,
                                    initial_accumulator_value=0.3, eps=1e-6)),
    "adagrad_max": ("Adagrad", dict(lr=0.05, maximize=True, lr_decay=0.01)),
}
GROUPS = {
    "RMSprop": [dict(lr=0.01), dict(lr=0.03, momentum=0.8, centered=True, weight_decay=0.01)],
    "Adagrad": [dict(lr=0.1), dict(lr=0.2, lr_decay=0.1, initial_accumulator_value=1.0)],
}


def _pair(shapes, dtype, seed=0, dev=None):
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal(s).astype(dtype) for s in shapes]
    ps = [nn.Parameter(dl.tensor(a, device=dev)) for a in arrs]
    tps = [torch.nn.Parameter(torch.tensor(a)) for a in arrs]
    return ps, tps


def _tol(dtype):
    return dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)


def _run(opt, topt, ps, tps, dtype, steps=STEPS, dev=None, seed=100):
    grads = [_grads(p.shape, steps, seed + k) for k, p in enumerate(ps)]
    for i in range(steps):
        for k, (p, tp) in enumerate(zip(ps, tps)):
            g = grads[k][i].astype(dtype)
            p.grad, tp.grad = dl.tensor(g, device=dev), torch.tensor(g)
        opt.step()
        topt.step()
        for p, tp in zip(ps, tps):
            np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), **_tol(dtype),
                                       err_msg=f"step {i}")


@pytest.mark.parametrize("path", ["foreach", "kernel", "graph"])
@pytest.mark.parametrize("name", sorted(OPTIMS))
def test_optimizer_matches_torch(name, path, monkeypatch):
    """Each option set, every path: the multi-tensor launch, one kernel per parameter
    (foreach=False; float32/64, contiguous) and the fused graph (any other dtype or
    layout), float64 to 1e-12 and float32."""
    if path == "graph":
        monkeypatch.setattr(dl.optim.Optimizer, "_direct", staticmethod(lambda *t: False))
    cls, kw = OPTIMS[name]
    dkw = dict(kw, foreach=False) if path == "kernel" else kw
    for dtype in (np.float64, np.float32):
        ps, tps = _pair([(4, 3), (5,)], dtype)
        opt = getattr(dl.optim, cls)(ps, **dkw)
        with dl.count_kernels() as c:
            _run(opt, getattr(torch.optim, cls)(tps, **kw), ps, tps, dtype)
        if path == "foreach":  # one launch a step for both parameters
            assert c.names.count(c.names[-1]) == STEPS and "multi" in c.names[-1], c.names


@pytest.mark.parametrize("cls", ["RMSprop", "Adagrad"])
def test_param_groups_and_state_dict(cls):
    """Two groups with different settings; a state_dict taken after 3 steps and loaded into
    a fresh optimiser carries on as PyTorch's uninterrupted run."""
    dtype = np.float64
    ps, tps = _pair([(3, 4), (6,), (2, 2)], dtype, seed=3)
    groups = GROUPS[cls]
    mk = getattr(dl.optim, cls)
    opt = mk([dict(groups[0], params=ps[:1]), dict(groups[1], params=ps[1:])])
    topt = getattr(torch.optim, cls)([dict(groups[0], params=tps[:1]),
                                      dict(groups[1], params=tps[1:])])
    _run(opt, topt, ps, tps, dtype, steps=3)
    sd = opt.state_dict()
    assert [g["lr"] for g in sd["param_groups"]] == [g["lr"] for g in groups]
    assert set(sd["state"]) == {0, 1, 2}
    tkeys = set(topt.state_dict()["state"][1])
    assert set(sd["state"][1]) == tkeys  # torch's state names
    again = mk([dict(groups[0], params=ps[:1]), dict(dict(groups[1], lr=9.0), params=ps[1:])])
    again.load_state_dict(sd)
    assert again.param_groups[1]["lr"] == groups[1]["lr"]
    _run(again, topt, ps, tps, dtype, steps=3, seed=200)
    with pytest.raises(ValueError, match="parameter groups"):
        mk(ps).load_state_dict(sd)


def test_bad_arguments():
    p = [nn.Parameter(dl.ones(2))]
    for bad in (dict(lr=-1), dict(alpha=-0.1), dict(momentum=-1), dict(eps=-1),
                dict(weight_decay=-1)):
        with pytest.raises(ValueError, match="Invalid"):
            dl.optim.RMSprop(p, **bad)
    for bad in (dict(lr_decay=-1), dict(initial_accumulator_value=-1)):
        with pytest.raises(ValueError, match="Invalid"):
            dl.optim.Adagrad(p, **bad)


def test_optimizers_on_every_runtime(dev):
    """The step kernels compile and run on each runtime (float32): the multi-tensor launch
    (two parameters) and the per-parameter kernel."""
    for name, foreach in (("rmsprop_low_alpha_max", None), ("rmsprop_all", False),
                          ("adagrad_all", None), ("adagrad_max", False)):
        cls, kw = OPTIMS[name]
        ps, tps = _pair([(70,), (3, 5)], np.float32, seed=5, dev=dev)
        _run(getattr(dl.optim, cls)(ps, **kw, foreach=foreach),
             getattr(torch.optim, cls)(tps, **kw), ps, tps, np.float32, steps=3, dev=dev)


def test_captured_steps_replay_the_kernels():
    """Under dl.capture a replay relaunches the step kernels with fresh scalars (Adagrad's
    decayed step size, a scheduled rate) without running the optimiser's Python step."""
    rng = np.random.default_rng(0)
    data = [(dl.tensor(rng.standard_normal((5, 4)).astype(np.float32)),
             dl.tensor(rng.uniform(0, 1, (5, 1)).astype(np.float32))) for _ in range(5)]

    def model():
        dl.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 1))

    def fn(m, o):
        loss_fn = nn.BCEWithLogitsLoss()

        def step(x, y):
            o.zero_grad()
            loss = loss_fn(m(x), y)
            loss.backward()
            o.step()
            return loss
        return step

    for make in (lambda ps: dl.optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
                 lambda ps: dl.optim.Adagrad(ps, lr=0.1, lr_decay=0.1),
                 lambda ps: dl.optim.Adagrad(ps, lr=0.1, lr_decay=0.1, foreach=False)):
        ms = [model(), model()]
        opts = [make(m.parameters()) for m in ms]
        scheds = [dl.optim.lr_scheduler.StepLR(o, 1, 0.7) for o in opts]
        calls = []
        inner = opts[1]._step
        opts[1]._step = lambda inner=inner, calls=calls: (calls.append(1), inner())
        eager, captured = fn(ms[0], opts[0]), dl.capture(fn(ms[1], opts[1]))
        for x, y in data:
            assert captured(x, y).item() == pytest.approx(eager(x, y).item(), rel=1e-5)
            for s in scheds:
                s.step()
        assert len(calls) == 2  # the warm-up and the recording
        for p, q in zip(ms[0].parameters(), ms[1].parameters()):
            np.testing.assert_allclose(q.numpy(), p.numpy(), rtol=1e-5, atol=1e-6)
        assert opts[1].state_dict()["state"][0]["step"] == 5


# ---- schedulers ------------------------------------------------------------------------------
def _opts(kind="sgd", groups=(0.1,)):
    ps = [nn.Parameter(dl.ones(1)) for _ in groups]
    tps = [torch.nn.Parameter(torch.ones(1)) for _ in groups]
    if kind == "sgd":
        opt = dl.optim.SGD([dict(params=[p], lr=lr) for p, lr in zip(ps, groups)],
                           momentum=0.9)
        topt = torch.optim.SGD([dict(params=[p], lr=lr) for p, lr in zip(tps, groups)],
                               momentum=0.9)
    else:
        opt = dl.optim.Adam([dict(params=[p], lr=lr) for p, lr in zip(ps, groups)])
        topt = torch.optim.Adam([dict(params=[p], lr=lr) for p, lr in zip(tps, groups)])
    return opt, topt


def _same(s, ts, opt, topt, what):
    assert s.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-13, abs=1e-16), what
    assert s.last_epoch == ts.last_epoch, what
    for g, tg in zip(opt.param_groups, topt.param_groups):
        assert g["lr"] == pytest.approx(tg["lr"], rel=1e-13, abs=1e-16), what
        for k in ("momentum", "betas"):
            if k in tg:
                assert g[k] == pytest.approx(tg[k], rel=1e-13), what


def _drive(make, steps, kind="sgd", groups=(0.1,), poke=None):
    opt, topt = _opts(kind, groups)
    s, ts = make(dl.optim.lr_scheduler, opt), make(torch.optim.lr_scheduler, topt)
    _same(s, ts, opt, topt, "after construction")
    for i in range(steps):
        opt.step()
        topt.step()
        s.step()
        ts.step()
        if poke is not None and i == poke:  # a rate set by hand: the chainable forms go on
            for g, tg in zip(opt.param_groups, topt.param_groups):
                g["lr"] = tg["lr"] = g["lr"] * 3.0
        _same(s, ts, opt, topt, f"step {i + 1}")
    return s, ts, opt, topt


SCHEDULES = {
    "step": (lambda m, o: m.StepLR(o, step_size=3, gamma=0.5), 14, None),
    "step_poked": (lambda m, o: m.StepLR(o, step_size=4, gamma=0.3), 12, 5),
    "multistep": (lambda m, o: m.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3), 12, None),
    "cosine_past_t_max": (lambda m, o: m.CosineAnnealingLR(o, T_max=5, eta_min=0.01), 27,
                          None),
    "cosine_poked": (lambda m, o: m.CosineAnnealingLR(o, T_max=7), 20, 3),
    "lambda": (lambda m, o: m.LambdaLR(o, [lambda e: 0.9 ** e, lambda e: 1 / (1 + e)]), 8,
               None),
    "onecycle_cos": (lambda m, o: m.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=20), 20,
                     None),
    "onecycle_linear_three_phase": (
        lambda m, o: m.OneCycleLR(o, max_lr=0.8, epochs=3, steps_per_epoch=7, pct_start=0.25,
                                  anneal_strategy="linear", three_phase=True, div_factor=10.0,
                                  final_div_factor=100.0, base_momentum=0.8,
                                  max_momentum=0.9), 21, None),
    "onecycle_no_momentum": (
        lambda m, o: m.OneCycleLR(o, max_lr=0.3, total_steps=10, cycle_momentum=False,
                                  three_phase=True, pct_start=0.4), 10, None),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_scheduler_matches_torch(name):
    make, steps, poke = SCHEDULES[name]
    groups = (0.1, 0.05)
    _drive(make, steps, "sgd", groups, poke)


def test_onecycle_cycles_adam_beta1_and_stops_at_total_steps():
    make = lambda m, o: m.OneCycleLR(o, max_lr=0.01, total_steps=12, pct_start=0.5)  # noqa: E731
    s, ts, opt, topt = _drive(make, 12, "adam")
    assert opt.param_groups[0]["betas"][1] == 0.999
    with pytest.raises(ValueError, match="Tried to step 13 times"):
        s.step()
    with pytest.raises(ValueError):
        ts.step()
    with pytest.raises(ValueError, match="total_steps OR"):
        dl.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy"):
        dl.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=5, anneal_strategy="x")


def test_scheduler_state_dict_and_closed_forms():
    """A scheduler restored from a state_dict at step 7 goes on as the uninterrupted one;
    step(epoch) takes PyTorch's closed form."""
    for make in (lambda m, o: m.CosineAnnealingLR(o, T_max=6, eta_min=0.001),
                 lambda m, o: m.MultiStepLR(o, milestones=[3, 8], gamma=0.5),
                 lambda m, o: m.StepLR(o, 2, 0.7)):
        opt, topt = _opts()
        s, ts = make(dl.optim.lr_scheduler, opt), make(torch.optim.lr_scheduler, topt)
        for _ in range(7):
            opt.step()
            topt.step()
            s.step()
            ts.step()
        sd = s.state_dict()
        assert set(sd) == set(ts.state_dict()) - {"_get_lr_called_within_step"}
        opt2, _ = _opts()
        opt2.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
        s2 = make(dl.optim.lr_scheduler, opt2)
        s2.load_state_dict(sd)
        for i in range(8):
            opt2.step()
            topt.step()
            s2.step()
            ts.step()
            _same(s2, ts, opt2, topt, f"restored, step {i}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s2.step(3)
            ts.step(3)
        _same(s2, ts, opt2, topt, "step(3)")


PLATEAU = {
    "min_rel": dict(mode="min", factor=0.5, patience=2),
    "min_abs_cooldown": dict(mode="min", factor=0.3, patience=1, threshold=0.05,
                             threshold_mode="abs", cooldown=2),
    "max_rel_min_lr": dict(mode="max", factor=0.1, patience=0, threshold=0.01,
                           min_lr=[0.002, 0.0005]),
    "max_abs_eps": dict(mode="max", factor=0.9, patience=1, threshold_mode="abs",
                        threshold=0.0, eps=0.006),
}
METRICS = [1.0, 0.9, 0.95, 0.91, 0.9, 0.92, 0.5, 0.5, 0.49, 0.6, 0.7, 0.8, 0.3, 0.3, 0.3,
           0.31, 0.1, 0.2, 0.2, 0.2, 0.25, 0.05, 0.06, 0.07]


@pytest.mark.parametrize("name", sorted(PLATEAU))
def test_reduce_lr_on_plateau_matches_torch(name):
    kw = PLATEAU[name]
    opt, topt = _opts(groups=(0.1, 0.02))
    s = dl.optim.lr_scheduler.ReduceLROnPlateau(opt, **kw)
    ts = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kw)
    metrics = METRICS if kw["mode"] == "min" else [-m for m in METRICS]
    for i, m in enumerate(metrics):
        opt.step()
        topt.step()
        s.step(dl.tensor(m, dtype=dl.float64) if i % 2 else m)
        ts.step(m)
        _same(s, ts, opt, topt, f"step {i}")
        assert (s.num_bad_epochs, s.cooldown_counter, s.best) == \
            (ts.num_bad_epochs, ts.cooldown_counter, ts.best)
    sd = s.state_dict()
    again = dl.optim.lr_scheduler.ReduceLROnPlateau(opt, **kw)
    again.load_state_dict(sd)
    assert (again.best, again.num_bad_epochs, again.last_epoch) == \
        (s.best, s.num_bad_epochs, s.last_epoch)
    with pytest.raises(ValueError, match="Factor"):
        dl.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=1.0)


# ---- loss modules ----------------------------------------------------------------------------
def test_loss_modules_match_torch():
    """The modules call the functional forms with their settings; weight and pos_weight
    are buffers (in state_dict)."""
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0.05, 0.95, (4, 3)), rng.uniform(0, 1, (4, 3))
    w, pw = rng.uniform(0.5, 2, (3,)), rng.uniform(0.5, 2, (3,))
    d, t = (dl.tensor(x), dl.tensor(y)), (torch.tensor(x), torch.tensor(y))
    cases = [
        ("BCELoss", dict(weight=w), dict(reduction="sum")),
        ("BCEWithLogitsLoss", dict(weight=w, pos_weight=pw), {}),
        ("L1Loss", {}, dict(reduction="none")),
        ("SmoothL1Loss", {}, dict(beta=0.3)),
        ("HuberLoss", {}, dict(delta=0.4, reduction="sum")),
        ("KLDivLoss", {}, dict(reduction="batchmean", log_target=True)),
        ("L1Loss", {}, dict(size_average=False)),
    ]
    for cls, tensors, kw in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = getattr(nn, cls)(**{k: dl.tensor(v) for k, v in tensors.items()}, **kw)
            tm = getattr(torch.nn, cls)(**{k: torch.tensor(v) for k, v in tensors.items()},
                                        **kw)
        np.testing.assert_allclose(m(*d).numpy(), tm(*t).numpy(), rtol=1e-12, err_msg=cls)
        assert set(m.state_dict()) == set(tm.state_dict()), cls
    a, b = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
    tgt = np.array([1.0, -1.0, -1.0, 1.0, -1.0])
    got = nn.CosineEmbeddingLoss(margin=0.2)(dl.tensor(a), dl.tensor(b), dl.tensor(tgt))
    want = torch.nn.CosineEmbeddingLoss(margin=0.2)(torch.tensor(a), torch.tensor(b),
                                                    torch.tensor(tgt))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_loss_argument_errors():
    F = dl.nn.functional  # noqa: N806
    x = dl.tensor(np.full((2, 3), 0.5))
    with pytest.raises(ValueError, match=r"target size \(\[3\]\).*input size \(\[2, 3\]\)"):
        F.binary_cross_entropy(x, dl.tensor(np.full(3, 0.5)))
    with pytest.raises(ValueError, match=r"Target size \(\[2, 1\]\) must be the same as input"):
        F.binary_cross_entropy_with_logits(x, dl.tensor(np.zeros((2, 1))))
    with pytest.raises(ValueError, match="reduction"):
        F.l1_loss(x, x, reduction="avg")
    with pytest.raises(ValueError, match="reduction"):
        F.binary_cross_entropy(x, x, reduction="batchmean")
    with pytest.raises(RuntimeError, match="negative values for beta"):
        F.smooth_l1_loss(x, x, beta=-1.0)
    with pytest.raises(RuntimeError, match="non-positive values for delta"):
        F.huber_loss(x, x, delta=0.0)
    with pytest.raises(RuntimeError, match=r"1D target tensor expects 2D input tensors"):
        F.cosine_embedding_loss(x.reshape(-1), x.reshape(-1), dl.tensor(np.ones(2)))
    with pytest.warns(UserWarning, match="target size"):
        F.l1_loss(x, dl.tensor(np.zeros(3)))
    with pytest.warns(UserWarning, match="batchmean"):
        F.kl_div(x, x)


@pytest.mark.parametrize("sched", ["lambda", "cosine"])
def test_scheduler_base_lr_is_the_rate_when_it_is_made(sched):
    """A rate changed between the optimiser's construction and the first scheduler's is the
    scheduler's base (PyTorch sets initial_lr there, not in the optimiser)."""
    lrs = []
    for m, o in ((dl.optim, dl.optim.SGD), (torch.optim, torch.optim.SGD)):
        p = (nn.Parameter(dl.ones(2)) if m is dl.optim else torch.nn.Parameter(torch.ones(2)))
        opt = o([p], lr=0.1)
        opt.param_groups[0]["lr"] = 0.5
        s = (m.lr_scheduler.LambdaLR(opt, lambda e: 0.9 ** e) if sched == "lambda" else
             m.lr_scheduler.CosineAnnealingLR(opt, T_max=4))
        seq = []
        for _ in range(5):
            opt.step()
            s.step()
            seq.append(opt.param_groups[0]["lr"])
        lrs.append((s.base_lrs, seq))
        assert "initial_lr" in opt.param_groups[0]
    assert lrs[0][0] == lrs[1][0] == [0.5]
    np.testing.assert_allclose(lrs[0][1], lrs[1][1], rtol=1e-12)


def test_a_parameter_in_two_groups_is_refused_as_torch():
    p, q = nn.Parameter(dl.ones(2)), nn.Parameter(dl.ones(3))
    with pytest.raises(ValueError, match="more than one parameter group"):
        dl.optim.SGD([{"params": [p]}, {"params": [q, p]}], lr=0.1)
    with pytest.warns(UserWarning, match="duplicate parameters"):
        dl.optim.SGD([p, p], lr=0.1)

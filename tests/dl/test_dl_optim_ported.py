"""NAdam, RAdam, Adamax and Adadelta against PyTorch step for step (parameters and state,
float32 and float64, a grid of options, param groups, a state_dict round trip mid-way), and
the learning-rate schedulers ExponentialLR, LinearLR, ConstantLR, MultiplicativeLR,
PolynomialLR, SequentialLR, ChainedScheduler, CosineAnnealingWarmRestarts and CyclicLR
against PyTorch's rate sequences (with a state_dict round trip mid-way)."""
from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch

import dl
from dl import nn

STEPS = 6

OPTIMS = {
    "nadam": ("NAdam", dict(lr=0.01)),
    "nadam_wd": ("NAdam", dict(lr=0.02, weight_decay=0.1, momentum_decay=0.01, eps=1e-6)),
    "nadam_decoupled_max": ("NAdam", dict(lr=0.02, betas=(0.8, 0.99), weight_decay=0.1,
                                          decoupled_weight_decay=True, maximize=True)),
    "radam": ("RAdam", dict(lr=0.01)),
    "radam_wd_max": ("RAdam", dict(lr=0.02, weight_decay=0.1, maximize=True, eps=1e-6)),
    # beta2 = 0.5: rho_t > 5 from step 2 on (the rectified branch; the default betas stay
    # on the SGD branch for the first steps)
    "radam_decoupled_rect": ("RAdam", dict(lr=0.02, betas=(0.6, 0.5), weight_decay=0.05,
                                           decoupled_weight_decay=True)),
    "adamax": ("Adamax", dict(lr=0.01)),
    "adamax_wd_max": ("Adamax", dict(lr=0.02, betas=(0.7, 0.9), eps=1e-3, weight_decay=0.1,
                                     maximize=True)),
    "adadelta": ("Adadelta", dict()),
    "adadelta_all": ("Adadelta", dict(lr=0.5, rho=0.7, eps=1e-4, weight_decay=0.1,
                                      maximize=True)),
}
GROUPS = {
    "NAdam": [dict(lr=0.01), dict(lr=0.03, weight_decay=0.1, decoupled_weight_decay=True)],
    "RAdam": [dict(lr=0.01), dict(lr=0.03, betas=(0.5, 0.6), weight_decay=0.1)],
    "Adamax": [dict(lr=0.01), dict(lr=0.03, weight_decay=0.1, maximize=True)],
    "Adadelta": [dict(lr=1.0), dict(lr=0.3, rho=0.5, weight_decay=0.1)],
}
SHAPES = [(3, 4), (5,)]


def _params(dtype, seed=0):
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    return ([nn.Parameter(dl.tensor(a)) for a in arrs],
            [torch.nn.Parameter(torch.tensor(a)) for a in arrs])


def _tol(dtype):
    return dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-6, atol=1e-12)


def _grads(dtype, seed=100):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(STEPS)]


def _compare(opt, topt, ps, tps, dtype):
    tol = _tol(dtype)
    for p, tp in zip(ps, tps):
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), **tol)
        st, tst = opt.state[p], topt.state[tp]
        assert set(st) == set(tst)
        for k, tv in tst.items():
            v = st[k]
            if k == "step":
                assert int(v) == int(tv.item())
            elif k == "mu_product":  # a float32 0-d tensor in PyTorch, a float in dl
                assert float(v) == pytest.approx(tv.item(), rel=1e-6)
            else:
                np.testing.assert_allclose(v.numpy(), tv.numpy(), **tol)


def _step_both(opt, topt, ps, tps, grads):
    for p, tp, g in zip(ps, tps, grads):
        p.grad = dl.tensor(g)
        tp.grad = torch.tensor(g)
    opt.step()
    topt.step()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", sorted(OPTIMS))
def test_optimizer_matches_torch(case, dtype):
    name, kw = OPTIMS[case]
    ps, tps = _params(dtype)
    opt = getattr(dl.optim, name)(ps, **kw)
    topt = getattr(torch.optim, name)(tps, foreach=False, **kw)
    for grads in _grads(dtype):
        _step_both(opt, topt, ps, tps, grads)
        _compare(opt, topt, ps, tps, dtype)


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_optimizer_groups_and_state_dict(name):
    """Two groups with their own settings; after 3 steps a new optimiser loads the
    state_dict and carries on (as PyTorch's, whose state_dict it mirrors)."""
    dtype = np.float64
    ps, tps = _params(dtype, seed=3)
    groups = GROUPS[name]
    opt = getattr(dl.optim, name)([dict(params=[p], **g) for p, g in zip(ps, groups)])
    topt = getattr(torch.optim, name)([dict(params=[p], **g) for p, g in zip(tps, groups)],
                                      foreach=False)
    for i, grads in enumerate(_grads(dtype, seed=7)):
        if i == 3:
            sd = opt.state_dict()
            tsd = topt.state_dict()
            assert set(sd["state"]) == set(tsd["state"])
            for k in tsd["state"]:
                assert set(sd["state"][k]) == set(tsd["state"][k])
                if "mu_product" in tsd["state"][k]:
                    assert sd["state"][k]["mu_product"].item() == \
                        tsd["state"][k]["mu_product"].item()
            assert [g["lr"] for g in sd["param_groups"]] == \
                [g["lr"] for g in tsd["param_groups"]]
            opt = getattr(dl.optim, name)([dict(params=[p]) for p in ps])
            opt.load_state_dict(sd)
        _step_both(opt, topt, ps, tps, grads)
        _compare(opt, topt, ps, tps, dtype)


def test_optimizer_option_checks():
    p = nn.Parameter(dl.zeros(2))
    with pytest.raises(ValueError):
        dl.optim.NAdam([p], betas=(1.0, 0.9))
    with pytest.raises(ValueError):
        dl.optim.Adadelta([p], rho=1.5)
    with pytest.raises(ValueError):
        dl.optim.RAdam([p], lr=-1.0)
    with pytest.raises(NotImplementedError):
        dl.optim.Adamax([p], capturable=True)


# ---- schedulers ---------------------------------------------------------------------------
def _mult(epoch):
    return 0.9 if epoch % 3 else 1.05


SCHEDULERS = {
    "exponential": lambda m, o: m.ExponentialLR(o, gamma=0.9),
    "linear": lambda m, o: m.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=7),
    "constant": lambda m, o: m.ConstantLR(o, factor=0.4, total_iters=6),
    "multiplicative": lambda m, o: m.MultiplicativeLR(o, _mult),
    "polynomial": lambda m, o: m.PolynomialLR(o, total_iters=12, power=2.0),
    "warm_restarts": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2,
                                                                 eta_min=0.001),
    "warm_restarts_1": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=4),
    "cyclic": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=[0.1, 0.2], step_size_up=4,
                                      step_size_down=3),
    "cyclic_tri2": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3,
                                           mode="triangular2", cycle_momentum=False),
    "cyclic_exp": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2,
                                          mode="exp_range", gamma=0.9),
    "sequential": lambda m, o: m.SequentialLR(o, [m.LinearLR(o, start_factor=0.1,
                                                             total_iters=4),
                                                  m.ExponentialLR(o, gamma=0.8),
                                                  m.CosineAnnealingLR(o, T_max=5)],
                                              milestones=[5, 11]),
    "chained": lambda m, o: m.ChainedScheduler([m.ConstantLR(o, factor=0.5, total_iters=4),
                                                m.ExponentialLR(o, gamma=0.9),
                                                m.PolynomialLR(o, total_iters=15)]),
    "sequential_of_chained": lambda m, o: m.SequentialLR(
        o, [m.ChainedScheduler([m.LinearLR(o, start_factor=0.5, total_iters=3),
                                m.ExponentialLR(o, gamma=0.95)]),
            m.StepLR(o, step_size=3, gamma=0.5)], milestones=[6]),
}


def _sched_opts(momentum=True):
    p = [nn.Parameter(dl.zeros(2)), nn.Parameter(dl.zeros(3))]
    tp = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(3))]
    kw = dict(momentum=0.9) if momentum else {}
    groups = lambda ps: [dict(params=[ps[0]], lr=0.1), dict(params=[ps[1]], lr=0.05)]  # noqa: E731
    return dl.optim.SGD(groups(p), **kw), torch.optim.SGD(groups(tp), **kw)


def _check_lrs(s, ts, o, to):
    assert s.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12, abs=1e-15)
    assert [g["lr"] for g in o.param_groups] == \
        pytest.approx([g["lr"] for g in to.param_groups], rel=1e-12, abs=1e-15)
    for key in ("momentum", "betas"):
        if key in to.param_groups[0]:
            assert [g[key] for g in o.param_groups] == \
                pytest.approx([g[key] for g in to.param_groups], rel=1e-12)


@pytest.mark.parametrize("case", sorted(SCHEDULERS))
def test_scheduler_matches_torch(case):
    make = SCHEDULERS[case]
    o, to = _sched_opts()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s, ts = make(dl.optim.lr_scheduler, o), make(torch.optim.lr_scheduler, to)
        _check_lrs(s, ts, o, to)
        for i in range(20):
            if i == 10:  # a new optimiser and scheduler resume from the state_dicts
                osd, ssd = o.state_dict(), copy.deepcopy(s.state_dict())
                o = dl.optim.SGD([dict(params=g["params"]) for g in o.param_groups], lr=1.0,
                                 momentum=0.9)
                s = make(dl.optim.lr_scheduler, o)
                o.load_state_dict(osd)
                s.load_state_dict(ssd)
            s.step()
            ts.step()
            _check_lrs(s, ts, o, to)


def test_cyclic_lr_beta1():
    ps, tps = _params(np.float64)
    o, to = dl.optim.NAdam(ps), torch.optim.NAdam(tps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = dl.optim.lr_scheduler.CyclicLR(o, 0.001, 0.01, step_size_up=3)
        ts = torch.optim.lr_scheduler.CyclicLR(to, 0.001, 0.01, step_size_up=3)
        for _ in range(8):
            s.step()
            ts.step()
            _check_lrs(s, ts, o, to)


@pytest.mark.parametrize("t_mult", [1, 2])
def test_warm_restarts_fractional_epochs(t_mult):
    o, to = _sched_opts()
    mod, tmod = dl.optim.lr_scheduler, torch.optim.lr_scheduler
    s = mod.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=t_mult, eta_min=0.002)
    ts = tmod.CosineAnnealingWarmRestarts(to, T_0=3, T_mult=t_mult, eta_min=0.002)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for epoch in range(12):
            for b in range(4):
                e = epoch + b / 4
                s.step(e)
                ts.step(e)
                _check_lrs(s, ts, o, to)
                assert (s.T_cur, s.T_i, s.last_epoch) == \
                    pytest.approx((ts.T_cur, ts.T_i, ts.last_epoch), rel=1e-12)


def test_scheduler_checks():
    o, _ = _sched_opts()
    other, _ = _sched_opts()
    mod = dl.optim.lr_scheduler
    with pytest.raises(ValueError):
        mod.SequentialLR(o, [mod.ExponentialLR(o, 0.9)], milestones=[3])
    with pytest.raises(ValueError):
        mod.ChainedScheduler([mod.ExponentialLR(o, 0.9), mod.ExponentialLR(other, 0.9)])
    with pytest.raises(ValueError):
        mod.CosineAnnealingWarmRestarts(o, T_0=0)
    with pytest.raises(ValueError):
        mod.ConstantLR(o, factor=1.5)


def test_state_of_a_parameter_without_state_is_an_empty_dict():
    """`opt.state[p]` for a parameter SGD keeps nothing for: {} as torch's defaultdict (a
    KeyError before); a loaded optimiser keeps that behaviour."""
    seen = []
    for m in (dl, torch):
        w = m.nn.Parameter(m.ones(2))
        opt = m.optim.SGD([w], lr=0.1)
        (w * 2).sum().backward()
        opt.step()
        again = m.optim.SGD([w], lr=0.1)
        again.load_state_dict(opt.state_dict())
        seen.append((dict(opt.state[w]), dict(again.state[w])))
    assert seen[0] == seen[1] == ({}, {})

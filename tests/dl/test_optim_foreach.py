"""Multi-tensor optimiser steps (dl/optim/foreach.py, dl/kernels/optim_multi.py): one launch
per group chunk gives the same bits as the per-parameter kernels, and torch.optim's values,
on every runtime; the cached plan follows what changes between steps."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from dl_helpers import close, rand_np

import cube as cb
import dl
from dl import nn
from dl.kernels import optim_multi

OPTIMS = {
    "adam": (lambda p, **k: dl.optim.Adam(p, lr=0.01, weight_decay=0.1, **k),
             lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.1)),
    "adam_maximize": (lambda p, **k: dl.optim.Adam(p, lr=0.02, maximize=True, **k),
                      lambda p: torch.optim.Adam(p, lr=0.02, maximize=True)),
    "adam_amsgrad": (lambda p, **k: dl.optim.Adam(p, lr=0.02, betas=(0.5, 0.9), amsgrad=True,
                                                  **k),
                     lambda p: torch.optim.Adam(p, lr=0.02, betas=(0.5, 0.9), amsgrad=True)),
    "adamw": (lambda p, **k: dl.optim.AdamW(p, lr=0.01, betas=(0.8, 0.99), weight_decay=0.3,
                                            **k),
              lambda p: torch.optim.AdamW(p, lr=0.01, betas=(0.8, 0.99), weight_decay=0.3)),
    "adamw_beta2_near_1": (lambda p, **k: dl.optim.AdamW(p, lr=0.05, betas=(0.9, 0.99999),
                                                        **k),
                           lambda p: torch.optim.AdamW(p, lr=0.05, betas=(0.9, 0.99999))),
    "sgd": (lambda p, **k: dl.optim.SGD(p, lr=0.1, **k),
            lambda p: torch.optim.SGD(p, lr=0.1)),
    "sgd_momentum_wd": (lambda p, **k: dl.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01,
                                                    **k),
                        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01)),
    "sgd_nesterov": (lambda p, **k: dl.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True, **k),
                     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True)),
    "sgd_dampening_maximize": (
        lambda p, **k: dl.optim.SGD(p, lr=0.1, momentum=0.5, dampening=0.3, maximize=True,
                                    **k),
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.5, dampening=0.3, maximize=True)),
}
# more parameters than one launch takes (8 a launch by default), sizes around a cube (256)
SHAPES = [(300,), (7,), (20, 30), (1,), (256,), (3, 4, 5), (257,), (2, 2), (9,), (513,)]


def _params(dev, dtype, shapes=SHAPES, seed=0):
    arrs = [rand_np(s, seed + k, dtype) for k, s in enumerate(shapes)]
    return ([nn.Parameter(dl.tensor(a, device=dev)) for a in arrs],
            [torch.nn.Parameter(torch.tensor(a)) for a in arrs])


def _grads(shapes, step, dtype):
    return [rand_np(s, 100 * step + k, dtype) for k, s in enumerate(shapes)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(OPTIMS))
def test_multi_tensor_steps_match_per_parameter_bits_and_torch(dev, name, dtype):
    make, tmake = OPTIMS[name]
    multi, tps = _params(dev, dtype)
    single, _ = _params(dev, dtype)
    opts = [make(multi), make(single, foreach=False)]
    topt = tmake(tps)
    for step in range(4):
        gs = _grads(SHAPES, step, dtype)
        for ps in (multi, single):
            for p, g in zip(ps, gs):
                p.grad = dl.tensor(g, device=dev)
        for p, g in zip(tps, gs):
            p.grad = torch.tensor(g)
        with dl.count_kernels() as c:
            opts[0].step()
        if step:  # (the first makes the state)
            assert c.launches == math.ceil(len(SHAPES) / optim_multi.max_segments(
                multi[0].device.rt, opts[0]._rule(opts[0].param_groups[0])))
        opts[1].step()
        topt.step()
        for k, (a, b, t) in enumerate(zip(multi, single, tps)):
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=f"step {step} #{k}")
            close(a, t, dl.float32 if dtype == np.float32 else dl.float64)
    for sa, sb in zip(opts[0].state_dict()["state"].values(),
                      opts[1].state_dict()["state"].values()):
        assert sa.keys() == sb.keys()
        for key in sa:
            a, b = sa[key], sb[key]
            if isinstance(a, dl.Tensor):
                np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=key)
            else:
                assert a == b, key


def test_later_steps_relaunch_the_plan_without_compiling(dev):
    ps, _ = _params(dev, np.float32, SHAPES[:5])
    opt = dl.optim.Adam(ps, lr=0.1)
    for step in range(3):
        for p, g in zip(ps, _grads(SHAPES[:5], step, np.float32)):
            p.grad = dl.tensor(g, device=dev)
        with dl.count_kernels() as c:
            opt.step()
        if step:
            assert c.launches == 1 and c.compiles == 0
            assert c.names == ["adam_multi5"]
            # later launches skip CubeFunction.launch: the executable, learnt at the first
            assert opt._plans[0].chunks[0][0].direct is not None


def test_parameters_without_gradients_and_uneven_step_counts(dev):
    """A parameter with no gradient is not stepped (its Adam step count lags: it takes its
    own launch, whose bias corrections differ); a gradient appearing re-plans."""
    shapes = SHAPES[:4]
    ps, tps = _params(dev, np.float32, shapes)
    opt, topt = dl.optim.Adam(ps, lr=0.05), torch.optim.Adam(tps, lr=0.05)
    for step in range(5):
        gs = _grads(shapes, step, np.float32)
        for k, (p, tp, g) in enumerate(zip(ps, tps, gs)):
            has = not (k == 1 and step < 2) and not (k == 3 and step == 3)
            p.grad = dl.tensor(g, device=dev) if has else None
            tp.grad = torch.tensor(g) if has else None
        with dl.count_kernels() as c:
            opt.step()
        topt.step()
        steps = [n for n in c.names if n.startswith("adam_")]  # not the state's zeros
        assert len(steps) == {0: 1, 1: 1, 2: 2, 3: 2, 4: 3}[step], step
        for p, tp in zip(ps, tps):
            close(p, tp, atol=1e-5)  # float32 rounding near zero after 5 steps of 0.05
    assert [opt.state[p]["step"] for p in ps] == [5, 3, 5, 4]


def test_the_plan_follows_group_changes(dev):
    """New scalars (a schedule's rate), new flags (weight decay on), a strided gradient
    (the per-parameter path takes that parameter), a parameter added to the group: every
    step still matches torch."""
    shapes = SHAPES[:3]
    ps, tps = _params(dev, np.float32, shapes)
    opt, topt = dl.optim.AdamW(ps, lr=0.05, weight_decay=0.0), \
        torch.optim.AdamW(tps, lr=0.05, weight_decay=0.0)
    for step in range(6):
        if step == 1:
            for g in (opt.param_groups[0], topt.param_groups[0]):
                g["lr"] = 0.02
        if step == 2:
            for g in (opt.param_groups[0], topt.param_groups[0]):
                g["weight_decay"] = 0.2
        if step == 4:
            extra = rand_np((5,), 77)
            ps.append(nn.Parameter(dl.tensor(extra, device=dev)))
            tps.append(torch.nn.Parameter(torch.tensor(extra)))
            opt.param_groups[0]["params"].append(ps[-1])
            topt.param_groups[0]["params"].append(tps[-1])
        gs = _grads([p.shape for p in ps], step, np.float32)
        for k, (p, tp, g) in enumerate(zip(ps, tps, gs)):
            tp.grad = torch.tensor(g)
            p.grad = dl.tensor(g, device=dev)
            if step == 3 and k == 2:  # a transposed view: not contiguous
                p.grad = dl.tensor(np.ascontiguousarray(g.T), device=dev).t()
        opt.step()
        topt.step()
        for p, tp in zip(ps, tps):
            close(p, tp)


def test_groups_mixing_dtypes_take_one_launch_each(dev):
    arrs = [rand_np((40,), 1), rand_np((40,), 2, np.float64), rand_np((6,), 3)]
    ps = [nn.Parameter(dl.tensor(a, device=dev)) for a in arrs]
    tps = [torch.nn.Parameter(torch.tensor(a)) for a in arrs]
    opt = dl.optim.SGD(ps, lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(tps, lr=0.1, momentum=0.9)
    for step in range(3):
        for p, tp, a in zip(ps, tps, arrs):
            g = rand_np(a.shape, 50 + step, a.dtype)
            p.grad, tp.grad = dl.tensor(g, device=dev), torch.tensor(g)
        with dl.count_kernels() as c:
            opt.step()
        topt.step()
        assert c.launches == 2  # float32 (two parameters) and float64
        for p, tp in zip(ps, tps):
            close(p, tp, dl.float64 if p.dtype is dl.float64 else dl.float32)


class _FakeWebGPU:
    target = "wgsl"

    def __init__(self, limits):
        self.limits = limits


def test_segments_per_launch_are_declared_by_the_runtime(monkeypatch):
    """WebGPU binds at most max-storage-buffers-per-shader-stage buffers (8 when the
    adapter declares nothing); a runtime too small for one segment steps each parameter
    with its own kernel."""
    fake = _FakeWebGPU({})
    assert optim_multi.max_segments(fake, optim_multi.ADAM) == 2
    assert optim_multi.max_segments(fake, optim_multi.SGD) == 4
    fake.limits = {"max-storage-buffers-per-shader-stage": 32}
    assert optim_multi.max_segments(fake, optim_multi.ADAM) == 8
    fake.limits = {"max-storage-buffers-per-shader-stage": 3}
    assert optim_multi.max_segments(fake, optim_multi.ADAM) == 0
    monkeypatch.setattr("dl.optim.foreach.max_segments", lambda rt, rule: 0)
    ps, tps = _params("cpu", np.float32, SHAPES[:3])
    opt, topt = dl.optim.Adam(ps, lr=0.05), torch.optim.Adam(tps, lr=0.05)
    for step in range(2):
        for p, tp, g in zip(ps, tps, _grads(SHAPES[:3], step, np.float32)):
            p.grad, tp.grad = dl.tensor(g, device="cpu"), torch.tensor(g)
        with dl.count_kernels() as c:
            opt.step()
        topt.step()
        assert [n for n in c.names if n.startswith("adam")] == ["adam_kernel"] * 3
        for p, tp in zip(ps, tps):
            close(p, tp)


@pytest.mark.parametrize("optim", ["adam", "sgd_momentum_wd"])
def test_captured_multi_tensor_steps_match_eager_ones(dev, optim):
    """Under dl.capture a replay relaunches each chunk's kernel with fresh scalars (Adam's
    step counts advance) and no Python of the step."""
    make = OPTIMS[optim][0]
    shapes = SHAPES[:9]  # two launches
    eager_ps, _ = _params(dev, np.float32, shapes)
    cap_ps, _ = _params(dev, np.float32, shapes)
    eager, cap = make(eager_ps), make(cap_ps)
    calls = []
    inner = cap._step
    cap._step = lambda: (calls.append(1), inner())
    xs = [dl.tensor(rand_np((1,), 200 + k), device=dev) for k in range(6)]

    def step_fn(ps, opt, x):
        opt.zero_grad()
        loss = sum(((p * x).tanh().sum() for p in ps), dl.tensor(0.0, device=dev))
        loss.backward()
        opt.step()
        return loss

    captured = dl.capture(lambda x: step_fn(cap_ps, cap, x))
    for x in xs:
        want = step_fn(eager_ps, eager, x).item()
        assert captured(x).item() == pytest.approx(want, rel=1e-5, abs=1e-6)
    assert len(calls) == 2  # the warm-up and the recording
    for a, b in zip(eager_ps, cap_ps):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
    if optim == "adam":
        assert cap.state[cap_ps[0]]["step"] == eager.state[eager_ps[0]]["step"] == 6


@pytest.mark.parametrize("foreach", [None, False])
def test_a_scalar_float32_cannot_hold_is_refused_on_both_paths(foreach):
    """Later multi-tensor launches skip CubeFunction.launch's checks, not this one: a
    learning rate whose step size overflows float32 is a LaunchError naming the argument."""
    ps, _ = _params("cpu", np.float32, SHAPES[:3])
    opt = dl.optim.Adam(ps, lr=0.1, foreach=foreach)
    for step in range(3):
        for p, g in zip(ps, _grads(SHAPES[:3], step, np.float32)):
            p.grad = dl.tensor(g, device="cpu")
        if step == 2:
            opt.param_groups[0]["lr"] = 1e39
            with pytest.raises(cb.LaunchError, match="step_size"):
                opt.step()
        else:
            opt.step()


def test_the_plan_keeps_no_gradient_alive(dev):
    """Between steps the plan holds the parameters and state, not the gradients: their
    memory goes back to the pool when zero_grad drops them."""
    import gc
    import weakref
    ps, _ = _params(dev, np.float32, SHAPES[:3])
    opt = dl.optim.Adam(ps, lr=0.1)
    for step in range(3):
        for p, g in zip(ps, _grads(SHAPES[:3], step, np.float32)):
            p.grad = dl.tensor(g, device=dev)
        refs = [weakref.ref(p.grad) for p in ps]
        opt.step()
        opt.zero_grad()
        gc.collect()
        assert all(r() is None for r in refs), step


@pytest.mark.parametrize("rule", [optim_multi.ADAM, optim_multi.ADAM_AMSGRAD,
                                  optim_multi.SGD_MOMENTUM, optim_multi.SGD])
def test_the_widest_launch_fits_opencls_guaranteed_argument_bytes(rule):
    """OpenCL passes a kernel's arguments by value (a pointer per buffer, the argument block
    of 8-byte slots) and guarantees only 1024 bytes of them: the segments an OpenCL launch
    takes (`opencl_segments`: 8 of Adam, 6 of AMSGRAD's) must fit that."""
    import re
    flags = {f: (2 if t == "int" else False) for f, t in rule.flags}
    src = optim_multi.kernel(rule, optim_multi.opencl_segments(rule)).source(
        target="opencl", F=dl.float32.cube, **flags)
    slots = int(re.search(r"s\[(\d+)\]", src).group(1))  # the argument block
    buffers = src.count("__global")
    assert (slots + buffers) * 8 <= optim_multi.OPENCL_MIN_PARAMETER_BYTES

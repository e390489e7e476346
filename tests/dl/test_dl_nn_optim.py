"""Modules, optimisers, LR schedules and safetensors."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from dl_helpers import close, rand_np

import dl
from dl import nn


class Affine(nn.Module):
    """A tiny module with parameters (Linear itself comes with the kernel library)."""

    def __init__(self, n):
        super().__init__()
        self.w = nn.Parameter(dl.tensor(rand_np((n,), 1)))
        self.b = nn.Parameter(dl.tensor(rand_np((n,), 2)))
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(x * self.w + self.b)


def test_module_registration_and_modes():
    m = nn.Sequential(Affine(3), nn.Dropout(0.5), nn.Sequential(Affine(3), nn.Tanh()))
    names = [n for n, _ in m.named_parameters()]
    assert names == ["0.w", "0.b", "2.0.w", "2.0.b"]
    assert len(list(m.parameters())) == 4 and len(list(m.children())) == 3
    assert len(list(m.modules())) == 8  # 2 Sequential, 2 Affine, 2 GELU, Dropout, Tanh
    m.eval()
    assert all(not s.training for s in m.modules())
    x = dl.tensor(rand_np((2, 3), 3))
    np.testing.assert_array_equal(m(x).numpy(), m(x).numpy())  # no dropout in eval
    m.train()
    assert m[1].training
    assert "Dropout(p=0.5)" in repr(m)


def test_state_dict_round_trip():
    a, b = Affine(4), Affine(4)
    sd = a.state_dict()
    assert list(sd) == ["w", "b"]
    b.load_state_dict(sd)
    np.testing.assert_array_equal(b.w.numpy(), a.w.numpy())
    with pytest.raises(KeyError, match="missing"):
        b.load_state_dict({"w": sd["w"]})
    with pytest.raises(ValueError, match="shape"):
        b.load_state_dict({"w": dl.ones(3), "b": sd["b"]})


def test_activation_modules_match_torch():
    a = rand_np((3, 4), 5)
    x, tx = dl.tensor(a), torch.tensor(a)
    for m, tm in [(nn.ReLU(), torch.nn.ReLU()), (nn.GELU("tanh"), torch.nn.GELU("tanh")),
                  (nn.Sigmoid(), torch.nn.Sigmoid()), (nn.Tanh(), torch.nn.Tanh()),
                  (nn.SiLU(), torch.nn.SiLU())]:
        close(m(x), tm(tx))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(reduction, dev):
    a, b = rand_np((3, 5), 6), rand_np((3, 5), 7)
    x = dl.tensor(a, device=dev, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    loss = nn.MSELoss(reduction)(x, dl.tensor(b, device=dev))
    tl = torch.nn.MSELoss(reduction=reduction)(tx, torch.tensor(b))
    close(loss, tl, rtol=1e-5)
    g = rand_np(tl.shape, 8)
    loss.backward(dl.tensor(g, device=dev))
    tl.backward(torch.tensor(g))
    close(x.grad, tx.grad, rtol=1e-5, atol=1e-7)
    # a target of another shape broadcasts with torch's warning (it was refused)
    with pytest.warns(UserWarning, match="target size"):
        got = dl.nn.functional.mse_loss(x, dl.tensor(b[0], device=dev), reduction=reduction)
    with pytest.warns(UserWarning, match="target size"):
        want = torch.nn.functional.mse_loss(tx, torch.tensor(b[0]), reduction=reduction)
    close(got, want, rtol=1e-5)


OPTIMS = {
    "sgd": (lambda p: dl.optim.SGD(p, lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
    "sgd_momentum": (lambda p: dl.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01),
                     lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01)),
    "sgd_nesterov": (lambda p: dl.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True),
                     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True)),
    "adam": (lambda p: dl.optim.Adam(p, lr=0.01, weight_decay=0.1),
             lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.1)),
    "adamw": (lambda p: dl.optim.AdamW(p, lr=0.01, betas=(0.8, 0.99)),
              lambda p: torch.optim.AdamW(p, lr=0.01, betas=(0.8, 0.99))),
    "sgd_dampening_maximize": (
        lambda p: dl.optim.SGD(p, lr=0.1, momentum=0.5, dampening=0.3, maximize=True),
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.5, dampening=0.3, maximize=True)),
    "adam_maximize": (lambda p: dl.optim.Adam(p, lr=0.02, maximize=True),
                      lambda p: torch.optim.Adam(p, lr=0.02, maximize=True)),
    "adamw_decay": (lambda p: dl.optim.AdamW(p, lr=0.01, weight_decay=0.3),
                    lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.3)),
    "adam_amsgrad": (lambda p: dl.optim.Adam(p, lr=0.02, betas=(0.5, 0.9), amsgrad=True),
                     lambda p: torch.optim.Adam(p, lr=0.02, betas=(0.5, 0.9), amsgrad=True)),
    "adamw_amsgrad": (lambda p: dl.optim.AdamW(p, lr=0.01, weight_decay=0.1, amsgrad=True),
                      lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1, amsgrad=True)),
    # 1 - beta2 taken in double, as PyTorch's (in float32 it is 1.4e-3 off here)
    "adam_beta2_near_1": (lambda p: dl.optim.Adam(p, lr=0.05, betas=(0.9, 0.99999)),
                          lambda p: torch.optim.Adam(p, lr=0.05, betas=(0.9, 0.99999))),
}


@pytest.mark.parametrize("path", ["kernel", "graph"])
@pytest.mark.parametrize("name", sorted(OPTIMS))
def test_optimizer_steps_match_torch(name, path, monkeypatch):
    """Both ways a step runs: the library's one-kernel step (float32/64, contiguous) and the
    fused graph (every other dtype or layout)."""
    if path == "graph":
        monkeypatch.setattr(dl.optim.Optimizer, "_direct", staticmethod(lambda *t: False))
    make, tmake = OPTIMS[name]
    a = rand_np((4, 3), 9)
    p = nn.Parameter(dl.tensor(a))
    tp = torch.nn.Parameter(torch.tensor(a))
    opt, topt = make([p]), tmake([tp])
    target = rand_np((4, 3), 10)
    for _ in range(4):
        opt.zero_grad()
        topt.zero_grad()
        dl.nn.functional.mse_loss(p.tanh(), dl.tensor(target)).backward()
        torch.nn.functional.mse_loss(tp.tanh(), torch.tensor(target)).backward()
        close(p.grad, tp.grad, rtol=1e-5, atol=1e-7)
        opt.step()
        topt.step()
        close(p, tp, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["sgd_momentum", "sgd_nesterov", "adam", "adamw_decay"])
def test_optimizer_kernels_on_every_runtime(dev, name):
    make, tmake = OPTIMS[name]
    a, gs = rand_np((70,), 12), [rand_np((70,), 13 + k) for k in range(3)]
    p = nn.Parameter(dl.tensor(a, device=dev))
    tp = torch.nn.Parameter(torch.tensor(a))
    opt, topt = make([p]), tmake([tp])
    for g in gs:
        p.grad, tp.grad = dl.tensor(g, device=dev), torch.tensor(g)
        opt.step()
        topt.step()
        close(p, tp, rtol=1e-5, atol=1e-6)


def test_optimizer_step_is_one_kernel_per_parameter(dev):
    p = nn.Parameter(dl.tensor(rand_np((8,), 11), device=dev))
    opt = dl.optim.Adam([p], lr=0.1)
    p.grad = dl.ones(8, device=dev)
    opt.step()
    with dl.count_kernels() as c:
        opt.step()
    assert c.launches == 1 and c.compiles == 0  # new step counts are arguments, not code


def test_lr_schedules_match_torch():
    for make, tmake in [
        (lambda o: dl.optim.lr_scheduler.StepLR(o, 3, 0.5),
         lambda o: torch.optim.lr_scheduler.StepLR(o, 3, 0.5)),
        (lambda o: dl.optim.lr_scheduler.CosineAnnealingLR(o, 10, 0.01),
         lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 10, 0.01)),
    ]:
        opt = dl.optim.SGD([nn.Parameter(dl.ones(1))], lr=0.1)
        topt = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
        s, ts = make(opt), tmake(topt)
        for _ in range(12):
            topt.step()
            s.step()
            ts.step()
            assert s.get_last_lr()[0] == pytest.approx(ts.get_last_lr()[0], rel=1e-9, abs=1e-12)


def test_safetensors_round_trip(tmp_path):
    ts = {"a": dl.tensor(rand_np((2, 3), 12)), "b": dl.arange(5),
          "c": dl.tensor(rand_np((4,), 13), dtype=dl.bfloat16),
          "d": dl.tensor([True, False]), "e": dl.tensor(rand_np((3, 2), 14)).t()}
    path = tmp_path / "w.safetensors"
    dl.save_file(ts, path, metadata={"format": "pt"})
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    import json
    header = json.loads(raw[8:8 + n])
    assert header["a"] == {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}
    assert header["__metadata__"] == {"format": "pt"}
    back = dl.load_file(path)
    for k, t in ts.items():
        assert back[k].dtype is t.dtype
        np.testing.assert_array_equal(back[k].numpy(), t.numpy())
    m, m2 = Affine(3), Affine(3)
    dl.io.safetensors.save_module(m, tmp_path / "m.safetensors")
    dl.io.safetensors.load_module(m2, tmp_path / "m.safetensors")
    np.testing.assert_array_equal(m2.b.numpy(), m.b.numpy())


def test_safetensors_written_by_the_reference_package(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    path = tmp_path / "ref.safetensors"
    ref = {"x": torch.randn(3, 4), "y": torch.arange(6).reshape(2, 3),
           "z": torch.randn(5).to(torch.bfloat16)}
    st.save_file(ref, str(path))
    got = dl.load_file(path)
    for k, v in ref.items():
        close(got[k], v)
    dl.save_file(got, tmp_path / "ours.safetensors")
    again = st.load_file(str(tmp_path / "ours.safetensors"))
    for k, v in ref.items():
        assert torch.equal(again[k], v)

"""torch.nn pieces composed of existing dl ops, against torch.nn: the hard/shrink
activations and PReLU, padding modules, channel-wise dropout, ParameterList/ParameterDict,
nn.RNN (a grid of options), and Module hooks / get_submodule / get_parameter. Weights are
copied through state_dict; outputs, input gradients and parameter gradients compared.
Interp by default; one cheap test on every runtime (`dev`)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from dl_helpers import close, rand_np

import dl
from dl import nn
from dl.nn import functional as F

TF = torch.nn.functional


def _flat(y):
    return [t for e in y for t in _flat(e)] if isinstance(y, (tuple, list)) else [y]


def _copy(ours, ref, device=None) -> None:
    assert list(ours.state_dict()) == list(ref.state_dict()), \
        (list(ours.state_dict()), list(ref.state_dict()))
    ours.load_state_dict({k: dl.tensor(v.detach().numpy(), device=device)
                          for k, v in ref.state_dict().items()})


def _compare(ours, ref, *inputs, rtol=1e-4, atol=1e-5, device=None):
    """Copies ref's weights into ours; compares outputs, the float inputs' gradients and
    every parameter's gradient for a random weighting of the outputs. Returns the largest
    absolute deviation seen."""
    if device is not None:
        ours.to(device)
    _copy(ours, ref, device)
    xs = [dl.tensor(a, requires_grad=a.dtype.kind == "f", device=device) for a in inputs]
    ts = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in inputs]
    ys, tys = _flat(ours(*xs)), _flat(ref(*ts))
    assert len(ys) == len(tys)
    loss = tloss = 0
    dev = 0.0
    for k, (y, ty) in enumerate(zip(ys, tys)):
        close(y, ty, rtol=rtol, atol=atol)
        dev = max(dev, float(np.abs(y.numpy() - ty.detach().numpy()).max()))
        w = rand_np(tuple(ty.shape), 7 + k)
        loss = (y * dl.tensor(w, device=device)).sum() + loss
        tloss = (ty * torch.tensor(w)).sum() + tloss
    loss.backward()
    tloss.backward()
    for x, t in zip(xs, ts):
        if t.grad is not None:
            close(x.grad, t.grad, rtol=rtol, atol=atol)
            dev = max(dev, float(np.abs(x.grad.numpy() - t.grad.numpy()).max()))
    params = dict(ours.named_parameters())
    assert set(params) == {n for n, _ in ref.named_parameters()}
    for name, p in ref.named_parameters():
        assert params[name].grad is not None, f"{name}: no gradient"
        close(params[name].grad, p.grad, rtol=rtol, atol=atol)
        dev = max(dev, float(np.abs(params[name].grad.numpy() - p.grad.numpy()).max()))
    return dev


def _pair(name, *args, **kwargs):
    torch.manual_seed(0)
    return getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)


# ---- activations -------------------------------------------------------------------------
def _kinky(shape, seed=0, scale=4.0):
    """Random values with the kinks of the piecewise activations (0, +-1, +-3, 6, 0.5)
    included exactly, to check the gradient's convention there."""
    a = rand_np(shape, seed, low=-scale * 2, high=scale * 2)
    flat = a.reshape(-1)
    kinks = np.array([0.0, 1.0, -1.0, 3.0, -3.0, 6.0, 0.5, -0.5, 2.0, -2.0], np.float32)
    flat[:len(kinks)] = kinks[:flat.size]
    return a


ACTS = [("ReLU6", (), {}), ("Hardtanh", (), {}), ("Hardtanh", (-2.0, 0.5), {}),
        ("Hardsigmoid", (), {}), ("Softsign", (), {}), ("Tanhshrink", (), {}),
        ("Threshold", (0.5, -3.0), {}), ("Threshold", (-1.0, 2.0), {}), ("CELU", (), {}),
        ("CELU", (0.5,), {}), ("PReLU", (), {}), ("PReLU", (3,), {"init": 0.1})]


@pytest.mark.parametrize("name,args,kw", ACTS, ids=[f"{a[0]}{a[1]}" for a in ACTS])
def test_activation_modules(name, args, kw):
    ours, ref = _pair(name, *args, **kw)
    if name == "PReLU":  # a non-uniform weight, so the per-channel broadcast shows
        with torch.no_grad():
            ref.weight.copy_(torch.linspace(-0.5, 0.7, ref.weight.numel()))
    assert repr(ours) == repr(ref)
    _compare(ours, ref, _kinky((2, 3, 5)))


def test_activation_functional_and_inplace():
    a = _kinky((4, 6), 3)
    for fn, tfn, kw in [(F.relu6, TF.relu6, {}), (F.hardtanh, TF.hardtanh, dict(min_val=-.5)),
                        (F.hardsigmoid, TF.hardsigmoid, {}), (F.celu, TF.celu, dict(alpha=2.)),
                        (F.threshold, TF.threshold, dict(threshold=0.0, value=9.0)),
                        (F.softsign, TF.softsign, {}), (F.tanhshrink, TF.tanhshrink, {})]:
        close(fn(dl.tensor(a), **kw), tfn(torch.tensor(a), **kw))
    for fn, tfn in [(F.relu6, TF.relu6), (F.hardsigmoid, TF.hardsigmoid), (F.celu, TF.celu)]:
        x, t = dl.tensor(a), torch.tensor(a)
        assert fn(x, inplace=True) is x
        tfn(t, inplace=True)
        close(x, t)
    x, t = dl.tensor(a), torch.tensor(a)
    F.threshold_(x, 0.1, 20.0)
    TF.threshold_(t, 0.1, 20.0)
    close(x, t)


def test_prelu_unbatched_and_errors():
    w, w1 = rand_np((3,), 1), np.array([0.3], np.float32)
    for a, wt in ((rand_np((3,), 2), w1), (rand_np((2, 3), 2), w), (rand_np((4,), 3), w1)):
        close(F.prelu(dl.tensor(a), dl.tensor(wt)), TF.prelu(torch.tensor(a), torch.tensor(wt)))
    for a in (rand_np((2, 4)), rand_np((3,))):  # a 1-D input has no channel dim
        with pytest.raises(RuntimeError):
            TF.prelu(torch.tensor(a), torch.tensor(w))
        with pytest.raises(RuntimeError):
            F.prelu(dl.tensor(a), dl.tensor(w))
    with pytest.raises(ValueError):
        nn.Hardtanh(1.0, -1.0)


# ---- padding -----------------------------------------------------------------------------
PADS = [("ZeroPad2d", (2,), (2, 3, 4, 5)), ("ZeroPad2d", ((1, 0, 2, 1),), (3, 4, 5)),
        ("ConstantPad1d", (2, 3.5), (2, 3, 5)), ("ConstantPad1d", ((0, 2), -1.0), (3, 4)),
        ("ConstantPad2d", ((1, 2, 0, 1), 0.25), (2, 3, 4, 5)),
        ("ReflectionPad1d", (2,), (2, 3, 5)), ("ReflectionPad1d", ((3, 1),), (3, 5)),
        ("ReflectionPad2d", ((1, 2, 2, 0),), (2, 2, 4, 5)), ("ReflectionPad2d", (1,), (2, 4, 4)),
        ("ReplicationPad1d", ((0, 3),), (2, 3, 4)), ("ReplicationPad1d", (2,), (3, 4)),
        ("ReplicationPad2d", ((2, 1, 0, 3),), (2, 2, 3, 4)),
        ("ReplicationPad2d", (1,), (2, 3, 3))]


@pytest.mark.parametrize("name,args,shape", PADS, ids=[f"{p[0]}{p[1]}" for p in PADS])
def test_padding_modules(name, args, shape):
    ours, ref = _pair(name, *args)
    assert repr(ours) == repr(ref)
    assert ours.padding == ref.padding
    _compare(ours, ref, rand_np(shape, 5))


# ---- channel-wise dropout ----------------------------------------------------------------
@pytest.mark.parametrize("cls,shape", [(nn.Dropout1d, (16, 32, 6)), (nn.Dropout1d, (64, 7)),
                                       (nn.Dropout2d, (16, 32, 3, 4)),
                                       (nn.Dropout2d, (8, 16, 5))])
def test_dropout_channels(cls, shape):
    p = 0.3
    m = cls(p)
    assert repr(m) == repr(getattr(torch.nn, cls.__name__)(p))
    a = rand_np(shape, 9, low=0.5, high=1.5)  # no zeros in the input
    x = dl.tensor(a, requires_grad=True)
    y = m(x)
    yn = y.numpy()
    lead = 1 if len(shape) == 2 else 2  # (C, L) unbatched for Dropout1d
    per = yn.reshape(int(np.prod(shape[:lead])), -1)
    src = a.reshape(per.shape)
    zero = (per == 0).all(1)
    scaled = np.isclose(per, src / (1 - p), rtol=1e-5).all(1)
    assert (zero | scaled).all(), "a channel is neither all-zero nor all-scaled"
    frac = zero.mean()
    n = per.shape[0]
    assert abs(frac - p) < 4 * np.sqrt(p * (1 - p) / n) + 1e-9, (frac, n)
    y.sum().backward()  # the gradient is the same mask
    g = x.grad.numpy().reshape(per.shape)
    assert np.allclose(g[zero], 0) and np.allclose(g[~zero], 1 / (1 - p))
    m.eval()
    assert m(x) is x
    with pytest.raises(ValueError):
        cls(1.5)


def test_dropout_channels_edges():
    x = dl.tensor(rand_np((2, 3, 4), 1))
    assert (F.dropout2d(x, 1.0).numpy() == 0).all()
    assert F.dropout1d(x, 0.0) is x
    assert F.dropout1d(x, 0.5, training=False) is x
    with pytest.raises(RuntimeError):
        F.dropout1d(dl.tensor(rand_np((2, 3, 4, 5))), 0.5)


# ---- parameter containers ----------------------------------------------------------------
class _Holder(nn.Module):
    def __init__(self, lib):
        super().__init__()
        self.lin = lib.Linear(2, 2)
        self.plist = lib.ParameterList([lib.Parameter(t) for t in self._ts(lib)])
        self.pdict = lib.ParameterDict({"a": lib.Parameter(self._ts(lib)[0]),
                                        "b": lib.Parameter(self._ts(lib)[1])})

    @staticmethod
    def _ts(lib):
        mk = dl.tensor if lib is nn else torch.tensor
        return [mk(rand_np((3,), 1)), mk(rand_np((2, 2), 2))]


class _TorchHolder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        ts = _Holder._ts(torch.nn)
        self.plist = torch.nn.ParameterList([torch.nn.Parameter(t) for t in ts])
        self.pdict = torch.nn.ParameterDict({"a": torch.nn.Parameter(ts[0]),
                                             "b": torch.nn.Parameter(ts[1])})


def test_parameter_containers():
    ours, ref = _Holder(nn), _TorchHolder()
    assert list(ours.state_dict()) == list(ref.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in ref.named_parameters()]
    assert "plist.1" in ours.state_dict() and "pdict.b" in ours.state_dict()
    pl, pd = ours.plist, ours.pdict
    assert len(pl) == 2 and pl[-1] is pl[1] and list(pl) == [pl[0], pl[1]]
    pl.append(dl.ones(4))  # a plain tensor becomes a Parameter
    assert isinstance(pl[2], nn.Parameter) and pl[2].requires_grad
    assert len(pl[1:]) == 2 and isinstance(pl[1:], nn.ParameterList)
    pd["c"] = dl.zeros(1)
    assert isinstance(pd["c"], nn.Parameter) and "c" in pd and list(pd) == ["a", "b", "c"]
    assert list(pd.keys()) == ["a", "b", "c"] and pd.get("zz") is None
    del pd["a"]
    assert list(dict(ours.named_parameters())) == ["lin.weight", "lin.bias", "plist.0",
                                                     "plist.1", "plist.2", "pdict.b",
                                                     "pdict.c"]
    ours.double()
    assert all(p.dtype is dl.float64 for p in ours.parameters())
    assert ours.plist[2].dtype is dl.float64 and ours.pdict["c"].dtype is dl.float64
    with pytest.raises(IndexError):
        pl[5]
    # gradients reach them through the parent module's parameters()
    loss = (ours.plist[0] * 2.0).sum() + ours.pdict["b"].sum()
    loss.backward()
    assert np.allclose(ours.plist[0].grad.numpy(), 2.0)


# ---- RNN ---------------------------------------------------------------------------------
RNN_GRID = [dict(), dict(nonlinearity="relu"), dict(num_layers=2),
            dict(bidirectional=True), dict(batch_first=True, bias=False),
            dict(num_layers=2, bidirectional=True, nonlinearity="relu", batch_first=True),
            dict(num_layers=3, bias=False, bidirectional=True)]


@pytest.mark.parametrize("kw", RNN_GRID, ids=[str(k) for k in RNN_GRID])
@pytest.mark.parametrize("with_h0", [False, True])
def test_rnn(kw, with_h0):
    ours, ref = _pair("RNN", 3, 4, **kw)
    assert repr(ours) == repr(ref)
    dirs = 2 if kw.get("bidirectional") else 1
    L, B = 5, 2
    x = rand_np((B, L, 3) if kw.get("batch_first") else (L, B, 3), 1)
    inputs = (x, rand_np((kw.get("num_layers", 1) * dirs, B, 4), 2)) if with_h0 else (x,)
    _compare(ours, ref, *inputs, rtol=1e-4, atol=1e-5)


def test_rnn_unbatched_and_init():
    ours, ref = _pair("RNN", 3, 5, num_layers=2, nonlinearity="relu")
    _compare(ours, ref, rand_np((4, 3), 3), rand_np((2, 5), 4))
    b = 1 / np.sqrt(5)
    for p in nn.RNN(3, 5).parameters():
        assert np.abs(p.numpy()).max() <= b
    with pytest.raises(ValueError):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError):
        ours(dl.tensor(rand_np((4, 2, 3))), dl.zeros(1, 2, 5))


def test_rnn_dropout_train_eval():
    m = nn.RNN(3, 4, num_layers=2, dropout=0.5)
    x = dl.tensor(rand_np((3, 2, 3), 1))
    m.eval()
    a = m(x)[0].numpy()
    assert np.allclose(a, m(x)[0].numpy())
    m.train()
    assert m(x)[0].shape == (3, 2, 4)


# ---- hooks, get_submodule, get_parameter -------------------------------------------------
def _hook_log(lib, model):
    """Runs the same sequence of hook registrations on `model` (dl or torch), returning
    the outputs and the calls the hooks saw."""
    log = []
    mk = dl.tensor if lib == "dl" else torch.tensor
    lin = model[0]

    def pre(mod, args):
        log.append(("pre", type(mod).__name__, tuple(args[0].shape)))

    def pre_double(mod, args):
        return args[0] * 2.0  # a non-tuple result is wrapped

    def post(mod, args, out):
        log.append(("post", type(mod).__name__, len(args), tuple(out.shape)))

    def post_neg(mod, args, out):
        return -out

    x = mk(rand_np((2, 3), 4))
    outs = [model(x)]
    h1 = lin.register_forward_pre_hook(pre)
    h2 = lin.register_forward_pre_hook(pre_double)
    h3 = model.register_forward_hook(post)
    h4 = lin.register_forward_hook(post_neg)
    outs.append(model(x))
    h2.remove()
    h2.remove()  # twice is harmless
    outs.append(model(x))
    h5 = lin.register_forward_pre_hook(lambda m, a: (a[0] + 1.0,), prepend=True)
    outs.append(model(x))
    for h in (h1, h3, h4, h5):
        h.remove()
    outs.append(model(x))
    with model.register_forward_hook(lambda m, a, o: o * 0.0):
        outs.append(model(x))
    outs.append(model(x))
    h6 = lin.register_forward_pre_hook(
        lambda m, a, k: ((a[0] * 3.0,), k), with_kwargs=True)
    h7 = lin.register_forward_hook(lambda m, a, k, o: o + 1.0, with_kwargs=True)
    outs.append(model(x))
    h6.remove()
    h7.remove()
    return [o.detach().numpy() if lib == "torch" else o.numpy() for o in outs], log


def test_forward_hooks_as_torch():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    ours = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    _copy(ours, ref)
    got, glog = _hook_log("dl", ours)
    want, wlog = _hook_log("torch", ref)
    assert glog == wlog
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert not np.allclose(got[0], got[1])  # the hooks changed something
    np.testing.assert_allclose(got[0], got[4], rtol=1e-6)  # and left nothing behind
    assert ours[0]._hooks is None and ours._hooks is None  # the fast path is back


def test_hooks_see_gradients(dev):
    m = nn.Linear(3, 2).to(dev)
    seen = []
    h = m.register_forward_hook(lambda mod, a, o: seen.append(o.shape) or o * 2.0)
    x = dl.tensor(rand_np((4, 3), 1), device=dev, requires_grad=True)
    m(x).sum().backward()
    h.remove()
    assert seen == [(4, 2)]
    w = m.weight.numpy()
    np.testing.assert_allclose(x.grad.numpy(), np.tile(2.0 * w.sum(0), (4, 1)), rtol=1e-5)


def test_get_submodule_and_parameter():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(3, 4),
                              torch.nn.Sequential(torch.nn.Tanh(), torch.nn.Linear(4, 2)))
    ours = nn.Sequential(nn.Linear(3, 4), nn.Sequential(nn.Tanh(), nn.Linear(4, 2)))
    assert ours.get_submodule("") is ours
    assert ours.get_submodule("1.1") is ours[1][1]
    assert type(ours.get_submodule("1.0")).__name__ == type(ref.get_submodule("1.0")).__name__
    assert ours.get_parameter("1.1.bias") is ours[1][1].bias
    assert ours.get_parameter("0.weight") is ours[0].weight
    for target in ("2", "1.5", "0.weight"):
        with pytest.raises(AttributeError):
            ref.get_submodule(target)
        with pytest.raises(AttributeError):
            ours.get_submodule(target)
    for target in ("1.1.nope", "1.0.weight", "0"):
        with pytest.raises(AttributeError):
            ref.get_parameter(target)
        with pytest.raises(AttributeError):
            ours.get_parameter(target)

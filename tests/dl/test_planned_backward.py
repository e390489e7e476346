"""A node's whole backward through one dispatch plan (dl/autograd/planned.py): conv2d, linear,
max_pool2d, batch_norm and cross_entropy replay their gradients' launches once a key is warm.
Every step here has fresh values at one key (the later steps are replays) and every gradient
is checked against torch in float64; settings the closure reads beyond the shapes (padding
and dilation that give the same shapes, a fused activation), requires_grad and aliasing must
each key a plan of their own."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from dl_helpers import close

import dl
import dl.nn.functional as F
from dl import nn
from dl.autograd import planned
from dl.kernels import plan

STEPS = 6  # > WARMUP + 1: the last steps replay
TF = torch.nn.functional


@pytest.fixture(autouse=True)
def _fresh_plans():
    plan.clear()
    yield
    plan.clear()


def _mine(key) -> bool:
    """Whether a plan's key is a node backward's (its tag: (planned.backward, op tag, ...))."""
    return isinstance(key[0], tuple) and key[0][0] is planned.backward


def _backward_plans() -> dict:
    """Each planned op's name -> how many of its backward keys have a plan."""
    out: dict = {}
    for k, v in plan._plans.items():
        if _mine(k) and v.__class__ is plan.Plan:
            out[k[0][1][0]] = out.get(k[0][1][0], 0) + 1
    return out


def _pair(shape, rng, dev, grad=True):
    a = rng.standard_normal(shape).astype(np.float32)
    return (dl.tensor(a, device=dev, requires_grad=grad),
            torch.tensor(a.astype(np.float64), requires_grad=grad))


def _check_grads(ours, refs):
    for x, t in zip(ours, refs, strict=True):
        if t.grad is None:
            assert x.grad is None
        else:
            close(x.grad, t.grad, rtol=1e-4, atol=1e-4)


def test_training_steps_match_torch(dev):
    """The digits example's model as a torch user writes it, a fresh batch each step."""
    def make(m):
        return m.Sequential(
            m.Conv2d(1, 4, 3, padding=1), m.BatchNorm2d(4), m.ReLU(), m.MaxPool2d(2),
            m.Conv2d(4, 8, 3, padding=1), m.ReLU(), m.MaxPool2d(2), m.Flatten(),
            m.Linear(32, 16), m.ReLU(), m.Linear(16, 10))
    torch.manual_seed(0)
    ref = make(torch.nn).double()
    ours = make(nn).to(dev)
    for p, q in zip(ours.parameters(), ref.parameters(), strict=True):
        p.data = dl.tensor(q.detach().float().numpy(), device=dev)
    rng = np.random.default_rng(1)
    for _ in range(STEPS):
        x = rng.standard_normal((12, 1, 8, 8)).astype(np.float32)
        y = rng.integers(0, 10, 12)
        for m in (ours, ref):
            m.zero_grad()
        nn.CrossEntropyLoss()(ours(dl.tensor(x, device=dev)), dl.tensor(y, device=dev)) \
            .backward()
        torch.nn.CrossEntropyLoss()(ref(torch.tensor(x.astype(np.float64))),
                                    torch.tensor(y)).backward()
        _check_grads(list(ours.parameters()), list(ref.parameters()))
    made = _backward_plans()
    for op in ("conv2d", "batch_norm", "max_pool2d", "linear", "cross_entropy"):
        assert made.get(op), made


def test_settings_with_equal_shapes_key_their_own_plans(dev):
    """padding 1 / dilation 1 and padding 2 / dilation 2 give a 3x3 conv the same shapes;
    so do 2x2 pools with stride 2 and 3x3 ones with padding 1; a fused relu and none."""
    rng = np.random.default_rng(2)
    cases = [
        (lambda x, w: F.conv2d(x, w, padding=1), lambda x, w: TF.conv2d(x, w, padding=1)),
        (lambda x, w: F.conv2d(x, w, padding=2, dilation=2),
         lambda x, w: TF.conv2d(x, w, padding=2, dilation=2)),
    ]
    for _ in range(STEPS):
        for ours, ref in cases:
            (x, tx), (w, tw) = _pair((2, 3, 8, 8), rng, dev), _pair((4, 3, 3, 3), rng, dev)
            g = rng.standard_normal((2, 4, 8, 8))
            (ours(x, w) * dl.tensor(g.astype(np.float32), device=dev)).sum().backward()
            (ref(tx, tw) * torch.tensor(g)).sum().backward()
            _check_grads([x, w], [tx, tw])
    pools = [(2, 2, 0), (3, 2, 1)]
    for _ in range(STEPS):
        for k, s, p in pools:
            x, tx = _pair((2, 3, 8, 8), rng, dev)
            g = rng.standard_normal((2, 3, 4, 4))
            (F.max_pool2d(x, k, s, p) * dl.tensor(g.astype(np.float32), device=dev)).sum() \
                .backward()
            (TF.max_pool2d(tx, k, s, p) * torch.tensor(g)).sum().backward()
            _check_grads([x], [tx])
    for _ in range(STEPS):
        for act in ("relu", "none"):
            (x, tx), (w, tw), (b, tb) = (_pair(s, rng, dev) for s in ((5, 6), (7, 6), (7,)))
            g = rng.standard_normal((5, 7))
            y = F.linear(x, w, b, act=act)
            ty = TF.linear(tx, tw, tb)
            ty = ty.relu() if act == "relu" else ty
            # the gradient as given (a lazy one a fused relu would take into its mask)
            y.backward(dl.tensor(g.astype(np.float32), device=dev))
            ty.backward(torch.tensor(g))
            _check_grads([x, w, b], [tx, tw, tb])
    made = _backward_plans()
    assert made.get("conv2d", 0) >= 2 and made.get("max_pool2d", 0) >= 2 and \
        made.get("linear", 0) >= 2, made


def test_requires_grad_and_aliasing_key_the_plan(dev):
    """An input that takes no gradient in some calls, and a weight that is also the input
    (x @ x.T + b), at one set of shapes: each pattern replays its own launches."""
    rng = np.random.default_rng(3)
    kinds = ["grad", "no_grad", "aliased"]
    for first in range(3):  # each pattern traced first once
        plan.clear()
        for _ in range(STEPS):
            for kind in kinds[first:] + kinds[:first]:
                (w, tw), (b, tb) = _pair((6, 6), rng, dev), _pair((6,), rng, dev)
                if kind == "aliased":
                    x, tx = w, tw
                else:
                    x, tx = _pair((6, 6), rng, dev, grad=kind == "grad")
                F.linear(x, w, b).square().sum().backward()
                TF.linear(tx, tw, tb).square().sum().backward()
                _check_grads([x, w, b], [tx, tw, tb])


def test_one_row_and_batched_inputs(dev):
    """A one-row linear (its bias gradient is a sum over one row), a 3-D input (the linear's
    operand is its 2-D view) and an unbatched conv: gradients as torch's at every step."""
    rng = np.random.default_rng(4)
    for _ in range(STEPS):
        for shape in ((1, 5), (2, 3, 5)):
            (x, tx), (w, tw), (b, tb) = (_pair(s, rng, dev) for s in (shape, (4, 5), (4,)))
            F.linear(x, w, b).square().sum().backward()
            TF.linear(tx, tw, tb).square().sum().backward()
            _check_grads([x, w, b], [tx, tw, tb])
        (x, tx), (w, tw), (b, tb) = (_pair(s, rng, dev) for s in ((3, 6, 6), (2, 3, 3, 3),
                                                                   (2,)))
        F.conv2d(x, w, b).square().sum().backward()
        TF.conv2d(tx, tw, tb).square().sum().backward()
        _check_grads([x, w, b], [tx, tw, tb])


def test_transformer_layer_steps_match_torch(dev):
    """An encoder layer's backward: linears, the attention's matmuls and softmax, layer
    norms; each step's gradients as torch's (to the largest gradient's scale: the key
    bias's are zero up to rounding)."""
    torch.manual_seed(0)
    kw = dict(dropout=0.0, batch_first=True)
    ref = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, **kw).double()
    ours = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, **kw).to(dev)
    for p, q in zip(ours.parameters(), ref.parameters(), strict=True):
        p.data = dl.tensor(q.detach().float().numpy(), device=dev)
    rng = np.random.default_rng(5)
    for _ in range(STEPS):
        (x, tx) = _pair((2, 6, 16), rng, dev)
        for m in (ours, ref):
            m.zero_grad()
        (ours(x) ** 2).sum().backward()
        (ref(tx) ** 2).sum().backward()
        pairs = [(x, tx), *zip(ours.parameters(), ref.parameters(), strict=True)]
        scale = max(float(t.grad.abs().max()) for _, t in pairs)
        for o, t in pairs:
            np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=0,
                                       atol=1e-5 * scale)
    made = _backward_plans()
    for op in ("linear", "matmul", "softmax", "layer_norm_rows"):
        assert made.get(op), made


def test_a_node_plan_over_warm_library_plans_replays_compiled(dev, monkeypatch):
    """A node traced after its library calls have plans of their own sees their replays:
    each launch's executable is recorded, so on the CPU the node's plan is one compiled
    replay too (it was the generic per-launch loop, which made the node plan no faster)."""
    from dl.autograd import overwrites, tape
    rng = np.random.default_rng(6)
    x = dl.tensor(rng.standard_normal((4, 3, 8, 8)).astype(np.float32), device=dev)
    conv = nn.Conv2d(3, 4, 3, padding=1).to(dev)
    lin = nn.Linear(4 * 4 * 4, 5).to(dev)

    def step():
        for p in (*conv.parameters(), *lin.parameters()):
            p.grad = None
        lin(F.max_pool2d(conv(x), 2).flatten(1)).square().sum().backward()

    plain = lambda n, g: n.backward(g)  # noqa: E731
    with monkeypatch.context() as m:  # the library calls' plans first
        m.setattr(tape, "planned", plain)
        m.setattr(overwrites, "planned", plain)
        for _ in range(STEPS):
            step()
    for _ in range(STEPS):
        step()
    mine = [v for k, v in plan._plans.items()
            if _mine(k) and v.__class__ is plan.Plan]
    assert len(mine) == 3, _backward_plans()
    if dev == "cpu":
        assert all(v.fast is not None for v in mine)


def test_a_gradient_that_is_a_view_is_copied_whole(dev):
    """What a replay gives back is a whole contiguous buffer of the gradient's shape: a
    gradient that is a view (an offset slice, a transpose) is copied in the call, a whole
    one is kept as it is."""
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = dl.tensor(a, device=dev)
    assert planned._whole(t) is t
    for view, want in ((t[1:], a[1:]), (t.T, a.T)):
        w = planned._whole(view)
        assert w._buf is not t._buf and w.offset == 0 and w.is_contiguous()
        assert w._buf.size == want.size
        np.testing.assert_array_equal(w.numpy(), want)

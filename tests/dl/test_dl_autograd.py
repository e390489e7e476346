"""The tape: accumulation, no_grad, custom Functions, registry extension, errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from dl_helpers import close, rand_np
from op_table.core import SHADER_MATH

import dl


def test_reuse_accumulates_and_0d_broadcast(dev):
    a = rand_np((3, 2), 1)
    x = dl.tensor(a, device=dev, requires_grad=True)
    s = dl.tensor(1.5, device=dev, requires_grad=True)
    tx, ts = torch.tensor(a, requires_grad=True), torch.tensor(1.5, requires_grad=True)
    y = (x * x * s + x.exp() * s)
    ty = (tx * tx * ts + tx.exp() * ts)
    y.backward(dl.ones_like(y))
    ty.backward(torch.ones_like(ty))
    close(x.grad, tx.grad)
    close(s.grad, ts.grad, rtol=1e-5)
    assert s.grad.shape == ()


def test_grads_accumulate_across_backward_calls():
    x = dl.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).backward(dl.ones(2))
    (x * 3).backward(dl.ones(2))
    assert x.grad.tolist() == [6.0, 6.0]


def test_backward_frees_the_graph_unless_retained():
    """As PyTorch: a second backward through a freed graph raises; retain_graph keeps it.
    Freeing drops the closures, so the forward's outputs go with their last reference
    (before, a linear layer's output, held by its own GradFn's closure for the relu's
    derivative, waited for the cycle collector)."""
    import gc
    import weakref
    a = rand_np((4, 3), 2)
    lin, ref = dl.nn.Linear(3, 5, act="relu"), torch.nn.Linear(3, 5)
    lin.load_state_dict({k: dl.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    x, tx = dl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y = lin(x)
    loss = (y * y).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    tloss = (ref(tx).relu() ** 2).sum()
    tloss.backward(retain_graph=True)
    tloss.backward()
    close(x.grad, tx.grad)
    close(lin.weight.grad, ref.weight.grad)
    with pytest.raises(RuntimeError, match="second time.*retain_graph=True"):
        loss.backward()
    buf = weakref.ref(y._buf)
    gc.disable()
    try:
        del y, loss
        assert buf() is None
    finally:
        gc.enable()


def test_empty_tensor_grad():
    x = dl.zeros(0, 3, requires_grad=True)
    b = dl.ones(3, requires_grad=True)
    y = x * b
    y.backward(dl.ones(0, 3))
    assert x.grad.shape == (0, 3) and b.grad.tolist() == [0.0, 0.0, 0.0]


def test_no_grad_and_detach():
    x = dl.ones(2, requires_grad=True)
    with dl.no_grad():
        y = x * 2
    assert not y.requires_grad and y._grad_fn is None
    assert not x.detach().requires_grad
    z = x * 2
    assert z.requires_grad and not z.is_leaf
    with pytest.raises(RuntimeError, match="one-element"):
        z.backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.backward(dl.ones(2))
    with pytest.raises(RuntimeError, match="requires grad"):
        x[0] = 3.0


class Cube(dl.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x


def test_custom_function_and_registry_extension():
    a = rand_np((4,), 2)
    x = dl.tensor(a, requires_grad=True)
    y = Cube.apply(x)
    y.backward(dl.ones(4))
    close(x.grad, torch.tensor(3 * a * a))
    dl.ops.register("cube3")(lambda t: Cube.apply(t))
    try:
        dl.ops.add_method("cube3")
        np.testing.assert_allclose(dl.tensor(a).cube3().numpy(), a ** 3, rtol=1e-6)
    finally:  # the extension must not outlive the test (it has no docstring, say)
        dl.ops.OPS.pop("cube3", None)
        if "cube3" in vars(dl.Tensor):
            delattr(dl.Tensor, "cube3")


def test_torch_idioms_data_detach_retain_grad_grad_fn(dev):
    """What torch code writes around autograd, run the same on both: `p.data` (read,
    in-place through it, assigned), `t.detach_()`, `t.retain_grad()` on a tensor made by
    ops (its gradient kept at each backward, accumulated), `t.grad_fn`."""
    a, b = rand_np((4, 3), 30), rand_np((4, 3), 31)
    for m in (dl, torch):
        x = m.tensor(a, requires_grad=True) if m is torch else \
            dl.tensor(a, device=dev, requires_grad=True)
        y = x * 2.0
        assert y.grad_fn is not None and x.grad_fn is None
        y.retain_grad()
        assert y.retains_grad and not x.retains_grad
        for _ in range(2):
            (y * y).sum().backward(retain_graph=True)
        z = (x * 3.0).detach_()
        assert not z.requires_grad and z.grad_fn is None
        d = x.data
        assert not d.requires_grad
        d.mul_(0.5)  # through .data: x's values, no history
        x.data = x.data + 1.0
        lazy = x.detach() * 2.0  # (a lazy value in dl: .data computes it, then writes)
        lazy.data.add_(1.0)
        if m is torch:
            ty, tx, tz, tl = y.grad, x, z, lazy
        else:
            oy, ox, oz, ol = y.grad, x, z, lazy
    close(oy, ty)  # 2 * (2 y) accumulated over the two backward calls
    close(ox.detach(), tx.detach())
    close(oz, tz)
    close(ol, tl)
    assert ox.requires_grad
    ox.data = dl.tensor(b.astype(np.float64), device=dev)  # another dtype: as torch's
    tx.data = torch.tensor(b.astype(np.float64))
    assert ox.dtype is dl.float64 and tx.dtype is torch.float64 and ox.requires_grad
    close(ox.detach(), tx.detach())
    with pytest.raises(TypeError, match="takes a tensor"):
        ox.data = b  # an array, not a tensor
    with pytest.raises(RuntimeError, match="does not require grad"):
        dl.tensor(a, device=dev).retain_grad()  # as torch's


def test_module_apply_visits_children_before_parents():
    """`model.apply(fn)` as torch's: every module, children first, then the model; the
    usual use, initialising every Linear."""
    import dl.nn as nn
    seen, tseen = [], []
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 2)))
    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(),
                                 torch.nn.Sequential(torch.nn.Linear(4, 2)))
    assert model.apply(lambda mod: seen.append(type(mod).__name__)) is model
    tmodel.apply(lambda mod: tseen.append(type(mod).__name__))
    assert seen == tseen

    def init(mod):
        if isinstance(mod, nn.Linear):
            nn.init.zeros_(mod.weight)
    model.apply(init)
    assert all(float(p.abs().sum()) == 0 for n, p in model.named_parameters() if "weight" in n)


def test_data_assigned_to_an_indexed_view_leaves_its_base(dev):
    """`v = h[0]; v.data = t`: v no longer views h, so an in-place op on v under autograd
    writes v's new storage, not h's row (dl wrote through the indexing base, as for a
    view)."""
    outs = []
    for m in (dl, torch):
        ones, fives = np.ones((2, 3), np.float32), np.full(3, 5.0, np.float32)
        w = dl.tensor(ones, device=dev, requires_grad=True) if m is dl else \
            torch.tensor(ones, requires_grad=True)
        h = w * 2.0
        v = h[0]
        v.data = dl.tensor(fives, device=dev) if m is dl else torch.tensor(fives)
        v.mul_(3.0)
        outs.append((h.detach().numpy(), v.detach().numpy()))
    for ours, theirs in zip(*outs, strict=True):
        np.testing.assert_allclose(ours, theirs)


@pytest.mark.parametrize("form", ["relu", "linear_act_relu", "linear_then_relu_module"])
def test_relu_gradient_of_a_non_finite_upstream_gradient_is_torchs(dev, form):
    """ReLU's gradient is g where the output is positive and 0 elsewhere (torch's
    threshold_backward), even where g is inf or nan: F.linear(..., act="relu") multiplied g
    by the mask, so an inf or nan g gave nan where torch gives 0, and the matmul after it
    spread the nan over the whole input gradient."""
    x = np.array([[-1.0, 0.0, 2.0, -3.0], [0.5, -0.5, 1.5, 4.0]], np.float32)
    w = np.eye(4, dtype=np.float32)[:3] + 0.25
    g = np.array([[np.inf, np.nan, 1.0], [-np.inf, 2.0, np.nan]], np.float32)
    tx, tw = (torch.tensor(a.astype(np.float64), requires_grad=True) for a in (x, w))
    dx, dw = (dl.tensor(a, device=dev, requires_grad=True) for a in (x, w))
    if form == "relu":
        ty, dy = torch.relu(tx[:, :3]), dl.nn.functional.relu(dx[:, :3])
    elif form == "linear_act_relu":
        ty, dy = torch.relu(tx @ tw.T), dl.nn.functional.linear(dx, dw, act="relu")
    else:
        ty = torch.relu(tx @ tw.T)
        dy = dl.nn.ReLU()(dl.nn.functional.linear(dx, dw))
    ty.backward(torch.tensor(g.astype(np.float64)))
    dy.backward(dl.tensor(g, device=dev))
    for got, want in ((dx.grad, tx.grad), (dw.grad, tw.grad)):
        if want is None:
            continue
        got, want = got.numpy().astype(np.float64), want.numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kw", [dict(scale_factor=2, mode="nearest"),
                                dict(size=(5, 7), mode="bilinear"),
                                dict(size=(3, 2), mode="bilinear", align_corners=True),
                                dict(scale_factor=0.5, mode="nearest")], ids=str)
def test_interpolate_gradient_of_a_non_finite_upstream_gradient_is_torchs(dev, kw):
    """An inf or nan in the upstream gradient reaches only the inputs its output reads, as
    torch's scatter: the gather kernel multiplied every output of its window by a weight,
    0 for the outputs that read another input, so it spread nan over the window."""
    if dev in SHADER_MATH and kw.get("align_corners"):
        pytest.skip(f"{dev}: an inf gradient times a weight of exactly 0 (nan in torch) is "
                    "arithmetic WGSL lets the compiler fold assuming finite floats")
    x = np.random.default_rng(3).standard_normal((1, 2, 4, 6)).astype(np.float32)
    tx = torch.tensor(x.astype(np.float64), requires_grad=True)
    dx = dl.tensor(x, device=dev, requires_grad=True)
    ty = torch.nn.functional.interpolate(tx, **kw)
    g = np.ones(tuple(ty.shape), np.float32)
    g.reshape(-1)[1], g.reshape(-1)[-2] = np.inf, np.nan
    ty.backward(torch.tensor(g.astype(np.float64)))
    dl.nn.functional.interpolate(dx, **kw).backward(dl.tensor(g, device=dev))
    got, want = dx.grad.numpy().astype(np.float64), tx.grad.numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_set_grad_enabled_sets_and_restores_as_torch():
    """Called alone it sets the mode; as a with-block or a decorator it restores the mode it
    found (it was a plain function: `with dl.set_grad_enabled(False):` raised)."""
    from dl.autograd import is_grad_enabled
    x = dl.tensor([1.0], requires_grad=True)
    with dl.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert is_grad_enabled() and (x * 2).requires_grad

    @dl.set_grad_enabled(False)
    def doubled():
        return x * 2
    assert is_grad_enabled()  # decorating does not switch it
    assert not doubled().requires_grad and is_grad_enabled()
    dl.set_grad_enabled(False)
    try:
        assert not is_grad_enabled() and not (x * 2).requires_grad
        with dl.set_grad_enabled(True):
            assert (x * 2).requires_grad
        assert not is_grad_enabled()
    finally:
        dl.set_grad_enabled(True)
    with torch.set_grad_enabled(False):  # the behaviour copied
        assert not torch.is_grad_enabled()
    assert torch.is_grad_enabled()


@pytest.mark.parametrize("op", ["interpolate", "matmul", "layer_norm", "conv2d"])
def test_backward_casts_the_given_gradient_to_the_outputs_dtype(op):
    """backward(g) with a float32 g into a float64 graph: g is cast first, as PyTorch's
    (every gradient below was float32 values labelled float64, or a launch error)."""
    fns = {"interpolate": lambda m, z: m.nn.functional.interpolate(z, size=(3, 5),
                                                                    mode="bilinear"),
           "matmul": lambda m, z: z.reshape(4, 6) @ z.reshape(6, 4),
           "layer_norm": lambda m, z: m.nn.functional.layer_norm(z, (3, 2)),
           "conv2d": lambda m, z: m.nn.functional.conv2d(z, z[:, :, :2, :2] * 1.0)}
    a = np.random.default_rng(3).standard_normal((2, 2, 3, 2))
    z, tz = dl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = fns[op](dl, z), fns[op](torch, tz)
    g = np.random.default_rng(4).standard_normal(ty.shape).astype(np.float32)
    y.backward(dl.tensor(g))
    ty.backward(torch.tensor(g))
    assert z.grad.dtype is dl.float64 and z.grad.numpy().dtype == np.float64
    np.testing.assert_allclose(z.grad.numpy(), tz.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_backward_refuses_a_gradient_of_another_shape_or_kind():
    x = dl.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="shape"):
        (x * 2).backward(dl.ones(3))
    with pytest.raises(TypeError, match="tensor"):
        (x * 2).backward(2.0)


def _grads_program(m, a, b, seed):
    """Gradient bookkeeping a torch user relies on, as the same program for dl and torch:
    returns every value the program can observe afterwards."""
    x = m.tensor(a, requires_grad=True)
    y = m.tensor(b, requires_grad=True)
    (x + y).sum().backward()  # one gradient tensor reaches both leaves
    x.grad.mul_(5)  # in place on x's gradient only
    seen = [x.grad.numpy().copy(), y.grad.numpy().copy(), x.grad is y.grad]
    w = m.tensor(a, requires_grad=True)
    w.sum().backward()  # the seed's expanded view
    kept = w.grad
    (w * w).sum().backward()  # accumulates into the same tensor
    seen += [kept is w.grad, kept.numpy().copy()]
    kept.add_(1)  # an in-place op on an accumulated gradient
    seen.append(w.grad.numpy().copy())
    s = m.tensor(seed)
    v = m.tensor(a, requires_grad=True)
    v.backward(s)  # a leaf given the caller's gradient: a copy
    s.mul_(0)
    seen += [v.grad.numpy().copy(), v.grad is s]
    u = m.tensor(a, requires_grad=True)
    z = u.clone()
    z.retain_grad()
    z.backward(m.tensor(seed))
    u.grad.mul_(3)  # the retained gradient of z is its own copy
    seen += [z.grad.numpy().copy(), u.grad.numpy().copy()]
    return seen


def test_leaf_gradients_are_accumulated_in_place_into_storage_of_their_own(dev):
    """As torch's AccumulateGrad: `p.grad` is dense storage of its own (two leaves fed by
    one tensor got one shared object, and `w.sum().backward()` gave an expanded view that
    refused `w.grad.mul_()`), a second backward adds into the same tensor (a reference to
    p.grad saw stale values), and the caller's gradient is copied, not adopted."""
    rng = np.random.default_rng(11)
    a, b, seed = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(3))
    prev = dl.get_default_device()
    dl.set_default_device(dev)
    try:
        ours = _grads_program(dl, a, b, seed)
    finally:
        dl.set_default_device(prev)
    ref = _grads_program(torch, a, b, seed)
    assert len(ours) == len(ref)
    for o, r in zip(ours, ref, strict=True):
        if isinstance(r, bool):
            assert o is r
        else:
            np.testing.assert_allclose(o, r, rtol=1e-6, atol=1e-6)


def test_zero_grad_keeping_tensors_zeroes_the_gradient_a_reference_holds(dev):
    """`zero_grad(set_to_none=False)` and gradient accumulation over two micro-batches, as
    torch: the gradient tensor taken before is the one zeroed and summed into."""
    rng = np.random.default_rng(12)
    a, x1, x2 = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(3))
    out = []
    for m, kw in ((dl, {"device": dev}), (torch, {})):
        w = m.tensor(a, requires_grad=True, **kw)
        opt = m.optim.SGD([w], lr=0.1)
        (w @ m.tensor(x1, **kw)).sum().backward()
        g = w.grad
        opt.zero_grad(set_to_none=False)
        for x in (x1, x2):
            (w @ m.tensor(x, **kw)).tanh().sum().backward()
        out.append((g is w.grad, g.numpy().copy()))
    assert out[0][0] is out[1][0] is True
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-5, atol=1e-6)


def test_data_assignment_keeps_lazy_readers_values(dev):
    """`y = p * 2; p.data = v`: y keeps p's old values, as torch's eager y (dl's lazy y read
    p's storage through p when computed, so it took v's values)."""
    a = np.arange(3, dtype=np.float32)
    out = []
    for m, kw in ((dl, {"device": dev}), (torch, {})):
        p = m.tensor(a, **kw)
        y = p * 2
        p.data = m.tensor(a + 10, **kw)
        out.append((y.numpy().copy(), p.numpy().copy()))
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])

"""softmax, log_softmax, layer_norm, batch_norm, conv2d, pools, embedding and losses on the
kernel library, against PyTorch autograd."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from dl_helpers import close, rand_np

import dl
from dl import nn
from dl.nn import functional as F


def _check(fn, tfn, *arrays, rtol=1e-4, atol=1e-5, ints=()):
    xs = [dl.tensor(a, requires_grad=True) for a in arrays] + [dl.tensor(i) for i in ints]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays] + \
        [torch.tensor(i).long() for i in ints]
    y, ty = fn(*xs), tfn(*ts)
    close(y, ty, rtol=rtol, atol=atol)
    w = rand_np(ty.shape, 9)
    (y * dl.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    for x, t in zip(xs[:len(arrays)], ts):
        close(x.grad, t.grad, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dim", [-1, 0, 1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax(dim, log):
    f, tf = (F.log_softmax, TF.log_softmax) if log else (F.softmax, TF.softmax)
    _check(lambda x: f(x, dim), lambda x: tf(x, dim), rand_np((3, 5, 8), 1, low=-4, high=4))
    # a lazy input and a transposed view
    _check(lambda x: f((x * 2).transpose(0, 2), dim), lambda x: tf((x * 2).transpose(0, 2), dim),
           rand_np((3, 5, 8), 2))


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(affine):
    x = rand_np((2, 3, 4, 6), 1)
    if affine:
        w, b = rand_np((4, 6), 2), rand_np((4, 6), 3)
        _check(lambda x, w, b: F.layer_norm(x, (4, 6), w, b),
               lambda x, w, b: TF.layer_norm(x, (4, 6), w, b), x, w, b)
    else:
        _check(lambda x: F.layer_norm(x, 6), lambda x: TF.layer_norm(x, (6,)), x)


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_gradients_on_every_runtime(dev, affine):
    """The backward row kernel (gx and xhat in one pass per row; gw, gb column sums) against
    torch: rows of 64 (lines) and a lazy upstream gradient."""
    x, w, b = rand_np((3, 5, 64), 71), rand_np((64,), 72), rand_np((64,), 73)
    g = rand_np((3, 5, 64), 74)
    ox = dl.tensor(x, device=dev, requires_grad=True)
    ow = dl.tensor(w, device=dev, requires_grad=True)
    ob = dl.tensor(b, device=dev, requires_grad=True)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    y = F.layer_norm(ox, 64, ow if affine else None, ob if affine else None)
    ty = TF.layer_norm(tx, (64,), tw if affine else None, tb if affine else None)
    close(y, ty, rtol=1e-4, atol=1e-5)
    (y.tanh() * dl.tensor(g, device=dev)).sum().backward()
    (ty.tanh() * torch.tensor(g)).sum().backward()
    close(ox.grad, tx.grad, rtol=1e-4, atol=1e-5)
    if affine:
        close(ow.grad, tw.grad, rtol=1e-4, atol=1e-5)
        close(ob.grad, tb.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm(training):
    x, w, b = rand_np((4, 3, 5, 5), 1), rand_np((3,), 2), rand_np((3,), 3)
    rm, rv = rand_np((3,), 4), rand_np((3,), 5, low=0.5, high=2)
    ours = [dl.tensor(rm), dl.tensor(rv)]
    ref = [torch.tensor(rm), torch.tensor(rv)]
    _check(lambda x, w, b: F.batch_norm(x, *ours, w, b, training, 0.2),
           lambda x, w, b: TF.batch_norm(x, *ref, w, b, training, 0.2), x, w, b)
    close(ours[0], ref[0], atol=1e-6)
    close(ours[1], ref[1], atol=1e-6)


@pytest.mark.parametrize("case", ["spatial_lines", "2d", "plain", "permuted_input", "graph"])
def test_batch_norm_training_on_every_runtime(dev, case, monkeypatch):
    """The library's per-channel kernels (statistics and running statistics in one launch,
    gradient sums in one), on every runtime, against torch; `graph` forces the composed
    fallback that other dtypes take."""
    if case == "graph":
        from dl.ops import batch_norm as bn_op
        monkeypatch.setattr(bn_op, "supported", lambda *a: False)
    shape = {"2d": (6, 5), "plain": (3, 4, 5, 3)}.get(case, (4, 3, 8, 8))
    c = shape[1]
    x, w, b = rand_np(shape, 31), rand_np((c,), 32), rand_np((c,), 33)
    rm, rv = rand_np((c,), 34), rand_np((c,), 35, low=0.5, high=2)
    g = rand_np(shape, 36)
    xs = [dl.tensor(a, device=dev, requires_grad=True) for a in (x, w, b)]
    ts = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    ours = [dl.tensor(rm, device=dev), dl.tensor(rv, device=dev)]
    ref = [torch.tensor(rm), torch.tensor(rv)]
    affine = case != "plain"
    xin = xs[0]
    if case == "permuted_input":  # a channels-last view: copied to (N, C, S) first
        xin = (xs[0].permute(0, 2, 3, 1) * 1.0).permute(0, 3, 1, 2)
    y = F.batch_norm(xin, *ours, xs[1] if affine else None, xs[2] if affine else None,
                     True, 0.3)
    ty = TF.batch_norm(ts[0], *ref, ts[1] if affine else None, ts[2] if affine else None,
                       True, 0.3)
    close(y, ty, rtol=1e-4, atol=1e-5)
    close(ours[0], ref[0], atol=1e-6)
    close(ours[1], ref[1], atol=1e-5)
    (y.relu() * dl.tensor(g, device=dev)).sum().backward()
    (ty.relu() * torch.tensor(g)).sum().backward()
    close(xs[0].grad, ts[0].grad, rtol=1e-4, atol=1e-5)
    if affine:
        close(xs[1].grad, ts[1].grad, rtol=1e-4, atol=1e-5)
        close(xs[2].grad, ts[2].grad, rtol=1e-4, atol=1e-5)


def test_batch_norm_training_on_one_value_per_channel_raises_as_torch():
    """PyTorch raises ValueError (a variance of one value is 0 / 0); we returned zeros."""
    x = rand_np((1, 3, 1, 1), 1)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        TF.batch_norm(torch.tensor(x), None, None, training=True)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm2d(3)(dl.tensor(x))
    m = nn.BatchNorm2d(3)
    m.eval()  # running statistics: one value is fine
    assert m(dl.tensor(x)).shape == (1, 3, 1, 1)


def test_batch_norm_weight_views_and_wrong_sizes(dev):
    """Weight and bias given as views (every other element of a longer vector, an offset
    slice) read the right elements in training and their gradients reach the vectors;
    a weight of the wrong size is an error, not a read past its end."""
    x = rand_np((4, 3, 8, 8), 51)
    wl, bl = rand_np((7,), 52), rand_np((5,), 53)
    xd = dl.tensor(x, device=dev, requires_grad=True)
    wd, bd = dl.tensor(wl, device=dev, requires_grad=True), dl.tensor(bl, device=dev,
                                                                     requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    wt, bt = torch.tensor(wl, requires_grad=True), torch.tensor(bl, requires_grad=True)
    y = F.batch_norm(xd, None, None, wd[1::2][:3], bd[2:], True)
    ty = TF.batch_norm(xt, None, None, wt[1::2][:3], bt[2:], True)
    close(y, ty, rtol=1e-4, atol=1e-5)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    close(wd.grad, wt.grad, rtol=1e-4, atol=1e-4)
    close(bd.grad, bt.grad, rtol=1e-4, atol=1e-4)
    with pytest.raises((ValueError, RuntimeError)):
        F.batch_norm(dl.tensor(x, device=dev), None, None, dl.ones(2, device=dev), None,
                     True).numpy()


def test_batch_norm_training_launches(dev):
    """Forward: the statistics kernel and one fused normalise(+ReLU) kernel; backward: the
    gradient sums and one fused kernel for the input's gradient (+ the ReLU mask)."""
    x = dl.tensor(rand_np((4, 3, 8, 8), 41), device=dev, requires_grad=True)
    w = dl.tensor(rand_np((3,), 42), device=dev, requires_grad=True)
    b = dl.tensor(rand_np((3,), 43), device=dev, requires_grad=True)
    rm, rv = dl.zeros(3, device=dev)._materialise(), dl.ones(3, device=dev)._materialise()
    with dl.count_kernels() as fwd:
        y = F.batch_norm(x, rm, rv, w, b, True).relu()._materialise()
    assert fwd.launches == 2, fwd.names
    with dl.count_kernels() as bwd:
        y.backward(dl.ones(4, 3, 8, 8, device=dev))
    assert bwd.launches <= 4, bwd.names


CONV = [dict(), dict(stride=2, padding=1), dict(padding=2, dilation=2),
        dict(stride=(2, 1), padding=(0, 1)), dict(groups=2, padding=1)]


@pytest.mark.parametrize("cfg", CONV)
def test_conv2d(cfg):
    g = cfg.get("groups", 1)
    x, w, b = rand_np((2, 4, 7, 6), 1), rand_np((6, 4 // g, 3, 3), 2), rand_np((6,), 3)
    _check(lambda x, w, b: F.conv2d(x, w, b, **cfg), lambda x, w, b: TF.conv2d(x, w, b, **cfg),
           x, w, b, atol=1e-4)


def test_conv2d_fused_activation_without_grad():
    x, w, b = (dl.tensor(rand_np(s, i)) for i, s in enumerate([(1, 2, 5, 5), (3, 2, 3, 3),
                                                              (3,)]))
    with dl.no_grad(), dl.count_kernels() as c:
        y = F.conv2d(x, w, b, padding=1, act="relu").numpy()
    assert c.names == ["lib.conv2d"]
    want = torch.relu(TF.conv2d(*(torch.tensor(t.numpy()) for t in (x, w, b)), padding=1))
    close(y, want, atol=1e-5)


POOL = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
        dict(kernel_size=(3, 2), stride=1, padding=(1, 0))]


@pytest.mark.parametrize("cfg", POOL)
def test_pools(cfg):
    x = rand_np((2, 3, 7, 6), 1)
    x[0, 0, :2, :2] = 1.5  # a tie inside a window: the first position takes the gradient
    _check(lambda x: F.max_pool2d(x, **cfg), lambda x: TF.max_pool2d(x, **cfg), x)
    _check(lambda x: F.max_pool2d(x, **cfg, dilation=2) if cfg["kernel_size"] == 2 else
           F.avg_pool2d(x, **cfg, count_include_pad=False),
           lambda x: TF.max_pool2d(x, **cfg, dilation=2) if cfg["kernel_size"] == 2 else
           TF.avg_pool2d(x, **cfg, count_include_pad=False), x)
    _check(lambda x: F.avg_pool2d(x, **cfg), lambda x: TF.avg_pool2d(x, **cfg), x)


def test_pool_gradients_on_every_runtime(dev):
    """Compile-time pooling geometry on each runtime: max (with a tie) and avg pools with
    stride and padding, forward and gradient."""
    x = rand_np((2, 3, 7, 6), 61)
    x[1, 2, 2:4, 2:4] = 2.5
    g = rand_np((2, 3, 4, 3), 62)
    for f, tf in ((lambda t: F.max_pool2d(t, 3, 2, 1), lambda t: TF.max_pool2d(t, 3, 2, 1)),
                  (lambda t: F.avg_pool2d(t, 3, 2, 1, count_include_pad=False),
                   lambda t: TF.avg_pool2d(t, 3, 2, 1, count_include_pad=False))):
        ox = dl.tensor(x, device=dev, requires_grad=True)
        tx = torch.tensor(x, requires_grad=True)
        y, ty = f(ox), tf(tx)
        close(y, ty, atol=1e-6)
        (y * dl.tensor(g, device=dev)).sum().backward()
        (ty * torch.tensor(g)).sum().backward()
        close(ox.grad, tx.grad, atol=1e-6)


@pytest.mark.parametrize("shape, k", [((64, 16, 8, 8), 2), ((2, 3, 8, 64), 2),
                                      ((3, 5, 6, 6), 3), ((2, 4, 6, 96), (2, 3)),
                                      ((1, 8, 4, 4), 4)], ids=str)
def test_max_pools_whose_windows_tile_the_input(dev, shape, k):
    """Windows that tile a contiguous input exactly (kernel = stride, the CNNs' 2x2) take
    kernels over lines of outputs, a line within a row or over whole rows: the maxima, with
    ties, NaN and infinities, the indices' gradient (the first maximum, the last NaN) and
    the no-grad forward are torch's, in float32 and float64."""
    rng = np.random.default_rng(sum(shape))
    dts = [np.float32] + ([np.float64] if dl.tensor([1.0], device=dev).device.rt.features.f64
                          else [])
    for dt in dts:
        x = rng.standard_normal(shape).astype(dt)
        flat = x.reshape(-1)
        flat[rng.integers(0, flat.size, 40)] = 0.5  # ties inside windows
        flat[rng.integers(0, flat.size, 6)] = np.nan
        flat[rng.integers(0, flat.size, 4)] = [np.inf, -np.inf, np.inf, -np.inf]
        tx = torch.tensor(x, requires_grad=True)
        ty = TF.max_pool2d(tx, k)
        with dl.no_grad():
            y0 = F.max_pool2d(dl.tensor(x, device=dev), k)
        np.testing.assert_array_equal(y0.numpy(), ty.detach().numpy())
        ox = dl.tensor(x, device=dev, requires_grad=True)
        with dl.count_kernels() as c:
            y = F.max_pool2d(ox, k)
        if dev == "cpu":
            assert c.names[0] == "max_pool2d_tiles_lines", c.names
        np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
        g = rng.uniform(0.5, 1.5, tuple(ty.shape)).astype(dt)
        y.backward(dl.tensor(g, device=dev))
        ty.backward(torch.from_numpy(g))
        np.testing.assert_array_equal(ox.grad.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("geo", [(3, 2, 0), (3, 2, 1), ((2, 3), (2, 2), (1, 1))], ids=str)
def test_pool_modules_ceil_mode_in_torch_argument_order(geo):
    """nn.MaxPool2d / nn.AvgPool2d take PyTorch's positional arguments (MaxPool2d: dilation,
    return_indices, ceil_mode; AvgPool2d: ceil_mode, count_include_pad): forward and
    gradient with ceil_mode, where a last window is cut by the input's end."""
    x = rand_np((2, 3, 7, 8), 63)
    for args in ((1, False, True), (2, False, True)):
        _check(nn.MaxPool2d(*geo, *args), torch.nn.MaxPool2d(*geo, *args), x)
    for args in ((True,), (True, False), (False, False)):
        _check(nn.AvgPool2d(*geo, *args), torch.nn.AvgPool2d(*geo, *args), x)


def test_embedding():
    w = rand_np((10, 4), 1)
    idx = np.array([[1, 3, 3], [0, 9, 1]])
    _check(lambda w, i: F.embedding(i, w), lambda w, i: TF.embedding(i, w), w, ints=[idx])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_and_nll(reduction):
    x, t = rand_np((5, 7), 1, low=-3, high=3), np.array([0, 6, 3, 3, 1])
    _check(lambda x, t: F.cross_entropy(x, t, reduction=reduction),
           lambda x, t: TF.cross_entropy(x, t, reduction=reduction), x, ints=[t])
    _check(lambda x, t: F.cross_entropy(x, t, reduction=reduction, label_smoothing=0.1),
           lambda x, t: TF.cross_entropy(x, t, reduction=reduction, label_smoothing=0.1),
           x, ints=[t])
    p = np.abs(rand_np((5, 7), 2))
    p /= p.sum(1, keepdims=True)
    _check(lambda x, p: F.cross_entropy(x, p, reduction=reduction),
           lambda x, p: TF.cross_entropy(x, p, reduction=reduction), x, p)
    x3 = rand_np((2, 4, 3), 3)  # (N, C, d): the class dim is 1
    _check(lambda x, t: F.cross_entropy(x, t, reduction=reduction),
           lambda x, t: TF.cross_entropy(x, t, reduction=reduction), x3,
           ints=[np.array([[0, 3, 2], [1, 1, 0]])])
    _check(lambda x, y: F.mse_loss(x, y, reduction),
           lambda x, y: TF.mse_loss(x, y, reduction=reduction), x, rand_np((5, 7), 4))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case", ["plain", "transposed_int32", "large_logits"])
def test_cross_entropy_kernels_on_every_runtime(dev, reduction, case):
    """The two-kernel cross-entropy (per-row loss + log-sum-exp; softmax - onehot backward)
    against torch, for strided logits, int32 targets and logits far from zero."""
    x = rand_np((9, 13), 51, low=-3, high=3)
    t = np.random.default_rng(52).integers(0, 13, 9)
    if case == "large_logits":
        x = x + 80.0  # exp would overflow without the row max
    tx = torch.tensor(x, requires_grad=True)
    ox = dl.tensor(x, device=dev, requires_grad=True)
    logits = ox
    if case == "transposed_int32":
        logits = dl.tensor(np.ascontiguousarray(x.T), device=dev, requires_grad=True)
        ox = logits
        logits = logits.t()
    tt = dl.tensor(t.astype(np.int32 if case == "transposed_int32" else np.int64),
                   device=dev)
    y = F.cross_entropy(logits, tt, reduction=reduction)
    ty = TF.cross_entropy(tx, torch.tensor(t), reduction=reduction)
    close(y, ty, rtol=1e-5, atol=1e-5)
    w = rand_np(ty.shape, 53)
    (y * dl.tensor(w, device=dev)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    got = ox.grad.numpy()
    close(got.T if case == "transposed_int32" else got, tx.grad, rtol=1e-5, atol=1e-6)


XENT_KWARGS = [{}, {"weight": True}, {"ignore_index": 3}, {"weight": True, "ignore_index": 3},
               {"label_smoothing": 0.2, "weight": True},
               {"label_smoothing": 0.1, "ignore_index": 3}]


@pytest.mark.parametrize("kw", XENT_KWARGS, ids=lambda k: "-".join(k) or "plain")
@pytest.mark.parametrize("shape", [(6, 5), (3, 5, 4)])
def test_cross_entropy_and_nll_weights_and_ignored_targets(dev, kw, shape):
    """weight, ignore_index (-100 by default: a target there counts for nothing) and label
    smoothing, alone and together, are torch's in value and gradient for every reduction;
    nll_loss too. (Before, dl had neither weight nor ignore_index, and a -100 target read
    outside the logits: a finite, wrong loss.)"""
    rng = np.random.default_rng(len(shape) * 10 + len(kw))
    x = rng.standard_normal(shape).astype(np.float32)
    tshape = shape[:1] + shape[2:]
    t = rng.integers(0, 5, tshape)
    t.flat[0] = t.flat[-1] = kw.get("ignore_index", -100)
    w = (rng.random(5) + 0.2).astype(np.float32)
    idt = np.int64 if dl.tensor([1], device=dev).device.rt.features.int64 else np.int32
    ot, tt = dl.tensor(t.astype(idt), device=dev), torch.tensor(t)
    k1 = {k: dl.tensor(w, device=dev) if k == "weight" else v for k, v in kw.items()}
    k2 = {k: torch.tensor(w) if k == "weight" else v for k, v in kw.items()}
    for reduction in ("mean", "sum", "none"):
        fns = [(F.cross_entropy, TF.cross_entropy, x)]
        if "label_smoothing" not in kw:
            lp = np.log(np.exp(x) / np.exp(x).sum(1, keepdims=True)).astype(np.float32)
            fns.append((F.nll_loss, TF.nll_loss, lp))
        for ours, ref, inp in fns:
            ox = dl.tensor(inp, device=dev, requires_grad=True)
            tx = torch.tensor(inp, requires_grad=True)
            y, ty = ours(ox, ot, reduction=reduction, **k1), ref(tx, tt, reduction=reduction, **k2)
            close(y, ty, rtol=1e-5, atol=1e-6)
            g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
            (y * dl.tensor(g, device=dev)).sum().backward()
            (ty * torch.tensor(g)).sum().backward()
            close(ox.grad, tx.grad, rtol=1e-4, atol=1e-6)


def test_class_targets_out_of_range_and_every_target_ignored(dev):
    """A target outside [0, C) that is not ignore_index is an IndexError naming it (before:
    a loss read from outside the row), in both kernels' paths and in nll_loss; gather and
    index_select check their indices too. A mean over no kept target is nan with zero
    gradients, as torch's."""
    x = dl.tensor(rand_np((3, 5), 60), device=dev, requires_grad=True)
    for t in ([1, 5, 2], [1, -1, 2], [0, -100, 7]):
        for call in (lambda t: F.cross_entropy(x, dl.tensor(t, device=dev)),
                     lambda t: F.cross_entropy(x, dl.tensor(t, device=dev), label_smoothing=0.1),
                     lambda t: F.nll_loss(x, dl.tensor(t, device=dev))):
            with pytest.raises(IndexError, match="out of bounds"):
                call(t)
    with pytest.raises(IndexError, match="gather: index 5 is out of bounds"):
        dl.gather(x, 1, dl.tensor([[3]], device=dev) + 2)
    with pytest.raises(IndexError, match="index_select: index -1 is out of bounds"):
        dl.index_select(x, 0, dl.tensor([0, -1], device=dev))
    with pytest.raises(TypeError, match="reduction='sum'"):
        F.cross_entropy(x, dl.tensor([1, 2, 3], device=dev), "sum")
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    for ours, ref in ((F.cross_entropy, TF.cross_entropy), (F.nll_loss, TF.nll_loss)):
        x.grad = tx.grad = None
        y = ours(x, dl.tensor([-100, -100, -100], device=dev))
        ty = ref(tx, torch.tensor([-100, -100, -100]))
        y.backward()
        ty.backward()
        assert np.isnan(y.item()) and np.isnan(ty.item())
        close(x.grad, tx.grad)


def test_cross_entropy_repeated_calls_follow_their_values(dev):
    """The loss's kernels replay through a dispatch plan once a shape repeats: each call's
    loss and gradient are still torch's for its own values, whether or not rows are ignored
    (the mean's divisor is computed on the device, not chosen on the host), a bad target
    still raises naming it, and an in-place write to the loss (its storage holds nothing the
    gradient reads) gives torch's gradient."""
    rng = np.random.default_rng(61)
    for step in range(8):
        for reduction in ("mean", "sum", "none"):
            x = rng.standard_normal((6, 5)).astype(np.float32)
            t = rng.integers(0, 5, 6)
            t[: step % 3] = -100  # none, one or two rows ignored
            ox = dl.tensor(x, device=dev, requires_grad=True)
            tx = torch.tensor(x, requires_grad=True)
            y = F.cross_entropy(ox, dl.tensor(t, device=dev), reduction=reduction)
            ty = TF.cross_entropy(tx, torch.tensor(t), reduction=reduction)
            close(y, ty, rtol=1e-5, atol=1e-6)
            if step % 2:
                y.mul_(3.0)
                ty.mul_(3.0)
            y.sum().backward()
            ty.sum().backward()
            close(ox.grad, tx.grad, rtol=1e-5, atol=1e-6)
        t[4] = 5 + step
        with pytest.raises(IndexError, match=f"target {5 + step} is out of bounds"):
            F.cross_entropy(ox, dl.tensor(t, device=dev))


def test_class_target_errors_name_the_loss():
    """A class target of the wrong shape or dtype is a ValueError/TypeError naming the loss
    that was called (cross_entropy's general path checked nothing of its own: a wrong shape
    surfaced as gather's error)."""
    x = dl.tensor(rand_np((3, 5), 63))
    for f, name in ((F.cross_entropy, "cross_entropy"), (F.nll_loss, "nll_loss")):
        for t in (dl.tensor([1, 2, 3, 4]), dl.tensor([[1], [2], [3]])):
            with pytest.raises(ValueError, match=f"{name}: target shape"):
                f(x, t)
        with pytest.raises(TypeError, match=f"{name}: target must hold class indices"):
            f(x, dl.tensor([True, False, True]))


def test_loss_modules_take_weight_and_ignore_index():
    w = rand_np((4,), 61, low=0.5, high=2.0)
    x, t = rand_np((5, 4), 62), np.array([0, 3, -100, 1, 3])
    for ours, ref in ((nn.CrossEntropyLoss(weight=dl.tensor(w), label_smoothing=0.1),
                       torch.nn.CrossEntropyLoss(weight=torch.tensor(w), label_smoothing=0.1)),
                      (nn.NLLLoss(dl.tensor(w), ignore_index=3, reduction="sum"),
                       torch.nn.NLLLoss(torch.tensor(w), ignore_index=3, reduction="sum"))):
        tt = np.where(t == -100, 3, t) if isinstance(ours, nn.NLLLoss) else t
        close(ours(dl.tensor(x), dl.tensor(tt)), ref(torch.tensor(x), torch.tensor(tt)),
              rtol=1e-5, atol=1e-6)
    for module in (nn.CrossEntropyLoss, nn.NLLLoss):
        with pytest.raises(TypeError, match="reduction='sum'"):
            module("sum")


def test_cross_entropy_launches(dev):
    x = dl.tensor(rand_np((64, 10), 54), device=dev, requires_grad=True)
    t = dl.tensor(np.arange(64) % 10, device=dev)
    with dl.count_kernels() as fwd:
        loss = F.cross_entropy(x, t)
    with dl.count_kernels() as bwd:
        loss.backward()
    assert fwd.launches == 2, fwd.names  # the rows kernel and the mean
    assert bwd.launches <= 2, bwd.names  # the gradient kernel (+ the root's ones)


def test_attention_causal():
    q, k, v = rand_np((2, 5, 4), 1), rand_np((2, 5, 4), 2), rand_np((2, 5, 4), 3)
    _check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
           lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v)


def test_attention_causal_with_a_mask_raises_as_torch():
    """is_causal takes no explicit mask besides (PyTorch raises; dl once dropped the causal
    mask silently); MultiheadAttention's is_causal with a mask is PyTorch's hint: the mask
    rules."""
    q, k, v = rand_np((1, 3, 8), 1), rand_np((1, 4, 8), 2), rand_np((1, 4, 8), 3)
    mask = np.ones((3, 4), bool)
    with pytest.raises(RuntimeError):
        TF.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)),
                                         attn_mask=torch.tensor(mask), is_causal=True)
    with pytest.raises(RuntimeError, match="is_causal"):
        F.scaled_dot_product_attention(*map(dl.tensor, (q, k, v)), attn_mask=dl.tensor(mask),
                                       is_causal=True)
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    ours = dl.nn.MultiheadAttention(8, 2, batch_first=True)
    ours.load_state_dict({n: dl.tensor(p.detach().numpy()) for n, p in ref.state_dict().items()})
    x = rand_np((2, 5, 8), 4)
    causal = np.triu(np.ones((5, 5), bool), 1)  # True: not allowed (MultiheadAttention's)
    want = ref(*[torch.tensor(x)] * 3, attn_mask=torch.tensor(causal), is_causal=True)[0]
    dx = dl.tensor(x)
    got = ours(dx, dx, dx, attn_mask=dl.tensor(causal), is_causal=True)[0]
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    # the hint without its mask raises in both (a key padding mask is not that mask: dl
    # once dropped the causal mask there, and applied it with no mask at all)
    pad = np.array([[False] * 4 + [True]] * 2)
    for kw in ({}, {"key_padding_mask": pad}):
        with pytest.raises(RuntimeError, match="is_causal"):
            ref(*[torch.tensor(x)] * 3, is_causal=True,
                **{k: torch.tensor(v) for k, v in kw.items()})
        with pytest.raises(RuntimeError, match="is_causal"):
            ours(dx, dx, dx, is_causal=True, **{k: dl.tensor(v) for k, v in kw.items()})
    layer = dl.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    with pytest.raises(RuntimeError, match="is_causal"):
        layer(dx, is_causal=True)


def test_nn_ops_on_every_runtime(dev):
    """One smoke per op family on each runtime: conv + pool + softmax + layer norm."""
    x, w = rand_np((2, 3, 6, 6), 1), rand_np((4, 3, 3, 3), 2)
    X, W = dl.tensor(x, device=dev, requires_grad=True), dl.tensor(w, device=dev,
                                                                   requires_grad=True)
    y = F.max_pool2d(F.conv2d(X, W, padding=1).relu(), 2)
    z = F.layer_norm(F.log_softmax(y.flatten(1), 1), 36)
    (z * z).sum().backward()
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = TF.max_pool2d(TF.conv2d(tx, tw, padding=1).relu(), 2)
    tz = TF.layer_norm(TF.log_softmax(ty.flatten(1), 1), (36,))
    (tz * tz).sum().backward()
    close(z, tz, rtol=1e-4, atol=1e-4)
    close(X.grad, tx.grad, rtol=1e-3, atol=1e-4)
    close(W.grad, tw.grad, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("grad", [False, True])
def test_pool_geometry_errors(grad):
    """Both max-pool paths (the library's forward, and the one kernel that also writes the
    argmax when a gradient is needed) reject a bad window with the same message."""
    x = dl.tensor(rand_np((1, 2, 5, 5), 81), requires_grad=grad)
    with pytest.raises(ValueError, match="padding <= kernel // 2"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(ValueError, match="window does not fit the 5x5 input"):
        F.max_pool2d(x, 7)

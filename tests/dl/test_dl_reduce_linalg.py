"""Reductions and matmul on the kernel library, against PyTorch (values and gradients), and
the fusion of elementwise producers into them."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from dl_helpers import close, rand_np, to_torch

import dl

RED = [("sum", {}), ("mean", {}), ("prod", {}), ("amax", {}), ("amin", {}), ("var", {}),
       ("std", {})]
DIMS = [None, 0, 1, -1, (0, 2), (1, 2), (0, 1, 2)]


def _grad_check(fn, tfn, *arrays, rtol=1e-5, atol=1e-5):
    xs = [dl.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    y, ty = fn(*xs), tfn(*ts)
    close(y, ty, rtol=rtol, atol=atol)
    w = rand_np(ty.shape, 9)
    (y * dl.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    for x, t in zip(xs, ts):
        close(x.grad, t.grad, rtol=rtol, atol=atol)


@pytest.mark.parametrize("op,kw", RED)
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions_match_torch(op, kw, dim, keepdim):
    a = rand_np((3, 4, 5), 1, low=0.5, high=1.5)

    def ref(t):
        if dim is None:
            return getattr(t, op)(**kw)
        if op == "prod" and isinstance(dim, tuple):  # torch's prod takes one dim
            for d in sorted(dim, reverse=True):
                t = t.prod(d, keepdim=keepdim) if keepdim else t.prod(d)
            return t
        return getattr(t, op)(dim=dim, keepdim=keepdim, **kw)

    def ours(t):
        if dim is None:
            return getattr(t, op)(**kw)
        return getattr(t, op)(dim=dim, keepdim=keepdim, **kw)

    # the library on a materialised input, and the fused path reading a lazy graph
    for prep in (lambda t: t, lambda t: t * 1.5):
        _grad_check(lambda x, p=prep: ours(p(x)), lambda x, p=prep: ref(p(x)), a, rtol=1e-4)


def test_reductions_of_views_and_ints():
    a = rand_np((4, 6, 5), 2)
    x, t = dl.tensor(a), torch.tensor(a)
    close(x[1:, ::2].transpose(0, 2).sum(1), t[1:, ::2].transpose(0, 2).sum(1), rtol=1e-5)
    close(x[:, 2:].mean((0, 2), keepdim=True), t[:, 2:].mean((0, 2), keepdim=True))
    i = rand_np((5, 7), 3, low=-50, high=50).astype(np.int32)
    xi, ti = dl.tensor(i), torch.tensor(i)
    for op in ("sum", "prod", "amax", "amin"):
        got, want = getattr(xi, op)(1), getattr(ti, op)(1)
        assert got.dtype == {torch.int64: dl.int64, torch.int32: dl.int32}[want.dtype]
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert dl.tensor([[True, False], [True, True]]).sum().item() == 3


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_with_indices_and_arg(op):
    a = rand_np((4, 7, 3), 4)
    a[1, 2, 0] = a[1, 5, 0] = 9.0  # a tie: the first index wins, as in PyTorch
    x, t = dl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    v, i = getattr(x, op)(1)
    tv, ti = getattr(t, op)(1)
    close(v, tv)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    assert i.dtype is dl.int64
    (v * 2).sum().backward()
    (tv * 2).sum().backward()
    close(x.grad, t.grad)
    arg = "arg" + op
    np.testing.assert_array_equal(getattr(x, arg)(2, keepdim=True).numpy(),
                                  getattr(t, arg)(2, keepdim=True).numpy())
    assert getattr(x, arg)().item() == getattr(t, arg)().item()
    close(getattr(x.detach(), op)(), getattr(t.detach(), op)())


def test_amax_gradient_is_shared_between_ties():
    a = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]], np.float32)
    _grad_check(lambda x: x.amax(1), lambda x: x.amax(1), a)
    _grad_check(lambda x: x.amax(), lambda x: x.amax(), a)


def test_empty_reductions():
    x = dl.zeros(0, 3)
    close(x.sum(0), torch.zeros(0, 3).sum(0))
    assert np.isnan(x.mean().item())
    with pytest.raises(RuntimeError, match="empty"):
        x.amax(0)


@pytest.mark.parametrize("shape,dim", [((0, 3), 1), ((3, 0), 0), ((2, 0, 3), (0, 2))])
def test_reductions_of_empty_tensors_over_nonempty_dims(dev, shape, dim):
    """An empty tensor reduced over dims that are not empty has an empty result, as torch's:
    max/min/amax/amin/any/all/logsumexp gave "of an empty dimension" (the tensor's size was
    checked, not the reduced dims')."""
    x, tx = dl.zeros(*shape, device=dev), torch.zeros(shape)
    one = dim if isinstance(dim, int) else dim[0]
    for f in (lambda m, t: m.amax(t, dim), lambda m, t: m.amin(t, dim, keepdim=True),
              lambda m, t: m.any(t, one), lambda m, t: m.all(t, one, keepdim=True),
              lambda m, t: m.logsumexp(t, dim), lambda m, t: m.max(t, one)[0],
              lambda m, t: m.min(t, one, keepdim=True)[1], lambda m, t: m.sum(t, dim)):
        got, want = f(dl, x), f(torch, tx)
        assert got.shape == tuple(want.shape)


def test_max_and_min_of_bools_are_bools(dev):
    """The max / min of bools is their or / and, a bool tensor, as torch's (before: int64)."""
    a = np.array([[True, False, False], [False, False, False]])
    x, tx = dl.tensor(a, device=dev), torch.tensor(a)
    for f in (lambda m, t: m.amax(t), lambda m, t: m.amin(t, 1), lambda m, t: t.max(),
              lambda m, t: t.min(), lambda m, t: m.amax(t, 0, keepdim=True),
              lambda m, t: m.max(t, 1)[0], lambda m, t: m.min(t, 0)[0]):
        got, want = f(dl, x), f(torch, tx)
        assert got.dtype is dl.bool_
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_sum_fuses_on_read_and_library_otherwise():
    a, b = dl.tensor(rand_np((64, 33), 5)), dl.tensor(rand_np((64, 33), 6))
    with dl.count_kernels() as c:
        loss = ((a - b) * (a - b)).mean()
        v = loss.item()
    assert c.launches == 1 and c.names[0].startswith("dl_fused_mean[")
    np.testing.assert_allclose(v, ((a.numpy() - b.numpy()) ** 2).mean(), rtol=1e-5)
    with dl.count_kernels() as c:
        a.sum(1).numpy()
    assert c.names == ["lib.reduce"]
    with dl.count_kernels() as c:  # var: a library mean, then one fused pass
        a.var(0).numpy()
    assert c.launches == 3, c.names  # mean, fused sum of squares, the scale


def test_broadcast_gradients_use_the_reduction():
    a, b = rand_np((4, 1, 5), 7), rand_np((3, 1), 8)
    _grad_check(lambda x, y: x * y + y, lambda x, y: x * y + y, a, b)


MM = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
      ((2, 1, 3, 4), (5, 4, 6)), ((2, 3, 4), (2, 4, 5))]


@pytest.mark.parametrize("sa,sb", MM)
def test_matmul_matches_torch(sa, sb):
    _grad_check(lambda x, y: x @ y, lambda x, y: x @ y, rand_np(sa, 1), rand_np(sb, 2),
                rtol=1e-5)


def test_linear_weight_shape_errors_name_the_weight():
    """F.linear with a weight of the wrong width names the weight's expected shape (it said
    "matmul" with the transposed weight, and a 1-D weight was an internal IndexError; a
    matching 1-D weight is torch's one-output linear, in the op table)."""
    x = dl.tensor(rand_np((2, 3, 5), 1))
    with pytest.raises(ValueError, match=r"linear: an input of shape \(2, 3, 5\) needs a "
                                         r"weight of shape \(out_features, 5\), got \(4, 6\)"):
        dl.nn.functional.linear(x, dl.tensor(rand_np((4, 6), 2)))
    with pytest.raises(ValueError, match=r"got \(4,\)"):
        dl.nn.functional.linear(x, dl.tensor(rand_np((4,), 3)))


def test_matmul_of_transposed_views_and_errors():
    a, b = rand_np((5, 3), 1), rand_np((4, 5), 2)
    _grad_check(lambda x, y: x.T @ y.T, lambda x, y: x.T @ y.T, a, b)
    with pytest.raises(ValueError, match="do not match"):
        dl.tensor(a) @ dl.tensor(a)
    with pytest.raises(TypeError, match="float"):
        dl.tensor([[1, 2]]) @ dl.tensor([[1], [2]])


def test_attention_scores_of_heads_permuted_out_of_a_projection(dev):
    """q @ k^T with q, k heads permuted out of one (b, s, 2, h, d) projection: k^T's batch
    dims do not merge into one, so the product copies it; values and gradients as torch's."""
    p = rand_np((2, 16, 2, 3, 8), 4)
    x = dl.tensor(p, device=dev, requires_grad=True)
    tx = torch.tensor(p, requires_grad=True)

    def f(t):
        q, k = t.permute(2, 0, 3, 1, 4)  # (b, h, s, d) each
        return (q * 0.5) @ k.transpose(-2, -1)

    y, ty = f(x), f(tx)
    close(y, ty, rtol=1e-5, atol=1e-5)
    g = rand_np(tuple(ty.shape), 5)
    y.backward(dl.tensor(g, device=dev))
    ty.backward(torch.tensor(g))
    close(x.grad, tx.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("act", ["none", "relu", "gelu", "tanh"])
def test_linear_epilogue_matches_torch_and_fuses(act):
    x, w, b = rand_np((2, 3, 6), 1), rand_np((4, 6), 2), rand_np((4,), 3)
    tact = {"none": lambda t: t, "relu": torch.relu,
            "gelu": torch.nn.functional.gelu, "tanh": torch.tanh}[act]
    _grad_check(lambda x, w, b: dl.linear(x, w, b, act=act),
                lambda x, w, b: tact(torch.nn.functional.linear(x, w, b)), x, w, b)
    with dl.no_grad(), dl.count_kernels() as c:
        dl.linear(dl.tensor(x), dl.tensor(w), dl.tensor(b), act=act).numpy()
    assert c.names == ["lib.matmul"]  # bias and activation in the matmul's epilogue


def test_reduce_and_matmul_on_every_runtime(dev):
    a, b = rand_np((6, 8), 1), rand_np((8, 4), 2)
    x = dl.tensor(a, device=dev, requires_grad=True)
    y = dl.tensor(b, device=dev)
    z = (x @ y).relu()
    s = z.sum(0) + (x * 2).amax(1).mean()
    s.sum().backward()
    tx = to_torch(dl.tensor(a), True)
    tz = (tx @ torch.tensor(b)).relu()
    ts = tz.sum(0) + (tx * 2).amax(1).mean()
    ts.sum().backward()
    close(s, ts, rtol=1e-5, atol=1e-5)
    close(x.grad, tx.grad, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(x.argmax(1).numpy(), tx.argmax(1).numpy())


def test_row_launch_of_broadcast_and_strided_reads(dev):
    """Graphs reading a bias or a transposed view with a long last dim launch in rows (x
    along the last dim); more rows than one grid dimension holds fold into z."""
    from dl.fusion.materialise import rows_cube_count
    x, b, r = rand_np((3, 5, 130), 1), rand_np((130,), 2), rand_np((130, 5, 3), 3)
    X, B, R = (dl.tensor(a, device=dev) for a in (x, b, r))
    with dl.count_kernels() as c:
        y = ((X + B).gelu() + R.permute(2, 1, 0)) * 0.5
        got = y.numpy()
    assert c.launches == 1
    want = (torch.nn.functional.gelu(torch.tensor(x + b)) + torch.tensor(r).permute(2, 1, 0))
    close(got, want * 0.5, rtol=1e-5, atol=1e-6)
    assert rows_cube_count((70000, 300)) == (2, 65535, 2)

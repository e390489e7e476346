"""Torch conveniences composed of existing ops (dl/ops/tensor_shortcuts.py,
tensor_factories.py, random_fills.py, random_sampling.py, dl/autograd/inference_mode.py).
Deterministic ones are compared with torch's results; random ones (which cannot match
torch's bit streams) are checked for their shapes, dtypes, ranges, determinism under
`dl.manual_seed` and loose statistics at a fixed seed."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import dl

X = np.arange(6, dtype=np.float32).reshape(2, 1, 3)


def _pair(a=X):
    return dl.tensor(a), torch.tensor(a)


def _same(d, t):
    assert tuple(d.shape) == tuple(t.shape)
    assert d.dtype.name == str(t.dtype).removeprefix("torch."), (d.dtype, t.dtype)
    np.testing.assert_array_equal(d.numpy(), t.numpy())


# ---- deterministic: compared with torch ---------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda x: x.new_zeros(2, 3), lambda x: x.new_zeros((4,)), lambda x: x.new_ones(3),
    lambda x: x.new_full((2, 2), 7), lambda x: x.new_tensor([1, 2, 3]),
    lambda x: x.new_tensor([[1.5]]), lambda x: x.new_zeros(2, dtype=x.new_ones(1).long().dtype),
    lambda x: x.view_as(x.new_zeros(3, 2)), lambda x: x.reshape_as(x.new_zeros(6)),
    lambda x: x.clip(1, 4), lambda x: x.clip(min=2),
])
def test_factories_and_views_match_torch(call):
    d, t = _pair()
    _same(call(d), call(t))
    _same(call(dl.tensor(X.astype(np.int64))), call(torch.tensor(X.astype(np.int64))))


def test_new_empty_and_requires_grad():
    d, t = _pair(X.astype(np.float64))
    e = d.new_empty(2, 5)
    assert e.shape == (2, 5) and e.dtype is dl.float64
    assert d.new_ones(2, requires_grad=True).requires_grad
    assert not d.new_zeros(2).requires_grad


@pytest.mark.parametrize("name,args", [("unsqueeze_", (0,)), ("unsqueeze_", (-1,)),
                                       ("squeeze_", ()), ("squeeze_", (1,)),
                                       ("squeeze_", (0,)), ("transpose_", (0, 2)),
                                       ("clip_", (1, 4)), ("clamp_", (2, 3))])
def test_inplace_views_match_torch(name, args):
    d, t = _pair()
    rd, rt = getattr(d, name)(*args), getattr(t, name)(*args)
    assert rd is d and rt is t
    _same(d, t)


def test_t_and_shape_inplace_keep_storage_and_gradient():
    d, t = _pair(X.reshape(2, 3))
    assert d.t_() is d
    _same(d, t.t_())
    base = dl.zeros(2, 3)
    v = base[0]
    v.unsqueeze_(0)
    v.fill_(5.0)  # still a view of base
    assert v.shape == (1, 3) and base.numpy()[0].tolist() == [5, 5, 5]
    for lib in (dl, torch):
        leaf = lib.ones(2, 1, requires_grad=True)
        y = leaf * 3
        assert y.squeeze_() is y and tuple(y.shape) == (2,)
        y.unsqueeze_(0).t_()
        (y * lib.tensor([[1.0], [2.0]])).sum().backward()
        assert leaf.grad.numpy().ravel().tolist() == [3.0, 6.0]
        with pytest.raises(RuntimeError, match="leaf"):
            leaf.unsqueeze_(0)


def test_counts_and_predicates_match_torch():
    d, t = _pair()
    i = dl.tensor([1, 2])
    assert d.nelement() == t.nelement() == dl.numel(d) == torch.numel(t) == 6
    assert d.ndimension() == t.ndimension() == 3
    assert d.is_floating_point() and dl.is_floating_point(d) and not i.is_floating_point()
    assert not dl.is_floating_point(i) and not torch.is_floating_point(torch.tensor([1]))
    assert dl.is_tensor(d) and not dl.is_tensor(X) and not dl.is_tensor(1.0)


@pytest.mark.parametrize("a,b", [([1.0, 2.0], [1.0, 2.0]), ([1.0, 2.0], [1.0, 3.0]),
                                 ([1.0, 2.0], [1.0, 2.0, 3.0]), ([[1.0, 2.0]], [1.0, 2.0]),
                                 ([1.0, float("nan")], [1.0, float("nan")]), ([], []),
                                 ([1, 2], [1.0, 2.0])])
def test_equal_matches_torch(a, b):
    assert dl.equal(dl.tensor(a), dl.tensor(b)) is torch.equal(torch.tensor(a), torch.tensor(b))
    assert dl.tensor(a).equal(dl.tensor(b)) is torch.equal(torch.tensor(a), torch.tensor(b))


def test_grad_modes():
    assert dl.is_grad_enabled()
    w = dl.ones(2, requires_grad=True)
    with dl.inference_mode():
        assert not dl.is_grad_enabled() and dl.is_inference_mode_enabled()
        assert not (w * 2).requires_grad
        with dl.inference_mode(False):
            assert not dl.is_grad_enabled()
    assert dl.is_grad_enabled() and not dl.is_inference_mode_enabled()

    @dl.inference_mode
    def bare():
        return (w * 2).requires_grad

    @dl.inference_mode()
    def called():
        return dl.is_grad_enabled()

    assert bare() is False and called() is False and dl.is_grad_enabled()
    with dl.no_grad():
        assert not dl.is_grad_enabled()


# ---- random: properties ------------------------------------------------------------------
N = 20000


def test_inplace_fills_statistics_and_identity():
    dl.manual_seed(0)
    x = dl.zeros(N)
    assert x.normal_(2.0, 3.0) is x
    v = x.numpy()
    assert abs(v.mean() - 2.0) < 0.1 and abs(v.std() - 3.0) < 0.1
    assert x.uniform_(-1.0, 3.0) is x
    v = x.numpy()
    assert v.min() >= -1.0 and v.max() < 3.0 and abs(v.mean() - 1.0) < 0.05
    assert abs(v.var() - 16 / 12) < 0.05
    assert x.exponential_(4.0) is x
    v = x.numpy()
    assert v.min() >= 0 and abs(v.mean() - 0.25) < 0.01
    assert x.bernoulli_(0.3) is x
    assert set(np.unique(x.numpy())) <= {0.0, 1.0} and abs(x.numpy().mean() - 0.3) < 0.02
    b = dl.zeros(N, dtype=dl.bool_).bernoulli_(dl.full((N,), 0.8))
    assert b.dtype is dl.bool_ and abs(b.numpy().mean() - 0.8) < 0.02
    h = dl.zeros(100, dtype=dl.float64).normal_()
    assert h.dtype is dl.float64
    with pytest.raises(RuntimeError):
        dl.zeros(3, dtype=dl.int64).normal_()


def test_fills_are_deterministic_under_seed():
    vals = []
    for _ in range(2):
        dl.manual_seed(7)
        vals.append((dl.empty(50).normal_().numpy(), dl.empty(50).uniform_().numpy(),
                     dl.randint(0, 100, (50,)).numpy(), dl.randperm(50).numpy()))
    for a, b in zip(*vals):
        np.testing.assert_array_equal(a, b)
    g = dl.Generator(3)
    a = dl.zeros(10).normal_(generator=g).numpy()
    g.manual_seed(3)
    np.testing.assert_array_equal(a, dl.zeros(10).normal_(generator=g).numpy())


def test_inplace_fills_autograd():
    w = dl.ones(4, requires_grad=True)
    for fill in (lambda t: t.normal_(), lambda t: t.uniform_(), lambda t: t.bernoulli_(),
                 lambda t: t.exponential_()):
        with pytest.raises(RuntimeError, match="leaf .*requires grad"):
            fill(w)
        with dl.no_grad():
            assert fill(w) is w
    w.data.normal_(0.0, 0.02)  # the DCGAN idiom
    assert w.requires_grad and w.is_leaf and abs(w.numpy()).max() < 0.2
    y = w * 2  # a non-leaf: its old value takes a zero gradient, as torch's
    y.normal_()
    y.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros(4, np.float32))


def test_randint_randint_like_randperm():
    dl.manual_seed(1)
    r = dl.randint(3, 10, (N,))
    assert r.dtype is dl.int64 and r.shape == (N,)
    v = r.numpy()
    assert v.min() == 3 and v.max() == 9 and abs(v.mean() - 6.0) < 0.1
    assert dl.randint(5, (2, 3)).shape == (2, 3) and dl.randint(5, (2, 3)).numpy().max() < 5
    assert dl.randint(low=-2, high=0, size=(10,)).numpy().min() >= -2
    assert dl.randint(2, (4,), dtype=dl.int32).dtype is dl.int32
    big = dl.randint(0, 2 ** 40, (1000,)).numpy()
    assert big.min() >= 0 and big.max() < 2 ** 40 and len(np.unique(big)) == 1000
    with pytest.raises(TypeError):
        dl.randint(5, 3)
    x = dl.zeros(2, 3)
    rl = dl.randint_like(x, 2, 5)
    assert rl.shape == (2, 3) and rl.dtype is dl.float32
    assert set(np.unique(rl.numpy())) <= {2.0, 3.0, 4.0}
    assert dl.randint_like(dl.zeros(4, dtype=dl.int64), 3).dtype is dl.int64
    for n in (0, 1, 7, 1000):
        p = dl.randperm(n)
        assert p.dtype is dl.int64
        assert sorted(p.numpy().tolist()) == list(range(n))
    assert not np.array_equal(dl.randperm(50).numpy(), np.arange(50))


def test_multinomial():
    dl.manual_seed(2)
    w = dl.tensor([1.0, 0.0, 2.0, 3.0, 0.0])
    for _ in range(5):
        s = dl.multinomial(w, 3).numpy()
        assert len(set(s.tolist())) == 3 and set(s.tolist()) == {0, 2, 3}
    s = dl.multinomial(w, 4000, replacement=True)
    assert s.dtype is dl.int64 and s.shape == (4000,)
    freq = np.bincount(s.numpy(), minlength=5) / 4000
    np.testing.assert_allclose(freq, [1 / 6, 0, 2 / 6, 3 / 6, 0], atol=0.03)
    rows = dl.tensor([[0.0, 1.0, 1.0, 0.0], [5.0, 0.0, 0.0, 1.0]])
    s = w.multinomial(2)
    assert s.shape == (2,)
    s = dl.multinomial(rows, 2).numpy()
    assert s.shape == (2, 2) and set(s[0]) == {1, 2} and set(s[1]) == {0, 3}
    s = dl.multinomial(rows, 50, True).numpy()
    assert set(s[0]) <= {1, 2} and set(s[1]) <= {0, 3}
    first = dl.multinomial(dl.tensor([[1.0, 1.0, 8.0]]).expand(400, 3), 2).numpy()
    assert 0.72 < np.mean(first[:, 0] == 2) < 0.88  # drawn in proportion to the weights
    assert (first[:, 0] != first[:, 1]).all()
    with pytest.raises(RuntimeError, match="without replacement"):
        dl.multinomial(w, 6)
    with pytest.raises(RuntimeError):
        dl.multinomial(dl.tensor([1.0, -1.0]), 1)
    with pytest.raises(RuntimeError):
        dl.multinomial(dl.zeros(3), 1)


def test_normal_and_bernoulli():
    dl.manual_seed(3)
    mean = dl.tensor([[0.0], [10.0]])
    y = dl.normal(mean, dl.full((2000,), 2.0))
    ty = torch.normal(torch.zeros(2, 1), torch.full((2000,), 2.0))
    assert y.shape == tuple(ty.shape) and y.dtype is dl.float32
    v = y.numpy()
    assert abs(v[0].mean()) < 0.2 and abs(v[1].mean() - 10) < 0.2 and abs(v.std(1) - 2).max() < .15
    assert dl.normal(mean, 1.0).shape == (2, 1)
    assert dl.normal(1.0, dl.ones(3, dtype=dl.float64)).dtype is dl.float64
    z = dl.normal(5.0, 0.5, (2000,))
    assert z.shape == (2000,) and abs(z.numpy().mean() - 5) < 0.05
    assert dl.normal(0.0, 1.0, size=(2, 2)).shape == (2, 2)
    m = dl.zeros(3, requires_grad=True)
    dl.normal(m, 1.0).sum().backward()  # torch's gradient: zero
    np.testing.assert_array_equal(m.grad.numpy(), np.zeros(3, np.float32))
    p = dl.tensor(np.linspace(0, 1, 5, dtype=np.float32)).expand(400, 5)
    b = dl.bernoulli(p)
    assert b.shape == (400, 5) and b.dtype is dl.float32
    np.testing.assert_allclose(b.numpy().mean(0), np.linspace(0, 1, 5), atol=0.08)
    assert b.numpy()[:, 0].max() == 0 and b.numpy()[:, -1].min() == 1
    c = dl.bernoulli(dl.zeros(2000, dtype=dl.float64), 0.25)
    assert c.dtype is dl.float64 and abs(c.numpy().mean() - 0.25) < 0.03
    assert p.bernoulli().shape == p.shape


def test_random_fills_run_on_device(dev):
    dl.manual_seed(4)
    x = dl.zeros(4096, device=dev)
    v = x.normal_(1.0, 2.0).numpy()
    assert abs(v.mean() - 1) < 0.2 and abs(v.std() - 2) < 0.2
    r = dl.randint(0, 10, (4096,), device=dev).numpy()
    assert r.min() >= 0 and r.max() <= 9
    assert sorted(dl.randperm(100, device=dev).numpy().tolist()) == list(range(100))
    s = dl.multinomial(dl.tensor([0.0, 1.0, 3.0], device=dev), 2).numpy()
    assert sorted(s.tolist()) == [1, 2]


@pytest.mark.parametrize("name,args", [("t_", ()), ("unsqueeze_", (0,)),
                                       ("transpose_", (0, 1)), ("squeeze_", ())])
def test_inplace_views_keep_lazy_readers_values(name, args):
    """`y = x * 2; x.t_()`: y is x's old values times two, as torch's eager y (dl's lazy y
    read x's storage with x's new strides: wrong values, past the end of the storage)."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3) if name != "squeeze_" else \
        np.arange(3, dtype=np.float32).reshape(1, 3)
    out = []
    for m in (dl, torch):
        x = m.tensor(a)
        y = x * 2
        getattr(x, name)(*args)
        out.append((y.numpy().copy(), x.numpy().copy()))
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])


def _after_view_op(m, program: str):
    """Runs program (a, x, w in scope; it sets loss) with library m: x.grad, or the
    exception's class name where backward refuses."""
    x = m.tensor(np.arange(1.0, 7.0).reshape(2, 3), requires_grad=True)
    w = m.tensor(np.arange(10.0, 70.0, 10.0).reshape(2, 3))
    scope = {"x": x, "w": w, "a": x * 1}
    exec(program, {}, scope)
    try:
        scope["loss"].backward()
    except RuntimeError:
        return "refused"
    return x.grad.numpy().tolist()


@pytest.mark.parametrize("program", [
    "r = a * w\na.t_()\nloss = r.sum()",                 # a not saved: w's gradient
    "r = a * a\na.t_()\nloss = r.sum()",                 # a saved: refused, as torch
    "r = a * w\na.add_(1)\nloss = r.sum()",              # an in-place op after: a not saved
    "r = a * w\na.t_()\na.mul_(w.t())\nloss = r.sum() + a.sum()",
    "v = a[0]\nv.unsqueeze_(0)\nv.mul_(2)\nloss = (a * w).sum()",  # a view's view op
    "r = a * 2\na.t_()\nloss = r.sum() + a.sum()",
])
def test_backward_after_inplace_view_ops_as_torch(program):
    """In-place view ops on a tensor autograd saw before: torch's gradient, or its refusal
    where the op saved the tensor (dl gave w + 2 x^T silently for `a * a` then `a.t_()`, and
    raised on cases torch computes: a stale operand no gradient reads, an operand's shape
    read at backward, a view op on an indexing view)."""
    assert _after_view_op(dl, program) == _after_view_op(torch, program)

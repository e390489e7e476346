"""What the program fuzzer (test_fuzz_programs.py) found, as a user writes it, against torch
on every runtime that starts: gradients in their input's dtype through a mixed-precision
loss, no gradient through a bool (or integer) tensor that a float was written into, and
`alpha` typed by the operands (torch's promotion)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from dl_helpers import close, rand_np

import dl


def test_a_mixed_precision_loss_casts_each_gradient_to_its_input(dev):
    """An f32 product plus an f64 sum: the loss is f64, the product's backward still gets
    an f32 gradient (it raised: a matmul of f32 operands and an f64 gradient)."""
    an, bn = rand_np((3, 3), 1), rand_np((2,), 2).astype(np.float64)
    a = dl.tensor(an, device=dev, requires_grad=True)
    b = dl.tensor(bn, device=dev, requires_grad=True)
    loss = (a @ a).sum() + (b * b).sum()
    ta, tb = torch.tensor(an, requires_grad=True), torch.tensor(bn, requires_grad=True)
    tloss = (ta @ ta).sum() + (tb * tb).sum()
    loss.backward()
    tloss.backward()
    assert loss.dtype == dl.float64 and a.grad.dtype == dl.float32
    close(a.grad, ta.grad, rtol=1e-5, atol=1e-5)
    close(b.grad, tb.grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["bool", "int64"])
def test_a_float_written_into_a_bool_or_int_tensor_carries_no_gradient(dev, dtype):
    xn, yn = rand_np((3, 4), 3), rand_np((4,), 4)

    def run(m, t, **kw):
        x, y = t(xn), t(yn)
        h = x * 2.0
        dst = m.zeros((3, 4), dtype=getattr(m, dtype), **kw)
        dst[None] = h  # an in-place write of a value that requires grad
        z = m.where(dst > 0, dst, y)  # dst promotes to float: a value operand too
        (z.sum() + h.sum()).backward()
        return x.grad, y.grad, dst.requires_grad

    gx, gy, rg = run(dl, lambda a: dl.tensor(a, device=dev, requires_grad=True), device=dev)
    tx, ty, trg = run(torch, lambda a: torch.tensor(a, requires_grad=True))
    assert rg is False and trg is False
    close(gx, tx)
    close(gy, ty)


def test_alpha_takes_the_operands_result_type(dev):
    b = np.array([True, False, True])
    i = np.array([1, -2, 3])
    for m, t in ((dl, lambda a: dl.tensor(a, device=dev)), (torch, torch.tensor)):
        out = [m.add(t(b), t(b), alpha=2), m.sub(t(i), t(i), alpha=3),
               m.add(t(b), t(np.array([0.5, 1.0, 2.0], np.float32)), alpha=2)]
        if m is dl:
            got = out
        else:
            want = out
    for g, w in zip(got, want):
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    x = dl.tensor(b, device=dev)
    x.add_(x, alpha=2)
    assert x.dtype == dl.bool
    for bad in (lambda: dl.add(dl.tensor(i, device=dev), 1, alpha=2.5),
                lambda: dl.add(dl.tensor(b, device=dev), dl.tensor(b, device=dev), alpha=0.5)):
        with pytest.raises(TypeError, match="alpha must not be a floating point"):
            bad()


def test_select_is_torchs(dev):
    """`t.select(dim, i)` and `dl.select` (the fuzzer found them missing): views, negative
    dims and indices, errors as torch's."""
    xn = rand_np((3, 4, 2), 5)
    x = dl.tensor(xn, device=dev, requires_grad=True)
    tx = torch.tensor(xn, requires_grad=True)
    for d, i in ((0, 1), (1, -1), (-1, 0), (2, 1)):
        close(x.select(d, i), tx.select(d, i))
        close(dl.select(x, d, i), torch.select(tx, d, i))
    (x.select(1, 2) * 3.0).sum().backward()
    (tx.select(1, 2) * 3.0).sum().backward()
    close(x.grad, tx.grad)
    y = dl.tensor(xn, device=dev)
    y.select(0, 0).zero_()  # a view: the write reaches y
    assert not y.numpy()[0].any() and y.numpy()[1:].all()
    for bad, err in ((lambda t: t.select(1, 4), IndexError), (lambda t: t.select(3, 0),
                                                              IndexError)):
        with pytest.raises(err):
            bad(torch.tensor(xn))
        with pytest.raises(err):
            bad(dl.tensor(xn, device=dev))
    with pytest.raises(IndexError):
        dl.tensor(np.float32(2.0), device=dev).select(0, 0)


@pytest.mark.parametrize("op", ["mul_", "div_"])
@pytest.mark.parametrize("view", ["mT", "row", "step"])
def test_an_in_place_product_through_a_view_by_a_broadcast_constant(dev, op, view):
    """`h.mT.mul_(c)` (seed 790), h requiring grad and c not, c broadcast: the backward
    raised "a tensor it saved was modified" (it summed c's unused gradient back to c's
    shape, reading the overwritten h); torch's needs no value of h."""
    xn, cn = rand_np((3, 4), 6), np.abs(rand_np((4,), 7)) + 0.5
    ops = {"mT": lambda h: h.mT, "row": lambda h: h[1], "step": lambda h: h[:, ::2]}

    def run(m, t):
        x = t(xn, requires_grad=True)
        h = x * 2.0
        v = ops[view](h)
        getattr(v, op)(t(cn[:v.shape[-1]]))
        (h * h).sum().backward()
        return h, x.grad

    h, g = run(dl, lambda a, **kw: dl.tensor(a, device=dev, **kw))
    th, tg = run(torch, torch.tensor)
    close(h, th)
    close(g, tg)


@pytest.mark.parametrize("fn", ["add", "sub"])
def test_alpha_scales_b_in_the_operands_result_type(dev, fn):
    """`add(int32, bool, alpha=2)` is int32 as torch's (seeds 822, 958: dl gave int64, the
    bool b times 2 promoting alone); `add(float16, int32, alpha=2.5)` float16 (dl: float32);
    a 0-dim b keeps its weaker say."""
    i32, i64 = np.array([[1], [-2]], np.int32), np.array([3, 4, -5], np.int64)
    bo, f16 = np.array([True, False, True]), np.array([0.5, -1.25, 2.0], np.float16)
    cases = [(i32, bo, 2), (f16, i32, 2.5), (f16, bo, 2.5), (np.array(2, np.int32), bo, 3),
             (i32, np.array(3, np.int64), 2), (f16, np.array(1.5), 2), (bo, i32, 2),
             (i32, i64, -2), (bo, bo, True)]
    for an, bn, alpha in cases:
        if fn == "sub" and bool in (an.dtype, bn.dtype):
            continue  # refused, as torch's
        g = getattr(dl, fn)(dl.tensor(an, device=dev), dl.tensor(bn, device=dev), alpha=alpha)
        w = getattr(torch, fn)(torch.tensor(an), torch.tensor(bn), alpha=alpha)
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1], (an, bn, alpha)
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    i23 = np.broadcast_to(i32, (2, 3)).copy()
    x = dl.tensor(i23, device=dev)
    x.add_(dl.tensor(bo, device=dev), alpha=2)
    tx = torch.tensor(i23)
    tx.add_(torch.tensor(bo), alpha=2)
    assert x.dtype == dl.int32
    np.testing.assert_array_equal(x.numpy(), tx.numpy())
    with pytest.raises(RuntimeError, match="bool tensor"):  # a bool b: refused, as torch's
        dl.sub(dl.tensor(f16, device=dev), dl.tensor(bo, device=dev), alpha=2.5)


def test_setitem_drops_the_values_leading_unit_dims(dev):
    """`x[0] = y` with y of shape (1, 3) into a row of 3, as torch's (seeds 1715, 1823,
    1993: dl refused, the value not broadcastable to the view); other dims still must
    broadcast; `copy_` drops nothing, as torch's. Gradients flow to the value."""
    cases = [((2, 3), lambda m: 0, (1, 3)), ((3,), lambda m: -1, (1,)),
             ((2, 3), lambda m: (slice(None), 1), (1, 1, 2)), ((2, 3), lambda m: 0, (1, 1)),
             ((2, 3), lambda m: m.tensor([1, 0], dtype=m.int32,
                                        **({"device": dev} if m is dl else {})),
              (1, 1, 2, 3)),
             ((2, 3), lambda m: None, (1, 2, 3))]
    def run(m, t, shape, key, vshape):
        x = t(rand_np(shape, 9), requires_grad=True)
        v = t(rand_np(vshape, 8), requires_grad=True)
        y = x * 1.0
        y[key(m)] = v * 3.0
        (y * y).sum().backward()
        return y, x.grad, v.grad

    for case in cases:
        got = run(dl, lambda a, **kw: dl.tensor(a, device=dev, **kw), *case)
        want = run(torch, torch.tensor, *case)
        for g, w in zip(got, want):
            close(g, w)
    for t in (lambda a: dl.tensor(a, device=dev), torch.tensor):
        x = t(np.zeros((2, 3), np.float32))
        with pytest.raises((RuntimeError, ValueError)):
            x[0] = t(np.ones((2, 1, 3), np.float32))
        with pytest.raises((RuntimeError, ValueError)):
            x[0].copy_(t(np.ones((1, 3), np.float32)))


def test_cat_promotes_over_a_skipped_empty_tensor(dev):
    """`cat([int32 (2, 3, 1), float32 (0,)], 1)` is float32, as torch's (seed 2422: int32):
    the legacy empty 1-D tensor is left out of the shapes, not of the dtype."""
    a, e = np.arange(6, dtype=np.int32).reshape(2, 3, 1), np.zeros((0,), np.float32)
    i64 = np.array([1, -2], np.int64)
    for parts, dim in (((a, e), 1), ((e, a), 0), ((e, i64), 0), ((i64, e.astype(bool)), 0)):
        g = dl.cat([dl.tensor(p, device=dev) for p in parts], dim)
        w = torch.cat([torch.tensor(p) for p in parts], dim)
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1], parts
        np.testing.assert_array_equal(g.numpy(), w.numpy())


@pytest.mark.parametrize("op", ["exp_", "add_", "neg_", "mul_"])
def test_an_in_place_op_on_an_empty_expanded_view(dev, op):
    """`x.expand(0, 3, 3).exp_()` writes nothing, as torch's (seed 4255: dl refused it as an
    overlapping write); a non-empty expanded view is still refused."""
    xn = rand_np((1, 1, 3), 10)
    for t in (lambda a: dl.tensor(a, device=dev), torch.tensor):
        args = () if op in ("exp_", "neg_") else (2.0,)
        x = t(xn)
        v = getattr(x.expand(0, 3, 3), op)(*args)
        assert tuple(v.shape) == (0, 3, 3)
        np.testing.assert_array_equal(x.numpy(), xn)
        with pytest.raises(RuntimeError):
            getattr(x.expand(2, 3, 3), op)(*args)


@pytest.mark.parametrize("fn", ["maximum", "minimum"])
def test_maximum_minimum_gradients_with_a_nan_operand(dev, fn):
    """Each operand takes the gradient but where it loses, as torch's: with a nan operand
    both do (seeds 4803, 5015: dl gave neither, so a nan loss left finite gradients); a tie
    halves it."""
    nan = float("nan")
    an = np.array([1.0, nan, 2.0, nan, -1.0, 3.0], np.float32)
    bn = np.array([nan, 3.0, 2.0, nan, 0.5, -2.0], np.float32)
    gn = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], np.float32)
    got, want = [], []
    for m, t, out in ((dl, lambda a, **kw: dl.tensor(a, device=dev, **kw), got),
                      (torch, torch.tensor, want)):
        a, b = t(an, requires_grad=True), t(bn, requires_grad=True)
        y = getattr(m, fn)(a, b)
        (y * t(gn)).sum().backward()
        out += [y, a.grad, b.grad]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.detach().numpy())


def test_permute_without_dims_and_a_boolean_alpha_are_refused_as_torch(dev):
    """Two programs torch refuses that dl ran (the fuzzer's soft findings): `permute()` with
    no dims (a missing argument, a 0-d tensor too) and a bool alpha for a non-bool result.
    A 0-d tensor's `permute(())` and `.T` still work, gradient included."""
    for m, kw in ((dl, {"device": dev}), (torch, {})):
        with pytest.raises(TypeError, match="dims"):
            m.zeros((), **kw).permute()
        with pytest.raises(TypeError, match="dims"):
            m.zeros(3, **kw).permute()
        for a, b in ((m.zeros(2, dtype=m.int32, **kw), m.ones(2, dtype=m.bool, **kw)),
                     (m.zeros(2, **kw), m.ones(2, **kw))):
            with pytest.raises(RuntimeError, match="Boolean alpha only supported"):
                m.add(a, b, alpha=True)
        t = m.ones(2, dtype=m.bool, **kw)
        assert m.add(t, t, alpha=True).tolist() == [True, True]
    x = dl.tensor(3.0, device=dev, requires_grad=True)
    (x.T * 2 + x.permute(())).backward()
    assert x.grad.item() == 3.0

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

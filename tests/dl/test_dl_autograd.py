"""The tape: accumulation, no_grad, custom Functions, registry extension, errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from dl_helpers import close, rand_np

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
    dl.ops.add_method("cube3")
    np.testing.assert_allclose(dl.tensor(a).cube3().numpy(), a ** 3, rtol=1e-6)

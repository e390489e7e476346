"""Shape and indexing ops against PyTorch, with gradients."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from dl_helpers import close, rand_np

import dl


def _grad_check(f, tf, *arrays, devices=("interp",)):
    for dev in devices:
        xs = [dl.tensor(a, device=dev, requires_grad=True) for a in arrays]
        txs = [torch.tensor(a, requires_grad=True) for a in arrays]
        y, ty = f(*xs), tf(*txs)
        close(y, ty)
        g = rand_np(ty.shape, 99)
        y.backward(dl.tensor(g, device=dev))
        ty.backward(torch.tensor(g))
        for x, tx in zip(xs, txs):
            close(x.grad, tx.grad, rtol=1e-5, atol=1e-6)


CASES = {
    "reshape": (lambda x: x.reshape(4, -1), (3, 4)),
    "reshape_copy": (lambda x: x.t().reshape(-1), (3, 4)),
    "permute": (lambda x: x.permute(2, 0, 1), (2, 3, 4)),
    "transpose": (lambda x: x.transpose(0, 2), (2, 3, 4)),
    "squeeze": (lambda x: x.squeeze(), (2, 1, 3, 1)),
    "squeeze_dim": (lambda x: x.squeeze(1), (2, 1, 3)),
    "unsqueeze": (lambda x: x.unsqueeze(-1), (2, 3)),
    "flatten": (lambda x: x.flatten(), (2, 3, 4)),
    "expand": (lambda x: x.expand(4, 2, 3), (2, 1)),
    "slice": (lambda x: x[1:, ::2], (3, 5)),
    "index": (lambda x: x[1, None, ..., -1], (3, 4, 2)),
    "repeat": (lambda x: x.repeat(2, 3), (2, 3)),
    "repeat_more_dims": (lambda x: x.repeat(2, 1, 2), (3, 2)),
    "contiguous": (lambda x: x.t().contiguous(), (3, 4)),
    "clone": (lambda x: x.clone(), (3,)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_shape_op(name):
    f, shape = CASES[name]
    _grad_check(lambda x: f(x) * 1.0, lambda x: f(x) * 1.0, rand_np(shape, 1))


def test_cat_stack(dev):
    a, b, c = rand_np((2, 3), 1), rand_np((2, 1), 2), rand_np((2, 4), 3)
    _grad_check(lambda x, y, z: dl.cat([x, y, z], 1), lambda x, y, z: torch.cat([x, y, z], 1),
                a, b, c, devices=(dev,))
    _grad_check(lambda x, y: dl.stack([x, y], 1), lambda x, y: torch.stack([x, y], 1),
                a, rand_np((2, 3), 4))
    close(dl.cat([dl.tensor(a), dl.tensor([], dtype=dl.float32)]), torch.cat(
        [torch.tensor(a), torch.tensor([])]))


def test_cat_promotes():
    out = dl.cat([dl.tensor([1, 2]), dl.tensor([0.5])])
    assert out.dtype is dl.float32 and out.tolist() == [1.0, 2.0, 0.5]


def test_index_select_and_gather(dev):
    a = rand_np((4, 5), 7)
    idx = np.array([3, 0, 3, 1])
    _grad_check(lambda x: x.index_select(1, dl.tensor(idx, device=x.device)),
                lambda x: x.index_select(1, torch.tensor(idx)), a, devices=(dev,))
    _grad_check(lambda x: x.index_select(0, dl.tensor(idx[:2], device=x.device)),
                lambda x: x.index_select(0, torch.tensor(idx[:2])), a)
    gi = np.random.default_rng(0).integers(0, 4, (3, 5))
    _grad_check(lambda x: x.gather(0, dl.tensor(gi, device=x.device)),
                lambda x: x.gather(0, torch.tensor(gi)), a, devices=(dev,))
    gi2 = np.random.default_rng(1).integers(0, 5, (2, 7))
    _grad_check(lambda x: x.gather(1, dl.tensor(gi2)), lambda x: x.gather(1, torch.tensor(gi2)),
                a)
    _grad_check(lambda x: x[dl.tensor([2, 0])], lambda x: x[torch.tensor([2, 0])], a)


def test_index_ops_on_views_and_int_dtypes():
    a = np.arange(24, dtype=np.int64).reshape(4, 6)
    t = dl.tensor(a)[1:, ::2]  # a strided view with an offset
    idx = dl.tensor(np.array([2, 0], np.int32))
    np.testing.assert_array_equal(t.index_select(0, idx).numpy(), a[1:, ::2][[2, 0]])
    gi = np.array([[0, 2, 1], [1, 1, 0]])
    np.testing.assert_array_equal(t.gather(1, dl.tensor(gi)).numpy(),
                                  np.take_along_axis(a[1:, ::2][:2], gi, 1))

"""Creation ops, the counter-based RNG and dropout."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from dl_helpers import close

import dl


def test_constants_ranges_eye(dev):
    close(dl.zeros(2, 3, device=dev), torch.zeros(2, 3))
    close(dl.ones((4,), dtype=dl.float64, device=dev), torch.ones(4, dtype=torch.float64))
    close(dl.full((2, 2), 7, device=dev), torch.full((2, 2), 7))
    assert dl.full((2,), True).dtype is dl.bool_
    close(dl.arange(5, device=dev), torch.arange(5))
    close(dl.arange(1, 10, 3), torch.arange(1, 10, 3))
    close(dl.arange(0.0, 1.0, 0.1, device=dev), torch.arange(0.0, 1.0, 0.1))
    close(dl.arange(10, 0, -3), torch.arange(10, 0, -3))
    close(dl.eye(3, device=dev), torch.eye(3))
    close(dl.eye(2, 4, dtype=dl.int32), torch.eye(2, 4, dtype=torch.int32))
    x = dl.ones(2, 3, dtype=dl.int32)
    assert dl.zeros_like(x).dtype is dl.int32 and dl.full_like(x, 4).tolist() == [[4] * 3] * 2
    assert dl.empty(2, 3).shape == (2, 3) and dl.ones_like(x, dtype=dl.float16).dtype is \
        dl.float16


def test_rand_is_reproducible_and_uniform(dev):
    dl.manual_seed(123)
    a = dl.rand(1000, device=dev).numpy()
    b = dl.rand(1000, device=dev).numpy()
    dl.manual_seed(123)
    np.testing.assert_array_equal(dl.rand(1000, device=dev).numpy(), a)
    assert not np.array_equal(a, b)  # each call gets a new key
    assert 0 <= a.min() and a.max() < 1
    assert abs(a.mean() - 0.5) < 0.04 and abs(a.std() - 12 ** -0.5) < 0.03


def test_rand_same_on_every_runtime():
    g = dl.ops.Generator(7)
    cpu = dl.randn(64, generator=g, device="cpu").numpy()
    g.manual_seed(7)
    interp = dl.randn(64, generator=g, device="interp").numpy()
    np.testing.assert_allclose(cpu, interp, rtol=1e-5, atol=1e-6)


def test_randn_statistics():
    x = dl.randn(200, 100, generator=dl.ops.Generator(1)).numpy()
    assert abs(x.mean()) < 0.02 and abs(x.std() - 1) < 0.02
    assert dl.randn(3, dtype=dl.float64).dtype is dl.float64
    with pytest.raises(TypeError):
        dl.rand(3, dtype=dl.int32)


def test_dropout(dev):
    x = dl.ones(100, 100, device=dev, requires_grad=True)
    dl.manual_seed(0)
    with dl.count_kernels() as c:
        y = dl.nn.functional.dropout(x, 0.3)
        out = y.numpy()
    assert c.launches == 1  # the mask is generated inside the fused kernel
    kept = out != 0
    assert abs(kept.mean() - 0.7) < 0.03
    np.testing.assert_allclose(out[kept], 1 / 0.7, rtol=1e-6)
    y.backward(dl.ones_like(y))
    np.testing.assert_array_equal(x.grad.numpy() != 0, kept)  # the same mask
    assert dl.nn.functional.dropout(x, 0.3, training=False) is x


def test_generators_past_the_line_tail(dev):
    """arange, linspace and rand/randn over a size of 2**16 or more that no line divides:
    the values of a lines-and-tail split. The tail kernel counted its elements from 0
    (arange(65537)[-1] was 0, linspace's last value 0.0, randn's tail a copy of its first
    values: nn.Linear(257, 257)'s initial weights too)."""
    n = 65537
    np.testing.assert_array_equal(dl.arange(n, device=dev).numpy(), np.arange(n))
    lin = dl.linspace(0.0, 1.0, n, device=dev).numpy()
    np.testing.assert_allclose(lin, torch.linspace(0.0, 1.0, n).numpy(), rtol=0, atol=1e-6)
    stepped = dl.arange(0.0, 10000.5, 0.1, device=dev).numpy()
    assert len(stepped) == 100005 and abs(stepped[-1] - 10000.4) < 1e-2
    for gen in (dl.rand, dl.randn):  # counter-based: a prefix of a longer draw, same seed
        dl.manual_seed(3)
        a = gen(257, 257, device=dev).numpy().ravel()
        dl.manual_seed(3)
        b = gen(66056, device=dev).numpy()  # 66056: whole lines of every width
        np.testing.assert_array_equal(a, b[:a.size])


@pytest.mark.parametrize("data", [
    [np.float64(1.5), 2], [np.float32(1.5), 2], [1.5, np.int32(2)], [np.int32(1), np.int32(2)],
    [np.int32(1), 2], [np.float16(1.0), 2.0], [[np.float64(1.0)], [2.0]], (np.float64(2.0),),
    [1.5, 2.5], [[1, 2], [3, 4.5]], np.float64(3.0), 2.5, [np.array([1.5]), np.array([2.0])],
], ids=repr)
def test_tensor_infers_torch_dtype_from_lists(data):
    """Lists mixing NumPy scalars and Python numbers take the dtype torch.tensor gives them
    (a NumPy float64 among Python floats keeps float64; Python floats alone are float32)."""
    want = torch.tensor(np.array(data) if isinstance(data, list) and
                        isinstance(data[0], np.ndarray) else data)
    got = dl.tensor(data)
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_int32_arange_on_every_runtime(dev):
    """An int32 range computes in int32 (so it runs where there is no int64, as on wgpu),
    with PyTorch's values past 2**16; bool ranges raise, as PyTorch's."""
    got = dl.arange(3, 70001, 7, dtype=dl.int32, device=dev)
    assert got.dtype is dl.int32
    np.testing.assert_array_equal(got.numpy(), torch.arange(3, 70001, 7, dtype=torch.int32))
    with pytest.raises(NotImplementedError):
        dl.arange(3, dtype=dl.bool_, device=dev)

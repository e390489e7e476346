"""`Tensor.numpy()` on host devices shares the tensor's memory (as PyTorch's does): writes go
both ways, the array keeps the storage alive, the buffer pool never reuses memory an array
still views, views give strided arrays; bf16 and device runtimes copy."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import dl
from runtimes.host import POOL_MIN_BYTES

BIG = POOL_MIN_BYTES  # float32 elements: 4x the pooling threshold, so pooled memory
HOST = ["cpu", "interp"]


def _dev_ok(name):
    try:
        dl.device(name)
    except Exception as e:  # pragma: no cover - runtime missing here
        pytest.skip(f"{name}: {e}")


@pytest.mark.parametrize("dev", HOST)
@pytest.mark.parametrize("n", [10, BIG])  # malloc'd and pooled storage
def test_numpy_shares_both_ways(dev, n):
    _dev_ok(dev)
    t = dl.arange(n, dtype=dl.float32, device=dev)
    a = t.numpy()
    assert a.flags.writeable and a.dtype == np.float32 and a.shape == (n,)
    assert np.shares_memory(a, t.numpy())
    t.copy_(t + 1)  # in place (dl has no add_)
    assert a[0] == 1 and a[-1] == n
    t.zero_()
    assert not a.any()
    t[3] = 7.0
    assert a[3] == 7.0
    t.fill_(2.0)
    assert (a == 2).all()
    a[:] = 5.0  # the other way round
    a[1] = -1.0
    assert t[1].item() == -1.0 and (t + 0).sum().item() == 5.0 * (n - 1) - 1.0


@pytest.mark.parametrize("dev", HOST)
def test_views_give_strided_arrays_of_the_same_memory(dev):
    _dev_ok(dev)
    base = dl.arange(4 * 6, dtype=dl.float32, device=dev).reshape(4, 6)._materialise()
    want = np.arange(24, dtype=np.float32).reshape(4, 6)
    whole = base.numpy()
    for view, ref in [(base.T, want.T), (base[1:3, ::2], want[1:3, ::2]),
                      (base[2], want[2]), (base[:, 4], want[:, 4]),
                      (base.permute(1, 0)[::3], want.T[::3])]:
        a = view.numpy()
        np.testing.assert_array_equal(a, ref)
        assert np.shares_memory(a, whole) and a.base is not None
        assert tuple(s // 4 for s in a.strides) == view.strides
    t = base.T.numpy()
    t[5, 0] = 100.0  # base[0, 5]
    assert base[0, 5].item() == 100.0


@pytest.mark.parametrize("dev", HOST)
def test_zero_d_and_empty(dev):
    _dev_ok(dev)
    s = dl.tensor(3.5, device=dev)
    a = s.numpy()
    assert a.shape == () and a.ndim == 0 and a == 3.5
    a[()] = 1.25
    assert s.item() == 1.25
    x = dl.arange(BIG, dtype=dl.float32, device=dev)
    e = x[7].numpy()
    assert e.shape == () and e == 7.0
    assert dl.zeros((0, 3), device=dev).numpy().shape == (0, 3)


@pytest.mark.parametrize("dev", HOST)
def test_lazy_tensor_is_computed_first(dev):
    _dev_ok(dev)
    x = dl.arange(BIG, dtype=dl.float32, device=dev)
    y = x * 2 + 1
    a = y.numpy()
    np.testing.assert_array_equal(a, np.arange(BIG, dtype=np.float32) * 2 + 1)
    y.zero_()
    assert not a.any()  # y's storage is what a views


@pytest.mark.parametrize("n", [10, BIG])
def test_array_outlives_the_tensor_and_its_memory_is_not_reused(n):
    want = np.arange(n, dtype=np.float32)
    t = dl.arange(n, dtype=dl.float32, device="cpu")
    a = t.numpy()
    sub = a[1:]  # a view of the array keeps it too
    del t
    gc.collect()
    news = [dl.full((n,), -1.0, device="cpu")._materialise() for _ in range(4)]
    news += [dl.zeros(n, device="cpu")._materialise() for _ in range(4)]
    np.testing.assert_array_equal(a, want)
    del a, news
    gc.collect()
    for _ in range(4):
        dl.full((n,), -2.0, device="cpu")._materialise()
    np.testing.assert_array_equal(sub, want[1:])


def test_pooled_memory_returns_to_the_pool_once_every_array_is_gone():
    rt = dl.device("cpu").rt
    t = dl.zeros(BIG, device="cpu")._materialise()
    ptr = t._buf.ptr
    a = t.numpy()
    del t
    gc.collect()
    u = dl.zeros(BIG, device="cpu")._materialise()
    assert u._buf.ptr != ptr  # still viewed by a
    del a
    gc.collect()
    before = rt.host_pool.stats["reuses"]
    v = dl.zeros(BIG, device="cpu")._materialise()
    assert rt.host_pool.stats["reuses"] == before + 1 and v._buf.ptr == ptr
    del u, v


def test_bfloat16_returns_a_float32_copy():
    t = dl.tensor([1.0, 2.5, -3.0], dtype=dl.bfloat16, device="cpu")
    a = t.numpy()
    assert a.dtype == np.float32
    np.testing.assert_array_equal(a, [1.0, 2.5, -3.0])
    a[0] = 9.0
    assert t[0].item() == 1.0


def test_other_dtypes_share():
    for dt, npdt in [(dl.float16, np.float16), (dl.int32, np.int32), (dl.int64, np.int64),
                     (dl.float64, np.float64), (dl.bool_, np.bool_)]:
        t = dl.zeros(5, dtype=dt, device="cpu")
        a = t.numpy()
        assert a.dtype == npdt
        t.fill_(1)
        assert a.all()


def test_requires_grad_is_allowed_and_shares():
    w = dl.ones(4, device="cpu", requires_grad=True)
    a = w.numpy()  # PyTorch raises here; dl allows it
    (w * 3).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3, 3, 3, 3])
    with dl.no_grad():
        w.copy_(w - 1)
    assert not a.any()


def test_asarray_shares_and_array_copies():
    t = dl.zeros(6, device="cpu")
    assert np.shares_memory(np.asarray(t), t.numpy())
    c = np.array(t)
    assert not np.shares_memory(c, t.numpy())
    assert np.asarray(t, dtype=np.float64).dtype == np.float64


def test_dlpack_export_stays_zero_copy():
    t = dl.arange(BIG, dtype=dl.float32, device="cpu")._materialise()
    d = np.from_dlpack(t)
    assert np.shares_memory(d, t.numpy())
    t.zero_()
    assert not d.any()
    tt = dl.from_dlpack(d)
    tt.fill_(4.0)
    assert t[0].item() == 4.0
    v = np.from_dlpack(t[::2])
    assert v.strides == (8,) and np.shares_memory(v, d)
    m = t.reshape(256, -1).T
    assert np.shares_memory(np.from_dlpack(m), d)


@pytest.mark.parametrize("dev", ["opencl", "wgpu"])
def test_device_runtimes_copy(dev):
    _dev_ok(dev)
    try:
        t = dl.arange(12, dtype=dl.float32, device=dev).reshape(3, 4)
        a = t.T.numpy()
    except Exception as e:  # pragma: no cover - no usable device here
        pytest.skip(f"{dev}: {e}")
    np.testing.assert_array_equal(a, np.arange(12, dtype=np.float32).reshape(3, 4).T)
    a[0, 0] = 50.0
    assert t[0, 0].item() == 0.0


def test_writes_into_the_shared_array_do_not_reach_ops_made_before(dev):
    """A write into the array `numpy()` shares reaches no dl op: the elementwise ops made
    before it (lazy ones too) keep the values of when they were made, as torch's eager ops
    do. Lazy `a * 2` was computed after the write (200 where torch has 2)."""
    import torch
    ours, ref = [], []
    for lib in ("dl", "torch"):
        ones = np.ones(4, np.float32)
        a = dl.tensor(ones, device=dev) if lib == "dl" else torch.tensor(ones)
        b = a * 2  # made before the array is handed out
        arr = a.numpy()
        c = a * 3 + 1  # made after: the array is shared now
        arr[0] = 100
        d = a + 0.5  # after the write: sees it
        out = ours if lib == "dl" else ref
        out += [x.numpy().tolist() for x in (b, c, d)]
    if dev == "cpu" or dev == "interp":
        assert ours == ref
    else:  # device runtimes copy: the array is not the tensor's memory
        assert ours[:2] == ref[:2]


def test_a_dlpack_import_is_read_when_the_op_is_made():
    """dl.from_dlpack shares the producer's memory: an op on it reads the values of when it
    was made, not those of a later write by the producer."""
    src = np.arange(4, dtype=np.float32)
    t = dl.from_dlpack(src)
    doubled = t * 2
    src[:] = -1
    assert doubled.numpy().tolist() == [0.0, 2.0, 4.0, 6.0]
    assert t.numpy().tolist() == [-1.0] * 4


def test_fusion_is_kept_for_tensors_never_shared():
    a = dl.tensor(np.ones(64, np.float32))
    with dl.count_kernels() as k:
        (a * 2 + 1).exp().numpy()
    assert k.launches == 1

"""dl.Tensor: host I/O, dtypes, views and copies, DLPack, repr, errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from dl_helpers import close, rand_np

import dl


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64, np.float16, np.int32, np.int64,
                                      np.bool_])
def test_numpy_round_trip(dev, np_dtype):
    a = (rand_np((3, 4), 1) * 10).astype(np_dtype)
    t = dl.tensor(a, device=dev)
    assert t.shape == (3, 4) and t.dtype is dl.dtypes.from_numpy(np_dtype)
    assert t.device == dev
    np.testing.assert_array_equal(t.numpy(), a)


def test_bf16_round_trip_rounds_to_nearest_even():
    a = np.array([1.0, 1.00390625, 1.01171875, -3.5, 1e-40, np.inf], np.float32)
    got = dl.tensor(a, dtype=dl.bfloat16).numpy()
    want = torch.tensor(a).to(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(got, want)


def test_python_data_dtypes():
    assert dl.tensor([1.5, 2]).dtype is dl.float32
    assert dl.tensor([1, 2]).dtype is dl.int64
    assert dl.tensor([True]).dtype is dl.bool_
    assert dl.tensor(3.0).shape == ()
    assert dl.tensor([]).shape == (0,)


def test_0d_and_empty(dev):
    s = dl.tensor(2.5, device=dev)
    assert s.item() == 2.5 and (s * 2).item() == 5.0
    e = dl.zeros(0, 3, device=dev)
    assert (e + 1).numpy().shape == (0, 3)
    assert "size=(0, 3)" in repr(e)


INDEXES = [
    (slice(1, None), slice(None, None, 2)),
    (1,),
    (None, Ellipsis, 2),
    (slice(None), None, slice(1, 3)),
    (Ellipsis, slice(None, None, 3)),
    (-1, slice(0, 0)),
    (0, 1, -2),
]


@pytest.mark.parametrize("idx", INDEXES)
def test_basic_indexing_is_a_view(idx):
    a = rand_np((3, 4, 5), 2)
    t = dl.tensor(a)
    v = t[idx]
    close(v, torch.tensor(a)[idx])
    assert v._buf is t._buf  # no copy


def test_views_share_storage_and_match_torch():
    a = rand_np((2, 3, 4), 3)
    t, ta = dl.tensor(a), torch.tensor(a)
    cases = [
        (t.permute(2, 0, 1), ta.permute(2, 0, 1)),
        (t.transpose(0, 2), ta.transpose(0, 2)),
        (t.reshape(6, 4), ta.reshape(6, 4)),
        (t.unsqueeze(1), ta.unsqueeze(1)),
        (t[:, :1].squeeze(1), ta[:, :1].squeeze(1)),
        (t[:1].expand(5, 3, 4), ta[:1].expand(5, 3, 4)),
        (t.flatten(1), ta.flatten(1)),
        (t.reshape(2, 3, 2, 2), ta.reshape(2, 3, 2, 2)),
    ]
    for got, want in cases:
        assert got._buf is t._buf
        assert got.strides == want.stride(), (got.shape, got.strides, want.stride())
        close(got, want)


def test_reshape_of_non_viewable_copies():
    a = rand_np((3, 4), 4)
    t = dl.tensor(a).t()
    with dl.count_kernels() as c:
        r = t.reshape(12)
    assert c.launches == 1 and r._buf is not t._buf
    close(r, torch.tensor(a).t().reshape(12))
    c2 = t.contiguous()
    assert c2.is_contiguous() and not t.is_contiguous()
    close(c2, torch.tensor(a).t().contiguous())


def test_setitem_writes_through_views(dev):
    a = rand_np((4, 5), 5)
    t, ta = dl.tensor(a, device=dev), torch.tensor(a)
    t[1:3, ::2] = 7.0
    ta[1:3, ::2] = 7.0
    t[0] = dl.arange(5, device=dev).float()
    ta[0] = torch.arange(5).float()
    t[:, 1:] = t[:, :-1]  # overlapping read and write
    ta[:, 1:] = ta[:, :-1].clone()
    close(t, ta)


def test_to_dtype_and_device():
    t = dl.tensor([1.7, -2.2, 0.0])
    assert t.to(dl.int32).tolist() == [1, -2, 0]
    assert t.to("int64").dtype is dl.int64
    assert t.bool().tolist() == [True, True, False]
    assert t.to("interp").device == "interp"
    np.testing.assert_array_equal(t.to("interp").numpy(), t.numpy())


def test_repr():
    t = dl.tensor([[1.0, 2.0]], device="cpu", requires_grad=True)
    assert repr(t) == "tensor([[1., 2.]], requires_grad=True)"
    assert repr(dl.tensor([1], device="cpu")) == "tensor([1], dtype=dl.int64)"
    assert "grad_fn=<mul>" in repr(t * 2)
    assert "device='interp'" in repr(dl.tensor([1.0], device="interp"))


def test_dlpack_from_torch_is_zero_copy():
    ta = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    t = dl.from_dlpack(ta)
    assert t.shape == (3, 4)
    ta[1, 2] = 100.0  # a write through torch is seen by dl
    assert t.numpy()[1, 2] == 100.0
    t[0, 0] = -5.0  # and a write through dl is seen by torch
    assert ta[0, 0].item() == -5.0
    tt = dl.from_dlpack(ta.t())  # strided
    close(tt, ta.t())
    tt[2, 1] = 9.0
    assert ta[1, 2].item() == 9.0


def test_dlpack_export_to_torch_is_zero_copy():
    t = dl.tensor(rand_np((3, 4), 6))
    v = t[1:, ::2]
    ta = torch.from_dlpack(v)
    close(v, ta)
    ta[0, 0] = 42.0
    assert t.numpy()[1, 0] == 42.0
    assert t.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(t), t.numpy())


def test_shape_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(4,\)"):
        dl.ones(2, 3) + dl.ones(4)
    with pytest.raises(ValueError, match=r"cannot reshape a tensor of 6 elements into shape"):
        dl.ones(2, 3).reshape(4, 2)
    with pytest.raises(ValueError, match=r"cannot expand shape \(2, 3\) to \(4, 3\)"):
        dl.ones(2, 3).expand(4, 3)
    with pytest.raises(ValueError, match=r"differ outside that dimension"):
        dl.cat([dl.ones(2, 3), dl.ones(2, 4)], 0)
    with pytest.raises(IndexError, match="out of bounds"):
        dl.ones(2, 3)[0, 3]


def test_unknown_device_reports_why():
    import cube
    with pytest.raises(cube.RuntimeUnavailable):
        dl.zeros(2, device="nosuch").numpy()

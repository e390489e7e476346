"""The torch functions added for ported PyTorch code: the errors they raise where torch
raises (values and gradients are the op table's: tests/dl/op_table/ops_ported.py), their
modules, and the declarations of dl/ops/elementwise_special.py."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import dl
import dl.nn.functional as F
from dl.ops.elementwise import DTypeError


def test_one_hot_errors():
    with pytest.raises(RuntimeError, match="non-negative"):
        F.one_hot(dl.tensor([1, -1]))
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        F.one_hot(dl.tensor([1, 3]), 3)
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        F.one_hot(dl.tensor([1]), -2)
    with pytest.raises(RuntimeError, match="empty tensor"):
        F.one_hot(dl.zeros(0, dtype=dl.int64))
    with pytest.raises(DTypeError, match="LongTensor"):
        F.one_hot(dl.tensor([1.0]))
    with pytest.raises(DTypeError):
        F.one_hot(dl.tensor([True]))


def test_distance_errors():
    with pytest.raises(DTypeError, match="floating point"):
        F.cosine_similarity(dl.tensor([1, 2]), dl.tensor([1, 2]), dim=0)
    with pytest.raises(DTypeError):
        F.normalize(dl.tensor([1, 2]), dim=0)  # the norm's rule, as torch's
    with pytest.raises(TypeError):
        F.normalize(dl.ones(2, 3), out=dl.ones(2, 3))


def test_distance_modules_match_torch():
    a, b = np.random.default_rng(0).normal(size=(2, 3, 4))
    for m, tm in ((dl.nn.CosineSimilarity(dim=-1, eps=1e-6),
                   torch.nn.CosineSimilarity(dim=-1, eps=1e-6)),
                  (dl.nn.PairwiseDistance(1.0, keepdim=True),
                   torch.nn.PairwiseDistance(1.0, keepdim=True))):
        np.testing.assert_allclose(m(dl.tensor(a), dl.tensor(b)).numpy(),
                                   tm(torch.tensor(a), torch.tensor(b)).numpy(), rtol=1e-12)
    x = np.random.default_rng(1).normal(size=(2, 3))
    np.testing.assert_allclose(dl.nn.Softmin(1)(dl.tensor(x)).numpy(),
                               torch.nn.Softmin(1)(torch.tensor(x)).numpy(), rtol=1e-12)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        dl.nn.Softmin()(dl.tensor(x))
    assert any("Implicit dimension" in str(m.message) for m in w)
    assert repr(dl.nn.Softmin(1)) == "Softmin(dim=1)"


def test_movedim_errors():
    x = dl.ones(2, 3, 4)
    with pytest.raises(RuntimeError, match="repeated dim in `source`"):
        dl.movedim(x, (0, 0), (1, 2))
    with pytest.raises(RuntimeError, match="repeated dim in `destination`"):
        dl.movedim(x, (0, 1), (1, 1))
    with pytest.raises(RuntimeError, match="same number of dims"):
        dl.movedim(x, (0, 1), (1,))
    with pytest.raises(IndexError):
        dl.movedim(x, 0, 3)
    with pytest.raises(TypeError):
        dl.movedim(x, 0.0, 1)
    assert dl.moveaxis is dl.movedim and x.moveaxis(0, -1).shape == (3, 4, 2)


def test_diagonal_errors():
    with pytest.raises(RuntimeError, match="cannot be identical"):
        dl.diagonal(dl.ones(2, 3), 0, 1, -1)
    with pytest.raises(IndexError):
        dl.diagonal(dl.ones(3))
    with pytest.raises(RuntimeError, match="cannot be identical"):
        dl.diag_embed(dl.ones(2, 2), 0, 0, 0)
    with pytest.raises(RuntimeError, match="Supports 1D or 2D"):
        dl.diag(dl.ones(2, 2, 2))
    with pytest.raises(RuntimeError, match="expected a matrix"):
        dl.trace(dl.ones(3))
    with pytest.raises(DTypeError):
        dl.trace(dl.ones(2, 2, dtype=dl.bool_))


def test_diagonal_is_a_view_and_diag_a_copy():
    """Writes through diagonal() reach the input (torch's `x.diagonal().fill_(0)` idiom), with
    autograd too; diag() of a matrix is a copy, as torch's."""
    x = dl.ones(3, 3)
    x.diagonal(1).fill_(5.0)
    np.testing.assert_array_equal(x.numpy(), np.ones((3, 3)) + 4 * np.eye(3, k=1))
    d = dl.diag(x)
    d.fill_(0.0)
    assert x.numpy()[0, 0] == 1.0
    w = dl.ones(3, 3, requires_grad=True)
    y = w * 2
    y.diagonal().zero_()
    y.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), 2 * (1 - np.eye(3)))


def test_special_errors():
    for op in (dl.logaddexp, dl.logaddexp2):
        with pytest.raises(DTypeError):
            op(dl.tensor([1, 2]), dl.tensor([1, 2]))
    with pytest.raises(DTypeError):
        dl.frac(dl.tensor([1, 2]))
    with pytest.raises(DTypeError):
        dl.frac(dl.tensor([True]))


def test_special_ops_are_declarations():
    """Each op of dl/ops/elementwise_special.py is, from its one declaration, an op in the
    registry, a name in dl.ops and dl, a Tensor method and an emitter of fused kernels (as
    tests/dl/test_layering.py checks for dl/ops/elementwise.py)."""
    from dl.fusion.emit_ops import EMITTERS
    from dl.ops import OPS, elementwise, elementwise_special
    assert sorted(elementwise_special.__all__) == ["copysign", "frac", "logaddexp",
                                                   "logaddexp2", "sinc", "xlogy"]
    for name in elementwise_special.__all__:
        fn = getattr(elementwise_special, name)
        assert name not in elementwise.__all__, name
        assert getattr(dl.ops, name) is fn and getattr(dl, name) is fn, name
        assert OPS[name] is fn and getattr(dl.Tensor, name) is fn, name
        assert name in EMITTERS, name
        assert fn.__doc__ and fn.__module__ == "dl.ops.elementwise_special", name


def test_reduction_errors():
    with pytest.raises(DTypeError, match="floating point"):
        dl.nanmean(dl.tensor([1, 2]))
    with pytest.raises(DTypeError, match="floating point"):
        dl.var_mean(dl.tensor([1, 2]))
    # a TypeError, as torch's (no overload takes both)
    for fn, tfn in ((dl.std_mean, torch.std_mean), (dl.var, torch.var)):
        with pytest.raises(TypeError):
            tfn(torch.ones(3), 0, True, correction=0)
        with pytest.raises(TypeError, match="both unbiased and correction"):
            fn(dl.ones(3), 0, True, correction=0)
    with pytest.raises(IndexError, match="non-zero size"):
        dl.aminmax(dl.ones(0, 2), dim=0)
    with pytest.raises(RuntimeError, match="no identity"):
        dl.aminmax(dl.ones(0, 2))
    with pytest.raises(TypeError):
        dl.aminmax(dl.ones(2, 2), 1)  # dim is keyword-only, as torch's
    r = dl.aminmax(dl.tensor([[1.0, 3.0], [2.0, 0.0]]), dim=1)
    assert r.min.tolist() == [1.0, 0.0] and r.max.tolist() == [3.0, 2.0]
    assert repr(r).startswith("dl.return_types.aminmax(min=")


def test_diff_errors():
    with pytest.raises(RuntimeError, match="at least one-dimensional"):
        dl.diff(dl.tensor(1.0))
    with pytest.raises(RuntimeError, match="non-negative"):
        dl.diff(dl.ones(3), n=-1)
    with pytest.raises(RuntimeError, match="same dimension"):
        dl.diff(dl.ones(2, 3), prepend=dl.zeros(3))
    with pytest.raises(RuntimeError, match=r"input.size\(0\) = 2, but got tensor.size\(0\) = 3"):
        dl.diff(dl.ones(2, 3), prepend=dl.zeros(3, 1))
    with pytest.raises(TypeError):
        dl.diff(dl.ones(2, 3), prepend=2.0)


def test_grid_and_product_errors():
    a, b = dl.ones(3), dl.ones(2)
    with pytest.raises(RuntimeError, match="same dtype"):
        dl.meshgrid(a, b.to(dl.float64), indexing="ij")
    with pytest.raises(RuntimeError, match="indexing must be one of"):
        dl.meshgrid(a, b, indexing="foo")
    with pytest.raises(RuntimeError, match="0D or 1D"):
        dl.meshgrid(a, dl.ones(2, 2), indexing="ij")
    with pytest.raises(RuntimeError, match="non-empty"):
        dl.meshgrid(indexing="ij")
    with pytest.warns(UserWarning, match="indexing argument"):
        assert dl.meshgrid(a, b)[0].shape == (3, 2)
    with pytest.raises(RuntimeError, match="1D vector"):
        dl.cartesian_prod(a, dl.ones(2, 2))
    with pytest.raises(RuntimeError, match="same dtype"):
        dl.tensordot(dl.ones(2, 3, dtype=dl.int64), dl.ones(3, 5), 1)
    with pytest.raises(RuntimeError, match="dims >= 0"):
        dl.tensordot(dl.ones(2, 3), dl.ones(3, 5), -1)
    with pytest.raises(RuntimeError, match="contracted dimensions need to match"):
        dl.tensordot(dl.ones(2, 3), dl.ones(4, 5), ([1], [0]))
    assert dl.tensordot(dl.ones(2, 3), dl.ones(3, 5), dl.tensor(1)).shape == (2, 5)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        dl.linalg.cross(dl.ones(4, 3), dl.ones(3))
    with pytest.raises(RuntimeError, match="must have length 3"):
        dl.cross(dl.ones(3, 2), dl.ones(3, 2), dim=1)
    with pytest.raises(RuntimeError, match="no dimension of size 3"), \
            pytest.warns(UserWarning, match="without specifying the dim"):
        dl.cross(dl.ones(2, 2), dl.ones(2, 2))
    with pytest.raises(RuntimeError, match="same dtype"):
        dl.cross(dl.ones(2, 3, dtype=dl.int64), dl.ones(2, 3), dim=1)


def test_flip_repeat_reshape_errors():
    with pytest.raises(RuntimeError, match=">= 2-d"):
        dl.fliplr(dl.ones(3))
    with pytest.raises(RuntimeError, match=">= 1-d"):
        dl.flipud(dl.tensor(1.0))
    x = dl.ones(2, 3)
    with pytest.raises(RuntimeError, match="rotation dims == 2"):
        dl.rot90(x, 1, [0])
    with pytest.raises(RuntimeError, match="to be different"):
        dl.rot90(x, 1, [0, -2])
    with pytest.raises(RuntimeError, match="total dims >= 2"):
        dl.rot90(dl.ones(3))
    with pytest.raises(RuntimeError, match="can not be negative"):
        dl.repeat_interleave(dl.ones(2), dl.tensor([-1, 2]))
    with pytest.raises(RuntimeError, match="non-negative"):
        dl.repeat_interleave(dl.ones(2), -1)
    with pytest.raises(RuntimeError, match="same size as input"):
        dl.repeat_interleave(dl.ones(2), dl.tensor([1, 2, 3]))
    with pytest.raises(RuntimeError, match="integer tensor"):
        dl.repeat_interleave(dl.ones(2), dl.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="0-dim or 1-dim"):
        dl.repeat_interleave(x, dl.tensor([[1, 2]]), 0)
    with pytest.raises(RuntimeError, match="don't multiply up"):
        dl.unflatten(dl.ones(2, 6), 1, (4, 3))
    with pytest.raises(RuntimeError, match="non-empty"):
        dl.unflatten(dl.ones(2, 6), 1, ())
    assert repr(dl.nn.Unflatten(1, (2, 3))) == "Unflatten(dim=1, unflattened_size=(2, 3))"
    assert dl.atleast_1d() == ()
    with pytest.raises(TypeError):
        dl.atleast_1d(3)


def test_addc_errors_and_inplace():
    i = dl.ones(3, dtype=dl.int64)
    with pytest.raises(RuntimeError, match="Integer division with addcdiv"):
        dl.addcdiv(dl.ones(3), i, i)
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.addcmul_(dl.ones(3), dl.ones(3))  # a float result into an int tensor, as torch
    with pytest.raises(TypeError):
        dl.addcmul(dl.ones(3), dl.ones(3), dl.ones(3), 2)  # value is keyword-only
    x = dl.zeros(3, requires_grad=True)
    y = x * 1.0
    t1 = dl.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y.addcmul_(t1, t1, value=0.5)
    y.sum().backward()
    np.testing.assert_allclose(t1.grad.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0, 1.0])


def test_pixel_and_pool_errors():
    with pytest.raises(RuntimeError, match="divisible by the square"):
        F.pixel_shuffle(dl.ones(1, 5, 2, 2), 2)
    with pytest.raises(RuntimeError, match="at least 3 dimensions"):
        F.pixel_shuffle(dl.ones(4, 2), 2)
    with pytest.raises(RuntimeError, match="positive upscale_factor"):
        F.pixel_shuffle(dl.ones(1, 4, 2, 2), 0)
    with pytest.raises(RuntimeError, match="height to be divisible"):
        F.pixel_unshuffle(dl.ones(1, 1, 3, 4), 2)
    with pytest.raises(RuntimeError, match="at most half of kernel size"):
        F.max_pool1d(dl.ones(2, 3, 5), 2, padding=2)
    with pytest.raises(RuntimeError, match="Expected 2 to 3 dimensions"):
        F.avg_pool1d(dl.ones(5), 2)
    with pytest.raises(NotImplementedError):
        F.max_pool1d(dl.ones(2, 3, 5), 2, return_indices=True)
    with pytest.raises(NotImplementedError):
        F.adaptive_max_pool2d(dl.ones(1, 4, 4), 2, return_indices=True)
    with pytest.raises(RuntimeError, match="3D or 4D"):
        F.adaptive_max_pool2d(dl.ones(4, 4), 2)
    assert repr(dl.nn.PixelShuffle(2)) == "PixelShuffle(upscale_factor=2)"
    assert repr(dl.nn.AvgPool1d(2)) == repr(torch.nn.AvgPool1d(2))
    assert repr(dl.nn.MaxPool1d(2)) == repr(torch.nn.MaxPool1d(2))
    assert repr(dl.nn.AdaptiveMaxPool2d((2, None))) == repr(torch.nn.AdaptiveMaxPool2d((2, None)))

"""Entries for the functional layers of dl/nn/functional_layers.py: conv1d,
conv_transpose2d, group/rms/instance norm, interpolate, adaptive_avg_pool2d, embedding with
padding_idx."""
from __future__ import annotations

import numpy as np
import torch.nn.functional as TF

import dl
from dl.nn import functional as F

from .core import OpInfo, Sample, arr, iarr

_LOOSE = {dl.float32: (1e-4, 1e-5), dl.float64: (1e-10, 1e-10)}  # sums of many products
# library kernels with little for fusion to change (a bias add at most): fusion on only
_ON = dict(fusion_modes=(True,))


def _conv1d_samples():
    return [
        Sample(arr((2, 4, 9)), arr((6, 2, 3), 1), arr((6,), 2), stride=2, padding=1,
               groups=2, desc="stride, padding, groups, bias"),
        Sample(arr((2, 4, 9), 3), arr((6, 2, 3), 4), arr((6,), 5), stride=2, padding=1,
               groups=2, noncontig=True, desc="the same, non-contiguous"),
        Sample(arr((2, 3, 8)), arr((4, 3, 4), 1), padding="same", dilation=2,
               desc="'same' (odd total padding), dilation", noncontig=True),
        Sample(arr((1, 3, 5)), arr((2, 3, 1), 1), arr((2,), 2), desc="batch 1, kernel 1"),
        Sample(arr((3, 2, 1)), arr((2, 2, 1), 1), desc="length 1"),
        Sample(arr((2, 3, 7)), arr((4, 3, 3), 1), padding="valid", desc="'valid'"),
        Sample(arr((3, 7)), arr((4, 3, 2), 1), padding=1, desc="unbatched"),
    ]


def _conv_t_samples():
    return [
        Sample(arr((2, 3, 4, 5)), arr((3, 2, 3, 3), 1), arr((2,), 2), stride=2, padding=1,
               output_padding=1, desc="stride 2, padding, output_padding, bias"),
        Sample(arr((2, 3, 4, 5), 3), arr((3, 2, 3, 3), 4), arr((2,), 5), stride=2, padding=1,
               output_padding=1, noncontig=True, desc="the same, non-contiguous"),
        Sample(arr((2, 4, 3, 4)), arr((4, 3, 2, 3), 1), arr((6,), 2), stride=(2, 1),
               groups=2, dilation=(1, 2), desc="groups 2, dilation", noncontig=True),
        Sample(arr((1, 2, 3, 3)), arr((2, 3, 3, 3), 1), padding=1, desc="batch 1, same size"),
        Sample(arr((2, 3, 1, 1)), arr((3, 2, 2, 2), 1), stride=2, desc="1x1 image"),
        Sample(arr((2, 3, 4, 5)), arr((3, 2, 3, 3), 1), padding=1, output_padding=1,
               dilation=2, desc="output_padding >= stride (dilation 2)"),
        Sample(arr((3, 4, 4)), arr((3, 2, 2, 2), 1), stride=2, desc="unbatched"),
    ]


def _gn_samples():
    return [
        Sample(arr((2, 6, 3, 4)), 3, arr((6,), 1), arr((6,), 2), desc="affine, 3 groups"),
        Sample(arr((3, 4, 5)), 2, desc="3-d input, no affine", noncontig=True),
        Sample(arr((1, 4, 1, 2)), 4, arr((4,), 1), arr((4,), 2), eps=1e-3,
               desc="batch 1, two values per group"),
        Sample(arr((2, 4, 2, 3)), 1, arr((4,), 1), None, desc="one group, weight only"),
    ]


def _rms_samples():
    return [
        Sample(arr((3, 4, 6)), (6,), arr((6,), 1), desc="weight, eps=None (finfo)"),
        Sample(arr((2, 3, 5)), (3, 5), arr((3, 5), 1), eps=1e-3, noncontig=True,
               desc="two dims, eps"),
        Sample(arr((1, 1)), (1,), desc="one value"),
        Sample(arr((4, 7)), (7,), desc="no weight"),
    ]


def _in_samples():
    return [
        Sample(arr((2, 3, 4, 5)), weight=arr((3,), 1), bias=arr((3,), 2),
               desc="affine"),
        Sample(arr((2, 3, 6)), desc="3-d input", noncontig=True),
        Sample(arr((1, 2, 3, 3)), eps=1e-3, desc="batch 1"),
        Sample(arr((3, 2, 1, 2)), desc="height 1"),
    ]


def _interp_samples():
    return [
        Sample(arr((2, 3, 5, 4)), scale_factor=(1.7, 0.6), mode="bilinear",
               align_corners=False, desc="bilinear, scale_factor (used as given)"),
        Sample(arr((2, 2, 4, 3)), size=(7, 6), mode="nearest", noncontig=True,
               desc="nearest, size"),
        Sample(arr((2, 2, 4, 3)), size=(7, 5), mode="bilinear", align_corners=True,
               noncontig=True, desc="bilinear, size, align_corners=True"),
        Sample(arr((2, 3, 5, 4)), scale_factor=(1.7, 0.6), mode="nearest",
               desc="nearest, scale_factor"),
        Sample(arr((1, 2, 3, 3)), scale_factor=2, mode="nearest", desc="nearest 2x, batch 1"),
        Sample(arr((1, 2, 3, 3)), scale_factor=2, mode="bilinear", desc="bilinear 2x"),
        Sample(arr((2, 2, 6, 5)), size=(1, 1), mode="nearest", desc="nearest to 1x1"),
        Sample(arr((2, 2, 6, 5)), size=(1, 1), mode="bilinear", align_corners=True,
               desc="bilinear to 1x1 (aligned)"),
        Sample(arr((2, 2, 6, 5)), size=(3, 2), mode="bilinear", desc="bilinear downsample"),
        Sample(arr((2, 1, 1, 1)), size=(3, 4), mode="bilinear", desc="bilinear from 1x1"),
        Sample(arr((2, 2, 5, 4)), scale_factor=0.5, recompute_scale_factor=True,
               desc="nearest, recompute_scale_factor"),
        Sample(arr((2, 3, 5, 4)), scale_factor=(1.7, 0.6), mode="nearest-exact",
               desc="nearest-exact"),
        Sample(arr((2, 3, 5)), size=8, desc="3-d input, nearest"),
        Sample(arr((2, 3, 5)), scale_factor=2.5, mode="linear", desc="linear"),
        Sample(arr((2, 3, 5)), size=3, mode="linear", align_corners=True, noncontig=True,
               desc="linear, size, align_corners=True"),
        Sample(arr((1, 1, 1)), size=4, mode="linear", desc="linear from length 1"),
        # an axis whose size a scale_factor keeps is copied (3 * 1.2 -> 3), not resampled
        Sample(arr((1, 2, 3)), scale_factor=1.2, mode="linear", device=True,
               desc="linear, size kept by the scale"),
        Sample(arr((1, 2, 3, 4)), scale_factor=(1.2, 1.5), mode="bilinear", device=True,
               desc="bilinear, one size kept by the scale"),
        # 1-D nearest uses the scale as given where 2-D takes kept or doubled sizes as 1, 2.
        # No gradient row: PyTorch's 1-D backward takes those shortcuts, against its own
        # forward (ours is the gradient of the forward both compute)
        Sample(arr((1, 2, 3)), scale_factor=2.1, grad=(),
               desc="3-d nearest, size doubled by 2.1"),
        Sample(arr((1, 2, 3)), scale_factor=1.2, grad=(), desc="3-d nearest, size kept by 1.2"),
        Sample(arr((1, 2, 3, 4)), scale_factor=(2.1, 1.2), device=True,
               desc="nearest, sizes doubled and kept by the scales"),
    ]


def _aap_samples():
    return [
        Sample(arr((2, 3, 7, 5)), (3, 2), desc="sizes that do not divide the input"),
        Sample(arr((2, 3, 6, 4)), (3, None), noncontig=True, desc="None keeps a size"),
        Sample(arr((1, 2, 5, 5)), 1, desc="global average, batch 1"),
        Sample(arr((2, 2, 3, 2)), (5, 4), desc="larger than the input"),
        Sample(arr((3, 4, 4)), 2, desc="unbatched"),
    ]


def _emb_samples():
    # the first two (the compiled runtimes') take int32 indices: WGSL has no 64-bit ints
    i32 = np.int32
    return [
        Sample(iarr((3, 4), 6).astype(i32), arr((6, 5), 1), 2, desc="padding_idx 2"),
        Sample(iarr((5,), 4, 2).astype(i32), arr((4, 3), 1), -1,
               desc="negative padding_idx"),
        Sample(iarr((3, 4), 6), arr((6, 5), 1), 2, desc="int64 indices"),
        Sample(iarr((1, 1), 3, 3), arr((3, 1), 1), 0, desc="one index, dim 1"),
        Sample(iarr((2, 3), 5, 4), arr((5, 4), 1), None, desc="no padding_idx"),
    ]


OPS = [
    OpInfo("conv1d", op=lambda *a, **k: F.conv1d(*a, **k),
           ref=lambda *a, **k: TF.conv1d(*a, **k), samples=_conv1d_samples, tol=_LOOSE,
           **_ON),
    OpInfo("conv_transpose2d", op=lambda *a, **k: F.conv_transpose2d(*a, **k),
           ref=lambda *a, **k: TF.conv_transpose2d(*a, **k), samples=_conv_t_samples,
           tol=_LOOSE, **_ON),
    OpInfo("group_norm", op=lambda x, g, w=None, b=None, **k: F.group_norm(x, g, w, b, **k),
           ref=lambda x, g, w=None, b=None, **k: TF.group_norm(x, g, w, b, **k),
           samples=_gn_samples, tol=_LOOSE),
    OpInfo("rms_norm", op=lambda x, ns, w=None, **k: F.rms_norm(x, ns, w, **k),
           ref=lambda x, ns, w=None, **k: TF.rms_norm(x, ns, w, **k), samples=_rms_samples,
           tol=_LOOSE),
    OpInfo("instance_norm", op=lambda x, **k: F.instance_norm(x, **k),
           ref=lambda x, **k: TF.instance_norm(x, **k), samples=_in_samples, tol=_LOOSE),
    OpInfo("interpolate", op=lambda x, **k: F.interpolate(x, **k),
           ref=lambda x, **k: TF.interpolate(x, **k), samples=_interp_samples, tol=_LOOSE, **_ON),
    OpInfo("adaptive_avg_pool2d", op=lambda x, s: F.adaptive_avg_pool2d(x, s),
           ref=lambda x, s: TF.adaptive_avg_pool2d(x, s), samples=_aap_samples, tol=_LOOSE,
           **_ON),
    OpInfo("embedding_padding_idx", op=lambda i, w, p: F.embedding(i, w, padding_idx=p),
           ref=lambda i, w, p: TF.embedding(i, w, padding_idx=p), samples=_emb_samples,
           **_ON, note="no max_norm, scale_grad_by_freq or sparse"),
]

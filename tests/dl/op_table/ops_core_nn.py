"""Entries for the nn.functional ops dl had before the op table (commit b41ee54): conv2d,
max_pool2d, avg_pool2d, batch_norm (training and eval), cross_entropy, nll_loss, mse_loss,
embedding, scaled_dot_product_attention, dropout."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as TF

import dl
import dl.nn.functional as F

from .core import ALL_FLOATS, OpInfo, Sample, arr, iarr, ties

_CONV_TOL = {dl.float32: (1e-4, 1e-5), dl.float64: (1e-10, 1e-10)}


def _conv_samples():
    return [Sample(arr((2, 3, 6, 6)), arr((4, 3, 3, 3), 1), arr((4,), 2)),
            Sample(arr((1, 2, 7, 5), 3), arr((3, 2, 3, 2), 4), None, stride=2, padding=1,
                   desc="stride 2, padding 1, no bias"),
            Sample(arr((2, 4, 6, 6), 5), arr((4, 2, 3, 3), 6), arr((4,), 7), groups=2,
                   desc="groups 2"),
            Sample(arr((1, 2, 7, 7), 8), arr((2, 2, 3, 3), 9), arr((2,), 10), dilation=2,
                   padding=(1, 2), desc="dilation 2, padding pair"),
            Sample(arr((2, 3, 5, 6), 11), arr((2, 3, 1, 1), 12), arr((2,), 13),
                   noncontig=True, desc="transposed input (H, W swapped), 1x1"),
            Sample(arr((0, 3, 5, 5)), arr((2, 3, 3, 3), 14), arr((2,), 15),
                   desc="size-0 batch"),
            # PyTorch's string paddings: 'same' with an even kernel and a dilation (odd
            # totals: the extra zero after), 'valid'
            Sample(arr((1, 2, 6, 5), 16), arr((3, 2, 2, 3), 17), arr((3,), 18),
                   padding="same", dilation=(1, 2), device=True, desc="padding 'same'"),
            Sample(arr((1, 2, 6, 5), 19), arr((3, 2, 3, 3), 20), None, padding="valid",
                   desc="padding 'valid'"),
            Sample(arr((2, 5, 4), 21), arr((3, 2, 3, 3), 22), arr((3,), 23), padding=1,
                   desc="unbatched (C, H, W)")]


def _pool_samples(avg=False):
    ss = [Sample(arr((2, 3, 6, 6)), 2),
          Sample(arr((1, 2, 7, 5), 1), 3, stride=2, padding=1, desc="stride 2, padding 1"),
          Sample(arr((2, 2, 6, 8), 2), (2, 3), desc="kernel pair"),
          Sample(arr((1, 2, 6, 6), 3), 2, noncontig=True, desc="transposed H, W"),
          Sample(ties((1, 2, 4, 4), 4), 2, desc="ties"),
          Sample(arr((2, 5, 4), 7), 2, desc="unbatched (C, H, W)"),
          # ceil_mode: a last window cut by the input's end; past the padding (6 rows, 3 / 2 /
          # 1: its divisor stops at the padding); unbatched
          Sample(arr((1, 3, 7, 9), 8), 2, ceil_mode=True, desc="ceil_mode"),
          Sample(arr((2, 2, 6, 6), 9), 3, stride=2, padding=1, ceil_mode=True,
                 desc="ceil_mode past the padding", device=True),
          Sample(arr((2, 5, 5), 10), (2, 3), stride=(2, 2), ceil_mode=True,
                 desc="ceil_mode unbatched")]
    if avg:
        ss.append(Sample(arr((1, 2, 5, 5), 5), 3, stride=2, padding=1,
                         count_include_pad=False, desc="count_include_pad False"))
        ss.append(Sample(arr((1, 2, 6, 7), 11), 3, stride=2, padding=1, ceil_mode=True,
                         count_include_pad=False, desc="ceil_mode count_include_pad False",
                         device=True))
    else:
        ss.append(Sample(arr((1, 2, 7, 7), 6), 2, dilation=2, desc="dilation 2"))
        ss.append(Sample(arr((1, 2, 8, 8), 12), 3, stride=2, dilation=2, padding=1,
                         ceil_mode=True, desc="ceil_mode dilation 2", device=True))
    return ss


def _bn(training):
    """batch_norm with fresh running stats on each side; returns (y, running_mean,
    running_var) so the in-place update of the running stats is compared too."""
    def run(mod, x, w, b):
        c = x.shape[1]
        if mod is torch:
            rm, rv = torch.zeros(c, dtype=x.dtype) + 0.1, torch.ones(c, dtype=x.dtype) * 2
            y = TF.batch_norm(x, rm, rv, w, b, training=training, momentum=0.3, eps=1e-4)
        else:
            rm = dl.zeros(c, dtype=x.dtype, device=x.device) + 0.1
            rv = dl.ones(c, dtype=x.dtype, device=x.device) * 2.0
            y = F.batch_norm(x, rm, rv, w, b, training=training, momentum=0.3, eps=1e-4)
        return y, rm, rv
    return run


def _bn_samples():
    return [Sample(arr((4, 3, 5, 5)), arr((3,), 1), arr((3,), 2)),
            Sample(arr((6, 4), 3), arr((4,), 4), arr((4,), 5), desc="2-D (N, C)"),
            Sample(arr((2, 3, 4, 5), 6), None, None, noncontig=True,
                   desc="transposed view, no affine"),
            Sample(arr((3, 2, 7), 7), arr((2,), 8), None, desc="3-D, weight only")]


def _xent_samples():
    return [Sample(arr((4, 5)), iarr((4,), 5)),
            Sample(arr((3, 6), 1), iarr((3,), 6, 1), reduction="sum", desc="sum"),
            Sample(arr((3, 6), 2), iarr((3,), 6, 2), reduction="none", desc="none"),
            Sample(arr((5, 4), 3), iarr((5,), 4, 3), noncontig=True, desc="transposed logits"),
            Sample(arr((2, 4, 3), 4), iarr((2, 3), 4, 4), desc="(N, C, d) logits"),
            Sample(arr((3, 5), 5), arr((3, 5), 6, 0, 1), grad=(0,), desc="probabilities"),
            Sample(arr((3, 5), 7), iarr((3,), 5, 7), label_smoothing=0.1,
                   desc="label smoothing"),
            Sample(arr((5,), 8), np.array(2), desc="1-D logits, 0-dim target"),
            Sample(np.array([[50.0, -50.0, 0.0], [-1e4, 1e4, 0.0]]), np.array([0, 2]),
                   desc="large logits"),
            Sample(arr((4, 5), 9), np.array([1, -100, 3, -100]), desc="ignored targets"),
            Sample(arr((2, 4, 3), 10), np.array([[2, 0, 2], [1, 2, 3]]), ignore_index=2,
                   reduction="sum", desc="ignore_index, (N, C, d)")]


def _sdpa(mod, q, k, v, mask=None, causal=False):
    if mod is torch:
        return TF.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)


OPS = [
    OpInfo("conv2d", op=lambda x, w, b, **k: F.conv2d(x, w, b, **k),
           ref=lambda x, w, b, **k: TF.conv2d(x, w, b, **k), samples=_conv_samples,
           tol=_CONV_TOL, grad_tol={dl.float32: (1e-3, 1e-4)}, device_samples=1),
    OpInfo("conv2d_act", op=lambda x, w, b: F.conv2d(x, w, b, act="relu"),
           ref=lambda x, w, b: torch.relu(TF.conv2d(x, w, b)), tol=_CONV_TOL, grad=False,
           samples=lambda: _conv_samples()[:1],
           note="dl's conv2d takes a fused activation `act` (PyTorch's does not)"),
    OpInfo("max_pool2d", op=lambda x, k, **kw: F.max_pool2d(x, k, **kw),
           ref=lambda x, k, **kw: TF.max_pool2d(x, k, **kw), samples=lambda: _pool_samples(),
           note="max_pool2d has no return_indices"),
    OpInfo("avg_pool2d", op=lambda x, k, **kw: F.avg_pool2d(x, k, **kw),
           ref=lambda x, k, **kw: TF.avg_pool2d(x, k, **kw),
           samples=lambda: _pool_samples(True),
           note="avg_pool2d has no divisor_override"),
    OpInfo("batch_norm_train", op=lambda x, w, b: _bn(True)(dl, x, w, b),
           ref=lambda x, w, b: _bn(True)(torch, x, w, b), samples=_bn_samples,
           dtypes=ALL_FLOATS, tol={dl.float32: (1e-4, 1e-5), dl.float64: (1e-10, 1e-10),
                                   dl.float16: (4e-3, 2e-3)},
           note="float16/bfloat16 batch_norm rounds every step to the half type (PyTorch: "
                "float32 inside, one rounding): 1-2 ulp apart"),
    OpInfo("batch_norm_eval", op=lambda x, w, b: _bn(False)(dl, x, w, b),
           ref=lambda x, w, b: _bn(False)(torch, x, w, b), samples=_bn_samples,
           dtypes=ALL_FLOATS),
    OpInfo("cross_entropy", op=lambda x, t, **k: F.cross_entropy(x, t, **k),
           ref=lambda x, t, **k: TF.cross_entropy(x, t, **k), samples=_xent_samples,
           dtypes=ALL_FLOATS, tol={dl.float32: (1e-5, 1e-5)}),
    OpInfo("nll_loss", op=lambda x, t, **k: F.nll_loss(x, t, **k),
           ref=lambda x, t, **k: TF.nll_loss(x, t, **k), dtypes=ALL_FLOATS,
           samples=lambda: [s for s in _xent_samples()[:5]] + _xent_samples()[-2:]),
    OpInfo("mse_loss", op=lambda x, t, **k: F.mse_loss(x, t, **k),
           ref=lambda x, t, **k: TF.mse_loss(x, t, **k), dtypes=ALL_FLOATS,
           samples=lambda: [Sample(arr((3, 5)), arr((3, 5), 1)),
                            Sample(arr((4, 6), 2), arr((4, 6), 3), reduction="sum",
                                   noncontig=True, desc="sum, views"),
                            Sample(arr((2, 3), 4), arr((2, 3), 5), reduction="none"),
                            Sample(arr((0, 3)), arr((0, 3)), reduction="sum", desc="size 0")],
           note="mse_loss does not broadcast input and target (PyTorch warns and does)"),
    OpInfo("embedding", op=lambda i, w: F.embedding(i, w), ref=lambda i, w: TF.embedding(i, w),
           dtypes=ALL_FLOATS,
           samples=lambda: [Sample(iarr((2, 3), 5), arr((5, 4))),
                            Sample(np.array([1, 1, 0]), arr((3, 2), 1),
                                   desc="repeated: grads accumulate"),
                            Sample(iarr((0,), 4), arr((4, 3), 2), desc="no indices"),
                            Sample(np.array(2), arr((3, 2), 3), desc="0-dim index")],
           note="embedding has no padding_idx, max_norm or sparse"),
    OpInfo("scaled_dot_product_attention",
           op=lambda q, k, v, m=None, **kw: _sdpa(dl, q, k, v, m, **kw),
           ref=lambda q, k, v, m=None, **kw: _sdpa(torch, q, k, v, m, **kw),
           dtypes=ALL_FLOATS, tol={dl.float32: (1e-5, 1e-5)},
           samples=lambda: [
               Sample(arr((2, 3, 4)), arr((2, 5, 4), 1), arr((2, 5, 6), 2)),
               Sample(arr((1, 2, 4, 8), 3), arr((1, 2, 4, 8), 4), arr((1, 2, 4, 8), 5),
                      causal=True, desc="causal"),
               # head size and keys in whole lines (the fused kernel without a gradient):
               # the causal mask is top-left aligned (query i sees keys 0 .. i) at Lq != Lk
               Sample(arr((1, 2, 5, 8), 17), arr((1, 2, 16, 8), 18), arr((1, 2, 16, 8), 19),
                      causal=True, device=True, desc="causal, fewer queries than keys"),
               Sample(arr((1, 2, 20, 8), 20), arr((1, 2, 16, 8), 21), arr((1, 2, 16, 8), 22),
                      causal=True, device=True, desc="causal, more queries than keys"),
               Sample(arr((2, 3, 4), 6), arr((2, 5, 4), 7), arr((2, 5, 4), 8),
                      np.random.default_rng(9).uniform(0, 1, (3, 5)) < 0.7,
                      desc="bool mask"),
               Sample(arr((2, 3, 4), 10), arr((2, 5, 4), 11), arr((2, 5, 4), 12),
                      arr((3, 5), 13), desc="float mask"),
               Sample(arr((2, 3, 4), 23), arr((2, 5, 4), 24), arr((2, 5, 4), 25),
                      np.array([[True] * 5, [False] * 5, [True, False] * 2 + [True]]),
                      device=True, desc="a query with every key masked (zeros)"),
               # the same by an additive -inf mask: zeros, and no NaN in the gradient
               Sample(arr((2, 3, 4), 26), arr((2, 5, 4), 27), arr((2, 5, 4), 28),
                      np.where(np.arange(3)[:, None] == 1, -np.inf, arr((3, 5), 29)),
                      device=True, desc="a float mask with a row of -inf"),
               Sample(arr((2, 4, 3), 14), arr((2, 4, 3), 15), arr((2, 4, 3), 16),
                      noncontig=True, desc="transposed views")],
           note="scaled_dot_product_attention has no scale or enable_gqa arguments"),
    OpInfo("dropout_eval", op=lambda x: F.dropout(x, 0.5, training=False),
           ref=lambda x: TF.dropout(x, 0.5, training=False), samples=lambda: [
               Sample(arr((3, 4)))]),
    OpInfo("dropout_p0", op=lambda x: F.dropout(x, 0.0), ref=lambda x: TF.dropout(x, 0.0),
           samples=lambda: [Sample(arr((3, 4)))]),
    OpInfo("dropout_p1", op=lambda x: F.dropout(x, 1.0), ref=lambda x: TF.dropout(x, 1.0),
           samples=lambda: [Sample(arr((3, 4)))], signed_zero=False),
]

"""Functional forms: activations, dropout, layers on the kernel library (linear, conv2d,
pools, norms, embedding, attention) and losses."""
from __future__ import annotations

import math

from .. import dtypes, ops
from ..autograd import no_grad
from ..ops import attention as attention_op
from ..ops import batch_norm as batch_norm_op
from ..ops import xent as xent_op
from ..ops.bounds import check_bounds
from ..ops.conv import avg_pool2d, conv2d, max_pool2d
from ..ops.elementwise import gelu, sigmoid, tanh
from ..ops.indexing import pad
from ..ops.linalg import linear
from ..ops.rows import layer_norm, log_softmax, softmax
from ..tensor import Tensor
from .functional_losses import _warn_size

__all__ = ["avg_pool2d", "batch_norm", "conv2d", "cross_entropy", "dropout", "embedding",
           "gelu", "layer_norm", "linear", "log_softmax", "max_pool2d", "mse_loss",
           "nll_loss", "pad", "scaled_dot_product_attention", "sigmoid", "softmax", "tanh"]


def dropout(x: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, *,
            generator=None) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1-p). The mask comes
    from the counter-based RNG inside the same fused kernel (and is recomputed, not stored,
    for the gradient). inplace: PyTorch's (x's storage takes the result, x is returned)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x

    def drop(t):
        if p == 1.0:
            return t * 0.0
        keep = ops.rand(*t.shape, generator=generator,
                        dtype=t.dtype if t.dtype.is_float else None, device=t.device) >= p
        return ops.where(keep, t * (1.0 / (1.0 - p)), 0.0)
    return ops.inplace.apply(x, "dropout", drop, (), {}) if inplace else drop(x)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:  # noqa: A002
    """The mean squared error (input - target)**2, reduced by `reduction`: "mean",
    "sum" or "none". Shapes that differ broadcast with PyTorch's warning."""
    _warn_size(input, target)
    d = input - target
    return _reduce(d * d, reduction)


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "sum":
        return ops.sum(loss)
    if reduction == "mean":
        return ops.mean(loss)
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _class_args(what: str, weight, reduction: str) -> None:
    if isinstance(weight, str):
        raise TypeError(f"{what}: the third argument is the class weights (as PyTorch's); "
                        f"pass the reduction as reduction={weight!r}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _nll_terms(what: str, logp: Tensor, target: Tensor, weight, ignore_index: int):
    """(-w[t] * logp[n, t] per target entry, its weight w[t], the mask of the kept entries)
    for class targets t (nll_loss, and cross_entropy's general path): entries equal to
    ignore_index weigh 0 and read class 0; the others pass PyTorch's bounds check (an
    IndexError, not a read outside the logits)."""
    if target.dtype not in (dtypes.int32, dtypes.int64):
        raise TypeError(f"{what}: target must hold class indices (int), got {target.dtype}")
    if target.shape != logp.shape[:1] + logp.shape[2:]:
        raise ValueError(f"{what}: target shape {target.shape} does not fit input "
                         f"{logp.shape}")
    keep = target != ignore_index
    safe = ops.where(keep, target, 0)
    check_bounds(safe, logp.shape[1], what, 1, wrap=False)
    picked = ops.gather(logp, 1, safe.unsqueeze(1)).squeeze(1)
    wt = keep.to(logp.dtype)
    if weight is not None:
        wt = wt * ops.index_select(weight.to(logp.dtype), 0, safe.reshape(-1)).reshape(
            safe.shape)
    return -picked * wt, wt, keep


def _weighted(loss: Tensor, wt: Tensor, reduction: str) -> Tensor:
    """The reduction of per-element losses already multiplied by their weights wt (0 where
    ignored; constants): the mean divides by the weights' sum, as PyTorch's, and over no
    weight at all is nan with zero gradients (1 / 0 times the zero gradient of an ignored
    entry would be nan)."""
    if reduction == "none":
        return loss
    if reduction == "sum":
        return ops.sum(loss)
    with no_grad():
        wsum = ops.sum(wt)
        empty = wsum == 0
        inv = ops.where(empty, 0.0, 1.0 / ops.where(empty, 1.0, wsum)).to(loss.dtype)
        nan = ops.where(empty, math.nan, 0.0).to(loss.dtype)
    return ops.sum(loss) * inv + nan


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, *,  # noqa: A002
             ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """-w[t] * input[n, t] with t = target[n, ...] (input: log-probabilities, class dim 1),
    as PyTorch's: `weight` a per-class weight (C,), entries whose target is ignore_index
    count for nothing, and the mean divides by the weights of the others (by their number
    without weights). A target outside [0, C) other than ignore_index is an IndexError."""
    _class_args("nll_loss", weight, reduction)
    loss, wt, _ = _nll_terms("nll_loss", input, target, weight, ignore_index)
    return _weighted(loss, wt, reduction)


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, *,  # noqa: A002
                  ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """log_softmax over the class dim (1) and the negative log-likelihood of `target`
    (class indices, or class probabilities of input's shape), as PyTorch's: `weight` a
    per-class weight (C,), `ignore_index` (class targets) entries that count for nothing,
    `label_smoothing` the share of the loss spread over all classes. A class target
    outside [0, C) other than ignore_index is an IndexError."""
    _class_args("cross_entropy", weight, reduction)
    if input.ndim == 1:
        y = cross_entropy(input.unsqueeze(0), target.unsqueeze(0), weight,
                          ignore_index=ignore_index, reduction=reduction,
                          label_smoothing=label_smoothing)
        return y.reshape(()) if reduction == "none" else y
    classes = input.shape[1]
    if not target.dtype.is_float and xent_op.supported(input, target, label_smoothing, weight):
        return xent_op.cross_entropy_rows(input, target, reduction, ignore_index)
    logp = log_softmax(input, 1)
    shape = [1, classes] + [1] * (input.ndim - 2)
    w = None if weight is None else weight.to(input.dtype).reshape(shape)
    if target.dtype.is_float:
        if target.shape != input.shape:
            raise ValueError(f"cross_entropy: probabilities of shape {target.shape} for "
                             f"input {input.shape}")
        if label_smoothing:
            target = target * (1.0 - label_smoothing) + label_smoothing / classes
        wlogp = logp if w is None else logp * w
        return _reduce(-ops.sum(target * wlogp, 1), reduction)
    loss, wt, keep = _nll_terms("cross_entropy", logp, target, weight, ignore_index)
    if label_smoothing:  # PyTorch: (1 - e) * nll + e / C * sum_c w_c * -logp_c
        spread = -ops.sum(logp if w is None else logp * w, 1) * keep.to(input.dtype)
        loss = loss * (1.0 - label_smoothing) + spread * (label_smoothing / classes)
    return _weighted(loss, wt, reduction)


def batch_norm(x: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise over every dim but the channels (dim 1). Training: batch statistics (the
    mean, then the squared deviations, each one reduction fused on read), running stats
    updated in place with the unbiased variance; eval: the running stats. Training on one
    value per channel raises ValueError, as PyTorch (its variance is 0 / 0)."""
    if training and x.ndim >= 2 and math.prod((x.shape[0], *x.shape[2:])) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input "
                         f"size {tuple(x.shape)}")
    if training and batch_norm_op.supported(x, running_mean, running_var):
        return batch_norm_op.batch_norm_train(x, running_mean, running_var, weight, bias,
                                              momentum, eps)
    dims = [0] + list(range(2, x.ndim))
    shape = [1, x.shape[1]] + [1] * (x.ndim - 2)
    if training:
        mean = ops.mean(x, dims, keepdim=True)
        d = x - mean
        var = ops.mean(d * d, dims, keepdim=True)
        if running_mean is not None:
            n = x.numel() // x.shape[1]
            with no_grad():
                # the new values are ours: each written in the kernel that computes it
                ops.assign(running_mean, running_mean * (1.0 - momentum)
                           + mean.reshape(-1) * momentum, internal=True)
                ops.assign(running_var, running_var * (1.0 - momentum)
                           + var.reshape(-1) * (momentum * n / max(n - 1, 1)), internal=True)
    else:
        if running_mean is None:
            raise ValueError("batch_norm in eval mode needs running statistics")
        d = x - running_mean.reshape(shape)
        var = running_var.reshape(shape)
    y = d * (var + eps).rsqrt()
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def embedding(idx: Tensor, weight: Tensor) -> Tensor:
    """Rows of `weight` picked by the int tensor idx: (*idx.shape, dim)."""
    flat = ops.index_select(weight, 0, idx.reshape(-1))
    return flat.reshape(*idx.shape, weight.shape[1])


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, attn_mask=None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 training: bool = True, return_weights: bool = False,
                                 _heads_last: bool = False):
    """softmax(q @ k^T / sqrt(d) + mask) @ v over (..., L, d) operands. A bool mask marks
    the positions *allowed* (PyTorch's convention here); a float mask is added; a query
    with every key masked gives zeros (PyTorch's). is_causal: query i sees keys 0 .. i
    (top-left, at any Lq and Lk); it takes no attn_mask besides (RuntimeError, as PyTorch).

    Without a gradient, a mask other than causality, dropout or the weights, it runs as one
    fused kernel where the shapes allow (dl/kernels/attention.py); the same values either
    way. (_heads_last, for MultiheadAttention: a fused result may be a (B, H, L, d) view of
    (B, L, H, d) memory.)"""
    if attn_mask is not None and is_causal:
        raise RuntimeError("scaled_dot_product_attention: an explicit attn_mask should not be "
                           "set when is_causal=True (PyTorch raises too)")
    scale = 1.0 / math.sqrt(q.shape[-1])
    if attn_mask is None and not return_weights and not (dropout_p and training):
        out = attention_op.fused(q, k, v, scale, is_causal, _heads_last)
        if out is not None:
            return out
    scores = ops.matmul(q * scale, k.mT)  # the scale fuses into q's copy
    if is_causal:
        lq, lk = scores.shape[-2:]
        attn_mask = ops.arange(lk, device=q.device).unsqueeze(0) <= \
            ops.arange(lq, device=q.device).unsqueeze(1)
    masked = attn_mask is not None
    if masked:
        if attn_mask.dtype is dtypes.bool_:
            scores = ops.where(attn_mask, scores, float("-inf"))
        else:
            scores = scores + attn_mask
    dead = None
    if masked and not return_weights:
        # PyTorch's safe softmax: a query whose every key is masked attends to nothing
        # (zeros, where a plain softmax gives NaN; MultiheadAttention's weights keep NaN).
        # Its scores are replaced before the softmax too: a NaN there would reach the
        # gradient through an additive mask (a bool mask's where already stops it)
        dead = (scores == float("-inf")).all(-1, keepdim=True)
        scores = ops.where(dead, 0.0, scores)
    w = softmax(scores, -1)
    if dead is not None:
        w = ops.where(dead, 0.0, w)
    if dropout_p:
        w = dropout(w, dropout_p, training)
    out = ops.matmul(w, v)
    return (out, w) if return_weights else out


# the functional surface beyond the core, one module per family (each exports its __all__)
from . import (  # noqa: E402
    functional_act,
    functional_act_hard,
    functional_distance,
    functional_dropout,
    functional_layers,
    functional_losses,
    functional_one_hot,
    functional_pixel,
    functional_pool1d,
    functional_softmin,
)
from .functional_act import *  # noqa: E402, F403
from .functional_act_hard import *  # noqa: E402, F403
from .functional_distance import *  # noqa: E402, F403
from .functional_dropout import *  # noqa: E402, F403
from .functional_layers import *  # noqa: E402, F403
from .functional_losses import *  # noqa: E402, F403
from .functional_one_hot import *  # noqa: E402, F403
from .functional_pixel import *  # noqa: E402, F403
from .functional_pool1d import *  # noqa: E402, F403
from .functional_softmin import *  # noqa: E402, F403

__all__ += functional_act.__all__ + functional_layers.__all__ + functional_losses.__all__
__all__ += functional_distance.__all__ + functional_one_hot.__all__ + functional_softmin.__all__
__all__ += functional_pixel.__all__ + functional_pool1d.__all__
__all__ += functional_act_hard.__all__ + functional_dropout.__all__

"""Functional losses beyond the core: binary cross entropy (with logits), l1, smooth l1, huber,
kl_div, cosine embedding.

Each loss is composed of dl ops, so its elementwise part and the reduction's read fuse into
few kernels, forward and backward. The formulas are PyTorch's (aten's CPU kernels and
torch/_decomp): BCE clamps each log at -100 and its input gradient is (x - y) /
max(x (1 - x), 1e-12); BCE with logits uses log-sigmoid in its log-sum-exp form; KL
divergence uses xlogy(t, t) (0 where t is 0). The legacy `size_average` / `reduce`
arguments are taken and mapped to a reduction as PyTorch does."""
from __future__ import annotations

import warnings

from .. import ops
from .. import shapes as _shapes
from ..autograd import Function
from ..tensor import Tensor

__all__ = ["binary_cross_entropy", "binary_cross_entropy_with_logits", "cosine_embedding_loss",
           "huber_loss", "kl_div", "l1_loss", "smooth_l1_loss"]

_REDUCTIONS = ("none", "mean", "sum")


def _legacy_reduction(size_average, reduce, reduction: str) -> str:
    """PyTorch's `_Reduction.legacy_get_string`: the deprecated size_average / reduce
    arguments, where given, decide the reduction (each defaults to True)."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    got = "none" if not reduce else "mean" if size_average else "sum"
    warnings.warn(f"size_average and reduce args will be deprecated, please use "
                  f"reduction='{got}' instead.", UserWarning, stacklevel=3)
    return got


def _check_reduction(reduction: str, name: str, extra: tuple = ()) -> None:
    if reduction not in _REDUCTIONS + extra:
        allowed = ", ".join(repr(r) for r in _REDUCTIONS + extra)
        raise ValueError(f"{name}: {reduction!r} is not a valid value for reduction "
                         f"(expected one of {allowed})")


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "sum":
        return ops.sum(loss)
    return ops.mean(loss)  # nan for an empty loss, as PyTorch's


def _warn_size(input: Tensor, target: Tensor) -> None:  # noqa: A002
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({list(target.shape)}) that is different to the "
                      f"input size ({list(input.shape)}). This will likely lead to incorrect "
                      "results due to broadcasting. Please ensure they have the same size.",
                      UserWarning, stacklevel=3)


def _broadcast(name: str, *xs: Tensor) -> tuple:
    """The operands expanded to their common shape (the error names each shape)."""
    try:
        shape = _shapes.broadcast_shapes(*(x.shape for x in xs))
    except ValueError as e:
        raise ValueError(f"{name}: shapes {', '.join(str(tuple(x.shape)) for x in xs)} "
                         f"do not broadcast ({e})") from None
    return tuple(x if tuple(x.shape) == tuple(shape) else x.expand(*shape) for x in xs)


def _as_tensor(v, like: Tensor) -> Tensor:
    if isinstance(v, Tensor):
        return v
    return ops.tensor(v, dtype=like.dtype, device=like.device)


# ---- binary cross entropy ------------------------------------------------------------------
class _BCE(Function):
    """-(y * max(log x, -100) + (1 - y) * max(log1p(-x), -100)) * w, pointwise, with
    PyTorch's own gradients: (x - y) / max(x (1 - x), 1e-12) * w for the input (finite at
    x = 0 and 1, where the log's clamp would give 0 / 0) and -logit(x) * w for the target.
    The weight takes no gradient (PyTorch does not differentiate it)."""

    @staticmethod
    def forward(ctx, x, y, w):
        ctx.save_for_backward(x, y, w)
        loss = (y - 1.0) * ops.clamp_min(ops.log1p(-x), -100.0) - \
            y * ops.clamp_min(ops.log(x), -100.0)
        return loss if w is None else loss * w

    @staticmethod
    def backward(ctx, g):
        x, y, w = ctx.saved_tensors
        if w is not None:
            g = g * w
        gx = g * (x - y) / ops.clamp_min(x * (1.0 - x), 1e-12)
        gy = g * (ops.log1p(-x) - ops.log(x))
        return gx, gy, None


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,  # noqa: A002
                         size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """The binary cross entropy of probabilities `input` against `target` (same shape),
    -w (y log x + (1 - y) log(1 - x)) with each log clamped at -100 (PyTorch's), reduced by
    `reduction` ("mean", "sum", "none"). weight broadcasts to the target's shape.

    Unlike PyTorch, inputs outside [0, 1] are not checked (that would read the tensor back
    to the host): they give nan."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "binary_cross_entropy")
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({list(target.shape)}) that is different to "
                         f"the input size ({list(input.shape)}) is deprecated. Please ensure "
                         "they have the same size.")
    if weight is not None:
        weight = _as_tensor(weight, input)
        shape = _shapes.broadcast_shapes(target.shape, weight.shape)
        if tuple(shape) != tuple(input.shape):
            raise ValueError(f"binary_cross_entropy: weight of size {list(weight.shape)} "
                             f"does not broadcast to the input size {list(input.shape)}")
        weight = weight.expand(*shape)
    return _reduce(_BCE.apply(input, target, weight), reduction)


def _log_sigmoid(x: Tensor) -> Tensor:
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): no overflow for any x."""
    return ops.minimum(x, 0.0) - ops.log1p(ops.exp(-ops.abs(x)))


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,  # noqa: A002
                                     weight: Tensor | None = None, size_average=None,
                                     reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """The binary cross entropy of sigmoid(input) against `target` (same shape), computed
    from the logits stably as PyTorch: (1 - y) x - (1 + (pos_weight - 1) y) log_sigmoid(x),
    times weight. pos_weight (broadcast along the last, class dim) weighs the positive
    examples; weight broadcasts to the input's shape."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "binary_cross_entropy_with_logits")
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({list(target.shape)}) must be the same as input size "
                         f"({list(input.shape)})")
    log_sig = _log_sigmoid(input)
    if pos_weight is not None:
        pos_weight = _as_tensor(pos_weight, input)
        _broadcast("binary_cross_entropy_with_logits (pos_weight)", input, pos_weight)
        log_sig = log_sig * ((pos_weight - 1.0) * target + 1.0)
    loss = (1.0 - target) * input - log_sig
    if weight is not None:
        weight = _as_tensor(weight, input)
        _broadcast("binary_cross_entropy_with_logits (weight)", input, weight)
        loss = loss * weight
    if tuple(loss.shape) != tuple(input.shape):
        raise ValueError(f"binary_cross_entropy_with_logits: weight or pos_weight broadcast "
                         f"the loss to {list(loss.shape)}, not the input size "
                         f"{list(input.shape)}")
    return _reduce(loss, reduction)


# ---- l1, smooth l1, huber ------------------------------------------------------------------
def _weighted(loss: Tensor, weight, reduction: str, mean_by_weight: bool) -> Tensor:
    """PyTorch's weighted l1 / huber: `mean` is sum(loss w) / sum(w) for l1, mean(loss w)
    for huber."""
    if weight is None:
        return _reduce(loss, reduction)
    weight = _as_tensor(weight, loss)
    if tuple(weight.shape) != tuple(loss.shape):
        raise ValueError(f"Weights and input must have the same size (weight "
                         f"{list(weight.shape)}, input {list(loss.shape)}).")
    loss = loss * weight
    if reduction == "mean" and mean_by_weight:
        return ops.sum(loss) / ops.sum(weight)
    return _reduce(loss, reduction)


def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,  # noqa: A002
            reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """The absolute error |input - target| (broadcast, with PyTorch's warning where the
    shapes differ), reduced by `reduction`. With `weight` (input's shape) "mean" is
    sum(w |d|) / sum(w), as PyTorch's."""
    _warn_size(input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "l1_loss")
    input, target = _broadcast("l1_loss", input, target)  # noqa: A001
    return _weighted(ops.abs(input - target), weight, reduction, True)


def _smooth(d: Tensor, beta: float) -> Tensor:
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta."""
    a = ops.abs(d)
    return ops.where(a < beta, a * a * (0.5 / beta), a - 0.5 * beta)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,  # noqa: A002
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """0.5 d^2 / beta where |d| < beta, else |d| - beta / 2, with d = input - target
    (broadcast); beta 0 is the l1 loss."""
    _warn_size(input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "smooth_l1_loss")
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    input, target = _broadcast("smooth_l1_loss", input, target)  # noqa: A001
    d = input - target
    return _reduce(ops.abs(d) if beta == 0.0 else _smooth(d, float(beta)), reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean",  # noqa: A002
               delta: float = 1.0, weight: Tensor | None = None) -> Tensor:
    """0.5 d^2 where |d| < delta, else delta (|d| - delta / 2), with d = input - target
    (broadcast): delta times the smooth l1 loss of beta = delta. weight: input's shape."""
    _warn_size(input, target)
    _check_reduction(reduction, "huber_loss")
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    input, target = _broadcast("huber_loss", input, target)  # noqa: A001
    a = ops.abs(input - target)
    loss = ops.where(a < delta, a * a * 0.5, (a - 0.5 * delta) * float(delta))
    return _weighted(loss, weight, reduction, False)


# ---- kl divergence ---------------------------------------------------------------------------
def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None,  # noqa: A002
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """The pointwise KL divergence of log-probabilities `input` from `target`:
    xlogy(t, t) - t x (0 where t is 0), or exp(t) (t - x) with log_target. reduction:
    "mean" (over every element; PyTorch's warning), "batchmean" (the sum over input.size(0),
    the KL divergence's definition), "sum" or "none"."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and "
                      "the support size.'batchmean' divides only by the batch size, and "
                      "aligns with the KL div math definition.'mean' will be changed to "
                      "behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=2)
    _check_reduction(reduction, "kl_div", ("batchmean",))
    input, target = _broadcast("kl_div", input, target)  # noqa: A001
    if log_target:
        loss = ops.exp(target) * (target - input)
    else:
        loss = ops.where(target == 0, 0.0, target * ops.log(target)) - target * input
    if reduction == "batchmean":
        total = ops.sum(loss)
        return total / input.shape[0] if input.ndim else total
    return _reduce(loss, reduction)


# ---- cosine embedding ------------------------------------------------------------------------
def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                          size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1 (0
    elsewhere), over rows of (N, D) inputs with an (N,) target, or (D,) inputs with a 0-d
    target. The cosine is PyTorch's: sum(x1 x2) / sqrt((|x1|^2 + 1e-12)(|x2|^2 + 1e-12))."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "cosine_embedding_loss")
    tdim = target.ndim
    if tdim not in (0, 1):
        raise RuntimeError(f"0D or 1D target tensor expected, multi-target not supported "
                           f"(target size {list(target.shape)})")
    if tdim == 1 and (input1.ndim != 2 or input2.ndim != 2):
        raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with "
                           f"sizes {list(input1.shape)} and {list(input2.shape)}.")
    if tdim == 0 and (input1.ndim != 1 or input2.ndim != 1):
        raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with "
                           f"sizes {list(input1.shape)} and {list(input2.shape)}.")
    input1, input2 = _broadcast("cosine_embedding_loss", input1, input2)
    if tdim == 1 and target.shape[0] not in (1, input1.shape[0]):
        raise RuntimeError(f"cosine_embedding_loss: target of size {list(target.shape)} for "
                           f"inputs of size {list(input1.shape)}")
    dim = tdim
    prod = ops.sum(input1 * input2, dim)
    mag1 = ops.sum(input1 * input1, dim) + 1e-12
    mag2 = ops.sum(input2 * input2, dim) + 1e-12
    cos = prod / ops.sqrt(mag1 * mag2)
    pos = ops.where(target == 1, 1.0 - cos, 0.0)
    neg = ops.where(target == -1, ops.clamp_min(cos - margin, 0.0), 0.0)
    return _reduce(pos + neg, reduction)

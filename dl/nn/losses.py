"""Loss modules beyond the core (torch's names): each calls its functional form in
dl.nn.functional_losses. `weight` and `pos_weight` are buffers (in state_dict, moved by
`to`), as PyTorch's; the legacy size_average / reduce arguments map to a reduction."""
from __future__ import annotations

from . import functional_losses as FL  # noqa: N812
from .module import Module

__all__ = ["BCELoss", "BCEWithLogitsLoss", "CosineEmbeddingLoss", "HuberLoss", "KLDivLoss",
           "L1Loss", "SmoothL1Loss"]


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__()
        if size_average is not None or reduce is not None:
            reduction = FL._legacy_reduction(size_average, reduce, reduction)
        self.reduction = reduction

    def extra_repr(self) -> str:
        """The options shown in the module's repr."""
        return f"reduction={self.reduction!r}" if self.reduction != "mean" else ""


class BCELoss(_Loss):
    """Binary cross entropy of probabilities (`F.binary_cross_entropy`); weight: a
    rescaling broadcast to the target's shape."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)

    def forward(self, input, target):  # noqa: A002
        """The loss of the batch (F.binary_cross_entropy with this module's options)."""
        return FL.binary_cross_entropy(input, target, weight=self.weight,
                                       reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Sigmoid and binary cross entropy in one stable form
    (`F.binary_cross_entropy_with_logits`); weight and pos_weight (per class, the last
    dim) as PyTorch's."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean",
                 pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):  # noqa: A002
        """The loss of the batch (F.binary_cross_entropy_with_logits with this module's options)."""
        return FL.binary_cross_entropy_with_logits(input, target, self.weight,
                                                   pos_weight=self.pos_weight,
                                                   reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error (`F.l1_loss`)."""

    def forward(self, input, target):  # noqa: A002
        """The loss of the batch (F.l1_loss with this module's options)."""
        return FL.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Quadratic below beta, linear above (`F.smooth_l1_loss`)."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean",
                 beta: float = 1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):  # noqa: A002
        """The loss of the batch (F.smooth_l1_loss with this module's options)."""
        return FL.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Quadratic below delta, delta-scaled linear above (`F.huber_loss`)."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):  # noqa: A002
        """The loss of the batch (F.huber_loss with this module's options)."""
        return FL.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(_Loss):
    """KL divergence of log-probabilities `input` from `target` (`F.kl_div`); reduction
    "batchmean" is the mathematical KL divergence per batch element."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean",
                 log_target: bool = False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):  # noqa: A002
        """The loss of the batch (F.kl_div with this module's options)."""
        return FL.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class CosineEmbeddingLoss(_Loss):
    """1 - cos for target 1, max(0, cos - margin) for target -1
    (`F.cosine_embedding_loss`)."""

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None,
                 reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        """The loss of the batch (F.cosine_embedding_loss with this module's options)."""
        return FL.cosine_embedding_loss(input1, input2, target, margin=self.margin,
                                        reduction=self.reduction)

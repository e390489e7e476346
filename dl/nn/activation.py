"""Activation, dropout and loss modules (the elementwise ones: they fuse with their
neighbours)."""
from __future__ import annotations

from . import functional as F
from .module import Module


class _Inplace(Module):
    """An activation module taking PyTorch's `inplace` flag."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return "inplace=True" if self.inplace else ""


class ReLU(_Inplace):
    """ReLU module: max(x, 0) elementwise (`F.relu`; `inplace` as PyTorch's)."""

    def forward(self, x):
        """Applies relu to x."""
        return F.relu(x, self.inplace)


class GELU(Module):
    """GELU module; approximate="none" (erf) or "tanh" (`F.gelu`)."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        """Applies gelu to x."""
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"approximate='{self.approximate}'"


class Sigmoid(Module):
    """Sigmoid module: 1 / (1 + exp(-x)) elementwise."""

    def forward(self, x):
        """Applies sigmoid to x."""
        return F.sigmoid(x)


class Tanh(Module):
    """Tanh module: tanh(x) elementwise."""

    def forward(self, x):
        """Applies tanh to x."""
        return F.tanh(x)


class SiLU(_Inplace):
    """SiLU module: x * sigmoid(x) elementwise (`inplace` as PyTorch's)."""

    def forward(self, x):
        """Applies silu to x."""
        return F.silu(x, self.inplace)


class Identity(Module):
    """A module that returns its input."""

    def forward(self, x):
        """Returns x itself."""
        return x


class Dropout(Module):
    """Dropout module: in training, zeros each element with probability p and scales
    the rest by 1/(1-p); in eval mode the identity (`F.dropout`)."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, x):
        """x with dropout applied in training mode, x itself in eval mode."""
        return F.dropout(x, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"p={self.p}" + (", inplace=True" if self.inplace else "")


class MSELoss(Module):
    """Mean squared error loss module; reduction "mean", "sum" or "none" (`F.mse_loss`)."""

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):  # noqa: A002
        """The loss of `input` against `target` (same shape)."""
        return F.mse_loss(input, target, self.reduction)


class CrossEntropyLoss(Module):
    """Cross-entropy loss module over logits (`F.cross_entropy`): weight, ignore_index,
    reduction and label_smoothing as PyTorch's."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean",
                 label_smoothing: float = 0.0):
        super().__init__()
        if isinstance(weight, str):  # dl's earlier positional reduction
            raise TypeError("CrossEntropyLoss: the first argument is the class weights (as "
                            f"PyTorch's); pass reduction={weight!r}")
        self.weight, self.ignore_index = weight, ignore_index
        self.reduction, self.label_smoothing = reduction, label_smoothing

    def forward(self, input, target):  # noqa: A002
        """The loss of logits `input` (N, C, ...) against `target`: class indices
        (N, ...) or class probabilities of input's shape."""
        return F.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(Module):
    """Negative log-likelihood loss module over log-probabilities (`F.nll_loss`): weight,
    ignore_index and reduction as PyTorch's."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__()
        if isinstance(weight, str):
            raise TypeError("NLLLoss: the first argument is the class weights (as PyTorch's); "
                            f"pass reduction={weight!r}")
        self.weight, self.ignore_index, self.reduction = weight, ignore_index, reduction

    def forward(self, input, target):  # noqa: A002
        """The loss of log-probabilities `input` (N, C, ...) against class indices
        `target` (N, ...)."""
        return F.nll_loss(input, target, self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class Softmax(Module):
    """Softmax module along `dim` (None: PyTorch's legacy implicit dim, with its warning)."""

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        """softmax(x) along the module's dim."""
        return F.softmax(x, self.dim)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log_softmax module along `dim` (None: PyTorch's legacy implicit dim, warned)."""

    def forward(self, x):
        """log_softmax(x) along the module's dim."""
        return F.log_softmax(x, self.dim)

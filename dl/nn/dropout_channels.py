"""Channel-wise dropout as torch.nn's Dropout1d / Dropout2d: whole channels zeroed with
probability p, the others scaled by 1/(1-p); the identity in eval mode."""
from __future__ import annotations

from .functional_dropout import dropout1d, dropout2d
from .module import Module

__all__ = ["Dropout1d", "Dropout2d"]


class _DropoutNd(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """Zeroes whole channels of a (N, C, L) or (C, L) input with probability p in training
    mode, scaling the others by 1/(1-p) (`dropout1d`)."""

    def forward(self, x):
        """x with channels dropped (training) or x itself (eval)."""
        return dropout1d(x, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zeroes whole channels of a (N, C, H, W) input with probability p in training mode,
    scaling the others by 1/(1-p) (`dropout2d`)."""

    def forward(self, x):
        """x with channels dropped (training) or x itself (eval)."""
        return dropout2d(x, self.p, self.training, self.inplace)

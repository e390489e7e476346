"""The Softmin module (torch's name and constructor argument)."""
from __future__ import annotations

from .functional_softmin import softmin
from .module import Module

__all__ = ["Softmin"]


class Softmin(Module):
    """softmin(x) = softmax(-x) along `dim` (None: PyTorch's legacy implicit dim, warned)."""

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        """softmin(x) along the module's dim."""
        return softmin(x, self.dim)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"dim={self.dim}"

"""The Unflatten module (torch's name and constructor arguments)."""
from __future__ import annotations

from ..ops.unflattening import unflatten
from .module import Module

__all__ = ["Unflatten"]


class Unflatten(Module):
    """Splits dim `dim` into `unflattened_size` (one size may be -1), as torch.nn.Unflatten:
    the inverse of Flatten."""

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError(f"unflattened_size must be a tuple or a list of ints, got "
                            f"{type(unflattened_size).__name__}")
        self.dim, self.unflattened_size = dim, unflattened_size

    def forward(self, x):
        """x with the module's dim split."""
        return unflatten(x, self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"

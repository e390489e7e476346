"""PixelShuffle / PixelUnshuffle modules (torch's names and constructor arguments)."""
from __future__ import annotations

from . import functional_pixel as F
from .module import Module

__all__ = ["PixelShuffle", "PixelUnshuffle"]


class PixelShuffle(Module):
    """(*, C * r^2, H, W) to (*, C, H * r, W * r), as torch.nn.PixelShuffle."""

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, x):
        """pixel_shuffle(x, upscale_factor)."""
        return F.pixel_shuffle(x, self.upscale_factor)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H * r, W * r) to (*, C * r^2, H, W), as torch.nn.PixelUnshuffle."""

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, x):
        """pixel_unshuffle(x, downscale_factor)."""
        return F.pixel_unshuffle(x, self.downscale_factor)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"downscale_factor={self.downscale_factor}"

"""1-D and adaptive max pooling modules (torch's names, constructor arguments and reprs):
AvgPool1d, MaxPool1d, AdaptiveMaxPool1d, AdaptiveMaxPool2d."""
from __future__ import annotations

from ..ops.conv import refuse_indices
from . import functional_pool1d as F
from .module import Module

__all__ = ["AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AvgPool1d", "MaxPool1d"]


def _single(v):
    return v if isinstance(v, tuple) else (v,)


class AvgPool1d(Module):
    """1-D average pooling over (N, C, L) inputs (`F.avg_pool1d`); stride defaults to
    kernel_size."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, x):
        """Average-pools x (N, C, L)."""
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool1d(Module):
    """1-D max pooling over (N, C, L) inputs (`F.max_pool1d`); stride defaults to
    kernel_size (return_indices=True is refused)."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        refuse_indices(return_indices)
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, x):
        """Max-pools x (N, C, L)."""
        return F.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
                f", dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AdaptiveMaxPool2d(Module):
    """Adaptive max pooling of (N, C, H, W) inputs into output_size (`F.adaptive_max_pool2d`;
    return_indices=True is refused)."""

    def __init__(self, output_size, return_indices: bool = False):
        super().__init__()
        refuse_indices(return_indices)
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, x):
        """Max-pools x into the module's output size."""
        return F.adaptive_max_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(AdaptiveMaxPool2d):
    """Adaptive max pooling of (N, C, L) inputs into output_size (`F.adaptive_max_pool1d`)."""

    def forward(self, x):
        """Max-pools x into the module's output size."""
        return F.adaptive_max_pool1d(x, self.output_size)

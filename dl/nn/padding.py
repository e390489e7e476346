"""Padding modules as torch.nn's (ZeroPad2d, ConstantPad1d/2d, ReflectionPad1d/2d,
ReplicationPad1d/2d), each a `F.pad` call with its mode."""
from __future__ import annotations

from . import functional as F
from .module import Module

__all__ = ["ConstantPad1d", "ConstantPad2d", "ReflectionPad1d", "ReflectionPad2d",
           "ReplicationPad1d", "ReplicationPad2d", "ZeroPad2d"]


def _amounts(padding, n: int) -> tuple:
    """padding as a tuple of 2*n ints (an int pads every side by it), as PyTorch's."""
    if isinstance(padding, int):
        return (padding,) * (2 * n)
    padding = tuple(int(p) for p in padding)
    if len(padding) != 2 * n:
        raise ValueError(f"padding must be an int or a tuple of {2 * n} ints, got {padding}")
    return padding


class _Pad(Module):
    """A padding module: `F.pad(x, padding, mode, value)` over the last `_dims` dims."""

    _dims, _mode = 1, "constant"

    def __init__(self, padding, value: float = 0.0):
        super().__init__()
        self.padding, self.value = _amounts(padding, self._dims), value

    def forward(self, x):
        """Pads x."""
        if x.ndim not in (self._dims + 1, self._dims + 2):
            raise ValueError(f"{type(self).__name__} takes a {self._dims + 1}-D or "
                             f"{self._dims + 2}-D input, got shape {x.shape}")
        if self._mode == "constant":
            return F.pad(x, self.padding, "constant", self.value)
        return F.pad(x, self.padding, self._mode)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"{self.padding}"


class ConstantPad1d(_Pad):
    """Pads the last dim of a (C, W) or (N, C, W) input with `value`; padding an int or
    (left, right)."""

    _dims = 1

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"padding={self.padding}, value={self.value}"


class ConstantPad2d(ConstantPad1d):
    """Pads the last two dims of a (C, H, W) or (N, C, H, W) input with `value`; padding an
    int or (left, right, top, bottom)."""

    _dims = 2


class ZeroPad2d(ConstantPad2d):
    """Pads the last two dims with zeros; padding an int or (left, right, top, bottom)."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"{self.padding}"


class ReflectionPad1d(_Pad):
    """Pads the last dim by reflection (the edge not repeated); padding an int or
    (left, right), each less than the dim's size."""

    _dims, _mode = 1, "reflect"

    def __init__(self, padding):
        super().__init__(padding)


class ReflectionPad2d(ReflectionPad1d):
    """Pads the last two dims by reflection; padding an int or (left, right, top,
    bottom)."""

    _dims = 2


class ReplicationPad1d(_Pad):
    """Pads the last dim by repeating the edge value; padding an int or (left, right)."""

    _dims, _mode = 1, "replicate"

    def __init__(self, padding):
        super().__init__(padding)


class ReplicationPad2d(ReplicationPad1d):
    """Pads the last two dims by repeating the edge values; padding an int or (left,
    right, top, bottom)."""

    _dims = 2

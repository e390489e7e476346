"""Activation modules beyond the core (torch's names and constructor arguments)."""
from __future__ import annotations

from . import functional_act as F
from .activation import _Inplace
from .module import Module

__all__ = ["ELU", "GLU", "SELU", "Hardswish", "LeakyReLU", "LogSigmoid", "Mish", "Softplus"]


class Softplus(Module):
    """Softplus module: log(1 + exp(beta * x)) / beta, x itself above `threshold`."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        """Applies softplus to x."""
        return F.softplus(x, self.beta, self.threshold)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"beta={self.beta}, threshold={self.threshold}"


class Mish(_Inplace):
    """Mish module: x * tanh(softplus(x)). `inplace` as in PyTorch (F.mish)."""

    def forward(self, x):
        """Applies mish to x."""
        return F.mish(x, self.inplace)


class Hardswish(_Inplace):
    """Hardswish module: x * relu6(x + 3) / 6."""

    def forward(self, x):
        """Applies hardswish to x."""
        return F.hardswish(x, self.inplace)


class SELU(_Inplace):
    """SELU module: scale * elu(x, alpha) with PyTorch's constants."""

    def forward(self, x):
        """Applies selu to x."""
        return F.selu(x, self.inplace)


class LeakyReLU(Module):
    """LeakyReLU module: x where x > 0, else negative_slope * x."""

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, x):
        """Applies leaky_relu to x."""
        return F.leaky_relu(x, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace
                                                           else "")


class ELU(Module):
    """ELU module: x where x > 0, else alpha * (exp(x) - 1)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, x):
        """Applies elu to x."""
        return F.elu(x, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class GLU(Module):
    """GLU module: a * sigmoid(b), a and b the halves of x along `dim`."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        """Applies glu to x."""
        return F.glu(x, self.dim)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"dim={self.dim}"


class LogSigmoid(Module):
    """LogSigmoid module: log(sigmoid(x))."""

    def forward(self, x):
        """Applies logsigmoid to x."""
        return F.logsigmoid(x)

"""Activation modules composed of existing ops (torch's names, constructor arguments and
reprs): ReLU6, Hardtanh, Hardsigmoid, Softsign, Tanhshrink, Threshold, CELU, PReLU."""
from __future__ import annotations

from .. import ops
from ..autograd import no_grad
from . import functional_act_hard as F
from .activation import _Inplace
from .module import Module
from .parameter import Parameter

__all__ = ["CELU", "PReLU", "Hardsigmoid", "Hardtanh", "ReLU6", "Softsign", "Tanhshrink",
           "Threshold"]


class Hardtanh(Module):
    """Hardtanh module: x clamped to [min_val, max_val] (`F.hardtanh`)."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        if min_val > max_val:
            raise ValueError("min_val cannot be greater than max_val")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, x):
        """Applies hardtanh to x."""
        return F.hardtanh(x, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return (f"min_val={self.min_val}, max_val={self.max_val}"
                + (", inplace=True" if self.inplace else ""))


class ReLU6(Hardtanh):
    """ReLU6 module: min(max(x, 0), 6) (`F.relu6`)."""

    def __init__(self, inplace: bool = False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return "inplace=True" if self.inplace else ""


class Hardsigmoid(_Inplace):
    """Hardsigmoid module: relu6(x + 3) / 6 (`F.hardsigmoid`)."""

    def forward(self, x):
        """Applies hardsigmoid to x."""
        return F.hardsigmoid(x, self.inplace)


class Softsign(Module):
    """Softsign module: x / (1 + |x|)."""

    def forward(self, x):
        """Applies softsign to x."""
        return F.softsign(x)


class Tanhshrink(Module):
    """Tanhshrink module: x - tanh(x)."""

    def forward(self, x):
        """Applies tanhshrink to x."""
        return F.tanhshrink(x)


class Threshold(Module):
    """Threshold module: x where x > threshold, else value (`F.threshold`)."""

    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, x):
        """Applies threshold to x."""
        return F.threshold(x, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return (f"threshold={self.threshold}, value={self.value}"
                + (", inplace=True" if self.inplace else ""))


class CELU(Module):
    """CELU module: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) (`F.celu`)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, x):
        """Applies celu to x."""
        return F.celu(x, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class PReLU(Module):
    """PReLU module: x where x > 0, else a * x, with a learnable `weight` of num_parameters
    elements (1, or one per channel: dim 1 of the input) filled with `init`."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(ops.full((num_parameters,), init, device=device, dtype=dtype))

    def reset_parameters(self) -> None:
        """Fills the weight with `init` again."""
        with no_grad():
            ops.assign(self.weight, ops.full(self.weight.shape, self.init,
                                             device=self.weight.device,
                                             dtype=self.weight.dtype))

    def forward(self, x):
        """Applies prelu to x."""
        return F.prelu(x, self.weight)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"num_parameters={self.num_parameters}"

"""Layer modules beyond the core (torch's names, arguments, parameters and initialisation):
Conv1d, ConvTranspose1d/2d, GroupNorm, RMSNorm, InstanceNorm1d/2d, Upsample,
AdaptiveAvgPool1d/2d, Identity (any constructor arguments), and the recurrent layers and
the decoder layer (dl/nn/recurrent.py, dl/nn/decoder.py)."""
from __future__ import annotations

import math

from .. import ops
from ..ops.indexing import pad
from . import functional_layers as FL
from . import init
from .activation import Identity as _Identity
from .containers import ModuleDict
from .decoder import TransformerDecoderLayer
from .layers import _norm_state, _param
from .module import Module
from .parameter import Parameter
from .recurrent import GRU, LSTM, GRUCell, LSTMCell, RNNBase

__all__ = ["AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "Conv1d", "ConvTranspose1d",
           "ConvTranspose2d", "GRU", "GRUCell", "GroupNorm", "Identity", "InstanceNorm1d",
           "InstanceNorm2d", "LSTM", "LSTMCell", "ModuleDict", "RMSNorm", "RNNBase",
           "TransformerDecoderLayer", "Upsample", "UpsamplingBilinear2d",
           "UpsamplingNearest2d"]


def _tup(v, n: int) -> tuple:
    return (int(v),) * n if isinstance(v, int) else tuple(int(e) for e in v)


class Identity(_Identity):
    """A module that returns its input; takes (and ignores) any constructor arguments, as
    PyTorch's."""

    def __init__(self, *args, **kwargs):
        super().__init__()


def _conv_init(m: Module, fan_in: int) -> None:
    init.kaiming_uniform_(m.weight, a=math.sqrt(5))
    if m.bias is not None:
        b = 1.0 / math.sqrt(fan_in) if fan_in else 0.0
        init.uniform_(m.bias, -b, b)


def _zeros_mode(padding_mode: str) -> None:
    if padding_mode != "zeros":
        raise NotImplementedError(f"padding_mode {padding_mode!r} is not supported "
                                  f"(only 'zeros')")


class Conv1d(Module):
    """1-d convolution over (N, C, L) or (C, L) inputs (`F.conv1d`: conv2d over a height-1
    image); padding an int, "valid" or "same"; padding_mode "zeros", or "reflect",
    "replicate", "circular" (the input padded by `F.pad` first, as PyTorch's)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None):
        super().__init__()
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"padding_mode must be 'zeros', 'reflect', 'replicate' or "
                             f"'circular', got {padding_mode!r}")
        if in_channels % groups or out_channels % groups:
            raise ValueError("in_channels and out_channels must be divisible by groups")
        (k,) = _tup(kernel_size, 1)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride, self.dilation = (k,), _tup(stride, 1), _tup(dilation, 1)
        self.padding = padding if isinstance(padding, str) else _tup(padding, 1)
        self.padding_mode = padding_mode
        self.weight = _param(out_channels, in_channels // groups, k, device=device,
                             dtype=dtype)
        self.bias = _param(out_channels, device=device, dtype=dtype) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """kaiming_uniform(a=sqrt(5)) weights, U(+-1/sqrt(fan_in)) bias, as PyTorch's."""
        _conv_init(self, self.in_channels // self.groups * self.kernel_size[0])

    def forward(self, x):
        """The convolution of x: (N, out_channels, OL)."""
        p = self.padding if isinstance(self.padding, str) else self.padding[0]
        if self.padding_mode != "zeros":
            if p == "same":
                total = self.dilation[0] * (self.kernel_size[0] - 1)
                lo, hi = total // 2, total - total // 2
            else:
                lo = hi = 0 if p == "valid" else p
            x, p = pad(x, (lo, hi), mode=self.padding_mode), 0
        return FL.conv1d(x, self.weight, self.bias, self.stride[0], p, self.dilation[0],
                         self.groups)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")


class ConvTranspose2d(Module):
    """The transposed 2-d convolution (`F.conv_transpose2d`): weight (in_channels,
    out_channels/groups, KH, KW), stride, padding, output_padding, groups, dilation; the
    forward's `output_size` picks output_padding, as PyTorch's. padding_mode "zeros"."""

    _dims = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__()
        _zeros_mode(padding_mode)
        if in_channels % groups or out_channels % groups:
            raise ValueError("in_channels and out_channels must be divisible by groups")
        d = self._dims
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _tup(kernel_size, d), _tup(stride, d)
        self.padding, self.output_padding = _tup(padding, d), _tup(output_padding, d)
        self.dilation, self.padding_mode = _tup(dilation, d), padding_mode
        self.weight = _param(in_channels, out_channels // groups, *self.kernel_size,
                             device=device, dtype=dtype)
        self.bias = _param(out_channels, device=device, dtype=dtype) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """kaiming_uniform(a=sqrt(5)) weights, U(+-1/sqrt(fan_in)) bias with PyTorch's fan
        in (out_channels/groups * kernel size)."""
        _conv_init(self, self.out_channels // self.groups * math.prod(self.kernel_size))

    def _output_padding(self, x, output_size):
        if output_size is None:
            return self.output_padding
        d = self._dims
        osz = tuple(output_size)[-d:]
        res = []
        for i in range(d):
            lo = (x.shape[x.ndim - d + i] - 1) * self.stride[i] - 2 * self.padding[i] + \
                self.dilation[i] * (self.kernel_size[i] - 1) + 1
            if not lo <= osz[i] < lo + self.stride[i]:
                raise ValueError(f"requested an output size of {tuple(output_size)}, but "
                                 f"valid sizes start at {lo} (dim {i})")
            res.append(osz[i] - lo)
        return tuple(res)

    def forward(self, x, output_size=None):
        """The transposed convolution of x (N, C, H, W) or (C, H, W)."""
        return FL.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding,
                                   self._output_padding(x, output_size), self.groups,
                                   self.dilation)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")


class ConvTranspose1d(ConvTranspose2d):
    """The transposed 1-d convolution (`F.conv_transpose1d`), over (N, C, L) or (C, L)."""

    _dims = 1

    def forward(self, x, output_size=None):
        """The transposed convolution of x."""
        return FL.conv_transpose1d(x, self.weight, self.bias, self.stride[0],
                                   self.padding[0], self._output_padding(x, output_size)[0],
                                   self.groups, self.dilation[0])


class GroupNorm(Module):
    """Group normalisation of (N, C, *) inputs (`F.group_norm`), with per-channel weight
    (ones) and bias (zeros) when affine."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
        self.affine = affine
        self.weight = Parameter(ops.ones(num_channels, device=device, dtype=dtype)) \
            if affine else None
        self.bias = _param(num_channels, device=device, dtype=dtype) if affine else None

    def forward(self, x):
        """x normalised per group of channels."""
        return FL.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class RMSNorm(Module):
    """Root-mean-square normalisation over the last dims (`F.rms_norm`), PyTorch 2.4's
    nn.RMSNorm: eps=None means the input dtype's machine epsilon; weight (ones) when
    elementwise_affine."""

    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True, device=None, dtype=None):
        super().__init__()
        ns = (normalized_shape,) if isinstance(normalized_shape, int) \
            else tuple(normalized_shape)
        self.normalized_shape, self.eps = ns, eps
        self.elementwise_affine = elementwise_affine
        self.weight = Parameter(ops.ones(*ns, device=device, dtype=dtype)) \
            if elementwise_affine else None

    def forward(self, x):
        """x normalised over its last dims."""
        return FL.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class _InstanceNorm(Module):
    _spatial = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None,
                 dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        _norm_state(self, num_features, affine, track_running_stats, device, dtype)

    def forward(self, x):
        """x normalised per sample and channel (batch statistics in training or without
        running statistics, else the running ones)."""
        if x.ndim == self._spatial + 1:  # unbatched
            return self.forward(x.unsqueeze(0)).squeeze(0)
        if x.ndim != self._spatial + 2:
            raise ValueError(f"{type(self).__name__} takes a {self._spatial + 2}-D (or "
                             f"unbatched {self._spatial + 1}-D) input, got {x.shape}")
        if self.affine and x.shape[1] != self.num_features:
            raise ValueError(f"expected input's size at dim=1 to match num_features "
                             f"({self.num_features}), but got: {x.shape[1]}.")
        return FL.instance_norm(x, self.running_mean, self.running_var, self.weight,
                                self.bias, self.training or not self.track_running_stats,
                                self.momentum if self.momentum is not None else 0.0,
                                self.eps)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of (N, C, H, W) or (C, H, W) inputs (`F.instance_norm`);
    affine=False and track_running_stats=False by default, as PyTorch's."""

    _spatial = 2


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of (N, C, L) or (C, L) inputs (`F.instance_norm`)."""

    _spatial = 1


class Upsample(Module):
    """Resampling by `F.interpolate` (nearest, nearest-exact, linear, bilinear)."""

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest",
                 align_corners: bool | None = None, recompute_scale_factor: bool | None = None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, x):
        """x resampled."""
        return FL.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                              recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        what = f"scale_factor={self.scale_factor}" if self.scale_factor is not None \
            else f"size={self.size}"
        return f"{what}, mode='{self.mode}'"


class UpsamplingNearest2d(Upsample):
    """Upsample with mode "nearest"."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Upsample with mode "bilinear" and align_corners=True (as PyTorch's)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class AdaptiveAvgPool2d(Module):
    """Adaptive average pooling to output_size (`F.adaptive_avg_pool2d`)."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        """x (N, C, H, W) or (C, H, W) pooled to output_size."""
        return FL.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(AdaptiveAvgPool2d):
    """Adaptive average pooling of (N, C, L) to output_size (`F.adaptive_avg_pool1d`)."""

    def forward(self, x):
        """x pooled to output_size."""
        return FL.adaptive_avg_pool1d(x, self.output_size)

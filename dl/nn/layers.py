"""Linear, Embedding, Flatten, and the convolution/pooling/normalisation layers, initialised
as PyTorch's (kaiming_uniform(a=sqrt(5)) weights, U(+-1/sqrt(fan_in)) biases)."""
from __future__ import annotations

import math

from .. import dtypes, ops
from ..autograd import no_grad
from ..ops.conv import refuse_indices
from ..ops.inplace import count_up
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


def _param(*shape, device=None, dtype=None) -> Parameter:
    return Parameter(ops.zeros(*shape, device=device, dtype=dtype))


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class Linear(Module):
    """y = x @ weight.T + bias; `act` ("relu", "gelu", "tanh") fuses an activation into the
    matmul's epilogue (Linear(..., act="relu") is Linear followed by ReLU in one kernel)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 act: str = "none", device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features, self.act = in_features, out_features, act
        self.weight = _param(out_features, in_features, device=device, dtype=dtype)
        self.bias = _param(out_features, device=device, dtype=dtype) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-initialises weight (kaiming_uniform, a=sqrt(5)) and bias (U(+-1/sqrt(in_features))),
        as PyTorch's."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            b = 1.0 / math.sqrt(self.in_features) if self.in_features else 0.0
            init.uniform_(self.bias, -b, b)

    def forward(self, x):
        """x @ weight.T + bias (then the fused activation) over x's last dim."""
        return F.linear(x, self.weight, self.bias, act=self.act)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        act = f", act='{self.act}'" if self.act != "none" else ""
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}{act}")


class Embedding(Module):
    """A lookup table: row i of `weight` (num_embeddings, embedding_dim) for index i.

    Weights are N(0, 1), as PyTorch's; the row `padding_idx` (negative counts from the end)
    starts at zero and gets no gradient. No max_norm, scale_grad_by_freq or sparse."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, sparse: bool = False, _weight=None,
                 _freeze: bool = False, device=None, dtype=None):
        super().__init__()
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("Embedding: max_norm, scale_grad_by_freq and sparse are "
                                      "not supported")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError("Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx, self.max_norm = padding_idx, max_norm
        self.norm_type, self.scale_grad_by_freq, self.sparse = norm_type, False, False
        if _weight is not None:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError("Shape of weight does not match num_embeddings and "
                                 "embedding_dim")
            self.weight = Parameter(_weight)
            self.weight.requires_grad = not _freeze
        else:
            self.weight = _param(num_embeddings, embedding_dim, device=device, dtype=dtype)
            self.reset_parameters()

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx: int | None = None,
                        max_norm: float | None = None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, sparse: bool = False) -> Embedding:
        """An Embedding whose weight is the 2-D tensor `embeddings` (shared, as PyTorch's);
        freeze: no gradient for it."""
        if embeddings.ndim != 2:
            raise ValueError("Embeddings parameter is expected to be 2-dimensional")
        rows, dim = embeddings.shape
        return cls(rows, dim, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=embeddings, _freeze=freeze)

    def reset_parameters(self) -> None:
        """N(0, 1) weights, the padding row zero."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, idx):
        """The rows of weight for the int tensor idx: shape (*idx.shape, embedding_dim)."""
        if self.padding_idx is None:
            return F.embedding(idx, self.weight)
        return F.embedding(idx, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


class Flatten(Module):
    """Flattens dims start_dim..end_dim (default: all but the batch dim) into one."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        """x.flatten(start_dim, end_dim)."""
        return x.flatten(self.start_dim, self.end_dim)


class Conv2d(Module):
    """NCHW convolution; `act` fuses an activation into the output pass (in inference)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, act: str = "none",
                 device=None, dtype=None):
        super().__init__()
        kh, kw = _pair(kernel_size)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = (kh, kw), _pair(stride)
        self.padding = padding if isinstance(padding, str) else _pair(padding)  # 'same'
        self.dilation = _pair(dilation)
        self.groups, self.act = groups, act
        self.weight = _param(out_channels, in_channels // groups, kh, kw, device=device,
                             dtype=dtype)
        self.bias = _param(out_channels, device=device, dtype=dtype) if bias else None
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = in_channels // groups * kh * kw
            init.uniform_(self.bias, -1.0 / math.sqrt(fan_in), 1.0 / math.sqrt(fan_in))

    def forward(self, x):
        """The convolution of x (N, C, H, W): (N, out_channels, OH, OW)."""
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups, act=self.act)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")


class MaxPool2d(Module):
    """2-D max pooling over (N, C, H, W) inputs (`F.max_pool2d`); stride defaults to
    kernel_size. PyTorch's arguments in its order (return_indices=True is refused)."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        refuse_indices(return_indices)
        self.kernel_size, self.stride = kernel_size, stride
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, x):
        """Max-pools x (N, C, H, W)."""
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
                f", dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """2-D average pooling over (N, C, H, W) inputs (`F.avg_pool2d`); stride defaults
    to kernel_size. PyTorch's arguments in its order (divisor_override is refused)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None):
        super().__init__()
        if divisor_override is not None:
            raise NotImplementedError("AvgPool2d: divisor_override is not supported")
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, x):
        """Average-pools x (N, C, H, W)."""
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


def _norm_state(m: Module, num_features: int, affine: bool, track_running_stats: bool,
                device, dtype) -> None:
    """A per-channel norm's weight and bias (ones and zeros, when affine) and running
    statistics (buffers, when tracked), named as PyTorch's."""
    m.weight = Parameter(ops.ones(num_features, device=device, dtype=dtype)) if affine else None
    m.bias = _param(num_features, device=device, dtype=dtype) if affine else None
    if track_running_stats:
        m.register_buffer("running_mean", ops.zeros(num_features, device=device, dtype=dtype))
        m.register_buffer("running_var", ops.ones(num_features, device=device, dtype=dtype))
        m.register_buffer("num_batches_tracked", ops.zeros((), dtype=dtypes.int64, device=device))
    else:
        m.running_mean = m.running_var = None


class _BatchNorm(Module):
    """Batch normalisation over the channels (dim 1), as PyTorch's.

    Training: normalises with the batch statistics and updates the buffers running_mean,
    running_var (unbiased) with `momentum` (None: the cumulative average, 1 /
    num_batches_tracked, as PyTorch's), and num_batches_tracked; eval: uses the running
    statistics. affine adds weight and bias."""

    RANKS: tuple = ()
    SHAPES = ""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        _norm_state(self, num_features, affine, track_running_stats, device, dtype)

    def forward(self, x):
        """x normalised per channel (batch or running statistics by mode)."""
        if x.ndim not in self.RANKS:
            raise ValueError(f"{type(self).__name__} takes {self.SHAPES}, got shape {x.shape}")
        batch_stats = self.training or self.running_mean is None
        momentum = self.momentum
        if self.training and self.running_mean is not None:
            count_up(self.num_batches_tracked)
            if momentum is None:  # the cumulative average (a host read, as PyTorch's)
                momentum = 1.0 / float(self.num_batches_tracked.item())
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            batch_stats, 0.0 if momentum is None else momentum, self.eps)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class BatchNorm1d(_BatchNorm):
    """`_BatchNorm` over the channels of (N, C) or (N, C, L) inputs."""

    RANKS, SHAPES = (2, 3), "(N, C) or (N, C, L)"


class BatchNorm2d(_BatchNorm):
    """`_BatchNorm` over the channels of (N, C, H, W) inputs."""

    RANKS, SHAPES = (4,), "(N, C, H, W)"


class LayerNorm(Module):
    """Layer normalisation over the last dims (normalized_shape), with optional
    elementwise weight and bias, as PyTorch's."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        ns = (normalized_shape,) if isinstance(normalized_shape, int) \
            else tuple(normalized_shape)
        self.normalized_shape, self.eps = ns, eps
        self.weight = Parameter(ops.ones(*ns, device=device, dtype=dtype)) \
            if elementwise_affine else None
        self.bias = _param(*ns, device=device, dtype=dtype) if elementwise_affine and bias \
            else None

    def forward(self, x):
        """x normalised over its last dims (`F.layer_norm`)."""
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"{self.normalized_shape}, eps={self.eps}"

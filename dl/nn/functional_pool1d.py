"""1-D pooling with torch.nn.functional's signatures: avg_pool1d and max_pool1d are the 2-D
pools (dl/ops/conv.py) over an (N, C, 1, L) view, and adaptive_max_pool1d/2d take each
window's first maximum through index_select and max(dim) (its gradient goes to that
element, as PyTorch's)."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..ops.conv import avg_pool2d, max_pool2d, refuse_indices
from ..ops.creation import tensor
from ..ops.index import index_select
from ..ops.reduce import max as _max
from ..tensor import Tensor

__all__ = ["adaptive_max_pool1d", "adaptive_max_pool2d", "avg_pool1d", "max_pool1d"]


def _one(v, what: str) -> int:
    """An int argument of a 1-D pool, given as an int or a 1-sequence."""
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise RuntimeError(f"{what} must be a single int, or a tuple of one int, got {v!r}")
        v = v[0]
    return int(v)


def _pool_input(x: Tensor, what: str) -> Tensor:
    if x.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {x.ndim}-dimensional tensor "
                           f"for argument #1 'self' (while checking arguments for {what})")
    return x.unsqueeze(-2)


def _geometry(what, kernel_size, stride, padding, dilation=1):
    k = _one(kernel_size, f"{what}: kernel_size")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else \
        _one(stride, f"{what}: stride")
    p, d = _one(padding, f"{what}: padding"), _one(dilation, f"{what}: dilation")
    if k <= 0 or s <= 0 or d <= 0 or p < 0:
        raise RuntimeError(f"{what}: kernel_size ({k}), stride ({s}) and dilation ({d}) must "
                           f"be positive, padding ({p}) non-negative")
    if p > ((k - 1) * d + 1) // 2:
        raise RuntimeError(f"{what}() padding should be at most half of kernel size, but got "
                           f"padding={p} and kernel_size={k}")
    return k, s, p, d


def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    """1-D average pooling of (N, C, L) or (C, L), as torch.nn.functional.avg_pool1d (its
    arguments and order; ints or 1-tuples): avg_pool2d over a (1, kernel_size) window.
    Float32/float64 tensors. Differentiable."""
    k, s, p, _ = _geometry("avg_pool1d", kernel_size, stride, padding)
    y = avg_pool2d(_pool_input(input, "avg_pool1d"), (1, k), (1, s), (0, p), ceil_mode,
                   count_include_pad)
    return y.squeeze(-2)


def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
               ceil_mode: bool = False, return_indices: bool = False) -> Tensor:
    """1-D max pooling of (N, C, L) or (C, L), as torch.nn.functional.max_pool1d (its
    arguments and order; ints or 1-tuples): max_pool2d over a (1, kernel_size) window.
    return_indices=True is refused (NotImplementedError, as max_pool2d's). Float32/float64
    tensors. Differentiable (to the first maximum of each window)."""
    refuse_indices(return_indices)
    k, s, p, d = _geometry("max_pool1d", kernel_size, stride, padding, dilation)
    y = max_pool2d(_pool_input(input, "max_pool1d"), (1, k), (1, s), (0, p), (1, d),
                   ceil_mode)
    return y.squeeze(-2)


def _windows(n_in: int, n_out: int, dev) -> tuple[Tensor, int]:
    """The adaptive windows [floor(i n_in / n_out), ceil((i + 1) n_in / n_out)) as one index
    list of n_out rows of the longest window's length k, shorter windows repeating their
    last index (a repeat changes no maximum nor which element is first); and k."""
    starts = [(i * n_in) // n_out for i in range(n_out)]
    ends = [-((-(i + 1) * n_in) // n_out) for i in range(n_out)]
    k = max(e - s for s, e in zip(starts, ends))
    idx = np.array([[min(s + j, e - 1) for j in range(k)] for s, e in zip(starts, ends)])
    it = dtypes.index_dtype(dev)
    return tensor(idx.reshape(-1), dtype=it, device=dev), k


def _adaptive_max(x: Tensor, d: int, n_out: int) -> Tensor:
    """The maxima of x's adaptive windows along dim d (first maximum: max(dim)'s)."""
    idx, k = _windows(x.shape[d], n_out, x.device)
    y = index_select(x, d, idx)
    y = y.reshape(*x.shape[:d], n_out, k, *x.shape[d + 1:])
    return _max(y, d + 1).values


def _out_size(v, n: int) -> int:
    return n if v is None else int(v)


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False) -> Tensor:  # noqa: A002
    """Max pooling of (N, C, H, W) or (C, H, W) into output_size (an int, or a pair whose
    None keeps that size) over PyTorch's adaptive windows [floor(i H / oh), ceil((i + 1) H /
    oh)), as torch.nn.functional.adaptive_max_pool2d: the first maximum in row-major order,
    which takes the gradient (each window's row maxima first, then the first row holding
    the window's maximum). return_indices=True is refused (NotImplementedError). Composed of
    index_select and max(dim). Differentiable."""
    refuse_indices(return_indices)
    if input.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got "
                           f"{input.shape}")
    if not input.dtype.is_float:
        raise RuntimeError(f"adaptive_max_pool2d: float tensors only, got {input.dtype.name}")
    oh, ow = (output_size, output_size) if not isinstance(output_size, (tuple, list)) \
        else output_size
    h, w = input.shape[-2:]
    oh, ow = _out_size(oh, h), _out_size(ow, w)
    if oh <= 0 or ow <= 0 or (h == 0 or w == 0):
        raise RuntimeError(f"adaptive_max_pool2d(): output size ({oh}, {ow}) and the input's "
                           f"spatial size ({h}, {w}) must be positive")
    y = _adaptive_max(input, input.ndim - 1, ow)  # within rows first: the first maximum
    return _adaptive_max(y, input.ndim - 2, oh)


def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False) -> Tensor:  # noqa: A002
    """Max pooling of (N, C, L) or (C, L) into output_size over PyTorch's adaptive windows,
    as torch.nn.functional.adaptive_max_pool1d (`adaptive_max_pool2d` of an (.., 1, L)
    view). return_indices=True is refused. Differentiable."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"adaptive_max_pool1d(): Expected 2D or 3D tensor, but got "
                           f"{input.shape}")
    size = _one(output_size, "adaptive_max_pool1d: output_size")
    return adaptive_max_pool2d(input.unsqueeze(-2), (1, size), return_indices).squeeze(-2)



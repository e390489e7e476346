"""torch.repeat_interleave: each element repeated in place along a dim. An int count is a
broadcast view and a reshape (one copy); per-element counts (a tensor) are read back to the
host (they decide the shape) and become one index_select."""
from __future__ import annotations

import numpy as np

from .. import dtypes, shapes
from ..tensor import Tensor
from .creation import tensor as _tensor
from .index import index_select
from .registry import register

__all__ = ["repeat_interleave"]


def _counts(repeats: Tensor, n: int) -> np.ndarray:
    if repeats.dtype.is_float or repeats.dtype is dtypes.bool_:
        raise RuntimeError(f"repeat_interleave: repeats must be an integer tensor, got "
                           f"{repeats.dtype.name}")
    if repeats.ndim > 1:
        raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
    counts = np.asarray(repeats.numpy(), np.int64).reshape(-1)
    if counts.size == 1:
        counts = np.full(n, counts[0], np.int64)
    elif counts.size != n:
        raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                           f"repeats.size(0) = {counts.size} and input.size(0) = {n}")
    if (counts < 0).any():
        raise RuntimeError("repeats can not be negative")
    return counts


@register("repeat_interleave", method=True)
def repeat_interleave(input: Tensor, repeats=None, dim: int | None = None, *,  # noqa: A002
                      output_size: int | None = None) -> Tensor:
    """input with each element repeated `repeats` times along `dim` (None: the flattened
    input), in place (1, 1, 2, 2, ...), as torch.repeat_interleave. repeats: an int, or an
    integer tensor of one count or one per element along dim (read back to the host: the
    counts decide the shape). `repeat_interleave(counts)` alone gives
    `repeat_interleave(arange(len(counts)), counts)`, as PyTorch. output_size, if given,
    must be the result's size along dim. Negative counts are a RuntimeError, as PyTorch's.
    Differentiable (repeated elements sum their gradients). Also `t.repeat_interleave(...)`."""
    if repeats is None:  # repeat_interleave(repeats): the indices, repeated
        counts = _counts(input, input.numel() if input.ndim else 1)
        return _tensor(np.repeat(np.arange(counts.size), counts),
                       dtype=dtypes.index_dtype(input.device), device=input.device)
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else shapes.norm_dim(dim, x.ndim)
    if x.ndim == 0:
        x = x.reshape(1)
    n = x.shape[d]
    if isinstance(repeats, Tensor) and repeats.numel() != 1:
        counts = _counts(repeats, n)
        idx = _tensor(np.repeat(np.arange(n), counts), dtype=dtypes.index_dtype(x.device),
                      device=x.device)
        y = index_select(x, d, idx)
    else:
        r = int(repeats.reshape(-1)[0].item() if isinstance(repeats, Tensor) else repeats)
        if isinstance(repeats, Tensor):
            _counts(repeats, n)  # its dtype and sign
        elif r < 0:
            raise RuntimeError("Repeats must be non-negative")
        shape = list(x.shape)
        y = x.unsqueeze(d + 1).expand(*shape[:d + 1], r, *shape[d + 1:])
        y = y.reshape(*shape[:d], n * r, *shape[d + 1:])
    if output_size is not None and int(output_size) != y.shape[d]:
        raise RuntimeError(f"repeat_interleave: output_size {output_size} is not the result's "
                           f"size {y.shape[d]} along dim {d}")
    return y

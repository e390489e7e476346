"""Channel-wise (feature) dropout as PyTorch's F.dropout1d / F.dropout2d: each
(sample, channel) slice zeroed with probability p, the others scaled by 1/(1-p)."""
from __future__ import annotations

import warnings

from .. import ops
from ..tensor import Tensor

__all__ = ["dropout1d", "dropout2d"]


def _feature_dropout(x: Tensor, p: float, training: bool, inplace: bool, generator) -> Tensor:
    """x with each (sample, channel) slice (dims 0 and 1) zeroed with probability p and the
    rest scaled by 1/(1-p): one random number per channel, broadcast over the rest."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return x

    def drop(t):
        if p == 1.0:
            return t * 0.0
        mshape = tuple(t.shape[:2]) + (1,) * (t.ndim - 2)
        keep = ops.rand(*mshape, generator=generator,
                        dtype=t.dtype if t.dtype.is_float else None, device=t.device) >= p
        return ops.where(keep, t * (1.0 / (1.0 - p)), 0.0)
    return ops.inplace.apply(x, "feature_dropout", drop, (), {}) if inplace else drop(x)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True,  # noqa: A002
              inplace: bool = False, *, generator=None) -> Tensor:
    """Channel-wise dropout of a (N, C, L) or unbatched (C, L) input, as PyTorch's."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a "
                           f"{input.ndim}D input")
    if input.ndim == 2 and training and p != 0.0:
        if inplace:
            _feature_dropout(input.unsqueeze(0), p, training, True, generator)
            return input
        return _feature_dropout(input.unsqueeze(0), p, training, False, generator).squeeze(0)
    return _feature_dropout(input, p, training, inplace, generator)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,  # noqa: A002
              inplace: bool = False, *, generator=None) -> Tensor:
    """Channel-wise dropout of a (N, C, H, W) input (a 3-D input is taken as (N, C, L), as
    PyTorch does)."""
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is "
                      "deprecated (PyTorch's warning); channel-wise dropout over dims 0 and "
                      "1 follows", stacklevel=2)
    return _feature_dropout(input, p, training, inplace, generator)

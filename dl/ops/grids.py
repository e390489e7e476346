"""Coordinate grids, as torch's: meshgrid (expanded views: no copy) and cartesian_prod."""
from __future__ import annotations

import warnings

from ..tensor import Tensor
from .common import tensor_args
from .index import stack
from .registry import register

__all__ = ["cartesian_prod", "meshgrid"]


@register("meshgrid")
def meshgrid(*tensors, indexing: str | None = None) -> tuple:
    """The coordinate grids of 0-D or 1-D tensors (given as arguments or one list), as
    torch.meshgrid: grid i holds tensors[i] along its own dim, expanded to every tensor's
    size (views of the inputs, no copy). indexing "ij" (matrix: dim i is tensor i) or "xy"
    (Cartesian: the first two dims swapped); without it "ij", with PyTorch's warning. The
    tensors must share a dtype (RuntimeError, as PyTorch's). Differentiable."""
    ts = tensor_args(tensors, "meshgrid")
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass "
                      "the indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but '
                           f"received: {indexing}")
    if not ts:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for t in ts:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list "
                               f"but got shape {t.shape}")
        if t.dtype is not ts[0].dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    pos = list(range(len(ts)))
    if indexing == "xy" and len(ts) >= 2:
        pos[0], pos[1] = 1, 0
    shape = [0] * len(ts)
    for i, t in enumerate(ts):
        shape[pos[i]] = t.numel()
    out = []
    for i, t in enumerate(ts):
        view = [1] * len(ts)
        view[pos[i]] = t.numel()
        out.append(t.reshape(view).expand(*shape))
    return tuple(out)


@register("cartesian_prod")
def cartesian_prod(*tensors) -> Tensor:
    """The Cartesian product of 1-D tensors of one dtype, as torch.cartesian_prod: a
    (prod of sizes, len(tensors)) tensor whose rows run through every combination (the
    last tensor fastest); one tensor is returned as it is. Differentiable."""
    ts = tensor_args(tensors, "cartesian_prod")
    for t in ts:
        if t.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(ts) == 1:
        return ts[0]
    grids = meshgrid(*ts, indexing="ij")
    return stack([g.reshape(-1) for g in grids], 1)



"""torch.unflatten: one dim split into several (a reshape view where strides allow)."""
from __future__ import annotations

from .. import shapes
from ..tensor import Tensor
from .registry import register

__all__ = ["unflatten"]


@register("unflatten", method=True)
def unflatten(input: Tensor, dim: int, sizes) -> Tensor:  # noqa: A002
    """input with dim `dim` split into `sizes` (a non-empty sequence; one may be -1, inferred),
    as torch.unflatten: their product must be the dim's size (RuntimeError, as PyTorch's). A
    view where the strides allow (reshape's rule). Differentiable. Also
    `t.unflatten(dim, sizes)`."""
    sizes = [int(s) for s in sizes]
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    d = shapes.norm_dim(dim, input.ndim)
    n = input.shape[d]
    known = shapes.numel(s for s in sizes if s != -1)
    if sizes.count(-1) > 1 or (-1 in sizes and known == 0):
        raise RuntimeError(f"unflatten: the size -1 of {sizes} is ambiguous for a dim of size "
                           f"{n}")
    if -1 in sizes:
        if n % known:
            raise RuntimeError(f"unflatten: Provided sizes {sizes} don't multiply up to the size "
                               f"of dim {dim} ({n}) in the input tensor")
        sizes[sizes.index(-1)] = n // known
    if shapes.numel(sizes) != n:
        raise RuntimeError(f"unflatten: Provided sizes {sizes} don't multiply up to the size of "
                           f"dim {dim} ({n}) in the input tensor")
    return input.reshape(*input.shape[:d], *sizes, *input.shape[d + 1:])

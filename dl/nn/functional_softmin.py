"""torch.nn.functional.softmin: softmax of the negated input."""
from __future__ import annotations

from ..ops.rows import implicit_dim, softmax
from ..tensor import Tensor

__all__ = ["softmin"]


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3,  # noqa: A002
            dtype=None) -> Tensor:
    """softmax(-input) along `dim`, as torch.nn.functional.softmin: `dtype` casts the input
    first; without a dim, PyTorch's legacy implicit dim (0 for 0-, 1- and 3-D inputs, else
    1) and its warning. Float tensors only (softmax's rule). Differentiable."""
    if dtype is not None:
        input = input.to(dtype)  # noqa: A001
    if dim is None:
        dim = implicit_dim("softmin", input.ndim)
    return softmax(-input, dim)

"""Vector distances and normalisation with torch.nn.functional's signatures: normalize,
cosine_similarity, pairwise_distance. Each is composed of dl ops (norms, broadcasting,
elementwise math), so autograd and every runtime come with them; the formulas are
PyTorch's own, so values and gradients match it (eps included)."""
from __future__ import annotations

from ..autograd import no_grad, record
from ..ops import elementwise as ew
from ..ops.common import is_tensor, result_type
from ..ops.mathops import norm, vector_norm
from ..ops.reduce import sum as _sum
from ..ops.shape import broadcast_tensors
from ..tensor import Tensor

__all__ = ["cosine_similarity", "normalize", "pairwise_distance"]


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,  # noqa: A002
              out=None) -> Tensor:
    """input / max(||input||_p, eps) along `dim`, as torch.nn.functional.normalize:
    `input.norm(p, dim, keepdim=True).clamp_min(eps)` divides it (gradients through both).
    Float tensors only (the norm's rule, as PyTorch). `out` is not supported."""
    if out is not None:
        raise TypeError("normalize: out= is not supported (dl ops return new tensors)")
    denom = ew.clamp_min(norm(input, p, dim, keepdim=True), eps)
    return input / denom


def _clamped_norm(x: Tensor, dim: int, eps: float) -> Tensor:
    """||x||_2 along dim (kept), raised to eps where smaller. As PyTorch's
    cosine_similarity, the clamp is made without autograd (an in-place clamp_min_ under
    no_grad there): the gradient flows to the unclamped norm as if nothing were clamped."""
    n = vector_norm(x, 2, dim, keepdim=True)
    with no_grad():
        c = ew.clamp_min(n.detach(), eps)
    return record(c, "clamp_min_", (n,), lambda g: (g,))


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """The cosine of the angle between x1 and x2 along `dim` (they broadcast), as
    torch.nn.functional.cosine_similarity: sum((x1 / max(||x1||, eps)) *
    (x2 / max(||x2||, eps)), dim), PyTorch's formula (each side normalised first, the
    clamps invisible to autograd). The common dtype must be floating point (else a
    DTypeError, as PyTorch's RuntimeError); integer operands are cast to it."""
    if not is_tensor(x1) or not is_tensor(x2):
        raise TypeError("cosine_similarity: x1 and x2 must be tensors")
    common = result_type(x1, x2)
    if not common.is_float:
        raise ew.DTypeError(f"cosine_similarity: expected common dtype to be floating point, "
                            f"yet common dtype is {common.name}")
    if not x1.dtype.is_float:
        x1 = x1.to(common)
    if not x2.dtype.is_float:
        x2 = x2.to(common)
    a, b = broadcast_tensors(x1, x2)
    return _sum((a / _clamped_norm(a, dim, eps)) * (b / _clamped_norm(b, dim, eps)), dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """The p-norm of x1 - x2 + eps over the last dim of their broadcast shape, as
    torch.nn.functional.pairwise_distance (PyTorch's formula: eps is added to the
    difference). Any p a norm takes (negative ones too); integer operands give float32.
    Differentiable."""
    if not is_tensor(x1) or not is_tensor(x2):
        raise TypeError("pairwise_distance: x1 and x2 must be tensors")
    return norm(x1 - x2 + eps, p, max(x1.ndim, x2.ndim) - 1, keepdim)

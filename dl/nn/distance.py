"""Distance modules with torch's names and constructor arguments: CosineSimilarity,
PairwiseDistance (dl/nn/functional_distance.py computes them)."""
from __future__ import annotations

from . import functional_distance as F
from .module import Module

__all__ = ["CosineSimilarity", "PairwiseDistance"]


class CosineSimilarity(Module):
    """cosine_similarity(x1, x2) along `dim`, norms clamped to `eps`, as torch.nn's."""

    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        """The cosine similarity of x1 and x2 along the module's dim."""
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """pairwise_distance(x1, x2): the p-norm of x1 - x2 + eps over the last dim, as
    torch.nn's."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        """The p-norm distance of x1 and x2 over their last dim."""
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)

"""movedim / moveaxis: a permute view that moves dims to new positions, as torch's."""
from __future__ import annotations

from .. import shapes
from ..tensor import Tensor
from .registry import register
from .shape import permute

__all__ = ["moveaxis", "movedim"]


def _dim_list(v, what: str) -> list[int]:
    vs = list(v) if isinstance(v, (tuple, list)) else [v]
    for d in vs:
        if isinstance(d, bool) or not isinstance(d, int) and not hasattr(d, "__index__"):
            raise TypeError(f"movedim: {what} must be an int or a sequence of ints, got {v!r}")
    return [int(d) for d in vs]


@register("movedim", "moveaxis", method=("movedim", "moveaxis"))
def movedim(input: Tensor, source, destination) -> Tensor:  # noqa: A002
    """A view of input with the dims `source` (an int or a sequence) moved to the positions
    `destination`, the other dims keeping their order, as torch.movedim. Negative dims count
    from the end; a repeated dim, or source and destination of different lengths, is a
    RuntimeError as PyTorch's (a dim out of range an IndexError). Registered also as
    `moveaxis`. Differentiable. Also `t.movedim(...)`, `t.moveaxis(...)`."""
    src, dst = _dim_list(source, "source"), _dim_list(destination, "destination")
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) "
                           f"should contain the same number of dims as destination ({dst} "
                           f"dims)")
    n = input.ndim
    src = [shapes.norm_dim(d, n) for d in src]
    dst = [shapes.norm_dim(d, n) for d in dst]
    for name, ds in (("source", src), ("destination", dst)):
        if len(set(ds)) != len(ds):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({ds})")
    if n == 0:
        return input
    order = [-1] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(n) if d not in src)
    order = [next(rest) if o == -1 else o for o in order]
    return input if order == list(range(n)) else permute(input, tuple(order))


moveaxis = movedim

"""Clearing parameters' gradients, as `Module.zero_grad` and `Optimizer.zero_grad` do."""
from __future__ import annotations


def zero_grads(params, set_to_none: bool = True) -> None:
    """Each parameter's `.grad` set to None (the default), or, with set_to_none=False, the
    gradient tensor itself zeroed in place (detached from any graph a create_graph backward
    gave it), as PyTorch's: a reference to `p.grad` taken before then holds zeros, and
    `p.grad` stays a tensor."""
    for p in params:
        g = p.grad
        if g is None:
            continue
        if set_to_none:
            p.grad = None
            continue
        if g.requires_grad:
            g = p.grad = g.detach()
        g.zero_()

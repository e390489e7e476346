"""Hooks on a leaf's gradient accumulation, as PyTorch's
`Tensor.register_post_accumulate_grad_hook`: `hook(t)` runs during `backward`, right after
the gradient of leaf `t` for this backward has been added into `t.grad` (so `t.grad` is final
for this backward; it may still be lazy: `t.grad._materialise()` computes it). Data-parallel
training starts a bucket's all-reduce from here (dl.nn.parallel).

    h = dl.autograd.register_post_accumulate_grad_hook(w, lambda t: print(t.grad.shape))
    h.remove()

(A function, not yet torch's Tensor method: the Tensor method surface is declared in
dl/ops/registry.py, which may bind it as `Tensor.register_post_accumulate_grad_hook`.)

The hooks live on the tensor itself (an attribute the tape reads), so they go with it."""
from __future__ import annotations

import itertools

from ..tensor import Tensor

_ATTR = "_post_accumulate_grad_hooks"
_ids = itertools.count()


class RemovableHandle:
    """What registering a hook returns: `.remove()` unregisters it (idempotent)."""

    def __init__(self, hooks: dict, key: int):
        self._hooks, self.id = hooks, key

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def register_post_accumulate_grad_hook(t: Tensor, hook) -> RemovableHandle:
    """Run `hook(t)` each time backward has accumulated `t`'s gradient into `t.grad` (leaf
    tensors that require grad only, as PyTorch)."""
    if not t.requires_grad or t._grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks can only be registered on leaf tensors "
                           "that require grad")
    hooks = t.__dict__.get(_ATTR)
    if hooks is None:
        hooks = {}
        setattr(t, _ATTR, hooks)
    key = next(_ids)
    hooks[key] = hook
    return RemovableHandle(hooks, key)


def run_post_accumulate_grad_hooks(t: Tensor) -> None:
    """Called by the tape after accumulating a leaf's gradient."""
    hooks = t.__dict__.get(_ATTR)
    if hooks:
        for h in list(hooks.values()):
            h(t)


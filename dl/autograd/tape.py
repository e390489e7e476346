"""Reverse-mode autodiff on a tape.

Every differentiable op that sees an input requiring grad (while grad mode is on) attaches a
`GradFn` to its output: the inputs and a closure from the output's gradient to the inputs'
gradients. `backward` walks the recorded graph in reverse topological order. Gradients are
built from the same lazy elementwise ops as the forward pass, so a backward chain fuses too;
leaf gradients are materialised at the end, one kernel per shape.

The tape sits below dl.ops (docs/dl.md, "Layers"): it adds gradients with the Tensor's own
`+` and makes the seed gradient with a fusion generator, never calling dl.ops itself (a
gradient an op returns in pieces, such as indexing's, has its own `+` and `dense()`)."""
from __future__ import annotations

from ..fusion import elementwise, realise
from .grad_mode import _state as _grad_state
from .grad_mode import no_grad
from .hooks import run_post_accumulate_grad_hooks


class GradFn:
    __slots__ = ("name", "inputs", "backward")

    def __init__(self, name: str, inputs: tuple, backward):
        self.name = name
        self.inputs = inputs  # tensors (or None for inputs that take no gradient)
        self.backward = backward  # grad_out -> tuple of grads (None where not needed)

    def __repr__(self) -> str:
        return f"<{self.name}Backward>"


def needs_grad(*xs) -> bool:
    if not _grad_state.on:
        return False
    for x in xs:  # a loop, not any(genexpr): every eager op asks
        if getattr(x, "requires_grad", False):
            return True
    return False


def record(out, name: str, inputs: tuple, backward):
    """Attach a GradFn to `out` when any tensor input requires grad; returns out."""
    if needs_grad(*inputs):
        out.requires_grad = True
        out._grad_fn = GradFn(name, tuple(x if getattr(x, "requires_grad", False) else None
                                          for x in inputs), backward)
    return out


def _topo(root) -> list:
    order, seen = [], set()
    stack = [(root, False)]
    while stack:
        t, done = stack.pop()
        if done:
            order.append(t)
            continue
        if id(t) in seen:
            continue
        seen.add(id(t))
        stack.append((t, True))
        if t._grad_fn is not None:
            # leaves first onto the stack, so they come right after their consumer in the
            # reversed order: a parameter's gradient is final (and its post-accumulate hook
            # runs) as soon as possible, not at the end of backward; same values
            for leaf in (True, False):
                for x in t._grad_fn.inputs:
                    if x is not None and id(x) not in seen and (x._grad_fn is None) == leaf:
                        stack.append((x, False))
    return order


def _released(name: str):
    def again(g):
        raise RuntimeError(f"backward through {name} a second time: its graph was freed by "
                           f"the first backward (pass retain_graph=True to keep it)")
    return again


def backward(root, grad=None, retain_graph: bool = False) -> None:
    if not root.requires_grad:
        raise RuntimeError("backward() on a tensor that does not require grad (set "
                           "requires_grad=True on a leaf it depends on)")
    if grad is None:
        if root.numel() != 1:
            raise RuntimeError(f"backward() without a gradient needs a one-element output, "
                               f"got shape {root.shape}: pass grad=")
        grad = elementwise("full", [1], [root.dtype.compute], root.dtype, device=root.device,
                           shape=root.shape)  # ones_like(root)
    with no_grad():
        grads = {id(root): grad}
        touched = []
        order = _topo(root)
        for t in reversed(order):
            g = grads.pop(id(t), None)
            if g is None:
                continue
            dense = getattr(g, "dense", None)
            if dense is not None:  # a gradient kept in pieces while they were summed
                g = dense()
            if t._grad_fn is None:
                if t.requires_grad:
                    g = g if g.dtype == t.dtype else g.to(t.dtype)
                    t.grad = g if t.grad is None else t.grad + g
                    touched.append(t)
                    run_post_accumulate_grad_hooks(t)
                continue
            for x, gx in zip(t._grad_fn.inputs, t._grad_fn.backward(g)):
                if x is None or gx is None:
                    continue
                if gx.shape != x.shape:
                    raise RuntimeError(f"{t._grad_fn.name} backward gave a gradient of shape "
                                       f"{gx.shape} for an input of shape {x.shape}")
                prev = grads.get(id(x))
                # a gradient in pieces adds itself (a Tensor's + would take it for a scalar)
                grads[id(x)] = gx if prev is None else \
                    gx + prev if hasattr(gx, "dense") else prev + gx
        realise([t.grad for t in touched])
    if not retain_graph:
        # as PyTorch: the closures go (they hold the forward's outputs, often in a cycle
        # through the output's own GradFn, which kept their memory until the next gc pass)
        for t in order:
            if t._grad_fn is not None:
                t._grad_fn.backward = _released(t._grad_fn.name)

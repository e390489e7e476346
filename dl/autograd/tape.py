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

import weakref

from .. import shapes
from ..fusion import elementwise, realise, writes
from ..fusion.materialise import settled
from ..tensor import Tensor
from .grad_mode import _state as _grad_state
from .grad_mode import no_grad
from .hooks import run_post_accumulate_grad_hooks
from .overwrites import backward_of, check_history, view_at
from .planned import backward as planned


class GradFn:
    """A node of the graph: an op's gradient. Its `inputs` are edges, one per operand: the
    operand's own GradFn as it was when the op ran, the operand itself for a leaf that
    requires grad, None for an operand taking no gradient. Edges name nodes, not tensors,
    as PyTorch's do: an in-place op later gives a tensor a new GradFn, and the ops that read
    it before keep sending their gradients to the old one."""
    __slots__ = ("name", "inputs", "backward", "operands", "at", "out", "saved", "plan")

    def __init__(self, name: str, inputs: tuple, backward, operands: tuple = (), at: int = 0,
                 out=None, saved=None, plan=None):
        self.name = name
        self.inputs = inputs
        self.backward = backward  # grad_out -> tuple of grads (None where not needed)
        # every operand (those taking no gradient too: a closure may read them), the
        # in-place write count when recorded and a weak reference to the output (see
        # dl/autograd/overwrites.py)
        self.operands, self.at, self.out = operands, at, out
        self.saved = saved  # the output's alias the closure reads (`saved_output`), or None
        self.plan = plan  # (tag, extra buffers, fuses_g) of a backward run as one plan
        # (dl/autograd/planned.py)

    def __repr__(self) -> str:
        return f"<{self.name}Backward>"


def needs_grad(*xs) -> bool:
    if not _grad_state.on:
        return False
    for x in xs:  # a loop, not any(genexpr): every eager op asks
        if getattr(x, "requires_grad", False):
            return True
    return False


def record(out, name: str, inputs: tuple, backward, saved=None, plan=None):
    """Attach a GradFn to `out` when any tensor input requires grad; returns out. saved: the
    `saved_output` alias of out that backward reads, if it reads out. plan: (tag, buffers)
    or (tag, buffers, fuses_g) of an op whose gradients are fresh library results: the
    settings and the memory the closure reads beyond its operands and `saved`, and whether
    it takes a lazy output gradient into lazy ops of its own rather than computing it
    first (dl/autograd/planned.py)."""
    if needs_grad(*inputs):
        dt = getattr(out, "dtype", None)
        if dt is not None and not dt.is_float:
            # an integer or bool result has no gradient, as in PyTorch: a float that
            # requires grad written into a bool tensor (`b[...] = x`) must not make b a
            # path for x's gradient (it gave gradients torch has as zero)
            return out
        at = writes.count[0]
        if at:  # some storage was written in place (none: nothing can be stale)
            check_history(inputs)
        out.requires_grad = True
        if plan is not None and len(plan) == 2:
            plan = (*plan, False)
        out._grad_fn = GradFn(name, tuple(_edge(x) for x in inputs), backward, inputs, at,
                              weakref.ref(out), saved, plan)
        out._hist_at = at
    return out


def saved_output(y):
    """What a gradient closure keeps of its op's own output y: a detached alias (y's
    storage or lazy value, as `detach()` gives), passed to `record` as `saved` too. The
    closure is y's GradFn's, which y holds, so keeping y itself made a cycle that kept y
    and its memory (out of the buffer pool) alive until a gc pass whenever no backward
    released the graph: a forward under grad mode without a backward (evaluation without
    no_grad) then wrote every output to fresh pages, 3.5x slower than torch for a ReLU of
    4 MB. The alias holds no history, as torch's saved outputs hold no grad_fn."""
    if y._buf is None:
        return Tensor._lazy(y._node, y.device)  # computed with y (they share the node)
    return Tensor(y._buf, y.shape, y._strides, y.offset, y.dtype, y.device)


def _edge(x):
    """Where an operand's gradient goes: its GradFn now, itself (a leaf), or None."""
    if not getattr(x, "requires_grad", False):
        return None
    fn = x._grad_fn
    return x if fn is None else fn


def _topo(root) -> list:
    """The nodes under root (a GradFn or a leaf tensor), each after every node it feeds."""
    order, seen = [], set()
    stack = [(root, False)]
    pop, push, add = stack.pop, stack.append, seen.add
    while stack:
        n, done = pop()
        if done:
            order.append(n)
            continue
        i = id(n)
        if i in seen:
            continue
        add(i)
        push((n, True))
        if n.__class__ is GradFn:
            # leaves first onto the stack, so they come right after their consumer in the
            # reversed order: a parameter's gradient is final (and its post-accumulate hook
            # runs) as soon as possible, not at the end of backward; same values
            ins = n.inputs
            for x in ins:
                if x is not None and x.__class__ is not GradFn and id(x) not in seen:
                    push((x, False))
            for x in ins:
                if x.__class__ is GradFn and id(x) not in seen:
                    push((x, False))
    return order


def _released(name: str):
    def again(g):
        raise RuntimeError(f"backward through {name} a second time: its graph was freed by "
                           f"the first backward (pass retain_graph=True to keep it)")
    return again


def _seed(root, grad):
    """The gradient given to backward() as PyTorch checks it: a tensor of the output's shape
    and device, cast to the output's dtype (a float32 gradient into a float64 graph: every
    gradient below would be float32 values under float64 labels)."""
    if not isinstance(grad, Tensor):
        raise TypeError(f"backward(): the gradient must be a tensor, got "
                        f"{type(grad).__name__}")
    if tuple(grad.shape) != tuple(root.shape):
        raise RuntimeError(f"backward(): mismatch in shape: the gradient has shape "
                           f"{tuple(grad.shape)} and the output {tuple(root.shape)}")
    if grad.device != root.device:
        raise RuntimeError(f"backward(): the gradient is on {grad.device}, the output on "
                           f"{root.device}")
    return grad if grad.dtype is root.dtype else grad.to(root.dtype)


def _own(g: Tensor, claimed: set) -> Tensor:
    """g as a new `.grad`, as PyTorch's AccumulateGrad takes it: dense storage of its own
    (a copy where g is an expanded or strided view, the seed, or memory another gradient of
    this backward already took: `a + b` sends one tensor to both), so an in-place op on one
    gradient (`p.grad.mul_(s)`, a later accumulation) changes no other tensor."""
    settled(g)
    key = _storage_key(g)
    if key in claimed or g._buf is not None and (
            g.offset or g._strides != shapes.contiguous_strides(g.shape) or
            g._buf.size != shapes.numel(g.shape)):
        g = elementwise("identity", [g], [g.dtype.compute], g.dtype)  # a copy
        key = _storage_key(g)
    claimed.add(key)
    return g


def _storage_key(g: Tensor) -> int:
    """What names g's storage in a backward: its buffer, or for a lazy g its node (whose
    storage is made when it is computed, for every tensor on the node)."""
    return id(g._node) if g._buf is None else id(g._buf)


def _accumulate(t: Tensor, g: Tensor, claimed: set) -> None:
    """t.grad += g in place (a reference to t.grad sees the sum, as PyTorch's); the first
    gradient becomes t.grad through `_own`."""
    if t.grad is None:
        t.grad = _own(g, claimed)
    else:
        t.grad.add_(g)


def backward(root, grad=None, retain_graph: bool = False) -> None:
    if not root.requires_grad:
        raise RuntimeError("backward() on a tensor that does not require grad (set "
                           "requires_grad=True on a leaf it depends on)")
    seeded = grad is None
    if grad is None:
        if root.numel() != 1:
            raise RuntimeError(f"backward() without a gradient needs a one-element output, "
                               f"got shape {root.shape}: pass grad=")
        grad = elementwise("full", [1], [root.dtype.compute], root.dtype, device=root.device,
                           shape=root.shape)  # ones_like(root)
    else:
        grad = _seed(root, grad)
    # the caller's gradient is theirs: a leaf taking it takes a copy (the seed made here, a
    # tensor of ones, is not claimed)
    claimed = set() if seeded else {_storage_key(grad)}
    with no_grad():
        node = root if root._grad_fn is None else root._grad_fn
        grads = {id(node): grad}
        touched = []
        order = _topo(node)
        for n in reversed(order):
            g = grads.pop(id(n), None)
            if g is None:
                continue
            dense = getattr(g, "dense", None)
            if dense is not None:  # a gradient kept in pieces while they were summed
                g = dense()
            if n.__class__ is not GradFn:  # a leaf
                if n.requires_grad:
                    g = g if g.dtype == n.dtype else g.to(n.dtype)
                    _accumulate(n, g, claimed)
                    touched.append(n)
                    run_post_accumulate_grad_hooks(n)
                continue
            if n.out is not None:  # the output asked for its gradient (`retain_grad()`)
                t = n.out()
                if t is not None and t._grad_fn is n and t.__dict__.get("_retains_grad"):
                    # a copy, summed out of place (PyTorch's retain_grad hook)
                    t.grad = _own(g, claimed) if t.grad is None else t.grad + g
            gxs = planned(n, g) if n.at == writes.count[0] else backward_of(n, g)
            for e, x, gx in zip(n.inputs, n.operands, gxs):
                if e is None or gx is None:
                    continue
                # as when n ran (`x.t_()` may reshape x: only such an x has views before)
                shape = view_at(x, n.at)[0] if "_views_before" in x.__dict__ else x.shape
                if gx.shape != shape:
                    raise RuntimeError(f"{n.name} backward gave a gradient of shape "
                                       f"{gx.shape} for an input of shape {shape}")
                if gx.dtype != x.dtype and x.dtype.is_float:
                    # in the input's type, as PyTorch's engine casts it: an f32 product
                    # added to an f64 sum gets an f64 gradient, which its own backward
                    # (a matmul of f32 operands) must not see
                    gx = (gx.dense() if hasattr(gx, "dense") else gx).to(x.dtype)
                k = id(e)
                prev = grads.get(k)
                # a gradient in pieces adds itself (a Tensor's + would take it for a scalar)
                grads[k] = gx if prev is None else \
                    gx + prev if hasattr(gx, "dense") else prev + gx
        realise([t.grad for t in touched])
    if not retain_graph:
        # as PyTorch: the closures go (they hold the forward's outputs, often in a cycle
        # through the output's own GradFn, which kept their memory until the next gc pass),
        # and the operands: a graph kept alive by its output (the loss a training step
        # returns) then holds none of the forward's values, and no lazy value of them waits
        # to be computed when an optimiser overwrites a parameter
        for n in order:
            if n.__class__ is GradFn:
                n.backward = _released(n.name)
                n.inputs = n.operands = ()
                n.saved = n.plan = None

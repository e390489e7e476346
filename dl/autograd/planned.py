"""A node's whole backward through one dispatch plan (dl/kernels/plan.py).

A conv2d's backward is five or six library calls (the gradient's layout, the weight and input
gradients, the bias's sums), each through its own plan: ~120 us of Python a convolution in a
training step whose kernels take ~60. The ops whose gradients are fresh library results (no
lazy values, no views) declare it at `record` with a `plan` tag: the forward's settings
their closure reads beyond the operands (stride, padding, activation...), and the buffers it
reads beyond them (the saved output is taken from the node). The tape then runs such a node's
backward as one plan keyed on the tag, the output gradient's and every operand's view, dtype
and requires_grad, and which of their memories alias: after the warm-up, a step replays its
launches without the closure's Python.

What keeps it sound is the plan's own rule: a trace whose launches touch memory that is
neither an operand nor allocated in the call, read the host or autotuned gets no plan, and
the closure runs as before. A gradient that is not a whole contiguous buffer of its own (a
view, a lazy value the closure left unmaterialised) is materialised in the trace; one that
still is not gives the key up."""
from __future__ import annotations

from .. import shapes
from ..kernels import plan
from ..tensor import Tensor


def _view(t, key: list, ptrs: list, ops: list) -> bool:
    """Appends t's part of the key and its memory; False where t has none to name."""
    if t is None:
        key.append(None)
        return True
    if t.__class__ is Tensor or isinstance(t, Tensor):
        b = t._buf
        if b is None:
            return False  # lazy: its memory is not made yet
        key.append((t.shape, t._strides, t.offset, t.dtype, t.requires_grad, b.shape,
                    b.strides, b.elem))
    else:  # a library buffer the closure reads (a pool's argmax positions)
        b = t
        key.append((b.shape, b.strides, b.elem))
    p = b.__dict__.get("ptr")
    if p is None:
        return False
    ops.append(b)
    ptrs.append(p)
    return True


def backward(n, g: Tensor) -> tuple:
    """n.backward(g) through the plan of n's tag (`n.plan`), or directly where the plan
    cannot serve (tag None, plans off, memory without a name)."""
    spec = n.plan
    if spec is None or not plan.enabled:
        return n.backward(g)
    tag, extra, fuses_g = spec
    if g._buf is None:
        if fuses_g:  # the closure's own lazy ops take g in: computing it first costs a kernel
            return n.backward(g)
        g._materialise()  # the closure's first act
    rt = g.device.rt
    key: list = [backward, tag, plan._epoch[0], rt]
    ptrs: list = [None]
    ops: list = [rt]
    for t in (g, *n.operands, n.saved, *extra):
        if not _view(t, key, ptrs, ops):
            return n.backward(g)
    alias = plan.alias_key(ptrs)
    if alias is not None:
        key.append(alias)
    key = tuple(key)
    got: list = []

    def run():
        gxs = tuple(n.backward(g))
        got.append(gxs)
        layout, bufs = [], []
        for gx in gxs:
            if gx is None:
                layout.append(None)
                bufs.append(None)
                continue
            gx._materialise()
            b = gx._buf
            if gx.offset or b.size != shapes.numel(gx.shape) or \
                    gx._strides != shapes.contiguous_strides(gx.shape):
                got.append(None)  # not a buffer of its own: no plan for the key
            layout.append((gx.shape, gx.dtype))
            bufs.append(b)
        # the layout rides along as a constant of the plan (not a buffer: kept as traced)
        return (*bufs, tuple(layout))

    try:
        *bufs, layout = plan.planned_key(key, ptrs, tuple(ops), run)
    finally:
        if len(got) > 1:  # a gradient a replay could not rebuild: never planned again
            plan._plans[key] = plan._NONE
    if got:
        return got[0]
    device = g.device
    out = []
    for b, lay in zip(bufs, layout, strict=True):
        if b is None:
            out.append(None)
        else:
            shape, dtype = lay
            out.append(Tensor(b, shape, shapes.contiguous_strides(shape), 0, dtype, device))
    return tuple(out)

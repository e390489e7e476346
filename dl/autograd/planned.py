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
lazy value the closure left unmaterialised, a view) is computed, or copied, in the call."""
from __future__ import annotations

from .. import shapes
from ..fusion import elementwise
from ..kernels import plan
from ..tensor import Tensor


def backward(n, g: Tensor) -> tuple:
    """n.backward(g) through the plan of n's tag (`n.plan`), or directly where the plan
    cannot serve (tag None, plans off, a lazy operand; memory without a name: the plan's
    own rule)."""
    spec = n.plan
    if spec is None or not plan.enabled:
        return n.backward(g)
    tag, extra, fuses_g = spec
    if g._buf is None:
        if fuses_g:  # the closure's own lazy ops take g in: computing it first costs a kernel
            return n.backward(g)
        g._materialise()  # the closure's first act
    # the tensors' views (and requires_grad) in the tag; `planned_bufs` keys their memory
    # (each buffer's shape and strides, which of them alias) as every tensor-level plan's
    key: list = [backward, tag]
    bufs: list = []
    for t in (g, *n.operands, n.saved, *extra):
        if t is None:
            key.append(None)
            continue
        if isinstance(t, Tensor):
            if t._buf is None:
                return n.backward(g)  # lazy: its memory is not made yet
            key.append((t.shape, t._strides, t.offset, t.dtype, t.requires_grad))
            t = t._buf
        bufs.append(t)  # a tensor's storage, or a library buffer (a pool's argmax)
    got: list = []

    def run():
        gxs = tuple(None if gx is None else _whole(gx) for gx in n.backward(g))
        got.append(gxs)
        # the layout rides along as a constant of the plan (not a buffer: kept as traced)
        return (*(None if gx is None else gx._buf for gx in gxs),
                tuple(None if gx is None else (gx.shape, gx.dtype) for gx in gxs))

    *out, layout = plan.planned_bufs(tuple(key), g.device.rt, tuple(bufs), run)
    if got:  # run ran (warm-up, trace, or no plan for the key): its tensors
        return got[0]
    device = g.device
    return tuple(None if b is None else
                 Tensor(b, lay[0], shapes.contiguous_strides(lay[0]), 0, lay[1], device)
                 for b, lay in zip(out, layout, strict=True))


def _whole(gx: Tensor) -> Tensor:
    """gx computed, as a whole contiguous buffer of its own (a copy of a view), which a
    replay gives back as a tensor of gx's shape."""
    gx._materialise()
    if gx.offset or gx._buf.size != shapes.numel(gx.shape) or \
            gx._strides != shapes.contiguous_strides(gx.shape):
        gx = elementwise("identity", [gx], [gx.dtype.compute], gx.dtype)._materialise()
    return gx

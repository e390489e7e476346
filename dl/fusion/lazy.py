"""Recording elementwise ops: a new lazy tensor per op, fused later (or at once when fusion
is off or the graph is too big)."""
from __future__ import annotations

import weakref

import numpy as np

from cube import recording

from .. import shapes
from ..kernels import plan
from ..tensor import Tensor, prune_pending
from . import settings
from .graph import Const, Node
from .materialise import materialise, settled


class ScalarOverflowError(OverflowError, RuntimeError):
    """A Python int outside the range of the integer type it enters a kernel as (an
    OverflowError, and a RuntimeError as PyTorch's): refused when the op is made, where
    packing it would fail at the launch (or a wrapped value compare wrongly: torch's
    `int32 < 2**31` is False)."""


def _fits(x, t) -> bool:
    """Whether the number x is in the range of the integer type t."""
    bits = 8 * t.itemsize
    if t.cube.is_signed:
        return -(1 << (bits - 1)) <= x < 1 << (bits - 1)
    return 0 <= x < 1 << bits


def elementwise(op: str, inputs: list, in_types: list, dtype, device=None, attrs: tuple = (),
                shape=None) -> Tensor:
    """A lazy tensor for `op(*inputs)`. Inputs are tensors (broadcast together) or Python
    scalars (passed as kernel arguments of their in_type); generators give `shape`."""
    a = b = None
    if len(inputs) == 2 and len(in_types) == 2 and shape is None and device is None:
        a, b = inputs
    if a.__class__ is Tensor and b.__class__ is Tensor and a.shape == b.shape and \
            a.device is b.device:  # an eager binary op's common case: nothing to check
        args = (a if a._node is None else a._node, b if b._node is None else b._node)
        shape, device = a.shape, a.device
    else:
        args, shape, device = _node_inputs(op, inputs, in_types, shape, device)
    node = Node(op, tuple(args), tuple(in_types), dtype, tuple(shape), attrs)
    out = Tensor._lazy(node, device)
    if not settings.enabled() or node.size > settings.MAX_NODES or _reads_shared(args):
        materialise([out])
    return out


def _reads_shared(args) -> bool:
    """Whether an input is a storage handed out writable (`share_out`): computed now,
    the op reads the values of now, as an eager op does, not those of a later write into
    the shared array."""
    for x in args:
        if x.__class__ is Tensor and x._buf is not None:
            try:  # not getattr: a backward may build (and never compute) a lazy value
                d = object.__getattribute__(x._buf, "__dict__")  # of a stale storage
            except AttributeError:
                continue
            if d.get("_shared_out", False):
                return True
    return False


def _node_inputs(op: str, inputs: list, in_types: list, shape, device):
    """(a node's inputs, its shape, its device) for `elementwise`'s inputs: the broadcast
    shape, one device, scalars as `Const`s, lazy inputs of that shape as their nodes."""
    tensors = [x for x in inputs if isinstance(x, Tensor)]
    if shape is None:
        shape = shapes.broadcast_shapes(*(t.shape for t in tensors))
    if device is None:
        device = tensors[0].device
    for t in tensors:
        if t.device is not device and t.device != device:
            raise ValueError(f"{op}: tensors on different devices ({device} and {t.device}); "
                             f"move one with .to()")
    if len(inputs) != len(in_types):
        raise ValueError(f"{op}: {len(inputs)} inputs with {len(in_types)} input types")
    args = []
    for x, t in zip(inputs, in_types):
        if not isinstance(x, Tensor):
            if t.category == 1 and not _fits(x, t):
                raise ScalarOverflowError(
                    f"{op}: the value {x} cannot be converted to {t.name} without overflow "
                    f"(use a tensor of a wider type)")
            args.append(Const(x, t))
        elif x._node is not None and x.shape == shape:
            args.append(x._node)
        else:
            if x._node is not None:  # a lazy value read broadcast: compute it first
                x._materialise()
            args.append(x)
    return args, shape, device


def realise(tensors: list[Tensor]) -> None:
    """Materialise several lazy tensors, one kernel per (shape, device) group."""
    groups: dict = {}
    for t in tensors:
        if t is not None and t._node is not None:
            groups.setdefault((t.shape, t.device), []).append(t)
    for group in groups.values():
        if len(group) == 1:  # one value (a parameter's accumulated gradient): its plan
            group[0]._materialise()
        else:
            materialise(group)


def _compute(t: Tensor) -> None:
    """`Tensor._compute`: a lazy tensor computed into fresh storage (its own fused kernel)."""
    if recording.current() is not None and \
            getattr(t, "_generation", None) != recording.generation:
        # made before this recording began (a module's zero-initialised buffer): computed
        # once, as eagerly, not again at every replay
        with recording.paused():
            materialise([t])
    elif settled(t):  # another tensor on its node computed it: the same storage
        return
    elif not plan.enabled or not _planned_one(t):
        materialise([t])


PLAN_MAX_NODES = 32  # bigger graphs: fusion's own structure cache (a chain of x 12 / 24 ops:
# 97 / 156 us that way, 65 / 111 through a plan; the limit was 8, which sent batch norm's
# 9-node input gradient down the slow path at every step)


def _visit(n: Node, ops: list, sig: list, pos: dict, leaves: dict) -> bool:
    """Appends n's graph to sig (nodes in topological order, each input a node's position,
    a leaf's operand index with its view, or a scalar's value) and its leaves' memory to
    ops; False where a leaf is itself lazy. A plain function, not a closure: a recursive
    closure is a reference cycle, which kept the operands alive until a gc pass."""
    refs = []
    for x in n.inputs:
        if x.__class__ is Const:
            refs.append((plan.scalar_key(x.value), x.dtype))
            continue
        if x.__class__ is Node:
            if x.result is None:
                k = pos.get(id(x))
                if k is None:
                    if not _visit(x, ops, sig, pos, leaves):
                        return False
                    k = pos[id(x)]
                refs.append(k)
                continue
            x = x.result
        if x._node is not None:
            return False
        lk = (id(x._buf), x.shape, x._strides, x.offset)
        j = leaves.get(lk)
        if j is None:
            j = leaves[lk] = len(ops)
            ops.append(x._buf)
        refs.append((j, x.shape, x._strides, x.offset, x.dtype))
    pos[id(n)] = len(sig)
    sig.append((n.op, n.dtype, n.in_types, n.attrs, n.shape, tuple(refs)))
    return True


def _planned_one(t: Tensor) -> bool:
    """A small graph over materialised tensors and scalars (what an eager program makes op
    by op: one op, or an op and its backward's mask) through a dispatch plan
    (dl/kernels/plan.py): its kernel, grid and argument layout decided once per (ops, types,
    shapes, strides, offsets, scalar values); False for a bigger graph."""
    node = t._node
    if node.size == 1:  # one op over leaves and scalars: the key made here, in one pass
        return _planned_leaves(t, node)
    if node.size > PLAN_MAX_NODES:
        return False
    ops: list = [t.device.rt]
    sig: list = []
    if not _visit(node, ops, sig, {}, {}):
        return False
    return _through_plan(t, node, plan.planned, tuple(sig), tuple(ops))


def write_into(t: Tensor, dst: Tensor) -> None:
    """The lazy t's values written into dst's storage (`materialise([t], [dst])`: an
    in-place op, a setitem), through a dispatch plan keyed as `_planned_one`'s graph plus
    dst's view: a repeated write skips building the fused graph. t stays lazy."""
    def run():
        materialise([t], [dst])

    node = t._node  # None: t was computed already (fusion off), the write is a copy
    if node is not None and node.result is None and plan.enabled and \
            node.size <= PLAN_MAX_NODES and (
                recording.active is None or recording.current() is None):
        ops: list = [t.device.rt]
        sig: list = []
        if _visit(node, ops, sig, {}, {}):
            ops.append(dst._buf)  # the alias key tells a write into a leaf's memory
            sig.append(("into", len(ops) - 1, dst.shape, dst._strides, dst.offset, dst.dtype))
            plan.planned(tuple(sig), tuple(ops), run)
            return
    run()


def _through_plan(t: Tensor, node: Node, planned, *key) -> bool:
    """t computed by `planned(*key, run)` (a plan's replay, or run: the fused kernel); a
    replay computed into fresh storage, which t and its node then take."""
    def run():
        materialise([t])
        return t._buf

    buf = planned(*key, run)
    if t._node is not None:
        _adopt(t, node, buf)
    return True


def _adopt(t: Tensor, node: Node, buf) -> None:
    """The lazy t and its node take a replay's fresh contiguous storage."""
    out = Tensor._lazy(node, t.device)  # t's own attributes, without Tensor()'s conversions
    out._buf, out._node = buf, None
    node.result = out
    settled(t)


def _planned_leaves(t: Tensor, node: Node) -> bool:
    """_planned_one of a single node whose inputs are materialised tensors and scalars."""
    rt = t.device.rt
    ops: list = [rt]
    ptrs: list = [None]
    refs: list = []
    for x in node.inputs:
        if x.__class__ is Const:
            refs.append((plan.scalar_key(x.value), x.dtype))
            continue
        if x._node is not None:
            return False
        b = x._buf
        p = b.__dict__.get("ptr")
        if p is None:  # no name for its memory: no plan (dl/kernels/plan.py)
            materialise([t])
            return True
        refs.append((b.shape, b.elem, x.shape, x._strides, x.offset, x.dtype))
        ops.append(b)
        ptrs.append(p)
    key = (_planned_leaves, plan._epoch[0], rt, node.op, node.dtype, node.in_types, node.attrs,
           node.shape, tuple(refs), plan.alias_key(ptrs))
    p = plan._plans.get(key)
    if p.__class__ is not plan.Plan:  # warming up, tracing or given up: the general path
        return _through_plan(t, node, plan.planned_key, key, ptrs, tuple(ops))
    _adopt(t, node, p.run(tuple(ops)))  # the plan's replay inline: an eager op's common case
    return True


def reads_storage(node: Node, ids: set, seen: set) -> bool:
    """Whether the graph under node reads a storage in ids. seen: the nodes found not to
    (shared across one write's pending tensors, which often share subgraphs)."""
    stack, mine = [node], set()
    while stack:
        x = stack.pop()
        if x.__class__ is Node:
            if id(x) in seen or id(x) in mine:
                continue
            mine.add(id(x))
            stack.extend(x.inputs if x.result is None else (x.result,))
        elif isinstance(x, Tensor):  # a Parameter too
            if x._buf is None:
                stack.append(x._node)
            elif id(x._buf) in ids:
                return True
    seen |= mine
    return False


class _Handed:
    """The base of a handed-out array: NumPy collapses a view's base to the array that owns
    the memory (a shared slab), so the array itself is made over this object, and every
    view of it keeps it, and its finaliser, alive."""

    __slots__ = ("held", "__array_interface__", "__weakref__")

    def __init__(self, arr):
        self.held = arr
        self.__array_interface__ = arr.__array_interface__


def share_out(x: Tensor, arr=None):
    """`Tensor._share_out`: x's storage is handed out writable as the NumPy array arr
    (`numpy()`, DLPack export; None: an import, shared for good), so a write may come that
    no dl op sees. The lazy values reading the storage are computed now, and while arr (or
    a view of it) lives the storage counts as shared (`_shared_out`), so that an elementwise
    op reading it is computed when made (`_reads_shared`): `b = a * 2` then a write into
    `a.numpy()` leaves b as torch's does. Once every such array is gone, no write can come
    that way and ops on the storage fuse again (an array taken only to look at the values
    costs no fusion after it)."""
    buf = x._buf
    if buf is None:
        return arr
    n = getattr(buf, "_shared_out", 0)
    if not n:  # readers made while it was shared were computed when made
        ids, seen = {id(buf)}, set()
        hits = [t for t in prune_pending() if reads_storage(t._node, ids, seen)]
        if hits:
            realise(hits)
    if arr is None:
        buf._shared_out = n + _FOR_GOOD
        return None
    out = np.asarray(_Handed(arr))
    buf._shared_out = n + 1
    weakref.finalize(out, _unshare, weakref.ref(buf))
    return out


_FOR_GOOD = 1 << 40


def _unshare(ref) -> None:
    buf = ref()
    if buf is not None:
        buf._shared_out -= 1


Tensor._compute = _compute  # fusion completes the core Tensor: lazy values are its own
Tensor._share_out = share_out  # and so is what handing a storage out means for them

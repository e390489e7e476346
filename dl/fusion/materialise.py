"""Computing lazy tensors: one fused kernel per call, cached by the graph's structure."""
from __future__ import annotations

import hashlib
import threading

from cube.frontend.translator import Target
from cube.kernel import check_features
from cube_ir.passes import run_pipeline
from cube_ir.printer import format_kernel
from runtimes.disk_cache import make_key

from .. import dtypes, shapes
from ..tensor import Tensor
from . import stats
from .graph import Const, Node
from .kernel import Structure, build

CUBE_DIM = 256
MAX_CUBES_X = 65535  # WebGPU's per-dimension limit: bigger launches use a 2-D cube count

_DTYPES = {d.name: d for d in (*dtypes.ALL, dtypes.uint32)}
_cache: dict = {}
_lock = threading.Lock()


def cube_count(n: int) -> tuple:
    cubes = -(-n // CUBE_DIM)
    if cubes <= MAX_CUBES_X:
        return (cubes, 1, 1)
    return (MAX_CUBES_X, -(-cubes // MAX_CUBES_X), 1)


ROWS_MIN_COLS = 64  # a shorter last dim would leave most units of a row's cube idle


def rows_cube_count(shape) -> tuple:
    rows = shapes.numel(shape[:-1])
    y = min(rows, MAX_CUBES_X)
    return (-(-shape[-1] // CUBE_DIM), y, -(-rows // y))


def _kernel_shape(shape) -> tuple:
    return shape if shape else (1,)  # a 0-d graph runs as one element of rank 1


def materialise(roots: list[Tensor], outs: list[Tensor] | None = None) -> None:
    """Compute the lazy `roots` (one shape, one device) in one kernel. Without `outs` each
    root gets fresh contiguous storage; with `outs` (materialised views of the roots' shape)
    the values are written there instead (the roots stay lazy)."""
    shape = roots[0].shape
    device = roots[0].device
    for r in roots:
        if r.shape != shape or r.device != device:
            raise ValueError(f"one fused kernel computes values of one shape on one device, "
                             f"got {shape} on {device} and {r.shape} on {r.device}")
    if outs is None:
        outs = [Tensor._empty(shape, r.dtype, device) for r in roots]
        attach = True
    else:
        attach = False
    if shapes.numel(shape) > 0:
        _run(roots, outs, _kernel_shape(shape), device)
    if attach:
        for r, o in zip(roots, outs, strict=True):
            if r._node is not None:
                r._node.result = o
            r._buf, r._node, r._strides, r.offset = o._buf, None, o._strides, 0


class Graph:
    """The nodes of one or more lazy roots in topological order, with their leaves (distinct
    views) and scalar constants, described hashably for the kernel structure."""

    def __init__(self):
        self.order: list[Node] = []
        self.pos: dict[int, int] = {}
        self.leaves: list = []
        self._leaf_pos: dict = {}
        self.consts: list[Const] = []
        self.nodes_desc: list = []

    def ref(self, x):
        if isinstance(x, Node) and x.result is not None:
            x = x.result
        if isinstance(x, Node):
            return ("n", self.pos[id(x)])
        if isinstance(x, Const):
            self.consts.append(x)
            return ("c", len(self.consts) - 1)
        key = (id(x._buf), x.shape, x._strides, x.offset)
        if key not in self._leaf_pos:
            self._leaf_pos[key] = len(self.leaves)
            self.leaves.append(x)
        return ("t", self._leaf_pos[key])

    def visit(self, root: Node) -> int:
        """Adds root's graph; returns root's position."""
        stack = [(root, False)]
        while stack:
            n, done = stack.pop()
            if id(n) in self.pos:
                continue
            if done:
                refs = tuple(self.ref(x) for x in n.inputs)
                self.pos[id(n)] = len(self.order)
                self.order.append(n)
                self.nodes_desc.append((n.op, n.dtype.name,
                                        tuple(t.name for t in n.in_types), n.attrs, refs))
                continue
            stack.append((n, True))
            for x in reversed(n.inputs):
                if isinstance(x, Node) and x.result is None and id(x) not in self.pos:
                    stack.append((x, False))
        return self.pos[id(root)]


def _run(roots, outs, kshape, device) -> None:
    g = Graph()
    nodes_desc, leaves, consts = g.nodes_desc, g.leaves, g.consts
    rank = len(kshape)
    out_desc = []
    for r, o in zip(roots, outs, strict=True):
        if r._node is None:  # already materialised: a copy (identity) into the output
            node = Node("identity", (r,), (r.dtype.compute,), r.dtype, r.shape)
        else:
            node = r._node
        contig = o.is_contiguous()
        out_desc.append((g.visit(node), o.dtype.name, contig))
    leaf_desc = []
    leaf_strides = []
    for t in leaves:
        st = shapes.broadcast_strides(t.shape, t._strides, roots[0].shape) or (0,)
        contig = tuple(t.shape) == tuple(roots[0].shape) and t.is_contiguous()
        leaf_desc.append((t.dtype.name, contig))
        leaf_strides.append(st)
    n = shapes.numel(kshape)
    rows = kshape[-1] >= ROWS_MIN_COLS and rank > 1 and \
        not all(c for _, c in leaf_desc) and all(c for _, _, c in out_desc)
    s = Structure(rank, tuple(nodes_desc), tuple(leaf_desc),
                  tuple(c.dtype.name for c in consts), tuple(out_desc), rows)
    exe = _compiled(device.rt, s)
    args = []
    for o in outs:
        args.append(o._karg(kshape, o._strides or (1,)))
    for t, (_, contig), st in zip(leaves, leaf_desc, leaf_strides, strict=True):
        args.append(t._buf if contig else t._karg(kshape, st))
    args.append(n)
    args += [o.offset for o in outs]
    args += [t.offset for t in leaves]
    args += [_py(c) for c in consts]
    exe.launch(rows_cube_count(kshape) if rows else cube_count(n), (CUBE_DIM, 1, 1), args)
    stats.record_launch("dl_fused[" + ",".join(d[0] for d in nodes_desc) + "]")


def _py(c: Const):
    d = c.dtype
    if d.category == 2:
        return float(c.value)
    if d.category == 1:
        return int(c.value)
    return bool(c.value)


def _compiled(rt, s: Structure, builder=build, extra=()):
    key = (rt, s, *extra)
    exe = _cache.get(key)
    if exe is not None:
        return exe
    with _lock:
        exe = _cache.get(key)
        if exe is None:
            kernel = builder(s, _DTYPES, *extra)
            kernel.source = "dl.fusion:" + hashlib.sha1(repr(s).encode()).hexdigest()[:12]
            kernel = run_pipeline(kernel)
            check_features(kernel, Target(rt.target, rt.plane_size, rt.features))
            exe = rt.compile(kernel, make_key(format_kernel(kernel), rt.name, rt.device_id()))
            stats.record_compile()
            _cache[key] = exe
    return exe


def cached_kernels() -> int:
    return len(_cache)

"""Reductions fused on read: a lazy elementwise graph is evaluated inside the reduction loop,
so `((a - b) ** 2).mean()` or `(x - m).square().sum(1)` is one kernel and the graph's
values never reach memory. Used by `dl.ops.reduce` for lazy inputs; materialised inputs go to
the kernel library's tuned reduction instead."""
from __future__ import annotations

from cube import recording

from .. import shapes
from ..kernels.launch import record_launch
from ..tensor import Tensor
from .emit_ops import GENERATORS
from .kernel import Structure, build_reduce
from .lazy import elementwise
from .materialise import (
    _DTYPES,
    LINE_MIN_ELEMS,
    LINE_MIN_LANES,
    Graph,
    _compiled,
    _line_view,
    _py,
    cube_count,
    line_bytes,
)

REDUCE_CUBE_DIM = 32

OPS = ("sum", "mean", "prod", "max", "min")


def can_fuse(x: Tensor) -> bool:
    """A lazy graph without generators (they read the element's index, which the reduction's
    permuted order would change)."""
    if x._node is None or x.numel() == 0:
        return False
    stack, seen = [x._node], set()
    while stack:
        n = stack.pop()
        if id(n) in seen or n.result is not None:
            continue
        seen.add(id(n))
        if n.op in GENERATORS:
            return False
        stack.extend(i for i in n.inputs if hasattr(i, "op"))
    return True


def reduce_lazy(x: Tensor, dims: list[int], op: str, acc) -> Tensor:
    """op over `dims` (sorted, non-empty) of the lazy x, accumulated and returned in dtype
    `acc`, shape: the kept dims."""
    nd = x.ndim
    kept = [d for d in range(nd) if d not in dims]
    perm = kept + list(dims)
    pshape = tuple(x.shape[d] for d in perm)
    rows = shapes.numel(x.shape[d] for d in kept)
    r = shapes.numel(x.shape[d] for d in dims)
    identity = perm == list(range(nd))
    g = Graph()
    root = g.visit(x._node)
    leaf_desc, leaf_args = [], []
    for t in g.leaves:
        st = shapes.broadcast_strides(t.shape, t._strides, x.shape)
        st = tuple(st[d] for d in perm)
        contig = identity and tuple(t.shape) == tuple(x.shape) and t.is_contiguous()
        leaf_desc.append((t.dtype.name, contig))
        leaf_args.append(t._buf if contig else t._karg(pshape, st))
    rt = x.device.rt
    if identity and rows * r >= LINE_MIN_ELEMS:
        plan = _line_plan(rt, g, leaf_desc, root, acc, x.shape, len(kept), r)
        if plan is not None:
            return _reduce_lines(g, leaf_desc, root, op, acc, x, kept, rows, r, *plan)
    s = Structure(nd, tuple(g.nodes_desc), tuple(leaf_desc),
                  tuple(c.dtype.name for c in g.consts), ((root, acc.name, True),))
    chunks = 1 if any(contig for _, contig in leaf_desc) else \
        _chunks(r, acc, [a.strides[-1] for a in leaf_args])
    exe = _compiled(rt, s, build_reduce, (op, acc.name, len(kept), chunks > 1))
    kshape = tuple(x.shape[d] for d in kept)
    out = Tensor._empty((chunks, *kshape) if chunks > 1 else kshape, acc, x.device)
    args = [out._buf, out._karg(pshape, (0,) * nd), *leaf_args, rows * chunks, 0]
    args += [t.offset for t in g.leaves]
    args += [_py(c) for c in g.consts]
    args += [r, 1.0 / r]
    if chunks > 1:
        args += [rows, -(-r // chunks)]
    # a unit loops over a whole reduced row: small cubes, so that a few hundred rows still
    # spread over every core
    recording.launch(exe, cube_count(rows * chunks, REDUCE_CUBE_DIM), (REDUCE_CUBE_DIM, 1, 1),
                     args)
    record_launch(lambda: f"dl_fused_{op}[" + ",".join(d[0] for d in g.nodes_desc) + "]")
    if chunks > 1:  # the partials, (chunks, kept...), reduced over their first dim
        part = elementwise("identity", [out], [acc.compute], acc)
        return reduce_lazy(part, [0], "sum" if op == "mean" else op, acc)
    return out


CHUNK_MIN_R = 512  # a strided reduced axis this long is reduced in chunks of about
CHUNK_ROWS = 32  # this many rows (at most MAX_CHUNKS), then the chunks
MAX_CHUNKS = 256


def _chunks(r: int, acc, steps: list[int]) -> int:
    """How many chunks a reduction of r elements per output takes: more than one only for
    a float accumulator when the leaves (all strided views) walk the reduced axis with
    steps > 1 (a column reduction: neighbouring outputs share cache lines)."""
    if r < CHUNK_MIN_R or not acc.is_float or 1 in steps or not any(steps):
        return 1
    return min(MAX_CHUNKS, -(-r // CHUNK_ROWS))


def _line_plan(rt, g: Graph, leaf_desc, root, acc, shape, kept: int, r: int):
    """(lanes, leaf kinds) for reducing rows over lines (build_reduce_lines), or None: each
    leaf contiguous ("c", at an offset of whole lines), one element ("s") or one per row
    ("w": row-major over the kept dims, zero strides over the reduced ones); lanes a SIMD
    register of the widest type the graph and the accumulator touch, dividing the row."""
    width = line_bytes(rt)
    if not width:
        return None
    names = [acc.name, *(dt for dt, _ in leaf_desc)]
    for _, dt, in_types, _, _ in g.nodes_desc:
        names += [dt, *in_types, _DTYPES[dt].compute.name]
    lanes = width // max(_DTYPES[name].itemsize for name in names)
    if lanes < LINE_MIN_LANES or r % lanes:
        return None
    kinds = []
    for t, (_, contig) in zip(g.leaves, leaf_desc, strict=True):
        st = shapes.broadcast_strides(t.shape, t._strides, shape)
        if contig:
            if t.offset % lanes:
                return None
            kinds.append("c")
        elif not any(st):
            kinds.append("s")
        elif not any(st[kept:]) and shapes.is_contiguous(shape[:kept], st[:kept]):
            kinds.append("w")
        else:
            return None
    if "c" not in kinds or (rt.target == "ir" and any(
            t._buf.size % lanes for t, k in zip(g.leaves, kinds, strict=True) if k == "c")):
        return None  # (the interpreter takes whole allocations as lines)
    return lanes, tuple(kinds)


def _reduce_lines(g: Graph, leaf_desc, root, op, acc, x: Tensor, kept, rows, r, lanes,
                  kinds) -> Tensor:
    s = Structure(x.ndim, tuple(g.nodes_desc), tuple(leaf_desc),
                  tuple(c.dtype.name for c in g.consts), ((root, acc.name, True),),
                  lanes=lanes, line_leaves=kinds)
    exe = _compiled(x.device.rt, s, build_reduce, (op, acc.name, len(kept), False))
    out = Tensor._empty(tuple(x.shape[d] for d in kept), acc, x.device)
    args = [out._buf]
    args += [_line_view(t._buf, lanes) if k == "c" else t._buf
             for t, k in zip(g.leaves, kinds, strict=True)]
    args.append(rows)
    args += [t.offset // lanes if k == "c" else t.offset
             for t, k in zip(g.leaves, kinds, strict=True)]
    args += [_py(c) for c in g.consts]
    args += [r // lanes, 1.0 / r]
    recording.launch(exe, cube_count(rows, REDUCE_CUBE_DIM), (REDUCE_CUBE_DIM, 1, 1), args)
    record_launch(lambda: f"dl_fused_{op}[" + ",".join(d[0] for d in g.nodes_desc) + "]")
    return out

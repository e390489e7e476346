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
from .materialise import Graph, _compiled, _py, cube_count

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
    s = Structure(nd, tuple(g.nodes_desc), tuple(leaf_desc),
                  tuple(c.dtype.name for c in g.consts), ((root, acc.name, True),))
    rt = x.device.rt
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

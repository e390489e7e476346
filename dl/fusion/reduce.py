"""Reductions fused on read: a lazy elementwise graph is evaluated inside the reduction loop,
so `((a - b) ** 2).mean()` or `(x - m).square().sum(1)` is one kernel and the graph's
values never reach memory. Used by `dl.ops.reduce` for lazy inputs; materialised inputs go to
the kernel library's tuned reduction instead."""
from __future__ import annotations

from cube import recording

from .. import shapes
from ..tensor import Tensor
from . import stats
from .emit_ops import GENERATORS
from .kernel import Structure, build_reduce
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
    exe = _compiled(rt, s, build_reduce, (op, acc.name, len(kept)))
    out = Tensor._empty(tuple(x.shape[d] for d in kept), acc, x.device)
    args = [out._buf, out._karg(pshape, (0,) * nd), *leaf_args, rows, 0]
    args += [t.offset for t in g.leaves]
    args += [_py(c) for c in g.consts]
    args += [r, 1.0 / r]
    # a unit loops over a whole reduced row: small cubes, so that a few hundred rows still
    # spread over every core
    recording.launch(exe, cube_count(rows, REDUCE_CUBE_DIM), (REDUCE_CUBE_DIM, 1, 1), args)
    stats.record_launch(lambda: f"dl_fused_{op}[" + ",".join(d[0] for d in g.nodes_desc) + "]")
    return out

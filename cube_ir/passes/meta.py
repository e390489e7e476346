"""Shape and stride reads with a runtime or out-of-rank dimension become constant-dimension
reads, so a target prints only

    len(p)                          of an array/tensor parameter
    shape(p, d) / stride(p, d)      of a tensor parameter, d a constant below its rank

(the verifier already allows nothing else: metadata is read from parameters only, and shape
and stride from tensors). A dimension outside the rank reads 0, as the interpreter does; a
runtime dimension picks among the constant ones with selects. Each emitter wrote this
select chain of its own."""
from __future__ import annotations

from .. import ir
from ..ir import Const, Kernel
from ..types import boolean, u32
from .util import VarAlloc, rewrite


def lower_meta(kernel: Kernel) -> bool:
    alloc = VarAlloc(kernel)
    return rewrite(kernel.body, lambda op: _lower(op, alloc) if isinstance(op, ir.Meta)
                   and not printable(op) else None)


def printable(op: ir.Meta) -> bool:
    """What a target is left to print."""
    return op.what == "len" or (isinstance(op.dim, Const) and 0 <= int(op.dim.value)
                                < op.mem.rank)


def _lower(op: ir.Meta, alloc: VarAlloc) -> list:
    m, what, loc = op.mem, op.what, op.loc
    if isinstance(op.dim, Const):  # out of the rank
        return [ir.Assign(op.dst, Const(0, u32), loc)]
    # dst = dim == 0 ? v0 : dim == 1 ? v1 : ... : 0, each v a constant-dimension read
    ops: list = []
    dims = []
    for d in range(m.rank):
        v = alloc.new(u32, f"{what}{d}")
        ops.append(ir.Meta(v, what, m, Const(d, u32), loc))
        dims.append(v)
    dim = op.dim  # any integer type (compared in its own type: no wrap-around)
    acc: ir.Value = Const(0, u32)
    for d in reversed(range(len(dims))):
        eq = alloc.new(boolean, "is_dim")
        nxt = op.dst if d == 0 else alloc.new(u32, what)
        ops += [ir.Binary(eq, "eq", dim, Const(d, dim.type), loc),
                ir.Select(nxt, eq, dims[d], acc, loc)]
        acc = nxt
    if not dims:
        ops.append(ir.Assign(op.dst, acc, loc))
    return ops

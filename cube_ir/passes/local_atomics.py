"""Atomics on a unit-private `LocalArray` become a plain read-modify-write.

No other unit can see a local array, so `old = atomic_OP(l, i, v)` is exactly

    %old = load $local[i]
    %new = OP %old, v             (exchange: v; cas: select(eq %old, cmp), v, %old)
    store $local[i] <- %new

Doing it here, once, means no code generator needs atomics on private memory (WGSL and
SPIR-V have none: an atomic type cannot live in the function address space), and every
target, the interpreter included, gives the same result. It runs before the bounds pass, so
the load and the store are guarded like any other access (an out-of-bounds atomic gives 0
and writes nothing, as a guarded atomic does)."""
from __future__ import annotations

from .. import ir
from ..ir import Block, Kernel, LocalArray
from ..types import boolean
from .util import VarAlloc


def lower_local_atomics(kernel: Kernel) -> bool:
    """Rewrite every Atomic on a LocalArray in place; True if any was found."""
    alloc = VarAlloc(kernel)
    return _block(kernel.body, alloc)


def _block(block: Block, alloc: VarAlloc) -> bool:
    changed = False
    out = Block()
    for op in block:
        for child in ir.child_blocks(op):
            changed |= _block(child, alloc)
        if isinstance(op, ir.Atomic) and isinstance(op.mem, LocalArray):
            out.extend(_rmw(op, alloc))
            changed = True
        else:
            out.append(op)
    block[:] = out
    return changed


def _rmw(op: ir.Atomic, alloc: VarAlloc) -> list:
    t, loc = op.mem.type, op.loc
    reads = [v for v in ir.reads(op) if isinstance(v, ir.Var)]
    # the result var must not be an operand: the store still reads the operands
    fresh = op.dst is None or any(v is op.dst for v in reads)
    old = alloc.new(t, "old") if fresh else op.dst
    ops: list = [ir.Load(old, op.mem, op.index, loc)]
    if op.op == "exchange":
        new = op.value
    elif op.op == "cas":
        eq = alloc.new(boolean, "eq")
        new = alloc.new(t, "new")
        ops += [ir.Binary(eq, "eq", old, op.cmp, loc), ir.Select(new, eq, op.value, old, loc)]
    else:  # add sub min max and or xor: the IR binary op of the same name
        new = alloc.new(t, "new")
        ops.append(ir.Binary(new, op.op, old, op.value, loc))
    ops.append(ir.Store(op.mem, op.index, new, loc))
    if fresh and op.dst is not None:
        ops.append(ir.Assign(op.dst, old, loc))
    return ops

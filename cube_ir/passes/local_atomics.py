"""Atomics on a unit-private `LocalArray` become a plain read-modify-write.

No other unit can see a local array, so `old = atomic_OP(l, i, v)` is exactly

    %old = load $local[i]
    %new = OP %old, v             (exchange: v; cas: select(same bits(%old, cmp), v, %old))
    store $local[i] <- %new

Doing it here, once, means no code generator needs atomics on private memory (WGSL and
SPIR-V have none: an atomic type cannot live in the function address space), and every
target, the interpreter included, gives the same result. It runs before the bounds pass, so
the load and the store are guarded like any other access (an out-of-bounds atomic gives 0
and writes nothing, as a guarded atomic does)."""
from __future__ import annotations

from .. import ir
from ..ir import Kernel, LocalArray
from ..types import SCALARS, boolean, f32
from .util import VarAlloc, rewrite


def lower_local_atomics(kernel: Kernel) -> bool:
    """Rewrite every Atomic on a LocalArray in place; True if any was found."""
    alloc = VarAlloc(kernel)
    return rewrite(kernel.body, lambda op: _rmw(op, alloc) if isinstance(op, ir.Atomic)
                   and isinstance(op.mem, LocalArray) else None)


def _rmw(op: ir.Atomic, alloc: VarAlloc) -> list:
    t, loc = op.mem.type, op.loc
    reads = [v for v in ir.reads(op) if isinstance(v, ir.Var)]
    # the result var must not be an operand: the store still reads the operands
    fresh = op.dst is None or any(v is op.dst for v in reads)
    old = alloc.new(t, "old") if fresh else op.dst
    ops: list = [ir.Load(old, op.mem, op.index, loc)]
    if op.op == "exchange":
        new = op.value
    elif op.op == "cas":  # bits, as a compare-and-swap compares
        eq = alloc.new(boolean, "eq")
        new = alloc.new(t, "new")
        ops += [*same_bits(eq, old, op.cmp, alloc, loc), ir.Select(new, eq, op.value, old, loc)]
    else:  # add sub min max and or xor: the IR binary op of the same name
        new = alloc.new(t, "new")
        ops.append(ir.Binary(new, op.op, old, op.value, loc))
    ops.append(ir.Store(op.mem, op.index, new, loc))
    if fresh and op.dst is not None:
        ops.append(ir.Assign(op.dst, old, loc))
    return ops


def same_bits(dst: ir.Var, a: ir.Value, b: ir.Value, alloc: VarAlloc, loc=None) -> list:
    """Ops leaving in bool `dst` whether a and b have the same bits: a compare-and-swap
    compares bits, so -0.0 is not 0.0 and a NaN matches itself. (A half is compared through
    its exact f32 widening.)"""
    e = a.type.elem
    if not e.is_float:
        return [ir.Binary(dst, "eq", a, b, loc)]
    ops: list = []
    bits = []
    for x in (a, b):
        if e.bits < 32:
            w = alloc.new(f32, "wide")
            ops.append(ir.Cast(w, x, loc))
            x = w
        u = alloc.new(SCALARS[f"u{max(e.bits, 32)}"], "bits")
        ops.append(ir.Bitcast(u, x, loc))
        bits.append(u)
    return [*ops, ir.Binary(dst, "eq", bits[0], bits[1], loc)]

"""Atomic read-modify-writes a target lacks become compare-and-swap loops, written once.

    %old = load mem[i]                     (a first guess; the CAS checks it)
    loop {
        %new = OP %old, v                  (exchange: v)
        %prev = atomic cas mem[i], cmp %old, value %new
        if same_bits(%prev, %old) { break }  (the swap happened)
        %old = %prev
    }
    %dst = %old

The comparison is on bits (passes.local_atomics.same_bits), as the swap itself compares: a
float loop must not stop on -0.0 == 0.0, nor spin forever on a NaN. Each target keeps only
its native atomics and a compare-and-swap (for floats, on the bits)."""
from __future__ import annotations

from collections.abc import Callable

from .. import ir
from ..ir import Block, Kernel
from ..types import boolean
from .local_atomics import same_bits
from .util import VarAlloc, rewrite

Native = Callable[[str, str, str], bool]  # (op, element type name, space) -> native?


def space_of(mem) -> str:
    return "global" if isinstance(mem, ir.Param) else \
        "shared" if isinstance(mem, ir.SharedArray) else "local"


def lower_rmw_atomics(kernel: Kernel, native: Native | None) -> bool:
    """Rewrite in place every atomic (other than cas, and those on unit-private arrays) that
    `native` says the target lacks; True if any was. None: the target has them all."""
    if native is None:
        return False
    alloc = VarAlloc(kernel)

    def lacking(op) -> bool:
        return (isinstance(op, ir.Atomic) and op.op != "cas"
                and not isinstance(op.mem, ir.LocalArray)
                and not native(op.op, op.mem.type.elem.name, space_of(op.mem)))
    return rewrite(kernel.body, lambda op: _loop(op, alloc) if lacking(op) else None)


def _loop(op: ir.Atomic, alloc: VarAlloc) -> list:
    t, loc = op.mem.type, op.loc
    old = alloc.new(t, "old")
    prev = alloc.new(t, "prev")
    same = alloc.new(boolean, "swapped")
    body = Block()
    if op.op == "exchange":
        new = op.value
    else:  # add sub min max and or xor: the IR binary op of the same name
        new = alloc.new(t, "new")
        body.append(ir.Binary(new, op.op, old, op.value, loc))
    body.append(ir.Atomic(prev, "cas", op.mem, op.index, new, old, loc))
    body.extend(same_bits(same, prev, old, alloc, loc))
    body.append(ir.If(same, Block([ir.Break(loc)]), Block(), loc))
    body.append(ir.Assign(old, prev, loc))
    ops: list = [ir.Load(old, op.mem, op.index, loc), ir.Loop(body, loc)]
    if op.dst is not None:
        ops.append(ir.Assign(op.dst, old, loc))
    return ops

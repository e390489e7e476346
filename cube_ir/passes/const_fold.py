"""Constant folding and propagation.

- ops whose operands are all constants become `Assign dst, Const` (exact IR semantics, see
  const_eval); a select on a constant condition or between equal values, and a cast to the
  same type, become plain assigns;
- a var written exactly once in the kernel, by an assign of a constant (or of another such
  single-write var whose write came first), is replaced by that constant (var) in every read
  its write dominates (vars are mutable, so only single-write vars qualify, and a read before
  the write keeps reading the var);
- an `If` on a constant condition is replaced by the branch taken; a `Range` with constant
  bounds and no iterations is dropped.
"""
from __future__ import annotations

import math

from .. import ir
from ..ir import Assign, Block, Const, Kernel, Var
from . import const_eval
from .util import map_reads, write_counts

_MAX_ROUNDS = 16


def const_fold(kernel: Kernel) -> bool:
    """Fold in place; True if anything changed."""
    changed = False
    for _ in range(_MAX_ROUNDS):
        f = _Folder(kernel)
        kernel.body[:] = f.block(kernel.body, {})
        if not f.changed:
            break
        changed = True
    return changed


def fold_op(op):
    """The op that replaces `op` once folded (an Assign), or None if it does not fold."""
    match op:
        case ir.Unary(dst=d, op=o, a=Const() as a):
            return _const(d, const_eval.unary(o, a.value, a.type), op.loc)
        case ir.Binary(dst=d, op=o, a=Const() as a, b=Const() as b):
            return _const(d, const_eval.binary(o, a.value, b.value, a.type), op.loc)
        case ir.Ternary(dst=d, op=o, a=Const() as a, b=Const() as b, c=Const() as c):
            return _const(d, const_eval.ternary(o, a.value, b.value, c.value, a.type), op.loc)
        case ir.Select(dst=d, cond=Const() as c, a=a, b=b):
            return Assign(d, a if c.value else b, op.loc)
        case ir.Select(dst=d, a=a, b=b) if _same(a, b):
            return Assign(d, a, op.loc)
        case ir.Cast(dst=d, a=a) if a.type == d.type:
            return Assign(d, a, op.loc)
        case ir.Cast(dst=d, a=Const() as a):
            return _const(d, const_eval.cast(a.value, a.type, d.type), op.loc)
        case ir.Extract(dst=d, vec=Const() as v):
            return Assign(d, Const(v.value, d.type), op.loc)
        case ir.Binary(a=Const()) | ir.Binary(b=Const()):
            return _identity(op)
    return None


_COMMUTATIVE = frozenset(("add", "mul", "and", "or", "xor"))


def _identity(op: ir.Binary) -> Assign | None:
    """x+0, x*1, x/1, x&true, x|0, x<<0, ... -> x; x*0, x&0, x|true -> the constant. Exact
    for ints and bools; for floats only x*1, x/1 and x-0 (x+0 turns -0.0 into 0.0)."""
    x, c = op.a, op.b
    if isinstance(x, Const) and op.op in _COMMUTATIVE:
        x, c = c, x
    if not isinstance(c, Const) or isinstance(x, Const):
        return None
    e, v, o = c.type.elem, c.value, op.op
    if e.is_float:
        keep = (o in ("mul", "div") and v == 1) or (
            o == "sub" and v == 0 and math.copysign(1.0, v) > 0)  # x - (-0.0) is x + 0.0
        return Assign(op.dst, x, op.loc) if keep else None
    ones = True if e.is_bool else (-1 if e.is_signed else (1 << e.bits) - 1)
    if (o in ("add", "sub", "or", "xor") and v == 0) or (o in ("mul", "div") and v == 1) \
            or (o == "and" and v == ones) or (o in ("shl", "shr") and v % e.bits == 0):
        return Assign(op.dst, x, op.loc)
    if (o in ("mul", "and") and v == 0 and not e.is_bool) or (o == "and" and not v) \
            or (o == "or" and v == ones):
        return Assign(op.dst, c, op.loc)
    return None


def _same(a, b) -> bool:
    if isinstance(a, Const) and isinstance(b, Const):  # repr tells -0.0 from 0.0
        return a.type == b.type and repr(a.value) == repr(b.value)
    return a is b


def _const(dst: Var, value, loc=None) -> Assign | None:
    return None if value is None else Assign(dst, Const(value, dst.type), loc)


def trip_count(op: ir.Range) -> int | None:
    """The number of iterations of a range with constant bounds."""
    if isinstance(op.start, Const) and isinstance(op.end, Const):
        return len(range(int(op.start.value), int(op.end.value), op.step))
    return None


class _Folder:
    def __init__(self, kernel: Kernel):
        self.writes = write_counts(kernel.body)
        self.changed = False

    def block(self, block: Block, env: dict) -> Block:
        """The folded block. `env` (extended in place by this block's own ops) holds the
        single-write vars whose write dominates the ops to come, mapped to what replaces their
        reads: the constant or the (likewise dominating, single-write) var they were assigned,
        or themselves."""
        out = Block()
        sub = lambda v: env.get(v, v) if isinstance(v, Var) else v
        for op in block:
            if map_reads(op, sub):
                self.changed = True
            if isinstance(op, ir.If):
                if isinstance(op.cond, Const):
                    # the branch taken runs in this block's place: its writes dominate the rest
                    out.extend(self.block(op.then if op.cond.value else op.orelse, env))
                    self.changed = True
                    continue
                op.then = self.block(op.then, dict(env))
                op.orelse = self.block(op.orelse, dict(env))
            elif isinstance(op, (ir.Loop, ir.Range)):
                if isinstance(op, ir.Range) and trip_count(op) == 0:
                    self.changed = True
                    continue
                op.body = self.block(op.body, dict(env))
            else:
                new = fold_op(op)
                if new is not None:
                    new.loc = op.loc
                    op = new
                    self.changed = True
                d = ir.writes(op)
                if d is not None and self.writes[d] == 1:
                    src = op.src if isinstance(op, Assign) else d
                    # a copy of a var is only as good as that var's single, dominating write
                    env[d] = src if isinstance(src, Const) or env.get(src) is src else d
            out.append(op)
        return out

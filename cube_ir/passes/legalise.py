"""Arithmetic on types a target has no registers for, done in a wider type and cast back.

Halves: half-precision arithmetic a target does not have is computed in f32 and rounded once.

bf16 has no arithmetic on any target we emit, and f16 has none in C for every device (CUDA
without cuda_fp16.h, PoCL, MSL's float vectors), or only some (shader and LLVM
transcendentals). For each such op the pass writes

    %a32 = cast %a to f32          (exact)
    %r32 = OP %a32, ...            (in f32)
    %dst = cast %r32 to bf16/f16   (one rounding, to nearest even)

which is the correctly rounded result for + - * / and sqrt (f32 has more than 2p+2 bits of
a half type's p) and what every target did in its own code for the rest. Ops whose result
is always representable (EXACT: neg, abs, min, max, floor, ceil, round, trunc,
clamp), comparisons
and moves stay in the half type: a target holds a half value in a float register, so they
need no rounding. Plane sums and products accumulate in f32 and round once, as the
interpreter's do. After this pass an emitter's half-precision code is its casts, loads and
stores."""
from __future__ import annotations

from collections.abc import Mapping

from .. import ir
from ..ir import Const, Kernel
from ..types import SCALARS, f32, with_elem
from .util import VarAlloc, rewrite

EXACT = frozenset("neg abs min max floor ceil round trunc clamp".split())
ARITH_PLANE = frozenset("sum prod inclusive_sum exclusive_sum inclusive_prod exclusive_prod"
                        .split())
ALL = None  # promote every inexact op of the type


def promote_halves(kernel: Kernel, promote: Mapping[str, frozenset[str] | None]) -> bool:
    """`promote` maps a half type's name (f16, bf16) to the ops computed in f32 (ALL: every
    inexact one). True if anything changed."""
    if not promote:
        return False
    alloc = VarAlloc(kernel)
    return rewrite(kernel.body,
                   lambda op: _in_wider(op, f32, alloc) if _wanted(op, promote) else None)


def _wanted(op, promote) -> bool:
    d = getattr(op, "dst", None)
    if d is None or d.type.elem.name not in promote:
        return False
    ops = promote[d.type.elem.name]
    match op:
        case ir.Unary(op=o) | ir.Binary(op=o) | ir.Ternary(op=o):
            return o not in EXACT and o not in ir.COMPARE_OPS and (ops is ALL or o in ops)
        case ir.Plane(op=o):
            return o in ARITH_PLANE and (ops is ALL or o in ops)
    return False


def _in_wider(op, elem, alloc: VarAlloc, pre: tuple = ()) -> list:
    """op (Unary, Binary, Ternary or Plane) computed in `elem`: its operands of the dst's
    element type widened by exact casts, the result cast back (which rounds or wraps).
    `pre`: ops the caller already wrote for its operands."""
    d, loc = op.dst, op.loc
    ops: list = list(pre)

    def widen(x):
        if x is None or x.type.elem != d.type.elem:  # a plane op's lane, say
            return x
        if isinstance(x, Const):  # exact in the wider type
            return Const(x.value, with_elem(x.type, elem))
        w = alloc.new(with_elem(x.type, elem), x.name)
        ops.append(ir.Cast(w, x, loc))
        return w

    r = alloc.new(with_elem(d.type, elem), d.name)
    match op:
        case ir.Unary():
            new = ir.Unary(r, op.op, widen(op.a), loc)
        case ir.Binary():
            new = ir.Binary(r, op.op, widen(op.a), widen(op.b), loc)
        case ir.Ternary():
            new = ir.Ternary(r, op.op, widen(op.a), widen(op.b), widen(op.c), loc)
        case ir.Plane():
            new = ir.Plane(r, op.op, widen(op.value), op.lane, loc)
    return [*ops, new, ir.Cast(d, r, loc)]


# ---- narrow integers ---------------------------------------------------------------------------

# the ops whose result can leave an 8/16-bit type (and, or, xor, min, max, shr and compares
# cannot); shift counts are taken modulo the narrow width first, as the IR says
LEAVE_RANGE = frozenset("add sub mul div rem shl pow neg bitnot abs".split())
NARROW = frozenset({"i8", "i16", "u8", "u16"})


def promote_narrow_ints(kernel: Kernel, types: frozenset[str]) -> bool:
    """8/16-bit integer arithmetic in `types` (a target with 32-bit registers only) done in
    i32/u32 and cast back, which wraps: the emitter's part is the casts."""
    if not types:
        return False
    alloc = VarAlloc(kernel)
    return rewrite(kernel.body, lambda op: _in_32(op, alloc) if _narrow(op, types) else None)


def _narrow(op, types) -> bool:
    d = getattr(op, "dst", None)
    if d is None or d.type.elem.name not in types:
        return False
    match op:
        case ir.Unary(op=o) | ir.Binary(op=o):
            return o in LEAVE_RANGE
        case ir.Plane(op=o):
            return o in ARITH_PLANE
    return False


def _in_32(op, alloc: VarAlloc) -> list:
    e = op.dst.type.elem
    wide = SCALARS["i32" if e.is_signed else "u32"]
    if isinstance(op, ir.Binary) and op.op == "shl":  # the count modulo the narrow width, first
        count = alloc.new(op.b.type, "count")
        mask = ir.Binary(count, "and", op.b, Const(e.bits - 1, op.b.type), op.loc)
        return _in_wider(ir.Binary(op.dst, "shl", op.a, count, op.loc), wide, alloc, (mask,))
    return _in_wider(op, wide, alloc)

"""Float comparisons, min, max, clamp and rem that keep their IEEE meaning on targets whose
compilers may assume no NaN or infinity.

WGSL lets an implementation assume floats are finite, and Vulkan lets a driver do the same
with SPIR-V unless the module declares SignedZeroInfNanPreserve (naga, which re-emits every
module wgpu gets, declares nothing). Mesa's lavapipe does both: `x != x` is false for a NaN,
`x != y` is false when y is NaN, and its max and min may return the NaN. The IR promises
IEEE comparisons (false with a NaN operand, but `ne` true) and a min/max that returns the
other operand of a NaN (C's fmin), so on such a target this pass spells the NaN and infinity
cases with integer tests on the bits, which no assumption about floats can fold:

    isnan(x)        (bits(x) & 0x7fffffff) > 0x7f800000          (f32; f64 likewise)
    a OP b          (a OP b) and not isnan(a) and not isnan(b)   OP in eq lt le gt ge
    a ne b          (a ne b) or isnan(a) or isnan(b)
    x OP x          not isnan(x) (eq le ge), isnan(x) (ne), false (lt gt)
    bool(x)         x != 0, as above (a NaN is true)
    x OP inf        the bits of x against the infinity's (x == inf: bits(x) == 0x7f800000;
                    x < inf: not isnan(x) and bits(x) != 0x7f800000; ...)
    min(a, b)       select(isnan(a), b, select(isnan(b), a, min(a, b)))  (max alike)
    clamp(x, l, h)  min(max(x, l), h), each as above
    rem(a, b)       a where b is infinite and a finite (fmod; WGSL's `%` gives NaN there);
                    a half's in f32

A finite constant operand needs no test. Half types are widened to f32 (exactly) for the bit
tests. What stays unprotected: arithmetic the compiler may simplify assuming finite values
(`x * 0.0` to 0.0, `x - x` to 0.0). Float atomic max/min are CAS loops around a max/min
by then (passes.cas_loops), and plane max/min see no NaN lanes (passes.planes), so both
hold here too."""
from __future__ import annotations

import math

from .. import ir
from ..ir import Const, Kernel, Var
from ..types import SCALARS, boolean, f32, with_elem
from .util import VarAlloc, rewrite

_SWAP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
_SELF = {"eq": "notnan", "le": "notnan", "ge": "notnan", "ne": "nan", "lt": False, "gt": False}
# x OP +inf and x OP -inf as (kind, ...) where kind is "bits_eq", "bits_ne", "notnan_and_ne",
# "notnan" or a constant
_VS_POS_INF = {"eq": "bits_eq", "ge": "bits_eq", "ne": "bits_ne", "lt": "notnan_and_ne",
               "le": "notnan", "gt": False}
_VS_NEG_INF = {"eq": "bits_eq", "le": "bits_eq", "ne": "bits_ne", "gt": "notnan_and_ne",
               "ge": "notnan", "lt": False}


def exact_float_compares(kernel: Kernel) -> bool:
    """Rewrite the kernel's float compares, float->bool casts, min, max, clamp and rem as
    the module docstring says; True if anything changed."""
    alloc = VarAlloc(kernel)
    return rewrite(kernel.body, lambda op: _rewrite(op, alloc))


def _is_float(v) -> bool:
    return v.type.elem.is_float


def _rewrite(op, alloc: VarAlloc):
    match op:
        case ir.Binary(op=o) if o in ir.COMPARE_OPS and _is_float(op.a):
            return _Spell(alloc, op.loc).compare(op.dst, o, op.a, op.b)
        case ir.Binary(op=o) if o in ("min", "max") and _is_float(op.dst):
            s = _Spell(alloc, op.loc)
            s.minmax(op.dst, o, op.a, op.b)
            return s.ops
        case ir.Binary(op="rem") if _is_float(op.dst):
            return _Spell(alloc, op.loc).rem(op.dst, op.a, op.b)
        case ir.Cast(dst=d, a=a) if d.type.elem.is_bool and _is_float(a):  # a != 0
            return _Spell(alloc, op.loc).compare(d, "ne", a, Const(0.0, a.type))
        case ir.Ternary(op="clamp") if _is_float(op.dst):
            s = _Spell(alloc, op.loc)
            lo = alloc.new(op.dst.type, "clamp_lo")
            s.minmax(lo, "max", op.a, op.b)
            s.minmax(op.dst, "min", lo, op.c)
            return s.ops
    return None


class _Spell:
    """The ops that spell one rewritten op, in order (self.ops)."""

    def __init__(self, alloc: VarAlloc, loc):
        self.alloc, self.loc, self.ops = alloc, loc, []

    def _new(self, t, name: str) -> Var:
        return self.alloc.new(t, name)

    def emit(self, op) -> Var:
        self.ops.append(op)
        return op.dst

    def binary(self, o: str, a, b, t) -> Var:
        return self.emit(ir.Binary(self._new(t, o), o, a, b, self.loc))

    def widen(self, x):
        """A half x as f32 (exact): a cast of a variable, a constant retyped."""
        wide = with_elem(x.type, f32)
        if isinstance(x, Const):
            return Const(x.value, wide)
        return self.emit(ir.Cast(self._new(wide, "wide"), x, self.loc))

    def bits(self, x):
        """x's bits as an unsigned int of its width (halves widened to f32 first)."""
        if x.type.elem.bits not in (32, 64):
            x = self.widen(x)
        t = x.type
        u = with_elem(t, SCALARS[f"u{t.elem.bits}"])
        return self.emit(ir.Bitcast(self._new(u, "bits"), x, self.loc))

    def _masks(self, bits):
        n = bits.type.elem.bits
        exp = 0x7F800000 if n == 32 else 0x7FF0000000000000
        return (1 << (n - 1)) - 1, exp, 1 << (n - 1)

    def masked(self, x, o: str, bt, mask: str = "mag"):
        """(bits(x) & mask) OP the infinity's bits; mask "mag" (all but the sign) or "exp"
        (the exponent): > is NaN, == is an infinity (mag) or not finite (exp)."""
        bits = self.bits(x)
        mag, inf, _ = self._masks(bits)
        m = self.binary("and", bits, Const(mag if mask == "mag" else inf, bits.type),
                        bits.type)
        return self.binary(o, m, Const(inf, bits.type), bt)

    def isnan(self, x, bt):
        return self.masked(x, "gt", bt)

    def notnan(self, x, bt):
        return self.emit(ir.Unary(self._new(bt, "notnan"), "not", self.isnan(x, bt), self.loc))

    def compare(self, dst: Var, o: str, a, b) -> list:
        bt = dst.type
        if isinstance(a, Const) and not isinstance(b, Const):
            return self.compare(dst, _SWAP[o], b, a)
        if a is b:
            r = _SELF[o]
            self._finish(dst, r if isinstance(r, bool) else
                         (self.isnan(a, bt) if r == "nan" else self.notnan(a, bt)))
            return self.ops
        if isinstance(b, Const) and isinstance(b.value, float) and math.isinf(b.value):
            return self._vs_inf(dst, o, a, b)
        r = self.binary(o, a, b, bt)
        for x in (a, b):
            if isinstance(x, Const):  # finite (or NaN: decided by the comparison itself)
                continue
            if o == "ne":
                r = self.binary("or", r, self.isnan(x, bt), bt)
            else:
                r = self.binary("and", r, self.notnan(x, bt), bt)
        self._finish(dst, r)
        return self.ops

    def _vs_inf(self, dst: Var, o: str, a, b: Const) -> list:
        bt = dst.type
        kind = (_VS_POS_INF if b.value > 0 else _VS_NEG_INF)[o]
        if isinstance(kind, bool):
            self._finish(dst, kind)
            return self.ops
        if kind == "notnan":
            self._finish(dst, self.notnan(a, bt))
            return self.ops
        bits = self.bits(a)
        _, inf, sign = self._masks(bits)
        inf_bits = Const(inf if b.value > 0 else inf | sign, bits.type)
        if kind == "bits_eq":
            r = self.binary("eq", bits, inf_bits, bt)
        else:
            r = self.binary("ne", bits, inf_bits, bt)
            if kind == "notnan_and_ne":
                r = self.binary("and", r, self.notnan(a, bt), bt)
        self._finish(dst, r)
        return self.ops

    def _finish(self, dst: Var, r) -> None:
        if isinstance(r, bool):
            r = Const(r, dst.type if dst.type.elem == boolean else with_elem(dst.type, boolean))
        self.emit(ir.Assign(dst, r, self.loc))

    def rem(self, dst: Var, a, b) -> list:
        """fmod(a, b) is a for a finite a and an infinite b; WGSL defines its float `%` as
        a - b * trunc(a / b), which gives NaN there (inf * 0). A half's is computed in f32
        (exact: the quotient of two halves fits f32's 24 bits where it passed the half's
        range, 60000 % 0.5 gave -inf) and rounded back, which is exact too."""
        if dst.type.elem.bits < 32:
            r = self._new(with_elem(dst.type, f32), "rem")
            self.rem(r, self.widen(a), self.widen(b))
            self.emit(ir.Cast(dst, r, self.loc))
            return self.ops
        r = self.binary("rem", a, b, dst.type)
        if not (isinstance(b, Const) and not math.isinf(b.value)):
            bt = with_elem(dst.type, boolean)
            keep = self.binary("and", self.masked(b, "eq", bt),  # b infinite, a finite
                               self.masked(a, "ne", bt, mask="exp"), bt)
            r = self.emit(ir.Select(self._new(dst.type, "rem"), keep, a, r, self.loc))
        self.emit(ir.Assign(dst, r, self.loc))
        return self.ops

    def minmax(self, dst: Var, o: str, a, b) -> None:
        """dst = o(a, b) with C's fmin/fmax meaning: a NaN operand gives the other."""
        bt = with_elem(dst.type, boolean)
        r = self.binary(o, a, b, dst.type)
        if not isinstance(b, Const):
            r = self.emit(ir.Select(self._new(dst.type, o), self.isnan(b, bt), a, r, self.loc))
        if not isinstance(a, Const):
            r = self.emit(ir.Select(self._new(dst.type, o), self.isnan(a, bt), b, r, self.loc))
        self.emit(ir.Assign(dst, r, self.loc))

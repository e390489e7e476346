"""Arithmetic, comparisons, math, casts and memory conversions on cube types.

Semantics follow cube_ir.ir: integer div/rem by zero give 0 (and INT_MIN / -1 wraps) instead of
trapping; shift counts are taken modulo the width; float min/max ignore NaN (llvm.minnum);
round is half-to-even; float->int casts saturate (NaN -> 0) so they are never poison. f16 uses
LLVM `half` (its transcendentals and pow arrive in f32, passes.legalise); bf16 is held in
float and its arithmetic arrives in f32 too, so only casts round to bf16.
"""
from __future__ import annotations

from cube_ir.types import Type, Vec, f32, f64, u8, vec

from . import math as m
from .fn import Fn
from .lower import Lower
from .types import const, elem_reg, reg, suffix, with_elem

FLOAT_PRED = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
SINT_PRED = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
UINT_PRED = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}


# float math with an LLVM intrinsic (LLVM 20+; x86 lowers all but trunc to the libm call
# per lane, which the JIT resolves from libm.so.6) and without one (a libm call per lane)
_LLVM_MATH = frozenset("tan asin acos atan sinh cosh log2 log10 exp2 trunc".split())
_LIBM_MATH = frozenset("asinh acosh atanh expm1".split())


class Arith(Lower):
    def __init__(self, fn, nowrap: bool = False) -> None:
        super().__init__(fn)
        self.nowrap = nowrap  # the kernel's promise: unsigned adds/multiplies never wrap

    # ---- helpers -----------------------------------------------------------------------
    def k(self, value, t: Type) -> str:
        return const(value, t)

    # ---- binary ------------------------------------------------------------------------
    def binary(self, op: str, t: Type, a: str, b: str) -> str:
        e = t.elem
        ll = reg(t)
        if op in FLOAT_PRED:
            if e.is_float:
                return self.fcmp(FLOAT_PRED[op], ll, a, b)
            return self.icmp((SINT_PRED if e.is_signed else UINT_PRED)[op], ll, a, b)
        if e.is_float:
            return self._float_binary(op, ll, a, b)
        return self._int_binary(op, t, a, b)

    def _float_binary(self, op: str, ll: str, a: str, b: str) -> str:
        simple = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv", "rem": "frem"}
        if op in simple:
            return self.bin(simple[op], ll, a, b)
        if op in ("min", "max"):
            return self.intr("minnum" if op == "min" else "maxnum", ll, a, b)
        if op == "pow":
            return self.intr("pow", ll, a, b)
        if op in ("atan2", "copysign"):  # copysign: bit ops; atan2: atan2f per lane
            return self.intr(op, ll, a, b)
        if op == "hypot":  # glibc's, per lane (no overflow in between, as Python's)
            return self.libm("hypot" if _fbits(ll) == 64 else "hypotf", ll, a, b)
        raise NotImplementedError(f"float {op}")

    def _int_binary(self, op: str, t: Type, a: str, b: str) -> str:
        e, ll = t.elem, reg(t)
        signed = e.is_signed
        simple = {"add": "add", "sub": "sub", "mul": "mul", "and": "and", "or": "or",
                  "xor": "xor"}
        if op in simple:
            nuw = self.nowrap and op in ("add", "mul") and not signed and not e.is_bool
            return self.bin(simple[op] + (" nuw" if nuw else ""), ll, a, b)
        if e.is_bool:
            if op in ("min", "max"):
                return self.bin("and" if op == "min" else "or", ll, a, b)
            t = vec(u8, t.lanes)  # other ops: as u8, then back
            r = self._int_binary(op, t, self.conv("zext", ll, a, reg(t)),
                                 self.conv("zext", ll, b, reg(t)))
            return self.icmp("ne", reg(t), r, self.k(0, t))
        if op in ("min", "max"):
            name = ("s" if signed else "u") + op
            return self.intr(name, ll, a, b)
        if op in ("shl", "shr"):
            n = self.bin("and", ll, b, self.k(e.bits - 1, t))
            opc = "shl" if op == "shl" else ("ashr" if signed else "lshr")
            return self.bin(opc, ll, a, n)
        if op in ("div", "rem"):
            return self._int_divrem(op, t, a, b)
        if op == "pow":
            return self._int_pow(t, a, b)
        raise NotImplementedError(f"int {op}")

    def _int_divrem(self, op: str, t: Type, a: str, b: str) -> str:
        ll = reg(t)
        zero, one = self.k(0, t), self.k(1, t)
        bz = self.icmp("eq", ll, b, zero)
        if t.elem.is_signed:  # also guard INT_MIN / -1, which traps on x86
            bm = self.icmp("eq", ll, b, self.k(-1, t))
            bad = self.bin("or", with_elem(ll, "i1"), bz, bm)
            d = self.select(bad, ll, one, b)
            if op == "div":
                q = self.bin("sdiv", ll, a, d)
                q = self.select(bm, ll, self.bin("sub", ll, zero, a), q)
                return self.select(bz, ll, zero, q)
            return self.select(bad, ll, zero, self.bin("srem", ll, a, d))
        # umax(b, 1) rather than select(b == 0, 1, b): LLVM knows umax(b, 1) is non-zero, so
        # the division is safe to speculate and a loop-invariant one (a shape, a row's
        # coordinates) is hoisted out of the unit loop
        d = self.intr("umax", ll, b, one)
        r = self.bin("udiv" if op == "div" else "urem", ll, a, d)
        return self.select(bz, ll, zero, r)

    def _int_pow(self, t: Type, a: str, b: str) -> str:
        e = t.elem
        el = elem_reg(e)

        def build(name: str) -> str:
            fn = Fn(self.mod)
            lo = Arith(fn)
            # square-and-multiply over the exponent's bits (negative exponents: 1/x^n -> 0
            # except for x = 1 or -1)
            acc = fn.alloca(el, hint="acc")
            base = fn.alloca(el, hint="base")
            ex = fn.alloca(el, hint="ex")
            fn.do(f"store {el} 1, ptr {acc}")
            fn.do(f"store {el} %x, ptr {base}")
            fn.do(f"store {el} %n, ptr {ex}")
            hdr, body, done = fn.label("hdr"), fn.label("body"), fn.label("done")
            fn.block(hdr)
            n = fn.op(f"load {el}, ptr {ex}")
            cont = fn.op(f"icmp ugt {el} {n}, 0" if not e.is_signed else f"icmp sgt {el} {n}, 0")
            fn.cbr(cont, body, done)
            fn.block(body)
            x = fn.op(f"load {el}, ptr {base}")
            r = fn.op(f"load {el}, ptr {acc}")
            odd = fn.op(f"trunc {el} {n} to i1")
            rm = fn.op(f"mul {el} {r}, {x}")
            fn.do(f"store {el} {lo.select(odd, el, rm, r)}, ptr {acc}")
            fn.do(f"store {el} {fn.op(f'mul {el} {x}, {x}')}, ptr {base}")
            fn.do(f"store {el} {fn.op(f'lshr {el} {n}, 1')}, ptr {ex}")
            fn.br(hdr)
            fn.block(done)
            res = fn.op(f"load {el}, ptr {acc}")
            if e.is_signed:
                neg = fn.op(f"icmp slt {el} %n, 0")
                is1 = fn.op(f"icmp eq {el} %x, 1")
                ism1 = fn.op(f"icmp eq {el} %x, -1")
                odd = fn.op(f"trunc {el} %n to i1")
                m1 = lo.select(odd, el, "-1", "1")
                small = lo.select(is1, el, "1", lo.select(ism1, el, m1, "0"))
                res = lo.select(neg, el, small, res)
            fn.ret(f"{el} {res}")
            return fn.define(f"define internal {el} @{name}({el} %x, {el} %n) nounwind")

        name = self.mod.helper(f"cube.ipow.{'s' if e.is_signed else 'u'}{el}", build)
        return self.per_lane(reg(t), [a, b], lambda p: self.call(name, el, [(el, p[0]),
                                                                          (el, p[1])]))

    # ---- unary -------------------------------------------------------------------------
    def unary(self, op: str, t: Type, a: str, dst_t: Type) -> str:
        e, ll = t.elem, reg(t)
        if op == "not":
            if e.is_bool:
                return self.bin("xor", ll, a, self.k(True, t))
            if e.is_float:
                return self.fcmp("oeq", ll, a, self.k(0.0, t))
            return self.icmp("eq", ll, a, self.k(0, t))
        if op == "bitnot":
            return self.bin("xor", ll, a, self.k(True if e.is_bool else -1, t))
        if op == "neg":
            if e.is_float:
                return self.fn.op(f"fneg {ll} {a}")
            return self.bin("sub", ll, self.k(0, t), a)
        if op == "abs":
            if e.is_float:
                return self.intr("fabs", ll, a)
            if not e.is_signed:
                return a
            name = self.mod.declare(f"llvm.abs.{suffix(ll)}", ll, [ll, "i1"])
            return self.call(name, ll, [(ll, a), ("i1", "false")])
        if not e.is_float:
            raise NotImplementedError(f"{op} on {t}")
        return self._float_unary(op, t, a)

    def _float_unary(self, op: str, t: Type, a: str) -> str:
        ll = reg(t)
        intr = {"sqrt": "sqrt", "floor": "floor", "ceil": "ceil", "round": "roundeven",
                "sin": "sin", "cos": "cos"}
        if op in intr:
            return self.intr(intr[op], ll, a)
        if op in _LLVM_MATH:  # LLVM's own (trunc: roundps; the rest a libm call per lane)
            return self.intr(op, ll, a)
        if op in _LIBM_MATH:  # no LLVM intrinsic: glibc's, per lane
            return self.libm(op if t.elem == f64 else op + "f", ll, a)
        if op == "rsqrt":
            return self.bin("fdiv", ll, self.k(1.0, t), self.intr("sqrt", ll, a))
        if t.elem == f32 and op in m.INLINE_F32:
            return self.call(m.inline_fn(self.mod, op, ll), ll, [(ll, a)])
        if op in ("exp", "log"):
            return self.intr(op, ll, a)
        if op in ("log1p", "tanh", "erf"):
            return self.libm(op if t.elem == f64 else op + "f", ll, a)
        raise NotImplementedError(f"unary {op}")

    # ---- ternary -----------------------------------------------------------------------
    def ternary(self, op: str, t: Type, a: str, b: str, c: str) -> str:
        e, ll = t.elem, reg(t)
        if op == "clamp":
            return self.binary("min", t, self.binary("max", t, a, b), c)
        if op != "fma":
            raise NotImplementedError(op)
        if not e.is_float:
            return self.binary("add", t, self.binary("mul", t, a, b), c)
        if e.name == "f16":  # in double: exact product, one rounding, then an innocuous one
            w = vec(f64, t.lanes)
            xs = [self.conv("fpext", ll, x, reg(w)) for x in (a, b, c)]
            return self.conv("fptrunc", reg(w), self.intr("fma", reg(w), *xs), ll)
        return self.intr("fma", ll, a, b, c)

    # ---- casts -------------------------------------------------------------------------
    def cast(self, src: Type, dst: Type, x: str) -> str:
        if src == dst:
            return x
        if isinstance(dst, Vec) and not isinstance(src, Vec):
            y = self.cast(src, dst.elem, x)
            return self.splat(y, elem_reg(dst.elem), dst.lanes)
        if src.lanes != dst.lanes:
            raise NotImplementedError(f"cast {src} -> {dst}")
        return self._cast_elem(src, dst, x)

    def _cast_elem(self, src: Type, dst: Type, x: str) -> str:
        s, d = src.elem, dst.elem
        sl, dl = reg(src), reg(dst)
        if s == d:
            return x
        if d.is_bool:
            if s.is_float:
                return self.fcmp("une", sl, x, self.k(0.0, src))
            return self.icmp("ne", sl, x, self.k(0, src))
        if s.is_bool:
            if d.is_float:
                return self.conv("uitofp", sl, x, dl)
            return self.conv("zext", sl, x, dl)
        if s.is_float and d.is_float:
            sb, db = _fbits(sl), _fbits(dl)
            y = x if sb == db else self.conv("fpext" if db > sb else "fptrunc", sl, x, dl)
            return self.bf16_round(dl, y) if d.name == "bf16" else y
        if s.is_float:  # -> int: saturating, NaN -> 0 (never poison)
            if s.name == "f16":
                x, sl = self.conv("fpext", sl, x, with_elem(sl, "float")), with_elem(sl, "float")
            kind = "fptosi" if d.is_signed else "fptoui"
            name = self.mod.declare(f"llvm.{kind}.sat.{suffix(dl)}.{suffix(sl)}", dl, [sl])
            return self.call(name, dl, [(sl, x)])
        if d.is_float:
            y = self.conv("sitofp" if s.is_signed else "uitofp", sl, x, dl)
            return self.bf16_round(dl, y) if d.name == "bf16" else y
        if s.bits == d.bits:
            return x
        if d.bits < s.bits:
            return self.conv("trunc", sl, x, dl)
        return self.conv("sext" if s.is_signed else "zext", sl, x, dl)

    # ---- memory representation ---------------------------------------------------------
    def to_mem(self, t: Type, x: str) -> str:
        if t.elem.is_bool:
            return self.conv("zext", reg(t), x, with_elem(reg(t), "i8"))
        if t.elem.name == "bf16":
            return self.bf16_store(reg(t), x)
        return x

    def from_mem(self, t: Type, x: str) -> str:
        if t.elem.is_bool:
            return self.icmp("ne", with_elem(reg(t), "i8"), x, "zeroinitializer"
                             if isinstance(t, Vec) else "0")
        if t.elem.name == "bf16":
            return self.bf16_load(reg(t), x)
        return x

    def index64(self, t: Type, x: str) -> str:
        """An index of any int type as i64 (signed: sign-extended)."""
        e = t.elem
        if e.is_float:
            raise NotImplementedError("float index")
        if e.bits == 64:
            return x
        return self.conv("sext" if e.is_signed else "zext", reg(t), x, "i64")


def _fbits(ll: str) -> int:
    e = ll[1:-1].split(" ")[2] if ll.startswith("<") else ll
    return {"half": 16, "float": 32, "double": 64}[e]

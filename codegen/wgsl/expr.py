"""WGSL expressions for IR arithmetic on one value type (a scalar or a line of 2-4 lanes;
longer lines are emitted lane by lane with their scalar type). Semantics as cube_ir.ir:
C-style int div/rem with x/0 = 0, shift counts modulo the width, narrow ints wrapped,
float->int casts saturating with NaN -> 0. Half-precision arithmetic a shader lacks (all of
bf16's, f16's transcendentals) reaches here in f32 (passes.legalise); only casts round."""
from __future__ import annotations

from cube_ir.types import Scalar, Type, Vec, f32, i32, u32, vec, with_elem

from . import prelude
from .types import Unsupported, lit, reg, splat

CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/", "rem": "%", "and": "&", "or": "|",
         "xor": "^"}


def k(value, t: Type) -> str:
    return splat(lit(value, t.elem), t)


class Expr:
    def __init__(self, helpers: dict):
        self.helpers = helpers  # name -> WGSL text, filled on demand

    # ---- helpers -----------------------------------------------------------------------
    def fhelper(self, name: str, t: Type, *xs: str) -> str:
        """A prelude float helper applied to f32-typed operands of t's lanes."""
        fname = prelude.float_helper(name, t.lanes, self.helpers)
        return f"{fname}({', '.join(xs)})"

    def bf16(self, t: Type, x: str) -> str:
        return self.fhelper("bf16", t, x) if t.elem.name == "bf16" else x

    def wrap(self, t: Type, x: str) -> str:
        """An int result of a narrow type brought back into its width."""
        e = t.elem
        if not e.is_int or e.bits >= 32:
            return x
        if e.is_signed:
            s = splat(f"{32 - e.bits}u", vec(u32, t.lanes))
            return f"(({x} << {s}) >> {s})"
        return f"({x} & {splat(f'{(1 << e.bits) - 1}u', vec(u32, t.lanes))})"

    # ---- ops ---------------------------------------------------------------------------
    def binary(self, op: str, t: Type, a: str, b: str) -> str:
        e = t.elem
        if op in CMP:
            if e.is_bool and op not in ("eq", "ne"):
                ut = reg(with_elem(t, u32))
                a, b = f"select({ut}(0u), {ut}(1u), {a})", f"select({ut}(0u), {ut}(1u), {b})"
            return f"({a} {CMP[op]} {b})"
        if e.is_float:
            return self._float_binary(op, t, a, b)
        if e.is_bool:
            ops = {"and": "&", "or": "|", "min": "&", "max": "|", "mul": "&"}
            if op in ops:
                return f"({a} {ops[op]} {b})"
            if op in ("xor", "ne", "add", "sub"):
                return f"({a} != {b})"
            raise Unsupported(f"{op} on bool is not supported by the wgsl target")
        zero = k(0, t)
        # (8/16-bit results that could leave their range arrive in 32 bits: passes.legalise)
        if op in ("add", "sub", "mul"):
            return f"({a} {ARITH[op]} {b})"
        if op in ("and", "or", "xor"):
            return f"({a} {ARITH[op]} {b})"
        if op in ("min", "max"):
            return f"{op}({a}, {b})"
        if op in ("div", "rem"):
            return f"select({a} {ARITH[op]} {b}, {zero}, {b} == {zero})"
        if op in ("shl", "shr"):
            ut = with_elem(t, u32)
            n = f"({reg(ut)}({b}) & {k(e.bits - 1, ut)})"
            return f"({a} {'<<' if op == 'shl' else '>>'} {n})"
        if op == "pow":
            s = reg(t.elem)
            fname = prelude.int_pow(s, e.is_signed, self.helpers)
            if not isinstance(t, Vec):
                return f"{fname}({a}, {b})"
            lanes = ", ".join(f"{fname}({a}[{i}], {b}[{i}])" for i in range(t.lanes))
            return f"{reg(t)}({lanes})"
        raise Unsupported(f"int {op}")

    def _float_binary(self, op: str, t: Type, a: str, b: str) -> str:
        if op in ("add", "sub", "mul", "div"):
            r = f"({a} {ARITH[op]} {b})"
        elif op in ("min", "max"):
            r = f"{op}({a}, {b})"
        elif op in ("pow", "hypot", "copysign", "atan2"):
            r = self.fhelper(op, t, a, b)
        elif op == "rem":  # C's fmod, exact (the prelude's; WGSL's `%` is not)
            r = self.fhelper("fmod", t, a, b)
        else:
            raise Unsupported(f"float {op}")
        return r

    def unary(self, op: str, t: Type, a: str) -> str:
        e = t.elem
        if op == "not":
            return f"(!{a})" if e.is_bool else f"({a} == {k(0, t)})"
        if op == "bitnot":
            return f"(!{a})" if e.is_bool else f"(~{a})"
        if op == "neg":
            if e.is_float or e.is_signed:
                return f"(-{a})"
            return f"({k(0, t)} - {a})"
        if op == "abs":
            if e.is_float or e.is_signed:
                return f"abs({a})"
            return a
        if not e.is_float:
            raise Unsupported(f"{op} on {t}")
        if op in ("sqrt", "floor", "ceil", "round"):
            r = f"{op}({a})"
        elif op == "rsqrt":
            r = f"(1.0 / sqrt({a}))"
        elif op in ("sin", "cos"):
            r = f"{op}({a})"
        elif op in ("tan", "exp2", "trunc"):
            r = f"{op}({a})"
        elif op in ("exp", "log", "log1p", "tanh", "erf", "log10", "expm1", "sinh", "cosh",
                    "asinh", "acosh", "atanh", "atan", "asin", "acos", "log2"):
            r = self.fhelper(op, t, a)
        else:
            raise Unsupported(f"unary {op}")
        return r

    def ternary(self, op: str, t: Type, a: str, b: str, c: str) -> str:
        e = t.elem
        if op == "clamp":
            return self.binary("min", t, self.binary("max", t, a, b), c)
        if op != "fma":
            raise Unsupported(op)
        if not e.is_float:
            return self.binary("add", t, self.binary("mul", t, a, b), c)
        return f"fma({a}, {b}, {c})"

    def select(self, c: str, a: str, b: str) -> str:
        return f"select({b}, {a}, {c})"

    # ---- casts -------------------------------------------------------------------------
    def cast(self, src: Type, dst: Type, x: str) -> str:
        if src == dst:
            return x
        if isinstance(dst, Vec) and not isinstance(src, Vec):
            return f"{reg(dst)}({self.cast(src, dst.elem, x)})"
        s, d = src.elem, dst.elem
        if s == d:
            return x
        if d.is_bool:
            return f"({x} != {k(0, src)})"
        if s.is_bool:
            return f"select({k(0, dst)}, {k(1, dst)}, {x})"
        if d.is_float:
            if d.name == "bf16":
                if s.name == "f16" or not s.is_float:
                    x = f"{reg(with_elem(src, f32))}({x})"
                return self.bf16(dst, x)
            return f"{reg(dst)}({x})"
        if s.is_float:
            return self._float_to_int(src, dst, x)
        return self.wrap(dst, f"{reg(dst)}({x})")

    def _float_to_int(self, src: Type, dst: Type, x: str) -> str:
        """Truncate toward zero, saturate, NaN -> 0 (as the interpreter does)."""
        d = dst.elem
        name = f"cube_f2{'i' if d.is_signed else 'u'}{d.bits}" + (
            f"_v{src.lanes}" if isinstance(src, Vec) else "")
        ft = reg(with_elem(src, f32))
        if name not in self.helpers:
            lo = -(1 << (d.bits - 1)) if d.is_signed else 0
            hi = (1 << (d.bits - 1)) - 1 if d.is_signed else (1 << d.bits) - 1
            big = float(hi + 1)
            # the largest f32 below hi + 1 (hi itself is not an f32 for 32-bit types)
            safe = float(hi) if d.bits < 24 else big - 2.0 ** (d.bits - (25 if d.is_signed
                                                                         else 24))
            it = reg(dst)
            self.helpers[name] = (
                f"fn {name}(x: {ft}) -> {it} {{\n"
                f"    let nan = (bitcast<{reg(with_elem(src, u32))}>(x) & "
                f"{k(0x7FFFFFFF, with_elem(src, u32))}) > {k(0x7F800000, with_elem(src, u32))};\n"
                f"    let c = {it}(clamp(x, {ft}({float(lo)!r}), {ft}({safe!r})));\n"
                f"    let s = select(c, {it}({lit(hi, i32 if d.is_signed else u32)}), "
                f"x >= {ft}({big!r}));\n"
                f"    return select(s, {it}({lit(0, i32 if d.is_signed else u32)}), nan);\n}}")
        if src.elem.name == "f16":
            x = f"{ft}({x})"
        return f"{name}({x})"


def scalar_of(t: Type) -> Scalar:
    return t.elem

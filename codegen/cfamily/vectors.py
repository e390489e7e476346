"""Whole-line expressions for dialects with native vectors (OpenCL C, MSL).

A `Line[T, n]` variable is one native vector (`float4`) where the dialect has that type (see
`Dialect.vec`); lane k is `v.sk` / `v.x`, an lvalue, so every op the emitter cannot write as
one vector expression still works lane by lane on it. Each method here returns the vector
expression, or None to fall back to lanes. Semantics are the IR's, as for scalars: signed
arithmetic wraps (computed on the unsigned vector), float->int saturates with NaN -> 0
(OpenCL `convert_*_sat`; MSL has none, so lanes), division and integer pow stay helpers.
"""
from __future__ import annotations

from cube_ir.types import SCALARS, Scalar

from .dialects import Dialect
from .values import Values

MATH = {"sqrt": "sqrt", "rsqrt": "rsqrt", "exp": "exp", "log": "log", "log1p": "log1p",
        "sin": "sin", "cos": "cos", "tanh": "tanh", "floor": "floor", "ceil": "ceil",
        "round": "rint", "abs": "fabs",
        **{o: o for o in ("tan asin acos atan sinh cosh asinh acosh atanh log2 log10 exp2 "
                          "expm1 trunc").split()}}


class VecOps:
    def __init__(self, d: Dialect, v: Values):
        self.d, self.v = d, v

    def vt(self, e: Scalar, n: int) -> str | None:
        return self.d.vec(e, n)

    def _u(self, e: Scalar, n: int) -> str | None:
        return self.d.vec(SCALARS[f"u{e.bits}"], n)

    def rnd(self, e: Scalar, x: str, n: int) -> str:
        """f16 computed in float vectors: round through the half vector (MSL)."""
        if e.name == "f16":
            return f"{self.vt(e, n)}(half{n}({x}))"
        return x

    def wrap(self, e: Scalar, n: int, sym: str, a: str, b: str) -> str:
        """Wrapping integer arithmetic: signed lanes go through the unsigned vector."""
        if not e.is_signed:
            return f"({a} {sym} {b})"
        d, u = self.d, self._u(e, n)
        return d.bitcast(self.vt(e, n), f"{d.bitcast(u, a)} {sym} {d.bitcast(u, b)}")

    # ---- conversions -------------------------------------------------------------------
    def cast(self, x: str, se: Scalar, de: Scalar, n: int) -> str | None:
        if se == de:
            return x
        if se.is_bool or de.is_bool:
            return None
        d, vt = self.d, self.vt(de, n)
        if self.vt(se, n) == vt:  # f16 <-> f32 in float vectors: only the rounding
            return self.rnd(de, x, n)
        if de.is_float:
            r = d.convert(vt, x)
            return None if r is None else self.rnd(de, r, n)
        if se.is_float:
            return d.convert(vt, x, sat=True)
        if de.is_signed:  # modular through the unsigned type (a signed narrowing is not)
            r = d.convert(self._u(de, n), x)
            return None if r is None else d.bitcast(vt, r)
        return d.convert(vt, x)

    # ---- arithmetic --------------------------------------------------------------------
    def unary(self, o: str, e: Scalar, n: int, a: str) -> str | None:
        d = self.d
        if e.is_bool:
            return None
        if o == "bitnot" and e.is_int:
            return f"(~{a})"
        if o == "neg":
            if e.is_float:
                return f"(-{a})"
            zero = d.splat(self.vt(e, n), "0")
            return self.wrap(e, n, "-", zero, a)
        if o == "abs" and e.is_int:
            if not e.is_signed:
                return a
            return d.vector_int_abs(self.vt(e, n), a)
        if o == "erf" and e.is_float and e.bits <= 32 and d.own_erf:
            return self.v.erf(self.vt(e, n), a)
        if o not in MATH or not e.is_float:
            return None
        if d.math_needs(o):  # a scalar prelude helper
            return None
        return f"{d.math(MATH[o], e)}({a})"

    def binary(self, o: str, e: Scalar, n: int, a: str, b: str) -> str | None:
        d = self.d
        if e.is_bool:
            return None
        if e.is_float:
            if d.math_needs(o):  # a scalar prelude helper
                return None
            return d.float_binary(o, e, a, b)
        if o in ("add", "sub", "mul"):
            return self.wrap(e, n, {"add": "+", "sub": "-", "mul": "*"}[o], a, b)
        if o in ("and", "or", "xor"):
            return f"({a} {dict(zip(('and', 'or', 'xor'), '&|^'))[o]} {b})"
        if o in ("min", "max"):
            return f"{o}({a}, {b})"
        if o in ("shl", "shr"):
            # only the low bits of the count, as for scalars
            cnt = f"({b} & {d.splat(self.vt(e, n), str(e.bits - 1))})"
            if o == "shr":
                return f"({a} >> {cnt})"
            return self.wrap(e, n, "<<", a, cnt)
        return None

    def ternary(self, o: str, e: Scalar, n: int, a: str, b: str, c: str) -> str | None:
        if o == "clamp":
            lo = self.binary("max", e, n, a, b)
            return None if lo is None else self.binary("min", e, n, lo, c)
        if o != "fma" or e.is_bool:
            return None
        if not e.is_float:
            return self.wrap(e, n, "+", self.wrap(e, n, "*", a, b), c)
        return f"{self.d.math('fma', e)}({a}, {b}, {c})"

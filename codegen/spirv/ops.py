"""IR ops as SPIR-V instructions (semantics as cube_ir.ir, like codegen/wgsl/expr.py:
int x/0 = 0, shift counts modulo the width, narrow ints wrapped, float->int saturating with
NaN -> 0; half-precision arithmetic the shaders lack arrives in f32 (passes.legalise), so
only casts round to bf16).
Values of wide lines (arrays) are split into lanes, computed as scalars and rebuilt."""
from __future__ import annotations

from cube_ir import ir
from cube_ir.types import Type, Vec, boolean, f32, i32, u32, with_elem

from .emit import (
    BARRIER_SEM,
    SCOPE_DEVICE,
    SCOPE_WG,
    STORAGE,
    XYZ,
    Emitter,
    Unsupported,
    wide,
)

FCMP = {"eq": "FOrdEqual", "ne": "FUnordNotEqual", "lt": "FOrdLessThan",
        "le": "FOrdLessThanEqual", "gt": "FOrdGreaterThan", "ge": "FOrdGreaterThanEqual"}
SCMP = {"eq": "IEqual", "ne": "INotEqual", "lt": "SLessThan", "le": "SLessThanEqual",
        "gt": "SGreaterThan", "ge": "SGreaterThanEqual"}
UCMP = {"eq": "IEqual", "ne": "INotEqual", "lt": "ULessThan", "le": "ULessThanEqual",
        "gt": "UGreaterThan", "ge": "UGreaterThanEqual"}


def _bt(t: Type) -> Type:
    return with_elem(t, boolean)


def lanes(em: Emitter, t: Type, x: int) -> list[int]:
    """The lane values of x, a value of line type t (a scalar splats)."""
    return [em.m.op("CompositeExtract", em.t(t.elem), x, j) for j in range(t.lanes)]


def build(em: Emitter, t: Type, xs: list[int]) -> int:
    return em.m.op("CompositeConstruct", em.t(t), *xs)


def lanewise(em: Emitter, rt: Type, fn, *args: tuple[Type, int]) -> int:
    """fn(*scalar lane values) per lane of the wide line type rt; args are (type, value)
    pairs, a scalar one broadcast to every lane."""
    cols = [lanes(em, t, x) if isinstance(t, Vec) else [x] * rt.lanes for t, x in args]
    return build(em, rt, [fn(*vals) for vals in zip(*cols)])


def wrap(em: Emitter, t: Type, x: int) -> int:
    """An int result of a narrow type (in its 32-bit register) brought back into its
    width: sign-extended for signed types, masked for unsigned ones."""
    e = t.elem
    if not e.is_int or e.bits >= 32:
        return x
    m, rt = em.m, em.t(t)
    if e.is_signed:
        n = em.c(32 - e.bits, t)
        return m.op("ShiftRightArithmetic", rt, m.op("ShiftLeftLogical", rt, x, n), n)
    return m.op("BitwiseAnd", rt, x, em.c((1 << e.bits) - 1, t))


def round_bf16(em: Emitter, t: Type, x: int) -> int:
    """An f32 register rounded to bf16, nearest even (NaN stays NaN), as the interpreter."""
    if t.elem.name != "bf16":
        return x
    m = em.m
    ut = with_elem(t, u32)
    urt = em.t(ut)
    b = m.op("Bitcast", urt, x)
    odd = m.op("BitwiseAnd", urt, m.op("ShiftRightLogical", urt, b, em.c(16, ut)), em.c(1, ut))
    r = m.op("IAdd", urt, m.op("IAdd", urt, b, em.c(0x7FFF, ut)), odd)
    r = m.op("BitwiseAnd", urt, r, em.c(0xFFFF0000, ut))
    q = m.op("BitwiseAnd", urt, m.op("BitwiseOr", urt, b, em.c(0x400000, ut)),
             em.c(0xFFFF0000, ut))
    r = m.op("Select", urt, m.op("IsNan", em.t(_bt(t)), x), q, r)
    return m.op("Bitcast", em.t(t), r)


def logical(em: Emitter, name: str, t: Type, a: int, b: int) -> int:
    """OpLogicalAnd/Or on bools of type t. On bool vectors as selects: naga (wgpu's SPIR-V
    front end) accepts the logical instructions on scalars only."""
    if t.lanes == 1:
        return em.m.op(name, em.t(t), a, b)
    if name == "LogicalOr":
        return em.m.op("Select", em.t(t), a, em.c(True, t), b)
    return em.m.op("Select", em.t(t), a, b, em.c(False, t))


def binary(em: Emitter, o: str, t: Type, a: int, b: int) -> int:
    if wide(t):
        return lanewise(em, _bt(t) if o in FCMP else t,
                        lambda x, y: binary(em, o, t.elem, x, y), (t, a), (t, b))
    # (8/16-bit results that could leave their range arrive in 32 bits: passes.legalise)
    return _binary(em, o, t, a, b)


def _binary(em: Emitter, o: str, t: Type, a: int, b: int) -> int:
    m, e, rt = em.m, t.elem, em.t(t)
    if o in FCMP:
        bt = em.t(_bt(t))
        if e.is_bool:
            name = {"eq": "LogicalEqual", "ne": "LogicalNotEqual"}.get(o)
            if name is not None:
                return m.op(name, bt, a, b)
            # SPIR-V orders no bools; False < True, as Python and the other targets:
            # a < b is !a and b, a <= b is !a or b, a > b is a and !b, a >= b is a or !b
            join = "LogicalAnd" if o in ("lt", "gt") else "LogicalOr"
            if o in ("lt", "le"):
                a = m.op("LogicalNot", bt, a)
            else:
                b = m.op("LogicalNot", bt, b)
            return logical(em, join, t, a, b)
        return m.op((FCMP if e.is_float else SCMP if e.is_signed else UCMP)[o], bt, a, b)
    if e.is_bool:
        name = {"and": "LogicalAnd", "or": "LogicalOr", "min": "LogicalAnd",
                "max": "LogicalOr", "xor": "LogicalNotEqual"}.get(o)
        if name is None:
            raise Unsupported(f"{o} on bool is not supported by the spirv target")
        if name in ("LogicalAnd", "LogicalOr"):
            return logical(em, name, t, a, b)
        return m.op(name, rt, a, b)
    if e.is_float:
        simple = {"add": "FAdd", "sub": "FSub", "mul": "FMul", "div": "FDiv", "rem": "FRem"}
        if o in simple:
            return m.op(simple[o], rt, a, b)
        if o in ("min", "max"):
            return em.ext(t, "NMin" if o == "min" else "NMax", a, b)
        if o == "pow":
            return _fpow(em, t, a, b)
        if o == "atan2":  # GLSL's is undefined for two zeros: Python's signed 0 or pi
            f = _F(em, t)
            zeros = logical(em, "LogicalAnd", _bt(t), f.cmp("FOrdEqual", a, f.k(0.0)),
                            f.cmp("FOrdEqual", b, f.k(0.0)))
            ut = with_elem(t, u32)
            neg = f.cmp("IEqual", m.op("ShiftRightLogical", em.t(ut), m.op(
                "Bitcast", em.t(ut), b), em.c(31, ut)), em.c(1, ut))
            z = f.copysign(f.sel(neg, f.k(3.141592653589793), f.k(0.0)), a)
            r = f.sel(zeros, z, em.ext(t, "Atan2", a, b))
            return f.sel(f.either(f.isnan(a), f.isnan(b)), f.op("FAdd", a, b), r)
        if o == "copysign":
            return _F(em, t).copysign(a, b)
        if o == "hypot":
            return _hypot(em, t, a, b)
        raise Unsupported(f"float {o}")
    simple = {"add": "IAdd", "sub": "ISub", "mul": "IMul", "and": "BitwiseAnd",
              "or": "BitwiseOr", "xor": "BitwiseXor"}
    if o in simple:
        return m.op(simple[o], rt, a, b)
    if o in ("min", "max"):
        return em.ext(t, ("S" if e.is_signed else "U") + o.capitalize(), a, b)
    if o in ("shl", "shr"):
        n = m.op("BitwiseAnd", rt, b, em.c(min(e.bits, 32) - 1, t))
        name = "ShiftLeftLogical" if o == "shl" else (
            "ShiftRightArithmetic" if e.is_signed else "ShiftRightLogical")
        return m.op(name, rt, a, n)
    if o in ("div", "rem"):
        bt = em.t(_bt(t))
        zero = em.c(0, t)
        bz = m.op("IEqual", bt, b, zero)
        if e.is_signed:  # x / -1 as a negation: INT_MIN / -1 wraps instead of being UB
            bm = m.op("IEqual", bt, b, em.c(-1, t))
            bad = logical(em, "LogicalOr", _bt(t), bz, bm)
            d = m.op("Select", rt, bad, em.c(1, t), b)
            if o == "div":
                q = m.op("SDiv", rt, a, d)
                q = m.op("Select", rt, bm, m.op("SNegate", rt, a), q)
                return m.op("Select", rt, bz, zero, q)
            return m.op("Select", rt, bad, zero, m.op("SRem", rt, a, d))
        d = m.op("Select", rt, bz, em.c(1, t), b)
        r = m.op("UDiv" if o == "div" else "UMod", rt, a, d)
        return m.op("Select", rt, bz, zero, r)
    raise Unsupported(f"{o} on {t} is not supported by the spirv target")


def _fpow(em: Emitter, t: Type, a: int, b: int) -> int:
    """pow with NumPy's real results, as the WGSL prelude's: |x|^y (inf for a zero base and
    a negative y, where GLSL's Pow is undefined), negated for a negative base (-0 included)
    and an odd integer y, NaN for a finite x < 0 and a non-integer y or a NaN operand, 1 for
    y = 0, x = 1 (a NaN other operand included) and x = -1 with an infinite y."""
    m, rt, bt = em.m, em.t(t), em.t(_bt(t))
    ut = with_elem(t, u32)
    ax = em.ext(t, "FAbs", a)
    r = em.ext(t, "Pow", ax, b)
    zero_neg = logical(em, "LogicalAnd", _bt(t), m.op("FOrdEqual", bt, ax, em.c(0.0, t)),
                       m.op("FOrdLessThan", bt, b, em.c(0.0, t)))
    r = m.op("Select", rt, zero_neg, em.c(float("inf"), t), r)
    yint = m.op("FOrdEqual", bt, b, em.ext(t, "Trunc", b))
    half = em.ext(t, "Trunc", m.op("FMul", rt, b, em.c(0.5, t)))
    odd = m.op("FOrdEqual", bt, em.ext(t, "FAbs", m.op("FSub", rt, b, m.op(
        "FMul", rt, half, em.c(2.0, t)))), em.c(1.0, t))
    odd = logical(em, "LogicalAnd", _bt(t), yint, odd)
    bits = m.op("Bitcast", em.t(ut), a)
    sign = m.op("IEqual", bt, m.op("ShiftRightLogical", em.t(ut), bits, em.c(31, ut)),
                em.c(1, ut))
    res = m.op("Select", rt, logical(em, "LogicalAnd", _bt(t), sign, odd),
               m.op("FNegate", rt, r), r)
    bad = logical(em, "LogicalAnd", _bt(t), m.op("FOrdLessThan", bt, a, em.c(0.0, t)),
                  m.op("LogicalNot", bt, yint))
    bad = logical(em, "LogicalAnd", _bt(t), bad,
                  m.op("INotEqual", bt, bits, em.c(0xFF800000, ut)))  # not -inf
    res = m.op("Select", rt, bad, em.c(float("nan"), t), res)
    nan = logical(em, "LogicalOr", _bt(t), m.op("IsNan", bt, a), m.op("IsNan", bt, b))
    res = m.op("Select", rt, nan, m.op("FAdd", rt, a, b), res)  # the driver's Pow may not
    one = logical(em, "LogicalOr", _bt(t), m.op("FOrdEqual", bt, b, em.c(0.0, t)),
                  m.op("FOrdEqual", bt, a, em.c(1.0, t)))
    ybits = m.op("BitwiseAnd", em.t(ut), m.op("Bitcast", em.t(ut), b), em.c(0x7FFFFFFF, ut))
    one_inf = logical(em, "LogicalAnd", _bt(t), m.op("FOrdEqual", bt, ax, em.c(1.0, t)),
                      m.op("IEqual", bt, ybits, em.c(0x7F800000, ut)))
    one = logical(em, "LogicalOr", _bt(t), one, one_inf)  # (-1)^(+-inf) is 1
    return m.op("Select", rt, one, em.c(1.0, t), res)  # pow(x, 0) and pow(1, y): 1, nan too


def unary(em: Emitter, o: str, t: Type, a: int) -> int:
    if wide(t):
        return lanewise(em, t, lambda x: unary(em, o, t.elem, x), (t, a))
    e = t.elem
    if e.is_float and o != "not":
        return _unary(em, o, t, a)
    return _unary(em, o, t, a)


def ternary(em: Emitter, o: str, t: Type, a: int, b: int, c: int) -> int:
    if wide(t):
        return lanewise(em, t, lambda x, y, z: ternary(em, o, t.elem, x, y, z),
                        (t, a), (t, b), (t, c))
    if o == "clamp":
        return binary(em, "min", t, binary(em, "max", t, a, b), c)
    if t.elem.is_float:
        return em.ext(t, "Fma", a, b, c)
    return binary(em, "add", t, binary(em, "mul", t, a, b), c)


def _unary(em: Emitter, o: str, t: Type, a: int) -> int:
    m, e, rt = em.m, t.elem, em.t(t)
    if o == "not":
        if e.is_bool:
            return m.op("LogicalNot", rt, a)
        return binary(em, "eq", t, a, em.c(0, t))
    if o == "bitnot":
        return m.op("LogicalNot" if e.is_bool else "Not", rt, a)
    if o == "neg":
        if e.is_float:
            return m.op("FNegate", rt, a)
        if not e.is_signed:  # naga has no Negate on unsigned ints
            return m.op("ISub", rt, em.c(0, t), a)
        return m.op("SNegate", rt, a)
    if o == "abs":
        if e.is_float:
            return em.ext(t, "FAbs", a)
        return em.ext(t, "SAbs", a) if e.is_signed else a
    if not e.is_float:
        raise Unsupported(f"{o} on {t}")
    simple = {"sqrt": "Sqrt", "floor": "Floor", "ceil": "Ceil", "round": "RoundEven",
              "sin": "Sin", "cos": "Cos", "exp": "Exp", "log": "Log", "tanh": "Tanh"}
    if o in simple:
        return em.ext(t, simple[o], a)
    if o == "rsqrt":
        return m.op("FDiv", rt, em.c(1.0, t), em.ext(t, "Sqrt", a))
    if o == "log1p":
        return _F(em, t).log1p(a)
    if o == "erf":
        return _erf(em, t, a)
    if o in _GLSL_MORE:  # a NaN passes through (lavapipe's Atan(NaN) is 0)
        return _F(em, t)._nan(a, em.ext(t, _GLSL_MORE[o], a))
    if o in _COMPOSED:
        return getattr(_F(em, t), o)(a)
    raise Unsupported(f"unary {o}")


# the driver's (Vulkan: tan, asin, ... inherit their accuracy from sin, cos and atan)
_GLSL_MORE = {"tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan", "log2": "Log2",
              "exp2": "Exp2", "trunc": "Trunc"}
# composed of the driver's Exp and Log as the WGSL prelude composes them of its own (the
# driver's Sinh, Asinh, Atanh lose digits near 0: lavapipe takes them from exp and log of
# values near 1); Vulkan has no log10, expm1 or hypot
_COMPOSED = frozenset("log10 expm1 sinh cosh asinh acosh atanh".split())


class _F:
    """Float expression helpers on one scalar or vector type t (the SPIR-V twin of the WGSL
    prelude's helpers, codegen/wgsl/prelude.py, which give the formulas' reasons)."""

    def __init__(self, em: Emitter, t: Type) -> None:
        self.em, self.t, self.rt, self.bt = em, t, em.t(t), em.t(_bt(t))

    def k(self, v):
        return self.em.c(v, self.t)

    def op(self, name, *xs):
        return self.em.m.op(name, self.rt, *xs)

    def cmp(self, name, a, b):
        return self.em.m.op(name, self.bt, a, b)

    def sel(self, c, a, b):
        return self.em.m.op("Select", self.rt, c, a, b)

    def ext(self, name, *xs):
        return self.em.ext(self.t, name, *xs)

    def either(self, a, b):
        return logical(self.em, "LogicalOr", _bt(self.t), a, b)

    def isnan(self, x):
        return self.em.m.op("IsNan", self.bt, x)

    def copysign(self, x, y):
        em, ut = self.em, with_elem(self.t, u32)
        urt = em.t(ut)
        mag = em.m.op("BitwiseAnd", urt, em.m.op("Bitcast", urt, x), em.c(0x7FFFFFFF, ut))
        sign = em.m.op("BitwiseAnd", urt, em.m.op("Bitcast", urt, y), em.c(0x80000000, ut))
        return em.m.op("Bitcast", self.rt, em.m.op("BitwiseOr", urt, mag, sign))

    def log1p(self, x):  # log(u) * x / (u - 1) with u = 1 + x corrects u's rounding
        u = self.op("FAdd", self.k(1.0), x)
        d = self.op("FSub", u, self.k(1.0))
        r = self.op("FDiv", self.op("FMul", self.ext("Log", u), x), d)
        r = self.sel(self.cmp("FOrdEqual", d, self.k(0.0)), x, r)
        # log1p(inf) is inf (the correction is inf / inf), as the WGSL prelude's
        return self.sel(self.cmp("FOrdEqual", x, self.k(float("inf"))), x, r)

    def log10(self, x):
        return self.op("FMul", self.ext("Log", x), self.k(0.4342944819032518))

    def expm1(self, x):  # Kahan: (u - 1) x / log(u), u = e^x
        u = self.ext("Exp", x)
        m = self.op("FSub", u, self.k(1.0))
        r = self.op("FMul", m, self.op("FDiv", x, self.ext("Log", u)))  # m x overflows
        r = self.sel(self.either(self.cmp("FOrdEqual", m, self.k(-1.0)),
                                 self.cmp("FOrdEqual", u, self.k(float("inf")))), m, r)
        r = self.sel(self.either(self.cmp("FOrdEqual", u, self.k(1.0)), self.isnan(x)), x, r)
        # below 2^-12 x + x^2 / 2 is exact to f32 (the driver's Log near 1 is not)
        tiny = self.cmp("FOrdLessThan", self.ext("FAbs", x), self.k(2.0 ** -12))
        return self.sel(tiny, self.ext("Fma", self.op("FMul", x, self.k(0.5)), x, x), r)

    def _big_exp(self, ax):  # e^|x| / 2 as (e^(|x|/2) / 2) e^(|x|/2): no early overflow
        h = self.ext("Exp", self.op("FMul", self.k(0.5), ax))
        return self.op("FMul", self.op("FMul", self.k(0.5), h), h)

    def sinh(self, x):
        ax = self.ext("FAbs", x)
        e = self.expm1(self.ext("NMin", ax, self.k(9.0)))
        small = self.op("FMul", self.k(0.5), self.op("FAdd", e, self.op(
            "FDiv", e, self.op("FAdd", e, self.k(1.0)))))
        big = self.cmp("FOrdGreaterThan", ax, self.k(9.0))
        return self._nan(x, self.copysign(self._tiny(ax, self.sel(big, self._big_exp(ax),
                                                                 small)), x))

    def cosh(self, x):
        ax = self.ext("FAbs", x)
        e = self.ext("Exp", self.ext("NMin", ax, self.k(9.0)))
        small = self.op("FAdd", self.op("FMul", self.k(0.5), e),
                        self.op("FDiv", self.k(0.5), e))
        big = self.cmp("FOrdGreaterThan", ax, self.k(9.0))
        return self._nan(x, self.sel(big, self._big_exp(ax), small))

    def asinh(self, x):
        ax = self.ext("FAbs", x)
        s = self.ext("NMin", ax, self.k(4096.0))
        z = self.op("FMul", s, s)
        q = self.op("FDiv", z, self.op("FAdd", self.k(1.0), self.ext(
            "Sqrt", self.op("FAdd", self.k(1.0), z))))
        small = self.log1p(self.op("FAdd", s, q))
        big = self.op("FAdd", self.ext("Log", ax), self.k(0.6931471805599453))
        r = self.sel(self.cmp("FOrdGreaterThan", ax, self.k(4096.0)), big, small)
        return self._nan(x, self.copysign(self._tiny(ax, r), x))

    def _nan(self, x, r):  # NMin(NaN, c) is c, and lavapipe's Atan(NaN) is 0: x's NaN
        return self.sel(self.isnan(x), x, r)

    def _tiny(self, ax, r):  # below 2^-12 sinh, asinh and atanh round to x
        return self.sel(self.cmp("FOrdLessThan", ax, self.k(2.0 ** -12)), ax, r)

    def acosh(self, x):
        t = self.op("FSub", self.ext("NMin", x, self.k(4096.0)), self.k(1.0))
        small = self.log1p(self.op("FAdd", t, self.ext("Sqrt", self.ext(
            "Fma", t, t, self.op("FAdd", t, t)))))
        big = self.op("FAdd", self.ext("Log", x), self.k(0.6931471805599453))
        r = self.sel(self.cmp("FOrdGreaterThan", x, self.k(4096.0)), big, small)
        below = self.cmp("FOrdLessThan", x, self.k(1.0))
        return self._nan(x, self.sel(below, self.k(float("nan")), r))

    def atanh(self, x):
        ax = self.ext("FAbs", x)
        r = self.op("FMul", self.k(0.5), self.log1p(self.op("FDiv", self.op(
            "FAdd", ax, ax), self.op("FSub", self.k(1.0), ax))))
        r = self.sel(self.cmp("FOrdGreaterThan", ax, self.k(1.0)), self.k(float("nan")), r)
        return self.copysign(self._tiny(ax, r), x)


def _hypot(em: Emitter, t: Type, x: int, y: int) -> int:
    """max(|x|, |y|) sqrt(1 + r^2), r = min / max (no overflow in between); inf where
    either is infinite, NaN beside it included."""
    f = _F(em, t)
    ax, ay = f.ext("FAbs", x), f.ext("FAbs", y)
    hi, lo = f.ext("NMax", ax, ay), f.ext("NMin", ax, ay)
    r = f.op("FDiv", lo, f.sel(f.cmp("FOrdEqual", hi, f.k(0.0)), f.k(1.0), hi))
    h = f.op("FMul", hi, f.ext("Sqrt", f.ext("Fma", r, r, f.k(1.0))))
    h = f.sel(f.either(f.isnan(x), f.isnan(y)), f.op("FAdd", ax, ay), h)
    inf = f.either(f.cmp("FOrdEqual", ax, f.k(float("inf"))),
                   f.cmp("FOrdEqual", ay, f.k(float("inf"))))
    return f.sel(inf, f.k(float("inf")), h)


def _erf(em: Emitter, t: Type, x: int) -> int:
    """N. Juffa's erff, as codegen.llvm.math."""
    m, rt, bt = em.m, em.t(t), em.t(_bt(t))

    def fma(a, b, c):
        return em.ext(t, "Fma", a, b, c)

    def k(v):
        return em.c(v, t)
    ax = em.ext(t, "FAbs", x)
    s = m.op("FMul", rt, x, x)
    r = fma(k(-1.72853470e-5), ax, k(3.83197126e-4))
    u = fma(k(-3.88396438e-3), ax, k(2.42546219e-2))
    r = fma(r, s, u)
    for c in (-1.06777877e-1, -6.34846687e-1, -1.28717512e-1):
        r = fma(r, ax, k(c))
    r = fma(r, ax, m.op("FNegate", rt, ax))
    big = m.op("FSub", rt, k(1.0), em.ext(t, "Exp", r))
    sign = m.op("Select", rt, m.op("FOrdLessThan", bt, x, k(0.0)), k(-1.0), k(1.0))
    big = m.op("FMul", rt, big, sign)
    sm = k(-5.96761703e-4)
    for c in (4.99119423e-3, -2.67681349e-2, 1.12819925e-1, -3.76125336e-1, 1.28379166e-1):
        sm = fma(sm, s, k(c))
    sm = fma(sm, x, x)
    return m.op("Select", rt, m.op("FOrdGreaterThan", bt, ax, k(0.927734375)), big, sm)


def cast(em: Emitter, src: Type, dst: Type, x: int) -> int:
    m = em.m
    if src == dst:
        return x
    if isinstance(dst, Vec) and not isinstance(src, Vec):
        y = cast(em, src, dst.elem, x)
        return m.op("CompositeConstruct", em.t(dst), *([y] * dst.lanes))
    if wide(dst):
        return lanewise(em, dst, lambda v: cast(em, src.elem, dst.elem, v), (src, x))
    s, d = src.elem, dst.elem
    rt = em.t(dst)
    if s == d:
        return x
    if d.is_bool:
        return binary(em, "ne", src, x, em.c(0, src))
    if s.is_bool:
        return m.op("Select", rt, x, em.c(1, dst), em.c(0, dst))
    if s.is_float and d.is_float:
        if em.t(src) != rt:  # f16 <-> f32/bf16 registers
            x = m.op("FConvert", rt, x)
        return round_bf16(em, dst, x)
    if d.is_float:
        r = m.op("ConvertSToF" if s.is_signed else "ConvertUToF", rt, x)
        return round_bf16(em, dst, r)
    if s.is_float:  # saturate, NaN -> 0
        if s.name == "f16":  # the bounds below need f32
            src = with_elem(src, f32)
            x = m.op("FConvert", em.t(src), x)
        bt = em.t(_bt(src))
        bits = min(d.bits, 32)
        lo = -2.0 ** (bits - 1) if d.is_signed else 0.0
        top = 2.0 ** (bits - 1) if d.is_signed else 2.0 ** bits  # the first value too big
        hi = top - 1 if bits < 24 else top - 2.0 ** (bits - 24 - int(d.is_signed))
        reg = with_elem(dst, i32 if d.is_signed else u32)
        c = em.ext(src, "NMax", em.ext(src, "NMin", x, em.c(hi, src)), em.c(lo, src))
        r = m.op("ConvertFToS" if d.is_signed else "ConvertFToU", rt, c)
        big = m.op("FOrdGreaterThanEqual", bt, x, em.c(top, src))
        r = m.op("Select", rt, big, em.c(int(top) - 1, reg), r)
        return m.op("Select", rt, m.op("IsNan", bt, x), em.c(0, dst), r)
    if em.t(src) != rt:
        x = m.op("Bitcast", rt, x)  # i32 <-> u32 registers
    return wrap(em, dst, x) if d.bits < s.bits or s.is_signed != d.is_signed else x


def emit_op(em: Emitter, op) -> None:
    m = em.m
    match op:
        case ir.Assign(dst=d, src=s):
            em.write(d, em.val_as(s, d.type))
        case ir.Unary(dst=d, op=o, a=a):
            em.write(d, unary(em, o, a.type, em.val(a)))
        case ir.Binary(dst=d, op=o, a=a, b=b):
            t = a.type if not isinstance(a, ir.Const) else b.type
            em.write(d, binary(em, o, t, em.val_as(a, t), em.val_as(b, t)))
        case ir.Ternary(dst=d, op=o, a=a, b=b, c=c):
            t = d.type
            em.write(d, ternary(em, o, t, *(em.val_as(v, t) for v in (a, b, c))))
        case ir.Select(dst=d, cond=c, a=a, b=b) if wide(d.type):
            em.write(d, lanewise(em, d.type, lambda cv, x, y: m.op(
                "Select", em.t(d.type.elem), cv, x, y), (c.type, em.val(c)),
                (d.type, em.val_as(a, d.type)), (d.type, em.val_as(b, d.type))))
        case ir.Select(dst=d, cond=c, a=a, b=b):
            cv = em.val(c)
            if isinstance(d.type, Vec) and not isinstance(c.type, Vec):
                cv = m.op("CompositeConstruct", em.t(_bt(d.type)), *([cv] * d.type.lanes))
            em.write(d, m.op("Select", em.t(d.type), cv, em.val_as(a, d.type),
                             em.val_as(b, d.type)))
        case ir.Cast(dst=d, a=a):
            em.write(d, cast(em, a.type, d.type, em.val(a)))
        case ir.Bitcast(dst=d, a=a) if wide(d.type):  # a long line is an array: per lane
            em.write(d, lanewise(em, d.type, lambda x: m.op("Bitcast", em.t(d.type.elem), x),
                                 (a.type, em.val(a))))
        case ir.Bitcast(dst=d, a=a):
            em.write(d, m.op("Bitcast", em.t(d.type), em.val(a)))
        case ir.Extract(dst=d, vec=v, lane=n):
            if isinstance(v.type, Vec):
                em.write(d, m.op("CompositeExtract", em.t(d.type), em.val(v), n))
            else:
                em.write(d, em.val_as(v, d.type))
        case ir.Insert(dst=d, vec=v, lane=n, value=x):
            if isinstance(d.type, Vec):
                em.write(d, m.op("CompositeInsert", em.t(d.type), em.val_as(x, d.type.elem),
                                 em.val_as(v, d.type), n))
            else:
                em.write(d, em.val_as(x, d.type))
        case ir.Load(dst=d, mem=mem, index=i):
            _load(em, d, mem, i)
        case ir.Store(mem=mem, index=i, value=v):
            _store(em, mem, i, v)
        case ir.Meta():
            em.write(op.dst, _meta(em, op))
        case ir.Builtin(dst=d, name=n):
            em.write(d, _builtin(em, n))
        case ir.Atomic():
            _atomic(em, op)
        case ir.Plane(dst=d):  # plane size > 1 (passes.planes folded size 1)
            em.write(d, _plane(em, op))
        case ir.SyncCube():
            m.emit("code", "ControlBarrier", em.u(SCOPE_WG), em.u(SCOPE_WG),
                   em.u(BARRIER_SEM))
        case ir.If(cond=c):
            cv = em.val(c)
            then, merge = m.id(), m.id()
            orelse = m.id() if op.orelse else merge
            m.emit("code", "SelectionMerge", merge, 0)
            m.emit("code", "BranchConditional", cv, then, orelse)
            em.label(then)
            em._block(op.then)
            em.branch(merge)
            if op.orelse:
                em.label(orelse)
                em._block(op.orelse)
                em.branch(merge)
            em.label(merge)
        case ir.Loop(body=body):
            _loop(em, None, body)
        case ir.Range():
            _loop(em, op, op.body)
        case ir.Break():
            em.branch(em.loops[-1][0])
        case ir.Continue():
            em.branch(em.loops[-1][1])
        case ir.Return():
            m.emit("code", "Return")
            em.terminated = True
        case _:  # pragma: no cover
            raise Unsupported(f"spirv codegen: {op!r}")


SUBGROUP = 3  # scope
GNU, GNU_VOTE, GNU_ARITH, GNU_BALLOT, GNU_SHUFFLE = 61, 62, 63, 64, 65  # capabilities
GROUP_OP = {"sum": 0, "prod": 0, "max": 0, "min": 0, "inclusive_sum": 1, "inclusive_prod": 1,
            "exclusive_sum": 2, "exclusive_prod": 2}  # Reduce, InclusiveScan, ExclusiveScan


def _plane(em: Emitter, op: ir.Plane) -> int:
    """A plane op as GroupNonUniform instructions over the subgroup (the runtime checked that
    subgroups are runs of plane_size consecutive units, as the interpreter's planes)."""
    m, t = em.m, op.dst.type
    x = em.val_as(op.value, t)
    em.subgroup_caps.add(GNU)
    scope = em.u(SUBGROUP)
    if op.op in ("broadcast", "shuffle", "shuffle_xor"):
        # the interpreter's rule: a unit whose source lane is outside the plane, missing (a
        # partial last plane) or inactive reads its own value; the ballot says which exist
        em.subgroup_caps |= {GNU_BALLOT, GNU_SHUFFLE}
        ps, ut = em.k.plane_size, em.t(u32)
        src = em.val_as(op.lane, u32)
        if op.op == "shuffle_xor":
            lane = m.op("UMod", ut, _builtin(em, "UNIT_POS"), em.u(ps))
            src = m.op("BitwiseXor", ut, lane, src)
        ballot = m.op("GroupNonUniformBallot", m.vec(ut, 4), scope, m.const_bool(True))
        inside = m.op("ULessThan", m.bool(), src, em.u(ps))
        at = em.ext(u32, "UMin", src, em.u(ps - 1))
        word = m.op("VectorExtractDynamic", ut, ballot, m.op("UDiv", ut, at, em.u(32)))
        bit = m.op("BitwiseAnd", ut, m.op("ShiftRightLogical", ut, word, m.op(
            "UMod", ut, at, em.u(32))), em.u(1))
        ok = m.op("LogicalAnd", m.bool(), inside, m.op("IEqual", m.bool(), bit, em.u(1)))

        def shuffle(lt: Type, v: int) -> int:
            if lt.elem.is_bool:  # shuffled as u32 0/1
                w = with_elem(lt, u32)
                s = m.op("GroupNonUniformShuffle", em.t(w), scope, cast(em, lt, w, v), at)
                sh = cast(em, w, lt, s)
            else:
                sh = m.op("GroupNonUniformShuffle", em.t(lt), scope, v, at)
            if isinstance(lt, Vec):
                okv = m.op("CompositeConstruct", em.t(_bt(lt)), *([ok] * lt.lanes))
                return m.op("Select", em.t(lt), okv, sh, v)
            return m.op("Select", em.t(lt), ok, sh, v)
        if wide(t):
            return lanewise(em, t, lambda v: shuffle(t.elem, v), (t, x))
        return shuffle(t, x)
    if op.op in ("all", "any"):
        em.subgroup_caps.add(GNU_VOTE)
        name = "GroupNonUniformAll" if op.op == "all" else "GroupNonUniformAny"
        if isinstance(t, Vec):
            return build(em, t, [m.op(name, m.bool(), scope, v) for v in lanes(em, t, x)])
        return m.op(name, m.bool(), scope, x)
    em.subgroup_caps.add(GNU_ARITH)
    e = t.elem
    kind = "F" if e.is_float else "I" if op.op.endswith(("sum", "prod")) else \
        "S" if e.is_signed else "U"
    base = {"sum": "Add", "prod": "Mul", "max": "Max", "min": "Min"}[op.op.split("_")[-1]]
    name = f"GroupNonUniform{kind}{base}"

    def arith(lt: Type, v: int) -> int:
        if op.op in ("max", "min"):
            return m.op(name, em.t(lt), scope, GROUP_OP[op.op], v)
        # (narrow ints and halves accumulate in 32 bits: passes.legalise)
        return m.op(name, em.t(lt), scope, GROUP_OP[op.op], v)
    if wide(t):
        return lanewise(em, t, lambda v: arith(t.elem, v), (t, x))
    return arith(t, x)


def _loop(em: Emitter, rng: ir.Range | None, body) -> None:
    m = em.m
    header, first, cont, merge = m.id(), m.id(), m.id(), m.id()
    if rng is not None:
        t = rng.var.type
        end = em.val_as(rng.end, t)
        em.write(rng.var, em.val_as(rng.start, t))
    em.branch(header)
    em.label(header)
    if rng is not None:  # the header computes the test, then merges and branches
        ok = binary(em, "lt" if rng.step > 0 else "gt", t, em.val(rng.var), end)
        m.emit("code", "LoopMerge", merge, cont, 0)
        m.emit("code", "BranchConditional", ok, first, merge)
    else:
        m.emit("code", "LoopMerge", merge, cont, 0)
        m.emit("code", "Branch", first)
    em.label(first)
    em.loops.append((merge, cont))
    em._block(body)
    em.loops.pop()
    em.branch(cont)
    em.label(cont)
    if rng is not None:
        v = em.val(rng.var)
        nxt = binary(em, "add", t, v, em.c(rng.step, t))
        if ir.range_steps_past_end(rng):  # stop on the distance left (u32 math, exact)
            hi, lo = (end, v) if rng.step > 0 else (v, end)
            left = m.op("ISub", em.t(u32), hi, lo)
            last = m.op("ULessThanEqual", m.bool(), left, em.u(abs(rng.step)))
            nxt = m.op("Select", em.t(t), last, end, nxt)
        em.write(rng.var, nxt)
    m.emit("code", "Branch", header)
    em.terminated = True
    em.label(merge)


def _builtin(em: Emitter, name: str) -> int:
    """The builtins SPIR-V reads directly (codegen.spirv.LOWERING); the lowering computed the
    rest, and CUBE_DIM_* are constants (a module is built for one workgroup size)."""
    m = em.m
    ut = m.int(32, False)
    if name == "UNIT_POS":
        return m.op("Load", ut, em.builtin_vars["lidx"])
    base, ax = name.rsplit("_", 1)
    i = XYZ.index(ax.lower())
    if base == "CUBE_DIM":
        return em.u(em.cube_dim[i])
    src = {"UNIT_POS": "lid", "CUBE_POS": "wid", "CUBE_COUNT": "nwg", "ABSOLUTE_POS": "gid"}
    v = m.op("Load", m.vec(ut, 3), em.builtin_vars[src[base]])
    return m.op("CompositeExtract", ut, v, i)


def _meta(em: Emitter, op: ir.Meta) -> int:
    """len, or shape/stride at a constant dimension below the rank (passes.meta)."""
    slot = em.abi.of(op.mem)
    if op.what == "len":
        return em.word(slot.len)
    return em.word((slot.shape if op.what == "shape" else slot.stride)(int(op.dim.value)))


def _ptr(em: Emitter, mem, i: ir.Value | int) -> tuple[int, int]:
    """A pointer to element i (an IR value or an id of a u32 value) of mem."""
    m = em.m
    var, sc, elem, _ = em.mems[id(mem)]
    if isinstance(i, int):
        idx = i
    else:
        idx = em.val_as(i, u32) if not isinstance(i, ir.Const) else em.u(int(i.value))
    chain = (em.u(0), idx) if sc == STORAGE else (idx,)
    return m.op("AccessChain", m.ptr(sc, elem), var, *chain), sc


def _scalar_param(em: Emitter, mem: ir.Param) -> int:
    """A scalar argument's register value from its meta word (codegen.shader_abi)."""
    m = em.m
    w = em.word(em.abi.of(mem).value)
    e = mem.type.elem
    if e.is_bool:
        return m.op("INotEqual", m.bool(), w, em.u(0))
    if e.name == "f16":  # naga has no u32 -> vec2<f16> bitcast
        f2 = em.ext(Vec(f32, 2), "UnpackHalf2x16", w)
        return m.op("FConvert", em.t(e), m.op("CompositeExtract", em.t(f32), f2, 0))
    if e.name == "bf16":
        return m.op("Bitcast", em.t(e), m.op("ShiftLeftLogical", em.t(u32), w, em.u(16)))
    return w if em.t(e) == em.t(u32) else m.op("Bitcast", em.t(e), w)


def _lane_index(em: Emitter, mem, i: ir.Value, lanes: int, j: int) -> int:
    """The scalar index of lane j of line i (a line stored as `lanes` scalars)."""
    m = em.m
    idx = em.val_as(i, u32) if not isinstance(i, ir.Const) else em.u(int(i.value))
    if lanes == 1:
        return idx
    return m.op("IAdd", em.t(u32), m.op("IMul", em.t(u32), idx, em.u(lanes)), em.u(j))


def _load(em: Emitter, d: ir.Var, mem, i: ir.Value) -> None:
    m, t = em.m, mem.type
    if isinstance(mem, ir.Param) and mem.kind == "scalar":
        em.write(d, cast(em, t.elem, d.type, _scalar_param(em, mem)))
        return
    how = em.mems[id(mem)][3]
    if how != "whole":  # one access per lane
        n = t.lanes
        xs = []
        for j in range(n):
            idx = _lane_index(em, mem, i, n, j)
            xs.append(m.op("Load", em.t(t.elem), _ptr(em, mem, idx)[0]))
        x = build(em, t, xs) if isinstance(t, Vec) else xs[0]
        em.write(d, cast(em, t, d.type, x))
        return
    p, sc = _ptr(em, mem, i)
    if id(mem) in em.atomic:
        scope = SCOPE_WG if sc != STORAGE else SCOPE_DEVICE
        x = m.op("AtomicLoad", em._atomic_elem(t), p, em.u(scope), em.u(0))
    else:
        x = m.op("Load", em.t(t), p)
    em.write(d, cast(em, t, d.type, x))


def _store(em: Emitter, mem, i: ir.Value, v: ir.Value) -> None:
    m, t = em.m, mem.type
    x = em.val_as(v, t)
    how = em.mems[id(mem)][3]
    if how != "whole":
        n = t.lanes
        xs = lanes(em, t, x) if isinstance(t, Vec) else [x]
        for j in range(n):
            idx = _lane_index(em, mem, i, n, j)
            m.emit("code", "Store", _ptr(em, mem, idx)[0], xs[j])
        return
    p, sc = _ptr(em, mem, i)
    if id(mem) in em.atomic:
        scope = SCOPE_WG if sc != STORAGE else SCOPE_DEVICE
        m.emit("code", "AtomicStore", p, em.u(scope), em.u(0), x)
    else:
        m.emit("code", "Store", p, x)


def _atomic(em: Emitter, op: ir.Atomic) -> None:
    """Native atomics only. naga 29's SPIR-V front end loses the result of
    OpAtomicCompareExchange (a later use panics its SPIR-V writer), so there is no
    compare-exchange loop: f32 has load/store/exchange and add/sub (OpAtomicFAddEXT, the
    adapter's shader-float32-atomic), and atomic_cas is a single exchange whose result
    must go unused."""
    m, t = em.m, op.mem.type
    e = t.elem
    p, sc = _ptr(em, op.mem, op.index)
    val = em.val_as(op.value, t)
    # (atomics on unit-private arrays are plain read-modify-writes: passes.local_atomics)
    it = em._atomic_elem(t)
    scope, sem = em.u(SCOPE_WG if sc != STORAGE else SCOPE_DEVICE), em.u(0)
    if op.op == "cas":
        if op.dst is not None or e.is_float:
            raise Unsupported(f"atomic_cas {'on f32' if e.is_float else 'results'} "
                              "is not supported by the spirv target (naga drops "
                              "OpAtomicCompareExchange results)")
        m.op("AtomicCompareExchange", it, p, scope, sem, sem, val, em.val_as(op.cmp, t))
        return
    if e.is_float:
        if op.op not in ("add", "sub", "exchange"):
            raise Unsupported(f"atomic_{op.op} on f32 is not supported by the spirv target "
                              "(it has f32 atomic add, sub and exchange)")
        if op.op == "sub":
            val = m.op("FNegate", it, val)
        em.float_atomics = True
        name = "AtomicExchange" if op.op == "exchange" else "AtomicFAddEXT"
    else:
        name = {"add": "AtomicIAdd", "sub": "AtomicISub", "and": "AtomicAnd",
                "or": "AtomicOr", "xor": "AtomicXor", "exchange": "AtomicExchange",
                "min": "AtomicSMin" if e.is_signed else "AtomicUMin",
                "max": "AtomicSMax" if e.is_signed else "AtomicUMax"}[op.op]
    old = m.op(name, it, p, scope, sem, val)
    if op.dst is not None:
        em.write(op.dst, cast(em, t, op.dst.type, old))


__all__ = ["binary", "cast", "emit_op", "unary"]

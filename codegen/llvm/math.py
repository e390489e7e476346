"""Inline f32 math (exp, log, log1p, tanh, erf) so elementwise loops vectorise.

LLVM scalarises `llvm.exp.v8f32` and friends into one libm call per lane, which stops the
loop vectoriser; these straight-line versions (Cephes polynomials, Juffa's erff) are within
about 2 ulp of the correctly rounded result and handle inf/NaN/overflow/subnormals. Each is an
internal always-inline function per LLVM type (scalar or line), built on demand.
"""
from __future__ import annotations

from collections.abc import Callable

from .fn import Fn, Module
from .lower import Lower
from .types import suffix, with_elem


class _P(Lower):
    """Float expression helpers for one LLVM type (float or <n x float>)."""

    def __init__(self, fn: Fn, ll: str) -> None:
        super().__init__(fn)
        self.ll, self.il = ll, with_elem(ll, "i32")

    def k(self, v: float) -> str:
        return self.c(v, self.ll)

    def add(self, a, b): return self.bin("fadd", self.ll, a, b)
    def sub(self, a, b): return self.bin("fsub", self.ll, a, b)
    def mul(self, a, b): return self.bin("fmul", self.ll, a, b)
    def div(self, a, b): return self.bin("fdiv", self.ll, a, b)
    def fma(self, a, b, c): return self.intr("fmuladd", self.ll, a, b, c)
    def sel(self, c, a, b): return self.select(c, self.ll, a, b)
    def cmp(self, pred, a, b): return self.fcmp(pred, self.ll, a, b)

    def poly(self, x: str, coeffs: list[float]) -> str:
        """Horner: coeffs from the highest power down."""
        y = self.k(coeffs[0])
        for c in coeffs[1:]:
            y = self.fma(y, x, self.k(c))
        return y


def _helper(mod: Module, base: str, ll: str, body: Callable[[_P, str], str]) -> str:
    def build(name: str) -> str:
        fn = Fn(mod)
        p = _P(fn, ll)
        r = body(p, "%x")
        fn.ret(f"{ll} {r}")
        return fn.define(f"define internal {ll} @{name}({ll} %x) alwaysinline nounwind")
    return mod.helper(f"cube.{base}.{suffix(ll)}", build)


def _exp_reduced(p: _P, xc: str) -> tuple[str, str]:
    """(n, e^r) with xc = n ln 2 + r: Cody-Waite reduction and the polynomial."""
    n = p.intr("rint", p.ll, p.mul(xc, p.k(1.44269504088896341)))
    r = p.fma(n, p.k(-0.693359375), xc)  # Cody-Waite: n * C1 is exact
    r = p.fma(n, p.k(2.12194440e-4), r)
    z = p.mul(r, r)
    y = p.poly(r, [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                   1.6666665459e-1, 5.0000001201e-1])
    return n, p.add(p.fma(y, z, r), p.k(1.0))


def _exp(p: _P, x: str) -> str:
    xc = p.intr("minnum", p.ll, p.intr("maxnum", p.ll, x, p.k(-104.0)), p.k(89.0))
    n, y = _exp_reduced(p, xc)
    # scale by 2^n in two steps so that n in [-150, 128] never leaves the exponent range
    il = p.il
    ni = p.conv("fptosi", p.ll, n, il)
    n1 = p.bin("ashr", il, ni, p.c(1, il))
    n2 = p.bin("sub", il, ni, n1)
    s1 = p.bin("shl", il, p.bin("add", il, n1, p.c(127, il)), p.c(23, il))
    s2 = p.bin("shl", il, p.bin("add", il, n2, p.c(127, il)), p.c(23, il))
    y = p.mul(p.mul(y, p.conv("bitcast", il, s1, p.ll)), p.conv("bitcast", il, s2, p.ll))
    return p.sel(p.cmp("uno", x, x), x, y)


def _exp_nonpositive(p: _P, x: str) -> str:
    """exp for erf's tail: x clamped to [-87, 0], where 2^n is one normal float, so one scale
    step suffices and no NaN test is needed (erf tests its own input): about a fifth fewer
    instructions in GELU's inner loop than the general exp."""
    xc = p.intr("minnum", p.ll, p.intr("maxnum", p.ll, x, p.k(-87.0)), p.k(0.0))
    n, y = _exp_reduced(p, xc)
    il = p.il
    ni = p.conv("fptosi", p.ll, n, il)
    s = p.bin("shl", il, p.bin("add", il, ni, p.c(127, il)), p.c(23, il))
    return p.mul(y, p.conv("bitcast", il, s, p.ll))


def _log(p: _P, x: str) -> str:
    il = p.il
    sub = p.cmp("olt", x, p.k(1.1754943508222875e-38))  # subnormal (or <= 0): scale up
    xs = p.sel(sub, p.mul(x, p.k(33554432.0)), x)
    eoff = p.select(sub, il, p.c(25 + 126, il), p.c(126, il))
    b = p.conv("bitcast", p.ll, xs, il)
    e = p.bin("sub", il, p.bin("lshr", il, b, p.c(23, il)), eoff)
    mb = p.bin("or", il, p.bin("and", il, b, p.c(0x007FFFFF, il)), p.c(0x3F000000, il))
    m = p.conv("bitcast", il, mb, p.ll)  # x = m * 2^e, m in [0.5, 1)
    small = p.cmp("olt", m, p.k(0.707106781186547524))
    e = p.conv("sitofp", il, e, p.ll)
    e = p.sel(small, p.sub(e, p.k(1.0)), e)
    m = p.sel(small, p.sub(p.add(m, m), p.k(1.0)), p.sub(m, p.k(1.0)))
    z = p.mul(m, m)
    y = p.poly(m, [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
                   1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
                   3.3333331174e-1])
    y = p.mul(p.mul(y, m), z)
    y = p.fma(e, p.k(-2.12194440e-4), y)
    y = p.fma(z, p.k(-0.5), y)
    r = p.fma(e, p.k(0.693359375), p.add(m, y))
    inf = float("inf")
    r = p.sel(p.cmp("oeq", x, p.k(inf)), p.k(inf), r)
    r = p.sel(p.cmp("oeq", x, p.k(0.0)), p.k(-inf), r)
    r = p.sel(p.cmp("olt", x, p.k(0.0)), p.k(float("nan")), r)
    return p.sel(p.cmp("uno", x, x), x, r)


def _log1p(p: _P, x: str) -> str:
    # log1p(x) = log(u) * x / (u - 1) with u = 1 + x corrects u's rounding error
    u = p.add(p.k(1.0), x)
    d = p.sub(u, p.k(1.0))
    lg = p.call(inline_fn(p.mod, "log", p.ll), p.ll, [(p.ll, u)])
    r = p.div(p.mul(lg, x), d)
    r = p.sel(p.cmp("oeq", d, p.k(0.0)), x, r)
    return p.sel(p.cmp("oeq", x, p.k(float("inf"))), x, r)


def _tanh(p: _P, x: str) -> str:
    ax = p.intr("fabs", p.ll, x)
    z = p.mul(x, x)
    q = p.poly(z, [-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
                   -3.33332819422e-1])
    small = p.fma(p.mul(q, z), x, x)
    t = p.intr("minnum", p.ll, p.add(ax, ax), p.k(88.0))
    e = p.call(inline_fn(p.mod, "exp", p.ll), p.ll, [(p.ll, t)])
    large = p.sub(p.k(1.0), p.div(p.k(2.0), p.add(e, p.k(1.0))))
    large = p.intr("copysign", p.ll, large, x)
    r = p.sel(p.cmp("olt", ax, p.k(0.625)), small, large)
    return p.sel(p.cmp("uno", x, x), x, r)


def _erf(p: _P, x: str) -> str:
    # N. Juffa's erff (max error ~1 ulp with an exact expf)
    t = p.intr("fabs", p.ll, x)
    s = p.mul(x, x)
    r = p.fma(p.k(-1.72853470e-5), t, p.k(3.83197126e-4))
    u = p.fma(p.k(-3.88396438e-3), t, p.k(2.42546219e-2))
    r = p.fma(r, s, u)
    for c in (-1.06777877e-1, -6.34846687e-1, -1.28717512e-1):
        r = p.fma(r, t, p.k(c))
    r = p.fma(r, t, p.fn.op(f"fneg {p.ll} {t}"))
    e = _exp_nonpositive(p, r)
    big = p.intr("copysign", p.ll, p.sub(p.k(1.0), e), x)
    sm = p.poly(s, [-5.96761703e-4, 4.99119423e-3, -2.67681349e-2, 1.12819925e-1,
                    -3.76125336e-1, 1.28379166e-1])
    sm = p.fma(sm, x, x)
    r = p.sel(p.cmp("ogt", t, p.k(0.927734375)), big, sm)
    return p.sel(p.cmp("uno", x, x), x, r)


_IMPLS = {"exp": _exp, "log": _log, "log1p": _log1p, "tanh": _tanh, "erf": _erf}
INLINE_F32 = frozenset(_IMPLS)


def inline_fn(mod: Module, op: str, ll: str) -> str:
    """The name of the inline helper for op on float type ll (float or <n x float>)."""
    return _helper(mod, op, ll, _IMPLS[op])

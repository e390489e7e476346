"""Helper functions a kernel may need, written once in C for all four dialects.

The emitter records what it uses (`needs`); `render` writes only those, in dependency order.
They pin down the IR's semantics where C leaves them open: integer division by zero gives 0
and INT_MIN / -1 wraps; float->int casts saturate with NaN -> 0; bf16 (and f16 where the
dialect has no usable half type) convert with round-to-nearest-even in integer arithmetic.
"""
from __future__ import annotations

from cube_ir.types import SCALARS

from .dialects import Dialect


def _f16_generic(d: Dialect, fn: str) -> str:
    u16, u32 = d.uint(16), d.uint(32)
    af, au = d.as_float(32, "{}"), d.as_uint(32, "{}")
    rint = d.math("rint", SCALARS["f32"])
    return f"""{fn} float cube_f16_to_f32({u16} h) {{
    {u32} s = ({u32})(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu) return {af.format("s | 0x7f800000u | (m << 13)")};
    if (e == 0u) {{ float r = (float)m * 5.9604644775390625e-8f; return s ? -r : r; }}
    return {af.format("s | ((e + 112u) << 23) | (m << 13)")};
}}
{fn} {u16} cube_f32_to_f16(float f) {{
    {u32} x = {au.format("f")}, s = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return ({u16})(s | 0x7e00u);
    if (ax >= 0x477ff000u) return ({u16})(s | 0x7c00u);
    if (ax < 0x38800000u)  /* a subnormal half: scale and round to an integer */
        return ({u16})(s | ({u32}){rint}({af.format("ax")} * 16777216.0f));
    return ({u16})(s | ((ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13));
}}"""


def _f16_ptx(d: Dialect, fn: str) -> str:
    return f"""{fn} float cube_f16_to_f32(unsigned short h) {{
    float r; asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h)); return r;
}}
{fn} unsigned short cube_f32_to_f16(float x) {{
    unsigned short r; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x)); return r;
}}"""


def _bf16(d: Dialect, fn: str) -> str:
    u16, u32 = d.uint(16), d.uint(32)
    widen = d.as_float(32, f"({u32})h << 16")
    return f"""{fn} float cube_bf16_to_f32({u16} h) {{ return {widen}; }}
{fn} {u16} cube_f32_to_bf16(float f) {{
    {u32} b = {d.as_uint(32, "f")};
    if ((b & 0x7fffffffu) > 0x7f800000u) return ({u16})(((b >> 16) & 0x8000u) | 0x7fc0u);
    return ({u16})((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}}
{fn} float cube_round_bf16(float x) {{ return cube_bf16_to_f32(cube_f32_to_bf16(x)); }}"""


def _divrem(d: Dialect, fn: str, t: str) -> str:
    e = SCALARS[t]
    c = d.reg(e)
    if e.is_signed:
        u = d.uint(max(e.bits, 32))
        return f"""{fn} {c} cube_div_{t}({c} a, {c} b) {{
    return b == 0 ? ({c})0 : b == -1 ? ({c})(({u})0 - ({u})a) : ({c})(a / b);
}}
{fn} {c} cube_rem_{t}({c} a, {c} b) {{ return (b == 0 || b == -1) ? ({c})0 : ({c})(a % b); }}"""
    return f"""{fn} {c} cube_div_{t}({c} a, {c} b) {{ return b == 0u ? ({c})0 : ({c})(a / b); }}
{fn} {c} cube_rem_{t}({c} a, {c} b) {{ return b == 0u ? ({c})0 : ({c})(a % b); }}"""


def _ipow(d: Dialect, fn: str, t: str) -> str:
    e = SCALARS[t]
    c, u = d.reg(e), d.uint(max(e.bits, 32))
    neg = ""
    if e.is_signed:
        neg = (f"    if (n < 0) return x == 1 ? ({c})1 : x == -1 ? ((n & 1) ? ({c})-1 : ({c})1)"
               f" : ({c})0;\n")
    return f"""{fn} {c} cube_pow_{t}({c} x, {c} n) {{
{neg}    {u} r = 1u, b = ({u})x;
    for ({u} k = ({u})n; k != 0u; k >>= 1) {{ if (k & 1u) r *= b; b *= b; }}
    return ({c})r;
}}"""


def _f2i(d: Dialect, fn: str, dst: str, src: str) -> str:
    de, se = SCALARS[dst], SCALARS[src]
    c, f = d.reg(de), d.reg(se)
    lo = -(2 ** (de.bits - 1)) if de.is_signed else 0
    hi = 2 ** (de.bits - 1 if de.is_signed else de.bits)  # first value out of range (exact)
    lo_c = f"({c})({lo + 1} - 1)" if de.is_signed else f"({c})0"
    return f"""{fn} {c} cube_f2i_{dst}_{src}({f} x) {{
    if (x != x) return ({c})0;
    if (x <= ({f}){lo}.0) return {lo_c};
    if (x >= ({f}){hi}.0) return ({c})({hi - 1}{'ull' if de.bits == 64 else 'u'});
    return ({c})x;
}}"""


def _msl_math(d: Dialect, fn: str) -> str:
    """log1p, expm1 (Kahan's corrections of u = 1 + x and u = e^x: a few ulp where log and
    exp are within 1) and hypot (max |x|, |y| times sqrt(1 + r^2), r = min / max <= 1: no
    overflow or underflow in between, within 2 ulp; inf if either is inf, NaN beside it
    included, as C's)."""
    return f"""{fn} float cube_log1p(float x) {{
    float u = 1.0f + x, m = u - 1.0f;
    if (m == 0.0f || isinf(x)) return x;
    return log(u) * x / m;
}}
{fn} float cube_expm1(float x) {{
    float u = exp(x), m = u - 1.0f;
    if (u == 1.0f) return x;
    if (m == -1.0f) return -1.0f;
    if (isinf(u)) return u;
    return m * (x / log(u));
}}
{fn} float cube_hypot(float x, float y) {{
    float ax = fabs(x), ay = fabs(y), hi = fmax(ax, ay), lo = fmin(ax, ay);
    if (isinf(ax) || isinf(ay)) return INFINITY;
    if ((as_type<uint>(ax) > 0x7f800000u) || (as_type<uint>(ay) > 0x7f800000u))
        return ax + ay;  /* a NaN (bit tests: Metal compiles with fast math) */
    if (lo == 0.0f) return hi;
    float r = lo / hi;
    return hi * sqrt(fma(r, r, 1.0f));
}}"""


def _erf(d: Dialect, fn: str, t: str) -> str:
    """erf for float or a float vector type t, max error ~1 ulp (N. Juffa's erff, both
    branches computed and selected, so it vectorises)."""
    def c(x: str) -> str:
        return d.splat(t, x)

    return f"""{fn} {t} cube_erf_{t}({t} x) {{
    {t} a = fabs(x), s = x * x, r, u, p;
    r = fma({c("-1.72853470e-5f")}, a, {c("3.83197126e-4f")});
    u = fma({c("-3.88396438e-3f")}, a, {c("2.42546219e-2f")});
    r = fma(r, s, u);
    r = fma(r, a, {c("-1.06777877e-1f")});
    r = fma(r, a, {c("-6.34846687e-1f")});
    r = fma(r, a, {c("-1.28717512e-1f")});
    r = fma(r, a, -a);
    r = copysign({c("1.0f")} - exp(r), x);
    p = {c("-5.96761703e-4f")};
    p = fma(p, s, {c("4.99119423e-3f")});
    p = fma(p, s, {c("-2.67681349e-2f")});
    p = fma(p, s, {c("1.12819925e-1f")});
    p = fma(p, s, {c("-3.76125336e-1f")});
    p = fma(p, s, {c("1.28379166e-1f")});
    p = fma(p, x, x);
    return select(p, r, a > {c("0.927734375f")});
}}"""


def _msl_cas(d: Dialect, fn: str) -> str:
    # a template over the pointer, so device and threadgroup memory share one definition
    return f"""template <typename P> {fn} uint cube_cas(P p, uint cmp, uint v) {{
    uint e = cmp;
    while (!atomic_compare_exchange_weak_explicit(p, &e, v, memory_order_relaxed,
                                                  memory_order_relaxed) && e == cmp) {{}}
    return e;
}}"""


_PLANE = """template <class T> FN T cube_op_apply(int op, T a, T b) {
    return op == 0 ? a + b : op == 1 ? a * b : op == 2 ? (a < b ? b : a) : (b < a ? b : a);
}
struct cube_op_sum { static constexpr int op = 0, id = 0; };
struct cube_op_prod { static constexpr int op = 1, id = 1; };
struct cube_op_max { static constexpr int op = 2, id = 0; };
struct cube_op_min { static constexpr int op = 3, id = 0; };
// Scans read lower lanes only, so a plane whose active units are a prefix (the last plane of
// a cube that is not a multiple of the plane size) is exact; reductions take the last
// active lane's scan.
template <class T, class Op> FN T cube_plane_inclusive(T v, unsigned lane, Op op) {
    auto cube_m = CUBE_MASK();
    for (unsigned d = 1; d < CUBE_PS; d <<= 1) {
        T t = CUBE_SHFL_UP(v, d);
        if (lane >= d) v = cube_op_apply(Op::op, v, t);
    }
    return v;
}
template <class T, class Op> FN T cube_plane_exclusive(T v, unsigned lane, Op op) {
    auto cube_m = CUBE_MASK();
    T x = CUBE_SHFL_UP(cube_plane_inclusive(v, lane, op), 1);
    return lane == 0 ? (T)Op::id : x;
}
template <class T, class Op> FN T cube_plane_reduce(T v, unsigned lane, Op op) {
    auto cube_m = CUBE_MASK();
    return CUBE_SHFL(cube_plane_inclusive(v, lane, op), (int)CUBE_LAST(cube_m));
}
template <class T> FN T cube_plane_shuffle(T v, unsigned src) {
    auto cube_m = CUBE_MASK();
    T r = CUBE_SHFL(v, (int)(src % CUBE_PS));
    return (src < CUBE_PS && ((cube_m >> src) & 1)) ? r : v;
}"""


def _plane(d: Dialect, fn: str, plane_size: int) -> str:
    return f"#undef CUBE_PS\n#define CUBE_PS {plane_size}u\n" + _PLANE.replace("FN", fn)


def render(d: Dialect, needs: dict, plane_size: int) -> str:
    fn = d.fn
    out = []
    for key in needs:
        kind, _, rest = key.partition(":")
        if kind == "f16":
            out.append(_f16_generic(d, fn))
        elif kind == "f16_ptx":
            out.append(_f16_ptx(d, fn))
        elif kind == "bf16":
            out.append(_bf16(d, fn))
        elif kind == "divrem":
            out.append(_divrem(d, fn, rest))
        elif kind == "pow":
            out.append(_ipow(d, fn, rest))
        elif kind == "f2i":
            out.append(_f2i(d, fn, *rest.split(":")))
        elif kind == "mslmath":
            out.append(_msl_math(d, fn))
        elif kind == "erf":
            out.append(_erf(d, fn, rest))
        elif kind == "mslcas":
            out.append(_msl_cas(d, fn))
        elif kind == "shfl":
            out.append(_plane(d, fn, plane_size))
        elif kind == "text":  # a helper the emitter wrote itself (atomics)
            out.append(needs[key])
    return "\n".join(out)

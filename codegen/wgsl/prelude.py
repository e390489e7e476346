"""WGSL helper functions, instantiated per concrete type on demand (WGSL has no generics).

The f32 math (exp, log, log1p, tanh, erf) is the same Cephes/Juffa code as the LLVM
backend's inline math, so results agree across targets to about 2 ulp instead of depending
on a driver's `exp` (Vulkan only promises 3 + 2|x| ulp, and lavapipe's tanh loses digits
near 0). Each template gets T (the float type), U/I (u32/i32 of the same lanes) and B (bool).
"""
from __future__ import annotations

INF, NAN = "bitcast<f32>(0x7f800000u)", "bitcast<f32>(0x7fc00000u)"


def _poly(x: str, coeffs: list[float]) -> str:
    y = f"T({coeffs[0]!r})"
    for c in coeffs[1:]:
        y = f"fma({y}, {x}, T({c!r}))"
    return y


ISNAN = "fn cube_isnan{S}(x: T) -> B { return (bitcast<U>(x) & U(0x7fffffffu)) > U(0x7f800000u); }"

EXP = """fn cube_exp{S}(x: T) -> T {
    let xc = min(max(x, T(-104.0)), T(89.0));
    let n = round(xc * T(1.44269504088896341));
    var r = fma(n, T(-0.693359375), xc);
    r = fma(n, T(2.12194440e-4), r);
    let z = r * r;
    var y = POLY_EXP;
    y = fma(y, z, r) + T(1.0);
    let ni = I(n);
    let n1 = ni >> U(1u);
    let n2 = ni - n1;
    y = y * bitcast<T>((n1 + I(127)) << U(23u)) * bitcast<T>((n2 + I(127)) << U(23u));
    return select(y, x, cube_isnan{S}(x));
}""".replace("POLY_EXP", _poly("r", [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
                                       4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1]))

LOG = """fn cube_log{S}(x: T) -> T {
    let sub = x < T(1.1754943508222875e-38);
    let xs = select(x, x * T(33554432.0), sub);
    let eoff = select(I(126), I(151), sub);
    let b = bitcast<U>(xs);
    let e0 = T(bitcast<I>(b >> U(23u)) - eoff);
    let m0 = bitcast<T>((b & U(0x007fffffu)) | U(0x3f000000u));
    let small = m0 < T(0.707106781186547524);
    let e = select(e0, e0 - T(1.0), small);
    let m = select(m0 - T(1.0), m0 + m0 - T(1.0), small);
    let z = m * m;
    var y = POLY_LOG;
    y = y * m * z;
    y = fma(e, T(-2.12194440e-4), y);
    y = fma(z, T(-0.5), y);
    var r = fma(e, T(0.693359375), m + y);
    r = select(r, T(INF), x == T(INF));
    r = select(r, -T(INF), x == T(0.0));
    r = select(r, T(NAN), x < T(0.0));
    return select(r, x, cube_isnan{S}(x));
}""".replace("POLY_LOG", _poly("m", [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1,
                                       -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
                                       2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1]))

LOG1P = """fn cube_log1p{S}(x: T) -> T {
    let u = T(1.0) + x;
    let d = u - T(1.0);
    var r = cube_log{S}(u) * x / d;
    r = select(r, x, d == T(0.0));
    return select(r, x, x == T(INF));
}"""

TANH = """fn cube_tanh{S}(x: T) -> T {
    let ax = abs(x);
    let z = x * x;
    let q = POLY_TANH;
    let small = fma(q * z, x, x);
    let e = cube_exp{S}(min(ax + ax, T(88.0)));
    let large = select(T(1.0), T(-1.0), x < T(0.0)) * (T(1.0) - T(2.0) / (e + T(1.0)));
    let r = select(large, small, ax < T(0.625));
    return select(r, x, cube_isnan{S}(x));
}""".replace("POLY_TANH", _poly("z", [-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2,
                                        1.33314422036e-1, -3.33332819422e-1]))

ERF = """fn cube_erf{S}(x: T) -> T {
    let t = abs(x);
    let s = x * x;
    var r = fma(T(-1.72853470e-5), t, T(3.83197126e-4));
    let u = fma(T(-3.88396438e-3), t, T(2.42546219e-2));
    r = fma(r, s, u);
    r = fma(r, t, T(-1.06777877e-1));
    r = fma(r, t, T(-6.34846687e-1));
    r = fma(r, t, T(-1.28717512e-1));
    r = fma(r, t, -t);
    let big = select(T(1.0), T(-1.0), x < T(0.0)) * (T(1.0) - cube_exp{S}(r));
    let sm = fma(POLY_ERF, x, x);
    let res = select(sm, big, t > T(0.927734375));
    return select(res, x, cube_isnan{S}(x));
}""".replace("POLY_ERF", _poly("s", [-5.96761703e-4, 4.99119423e-3, -2.67681349e-2,
                                       1.12819925e-1, -3.76125336e-1, 1.28379166e-1]))

# pow as numpy does it for real results: negative bases need an integer exponent (-inf
# does not: (-inf)^0.5 is inf); an odd exponent keeps the base's sign, -0 included
# ((-0)^-1 is -inf); a NaN operand gives NaN unless y is 0 or x is 1 (then 1), as is
# (-1)^(+-inf)
POW = """fn cube_pow{S}(x: T, y: T) -> T {
    let r = cube_exp{S}(y * cube_log{S}(abs(x)));
    let yint = y == trunc(y);
    let odd = yint & (abs(y - T(2.0) * trunc(y * T(0.5))) == T(1.0));
    let neg = (bitcast<U>(x) >> U(31u)) == U(1u);
    var res = select(r, -r, neg & odd);
    res = select(res, T(NAN), (x < T(0.0)) & !yint & (bitcast<U>(x) != U(0xff800000u)));
    res = select(res, x + y, cube_isnan{S}(x) | cube_isnan{S}(y));
    let one_inf = (abs(x) == T(1.0)) & ((bitcast<U>(y) & U(0x7fffffffu)) == U(0x7f800000u));
    return select(res, T(1.0), (y == T(0.0)) | (x == T(1.0)) | one_inf);
}"""

BF16 = """fn cube_bf16{S}(x: T) -> T {
    let b = bitcast<U>(x);
    let r = (b + U(0x7fffu) + ((b >> U(16u)) & U(1u))) & U(0xffff0000u);
    let q = (b | U(0x400000u)) & U(0xffff0000u);
    return bitcast<T>(select(r, q, cube_isnan{S}(x)));
}"""

# The functions WGSL lacks (log10, expm1, hypot, fmod, copysign) and those whose driver
# versions lose digits near 0 (sinh, asinh, atanh: lavapipe computes them from exp and log of
# values near 1), on the exp/log/log1p above. Bounds measured over dense sweeps against
# float64 (tests/cube/test_math_functions_more.py): log10 2 ulp, expm1 2, sinh 3, cosh 2,
# asinh 3, acosh 3, atanh 4, hypot 2, atan 2, atan2 3, asin 3, acos 3; fmod and copysign
# are exact.

# x copied with y's sign bit
COPYSIGN = """fn cube_copysign{S}(x: T, y: T) -> T {
    return bitcast<T>((bitcast<U>(x) & U(0x7fffffffu)) | (bitcast<U>(y) & U(0x80000000u)));
}"""

LOG10 = """fn cube_log10{S}(x: T) -> T {
    return cube_log{S}(x) * T(0.4342944819032518);
}"""

# lavapipe's log2 is within 2^-21 absolute only (35 ulp near 1)
LOG2 = """fn cube_log2{S}(x: T) -> T {
    return cube_log{S}(x) * T(1.4426950408889634);
}"""

# Kahan: u = e^x rounded; (u - 1) x / log(u) corrects its rounding error
EXPM1 = """fn cube_expm1{S}(x: T) -> T {
    let u = cube_exp{S}(x);
    let m = u - T(1.0);
    var r = m * (x / cube_log{S}(u));  // m x alone overflows near x = 88
    r = select(r, m, (m == T(-1.0)) | (u == T(INF)));
    return select(r, x, (u == T(1.0)) | cube_isnan{S}(x));
}"""

# (E + E / (E + 1)) / 2 with E = expm1(|x|) up to 9, (e^(|x|/2) / 2) e^(|x|/2) beyond, where
# e^|x| alone would overflow before sinh does
SINH = """fn cube_sinh{S}(x: T) -> T {
    let ax = abs(x);
    let e = cube_expm1{S}(min(ax, T(9.0)));
    let small = T(0.5) * (e + e / (e + T(1.0)));
    let h = cube_exp{S}(T(0.5) * ax);
    let r = select(small, (T(0.5) * h) * h, ax > T(9.0));
    return select(cube_copysign{S}(r, x), x, cube_isnan{S}(x));  // min(NaN, 9) may be 9
}"""

COSH = """fn cube_cosh{S}(x: T) -> T {
    let ax = abs(x);
    let e = cube_exp{S}(min(ax, T(9.0)));
    let small = T(0.5) * e + T(0.5) / e;
    let h = cube_exp{S}(T(0.5) * ax);
    return select(select(small, (T(0.5) * h) * h, ax > T(9.0)), x, cube_isnan{S}(x));
}"""

# log1p(|x| + x^2 / (1 + sqrt(1 + x^2))); log(|x|) + log 2 from 2^12 on (x^2 would overflow);
# x itself below 2^-12 (asinh and atanh round to it there)
ASINH = """fn cube_asinh{S}(x: T) -> T {
    let ax = abs(x);
    let s = min(ax, T(4096.0));
    let z = s * s;
    let small = cube_log1p{S}(s + z / (T(1.0) + sqrt(T(1.0) + z)));
    let big = cube_log{S}(ax) + T(0.6931471805599453);
    let r = select(select(small, big, ax > T(4096.0)), ax, ax < T(0.000244140625));
    return select(cube_copysign{S}(r, x), x, cube_isnan{S}(x));
}"""

# log1p(t + sqrt(2t + t^2)) with t = x - 1 (exact below 2); log(x) + log 2 from 2^12 on
ACOSH = """fn cube_acosh{S}(x: T) -> T {
    let t = min(x, T(4096.0)) - T(1.0);
    let small = cube_log1p{S}(t + sqrt(fma(t, t, t + t)));
    let big = cube_log{S}(x) + T(0.6931471805599453);
    let r = select(small, big, x > T(4096.0));
    return select(r, T(NAN), !(x >= T(1.0)));
}"""

# log1p(2|x| / (1 - |x|)) / 2: +-inf at +-1, NaN beyond
ATANH = """fn cube_atanh{S}(x: T) -> T {
    let ax = abs(x);
    var r = T(0.5) * cube_log1p{S}((ax + ax) / (T(1.0) - ax));
    r = select(r, ax, ax < T(0.000244140625));
    return cube_copysign{S}(select(r, T(NAN), ax > T(1.0)), x);
}"""

# max(|x|, |y|) sqrt(1 + r^2), r = min / max: nothing overflows or underflows in between
HYPOT = """fn cube_hypot{S}(x: T, y: T) -> T {
    let ax = abs(x);
    let ay = abs(y);
    let hi = max(ax, ay);
    let lo = min(ax, ay);
    let r = lo / select(hi, T(1.0), hi == T(0.0));
    var h = hi * sqrt(fma(r, r, T(1.0)));
    h = select(h, ax + ay, cube_isnan{S}(x) | cube_isnan{S}(y));
    return select(h, T(INF), (ax == T(INF)) | (ay == T(INF)));
}"""

# C's fmod, exact (WGSL's `%` is x - y * trunc(x / y), which loses every digit once x / y
# is large, and lavapipe's fma is not fused, so r - q y cannot be had in one rounding
# either): r = |x| less the largest |y| 2^k not above it, until r < |y|. Each subtraction
# is exact (Sterbenz: t <= r < 2t) and clears r's top bit, so it runs at most as many
# times as the exponent gap of x over y (24 for x / y below 2^24, 277 at worst).
FMOD = """fn cube_fmod{S}(x: T, y: T) -> T {
    let ay = abs(y);
    var r = abs(x);
    let bad = cube_isnan{S}(x) | cube_isnan{S}(y) | (r == T(INF)) | (ay == T(0.0));
    r = select(r, T(0.0), bad);
    for (var i = 0; i < 300; i++) {
        let go = r >= ay;
        if (!any(go)) { break; }
        var t = ldexp(ay, frexp(r).exp - frexp(ay).exp);
        t = select(t, t * T(0.5), t > r);
        r = select(r, r - t, go);
    }
    return select(cube_copysign{S}(r, x), T(NAN), bad);
}"""

# Cephes atanf (within 2 ulp): |x| reduced to [0, tan(pi/8)] by pi/4 or pi/2 steps, one
# odd polynomial; lavapipe's atan is within 1e-4 only
ATAN = """fn cube_atan{S}(x: T) -> T {
    let ax = abs(x);
    let big = ax > T(2.414213562373095);
    let mid = ax > T(0.4142135623730950);
    var z = select(ax, (ax - T(1.0)) / (ax + T(1.0)), mid);
    z = select(z, T(-1.0) / ax, big);
    let y0 = select(select(T(0.0), T(0.7853981633974483), mid), T(1.5707963267948966), big);
    let zz = z * z;
    let p = POLY_ATAN;
    return cube_copysign{S}(y0 + fma(p * zz, z, z), x);
}""".replace("POLY_ATAN", _poly("zz", [8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1,
                                         -3.33329491539e-1]))

# Python's quadrants and signed zeros: atan(|y| / |x|) (0 for two zeros, pi/4 for two
# infinities), pi less it where x's sign bit is set, y's sign
ATAN2 = """fn cube_atan2{S}(y: T, x: T) -> T {
    let ax = abs(x);
    let ay = abs(y);
    var a = cube_atan{S}(ay / ax);
    a = select(a, T(0.0), (ax == T(0.0)) & (ay == T(0.0)));
    a = select(a, T(0.7853981633974483), (ax == T(INF)) & (ay == T(INF)));
    a = select(a, T(3.1415926535897932) - a, (bitcast<U>(x) >> U(31u)) == U(1u));
    a = select(a, x + y, cube_isnan{S}(x) | cube_isnan{S}(y));
    return cube_copysign{S}(a, y);
}"""

ASIN = """fn cube_asin{S}(x: T) -> T {
    return cube_atan2{S}(x, sqrt((T(1.0) - x) * (T(1.0) + x)));
}"""

ACOS = """fn cube_acos{S}(x: T) -> T {
    return cube_atan2{S}(sqrt((T(1.0) - x) * (T(1.0) + x)), x);
}"""

DEPS = {"exp": ["isnan"], "log": ["isnan"], "log1p": ["log"], "tanh": ["exp"],
        "erf": ["exp"], "pow": ["exp", "log"], "bf16": ["isnan"], "isnan": [],
        "copysign": [], "log10": ["log"], "log2": ["log"], "expm1": ["exp", "log"],
        "sinh": ["expm1", "copysign", "isnan"], "cosh": ["exp", "isnan"],
        "asinh": ["log1p", "copysign", "isnan"],
        "acosh": ["log1p"], "atanh": ["log1p", "copysign"], "hypot": ["isnan"],
        "fmod": ["isnan", "copysign"], "atan": ["copysign"],
        "atan2": ["atan", "isnan"], "asin": ["atan2"], "acos": ["atan2"]}
TEMPLATES = {"isnan": ISNAN, "exp": EXP, "log": LOG, "log1p": LOG1P, "tanh": TANH,
             "erf": ERF, "pow": POW, "bf16": BF16, "copysign": COPYSIGN, "log10": LOG10,
             "log2": LOG2, "expm1": EXPM1, "sinh": SINH, "cosh": COSH, "asinh": ASINH,
             "acosh": ACOSH,
             "atanh": ATANH, "hypot": HYPOT, "fmod": FMOD, "atan": ATAN, "atan2": ATAN2,
             "asin": ASIN, "acos": ACOS}


def float_helper(name: str, lanes: int, out: dict) -> str:
    """Instantiate cube_<name> for f32 (lanes 1) or vec<lanes><f32> into out; its name."""
    suffix = "" if lanes == 1 else f"_v{lanes}"
    fname = f"cube_{name}{suffix}"
    if fname in out:
        return fname
    for dep in DEPS[name]:
        float_helper(dep, lanes, out)

    def ty(s: str) -> str:
        return s if lanes == 1 else f"vec{lanes}<{s}>"
    text = TEMPLATES[name].replace("{S}", suffix).replace("INF", INF).replace("NAN", NAN)
    for k, v in (("T", "f32"), ("U", "u32"), ("I", "i32"), ("B", "bool")):
        text = _subst(text, k, ty(v))
    out[fname] = text
    return fname


def _subst(text: str, k: str, v: str) -> str:
    """Replace the type placeholder k where it stands alone (T(...), : T, -> T, <T>)."""
    import re
    return re.sub(rf"(?<![A-Za-z0-9_]){k}(?![A-Za-z0-9_])", v, text)


def int_pow(t: str, signed: bool, out: dict) -> str:
    """Square-and-multiply integer pow for the scalar int type t (i32/u32)."""
    fname = f"cube_ipow_{t}"
    if fname in out:
        return fname
    neg = ("    if (n < 0i) {\n        if (x == 1i) { return 1i; }\n"
           "        if (x == -1i) { return select(1i, -1i, (n & 1i) == 1i); }\n"
           "        return 0i;\n    }\n") if signed else ""
    out[fname] = (f"fn {fname}(x: {t}, n: {t}) -> {t} {{\n{neg}"
                  f"    var acc = {t}(1);\n    var base = x;\n    var e = n;\n"
                  f"    loop {{\n        if (e == {t}(0)) {{ break; }}\n"
                  f"        if ((e & {t}(1)) == {t}(1)) {{ acc = acc * base; }}\n"
                  f"        base = base * base;\n        e = e >> 1u;\n    }}\n"
                  f"    return acc;\n}}")
    return fname

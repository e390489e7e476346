"""torch's elementwise math beyond the core ops: tan, the inverse trigonometric and
hyperbolic functions, log2/log10/exp2/expm1, trunc, erfc, deg2rad/rad2deg, logit, sgn and
signbit, float_power, fmax/fmin, heaviside and ldexp, with torch's aliases (arcsin ...,
fix).

Each is declared as the core elementwise ops are (dl/ops/elementwise.py's `unary` and
`binary`: the math in the kernel builder's calls, here mostly one of the kernel language's
math ops, `ir.unary("tan", x)`; the gradient in dl ops), so each is one lazy node that fuses.
Gradients are PyTorch's formulas (derivatives.yaml), evaluated as PyTorch evaluates them,
so the domain edges give PyTorch's inf and nan (asin'(1) is inf, acosh'(0.5) nan, atanh'(2)
the finite -1/3 of PyTorch's 1 / (1 - x^2))."""
from __future__ import annotations

import math

from .. import dtypes
from ..autograd import record
from ..autograd.tape import needs_grad
from ..fusion import elementwise
from ..tensor import Tensor
from .common import is_tensor
from .creation import zeros_like
from .elementwise import (
    DTypeError,
    _binary,
    _declare,
    _emits,
    _float_of,
    _isnan,
    _op_doc,
    _poly,
    _unary,
    _zero_grad,
    cast,
    check_dtype,
    exp,
    isnan,
    maximum,
    minimum,
    pow,
    rsqrt,
    sign,
    unary,
    where,
)
from .registry import add_method, register

# the ops declared here (the declarations append to it), exported by dl.ops and dl
__all__: list[str] = []

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


def _alias(fn, *names: str) -> None:
    """torch's other names for an op: each in dl.ops.OPS, dl and as a Tensor method."""
    g = globals()
    for n in names:
        register(n)(fn)
        add_method(n)
        g[n] = fn
        __all__.append(n)


def _math_op(name: str):
    """The kernel language's math op `name`, applied to the element (the op's whole math)."""
    def math_fn(ir, x):
        return ir.unary(name, x)
    math_fn.__name__ = name
    return math_fn


# ---- the kernel language's math functions: one op each -------------------------------------
def _tan_grad(g, x, y):
    return g * (y * y + 1.0)


def _asin_grad(g, x, y):
    return g * rsqrt(-x * x + 1.0)


def _acos_grad(g, x, y):
    return g * -rsqrt(-x * x + 1.0)


def _atan_grad(g, x, y):
    return g / (x * x + 1.0)


def _sinh_grad(g, x, y):
    return g * cosh(x)


def _cosh_grad(g, x, y):
    return g * sinh(x)


def _asinh_grad(g, x, y):
    return g * rsqrt(x * x + 1.0)


def _acosh_grad(g, x, y):
    return g * rsqrt(x * x - 1.0)


def _atanh_grad(g, x, y):
    return g / (1.0 - x * x)


def _log2_grad(g, x, y):
    return g / (x * _LN2)


def _log10_grad(g, x, y):
    return g / (x * _LN10)


def _exp2_grad(g, x, y):
    return g * y * _LN2


def _expm1_grad(g, x, y):
    return g * (y + 1.0)


_DOCS = {
    "tan": "The tangent (radians), elementwise. Its gradient is PyTorch's, g (1 + tan^2 x).",
    "asin": "The arcsine, elementwise, in [-pi/2, pi/2]; nan outside [-1, 1]. Its gradient "
            "is PyTorch's, g / sqrt(1 - x^2): inf at +-1, nan outside.",
    "acos": "The arccosine, elementwise, in [0, pi]; nan outside [-1, 1]. Its gradient is "
            "PyTorch's, -g / sqrt(1 - x^2): -inf at +-1, nan outside.",
    "atan": "The arctangent, elementwise, in [-pi/2, pi/2]. Its gradient is g / (1 + x^2).",
    "sinh": "The hyperbolic sine, elementwise. Its gradient is g cosh(x).",
    "cosh": "The hyperbolic cosine, elementwise. Its gradient is g sinh(x).",
    "asinh": "The inverse hyperbolic sine, elementwise. Its gradient is g / sqrt(x^2 + 1).",
    "acosh": "The inverse hyperbolic cosine, elementwise; nan below 1. Its gradient is "
             "PyTorch's, g / sqrt(x^2 - 1): inf at 1, nan below.",
    "atanh": "The inverse hyperbolic tangent, elementwise; +-inf at +-1, nan outside [-1, "
             "1]. Its gradient is PyTorch's, g / (1 - x^2) (inf at +-1, finite outside).",
    "log2": "The base-2 logarithm, elementwise (-inf at 0, nan below). Its gradient is "
            "g / (x ln 2).",
    "log10": "The base-10 logarithm, elementwise (-inf at 0, nan below). Its gradient is "
             "g / (x ln 10).",
    "exp2": "2 raised to x, elementwise. Its gradient is g 2^x ln 2.",
    "expm1": "exp(x) - 1, elementwise, accurate for small x. Its gradient is g (expm1(x) + "
             "1).",
}
_GRADS = {"tan": _tan_grad, "asin": _asin_grad, "acos": _acos_grad, "atan": _atan_grad,
          "sinh": _sinh_grad, "cosh": _cosh_grad, "asinh": _asinh_grad,
          "acosh": _acosh_grad, "atanh": _atanh_grad, "log2": _log2_grad,
          "log10": _log10_grad, "exp2": _exp2_grad, "expm1": _expm1_grad}

for _name, _doc in _DOCS.items():
    _m = _math_op(_name)
    _m.__doc__ = _doc
    _m.__module__ = __name__
    globals()[_name] = unary(grad=_GRADS[_name])(_m)

tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, log2, log10, exp2, expm1 = (
    globals()[n] for n in _DOCS)
for _name, _torch in (("asin", "arcsin"), ("acos", "arccos"), ("atan", "arctan"),
                      ("asinh", "arcsinh"), ("acosh", "arccosh"), ("atanh", "arctanh")):
    _alias(globals()[_name], _torch)


def _trunc_math(ir, x):
    """x rounded toward zero, elementwise (-0.0 for -0.5, as C's trunc). Its gradient is 0,
    as PyTorch's."""
    return ir.unary("trunc", x)


_emits("trunc", _trunc_math)
_trunc = _unary("trunc", False, _zero_grad)


def trunc(x: Tensor) -> Tensor:
    check_dtype("trunc", x.dtype, "no_bool")
    return _trunc(x) if x.dtype.is_float else x.clone()


trunc.__doc__ = _op_doc(_trunc_math, "t.trunc()", [
    "The result keeps the input's dtype; an integer tensor is returned as a copy, a bool "
    "tensor refused (a DTypeError), as PyTorch's.", "Its gradient is 0."])
_declare(trunc, "trunc", __name__)
_alias(trunc, "fix")


# ---- erfc: Cephes' rational forms, exp(-x^2) without the rounding of x^2 -------------------
# erfc(x) = exp(-x^2) P(x) / Q(x) on [1, 8), exp(-x^2) R(x) / S(x) from 8 (Cephes ndtr.c,
# Q and S with a leading 1); 1 - erf(x) below 1; 2 - erfc(-x) for negative x
_ERFC_P = (2.46196981473530512524e-10, 5.64189564831068821977e-1, 7.46321056442269912687e0,
           4.86371970985681366614e1, 1.96520832956077098242e2, 5.26445194995477358631e2,
           9.34528527171957607540e2, 1.02755188689515710272e3, 5.57535335369399327526e2)
_ERFC_Q = (1.32281951154744992508e1, 8.67072140885989742329e1, 3.54937778887819891062e2,
           9.75708501743205489753e2, 1.82390916687909736289e3, 2.24633760818710981792e3,
           1.65666309194161350182e3, 5.57535340817727675546e2)
_ERFC_R = (5.64189583547755073984e-1, 1.27536670759978104416e0, 5.01905042251180477414e0,
           6.16021097993053585195e0, 7.40974269950448939160e0, 2.97886665372100240670e0)
_ERFC_S = (2.26052863220117276590e0, 9.39603524938001434673e0, 1.20489539808096656605e1,
           1.70814450747565897222e1, 9.60896809063285878198e0, 3.36907645100081516050e0)


def _exp_neg_square(ir, a):
    """exp(-a^2) for a >= 0 without the rounding error of a^2 (Cephes' expx2): a = h + l
    with h a multiple of 1/128 (h^2 exact in f32 below 2^5), exp(-h^2) exp(-l (a + h))."""
    h = ir.mul(ir.unary("floor", ir.mul(a, 128.0)), 1.0 / 128.0)
    lo = ir.mul(ir.sub(a, h), ir.add(a, h))
    return ir.mul(ir.unary("exp", ir.unary("neg", ir.mul(h, h))),
                  ir.unary("exp", ir.unary("neg", lo)))


def _erfc_grad(g, x, y):
    return g * exp(-(x * x)) * (-2.0 / math.sqrt(math.pi))


@unary(grad=_erfc_grad)
def erfc(ir, x):
    """The complementary error function, 1 - erf(x), elementwise, accurate where it is tiny
    (erfc(10) is 2.1e-45; Cephes' rational forms from 1 on, 1 - erf(x) below). Its
    gradient is PyTorch's, -2 / sqrt(pi) exp(-x^2) g."""
    a = ir.unary("abs", x)
    e = _exp_neg_square(ir, a)
    mid = ir.div(ir.mul(e, _poly(ir, a, _ERFC_P)), _poly(ir, a, _ERFC_Q, lead_one=True))
    far = ir.div(ir.mul(e, _poly(ir, a, _ERFC_R)), _poly(ir, a, _ERFC_S, lead_one=True))
    far = ir.select(ir.binary("lt", a, 64.0), far, 0.0)  # 0 there (R / S overflows)
    r = ir.select(ir.binary("lt", a, 8.0), mid, far)
    r = ir.select(ir.binary("lt", x, 0.0), ir.sub(2.0, r), r)
    r = ir.select(ir.binary("lt", a, 1.0), ir.sub(1.0, ir.unary("erf", x)), r)
    return ir.select(_isnan(ir, x), x, r)


# ---- scalings ------------------------------------------------------------------------------
_D2R = math.pi / 180.0
_R2D = 180.0 / math.pi


@unary(grad=lambda g, x, y: g * _D2R)
def deg2rad(ir, x):
    """Degrees to radians, x * (pi / 180), elementwise, as PyTorch's. Its gradient is
    g pi / 180."""
    return ir.mul(x, _D2R)


@unary(grad=lambda g, x, y: g * _R2D)
def rad2deg(ir, x):
    """Radians to degrees, x * (180 / pi), elementwise, as PyTorch's. Its gradient is
    g 180 / pi."""
    return ir.mul(x, _R2D)


# ---- logit ---------------------------------------------------------------------------------
def _logit_math(ir, x, *bounds):
    if bounds:  # eps: x clamped to [eps, 1 - eps] first (nan stays nan), as PyTorch's
        lo, hi = bounds
        x = ir.select(ir.binary("lt", x, lo), lo, ir.select(ir.binary("gt", x, hi), hi, x))
    return ir.unary("log", ir.div(x, ir.sub(1.0, x)))


_emits("logit", _logit_math)


def logit(x: Tensor, eps: float | None = None) -> Tensor:
    """log(x / (1 - x)), elementwise: -inf at 0, inf at 1, nan outside [0, 1], as PyTorch's.

    eps: x is clamped to [eps, 1 - eps] first (None, or a negative eps: no clamp, as
    PyTorch's). Integer and bool tensors give float32. Its gradient is PyTorch's,
    g / (x (1 - x)): nan outside [0, 1] without eps, 0 outside [eps, 1 - eps] with it.
    Lazy: it fuses with neighbouring elementwise ops into one kernel. Also `t.logit(eps)`."""
    dt = _float_of(x.dtype)
    clamp = eps is not None and eps >= 0
    bounds = (float(eps), 1.0 - float(eps)) if clamp else ()
    y = elementwise("logit", [x, *bounds], [dt.compute] * (1 + len(bounds)), dt)
    if not needs_grad(x):
        return y

    def back(g):
        d = g / (x * (1.0 - x))
        if clamp:
            return (where((x < bounds[0]) | (x > bounds[1]), 0.0, d),)
        return (where((x < 0.0) | (x > 1.0), math.nan, d),)
    return record(y, "logit", (x,), back)


_declare(logit, "logit", __name__)


# ---- signs ---------------------------------------------------------------------------------
_alias(sign, "sgn")


def _signbit_math(ir, x):
    if x.type.is_float:  # -0.0 and a nan with its sign bit set count, as PyTorch's
        return ir.binary("lt", ir.binary("copysign", ir.const(1.0, x.type), x), 0.0)
    return ir.binary("lt", x, 0)


_emits("signbit", _signbit_math)


def signbit(x: Tensor) -> Tensor:
    """A bool tensor: True where x's sign bit is set (x < 0, -0.0, a negative nan), as
    PyTorch's; never for bool tensors. Not differentiable. Lazy: it fuses with neighbouring
    elementwise ops into one kernel. Also `t.signbit()`."""
    if x.dtype is dtypes.bool_:
        return zeros_like(x, dtype=dtypes.bool_)
    return elementwise("signbit", [x], [x.dtype.compute], dtypes.bool_)


_declare(signbit, "signbit", __name__)


# ---- float_power ---------------------------------------------------------------------------
def float_power(input, exponent) -> Tensor:  # noqa: A002
    """input ** exponent computed in float64 whatever the operands' dtypes (a float64
    result), as PyTorch's float_power. Either may be a Python scalar. Differentiable (pow's
    gradient in float64, cast back to each input's dtype). Also `t.float_power(e)` and
    `t.float_power_(e)` (the tensor must be float64, as PyTorch's)."""
    def f64(v):
        return cast(v, dtypes.float64) if is_tensor(v) else float(v)
    if not is_tensor(input) and not is_tensor(exponent):
        raise TypeError("float_power: expected a tensor operand")
    return pow(f64(input), f64(exponent))


_declare(float_power, "float_power", __name__)


# ---- fmax / fmin: a nan operand gives the other ----------------------------------------------
def _fmax_math(ir, x, y):
    """The larger of a and b, elementwise, ignoring nan: a nan operand gives the other (two
    nans: nan), as PyTorch's fmax (C's fmax)."""
    return _nan_other(ir, x, y, ir.binary("max", x, y))


def _fmin_math(ir, x, y):
    """The smaller of a and b, elementwise, ignoring nan: a nan operand gives the other (two
    nans: nan), as PyTorch's fmin (C's fmin)."""
    return _nan_other(ir, x, y, ir.binary("min", x, y))


def _nan_other(ir, x, y, r):
    return ir.select(_isnan(ir, x), y, ir.select(_isnan(ir, y), x, r))


def _fminmax(name: str, math_fn, keep, bools):
    """The op: PyTorch's gradient (a takes g where keep(a, b) or b is nan, so a tie's goes
    to a; b takes the rest); two bools give bools (bools(a, b): or / and)."""
    _emits(name, math_fn)

    def grad(g, a, b, y):
        if is_tensor(b):
            to_a = keep(a, b) | isnan(b)
        else:
            to_a = None if math.isnan(b) else keep(a, b)
        ga = (g if to_a is None else where(to_a, g, 0.0)) if is_tensor(a) else None
        gb = (zeros_like(g) if to_a is None else where(to_a, 0.0, g)) if is_tensor(b) \
            else None
        return ga, gb

    def fn(a, b):
        if is_tensor(a) and is_tensor(b) and a.dtype is b.dtype is dtypes.bool_:
            return bools(a, b)
        return _binary(name, "arith", a, b, grad)
    fn.__doc__ = _op_doc(math_fn, f"a.{name}(b)", [
        "a and b are tensors or Python scalars; they broadcast (NumPy rules).",
        "The result has the promoted dtype (two bools stay bool).",
        "Differentiable in its tensor operands (a tie's gradient goes to a, as PyTorch's)."])
    return _declare(fn, name, __name__)


fmax = _fminmax("fmax", _fmax_math, lambda a, b: a >= b, maximum)
fmin = _fminmax("fmin", _fmin_math, lambda a, b: a <= b, minimum)


# ---- heaviside / ldexp ---------------------------------------------------------------------
def _heaviside_math(ir, x, v):
    if x.type.is_bool:  # x ? true : v
        return ir.binary("or", x, v)
    step = ir.select(ir.binary("gt", x, 0), ir.const(1, x.type), ir.const(0, x.type))
    return ir.select(ir.binary("eq", x, 0), v, step)


_emits("heaviside", _heaviside_math)


def heaviside(input, values) -> Tensor:  # noqa: A002
    """The Heaviside step, elementwise: 0 where input < 0, values where input == 0 (-0.0
    too), 1 where input > 0; 0 where input is nan (as PyTorch's, which compares). Two
    tensors must have the same dtype (a DTypeError otherwise, as PyTorch's); values may be
    a Python scalar. The result has input's dtype. Not differentiable (PyTorch's is not).
    Lazy: it fuses with neighbouring elementwise ops into one kernel. Also
    `t.heaviside(values)`."""
    if is_tensor(input) and is_tensor(values) and input.dtype is not values.dtype:
        raise DTypeError("heaviside is not yet implemented for tensors with different dtypes "
                         f"({input.dtype.name} and {values.dtype.name}), as in PyTorch")
    return _binary("heaviside", "bitwise", input, values)


_declare(heaviside, "heaviside", __name__)


def _ldexp_grad(g, a, b, y):
    """PyTorch's (a * 2^b): g 2^b for a (an integer b: no gradient of its own)."""
    return g * exp2(cast(b, g.dtype)) if is_tensor(b) else g * _pow2(b), None


def _pow2(b) -> float:
    try:
        return 2.0 ** b
    except OverflowError:
        return math.inf


def _ldexp_math(ir, x, e):
    """x * 2^e for an integral e, in two steps (2^(e/2) twice), so that a small x times a
    2^e beyond the type's range is still exact, as PyTorch's integer exponents."""
    h = ir.unary("trunc", ir.mul(e, 0.5))
    return ir.mul(ir.mul(x, ir.unary("exp2", h)), ir.unary("exp2", ir.sub(e, h)))


_emits("ldexp", _ldexp_math)


def ldexp(input, other) -> Tensor:  # noqa: A002
    """input * 2^other, elementwise, in the promoted float dtype (integers give float32), as
    PyTorch's ldexp: integer exponents exactly (a float32 1e-30 times 2^200 is 1.6e30); a
    float exponent as PyTorch's `input * pow(2, other)`, 2^other rounded to other's dtype
    first (a float16 exponent of 20 gives inf). other may be a Python number.
    Differentiable (g 2^other for input; g * result * ln 2 for a float other). Lazy: it
    fuses with neighbouring elementwise ops into one kernel. Also `t.ldexp(other)`."""
    if is_tensor(other) and other.dtype.is_float:
        return input * exp2(other)
    if isinstance(other, float):
        return input * _pow2(other)
    return _binary("ldexp", "float", input, other, _ldexp_grad)


_declare(ldexp, "ldexp", __name__)


add_method("arctan2")  # torch's Tensor.arctan2 (atan2's alias, registered with it)

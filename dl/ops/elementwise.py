"""Elementwise ops (unary, binary, where, clamp, casts) and their gradients.

Each op records one lazy node (see dl/fusion); its gradient is written with the same ops,
so backward chains fuse as well. Broadcast gradients are summed back with `sum_to`."""
from __future__ import annotations

import math

from .. import dtypes
from ..autograd import record
from ..fusion import elementwise
from ..tensor import Tensor
from .common import is_tensor, result_type
from .reduce import sum_to
from .registry import register

F = dtypes.default_float


def _float_of(t: dtypes.DType) -> dtypes.DType:
    return t if t.is_float else F


def _unary_node(op, x: Tensor, dtype, attrs=()) -> Tensor:
    return elementwise(op, [x], [dtype.compute], dtype, attrs=attrs)


def _unary(op, float_only: bool, grad=None, attrs=()):
    def fn(x: Tensor) -> Tensor:
        dt = _float_of(x.dtype) if float_only else x.dtype
        y = _unary_node(op, x, dt, attrs)
        if grad is not None and dt.is_float:
            record(y, op, (x,), lambda g: (grad(g, x, y),))
        return y
    fn.__name__ = op
    return fn


def _zero_grad(g, x, y):
    return zeros_like_(x)


def zeros_like_(x):
    from .creation import zeros_like
    return zeros_like(x)


_SQRT_2_PI = 1.0 / math.sqrt(2.0 * math.pi)
_K = math.sqrt(2.0 / math.pi)


def _gelu_grad(g, x, y):
    cdf = 0.5 * (1.0 + erf(x * 0.7071067811865476))
    pdf = exp(x * x * -0.5) * _SQRT_2_PI
    return g * (cdf + x * pdf)


def _gelu_tanh_grad(g, x, y):
    x2 = x * x
    t = tanh((x + x2 * x * 0.044715) * _K)
    dt = (1.0 - t * t) * ((1.0 + x2 * (3 * 0.044715)) * _K)
    return g * (0.5 * (1.0 + t) + 0.5 * x * dt)


def _silu_grad(g, x, y):
    s = sigmoid(x)
    return g * (s * (1.0 + x * (1.0 - s)))


neg = register("neg")(_unary("neg", False, lambda g, x, y: -g))
abs = register("abs")(_unary("abs", False, lambda g, x, y: g * sign(x)))  # noqa: A001
sqrt = register("sqrt")(_unary("sqrt", True, lambda g, x, y: g / (y * 2.0)))
rsqrt = register("rsqrt")(_unary("rsqrt", True, lambda g, x, y: g * (y * y * y) * -0.5))
exp = register("exp")(_unary("exp", True, lambda g, x, y: g * y))
log = register("log")(_unary("log", True, lambda g, x, y: g / x))
log1p = register("log1p")(_unary("log1p", True, lambda g, x, y: g / (x + 1.0)))
sin = register("sin")(_unary("sin", True, lambda g, x, y: g * cos(x)))
cos = register("cos")(_unary("cos", True, lambda g, x, y: -(g * sin(x))))
tanh = register("tanh")(_unary("tanh", True, lambda g, x, y: g * (1.0 - y * y)))
erf = register("erf")(_unary(
    "erf", True, lambda g, x, y: g * exp(-(x * x)) * (2.0 / math.sqrt(math.pi))))
sigmoid = register("sigmoid")(_unary("sigmoid", True, lambda g, x, y: g * (y * (1.0 - y))))
relu = register("relu")(_unary("relu", False, lambda g, x, y: where(x > 0, g, 0.0)))
silu = register("silu")(_unary("silu", True, _silu_grad))
sign = register("sign")(_unary("sign", False, _zero_grad))
_gelu = _unary("gelu", True, _gelu_grad)
_gelu_tanh = _unary("gelu", True, _gelu_tanh_grad, attrs=("tanh",))


@register("gelu")
def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu approximate must be 'none' or 'tanh', got {approximate!r}")
    return _gelu_tanh(x) if approximate == "tanh" else _gelu(x)


def _rounding(op):
    f = _unary(op, False, _zero_grad)

    def fn(x):
        return f(x) if x.dtype.is_float else clone_(x)
    fn.__name__ = op
    return fn


def clone_(x):
    from .shape import clone
    return clone(x)


floor = register("floor")(_rounding("floor"))
ceil = register("ceil")(_rounding("ceil"))
round = register("round")(_rounding("round"))  # noqa: A001


@register("square")
def square(x):
    return mul(x, x)


@register("reciprocal")
def reciprocal(x):
    return div(1.0, x)


# ---- binary --------------------------------------------------------------------------------
def _binary(op, kind, a, b, grad=None) -> Tensor:
    if not is_tensor(a) and not is_tensor(b):
        from .creation import tensor
        a = tensor(a)
    pt = result_type(a, b)
    if kind == "arith":
        out = dtypes.int64 if pt is dtypes.bool_ else pt
        ins = (out.compute, out.compute)
    elif kind == "float":  # true division and pow compute in floats
        out = _float_of(pt)
        ins = (out.compute, out.compute)
    elif kind == "compare":
        out, ins = dtypes.bool_, (pt.compute, pt.compute)
    else:  # logical
        out, ins = dtypes.bool_, (dtypes.bool_, dtypes.bool_)
    y = elementwise(op, [a, b], list(ins), out)
    if grad is not None and out.is_float:
        tensors = (a if is_tensor(a) else None, b if is_tensor(b) else None)

        def back(g):
            ga, gb = grad(g, a, b, y)
            return (None if tensors[0] is None or ga is None else sum_to(ga, a.shape),
                    None if tensors[1] is None or gb is None else sum_to(gb, b.shape))
        record(y, op, tensors, back)
    return y


@register("add")
def add(a, b, alpha=None):
    if alpha is not None:
        b = mul(b, alpha)
    return _binary("add", "arith", a, b, lambda g, a, b, y: (g, g))


@register("sub")
def sub(a, b, alpha=None):
    if alpha is not None:
        b = mul(b, alpha)
    return _binary("sub", "arith", a, b, lambda g, a, b, y: (g, -g))


@register("mul")
def mul(a, b):
    return _binary("mul", "arith", a, b, lambda g, a, b, y: (
        g * b if is_tensor(a) else None, g * a if is_tensor(b) else None))


@register("div", "true_divide")
def div(a, b):
    return _binary("div", "float", a, b, lambda g, a, b, y: (
        g / b if is_tensor(a) else None, -(g * y) / b if is_tensor(b) else None))


@register("pow")
def pow(a, b):  # noqa: A001
    def grad(g, a, b, y):
        ga = g * b * (a ** (b - 1)) if is_tensor(a) else None
        gb = g * y * log(a) if is_tensor(b) else None
        return ga, gb
    return _binary("pow", "float", a, b, grad)


def _minmax_grad(gt):
    def grad(g, a, b, y):  # ties split the gradient in half, as in PyTorch
        half = g * 0.5
        ga = where(gt(a, b), g, where(eq(a, b), half, 0.0)) if is_tensor(a) else None
        gb = where(gt(b, a), g, where(eq(a, b), half, 0.0)) if is_tensor(b) else None
        return ga, gb
    return grad


@register("maximum")
def maximum(a, b):
    return _binary("maximum", "arith", a, b, _minmax_grad(gt))


@register("minimum")
def minimum(a, b):
    return _binary("minimum", "arith", a, b, _minmax_grad(lt))


def _cmp(op):
    def fn(a, b):
        return _binary(op, "compare", a, b)
    fn.__name__ = op
    return register(op)(fn)


eq, ne, lt, le, gt, ge = (_cmp(o) for o in ("eq", "ne", "lt", "le", "gt", "ge"))


def _logical(op):
    def fn(a, b):
        return _binary(op, "logical", a, b)
    fn.__name__ = op
    return register(op)(fn)


logical_and, logical_or, logical_xor = (_logical(o) for o in
                                        ("logical_and", "logical_or", "logical_xor"))


@register("logical_not")
def logical_not(x):
    return _unary_node("logical_not", x.to(dtypes.bool_) if x.dtype is not dtypes.bool_
                       else x, dtypes.bool_)


# ---- where / clamp -------------------------------------------------------------------------
@register("where")
def where(cond, a, b):
    if not is_tensor(cond):
        raise TypeError("where(cond, a, b): cond must be a tensor")
    if not is_tensor(a) and not is_tensor(b):
        out = result_type(_scalar_ref(a), b)
    else:
        out = result_type(a, b)
    c = cond if cond.dtype is dtypes.bool_ else ne(cond, 0)
    y = elementwise("where", [c, a, b], [dtypes.bool_, out.compute, out.compute], out)
    if out.is_float:
        ta, tb = a if is_tensor(a) else None, b if is_tensor(b) else None
        record(y, "where", (ta, tb), lambda g: (
            None if ta is None else sum_to(where(c, g, 0.0), ta.shape),
            None if tb is None else sum_to(where(c, 0.0, g), tb.shape)))
    return y


def _scalar_ref(a):
    from .creation import tensor
    return tensor(a)


def _clamp_side(op, x, bound, keep):
    out = result_type(x, bound)
    y = elementwise(op, [x, bound], [out.compute, out.compute], out)
    if out.is_float:
        tb = bound if is_tensor(bound) else None
        record(y, op, (x, tb), lambda g: (
            sum_to(where(keep(x, bound), g, 0.0), x.shape),
            None if tb is None else sum_to(where(keep(x, bound), 0.0, g), tb.shape)))
    return y


@register("clamp_min")
def clamp_min(x, min):  # noqa: A002
    return _clamp_side("clamp_min", x, min, ge)


@register("clamp_max")
def clamp_max(x, max):  # noqa: A002
    return _clamp_side("clamp_max", x, max, le)


@register("clamp", "clip")
def clamp(x, min=None, max=None):  # noqa: A002
    if min is None and max is None:
        raise ValueError("clamp needs min or max")
    if min is not None:
        x = clamp_min(x, min)
    if max is not None:
        x = clamp_max(x, max)
    return x


# ---- casts ---------------------------------------------------------------------------------
def cast(x: Tensor, dtype) -> Tensor:
    dtype = dtypes.get(dtype)
    if dtype == x.dtype:
        return x
    y = elementwise("cast", [x], [x.dtype.compute], dtype)
    if dtype.is_float and x.dtype.is_float:
        src = x.dtype
        record(y, "cast", (x,), lambda g: (cast(g, src),))
    return y

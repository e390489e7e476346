"""Elementwise special functions, as torch's: logaddexp, logaddexp2, xlogy, copysign, frac,
sinc. Each is declared as the core elementwise ops are (dl/ops/elementwise.py's `unary` and
`binary`: the math in the kernel builder's calls, the gradient in dl ops), so each is one
lazy node that fuses, and its gradient is PyTorch's formula (derivatives.yaml), special
points included."""
from __future__ import annotations

import math

from .common import is_tensor
from .creation import zeros_like
from .elementwise import (
    _declare,
    _emits,
    _isnan,
    _unary,
    binary,
    check_dtype,
    cos,
    exp,
    sin,
    unary,
    where,
)

# the ops declared here (the declarations append to it), exported by dl.ops and dl
__all__: list[str] = []

_LN2 = math.log(2.0)


def _logaddexp_math(ir, x, y, scale: float):
    """m + log1p(exp(-|x - y| * scale)) / scale with m = max(x, y) (scale ln 2: base 2),
    as PyTorch's; equal infinities give themselves (their difference is nan)."""
    m = ir.select(ir.binary("gt", y, x), y, x)
    e = ir.unary("exp", ir.mul(ir.unary("neg", ir.unary("abs", ir.sub(x, y))), scale))
    lg = ir.unary("log1p", e)
    r = ir.add(m, lg if scale == 1.0 else ir.div(lg, scale))
    same_inf = ir.binary("and", ir.binary("eq", x, y),
                         ir.binary("eq", ir.unary("abs", x), float("inf")))
    r = ir.select(same_inf, x, r)
    return ir.select(ir.binary("or", _isnan(ir, x), _isnan(ir, y)), ir.add(x, y), r)


def _logaddexp_grad(g, a, b, y):
    return (g / (1.0 + exp(b - a)) if is_tensor(a) else None,
            g / (1.0 + exp(a - b)) if is_tensor(b) else None)


@binary("float", _logaddexp_grad, accepts="float")
def logaddexp(ir, x, y):
    """log(exp(a) + exp(b)), elementwise, without overflow: max(a, b) + log1p(exp(-|a - b|)),
    as PyTorch's (two equal infinities give themselves). Float tensors only, as PyTorch's;
    Python scalar operands are taken too (PyTorch wants tensors). Its gradient is PyTorch's,
    g / (1 + exp(b - a)) (nan where both are the same infinity)."""
    return _logaddexp_math(ir, x, y, 1.0)


def _logaddexp2_grad(g, a, b, y):
    return (g / (1.0 + 2.0 ** (b - a)) if is_tensor(a) else None,
            g / (1.0 + 2.0 ** (a - b)) if is_tensor(b) else None)


@binary("float", _logaddexp2_grad, accepts="float")
def logaddexp2(ir, x, y):
    """log2(2**a + 2**b), elementwise, without overflow: max(a, b) + log1p(2**-|a - b|) /
    ln 2, as PyTorch's. Float tensors only, as PyTorch's; Python scalar operands are taken
    too. Its gradient is PyTorch's, g / (1 + 2**(b - a))."""
    return _logaddexp_math(ir, x, y, _LN2)


def _xlogy_grad(g, a, b, y):
    """PyTorch's: xlogy(g, b) for a, 0 where a is 0 and b <= 0; g * a / b for b."""
    ga = None
    if is_tensor(a):
        ga = xlogy(g, b)
        if is_tensor(b):
            ga = where((a == 0) & (b <= 0), 0.0, ga)
        elif b <= 0:
            ga = where(a == 0, 0.0, ga)
    gb = g * a / b if is_tensor(b) else None
    return ga, gb


@binary("float", _xlogy_grad)
def xlogy(ir, x, y):
    """a * log(b), elementwise, 0 where a is 0 (log(b) infinite or not) unless b is nan, as
    PyTorch's xlogy (scipy's convention)."""
    r = ir.select(ir.binary("eq", x, 0.0), 0.0, ir.mul(x, ir.unary("log", y)))
    return ir.select(_isnan(ir, y), y, r)


def _copysign_grad(g, a, b, y):
    """PyTorch's: g * y / a for a, 0 where a is 0; zeros for b."""
    ga = g * where(a == 0, 0.0, y / a) if is_tensor(a) else None
    return ga, zeros_like(b, dtype=g.dtype) if getattr(b, "requires_grad", False) else None


@binary("float", _copysign_grad)
def copysign(ir, x, y):
    """|a| with the sign of b, elementwise: the sign bit of b, so -0.0 and a negative nan
    count as negative, as PyTorch's (the kernel language's copysign)."""
    return ir.binary("copysign", x, y)


def _frac_math(ir, x):
    """x - trunc(x)."""
    t = ir.select(ir.binary("lt", x, 0.0), ir.unary("ceil", x), ir.unary("floor", x))
    return ir.sub(x, t)


_emits("frac", _frac_math)
_frac = _unary("frac", False, lambda g, x, y: g)


def frac(x):
    """The fractional part of x, x - trunc(x), elementwise, with x's sign (nan for
    infinities), as PyTorch's. Float tensors only (integer and bool tensors are refused, a
    DTypeError, as PyTorch's). Its gradient is g. Lazy: it fuses with neighbouring
    elementwise ops into one kernel. Also `t.frac()`."""
    check_dtype("frac", x.dtype, "float")
    return _frac(x)


_declare(frac, "frac", __name__)


def _sinc_grad(g, x, y):
    """PyTorch's sinc_backward: (pi x cos(pi x) - sin(pi x)) / (pi x^2), 0 where pi x^2 is."""
    xpi = x * math.pi
    den = x * x * math.pi
    return where(den == 0, 0.0, g * (xpi * cos(xpi) - sin(xpi)) / den)


@unary(grad=_sinc_grad)
def sinc(ir, x):
    """The normalised sinc, sin(pi x) / (pi x), elementwise; 1 at 0, as PyTorch's."""
    px = ir.mul(x, math.pi)
    return ir.select(ir.binary("eq", x, 0.0), 1.0, ir.div(ir.unary("sin", px), px))


"""Elementwise ops (unary, binary, where, clamp, casts): each declared once, here, with its
math and its gradient.

    @unary(grad=lambda g, x, y: g * (1.0 - y * y))
    def tanh(ir, x):                    # the math: cube_ir builder calls, in the compute type
        return ir.unary("tanh", x)

One declaration gives the fused kernels their emitter (dl/fusion/emit_ops.py's table), the
op in `dl.ops` and `dl` (through `__all__`), the Tensor method and operators, and the tape
entry (`grad(g, x, y)` from the output's gradient g, the input x and the output y). Each op
records one lazy node (see dl/fusion); its gradient is written with the same ops, so
backward chains fuse as well. Broadcast gradients are summed back with `sum_to`."""
from __future__ import annotations

import inspect
import math
import textwrap

from cube_ir.types import i32, with_elem

from .. import dtypes
from ..autograd import record
from ..fusion import elementwise
from ..fusion.emit_ops import emitter
from ..tensor import Tensor
from .common import is_tensor, result_type
from .creation import tensor, zeros_like
from .reduce import sum_to
from .registry import register

F = dtypes.default_float

# the ops declared here, exported by dl.ops (and dl); the declarations below append to it
__all__ = ["cast"]


def _float_of(t: dtypes.DType) -> dtypes.DType:
    return t if t.is_float else F


def _unary_node(op, x: Tensor, dtype, attrs=()) -> Tensor:
    return elementwise(op, [x], [dtype.compute], dtype, attrs=attrs)


def _emits(name: str, math_fn) -> None:
    """The fused kernels compute `name` with math_fn(builder, *inputs, *node attrs)."""
    emitter(name)(lambda ctx, node, a: math_fn(ctx.b, *a, *node.attrs))


# the operators a declaration binds, as its docstring shows them
_OPERATORS = {
    "__neg__": "-t", "__abs__": "abs(t)", "__invert__": "~t", "__add__": "a + b",
    "__radd__": "2 + a", "__sub__": "a - b", "__rsub__": "2 - a", "__mul__": "a * b",
    "__rmul__": "2 * a", "__truediv__": "a / b", "__rtruediv__": "2 / a",
    "__pow__": "a ** b", "__rpow__": "2 ** a", "__eq__": "a == b", "__ne__": "a != b",
    "__lt__": "a < b", "__le__": "a <= b", "__gt__": "a > b", "__ge__": "a >= b",
    "__and__": "a & b", "__rand__": "True & a", "__or__": "a | b", "__ror__": "True | a",
    "__xor__": "a ^ b",
}


def _op_doc(math_fn, call: str, notes: list[str], dunders=(), aliases=()) -> str | None:
    """A declared op's docstring: the declaration's own (the math function's docstring: what
    the op computes), then notes made from the declaration (dtypes, gradient, method and
    operators, aliases). None when the declaration has no docstring, so that
    tests/test_public_docstrings.py names the op. Set once, at declaration."""
    if not (math_fn.__doc__ or "").strip():
        return None
    also = [f"`{call}`"] + [f"`{_OPERATORS.get(d, d)}`" for d in dunders if d]
    also += [f"`dl.ops.OPS[{a!r}]`" for a in aliases]
    notes = [*notes, "Lazy: it fuses with neighbouring elementwise ops into one kernel.",
             "Also " + ", ".join(also) + "."]
    return inspect.cleandoc(math_fn.__doc__) + "\n\n" + textwrap.fill(" ".join(notes), 92)


def _declare(fn, name: str, **exposed):
    fn.__name__ = fn.__qualname__ = name
    register(name, *exposed.pop("aliases", ()), method=True, **exposed)(fn)
    __all__.append(name)
    return fn


def _unary(op, float_only: bool, grad=None, attrs=()):
    def fn(x: Tensor) -> Tensor:
        dt = _float_of(x.dtype) if float_only else x.dtype
        y = _unary_node(op, x, dt, attrs)
        if grad is not None and dt.is_float:
            record(y, op, (x,), lambda g: (grad(g, x, y),))
        return y
    fn.__name__ = op
    return fn


def unary(float_only: bool = True, grad=None, rounding: bool = False, dunder=None):
    """Declares the unary elementwise op named as the decorated math function.
    float_only: integer inputs give float32 (`exp`); otherwise the input's type (`abs`).
    grad(g, x, y): the input's gradient (float results only; None: not differentiable).
    rounding: integer inputs are returned as a copy (`floor`). dunder: its operator."""
    def wrap(math_fn):
        name = math_fn.__name__
        _emits(name, math_fn)
        f = _unary(name, float_only, grad)
        if rounding:
            def fn(x):
                return f(x) if x.dtype.is_float else x.clone()
        else:
            fn = f
        notes = ["Integer and bool tensors give float32; others keep their dtype."
                 if float_only else "The result keeps the input's dtype."]
        if rounding:
            notes.append("An integer tensor is returned as a copy.")
        notes.append("Not differentiable." if grad is None else "Its gradient is 0."
                     if grad is _zero_grad else "Differentiable.")
        fn.__doc__ = _op_doc(math_fn, f"t.{name}()", notes, (dunder,))
        return _declare(fn, name, dunder=dunder)
    return wrap


def _zero_grad(g, x, y):
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


# ---- unary ---------------------------------------------------------------------------------
@unary(float_only=False, grad=lambda g, x, y: -g, dunder="__neg__")
def neg(ir, x):
    """Negation, -x, elementwise."""
    return ir.unary("neg", x)


@unary(float_only=False, grad=lambda g, x, y: g * sign(x), dunder="__abs__")
def abs(ir, x):  # noqa: A001
    """Absolute value, elementwise. Its gradient is sign(x) (0 at 0, as PyTorch's)."""
    return ir.unary("abs", x)


@unary(grad=lambda g, x, y: g / (y * 2.0))
def sqrt(ir, x):
    """Square root, elementwise (nan for negative inputs)."""
    return ir.unary("sqrt", x)


@unary(grad=lambda g, x, y: g * (y * y * y) * -0.5)
def rsqrt(ir, x):
    """Reciprocal square root, 1 / sqrt(x), elementwise."""
    return ir.unary("rsqrt", x)


@unary(grad=lambda g, x, y: g * y)
def exp(ir, x):
    """e raised to x, elementwise."""
    return ir.unary("exp", x)


@unary(grad=lambda g, x, y: g / x)
def log(ir, x):
    """Natural logarithm, elementwise (-inf at 0, nan below)."""
    return ir.unary("log", x)


@unary(grad=lambda g, x, y: g / (x + 1.0))
def log1p(ir, x):
    """log(1 + x), elementwise, accurate for small x."""
    return ir.unary("log1p", x)


@unary(grad=lambda g, x, y: g * cos(x))
def sin(ir, x):
    """Sine (radians), elementwise."""
    return ir.unary("sin", x)


@unary(grad=lambda g, x, y: -(g * sin(x)))
def cos(ir, x):
    """Cosine (radians), elementwise."""
    return ir.unary("cos", x)


@unary(grad=lambda g, x, y: g * (1.0 - y * y))
def tanh(ir, x):
    """Hyperbolic tangent, elementwise."""
    return ir.unary("tanh", x)


@unary(grad=lambda g, x, y: g * exp(-(x * x)) * (2.0 / math.sqrt(math.pi)))
def erf(ir, x):
    """The error function, elementwise."""
    return ir.unary("erf", x)


@unary(grad=lambda g, x, y: g * (y * (1.0 - y)))
def sigmoid(ir, x):
    """The logistic function 1 / (1 + exp(-x)), elementwise."""
    return ir.div(1.0, ir.add(1.0, ir.unary("exp", ir.unary("neg", x))))


@unary(float_only=False, grad=lambda g, x, y: where(x > 0, g, 0.0))
def relu(ir, x):
    """max(x, 0), elementwise. Its gradient is 0 at x = 0, as PyTorch's."""
    return ir.select(ir.binary("gt", x, 0), x, 0)


@unary(grad=lambda g, x, y: g * sigmoid(x))
def softplus(ir, x):  # log(1 + e^x); x itself above 20, as PyTorch's (beta 1, threshold 20)
    """log(1 + exp(x)), elementwise; x itself where x > 20.

    PyTorch's defaults beta=1, threshold=20, which this op does not take as arguments."""
    return ir.select(ir.binary("gt", x, 20.0), x, ir.unary("log1p", ir.unary("exp", x)))


@unary(grad=_silu_grad)
def silu(ir, x):
    """x * sigmoid(x) (the swish), elementwise."""
    return ir.div(x, ir.add(1.0, ir.unary("exp", ir.unary("neg", x))))


@unary(float_only=False, grad=_zero_grad)
def sign(ir, x):
    """-1, 0 or 1 by the sign of x, elementwise, in x's dtype (0 for nan)."""
    i = with_elem(x.type, i32)  # i32 constants, as lines where x is one
    pos = ir.select(ir.binary("gt", x, 0), ir.const(1, i), ir.const(0, i))
    return ir.select(ir.binary("lt", x, 0), ir.const(-1, i), pos)


@unary(float_only=False, grad=_zero_grad, rounding=True)
def floor(ir, x):
    """The largest integral value <= x, elementwise."""
    return ir.unary("floor", x)


@unary(float_only=False, grad=_zero_grad, rounding=True)
def ceil(ir, x):
    """The smallest integral value >= x, elementwise."""
    return ir.unary("ceil", x)


@unary(float_only=False, grad=_zero_grad, rounding=True)
def round(ir, x):  # noqa: A001
    """x rounded to the nearest integer, ties to even (as PyTorch and NumPy), elementwise.

    No `decimals` argument."""
    return ir.unary("round", x)


def _gelu_math(ir, x, approximate="none"):
    if approximate == "tanh":
        inner = ir.mul(math.sqrt(2.0 / math.pi),
                       ir.add(x, ir.mul(0.044715, ir.mul(x, ir.mul(x, x)))))
        return ir.mul(ir.mul(0.5, x), ir.add(1.0, ir.unary("tanh", inner)))
    return ir.mul(ir.mul(0.5, x), ir.add(1.0, ir.unary("erf", ir.mul(x, 0.7071067811865476))))


_emits("gelu", _gelu_math)  # one op, two kernels: the approximation is a node attribute
_gelu = _unary("gelu", True, _gelu_grad)
_gelu_tanh = _unary("gelu", True, _gelu_tanh_grad, attrs=("tanh",))


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU, x * Phi(x) with Phi the standard normal CDF, elementwise.

    approximate: "none" (exact, through erf) or "tanh" (PyTorch's tanh approximation).
    Integer tensors give float32. Differentiable; lazy (fuses). Also `t.gelu()`."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu approximate must be 'none' or 'tanh', got {approximate!r}")
    return _gelu_tanh(x) if approximate == "tanh" else _gelu(x)


_declare(gelu, "gelu")


def square(x):
    """x * x, elementwise, in x's dtype (bool gives int64). Differentiable; lazy (fuses).
    Also `t.square()`."""
    return mul(x, x)


def reciprocal(x):
    """1 / x, elementwise; integer tensors give float32. Differentiable; lazy (fuses).
    Also `t.reciprocal()`."""
    return div(1.0, x)


_declare(square, "square")
_declare(reciprocal, "reciprocal")


# ---- binary --------------------------------------------------------------------------------
def _binary(op, kind, a, b, grad=None) -> Tensor:
    if not is_tensor(a) and not is_tensor(b):
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


def binary(kind: str, grad=None, alpha: bool = False, aliases=(), dunder=None, rdunder=None):
    """Declares the binary elementwise op named as the decorated math function.
    kind: "arith" (the promoted type; bool + bool is int64), "float" (true division, pow),
    "compare" or "logical" (bool results). grad(g, a, b, y): the operands' gradients (a pair,
    None where an operand is a scalar or takes none), summed back over broadcast dims.
    alpha: the op takes `alpha` (b * alpha first). aliases: more names in dl.ops.
    dunder / rdunder: its operator and reflected operator (`2 - t` is `sub(2, t)`)."""
    def wrap(math_fn):
        name = math_fn.__name__
        _emits(name, math_fn)
        if alpha:
            def fn(a, b, alpha=None):
                if alpha is not None:
                    b = mul(b, alpha)
                return _binary(name, kind, a, b, grad)
        else:
            def fn(a, b):
                return _binary(name, kind, a, b, grad)
        notes = ["a and b are tensors or Python scalars; they broadcast (NumPy rules).",
                 _KIND_NOTES[kind]]
        if alpha:
            notes.append("`alpha` multiplies b first, as PyTorch's.")
        notes.append("Not differentiable." if grad is None else "Differentiable in its tensor "
                     "operands (gradients summed back over broadcast dims).")
        fn.__doc__ = _op_doc(math_fn, f"a.{name}(b)", notes, (dunder, rdunder), aliases)
        return _declare(fn, name, aliases=aliases, dunder=dunder, rdunder=rdunder)
    return wrap


_KIND_NOTES = {
    "arith": "The result has the promoted dtype (docs/dl.md: a Python scalar is weak, it "
             "never widens a tensor's type within its category); bool with bool gives int64.",
    "float": "The result is float: the promoted dtype, float32 for integer or bool operands.",
    "compare": "The result is bool; the operands compare in their promoted dtype.",
    "logical": "The operands are taken as bools (non-zero is true); the result is bool.",
}


@binary("arith", lambda g, a, b, y: (g, g), alpha=True, dunder="__add__", rdunder="__radd__")
def add(ir, x, y):
    """a + alpha * b, elementwise."""
    return ir.binary("add", x, y)


@binary("arith", lambda g, a, b, y: (g, -g), alpha=True, dunder="__sub__", rdunder="__rsub__")
def sub(ir, x, y):
    """a - alpha * b, elementwise."""
    return ir.binary("sub", x, y)


@binary("arith", lambda g, a, b, y: (g * b if is_tensor(a) else None,
                                     g * a if is_tensor(b) else None),
        dunder="__mul__", rdunder="__rmul__")
def mul(ir, x, y):
    """a * b, elementwise."""
    return ir.binary("mul", x, y)


@binary("float", lambda g, a, b, y: (g / b if is_tensor(a) else None,
                                     -(g * y) / b if is_tensor(b) else None),
        aliases=("true_divide",), dunder="__truediv__", rdunder="__rtruediv__")
def div(ir, x, y):
    """True division a / b, elementwise.

    No `rounding_mode` argument: floor the result for floor division."""
    return ir.binary("div", x, y)


def _pow_grad(g, a, b, y):
    ga = g * b * (a ** (b - 1)) if is_tensor(a) else None
    gb = g * y * log(a) if is_tensor(b) else None
    return ga, gb


@binary("float", _pow_grad, dunder="__pow__", rdunder="__rpow__")
def pow(ir, x, y):  # noqa: A001
    """a raised to the power b, elementwise.

    Computed in floats: integer operands give float32, unlike PyTorch's integer pow."""
    return ir.binary("pow", x, y)


def _minmax_grad(greater):
    def grad(g, a, b, y):  # ties split the gradient in half, as in PyTorch
        half = g * 0.5
        ga = where(greater(a, b), g, where(eq(a, b), half, 0.0)) if is_tensor(a) else None
        gb = where(greater(b, a), g, where(eq(a, b), half, 0.0)) if is_tensor(b) else None
        return ga, gb
    return grad


@binary("arith", _minmax_grad(lambda a, b: gt(a, b)))
def maximum(ir, x, y):
    """The larger of a and b, elementwise; ties share the gradient, as PyTorch's."""
    return ir.binary("max", x, y)


@binary("arith", _minmax_grad(lambda a, b: lt(a, b)))
def minimum(ir, x, y):
    """The smaller of a and b, elementwise; ties share the gradient, as PyTorch's."""
    return ir.binary("min", x, y)


@binary("compare", dunder="__eq__")
def eq(ir, x, y):
    """a == b, elementwise."""
    return ir.binary("eq", x, y)


@binary("compare", dunder="__ne__")
def ne(ir, x, y):
    """a != b, elementwise."""
    return ir.binary("ne", x, y)


@binary("compare", dunder="__lt__")
def lt(ir, x, y):
    """a < b, elementwise."""
    return ir.binary("lt", x, y)


@binary("compare", dunder="__le__")
def le(ir, x, y):
    """a <= b, elementwise."""
    return ir.binary("le", x, y)


@binary("compare", dunder="__gt__")
def gt(ir, x, y):
    """a > b, elementwise."""
    return ir.binary("gt", x, y)


@binary("compare", dunder="__ge__")
def ge(ir, x, y):
    """a >= b, elementwise."""
    return ir.binary("ge", x, y)


@binary("logical", dunder="__and__", rdunder="__rand__")
def logical_and(ir, x, y):
    """Logical a and b, elementwise."""
    return ir.binary("and", x, y)


@binary("logical", dunder="__or__", rdunder="__ror__")
def logical_or(ir, x, y):
    """Logical a or b, elementwise."""
    return ir.binary("or", x, y)


@binary("logical", dunder="__xor__")
def logical_xor(ir, x, y):
    """Logical a xor b, elementwise."""
    return ir.binary("xor", x, y)


def logical_not(x):
    """Logical not, elementwise: a bool tensor, True where x is 0 (False).

    Any dtype (non-zero is true). Not differentiable; lazy (fuses). Also `t.logical_not()`
    and `~t` (on every dtype: unlike PyTorch, `~` on an integer tensor is logical, not
    bitwise)."""
    return _unary_node("logical_not", x.to(dtypes.bool_) if x.dtype is not dtypes.bool_
                       else x, dtypes.bool_)


_emits("logical_not", lambda ir, x: ir.unary("not", x))
_declare(logical_not, "logical_not", dunder="__invert__")


# ---- where / clamp -------------------------------------------------------------------------
def where(cond, a, b):
    """a where cond is true, else b, elementwise (cond, a and b broadcast).

    cond: a tensor (non-bool ones are compared with 0). a, b: tensors or Python scalars;
    the result has their promoted dtype. Differentiable in a and b (float results); lazy
    (fuses). Also `cond.where(a, b)`: the tensor is the condition, unlike PyTorch's
    `x.where(cond, y)`."""
    if not is_tensor(cond):
        raise TypeError("where(cond, a, b): cond must be a tensor")
    if not is_tensor(a) and not is_tensor(b):
        out = result_type(tensor(a), b)
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


_emits("where", lambda ir, c, x, y: ir.select(c, x, y))
_declare(where, "where")


def _clamp_side(op, x, bound, keep):
    out = result_type(x, bound)
    y = elementwise(op, [x, bound], [out.compute, out.compute], out)
    if out.is_float:
        tb = bound if is_tensor(bound) else None
        record(y, op, (x, tb), lambda g: (
            sum_to(where(keep(x, bound), g, 0.0), x.shape),
            None if tb is None else sum_to(where(keep(x, bound), 0.0, g), tb.shape)))
    return y


def clamp_min(x, min):  # noqa: A002
    """max(x, min), elementwise; min is a tensor (broadcast) or a Python scalar.

    The result has the promoted dtype of x and min. The gradient goes to x where x >= min,
    else to a tensor min. Lazy (fuses). Also `t.clamp_min(min)`."""
    return _clamp_side("clamp_min", x, min, ge)


def clamp_max(x, max):  # noqa: A002
    """min(x, max), elementwise; max is a tensor (broadcast) or a Python scalar.

    The result has the promoted dtype of x and max. The gradient goes to x where x <= max,
    else to a tensor max. Lazy (fuses). Also `t.clamp_max(max)`."""
    return _clamp_side("clamp_max", x, max, le)


_emits("clamp_min", lambda ir, x, lo: ir.select(ir.binary("lt", x, lo), lo, x))
_emits("clamp_max", lambda ir, x, hi: ir.select(ir.binary("gt", x, hi), hi, x))
_declare(clamp_min, "clamp_min")
_declare(clamp_max, "clamp_max")


def clamp(x, min=None, max=None):  # noqa: A002
    """x limited to [min, max], elementwise: clamp_min then clamp_max.

    Either bound may be None (not both); each is a tensor or a Python scalar. With
    min > max the result is max, as PyTorch's. Differentiable; lazy (fuses). Also
    `t.clamp(min, max)`; registered too as "clip" (`dl.ops.OPS["clip"]`)."""
    if min is None and max is None:
        raise ValueError("clamp needs min or max")
    if min is not None:
        x = clamp_min(x, min)
    if max is not None:
        x = clamp_max(x, max)
    return x


_declare(clamp, "clamp", aliases=("clip",))


# ---- casts ---------------------------------------------------------------------------------
def cast(x: Tensor, dtype) -> Tensor:
    """x converted to `dtype`; x itself if it already has that dtype.

    dtype: a dl dtype, its name ("float16"), a NumPy or a torch dtype.
    Float to int truncates toward zero and saturates at the type's range (nan gives 0), as
    cube kernels' casts (PyTorch leaves out-of-range results undefined). Differentiable
    between float dtypes; lazy (fuses). `t.to(dtype)` and `t.float()`... call it."""
    dtype = dtypes.get(dtype)
    if dtype == x.dtype:
        return x
    y = elementwise("cast", [x], [x.dtype.compute], dtype)
    if dtype.is_float and x.dtype.is_float:
        src = x.dtype
        record(y, "cast", (x,), lambda g: (cast(g, src),))
    return y

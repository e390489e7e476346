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

import dis
import functools
import inspect
import math
import sys
import textwrap

import numpy as np

from cube_ir.types import i32, with_elem

from .. import dtypes
from ..autograd import no_grad, record, saved_output
from ..autograd.tape import needs_grad
from ..fusion import elementwise
from ..fusion.emit_ops import emitter
from ..tensor import Tensor
from .common import is_tensor, result_type
from .creation import tensor, zeros_like
from .reduce import sum_to
from .registry import register, tensor_method

F = dtypes.default_float

# the ops declared here, exported by dl.ops (and dl); the declarations below append to it
__all__ = ["cast"]


def _float_of(t: dtypes.DType) -> dtypes.DType:
    return t if t.is_float else F


@functools.cache
def _reads_output(grad) -> bool:
    """Whether a declared gradient grad(g, ..., y) reads its last argument, the op's output
    (which it then gets as `saved_output`'s alias: an object per op call, spared where the
    gradient does not read it, as add's and mul's). A closure capturing it counts as a read."""
    code = grad.__code__
    name = code.co_varnames[code.co_argcount - 1]
    return name in code.co_cellvars or any(
        ins.opname.startswith("LOAD_FAST") and ins.argval == name
        for ins in dis.get_instructions(code))


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
    "__xor__": "a ^ b", "__rxor__": "True ^ a", "__mod__": "a % b", "__rmod__": "2 % a",
    "__floordiv__": "a // b", "__rfloordiv__": "2 // a", "__lshift__": "a << b",
    "__rshift__": "a >> b", "__rlshift__": "1 << a", "__rrshift__": "8 >> a",
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


def _declare(fn, name: str, module: str = __name__, **exposed):
    """Registers the op `name` (and its method) and exports it from `module`'s `__all__`:
    the module whose declaration it is (dl/ops/elementwise_special.py declares more ops with
    this module's decorators)."""
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = module
    register(name, *exposed.pop("aliases", ()), method=True, **exposed)(fn)
    sys.modules[module].__all__.append(name)
    return fn


def _unary(op, float_only: bool, grad=None, attrs=(), no_bool: str | None = None):
    def fn(x: Tensor) -> Tensor:
        if no_bool is not None:
            check_dtype(op, x.dtype, "no_bool", no_bool)
        dt = _float_of(x.dtype) if float_only else x.dtype
        y = _unary_node(op, x, dt, attrs)
        if grad is not None and dt.is_float and needs_grad(x):
            ys = saved_output(y) if _reads_output(grad) else None
            record(y, op, (x,), lambda g: (grad(g, x, ys),), saved=ys)
        return y
    fn.__name__ = op
    return fn


def unary(float_only: bool = True, grad=None, rounding: bool = False, dunder=None,
          no_bool: str | None = None):
    """Declares the unary elementwise op named as the decorated math function.
    float_only: integer inputs give float32 (`exp`); otherwise the input's type (`abs`).
    grad(g, x, y): the input's gradient (float results only; None: not differentiable).
    rounding: integer inputs are returned as a copy (`floor`). dunder: its operator.
    no_bool: a bool input is refused (a DTypeError, as PyTorch's), this text ending the
    message; the math has no bool form."""
    def wrap(math_fn):
        name = math_fn.__name__
        _emits(name, math_fn)
        f = _unary(name, float_only, grad, no_bool=no_bool)
        if rounding:
            def fn(x):
                return f(x) if x.dtype.is_float else x.clone()
        else:
            fn = f
        notes = ["Integer and bool tensors give float32; others keep their dtype."
                 if float_only else "The result keeps the input's dtype."]
        if no_bool is not None:
            notes.append("A bool tensor is refused, as in PyTorch.")
        if rounding:
            notes.append("An integer tensor is returned as a copy.")
        notes.append("Not differentiable." if grad is None else "Its gradient is 0."
                     if grad is _zero_grad else "Differentiable.")
        fn.__doc__ = _op_doc(math_fn, f"t.{name}()", notes, (dunder,))
        return _declare(fn, name, math_fn.__module__, dunder=dunder)
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
@unary(float_only=False, grad=lambda g, x, y: -g, dunder="__neg__",
       no_bool=" (to invert a mask, use ~ or logical_not())")
def neg(ir, x):
    """Negation, -x, elementwise."""
    return ir.unary("neg", x)


@unary(float_only=False, grad=lambda g, x, y: g * sign(x), dunder="__abs__", no_bool="")
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


def relu_grad(g: Tensor, y: Tensor) -> Tensor:
    """relu's input gradient from its output y, as torch's threshold_backward: 0 where
    y <= 0, else g (a nan output passes g on). One lazy node: `where(y > 0, g, 0.0)` was two
    ops' Python (~10 us a relu in a training step's backward) and gave 0 at a nan."""
    dt = y.dtype
    return elementwise("relu_grad", [g, y], [dt.compute, dt.compute], dt)


_emits("relu_grad", lambda ir, g, y: ir.select(ir.binary("le", y, 0), 0, g))


@unary(float_only=False, grad=lambda g, x, y: relu_grad(g, y), no_bool="")
def relu(ir, x):
    """max(x, 0), elementwise: nan and -0.0 pass through, as PyTorch's. Its gradient is 0
    at x = 0, as PyTorch's."""
    return ir.select(ir.binary("lt", x, 0), 0, x)


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
    if x.type.is_bool:  # a bool is its own sign (SPIR-V has no ordering on bools)
        return x
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
    """x * x, elementwise, in x's dtype (bool gives int64, as PyTorch's). Differentiable;
    lazy (fuses). Also `t.square()`."""
    if is_tensor(x) and x.dtype is dtypes.bool_:
        x = cast(x, dtypes.int64)
    return mul(x, x)


def reciprocal(x):
    """1 / x, elementwise; integer tensors give float32. Differentiable; lazy (fuses).
    Also `t.reciprocal()`."""
    return div(1.0, x)


_declare(square, "square")
_declare(reciprocal, "reciprocal")


# ---- binary --------------------------------------------------------------------------------
class DTypeError(TypeError, RuntimeError):
    """An op given a dtype it does not take (a TypeError, and a RuntimeError as PyTorch's)."""


def check_dtype(op: str, dt: dtypes.DType, accepts: str | None, hint: str = "") -> None:
    """Raise DTypeError naming op and dtype where `accepts` refuses dt: "no_bool" (numbers),
    "int" (integers and bools), "float" (floats only); hint ends the message."""
    if accepts is None:
        return
    bad = (accepts == "no_bool" and dt is dtypes.bool_) or \
        (accepts == "int" and dt.is_float) or (accepts == "float" and not dt.is_float)
    if bad:
        raise DTypeError(f"{op} is not implemented for {dt.name} tensors"
                         + (" (integer and bool tensors only)" if accepts == "int" else
                            " (float tensors only)" if accepts == "float" else "") + hint)


def _kind_types(kind: str, pt: dtypes.DType) -> tuple:
    """(result dtype, the inputs' compute types) of a binary op of `kind` on promoted pt."""
    if kind in ("arith", "bitwise"):
        out = dtypes.int64 if pt is dtypes.bool_ and kind == "arith" else pt
        return out, (out.compute, out.compute)
    if kind == "float":  # true division and pow compute in floats
        out = _float_of(pt)
        return out, (out.compute, out.compute)
    if kind == "compare":
        return dtypes.bool_, (pt.compute, pt.compute)
    return dtypes.bool_, (dtypes.bool_, dtypes.bool_)  # logical


_KIND_TYPES = {(k, d): _kind_types(k, d) for k in ("arith", "bitwise", "float", "compare",
                                                    "logical") for d in dtypes.ALL}


_ORDERING = frozenset({"lt", "le", "gt", "ge"})
_BOOL_CLOSED = frozenset({"add", "mul", "maximum", "minimum"})


_OPERANDS = (Tensor, int, float, np.number, np.bool_)  # bool is an int


def _binary(op, kind, a, b, grad=None, accepts=None) -> Tensor:
    if a.__class__ is Tensor and b.__class__ is Tensor and a.dtype is b.dtype:
        pt = a.dtype  # the common case: no promotion
    else:
        for v in (a, b):
            if not isinstance(v, _OPERANDS):
                raise TypeError(f"{op}: unsupported operand type {type(v).__name__} (a tensor, "
                                f"or a Python or NumPy scalar; dl.tensor() converts an array)")
        if not is_tensor(a) and not is_tensor(b):
            a = tensor(a)
        pt = result_type(a, b)
    if accepts is not None:
        check_dtype(op, pt, accepts)
    if op == "pow" and not pt.is_float and not is_tensor(b) and b < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed (PyTorch "
                           "raises too; a float exponent gives floats).")
    out, ins = _KIND_TYPES[kind, pt]
    if op == "sub" and any(is_tensor(v) and v.dtype is dtypes.bool_ for v in (a, b)):
        raise DTypeError("sub: subtraction with a bool tensor is not supported, as in PyTorch "
                         "(use ^ or logical_xor() for two masks, ~ or logical_not() to invert "
                         "one, or .to() a number type first)")
    if pt is dtypes.bool_ and kind == "arith":
        if op in _BOOL_CLOSED:  # or / and / max / min of bools stay bool, as torch's
            out, ins = dtypes.bool_, (dtypes.int32.compute, dtypes.int32.compute)
    if pt is dtypes.bool_ and op in _ORDERING:  # False < True, compared as integers (SPIR-V
        ins = (dtypes.int32, dtypes.int32)      # has no ordering on bools)
    y = elementwise(op, [a, b], ins, out)
    if grad is not None and out.is_float and needs_grad(a, b):
        tensors = (a if is_tensor(a) else None, b if is_tensor(b) else None)
        # an operand that takes no gradient gets none: its lazy one is never summed back
        # over broadcast dims (the sum would read the other operand, which an in-place op
        # through a view may have overwritten since: `v = h.mT; v.mul_(c)` raised)
        takes = [t is not None and t.requires_grad for t in tensors]
        ys = saved_output(y) if _reads_output(grad) else None

        def back(g):
            ga, gb = grad(g, a, b, ys)
            return (None if not takes[0] or ga is None else sum_to(ga, a.shape),
                    None if not takes[1] or gb is None else sum_to(gb, b.shape))
        record(y, op, tensors, back, saved=ys)
    return y


def _alpha_for(t: dtypes.DType, alpha):
    """alpha as a scalar of the operands' result type t, as PyTorch types it: alpha takes no
    part in promotion (bool + bool with alpha=2 stays bool), and a float alpha for an
    integer or bool result is refused, and so is a bool alpha for any other result (as
    torch: "Boolean alpha only supported for Boolean results")."""
    if isinstance(alpha, bool) and t is not dtypes.bool_:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if t.is_float or isinstance(alpha, complex):
        return alpha
    if isinstance(alpha, float) or (is_tensor(alpha) and alpha.dtype.is_float):
        raise TypeError("For integral input tensors, argument alpha must not be a floating "
                        "point number.")
    return bool(alpha) if t is dtypes.bool_ else alpha


def binary(kind: str, grad=None, alpha: bool = False, aliases=(), dunder=None, rdunder=None,
           accepts: str | None = None, rounding: bool = False):
    """Declares the binary elementwise op named as the decorated math function.
    kind: "arith" (the promoted type; two bools: add/mul/maximum/minimum stay bool, sub is
    refused, the others give int64), "float" (true division, pow),
    "compare" or "logical" (bool results). grad(g, a, b, y): the operands' gradients (a pair,
    None where an operand is a scalar or takes none), summed back over broadcast dims.
    alpha: the op takes `alpha` (b * alpha first). aliases: more names in dl.ops.
    dunder / rdunder: its operator and reflected operator (`2 - t` is `sub(2, t)`).
    kind "bitwise": the promoted dtype, bool with bool staying bool. accepts: the promoted
    dtypes taken (`check_dtype`; None: all). rounding: the op takes PyTorch's
    `rounding_mode` (div: None, "trunc" or "floor", `_rounded_div`)."""
    def wrap(math_fn):
        name = math_fn.__name__
        _emits(name, math_fn)
        if rounding:
            def fn(a, b, *, rounding_mode=None):
                if rounding_mode is None:
                    return _binary(name, kind, a, b, grad, accepts)
                return _rounded_div(a, b, rounding_mode)
        elif alpha:
            def fn(a, b, alpha=None):
                if alpha is not None:  # a Python b stays a (weak) Python number
                    t = result_type(a, b)
                    alpha = _alpha_for(t, alpha)
                    if not is_tensor(b):
                        b = b * alpha
                    elif not (name == "sub" and b.dtype is dtypes.bool_):  # (refused)
                        # b in the result type first, as torch's: alone, a bool or narrower
                        # b times alpha promoted (int32 + bool * 2 gave int64, float16 +
                        # int32 * 2.5 float32)
                        b = mul(b.to(t), alpha)
                return _binary(name, kind, a, b, grad, accepts)
        else:
            def fn(a, b):
                return _binary(name, kind, a, b, grad, accepts)
        notes = ["a and b are tensors or Python scalars; they broadcast (NumPy rules).",
                 _KIND_NOTES[kind]]
        if alpha:
            notes.append("`alpha` multiplies b first, as PyTorch's, in the operands' result "
                         "type (a float alpha for integer or bool operands is a TypeError).")
        if rounding:
            notes.append('`rounding_mode="trunc"` or `"floor"` rounds the quotient toward zero or '
                         'down, in the promoted dtype (integers stay integers), as PyTorch\'s; '
                         'those are not differentiable (PyTorch\'s give zero gradients).')
        notes.append("Not differentiable." if grad is None else "Differentiable in its tensor "
                     "operands (gradients summed back over broadcast dims).")
        fn.__doc__ = _op_doc(math_fn, f"a.{name}(b)", notes, (dunder, rdunder), aliases)
        return _declare(fn, name, math_fn.__module__, aliases=aliases, dunder=dunder,
                        rdunder=rdunder)
    return wrap


_KIND_NOTES = {
    "arith": "The result has the promoted dtype (docs/dl.md: a Python scalar is weak, it "
             "never widens a tensor's type within its category, nor does a 0-dim tensor); "
             "two bools: add, mul, maximum and minimum stay bool, sub is refused, others "
             "give int64.",
    "float": "The result is float: the promoted dtype, float32 for integer or bool operands.",
    "compare": "The result is bool; the operands compare in their promoted dtype.",
    "logical": "The operands are taken as bools (non-zero is true); the result is bool.",
    "bitwise": "Integer and bool tensors only; the result has the promoted dtype (bool with "
               "bool stays bool).",
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


# b's gradient from a, not from the output, as PyTorch's: its div keeps its operands, so an
# in-place write into the quotient (`y.div_(w); y.pow_(2)`) leaves its gradient readable
@binary("float", lambda g, a, b, y: (g / b if is_tensor(a) else None,
                                     -(g * a) / (b * b) if is_tensor(b) else None),
        aliases=("true_divide",), dunder="__truediv__", rdunder="__rtruediv__", rounding=True)
def div(ir, x, y):
    """True division a / b, elementwise (`rounding_mode` as PyTorch's)."""
    return ir.binary("div", x, y)


def _rounded_div(a, b, mode):
    """div(a, b, rounding_mode=mode): "floor" is `floor_divide`; "trunc" rounds toward zero
    in the promoted dtype: for integers a - fmod(a, b) is an exact multiple of b, so its
    floor division is exact (0 for a zero divisor, as floor_divide's); for floats trunc(a / b)."""
    if mode == "floor":
        return floor_divide(a, b)
    if mode != "trunc":
        raise ValueError(f'div expected rounding_mode to be one of None, "trunc" or "floor", '
                         f"got {mode!r}")
    with no_grad():  # not differentiable, as floor_divide
        if result_type(a, b).is_float:
            return _trunc(div(a, b))
        return floor_divide(sub(a, fmod(a, b)), b)


def _pow_grad(g, a, b, y):
    """PyTorch's: 0 for the base where the exponent is 0 (b * a ** (b - 1) is 0 * inf at
    a = 0), and 0 for the exponent where the base is 0 and the exponent >= 0 (y * log(0) is
    0 * -inf there)."""
    ga = None
    if is_tensor(a):
        ga = g * b * (a ** (b - 1))
        if is_tensor(b):
            ga = where(b == 0, 0.0, ga)
        elif b == 0:
            ga = zeros_like(a)
    if not is_tensor(b):
        gb = None
    elif is_tensor(a):
        gb = g * where((a == 0) & (b >= 0), 0.0, y * log(a))
    else:  # a Python base: its log is a number (-inf at 0, nan below, as log's)
        la = math.log(a) if a > 0 else (-math.inf if a == 0 else math.nan)
        gb = g * (where(b >= 0, 0.0, y * la) if a == 0 else y * la)
    return ga, gb


def _int_pow(ir, x, y):
    """x ** y in x's integer type, wrapping as PyTorch's: square-and-multiply over every bit
    of a non-negative y (unrolled; a constant y folds); a negative y gives 1 for x = 1,
    +-1 for x = -1 (y's parity), else 0."""
    r, base, k = ir.const(1, x.type), x, y
    for _ in range(x.type.elem.bits - 1):
        r = ir.select(ir.binary("ne", ir.binary("and", k, 1), 0), ir.mul(r, base), r)
        base = ir.mul(base, base)
        k = ir.shift("shr", k, 1)
    odd = ir.binary("ne", ir.binary("and", y, 1), 0)
    neg = ir.select(ir.binary("eq", x, 1), ir.const(1, x.type),
                    ir.select(ir.binary("eq", x, -1), ir.select(odd, x, ir.unary("neg", x)),
                              ir.const(0, x.type)))
    return ir.select(ir.binary("lt", y, 0), neg, r)


@binary("arith", _pow_grad, dunder="__pow__", rdunder="__rpow__", accepts="no_bool")
def pow(ir, x, y):  # noqa: A001
    """a raised to the power b, elementwise, in the promoted dtype: integers stay integers
    (exact, wrapping on overflow, as PyTorch's; a negative Python exponent raises, a
    negative tensor exponent gives 0 but for bases 1 and -1), a float operand gives floats."""
    if x.type.is_float:
        return ir.binary("pow", x, y)
    return _int_pow(ir, x, y)


def _minmax_grad(greater):
    def grad(g, a, b, y):  # ties split the gradient in half, as in PyTorch; an operand
        half = g * 0.5     # takes all of it but where it loses (a nan pair: both do)
        ga = where(greater(b, a), 0.0, where(eq(a, b), half, g)) if is_tensor(a) else None
        gb = where(greater(a, b), 0.0, where(eq(a, b), half, g)) if is_tensor(b) else None
        return ga, gb
    return grad


def _nan_first(ir, x, y, r):
    """r, or the nan among x and y (the targets' max/min return the other operand; for
    integers the comparisons fold away)."""
    return ir.select(ir.binary("ne", x, x), x, ir.select(ir.binary("ne", y, y), y, r))


@binary("arith", _minmax_grad(lambda a, b: gt(a, b)))
def maximum(ir, x, y):
    """The larger of a and b, elementwise; a nan operand gives nan and ties share the
    gradient, as PyTorch's."""
    return _nan_first(ir, x, y, ir.binary("max", x, y))


@binary("arith", _minmax_grad(lambda a, b: lt(a, b)))
def minimum(ir, x, y):
    """The smaller of a and b, elementwise; a nan operand gives nan and ties share the
    gradient, as PyTorch's."""
    return _nan_first(ir, x, y, ir.binary("min", x, y))


@binary("compare")
def eq(ir, x, y):
    """a == b, elementwise."""
    return ir.binary("eq", x, y)


@binary("compare")
def ne(ir, x, y):
    """a != b, elementwise."""
    return ir.binary("ne", x, y)


@tensor_method("__eq__")
def _eq_operator(a, b):
    """`a == b`: elementwise for a tensor or a scalar b; for anything else (None, a string)
    Python's own answer (False, by identity), as PyTorch's: `t == None` is False."""
    return eq(a, b) if isinstance(b, _OPERANDS) else NotImplemented


@tensor_method("__ne__")
def _ne_operator(a, b):
    """`a != b` (see `==`): True for None or a string."""
    return ne(a, b) if isinstance(b, _OPERANDS) else NotImplemented


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


@binary("logical")
def logical_and(ir, x, y):
    """Logical a and b, elementwise."""
    return ir.binary("and", x, y)


@binary("logical")
def logical_or(ir, x, y):
    """Logical a or b, elementwise."""
    return ir.binary("or", x, y)


@binary("logical")
def logical_xor(ir, x, y):
    """Logical a xor b, elementwise."""
    return ir.binary("xor", x, y)


def logical_not(x):
    """Logical not, elementwise: a bool tensor, True where x is 0 (False).

    Any dtype (non-zero is true). Not differentiable; lazy (fuses). Also
    `t.logical_not()` (`~t` is `bitwise_not`, as in PyTorch)."""
    return _unary_node("logical_not", x.to(dtypes.bool_) if x.dtype is not dtypes.bool_
                       else x, dtypes.bool_)


_emits("logical_not", lambda ir, x: ir.unary("not", x))
_declare(logical_not, "logical_not")


# ---- where / clamp -------------------------------------------------------------------------
def where(cond, a, b):
    """a where cond is true, else b, elementwise (cond, a and b broadcast).

    cond: a tensor (non-bool ones are compared with 0). a, b: tensors or Python scalars;
    the result has their promoted dtype. Differentiable in a and b (float results); lazy
    (fuses). Also `x.where(cond, y)`, PyTorch's method: x where cond, else y."""
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
_declare(where, "where")  # (its method is PyTorch's, below)


@tensor_method("where")
def _where_method(self, condition, y):
    """x.where(condition, y): x where condition is true, else y, as PyTorch's method (the
    tensor is the value, not the condition: `cond.where(a, b)` meant where(cond, a, b)
    before, so a ported `x.where(x > 0, 0.0)` gave other values, silently)."""
    return where(condition, self, y)


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

    The result has the promoted dtype of x and min (bools: x or min). The gradient goes to
    x where x >= min, else to a tensor min. Lazy (fuses). Also `t.clamp_min(min)`."""
    return _clamp_side("clamp_min", x, min, ge)


def clamp_max(x, max):  # noqa: A002
    """min(x, max), elementwise; max is a tensor (broadcast) or a Python scalar.

    The result has the promoted dtype of x and max (bools: x and max). The gradient goes to
    x where x <= max, else to a tensor max. Lazy (fuses). Also `t.clamp_max(max)`."""
    return _clamp_side("clamp_max", x, max, le)


# a NaN bound gives NaN, as PyTorch's (a compare with NaN is false: x came through)
_emits("clamp_min", lambda ir, x, lo: ir.select(
    ir.binary("or", ir.binary("lt", x, lo), ir.binary("ne", lo, lo)), lo, x))
_emits("clamp_max", lambda ir, x, hi: ir.select(
    ir.binary("or", ir.binary("gt", x, hi), ir.binary("ne", hi, hi)), hi, x))
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


# ---- math (issue 17): atan2, remainder, fmod, floor_divide, hypot, lerp, bitwise ops, -------
# ---- predicates, nan_to_num and the parametrised activations --------------------------------
_PI = math.pi
# Cephes' atan (double precision): atan(u) = u + u z P(z) / Q(z), z = u^2, for |u| <= 0.66
_ATAN_P = (-8.750608600031904122785e-1, -1.615753718733365076637e1, -7.500855792314704667340e1,
           -1.228866684490136173410e2, -6.485021904942025371773e1)
_ATAN_Q = (2.485846490142306297962e1, 1.650270098316988542046e2, 4.328810604912902668951e2,
           4.853903996359136964868e2, 1.945506571482613964425e2)
_MOREBITS = 6.123233995736765886130e-17


def _poly(ir, z, coefs, lead_one: bool = False):
    acc = ir.add(z, coefs[0]) if lead_one else coefs[0]
    for c in coefs[1:]:
        acc = ir.add(ir.mul(acc, z), c)
    return acc


def _atan01(ir, t):
    """atan(t) for t in [0, 1] (Cephes' reduction: pi/4 + atan((t-1)/(t+1)) above 0.66)."""
    big = ir.binary("gt", t, 0.66)
    u = ir.select(big, ir.div(ir.sub(t, 1.0), ir.add(t, 1.0)), t)
    z = ir.mul(u, u)
    r = ir.add(u, ir.div(ir.mul(ir.mul(u, z), _poly(ir, z, _ATAN_P)),
                         _poly(ir, z, _ATAN_Q, lead_one=True)))
    return ir.select(big, ir.add(r, _PI / 4 + 0.5 * _MOREBITS), r)


def _signbit(ir, x):
    """x < 0 or x is -0.0 (1 / -0.0 is -inf)."""
    return ir.binary("or", ir.binary("lt", x, 0.0), ir.binary("lt", ir.div(1.0, x), 0.0))


def _isnan(ir, x):
    return ir.binary("ne", x, x)


def _anynan(ir, x, y):
    return ir.binary("or", _isnan(ir, x), _isnan(ir, y))


def _mod_fix(ir, r, y):
    """Where the truncated remainder r and the divisor y differ in sign (r != 0)."""
    return ir.binary("and", ir.binary("ne", r, 0),
                     ir.binary("ne", ir.binary("lt", r, 0), ir.binary("lt", y, 0)))


def _atan2_grad(g, a, b, y):
    # 1 / (a^2 + b^2), 0 where it is infinite (at the origin, as PyTorch's: not 0 / 0)
    d = a * a + b * b
    r = where(d == 0, 0.0, 1.0 / d)
    return (g * b * r if is_tensor(a) else None, -(g * a) * r if is_tensor(b) else None)


@binary("float", _atan2_grad, aliases=("arctan2",))
def atan2(ir, y, x):
    """The angle of the point (x=b, y=a), atan(a / b) in the right quadrant, in [-pi, pi].

    C's atan2 on signed zeros and infinities (atan2(0.0, -0.0) is pi, atan2(-0.0, 1) is
    -0.0, atan2(inf, -inf) is 3pi/4), as PyTorch."""
    ay, ax = ir.unary("abs", y), ir.unary("abs", x)
    mx, mn = ir.binary("max", ax, ay), ir.binary("min", ax, ay)
    r = _atan01(ir, ir.select(ir.binary("eq", ax, ay), 1.0, ir.div(mn, mx)))
    r = ir.select(ir.binary("gt", ay, ax), ir.sub(_PI / 2, r), r)
    neg_x = _signbit(ir, x)
    r = ir.select(neg_x, ir.sub(_PI, r), r)
    zero_pi = ir.select(neg_x, ir.const(_PI, x.type), ir.const(0.0, x.type))
    r = ir.select(ir.binary("eq", mx, 0.0), zero_pi, r)
    r = ir.select(_signbit(ir, y), ir.unary("neg", r), r)
    return ir.select(_anynan(ir, x, y), ir.add(x, y), r)


def _trunc(x):
    return where(x < 0, ceil(x), floor(x))


@binary("arith", lambda g, a, b, y: (g if is_tensor(a) else None,
                                     -(g * floor_divide(a, b)) if is_tensor(b) else None),
        dunder="__mod__", rdunder="__rmod__", accepts="no_bool")
def remainder(ir, x, y):
    """The remainder of a / b with the sign of b (Python's %, PyTorch's remainder).

    Floats: fmod(a, b) + b where they differ in sign (a zero keeps fmod's sign, as
    PyTorch's). Integers: exact. Bool tensors are refused. An integer division by zero
    gives 0 (PyTorch raises)."""
    r = ir.binary("rem", x, y)
    return ir.select(_mod_fix(ir, r, y), ir.add(r, y), r)


@binary("arith", lambda g, a, b, y: (g if is_tensor(a) else None,
                                     -(g * _trunc(a / b)) if is_tensor(b) else None),
        accepts="no_bool")
def fmod(ir, x, y):
    """The remainder of a / b truncated toward zero, with the sign of a (C's fmod).

    Bool tensors are refused; an integer division by zero gives 0 (PyTorch raises)."""
    return ir.binary("rem", x, y)


@binary("arith", dunder="__floordiv__", rdunder="__rfloordiv__", accepts="no_bool")
def floor_divide(ir, x, y):
    """floor(a / b), elementwise, in the promoted dtype (PyTorch's floor_divide, `//`).

    Floats follow PyTorch's algorithm ((a - fmod(a, b)) / b, adjusted; a / b where b is 0);
    integers divide exactly (a division by zero gives 0; PyTorch raises). Bool tensors are
    refused. Not differentiable (PyTorch's backward raises)."""
    q = ir.div(x, y)
    r = ir.binary("rem", x, y)
    if not x.type.is_float:
        return ir.select(_mod_fix(ir, r, y), ir.sub(q, 1), q)
    d = ir.div(ir.sub(x, r), y)
    d = ir.select(_mod_fix(ir, r, y), ir.sub(d, 1.0), d)
    fl = ir.unary("floor", d)
    fl = ir.select(ir.binary("gt", ir.sub(d, fl), 0.5), ir.add(fl, 1.0), fl)
    res = ir.select(ir.binary("ne", d, 0.0), fl, ir.mul(q, 0.0))  # 0 with the sign of a / b
    return ir.select(ir.binary("eq", y, 0.0), q, res)


def _hypot_grad(g, a, b, y):
    return (g * a / y if is_tensor(a) else None, g * b / y if is_tensor(b) else None)


@binary("float", _hypot_grad, accepts="float")
def hypot(ir, x, y):
    """sqrt(a^2 + b^2), elementwise, without overflow or underflow in the squares.

    inf where either is infinite (even with a nan), as C's hypot: the kernel language's
    hypot (the target's libm or the shader prelude's; within 1 ulp where the composition
    max * sqrt(1 + (min / max)^2) it replaced was 2). Float tensors only."""
    return ir.binary("hypot", x, y)


@binary("bitwise", dunder="__and__", rdunder="__rand__", accepts="int")
def bitwise_and(ir, x, y):
    """a AND b, bit by bit (integers) or logical (bools): `a & b`."""
    return ir.binary("and", x, y)


@binary("bitwise", dunder="__or__", rdunder="__ror__", accepts="int")
def bitwise_or(ir, x, y):
    """a OR b, bit by bit (integers) or logical (bools): `a | b`."""
    return ir.binary("or", x, y)


@binary("bitwise", dunder="__xor__", rdunder="__rxor__", accepts="int")
def bitwise_xor(ir, x, y):
    """a XOR b, bit by bit (integers) or logical (bools): `a ^ b`."""
    return ir.binary("xor", x, y)


@binary("arith", dunder="__lshift__", rdunder="__rlshift__", accepts="int")
def bitwise_left_shift(ir, x, y):
    """a shifted left by b bits (integers): `a << b`. A count of the type's width or more,
    or a negative one, gives 0, as PyTorch's."""
    return ir.shift("shl", x, y)


@binary("arith", dunder="__rshift__", rdunder="__rrshift__", accepts="int")
def bitwise_right_shift(ir, x, y):
    """a shifted right by b bits, arithmetic (the sign fills in), as PyTorch: `a >> b`. A
    count of the type's width or more, or a negative one, leaves only the sign (0 or -1)."""
    return ir.shift("shr", x, y)


def bitwise_not(x: Tensor) -> Tensor:
    """NOT x: bit by bit on integer tensors, logical on bool tensors (float tensors are
    refused, as PyTorch). Not differentiable; lazy (fuses). Also `t.bitwise_not()` and
    `~t`."""
    check_dtype("bitwise_not", x.dtype, "int")
    return _unary_node("logical_not" if x.dtype is dtypes.bool_ else "bitwise_not", x,
                       x.dtype)


_emits("bitwise_not", lambda ir, x: ir.unary("bitnot", x))
_declare(bitwise_not, "bitwise_not", dunder="__invert__")


def _pred(op: str, x: Tensor) -> Tensor:
    return elementwise(op, [x], [x.dtype.compute], dtypes.bool_)


_emits("isnan", lambda ir, x: _isnan(ir, x))
_emits("notnan", lambda ir, x: ir.binary("eq", x, x))
_emits("isinf", lambda ir, x: ir.binary("eq", ir.unary("abs", x), float("inf")))
_emits("isfinite", lambda ir, x: ir.binary("lt", ir.unary("abs", x), float("inf")))


def isnan(x: Tensor) -> Tensor:
    """A bool tensor: True where x is nan (never for integer and bool tensors). Lazy (fuses).
    Also `t.isnan()`."""
    return _pred("isnan", x)


def isinf(x: Tensor) -> Tensor:
    """A bool tensor: True where x is +inf or -inf (never for integer and bool tensors).
    Lazy (fuses). Also `t.isinf()`."""
    return _pred("isinf" if x.dtype.is_float else "isnan", x)


def isfinite(x: Tensor) -> Tensor:
    """A bool tensor: True where x is neither inf, -inf nor nan (always for integer and
    bool tensors). Lazy (fuses). Also `t.isfinite()`."""
    return _pred("isfinite" if x.dtype.is_float else "notnan", x)


for _f in (isnan, isinf, isfinite):
    _declare(_f, _f.__name__)

_FMAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
         "float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}


def nan_to_num(x: Tensor, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    """x with nan replaced by `nan`, +inf by `posinf` and -inf by `neginf` (None: the
    largest / lowest finite value of x's dtype), elementwise.

    Integer and bool tensors are returned as a copy. Differentiable (the gradient is 0
    where x is not finite, as PyTorch's). Lazy (fuses). Also `t.nan_to_num()`."""
    if not x.dtype.is_float:
        return x.clone()
    big = _FMAX[x.dtype.name]
    pos = big if posinf is None else posinf
    neg = -big if neginf is None else neginf
    ct = x.dtype.compute
    y = elementwise("nan_to_num", [x, nan, pos, neg], [ct] * 4, x.dtype)
    return record(y, "nan_to_num", (x,), lambda g: (where(isfinite(x), g, 0.0),))


def _nan_to_num_math(ir, x, nan, pos, neg):
    inf = float("inf")
    y = ir.select(ir.binary("eq", x, inf), pos, ir.select(ir.binary("eq", x, -inf), neg, x))
    return ir.select(_isnan(ir, x), nan, y)


_emits("nan_to_num", _nan_to_num_math)
_declare(nan_to_num, "nan_to_num")


def lerp(input: Tensor, end, weight) -> Tensor:  # noqa: A002
    """input + weight * (end - input), elementwise (PyTorch's form: end - (end - input) *
    (1 - weight) where |weight| >= 0.5).

    end: a tensor or scalar; weight: a scalar or a tensor; all broadcast. Float tensors only
    (the promoted dtype). Differentiable in all three. Lazy (fuses). Also `t.lerp(end, w)`."""
    check_dtype("lerp", result_type(input, end) if is_tensor(end) else input.dtype, "float")
    out = result_type(input, end, weight)
    ct = out.compute
    y = elementwise("lerp", [input, end, weight], [ct, ct, ct], out)
    te = end if is_tensor(end) else None
    tw = weight if is_tensor(weight) else None

    def back(g):
        return (sum_to(g * (1.0 - weight), input.shape),
                None if te is None else sum_to(g * weight, te.shape),
                None if tw is None else sum_to(g * (end - input), tw.shape))
    return record(y, "lerp", (input, te, tw), back)


def _lerp_math(ir, a, b, w):
    d = ir.sub(b, a)
    small = ir.binary("lt", ir.unary("abs", w), 0.5)
    return ir.select(small, ir.add(a, ir.mul(w, d)), ir.sub(b, ir.mul(d, ir.sub(1.0, w))))


_emits("lerp", _lerp_math)
_declare(lerp, "lerp")


# ---- activations with parameters: the parameters are kernel arguments, not structure ------
def _act(op: str, x: Tensor, params: tuple, grad) -> Tensor:
    dt = _float_of(x.dtype)
    y = elementwise(op, [x, *params], [dt.compute] * (1 + len(params)), dt)
    ys = saved_output(y) if _reads_output(grad) else None
    return record(y, op, (x,), lambda g: (grad(g, x, ys),), saved=ys)


def _softplus_math(ir, x, beta, threshold):
    bx = ir.mul(x, beta)
    return ir.select(ir.binary("gt", bx, threshold), x,
                     ir.div(ir.unary("log1p", ir.unary("exp", bx)), beta))


_emits("softplus_bt", _softplus_math)


def softplus_bt(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta, elementwise; x itself where beta * x > threshold
    (PyTorch's nn.functional.softplus; `softplus` is this with beta 1, threshold 20).
    Integer tensors give float32. Differentiable; lazy (fuses)."""
    if beta == 1.0 and threshold == 20.0:
        return softplus(x)

    def grad(g, x, y):
        bx = x * beta
        return where(bx > threshold, g, g * sigmoid(bx))
    return _act("softplus_bt", x, (float(beta), float(threshold)), grad)


_emits("leaky_relu", lambda ir, x, s: ir.select(ir.binary("gt", x, 0.0), x, ir.mul(x, s)))


def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    """x where x > 0, else negative_slope * x, elementwise. Integer tensors give float32.
    Differentiable (the slope's side at 0, as PyTorch); lazy (fuses). Also
    `t.leaky_relu()`."""
    s = float(negative_slope)
    return _act("leaky_relu", x, (s,), lambda g, x, y: where(x > 0, g, g * s))


def _elu_math(ir, x, alpha, scale, input_scale):
    neg = ir.mul(ir.sub(ir.unary("exp", ir.mul(x, input_scale)), 1.0), ir.mul(alpha, scale))
    return ir.select(ir.binary("le", x, 0.0), neg, ir.mul(x, scale))


_emits("elu", _elu_math)


def elu(x: Tensor, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0):
    """scale * x where x > 0, else scale * alpha * (exp(input_scale * x) - 1), elementwise
    (PyTorch's elu; selu is elu with fixed alpha and scale). Integer tensors give float32.
    Differentiable; lazy (fuses). Also `t.elu()`."""
    a, s, i = float(alpha), float(scale), float(input_scale)

    def grad(g, x, y):
        return where(x <= 0, g * (exp(x * i) * (a * s * i)), g * s)
    return _act("elu", x, (a, s, i), grad)


SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


_emits("selu", lambda ir, x: _elu_math(ir, x, ir.const(SELU_ALPHA, x.type),
                                       ir.const(SELU_SCALE, x.type), 1.0))


def selu(x: Tensor) -> Tensor:
    """scale * elu(x, alpha) with PyTorch's constants (alpha 1.6733, scale 1.0507),
    elementwise. Differentiable; lazy (fuses). Also `t.selu()`."""
    return _act("selu", x, (), lambda g, x, y: where(
        x <= 0, g * (exp(x) * (SELU_ALPHA * SELU_SCALE)), g * SELU_SCALE))


def _mish_math(ir, x):
    return ir.mul(x, ir.unary("tanh", ir.unary("log1p", ir.unary("exp", x))))


def _mish_grad(g, x, y):
    t = tanh(log1p(exp(x)))
    return g * (t + x * sigmoid(x) * (1.0 - t * t))


_emits("mish", _mish_math)


def mish(x: Tensor) -> Tensor:
    """x * tanh(softplus(x)), elementwise. Integer tensors give float32. Differentiable;
    lazy (fuses). Also `t.mish()`."""
    return _act("mish", x, (), _mish_grad)


def _hardswish_math(ir, x):
    r6 = ir.binary("min", ir.binary("max", ir.add(x, 3.0), 0.0), 6.0)
    return ir.div(ir.mul(x, r6), 6.0)


def _hardswish_grad(g, x, y):
    return where(x <= -3.0, 0.0, where(x < 3.0, g * (x / 3.0 + 0.5), g))  # PyTorch's ends


_emits("hardswish", _hardswish_math)


def hardswish(x: Tensor) -> Tensor:
    """x * relu6(x + 3) / 6, elementwise. Integer tensors give float32. Differentiable
    (PyTorch's gradient: (2x + 3) / 6 on (-3, 3), 0 at -3, 1 at 3); lazy (fuses). Also
    `t.hardswish()`."""
    return _act("hardswish", x, (), _hardswish_grad)


def _logsigmoid_math(ir, x):
    e = ir.unary("log1p", ir.unary("exp", ir.unary("neg", ir.unary("abs", x))))
    return ir.sub(ir.binary("min", x, 0.0), e)


_emits("logsigmoid", _logsigmoid_math)


def logsigmoid(x: Tensor) -> Tensor:
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), elementwise, stable for large |x|.
    Integer tensors give float32. Differentiable; lazy (fuses). Also `t.logsigmoid()`."""
    return _act("logsigmoid", x, (), lambda g, x, y: g / (1.0 + exp(x)))


for _f in (softplus_bt, leaky_relu, elu, selu, mish, hardswish, logsigmoid):
    _declare(_f, _f.__name__)

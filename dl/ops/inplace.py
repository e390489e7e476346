"""In-place arithmetic, as PyTorch's: `t += x`, `t.add_(x)`, `t.mul_(2)`, `t.clamp_(0, 1)`.

The result is written into t's storage, so every view and alias of t sees it (`p -= lr * g`
updates a model's parameter, where `p = p - lr * g` would only rebind a name). The result
must have t's shape (the other operands broadcast to it) and a dtype t can hold without
changing category (an int tensor cannot take `/= 2`), else a RuntimeError, as PyTorch's.

Without autograd the op and the write are one fused kernel. With autograd t takes the op's
history (a leaf that requires grad is refused, as for every in-place op), the op runs on a
copy of t's old value where its gradient reads that value (`mul_`, `exp_`), and
dl/autograd/tape.py refuses a backward that would read a value overwritten since."""
from __future__ import annotations

from cube import recording

from ..autograd.grad_mode import is_grad_enabled, no_grad
from ..autograd.overwrites import check_history, refuse_leaf_write
from ..dtypes import float64
from ..fusion.materialise import settled
from ..fusion.writes import before_write, refuse_overlap
from ..tensor import Tensor
from .indexing import _alias, write_back
from .registry import OPS, register
from .shape import assign, clone

# op -> the augmented assignment operator that calls its in-place form
_OPERATORS = {
    "add": "__iadd__", "sub": "__isub__", "mul": "__imul__", "div": "__itruediv__",
    "floor_divide": "__ifloordiv__", "remainder": "__imod__", "pow": "__ipow__",
    "bitwise_and": "__iand__", "bitwise_or": "__ior__", "bitwise_xor": "__ixor__",
    "bitwise_left_shift": "__ilshift__", "bitwise_right_shift": "__irshift__",
}
_METHODS = (*_OPERATORS, "true_divide", "fmod", "atan2", "arctan2", "hypot", "lerp", "clamp",
            "clamp_min", "clamp_max", "neg", "abs", "sqrt", "rsqrt", "exp", "log", "log1p",
            "sin", "cos", "tanh", "erf", "sigmoid", "relu", "sign", "floor", "ceil", "round",
            "reciprocal", "square", "nan_to_num", "bitwise_not", "logical_not", "logical_and",
            "logical_or", "logical_xor", "eq", "ne", "lt", "le", "gt", "ge", "xlogy",
            "copysign", "frac", "sinc",
            # dl/ops/elementwise_math.py's (float_power_ is its own: a float64 tensor only)
            "tan", "asin", "arcsin", "acos", "arccos", "atan", "arctan", "sinh", "cosh",
            "asinh", "arcsinh", "acosh", "arccosh", "atanh", "arctanh", "log2", "log10",
            "exp2", "expm1", "trunc", "fix", "erfc", "deg2rad", "rad2deg", "logit", "sgn",
            "heaviside", "ldexp")
# gradients that read no operand's old value (relu's reads its output): no copy of the old
# value is kept for them; nor, where no other operand takes a gradient, for mul and div
_VALUE_FREE = frozenset({"add", "sub", "neg", "relu", "dropout"})
_VALUE_FREE_BY_SCALAR = frozenset({"mul", "div", "true_divide"})


def apply(x: Tensor, name: str, fn, args: tuple, kwargs: dict) -> Tensor:
    """x <- fn(x, *args, **kwargs), in x's storage; returns x."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}_: expected a tensor, got {type(x).__name__}")
    others = any(getattr(a, "requires_grad", False) for a in (*args, *kwargs.values()))
    tracking = is_grad_enabled() and (x.requires_grad or others)
    if tracking:
        refuse_leaf_write(x, f"{name}_")
        check_history((x,))  # a view written through its base: its new history
    # a lazy x is computed first, not given the op's node: gradient closures and lazy values
    # may hold the x object, and only a storage write is seen by their checks
    x._materialise()
    refuse_overlap(x)
    if not tracking:
        y = fn(x, *args, **kwargs)
        _check(name, x, y)
        assign(x, y, internal=True)  # one kernel: each element read, then written
        return x
    if name in _VALUE_FREE or name in _VALUE_FREE_BY_SCALAR and not (
            others or any(_in_storage(a, x) for a in (*args, *kwargs.values()))):
        src = _alias(x)
    else:  # the op's gradient reads x's old value: keep a copy of it, with x's history;
        # so for an operand in x's memory (`y.mul_(y)`, `y.mul_(y.detach())`, a view of
        # y), which the write would change under the gradient's feet
        src = _snapshot(x)
        args = tuple(_snapshot(a) if _in_storage(a, x) else a for a in args)
        kwargs = {k: _snapshot(a) if _in_storage(a, x) else a for k, a in kwargs.items()}
    y = fn(src, *args, **kwargs)
    _check(name, x, y)
    write_back(x, y)
    return x


def _in_storage(a, x: Tensor) -> bool:
    """Whether a is a tensor in x's memory (x itself, a view or an alias of it; a lazy
    `detach()` of x, whose node x's computing settled, included)."""
    return isinstance(a, Tensor) and settled(a) and a._buf is x._buf


def _snapshot(a: Tensor) -> Tensor:
    """A copy of a's value now, with a's history (its gradient flows on as a's would)."""
    with no_grad():
        c = clone(a)._materialise()
    c.requires_grad, c._grad_fn = a.requires_grad, a._grad_fn
    return c


def _check(name: str, x: Tensor, y) -> None:
    if not isinstance(y, Tensor):
        raise TypeError(f"{name}_: {name} gave {type(y).__name__}, not a tensor")
    if y.shape != x.shape:
        raise RuntimeError(f"{name}_: the result has shape {y.shape} (the operands "
                           f"broadcast together), which does not fit the tensor's shape "
                           f"{x.shape}")
    if y.dtype.category > x.dtype.category:
        raise RuntimeError(f"{name}_: the result type {y.dtype.name} can't be cast to the "
                           f"tensor's type {x.dtype.name}")


def _declare(name: str) -> None:
    fn = OPS[name]

    def method(self, *args, **kwargs):
        return apply(self, name, fn, args, kwargs)
    method.__name__ = f"{name}_"
    method.__doc__ = (f"`t.{name}_(...)`: t <- t.{name}(...), written into t's storage "
                      f"(in place, as PyTorch's); returns t. See dl/ops/inplace.py.")
    register(f"{name}_", method=True, dunder=_OPERATORS.get(name))(method)


for _name in _METHODS:
    _declare(_name)


@register("float_power_", method=True)
def float_power_(x: Tensor, exponent) -> Tensor:
    """`t.float_power_(e)`: t <- t.float_power(e) in t's storage; t must be float64, as
    PyTorch's (float_power computes in float64). Returns t."""
    if getattr(x, "dtype", None) is not float64:
        raise RuntimeError(f"the base given to float_power_ has dtype "
                           f"{getattr(x.dtype, 'name', x.dtype)} but the operation's result "
                           f"requires dtype float64 (as PyTorch's)")
    return apply(x, "float_power", OPS["float_power"], (exponent,), {})


def count_up(t: Tensor) -> Tensor:
    """t += 1 for a module's own one-element integer counter (BatchNorm's
    `num_batches_tracked`), outside autograd; returns t. On a host device, outside a
    capture, the storage is written directly after `before_write` (lazy values reading it
    are computed first, and the write is stamped, so a backward that read the old count is
    refused): the generic in-place add (a fused kernel through its plan) was ~40% of a
    small BatchNorm2d's forward. Elsewhere, and under capture (whose replays must repeat
    the increment), it is `add_`."""
    buf = t._buf
    recorded = recording.active is not None and recording.current() is not None
    if buf is None or recorded or t.requires_grad or \
            t.dtype.is_float or t.numel() != 1 or not t.device.is_host or \
            getattr(buf, "share", None) is None or buf.array.dtype != t.dtype.storage_np:
        with no_grad():
            return t.add_(1)
    before_write(t)
    buf.array[t.offset] += 1
    return t

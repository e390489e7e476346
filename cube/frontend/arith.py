"""Typed arithmetic on frontend values: compile-time Python values fold in Python, runtime
values emit IR through the builder, and literals take the type of the other operand."""
from __future__ import annotations

import math
import operator

import numpy as np

from cube_ir import ir
from cube_ir.builder import Builder
from cube_ir.types import (
    SCALARS,
    PromotionError,
    Scalar,
    Type,
    boolean,
    f32,
    i32,
    promote,
    with_elem,
)

from .kinds import describe, foldable, is_number, is_runtime, refuse, truthable
from .weak import WeakNames


class ArithError(Exception):
    """Raised with a user-level message; the translator attaches the location."""


def _check_int_range(v: int, t: Scalar) -> None:
    lo, hi = t.int_range
    if not lo <= v <= hi:
        raise ArithError(f"the literal {v} does not fit in {t}")


def literal(b: Builder, x, like: Type | None = None) -> ir.Const:
    """A Python number as a constant, taking the type `like` where given (weak typing)."""
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, bool):
        if like is not None and not like.elem.is_bool:
            raise ArithError(f"cannot combine a bool literal with {like}")
        return ir.Const(x, like or boolean)
    if isinstance(x, int):
        if like is None:
            _check_int_range(x, i32)
            return ir.Const(x, i32)
        if like.elem.is_bool:
            raise ArithError(f"cannot combine the number {x} with a bool value")
        if like.elem.is_int:
            _check_int_range(x, like.elem)
        return b.const(x, like)
    if isinstance(x, float):
        if like is None:
            return ir.Const(x, f32)
        if not like.elem.is_float:
            raise ArithError(
                f"cannot combine the float literal {x} with {like}: cast the integer first, "
                f"e.g. f32(n) * {x}")
        return b.const(x, like)
    raise ArithError(f"expected a number, got {describe(x)}")


def as_runtime(b: Builder, x, like: Type | None = None):
    return x if is_runtime(x) else literal(b, x, like)


_PY_BINOPS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
    "and": operator.and_, "or": operator.or_, "xor": operator.xor, "shl": operator.lshift,
    "shr": operator.rshift, "eq": operator.eq, "ne": operator.ne, "lt": operator.lt,
    "le": operator.le, "gt": operator.gt, "ge": operator.ge,
}


# `5 if c else 2` is a runtime choice between two literals: like a literal it takes the type
# of the value it meets (u32 when added to a u32), and alone is i32 (f32 with a float).
# Such selects are remembered per builder, by the id of their result, with their literals.
def weak_choice(b: Builder, cond, x, y, t: Type | None = None):
    if t is None and not isinstance(x, bool) and isinstance(x, float) != isinstance(y, float):
        t = f32  # Python: an int and a float choose a float
    v = b.select(cond, literal(b, x, t), literal(b, y, t or literal(b, x).type))
    weak = b.__dict__.setdefault("_weak_choices", {})
    weak[id(v)] = (v, cond, x, y)
    return v


def retype_weak(b: Builder, v, t: Type):
    """A weak choice (see weak_choice) rebuilt with its literals typed as `t`'s element; any
    other value unchanged."""
    entry = b.__dict__.get("_weak_choices", {}).get(id(v)) if isinstance(v, ir.Var) else None
    if entry is None or entry[0] is not v or v.type.elem == t.elem:
        return v
    _, cond, x, y = entry
    return weak_choice(b, cond, x, y, with_elem(v.type, t.elem))


def weak_names(b: Builder) -> WeakNames | None:
    """The translation's names seeded by literals (see weak.py), if it tracks them."""
    return b.__dict__.get("_weak_names")


def line_of(b: Builder):
    return b.loc[1] if b.loc else "?"


def _promotes(a: Scalar, b: Scalar) -> bool:
    try:
        promote(a, b)
    except PromotionError:
        return False
    return True


def _typed_literal(b: Builder, x, other, w: WeakNames | None):
    """A literal beside the runtime value `other`, typed as it (weak typing). Where `other`
    is a name seeded by a literal (see weak.py), a float literal decides it a float, and a
    refusal says why it has its type."""
    if w is None:
        return literal(b, x, other.type)
    if isinstance(x, float) and other.type.elem.is_int:
        w.meet_type(other, f32, line_of(b))
    try:
        return literal(b, x, other.type)
    except ArithError as e:
        raise ArithError(f"{e}{w.explain_value(other)}") from None


def pair(b: Builder, x, y):
    w = weak_names(b)
    if is_runtime(x) and is_runtime(y) and x.type.elem != y.type.elem:
        x, y = retype_weak(b, x, y.type), retype_weak(b, y, x.type)
        if w is not None and x.type.elem != y.type.elem and not _promotes(x.type, y.type):
            w.meet(x, y, line_of(b), f"cannot mix {x.type.elem} and {y.type.elem} "
                   f"implicitly; cast one side explicitly (e.g. {x.type.elem.name}(x))")
    if is_runtime(x) and not is_runtime(y):
        y = _typed_literal(b, y, x, w)
    elif is_runtime(y) and not is_runtime(x):
        x = _typed_literal(b, x, y, w)
    try:
        t = promote(x.type, y.type)
    except PromotionError as e:
        raise ArithError(str(e)) from None
    return b.to_type(x, t), b.to_type(y, t), t


_OP_TEXT = {
    "add": "'+'", "sub": "'-'", "mul": "'*'", "truediv": "'/'", "floordiv": "'//'",
    "mod": "'%'", "pow": "'**'", "and": "'&'", "or": "'|'", "xor": "'^'", "shl": "'<<'",
    "shr": "'>>'", "eq": "'=='", "ne": "'!='", "lt": "'<'", "le": "'<='", "gt": "'>'",
    "ge": "'>='",
}


def fold(op: str, x, y):
    """Python's operator on two compile-time values of the allowed kinds."""
    if not foldable(op, x, y):
        raise ArithError(refuse(_OP_TEXT.get(op, op), x, y))
    try:
        return _PY_BINOPS[op](x, y)
    except ZeroDivisionError:
        raise ArithError(f"{_OP_TEXT[op]} by zero in a compile-time expression "
                         f"({x!r} {_OP_TEXT[op][1:-1]} {y!r})") from None
    except (TypeError, ValueError, OverflowError) as e:
        raise ArithError(f"{_OP_TEXT.get(op, op)} on {describe(x)} and {describe(y)} "
                         f"failed: {e}") from None


def binop(b: Builder, op: str, x, y):
    if not is_runtime(x) and not is_runtime(y):
        return fold(op, x, y)
    w = weak_names(b)
    if w is None:
        return _binop(b, op, x, y)
    if op == "sub" and is_runtime(x):
        w.decrease(x, line_of(b))
    r = _binop(b, op, x, y)
    if op not in ir.COMPARE_OPS:
        w.tag(r, x, y)
    return r


def _binop(b: Builder, op: str, x, y):
    for v in (x, y):
        if not is_runtime(v) and not is_number(v):
            raise ArithError(refuse(_OP_TEXT.get(op, op), v))
    if is_runtime(x) and is_runtime(y) and x.type.elem != y.type.elem:
        x, y = retype_weak(b, x, y.type), retype_weak(b, y, x.type)
    if op in ir.COMPARE_OPS:
        exact = _compare_int(b, op, x, y)
        if exact is not None:
            return exact
    if op == "pow" and is_number(y) and not is_runtime(y) and float(y) == int(y) \
            and 0 <= int(y) <= 4 and is_runtime(x):
        return _int_power(b, x, int(y))
    x, y, t = pair(b, x, y)
    e = t.elem
    if op == "truediv":
        if not e.is_float:
            raise ArithError(f"'/' on {t} is not defined: use '//' for integer division, or "
                             f"cast to a float type first")
        return b.binary("div", x, y)
    if op == "floordiv":
        return _floordiv(b, x, y, t)
    if op == "mod":
        return _mod(b, x, y, t)
    if op == "pow":
        if not e.is_float:
            raise ArithError(f"'**' on {t} needs a float type or a small constant exponent")
        return b.binary("pow", x, y)
    if op in ("and", "or", "xor"):
        if e.is_float:
            raise ArithError(f"bitwise '{op}' is not defined on {t}")
        return b.binary(op, x, y)
    if op in ("shl", "shr"):
        if not e.is_int:
            raise ArithError(f"shift is not defined on {t}")
        if isinstance(y, ir.Const) and y.value < 0:
            raise ArithError(f"negative shift count {y.value} (Python raises ValueError)")
        return b.shift(op, x, y)  # Python's meaning: a count >= the width shifts all out
    if op in ir.COMPARE_OPS or op in ("add", "sub", "mul", "min", "max"):
        if e.is_bool and op in ("add", "sub", "mul"):
            raise ArithError(f"arithmetic '{op}' is not defined on bool; cast to an int first")
        return b.binary(op, x, y)
    raise ArithError(f"unsupported operator {op}")


_SWAP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
# the result of `unsigned OP negative`: an unsigned value is greater than any negative one
_VS_NEGATIVE = {"lt": False, "le": False, "gt": True, "ge": True, "eq": False, "ne": True}


def _compare_int(b: Builder, op: str, x, y):
    """Integer comparisons are exact, as in Python, without needing a wider type than the
    operands have (targets without i64 must compare a u32 with an i32): a literal outside the
    other side's range decides the comparison at compile time; an unsigned value compared
    with a signed one is compared unsigned where the signed side is non-negative."""
    if not is_runtime(x):
        return _compare_int(b, _SWAP[op], y, x)
    t = x.type
    if not t.elem.is_int:
        return None
    if not is_runtime(y):
        if isinstance(y, bool) or not isinstance(y, int):
            return None
        lo, hi = t.elem.int_range
        if lo <= y <= hi:
            return None
        if t.lanes != 1:
            return b.const(_PY_BINOPS[op](lo if y < lo else hi, y), with_elem(t, boolean))
        return _PY_BINOPS[op](lo if y < lo else hi, y)  # x is within [lo, hi]: decided
    u = y.type
    if not u.elem.is_int or t.elem.kind == u.elem.kind or t.lanes != u.lanes:
        return None  # same signedness: promotion is exact; lines of other sizes: an error
    if isinstance(x, ir.Const) or isinstance(y, ir.Const):
        c, other = (x, y) if isinstance(x, ir.Const) else (y, x)
        if t.lanes == 1:  # a typed constant decides like a literal
            r = _compare_int(b, op if c is y else _SWAP[op], other, int(c.value))
            if r is not None:
                return r
    if t.elem.kind != "uint":
        return _compare_int(b, _SWAP[op], y, x)
    # x unsigned, y signed: y < 0 decides; otherwise both compare as the wider unsigned
    ut = SCALARS[f"u{max(t.elem.bits, u.elem.bits)}"]
    unsigned = b.binary(op, b.to_type(x, with_elem(t, ut)), b.to_type(y, with_elem(u, ut)))
    negative = b.binary("lt", y, b.const(0, u))
    decided = b.const(_VS_NEGATIVE[op], unsigned.type)
    return b.select(negative, decided, unsigned)


def _int_power(b: Builder, x, n: int):
    if n == 0:
        return b.const(1, x.type)
    acc = x
    for _ in range(n - 1):
        acc = b.binary("mul", acc, x)
    return acc


def _floordiv(b: Builder, x, y, t: Type):
    if t.elem.is_float:
        return _float_floordiv(b, x, y)
    q = b.binary("div", x, y)
    if t.elem.kind == "uint":
        return q
    # floor division = truncated quotient - 1 where the remainder is nonzero and signs differ
    r = b.binary("rem", x, y)
    fix = b.binary("and", b.binary("ne", r, 0), b.binary("lt", b.binary("xor", r, y), 0))
    return b.select(fix, b.binary("sub", q, 1), q)


def _float_floordiv(b: Builder, x, y):
    """Python's float `//` (CPython's float_floor_div, NumPy's npy_divmod): the exact
    quotient of x - fmod(x, y), floored and rounded back where the division rounded past an
    integer. floor(x / y) differs: 1.0 // 0.1 is 9.0 (x / y rounds to 10.0), inf // 1.0 is
    nan. A zero y gives x / y, as NumPy's (Python raises)."""
    mod = b.binary("rem", x, y)  # C's fmod: exact, the sign of x
    div = b.binary("div", b.binary("sub", x, mod), y)
    fix = b.binary("and", b.binary("ne", mod, 0.0),
                   b.binary("ne", b.binary("lt", y, 0.0), b.binary("lt", mod, 0.0)))
    div = b.select(fix, b.binary("sub", div, 1.0), div)
    fl = b.unary("floor", div)
    fl = b.select(b.binary("gt", b.binary("sub", div, fl), 0.5), b.binary("add", fl, 1.0), fl)
    q = b.binary("div", x, y)
    zero = b.binary("copysign", b.const(0.0, x.type if is_runtime(x) else y.type), q)
    r = b.select(b.binary("eq", div, 0.0), zero, fl)
    return b.select(b.binary("eq", y, 0.0), q, r)


def _mod(b: Builder, x, y, t: Type):
    r = b.binary("rem", x, y)
    if t.elem.kind == "uint":
        return r
    # Python's modulo takes the divisor's sign
    zero = b.const(0, t)
    fix = b.binary("and", b.binary("ne", r, zero),
                   b.binary("ne", b.binary("lt", r, zero), b.binary("lt", y, zero)))
    return b.select(fix, b.binary("add", r, y), r)


def unop(b: Builder, op: str, x):
    if not is_runtime(x):
        if not (is_number(x) or (op == "not" and truthable(x))):
            raise ArithError(refuse({"neg": "unary '-'", "pos": "unary '+'", "invert": "'~'",
                                     "not": "'not'"}[op], x))
        return {"neg": operator.neg, "pos": operator.pos, "invert": operator.invert,
                "not": operator.not_}[op](x)
    e = x.type.elem
    if op == "pos":
        return x
    if op == "neg":
        if e.is_bool:
            raise ArithError("cannot negate a bool")
        w = weak_names(b)
        if w is None:
            return b.unary("neg", x)
        w.decrease(x, line_of(b))
        r = b.unary("neg", x)
        w.tag(r, x)
        return r
    if op == "invert":
        if e.is_float:
            raise ArithError(f"'~' is not defined on {x.type}")
        return b.unary("not" if e.is_bool else "bitnot", x)
    if op == "not":
        return b.unary("not", truth(b, x))
    raise ArithError(op)


def truth(b: Builder, x):
    """A runtime condition as bool (ints compare != 0; floats and lines are rejected)."""
    if not is_runtime(x):
        if not truthable(x):
            raise ArithError(f"a condition must be a value, got {describe(x)}")
        return bool(x)
    t = x.type
    if t.lanes != 1:
        raise ArithError(f"a condition must be a scalar bool, got {t}")
    if t.elem.is_bool:
        return x
    if t.elem.is_int:
        return b.binary("ne", x, 0)
    raise ArithError(f"a condition must be bool, got {t} (compare it, e.g. x != 0.0)")


def math1(b: Builder, op: str, x):
    x = as_runtime(b, x)
    if op in ir.FLOAT_ONLY_UNARY and not x.type.elem.is_float:
        raise ArithError(f"{op} needs a float argument, got {x.type}; cast it first")
    if op == "abs" and x.type.elem.kind == "uint":
        return x
    if op == "abs" and x.type.elem.is_bool:  # Python: abs(True) is the int 1
        return b.cast(x, with_elem(x.type, i32))
    return b.unary(op, x)


def math2(b: Builder, name: str, op: str, x, y):
    """A two-argument float function (atan2, hypot, copysign; fmod is the IR's float rem):
    the operands promoted as in arithmetic (a Python number takes the other's type), which
    must be floats."""
    for v in (x, y):
        if not is_runtime(v) and not is_number(v):
            raise ArithError(refuse(name, v))
    x, y, t = pair(b, x, y)
    if not t.elem.is_float:
        raise ArithError(f"{name} needs float arguments, got {t}; cast them first "
                         f"(f32(i))")
    return b.binary(op, x, y)


def minmax(b: Builder, op: str, x, y):
    """Python's min(x, y) / max(x, y): y if y < x (y > x) else x. For floats that is what
    decides a NaN (min(nan, 1.0) is nan, min(1.0, nan) is 1.0) and a signed zero (the first
    of equal values), so floats are a compare and a select (one minps/maxps on x86); ints
    are the IR's min/max."""
    if not is_runtime(x) and not is_runtime(y):
        if not (is_number(x) and is_number(y)):
            raise ArithError(refuse(op, x, y))
        return (min if op == "min" else max)(x, y)
    given = (x, y)
    x, y, t = pair(b, x, y)
    if t.elem.is_float:
        r = b.select(b.binary("lt" if op == "min" else "gt", y, x), y, x)
    elif t.elem.is_bool:  # False < True: max is or, min is and (a bool, as Python's)
        return b.binary("or" if op == "max" else "and", x, y)
    else:
        r = b.binary(op, x, y)
    w = weak_names(b)
    if w is not None:
        w.tag(r, *given)
    return r


def nonfinite_test(b: Builder, op: str, x):
    """math.isnan / isinf / isfinite of a runtime float (ints: never nan or inf)."""
    x = as_runtime(b, x)
    if not x.type.elem.is_float:
        if x.type.elem.is_bool:
            raise ArithError(f"{op} needs a number, got {x.type}")
        if x.type.lanes == 1:
            return op == "isfinite"  # decided, as Python decides it
        return b.const(op == "isfinite", with_elem(x.type, boolean))
    if op == "isnan":
        return b.binary("ne", x, x)
    mag = b.unary("abs", x)
    return b.binary("eq" if op == "isinf" else "lt", mag, b.const(math.inf, x.type))


def _convert_literal(x, e: Scalar):
    """A compile-time number converted as Python's bool()/int()/float() would before it is
    typed e (`u32(True)` is 1, `boolean(2)` is True, `i32(2.7)` is 2: toward zero, as the
    runtime cast)."""
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, bool):
        return x if e.is_bool else int(x) if e.is_int else float(x)
    if isinstance(x, int | float) and e.is_bool:
        return bool(x)
    if isinstance(x, float) and e.is_int:
        if not math.isfinite(x):
            raise ArithError(f"cannot convert {x} to {e}")
        return int(x)
    return x


def cast(b: Builder, x, t: Type):
    if not is_runtime(x):
        x = literal(b, _convert_literal(x, t.elem), t if t.lanes == 1 else t.elem)
        if x.type == t:
            return x
    if x.type == t:
        return x
    if x.type.lanes != 1 and x.type.lanes != t.lanes:
        if t.lanes == 1:  # f32(line) converts each lane: keep the line's size
            t = with_elem(x.type, t.elem)
        else:
            raise ArithError(f"cannot cast {x.type} to {t}: line sizes differ")
    return b.cast(x, t)

"""Calls to the language's functions: math, casts, memory, barriers, atomics, plane ops.

Each intrinsic is keyed by the identity of the Python object a kernel calls (`cb.sqrt`,
`math.sqrt`, `abs`, ...). With only compile-time arguments the Python function runs."""
from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from dataclasses import dataclass

from cube_ir import ir
from cube_ir.types import boolean, u32

from .. import lang
from ..errors import CapabilityError
from .arith import ArithError, as_runtime, is_runtime
from .kinds import describe
from .values import MemRef


@dataclass
class Intrinsic:
    fn: object
    handler: Callable


INTRINSICS: dict[int, Intrinsic] = {}


def _register(fns, handler):
    for fn in fns:
        INTRINSICS[id(fn)] = Intrinsic(fn, handler)


def _nargs(tr, args, kwargs, node, n, name):
    if kwargs or len(args) != n:
        raise tr.error(f"{name} takes {n} argument{'s' if n != 1 else ''}", node)


def _all_comptime(args) -> bool:
    return not any(is_runtime(a) or isinstance(a, MemRef) for a in args)


def _fold(tr, name, pyfn, args, node):
    """Python's function on compile-time arguments; its error (math.acos(2.0): a math domain
    error) is a located one."""
    try:
        return pyfn(*args)
    except (ValueError, OverflowError, TypeError, ZeroDivisionError) as e:
        shown = ", ".join(repr(a) for a in args)
        raise tr.error(f"{name}({shown}) at compile time failed: {e}", node) from None


def _unary(op, pyfn, lowering: str = "math1"):
    """A one-argument function: Python's with compile-time values, else arith.<lowering>."""
    def handler(tr, args, kwargs, node):
        _nargs(tr, args, kwargs, node, 1, op)
        if _all_comptime(args):
            return _fold(tr, op, pyfn, args, node)
        from . import arith
        return getattr(arith, lowering)(tr.b, op, args[0])
    return handler


def _binary_math(name, op, pyfn):
    """A two-argument float function (atan2, hypot, fmod as the IR's float rem, copysign):
    Python's with compile-time values, else arith.math2."""
    def handler(tr, args, kwargs, node):
        _nargs(tr, args, kwargs, node, 2, name)
        if _all_comptime(args):
            return _fold(tr, name, pyfn, args, node)
        from . import arith
        return arith.math2(tr.b, name, op, args[0], args[1])
    return handler


_MATH1 = {
    "sqrt": (lang.sqrt, math.sqrt), "rsqrt": (lang.rsqrt,), "exp": (lang.exp, math.exp),
    "log": (lang.log, math.log), "log1p": (lang.log1p, math.log1p),
    "sin": (lang.sin, math.sin), "cos": (lang.cos, math.cos), "tanh": (lang.tanh, math.tanh),
    "erf": (lang.erf, math.erf), "floor": (lang.floor, math.floor),
    "ceil": (lang.ceil, math.ceil), "round": (lang.round, builtins.round),
    "abs": (lang.abs, builtins.abs, math.fabs),
}
# the same, added for ports from Numba/Triton/Warp (trunc keeps the float type, as floor)
_MATH1_MORE = {
    "tan": (lang.tan, math.tan), "asin": (lang.asin, math.asin),
    "acos": (lang.acos, math.acos), "atan": (lang.atan, math.atan),
    "sinh": (lang.sinh, math.sinh), "cosh": (lang.cosh, math.cosh),
    "asinh": (lang.asinh, math.asinh), "acosh": (lang.acosh, math.acosh),
    "atanh": (lang.atanh, math.atanh), "log2": (lang.log2, math.log2),
    "log10": (lang.log10, math.log10), "exp2": (lang.exp2, math.exp2),
    "expm1": (lang.expm1, math.expm1), "trunc": (lang.trunc, math.trunc),
}
for _op, _fns in {**_MATH1, **_MATH1_MORE}.items():
    _register(_fns, _unary(_op, _fns[0]))

_MATH2 = {"atan2": ("atan2", (lang.atan2, math.atan2)),
          "hypot": ("hypot", (lang.hypot, math.hypot)),
          "fmod": ("rem", (lang.fmod, math.fmod)),
          "copysign": ("copysign", (lang.copysign, math.copysign))}
for _name, (_op, _fns) in _MATH2.items():
    _register(_fns, _binary_math(_name, _op, _fns[0]))


def _minmax(op):
    def handler(tr, args, kwargs, node):
        if not kwargs and len(args) == 1 and isinstance(args[0], tuple):  # max(iterable)
            if not args[0]:
                raise tr.error(f"{op}() of an empty tuple", node)
            args = args[0]
            _check_values(tr, op, args, node)
            if len(args) == 1:
                return args[0]
        if kwargs or len(args) < 2:
            raise tr.error(f"{op} takes two or more values (or one tuple of them; no key=)",
                           node)
        from . import arith
        acc = args[0]
        for a in args[1:]:  # left to right, as Python's min/max
            acc = arith.minmax(tr.b, op, acc, a)
        return acc
    return handler


_register((lang.min, builtins.min), _minmax("min"))
_register((lang.max, builtins.max), _minmax("max"))

# the builtins that take a tuple (an iterable) rather than values; the translator lets a
# tuple through to them (`_check_intrinsic_args`)
TAKES_TUPLE = frozenset(("min", "max", "any", "all", "sum"))


def _check_values(tr, name: str, values, node) -> None:
    for v in values:
        if isinstance(v, (tuple, MemRef)):
            raise tr.error(f"{name} takes values, got {describe(v)} in its tuple", node)


def _one_tuple(tr, name: str, args, kwargs, node, most: int = 1):
    if kwargs or not 1 <= len(args) <= most or not isinstance(args[0], tuple):
        raise tr.error(f"{name}() takes one tuple{' (and a start value)' if most > 1 else ''} "
                       f"in a kernel, e.g. {name}((a, b, c))", node)
    _check_values(tr, name, args[0], node)
    return args[0]


def _truths(is_all: bool):
    """any()/all() of a tuple: Python's, left to right, stopping at the deciding value; a
    runtime value must be a condition as in `if` (a bool, or an int compared with 0). The
    truth of an IR value as a Python object (always true) used to decide them."""
    name = "all" if is_all else "any"

    def handler(tr, args, kwargs, node):
        from . import arith
        acc = is_all
        for v in _one_tuple(tr, name, args, kwargs, node):
            try:
                t = arith.truth(tr.b, v)
            except ArithError as e:
                raise tr.error(f"{name}(): {e}", node) from None
            if not is_runtime(t):
                if t != is_all:
                    return t  # decided at compile time, whatever came before
                continue
            acc = t if not is_runtime(acc) else tr.b.binary("and" if is_all else "or", acc, t)
        return acc
    return handler


def _sum(tr, args, kwargs, node):
    """sum(tuple, start=0) as Python's: ((start + t0) + t1) + ..."""
    from . import arith
    values = _one_tuple(tr, "sum", args, kwargs, node, most=2)
    acc = args[1] if len(args) == 2 else 0
    for v in values:
        acc = arith.binop(tr.b, "add", acc, v)
    return acc


_register((builtins.all,), _truths(True))
_register((builtins.any,), _truths(False))
_register((builtins.sum,), _sum)


for _op in ("isnan", "isinf", "isfinite"):
    _register((getattr(lang, _op), getattr(math, _op)),
              _unary(_op, getattr(math, _op), "nonfinite_test"))


def _pow(tr, args, kwargs, node):
    _nargs(tr, args, kwargs, node, 2, "pow")
    from . import arith
    return arith.binop(tr.b, "pow", args[0], args[1])


_register((lang.pow, math.pow, builtins.pow), _pow)


def _ternary(op):
    def handler(tr, args, kwargs, node):
        _nargs(tr, args, kwargs, node, 3, op)
        if _all_comptime(args):
            return getattr(lang, op)(*args)
        from . import arith
        ref = next(a for a in args if is_runtime(a))
        vals = [as_runtime(tr.b, a, ref.type) for a in args]
        if op == "fma" and not all(v.type.elem.is_float for v in vals):
            raise ArithError("fma needs float arguments")
        x, y, _ = arith.pair(tr.b, vals[0], vals[1])
        x, z, _ = arith.pair(tr.b, x, vals[2])
        y, z, _ = arith.pair(tr.b, y, z)
        if op == "clamp" and (x.type.elem.is_float or x.type.elem.is_bool):
            # min(max(x, lo), hi), as Python's
            return arith.minmax(tr.b, "min", arith.minmax(tr.b, "max", x, y), z)
        return tr.b.ternary(op, x, y, z)
    return handler


_register((lang.fma,), _ternary("fma"))
_register((lang.clamp,), _ternary("clamp"))


def _select(tr, args, kwargs, node):
    _nargs(tr, args, kwargs, node, 3, "select")
    cond, a, b = args
    if not is_runtime(cond):
        from . import arith
        return a if arith.truth(tr.b, cond) else b
    return tr._select(cond, a, b, node)


_register((lang.select,), _select)


def _cast(tr, args, kwargs, node):
    _nargs(tr, args, kwargs, node, 2, "cast")
    from . import arith
    return arith.cast(tr.b, args[0], tr._resolve_type(args[1], node))


_register((lang.cast,), _cast)


def _alloc(kind):
    def handler(tr, args, kwargs, node):
        if kwargs or len(args) != 2:
            raise tr.error(f"cb.{kind}(T, n) takes an element type and a size", node)
        t = tr._resolve_type(args[0], node)
        from .indexing import alloc_dims
        n, dims = alloc_dims(tr, kind, args[1], node)
        mem = (tr.b.shared if kind == "SharedMemory" else tr.b.local)(t, n)
        feats = tr.target.features
        if kind == "SharedMemory" and feats is not None:
            total = sum(s.size * (s.type.elem.bits // 8) * s.type.lanes
                        for s in tr.b.kernel.shared)
            if total > feats.max_shared_bytes:
                raise CapabilityError(f"shared memory of {total} bytes exceeds the "
                                      f"{tr.target.name} limit of {feats.max_shared_bytes} "
                                      f"bytes", tr.loc(node), capability="max_shared_bytes",
                                      target=tr.target.name)
        return MemRef(mem, dims)
    return handler


_register((lang.SharedMemory,), _alloc("SharedMemory"))
_register((lang.LocalArray,), _alloc("LocalArray"))


def _sync(tr, args, kwargs, node):
    _nargs(tr, args, kwargs, node, 0, "sync_cube")
    tr.b.sync_cube()


_register((lang.sync_cube,), _sync)


def _atomic(op):
    def handler(tr, args, kwargs, node):
        n = 4 if op == "cas" else 3
        if kwargs or len(args) != n:
            sig = "(array, index, compare, value)" if op == "cas" else "(array, index, value)"
            raise tr.error(f"cb.atomic_{op}{sig}", node)
        ref = args[0]
        if not isinstance(ref, MemRef):
            raise tr.error(f"the first argument of cb.atomic_{op} must be an array", node)
        t = ref.type
        if t.lanes != 1:
            raise tr.error(f"atomics work on scalar elements, not {t}", node)
        # which (op, type, memory space) a target can do is the capability table's to say
        # (cube/capabilities.py checks the IR): a local array's atomics are lowered anywhere
        if op in ("and", "or", "xor") and not t.elem.is_int:
            raise tr.error(f"atomic_{op} needs an integer array, got {t}", node)
        idx = tr._index(args[1], node)
        if op == "cas":
            cmp = tr._convert_store(args[2], t, node)
            value = tr._convert_store(args[3], t, node)
        else:
            cmp, value = None, tr._convert_store(args[2], t, node)
        return tr.b.atomic(op, ref.mem, idx, value, cmp)
    return handler


for _op in ("add", "sub", "min", "max", "and", "or", "xor", "exchange", "cas"):
    _register((getattr(lang, "atomic_" + _op),), _atomic(_op))


def _plane(op):
    with_lane = op in ir.PLANE_OPS_WITH_LANE

    def handler(tr, args, kwargs, node):
        n = 2 if with_lane else 1
        _nargs(tr, args, kwargs, node, n, "plane_" + op)
        feats = tr.target.features
        if feats is not None and not feats.plane_ops:
            raise CapabilityError(f"plane_{op} is not supported by the {tr.target.name} "
                                  f"target (it has no plane (warp/subgroup) operations)",
                                  tr.loc(node), capability="plane_ops",
                                  target=tr.target.name)
        value = as_runtime(tr.b, args[0])
        if op in ("all", "any"):
            if value.type.elem != boolean:
                from . import arith
                value = arith.truth(tr.b, value)
        elif value.type.elem.is_bool:
            raise tr.error(f"plane_{op} needs a numeric value, got bool", node)
        lane = None
        if with_lane:
            lane = as_runtime(tr.b, args[1], u32)
            if not lane.type.elem.is_int or lane.type.lanes != 1:
                raise tr.error("the lane argument must be an integer", node)
            if lane.type != u32:
                lane = tr.b.cast(lane, u32)
        return tr.b.plane(op, value, lane)
    return handler


for _op in ir.PLANE_OPS:
    _register((getattr(lang, "plane_" + _op),), _plane(_op))

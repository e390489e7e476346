"""Verification: operand types, scopes, and barrier placement (uniform control flow).

`verify(kernel)` raises `IRError` (with the offending op's loc) on the first problem.
`uniform_vars(kernel)` is the uniformity analysis on its own: the vars that hold the same value
in every unit of a cube (backends may use it, e.g. to keep such values scalar)."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from . import ir
from .errors import IRError
from .ir import (
    Assign,
    Atomic,
    Binary,
    Break,
    Builtin,
    Cast,
    Const,
    Continue,
    Extract,
    If,
    Insert,
    Kernel,
    Load,
    LocalArray,
    Loop,
    Meta,
    Param,
    Plane,
    Range,
    Return,
    Select,
    SharedArray,
    Store,
    SyncCube,
    Ternary,
    Unary,
    Var,
)
from .printer import format_op
from .types import Type, boolean, promote, u32, with_elem

# plane ops whose result differs between lanes even for a uniform input
_PLANE_SCANS = frozenset(("inclusive_sum", "exclusive_sum", "inclusive_prod", "exclusive_prod"))


def verify(kernel: Kernel, barriers: bool = True) -> None:
    """Raise IRError on the first ill-typed op, misplaced break/continue, var read but never
    assigned, or (with `barriers`) barrier that not every unit of a cube is sure to reach.
    A pass that moves no control flow checks its output without `barriers`."""
    _TypeChecker(kernel).run()
    _check_scopes(kernel)
    if barriers:
        _check_barriers(kernel, _Uniformity(kernel))


def uniform_vars(kernel: Kernel) -> set[Var]:
    """Every var of the kernel that holds the same value in every unit of a cube."""
    u = _Uniformity(kernel)
    out = set(kernel.vars)
    for op in ir.walk(kernel.body):
        out.update(v for v in ir.reads(op) if isinstance(v, Var))
        w = ir.writes(op)
        if w is not None:
            out.add(w)
    return {v for v in out if v not in u.why}


def where(loc) -> str:
    """A location for a message: `file.py:12 (`source line`)`."""
    if not loc:
        return "<unknown location>"
    filename, line = loc[0], loc[1]
    src = loc[3].strip() if len(loc) > 3 and loc[3] else ""
    return f"{os.path.basename(str(filename))}:{line}" + (f" (`{src}`)" if src else "")


def _fail(msg: str, op) -> IRError:
    return IRError(msg, getattr(op, "loc", None))


def _desc(op) -> str:
    try:
        return f"`{format_op(op)}`"
    except TypeError:
        return type(op).__name__


# ---- types ---------------------------------------------------------------------------------


def _numeric(t: Type) -> bool:
    return not t.elem.is_bool


def _scalar_int(t: Type) -> bool:
    return t.lanes == 1 and t.elem.is_int


class _TypeChecker:
    def __init__(self, kernel: Kernel):
        self.k = kernel
        self.mems = {id(m) for m in (*kernel.params, *kernel.shared, *kernel.locals)}

    def run(self) -> None:
        for op in ir.walk(self.k.body):
            for v in ir.reads(op):
                self._value(v, op)
            self._op(op)

    def _value(self, v, op) -> None:
        if isinstance(v, Var):
            return
        if not isinstance(v, Const):
            raise _fail(f"{_desc(op)}: operand {v!r} is not a Var or Const", op)
        e, x = v.type.elem, v.value
        if not isinstance(x, (bool, int, float, np.bool_, np.integer, np.floating)):
            raise _fail(f"{_desc(op)}: constant {x!r} is not a number", op)
        if e.is_bool:
            ok = x in (0, 1)
        elif e.is_int:
            lo, hi = e.int_range
            whole = not isinstance(x, (float, np.floating)) or float(x).is_integer()
            ok = whole and lo <= int(x) <= hi
        else:
            ok = True
        if not ok:
            raise _fail(f"{_desc(op)}: constant {x!r} does not fit {v.type}", op)

    def _mem(self, mem, op) -> None:
        if not isinstance(mem, (Param, SharedArray, LocalArray)):
            raise _fail(f"{_desc(op)}: {mem!r} is not a memory", op)
        if id(mem) not in self.mems:
            raise _fail(f"{_desc(op)}: {mem!r} is not declared in kernel '{self.k.name}'", op)

    def _index(self, op) -> None:
        if not _scalar_int(op.index.type):
            raise _fail(f"{_desc(op)}: an index must be a scalar integer, got {op.index.type}",
                        op)

    def _op(self, op) -> None:
        bad = lambda msg: _fail(f"{_desc(op)}: {msg}", op)
        match op:
            case Assign(dst=d, src=s):
                if s.type != d.type:
                    raise bad(f"assigns a {s.type} value to a {d.type} variable")
            case Unary(dst=d, op=o, a=a):
                if o not in ir.UNARY_OPS:
                    raise bad(f"unknown unary op '{o}'")
                want = with_elem(a.type, boolean) if o == "not" else a.type
                if d.type != want:
                    raise bad(f"the result should be {want}, not {d.type}")
                if o in ir.FLOAT_ONLY_UNARY and not a.type.is_float:
                    raise bad(f"{o} needs a float operand, got {a.type}")
                if o == "not" and a.type.is_float:
                    raise bad(f"'not' needs a bool or integer operand, got {a.type}")
                if o == "bitnot" and a.type.is_float:
                    raise bad(f"bitnot needs an integer or bool operand, got {a.type}")
                if o in ("neg", "abs") and not _numeric(a.type):
                    raise bad(f"{o} needs a numeric operand, got {a.type}")
            case Binary(dst=d, op=o, a=a, b=b):
                self._binary(op, d, o, a, b, bad)
            case Ternary(dst=d, op=o, a=a, b=b, c=c):
                if o not in ir.TERNARY_OPS:
                    raise bad(f"unknown ternary op '{o}'")
                if not (a.type == b.type == c.type == d.type):
                    raise bad(f"operands and result must share one type, got {a.type}, "
                              f"{b.type}, {c.type} -> {d.type}")
                if o == "fma" and not d.type.is_float:
                    raise bad(f"fma needs floats, got {d.type}")
                if o == "clamp" and not _numeric(d.type):
                    raise bad(f"clamp needs numbers, got {d.type}")
            case Select(dst=d, cond=c, a=a, b=b):
                if not (a.type == b.type == d.type):
                    raise bad(f"both choices and the result must share one type, got "
                              f"{a.type}, {b.type} -> {d.type}")
                if c.type != boolean and c.type != with_elem(d.type, boolean):
                    raise bad(f"the condition must be bool or a line of bool matching "
                              f"{d.type}, got {c.type}")
            case Cast(dst=d, a=a):
                if a.type.lanes not in (1, d.type.lanes):
                    raise bad(f"cannot cast {a.type} to {d.type}: line sizes differ")
            case ir.Bitcast(dst=d, a=a):
                s, e = a.type.elem, d.type.elem
                if (a.type.lanes != d.type.lanes or s.bits != e.bits or s.bits not in (32, 64)
                        or s.is_bool or e.is_bool):
                    raise bad(f"cannot bitcast {a.type} to {d.type}: 32/64-bit floats and "
                              f"ints of one width and line size only")
            case Extract(dst=d, vec=v, lane=k):
                if not 0 <= k < v.type.lanes:
                    raise bad(f"lane {k} is out of range for {v.type}")
                if d.type != v.type.elem:
                    raise bad(f"the result must be {v.type.elem}, got {d.type}")
            case Insert(dst=d, vec=v, lane=k, value=x):
                if not 0 <= k < v.type.lanes:
                    raise bad(f"lane {k} is out of range for {v.type}")
                if d.type != v.type or x.type != v.type.elem:
                    raise bad(f"inserting {x.type} into {v.type} giving {d.type}")
            case Load(dst=d, mem=m):
                self._mem(m, op)
                self._index(op)
                if d.type != m.type:
                    raise bad(f"loads {m.type} from {m!r} into a {d.type} variable")
            case Store(mem=m, value=x):
                self._mem(m, op)
                self._index(op)
                if isinstance(m, Param) and m.kind == "scalar":
                    raise bad(f"the scalar argument '{m.name}' is read-only")
                if x.type != m.type:
                    raise bad(f"stores a {x.type} value into memory of {m.type}")
            case Meta(dst=d, what=w, mem=m, dim=dim):
                self._mem(m, op)
                if not isinstance(m, Param) or m.kind == "scalar":
                    raise bad(f"{w} needs an array or tensor argument, got {m!r}")
                if w not in ("len", "shape", "stride"):
                    raise bad(f"unknown metadata '{w}'")
                if w != "len" and (m.kind != "tensor" or dim is None
                                   or not _scalar_int(dim.type)):
                    raise bad(f"{w} needs a tensor and an integer dimension")
                if d.type != u32:
                    raise bad(f"metadata is u32, not {d.type}")
            case Builtin(dst=d, name=n):
                if n not in ir.BUILTINS:
                    raise bad(f"unknown builtin '{n}'")
                if d.type != u32:
                    raise bad(f"builtins are u32, not {d.type}")
            case Atomic():
                self._atomic(op, bad)
            case Plane(dst=d, op=o, value=x, lane=lane):
                if o not in ir.PLANE_OPS:
                    raise bad(f"unknown plane op '{o}'")
                if d.type != x.type:
                    raise bad(f"result type {d.type} differs from the operand's {x.type}")
                if o in ("all", "any") and not x.type.is_bool:
                    raise bad(f"plane_{o} needs a bool value, got {x.type}")
                if o not in ("all", "any") and x.type.is_bool:
                    raise bad(f"plane_{o} needs a numeric value, got {x.type}")
                if (lane is not None) != (o in ir.PLANE_OPS_WITH_LANE):
                    raise bad(f"plane_{o} {'needs' if lane is None else 'takes no'} lane")
                if lane is not None and not _scalar_int(lane.type):
                    raise bad(f"the lane must be a scalar integer, got {lane.type}")
            case If(cond=c):
                if c.type != boolean:
                    raise bad(f"an if condition must be a scalar bool, got {c.type}")
            case Range(var=v, start=s, end=e, step=step):
                if not (_scalar_int(s.type) and _scalar_int(e.type) and _scalar_int(v.type)):
                    raise bad(f"range bounds and variable must be scalar integers, got "
                              f"{s.type}, {e.type}, {v.type}")
                if not isinstance(step, int) or step == 0:
                    raise bad(f"range step must be a nonzero int, got {step!r}")

    def _binary(self, op, d, o, a, b, bad) -> None:
        if o not in ir.BINARY_OPS:
            raise bad(f"unknown binary op '{o}'")
        # the IR contract is stricter than promotion: the builder casts both sides to one type
        if a.type != b.type:
            try:
                promote(a.type, b.type)
                hint = "cast to the promoted type first"
            except TypeError as e:
                hint = str(e)
            raise bad(f"operands must share one type, got {a.type} and {b.type} ({hint})")
        t = a.type
        want = with_elem(t, boolean) if o in ir.COMPARE_OPS else t
        if d.type != want:
            raise bad(f"result type {d.type} should be {want}")
        if o in ("and", "or", "xor"):
            if t.is_float:
                raise bad(f"bitwise {o} needs integers or bools, got {t}")
        elif o in ("shl", "shr"):
            if not t.is_int:
                raise bad(f"{o} needs integers, got {t}")
        elif o not in ir.COMPARE_OPS and t.is_bool:
            raise bad(f"{o} is not defined on {t}")
        if o in ir.FLOAT_ONLY_BINARY and not t.is_float:
            raise bad(f"{o} needs float operands, got {t}")

    def _atomic(self, op: Atomic, bad) -> None:
        m = op.mem
        self._mem(m, op)
        self._index(op)
        if isinstance(m, Param) and m.kind == "scalar":
            raise bad(f"the scalar argument '{m.name}' cannot be updated atomically")
        if op.op not in ir.ATOMIC_OPS:
            raise bad(f"unknown atomic op '{op.op}'")
        t = m.type
        if t.lanes != 1 or t.is_bool:
            raise bad(f"atomics need a scalar int or float element type, got {t}")
        if op.op in ("and", "or", "xor") and not t.is_int:
            raise bad(f"atomic_{op.op} needs integers, got {t}")
        if op.value.type != t:
            raise bad(f"the value is {op.value.type}, the memory holds {t}")
        if (op.cmp is not None) != (op.op == "cas"):
            raise bad("only cas takes (and needs) a compare value")
        if op.cmp is not None and op.cmp.type != t:
            raise bad(f"the compare value is {op.cmp.type}, the memory holds {t}")
        if op.dst is not None and op.dst.type != t:
            raise bad(f"the result variable is {op.dst.type}, the memory holds {t}")


# ---- scopes --------------------------------------------------------------------------------


def _check_scopes(kernel: Kernel) -> None:
    written: set[Var] = set()
    range_vars: set[Var] = set()
    for op in ir.walk(kernel.body):
        w = ir.writes(op)
        if w is not None:
            written.add(w)
        if isinstance(op, Range):
            range_vars.add(op.var)
    for op in ir.walk(kernel.body):
        if not isinstance(op, Range) and ir.writes(op) in range_vars:
            raise _fail(f"{_desc(op)}: the loop variable {ir.writes(op)!r} is written only by "
                        f"its range", op)
        for v in ir.reads(op):
            if isinstance(v, Var) and v not in written:
                raise _fail(f"{_desc(op)} uses a value never assigned ({v!r})", op)
    _check_exits(kernel.body, 0)


def _check_exits(block: ir.Block, loops: int) -> None:
    for op in block:
        if isinstance(op, (Break, Continue)) and loops == 0:
            raise _fail(f"'{type(op).__name__.lower()}' outside a loop", op)
        inner = loops + 1 if isinstance(op, (Loop, Range)) else loops
        for child in ir.child_blocks(op):
            _check_exits(child, inner)


# ---- uniformity ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Divergence:
    """Why control flow at some point is divergent, for messages."""

    cause: object  # the If whose condition diverges, or the Range whose bounds do
    root: str  # what the condition depends on ("UNIT_POS", "the result of atomic_add", ...)
    loop: object = None  # set when some units leave `loop` early ...
    exit: object = None  # ... through this break/continue/return

    def text(self) -> str:
        if isinstance(self.cause, Range) and self.loop is None:
            return (f"the bounds of the range {_place(self.cause)} depend on {self.root}, "
                    f"so units run different numbers of iterations")
        s = (f"the condition {_place(self.cause)} depends on {self.root}, which is not the "
             f"same in every unit")
        if self.loop is not None:
            kind = type(self.exit).__name__.lower()
            what = "skip part of" if kind == "continue" else "leave"
            s += (f", so some units {what} the loop {_place(self.loop)} early (the {kind} "
                  f"{_place(self.exit)})")
        return s


def _place(op) -> str:
    """Where `op` is, for a message; without a location, what it is."""
    if op.loc:
        return f"at {where(op.loc)}"
    if isinstance(op, If):
        return f"`if {op.cond!r}`"
    if isinstance(op, Range):
        return f"`for {op.var!r} in range({op.start!r}, {op.end!r}, {op.step})`"
    return "(no source location)"


class _Uniformity:
    """Which vars are uniform across a cube. Flow-insensitive (a var is divergent if any of its
    writes is), iterated to a fixpoint because vars are mutable and loops carry values."""

    def __init__(self, kernel: Kernel):
        self.why: dict[Var, str] = {}  # divergent var -> the root it depends on
        self.local_why: dict[LocalArray, str] = {}  # local arrays holding divergent values
        self._loop_memo: dict[int, _Divergence | None] = {}
        while True:
            before = (len(self.why), len(self.local_why))
            self._loop_memo = {}
            self._block(kernel.body, None)
            if (len(self.why), len(self.local_why)) == before:
                break

    def root(self, v) -> str | None:
        return self.why.get(v) if isinstance(v, Var) else None

    def _first(self, values) -> str | None:
        for v in values:
            r = self.root(v)
            if r is not None:
                return r
        return None

    def cond_div(self, op: If) -> _Divergence | None:
        r = self.root(op.cond)
        return None if r is None else _Divergence(op, r)

    def range_div(self, op: Range) -> _Divergence | None:
        r = self._first((op.start, op.end))
        return None if r is None else _Divergence(op, r)

    def loop_div(self, op) -> _Divergence | None:
        """How `op` (Loop/Range) may be left early by some units only, if it may."""
        key = id(op)
        if key not in self._loop_memo:
            self._loop_memo[key] = None  # no recursion through itself
            found = self._exit_in(op.body, None, 0)
            self._loop_memo[key] = None if found is None else _Divergence(
                found[1].cause, found[1].root, op, found[0])
        return self._loop_memo[key]

    def _exit_in(self, block, ctl, depth):
        """The first exit of the enclosing loop taken under divergent control: (op, why)."""
        for op in block:
            if isinstance(op, (Break, Continue)) and depth == 0 and ctl is not None:
                return op, ctl
            if isinstance(op, Return) and ctl is not None:
                return op, ctl
            if isinstance(op, If):
                c = ctl or self.cond_div(op)
                for child in (op.then, op.orelse):
                    found = self._exit_in(child, c, depth)
                    if found:
                        return found
            elif isinstance(op, (Loop, Range)):
                c = ctl or (self.range_div(op) if isinstance(op, Range) else None) \
                    or self.loop_div(op)
                found = self._exit_in(op.body, c, depth + 1)
                if found:
                    return found
        return None

    def _mark(self, v: Var | None, root: str | None) -> None:
        if v is not None and root is not None and v not in self.why:
            self.why[v] = root

    def _block(self, block, ctl: _Divergence | None) -> None:
        for op in block:
            croot = None if ctl is None else ctl.root
            if isinstance(op, If):
                c = ctl or self.cond_div(op)
                self._block(op.then, c)
                self._block(op.orelse, c)
            elif isinstance(op, Loop):
                self._block(op.body, ctl or self.loop_div(op))
            elif isinstance(op, Range):
                c = ctl or self.range_div(op) or self.loop_div(op)
                self._mark(op.var, None if c is None else c.root)
                self._block(op.body, c)
            elif isinstance(op, Store):
                if isinstance(op.mem, LocalArray) and op.mem not in self.local_why:
                    r = croot or self._first((op.index, op.value))
                    if r is not None:
                        self.local_why[op.mem] = r
            else:
                w = ir.writes(op)
                if w is not None:
                    self._mark(w, croot or self._source(op))
                if isinstance(op, Atomic) and isinstance(op.mem, LocalArray):
                    r = croot or self._first(ir.reads(op))
                    if r is not None:
                        self.local_why.setdefault(op.mem, r)

    def _source(self, op) -> str | None:
        """Why the value `op` computes differs between units, if it does (control aside)."""
        if isinstance(op, Builtin):
            return None if op.name in ir.UNIFORM_BUILTINS else op.name
        if isinstance(op, Atomic):
            return f"the result of atomic_{op.op}"
        if isinstance(op, Plane):
            r = self._first(ir.reads(op))
            if r is not None:
                return r
            return f"the result of plane_{op.op}" if op.op in _PLANE_SCANS else None
        if isinstance(op, Load):
            if isinstance(op.mem, Param) and op.mem.kind == "scalar":
                return None
            r = self.root(op.index)
            if r is None and isinstance(op.mem, LocalArray):
                r = self.local_why.get(op.mem)
            return r
        return self._first(ir.reads(op))


# ---- barriers ------------------------------------------------------------------------------


def _check_barriers(kernel: Kernel, u: _Uniformity) -> None:
    if not kernel.uses_barrier():
        return
    order = {id(op): i for i, op in enumerate(ir.walk(kernel.body))}
    last_sync = max(order[id(op)] for op in ir.walk(kernel.body) if isinstance(op, SyncCube))

    def visit(block, ctl: _Divergence | None, loops_with_sync: bool) -> None:
        for op in block:
            if isinstance(op, SyncCube) and ctl is not None:
                raise IRError(f"sync_cube in divergent control flow: {ctl.text()}; every unit "
                              f"of a cube must reach the same barriers", op.loc)
            if isinstance(op, Return) and ctl is not None and (
                    loops_with_sync or order[id(op)] < last_sync):
                raise IRError(f"a unit returning early would skip barriers: {ctl.text()}; "
                              f"use if/else instead", op.loc)
            if isinstance(op, If):
                c = ctl or u.cond_div(op)
                visit(op.then, c, loops_with_sync)
                visit(op.orelse, c, loops_with_sync)
            elif isinstance(op, (Loop, Range)):
                c = ctl or (u.range_div(op) if isinstance(op, Range) else None) \
                    or u.loop_div(op)
                has_sync = any(isinstance(x, SyncCube) for x in ir.walk(op.body))
                visit(op.body, c, loops_with_sync or has_sync)

    visit(kernel.body, None, False)

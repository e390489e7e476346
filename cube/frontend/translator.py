"""Walk a @cube function's AST once per specialisation and emit IR.

Expressions evaluate either to compile-time Python values (folded here) or to runtime IR
values (`ir.Var`/`ir.Const`); memories are `MemRef`s. Helpers (`@cube` functions called from a
kernel) are inlined with their own frame. Every error is a `CompileError` located at the
offending node of the user's file."""
from __future__ import annotations

import ast
import builtins
import collections.abc
import types
import typing
from dataclasses import dataclass, field

from cube_ir import ir
from cube_ir.builder import Builder
from cube_ir.errors import IRError
from cube_ir.types import PromotionError, Scalar, Type, boolean, f32, i32, promote, u32, vec

from .. import lang
from ..errors import CompileError
from . import arith, indexing
from .arith import ArithError, is_number, is_runtime
from .intrinsics import INTRINSICS, TAKES_TUPLE, Intrinsic
from .kinds import describe, is_plain, normalise
from .opaque import shield, unshield
from .scan import assigned_names, local_names, loop_exits
from .source import FunctionSource
from .values import BoundMethod, MemRef
from .weak import WeakNames

_UNSUPPORTED = {
    ast.Lambda: "lambda", ast.ListComp: "list comprehensions", ast.SetComp: "set comprehensions",
    ast.DictComp: "dict comprehensions", ast.GeneratorExp: "generator expressions",
    ast.JoinedStr: "f-strings", ast.Yield: "yield", ast.YieldFrom: "yield from",
    ast.Await: "await", ast.Starred: "star arguments", ast.NamedExpr: "':=' assignments",
    ast.Dict: "dict literals", ast.Set: "set literals",
    ast.Try: "try statements", ast.With: "with statements", ast.ClassDef: "class definitions",
    ast.FunctionDef: "nested function definitions", ast.AsyncFunctionDef: "async functions",
    ast.Raise: "raise", ast.Import: "import", ast.ImportFrom: "import", ast.Global: "global",
    ast.Nonlocal: "nonlocal", ast.Delete: "del", ast.Assert: "assert",
    ast.AsyncFor: "async for", ast.AsyncWith: "async with",
}
if hasattr(ast, "TryStar"):
    _UNSUPPORTED[ast.TryStar] = "try statements"
if hasattr(ast, "Match"):
    _UNSUPPORTED[ast.Match] = "match statements"

# iterations one unrolled range may have: each is translated on its own (~7 us each), so
# 2**20 took 7 s to compile and 2**31 ran out of memory
MAX_UNROLL = 1 << 16

_BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
    ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "and",
    ast.BitOr: "or", ast.BitXor: "xor", ast.LShift: "shl", ast.RShift: "shr",
}
_CMPOPS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt",
           ast.GtE: "ge"}
_UNOPS = {ast.USub: "neg", ast.UAdd: "pos", ast.Invert: "invert", ast.Not: "not"}


class _Terminated(Exception):
    """Internal: the rest of a statement list is unreachable."""


@dataclass
class Target:
    """What the kernel is specialised for: target name, plane size, features."""

    name: str = "ir"
    plane_size: int = 1
    features: typing.Any = None


@dataclass
class Frame:
    src: FunctionSource
    fn: typing.Any
    names: dict = field(default_factory=dict)
    mutable: set = field(default_factory=set)
    vars: dict = field(default_factory=dict)  # mutable name -> Var
    is_kernel: bool = False
    loops: list = field(default_factory=list)  # runtime loops open in this frame
    runtime_depth: int = 0  # runtime ifs/loops open in this frame
    # helpers with returns inside runtime control flow use a flag and a result var
    ret_flag: ir.Var | None = None
    ret_var: ir.Var | None = None
    ret_value: typing.Any = None
    value_returned: bool = False  # some `return` gives a value
    none_returned: int | None = None  # the line of a `return` / `return None`, if any
    # definite assignment (as Python's scoping): the names the function binds anywhere, the
    # ones certainly bound at this point, and where each was bound (for messages)
    locals: frozenset = frozenset()
    defined: set = field(default_factory=set)
    assigned_at: dict = field(default_factory=dict)
    loop_targets: set = field(default_factory=set)
    # names whose compile-time value depends on a runtime branch: name -> line of the branch
    conflicts: dict = field(default_factory=dict)
    # names a runtime if/loop made runtime variables: name -> (its kind, its line)
    runtime_since: dict = field(default_factory=dict)
    # per open runtime loop: the names as bound at each `continue` and `break`
    loop_edges: list = field(default_factory=list)
    # which inlining this frame is (the call nodes from the kernel): names seeded by
    # literals are told apart by it across translations (see weak.py)
    site: tuple = ()


def _has_nested_return(fdef: ast.FunctionDef) -> bool:
    for stmt in fdef.body:
        if isinstance(stmt, (ast.If, ast.For, ast.While)):
            if any(isinstance(n, ast.Return) for n in ast.walk(stmt)):
                return True
    return False


def _same_binding(a, b) -> bool:
    """Do two bindings of a name mean the same value (the same object, or equal plain
    compile-time values of one type)?"""
    if a is b:
        return True
    if is_runtime(a) or is_runtime(b) or type(a) is not type(b):
        return False
    try:
        return is_plain(a) and bool(a == b)
    except Exception:
        return False


def _below_zero(bound: int, t) -> str:
    return (f"this range counts to {bound}, below 0, beside a {t} bound, and its {t} counter "
            f"cannot go below 0: `reversed(range(n))` counts n - 1 down to 0 (as does "
            f"`range(n - 1, -1, -1)`); else cast the {t} bound to a signed type (i32(...))")


def _runtime_bound(v) -> bool:
    """A runtime bound of a range (a bound L - c kept apart by _range_bound is one)."""
    return is_runtime(v) or isinstance(v, tuple)


def _contains_return(node) -> bool:
    return any(isinstance(n, ast.Return) for n in ast.walk(node))


class Translator:
    def __init__(self, builder: Builder, target: Target, hints: dict | None = None):
        """hints: the types decided for names seeded by literals by earlier translations
        of this kernel (weak.py); a translation that decides another raises weak.Retype."""
        self.b = builder
        self.target = target
        self.weak = WeakNames({} if hints is None else hints)
        builder._weak_names = self.weak
        self.frames: list[Frame] = []
        self.entry = ir.Block()  # hoisted builtins / metadata / scalar loads
        self._builtins: dict[str, ir.Var] = {}
        self._lens: dict[int, ir.Var] = {}
        self.inlined: list = []  # CubeFunctions inlined (for cache keys)
        self._discarded = None  # the call of an expression statement: its result is unused
        # every global, closure cell and module attribute the kernel read, as
        # (namespace, name, value): a launch checks they still hold the same objects
        self.globals_used: dict[tuple[int, str], tuple[typing.Any, str, typing.Any]] = {}
        self._node = None

    # ---- entry points ------------------------------------------------------------------
    def translate(self, cube_fn, bindings: dict) -> ir.Kernel:
        """Translate a kernel; `bindings` maps parameter names to their frontend values."""
        src = cube_fn.source_info()
        self._check_def(src, cube_fn)
        frame = Frame(src=src, fn=cube_fn.fn, is_kernel=True, locals=local_names(src.tree))
        for name, value in bindings.items():
            self._bind_param(frame, name, value)
        self.frames.append(frame)
        try:
            self._block(src.tree.body)
        finally:
            self.frames.pop()
        k = self.b.finish()
        k.body[:0] = self.entry
        return k

    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    # ---- errors ------------------------------------------------------------------------
    def loc(self, node=None):
        node = node if node is not None else self._node
        if node is None or not self.frames:
            return None
        return self.frame.src.loc(node)

    def error(self, msg: str, node=None) -> CompileError:
        return CompileError(msg, self.loc(node))

    # ---- statements --------------------------------------------------------------------
    def _block(self, stmts) -> bool:
        """Translate statements; True if the list ended in an unconditional exit."""
        for i, stmt in enumerate(stmts):
            try:
                self._stmt(stmt)
            except _Terminated:
                return True
            f = self.frame
            if f.ret_flag is not None and not f.is_kernel and _contains_return(stmt) \
                    and isinstance(stmt, (ast.If, ast.For, ast.While)) and i + 1 < len(stmts):
                # a helper may have returned inside: run the rest only if it did not
                if f.loops:
                    with self.b.if_(f.ret_flag):
                        self.b.break_()
                    return self._block(stmts[i + 1:])
                done = self.b.unary("not", f.ret_flag)
                self._materialise(stmts[i + 1:])
                with self.b.if_(done):
                    f.runtime_depth += 1
                    try:
                        ended = self._block(stmts[i + 1:])
                    finally:
                        f.runtime_depth -= 1
                return ended
        return False

    def _stmt(self, node):
        self._node = node
        self.b.loc = self.loc(node)
        kind = type(node)
        if kind in _UNSUPPORTED:
            raise self.error(f"{_UNSUPPORTED[kind]} are not supported in a @cube function"
                             if _UNSUPPORTED[kind].endswith("s")
                             else f"'{_UNSUPPORTED[kind]}' is not supported in a @cube function",
                             node)
        method = getattr(self, "_s_" + kind.__name__, None)
        if method is None:
            raise self.error(f"{kind.__name__} statements are not supported in a @cube function",
                             node)
        try:
            method(node)
        except (_Terminated, CompileError):
            raise
        except ArithError as e:
            raise self.error(str(e), self._node or node) from None
        except PromotionError as e:
            raise self.error(str(e), self._node or node) from None
        except IRError as e:
            raise CompileError(e.message, e.loc or self.loc(node)) from None
        except RecursionError:
            raise self.error("this statement nests too deeply to compile", node) from None
        except Exception as e:  # a compiler bug: still located, never a bare traceback
            raise self.error(f"internal compiler error ({type(e).__name__}: {e}); please "
                             f"report it with this kernel", self._node or node) from None

    def _s_Pass(self, node):
        pass

    def _s_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self._discarded = node.value
        self.expr(node.value)

    def _s_Assign(self, node):
        value = self.expr(node.value)
        forced = self._is_comptime_call(node.value)
        if len(node.targets) > 1 or not isinstance(node.targets[0], ast.Name):
            # Python evaluates the whole right side before binding any name: `x, y = y, x`
            # must not read a variable the same statement has already rebound
            value = self._snapshot(value)
        for target in node.targets:
            self._assign(target, value, node, forced)

    def _s_AnnAssign(self, node):
        if node.value is None:
            raise self.error("a declaration needs a value, e.g. `x: f32 = 0.0`", node)
        t = self._resolve_type(self.expr(node.annotation), node.annotation)
        value = arith.cast(self.b, self.expr(node.value), t)
        self._assign(node.target, value, node, False)

    def _s_AugAssign(self, node):
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.error("unsupported augmented assignment", node)
        if isinstance(node.target, ast.Subscript):
            # the base and the index are evaluated once, as Python's `t[k] op= v` does (a
            # lane index with an atomic in it ran twice and wrote another lane)
            t = node.target
            base = self.expr(t.value)
            idx = self.expr(t.slice)
            if isinstance(base, MemRef):
                cur = self._load(base, idx, t)
                self._store(base, idx, arith.binop(self.b, op, cur, self.expr(node.value)),
                            node)
                return
            if is_runtime(base) and isinstance(t.value, ast.Name):
                cur = self._lane_get(base, idx, t)
                new = arith.binop(self.b, op, cur, self.expr(node.value))
                self._assign_name(t.value.id, self._lane_set(base, idx, new, t), t.value,
                                  False)
                return
        cur = self.expr(node.target)
        new = arith.binop(self.b, op, cur, self.expr(node.value))
        self._assign(node.target, new, node, False)

    def _s_If(self, node):
        cond = self.condition(node.test)
        if not is_runtime(cond):
            return self._comptime_branch(node, arith.truth(self.b, cond))
        cond = arith.truth(self.b, cond)
        f = self.frame
        self._materialise(node.body + node.orelse)
        before, names_before = set(f.defined), dict(f.names)
        ended_else = False
        with self.b.if_(cond) as h:
            f.runtime_depth += 1
            try:
                ended_body = self._block(node.body)
            finally:
                f.runtime_depth -= 1
            # the else branch sees the bindings from before the `if`, as in Python
            after_body, f.defined = f.defined, set(before)
            names_body, f.names = f.names, dict(names_before)
            if node.orelse:
                with h.else_():
                    f.runtime_depth += 1
                    try:
                        ended_else = self._block(node.orelse)
                    finally:
                        f.runtime_depth -= 1
        # a name is certainly bound after the `if` when every path that reaches its end
        # bound it; a branch that returned/broke out does not reach the end
        if ended_body and ended_else:
            raise _Terminated
        if ended_body:
            return
        if ended_else:
            f.defined, f.names = after_body, names_body
            return
        f.defined = after_body & f.defined
        self._join([names_body, f.names], node)

    def _join(self, paths: list[dict], node) -> None:
        """The bindings where control-flow paths meet. Runtime variables are shared by every
        path; a name bound to different compile-time values (arrays, tuples, helpers, forced
        constants) on different paths has no single value: reading it is an error."""
        f = self.frame
        out = {}
        for name in set().union(*paths):
            present = [p[name] for p in paths if name in p]
            out[name] = present[-1]
            if any(not _same_binding(present[0], v) for v in present[1:]):
                f.defined.discard(name)
                f.conflicts[name] = self.loc(node)[1] if self.loc(node) else "?"
        f.names = out

    def _enter_loop(self):
        f = self.frame
        edges = {"continue": [], "break": []}
        f.loop_edges.append(edges)
        return dict(f.names), edges

    def _leave_loop(self, scope, node, ended: bool, runs: bool, target: str | None = None):
        """After a runtime loop's body: a compile-time binding may not change between
        iterations (the body is translated once), and after the loop the bindings of the
        paths that leave it (no iteration, a `break`, the last iteration) are joined."""
        f = self.frame
        names_before, edges = scope
        f.loop_edges.pop()
        fall = [] if ended else [dict(f.names)]
        for path in edges["continue"] + fall:
            for name, old in names_before.items():
                new = path.get(name, old)
                if name != target and not _same_binding(old, new):
                    raise self.error(
                        f"'{name}' is {describe(new)} inside this runtime loop but "
                        f"{describe(old)} before it, so iterations would see different "
                        f"values; only runtime numbers can change inside a runtime loop", node)
        exits = ([] if runs else [names_before]) + edges["break"] + fall
        if exits:
            self._join(exits, node)

    def _comptime_branch(self, node, cond: bool):
        body = node.body if cond else node.orelse
        if self._block(body):
            raise _Terminated

    def _s_While(self, node):
        if node.orelse:
            raise self.error("while/else is not supported", node)
        f = self.frame
        self._materialise([node])
        before = set(f.defined)
        scope = self._enter_loop()
        ended = False
        with self.b.loop():
            f.loops.append(node)
            f.runtime_depth += 1
            try:
                # the condition is evaluated inside the loop only (it may have side effects)
                cond = self.condition(node.test)
                if is_runtime(cond):
                    stop = self.b.unary("not", arith.truth(self.b, cond))
                    with self.b.if_(stop):
                        self.b.break_()
                elif not arith.truth(self.b, cond):
                    self.b.break_()
                    f.loop_edges.pop()
                    return
                ended = self._block(node.body)
            finally:
                f.loops.pop()
                f.runtime_depth -= 1
                f.defined = before
        self._leave_loop(scope, node, ended, runs=False)

    def _s_For(self, node):
        if node.orelse:
            raise self.error("for/else is not supported", node)
        it = node.iter
        f = self.frame
        if isinstance(it, ast.Call):
            fn = self.expr(it.func)
            if fn is builtins.range or fn is lang.range:
                return self._range_loop(node, it, unroll_default=False,
                                        is_cb_range=fn is lang.range)
            inner = it.args[0] if fn is builtins.reversed and len(it.args) == 1 and \
                not it.keywords else None
            if isinstance(inner, ast.Call) and self.expr(inner.func) is builtins.range:
                return self._range_loop(node, inner, unroll_default=False,
                                        is_cb_range=False, backwards=True)
        seq = self.expr(it)
        if isinstance(seq, (tuple, list, builtins.range)):
            self._unrolled(node, list(seq))  # a compile-time sequence: unrolled
            return
        raise self.error("a for loop must iterate over range(...), cb.range(...) or a "
                         "compile-time tuple", it)
        del f

    def _unrolled(self, node, values: list) -> None:
        """The body once per value, the target bound to it. In a helper whose body may
        return (inside an if), the iterations after one are run only if it did not: a
        `return` ends the loop, as Python's (inside a runtime loop, its break does)."""
        f = self.frame
        guard = f.ret_flag is not None and not f.is_kernel and not f.loops and \
            any(_contains_return(s) for s in node.body)
        for i, v in enumerate(values):
            self._assign(node.target, v, node, True)
            self._unrolled_body(node)
            if guard and i + 1 < len(values):
                self._materialise(node.body)
                with self.b.if_(self.b.unary("not", f.ret_flag)):
                    f.runtime_depth += 1
                    try:
                        self._unrolled(node, values[i + 1:])
                        ended = False
                    except _Terminated:
                        ended = True  # the later iterations return on every path
                    finally:
                        f.runtime_depth -= 1
                if ended:
                    raise _Terminated
                return

    def _unrolled_body(self, node):
        n = loop_exits(node.body)
        if n is not None:  # a nested runtime loop's own break/continue is fine
            raise self.error("break/continue inside an unrolled loop is not supported", n)
        if self._block(node.body):
            raise _Terminated

    def _range_loop(self, node, call, unroll_default, is_cb_range, backwards=False):
        """A `for` over range(...) (backwards: over reversed(range(...)))."""
        args = [self._range_bound(a) if k < 2 else self._range_int(self.expr(a), a)
                for k, a in enumerate(call.args)]
        unroll = unroll_default
        for kw in call.keywords:
            if kw.arg == "unroll" and is_cb_range:
                unroll = self.expr(kw.value)
                if is_runtime(unroll):
                    raise self.error("unroll= must be known at compile time", kw.value)
            else:
                raise self.error(f"unexpected keyword '{kw.arg}' for range", call)
        if not 1 <= len(args) <= 3:
            raise self.error("range takes 1 to 3 arguments", call)
        start, end, step = (0, args[0], 1) if len(args) == 1 else \
            (args[0], args[1], args[2] if len(args) == 3 else 1)
        if is_runtime(step):
            raise self.error("the step of a range must be known at compile time (a grid-stride "
                             "loop: `i = start` then `while i < n: ...; i += stride`)", call)
        if step == 0:
            raise self.error("range step must not be zero", call)
        shift = 0
        runtime = _runtime_bound
        if backwards:  # reversed(range(a, b, s)): the same values, last first
            if not runtime(start) and not runtime(end):
                r = builtins.range(int(start), int(end), int(step))[::-1]
                start, end, step = r.start, r.stop, r.step
            elif abs(step) != 1:
                raise self.error("reversed(range(...)) with a runtime bound takes a step of 1 "
                                 "or -1 (write the range counting down)", call)
            else:  # a counter from b down to a + 1 (up to a - 1), the target one behind:
                # the bounds never step outside their type (reversed(range(n)) on a u32 n)
                start, end, step, shift = end, start, -step, step
        start, end, shift = self._range_offset(start, end, shift, call)
        if unroll:
            if runtime(start) or runtime(end):
                raise self.error("an unrolled range needs compile-time bounds; use "
                                 "cb.comptime(...) or drop unroll=True", call)
            values = builtins.range(int(start), int(end), int(step))
            if len(values) > MAX_UNROLL:  # each iteration is translated: minutes, or memory
                raise self.error(f"this range unrolls {len(values)} iterations (at most "
                                 f"{MAX_UNROLL}): drop unroll=True for a runtime loop", call)
            self._unrolled(node, list(values))
            return
        if not isinstance(node.target, ast.Name):
            raise self.error("a range loop needs a single loop variable", node.target)
        for v, n in ((start, call), (end, call)):
            if not is_runtime(v) and not isinstance(v, int):
                raise self.error(f"range bounds must be integers, got {describe(v)}", n)
            if is_runtime(v) and not v.type.elem.is_int:
                raise self.error(f"range bounds must be integers, got {v.type}", n)
        if not is_runtime(start) and not is_runtime(end):
            # like the builtins it is mostly combined with, a counter counting up over
            # non-negative compile-time bounds is u32; counting down (it may step below 0
            # before the test) or from a negative bound, i32
            t = u32 if step > 0 and start >= 0 and end >= 0 else i32
        else:
            for a, other in ((start, end), (end, start)):
                if is_runtime(a) and a.type.elem.kind == "uint" and isinstance(other, int) \
                        and other < 0:
                    raise self.error(_below_zero(other, a.type), call)
            s, e, t = arith.pair(self.b, arith.as_runtime(self.b, start, None if is_runtime(
                start) else (end.type if is_runtime(end) else None)), arith.as_runtime(
                self.b, end, start.type if is_runtime(start) else None))
            start, end = s, e
        start = arith.as_runtime(self.b, start, t)
        end = arith.as_runtime(self.b, end, t)
        f = self.frame
        name = node.target.id
        self._materialise(node.body)
        before = set(f.defined)
        # a loop over compile-time bounds that runs at least once, without break/continue,
        # certainly binds what its body binds
        runs = isinstance(start, ir.Const) and isinstance(end, ir.Const) and \
            len(builtins.range(int(start.value), int(end.value), int(step))) > 0 and \
            loop_exits(node.body) is None
        ended = False
        scope = self._enter_loop()
        with self.b.range(start, end, int(step), t=t) as var:
            var.name = name
            f.loops.append(node)
            f.runtime_depth += 1
            try:
                if shift:
                    var = self.b.binary("sub", var, self.b.const(shift, t))
                if name in f.mutable:
                    self._assign(node.target, var, node, False)
                else:
                    f.names[name] = var
                    self._defines(name, node.target)
                ended = self._block(node.body)
            finally:
                f.loops.pop()
                f.runtime_depth -= 1
        f.defined = f.defined if runs and not ended else before
        self._leave_loop(scope, node, ended, runs and not ended, target=name)
        f.defined.discard(name)  # the counter is read inside its loop only
        f.loop_targets.add(name)

    def _range_bound(self, node):
        """A bound of a range: its value, or (L, c) for `L - c` with L an unsigned runtime
        value and c a positive compile-time int (Python's L - c may be below 0, where the
        unsigned subtraction wraps: `range(n - 1)` with n = 0 must run no iteration)."""
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)):
            return self._range_int(self.expr(node), node)
        left = self.expr(node.left)
        right = self.expr(node.right)
        if is_runtime(left) and left.type.lanes == 1 and left.type.elem.kind == "uint" and \
                isinstance(right, int) and not isinstance(right, bool) and right > 0:
            return (left, right)
        saved, saved_loc = self._node, self.b.loc
        self._node, self.b.loc = node, self.loc(node)
        try:
            return arith.binop(self.b, "sub", left, right)
        except (ArithError, PromotionError) as e:
            raise self.error(str(e), node) from None
        finally:
            self._node, self.b.loc = saved, saved_loc

    def _range_int(self, v, node):
        """A range argument as Python's range takes it: an int (or a runtime integer)."""
        if is_runtime(v):
            if v.type.lanes != 1 or not v.type.elem.is_int:
                raise self.error(f"range bounds must be integers, got {v.type}", node)
            return v
        if isinstance(v, int):
            return v
        if hasattr(v, "__index__") and not isinstance(v, (tuple, list, str)):
            return int(v)
        raise self.error(f"range bounds must be integers, got {describe(v)}", node)

    def _range_offset(self, start, end, shift: int, call):
        """A loop from start to end (exclusive) whose target is the counter - shift, where a
        bound may be (L, c), Python's L - c (see _range_bound): with the other bound a
        compile-time int k, the counter runs from L and k + c instead and the target is
        c further behind, so no value is computed below 0 (the same values as Python's)."""
        pairs = [b for b in (start, end) if isinstance(b, tuple)]
        if not pairs:
            return start, end, shift
        other = end if isinstance(start, tuple) else start
        if len(pairs) == 2 or not isinstance(other, int) or isinstance(other, bool):
            # no compile-time int bound to move: L - c as it is
            def value(b):
                return arith.binop(self.b, "sub", *b) if isinstance(b, tuple) else b
            return value(start), value(end), shift
        (left, c) = pairs[0]
        if other + c < 0:
            raise self.error(_below_zero(other, left.type), call)
        if isinstance(start, tuple):
            return left, other + c, shift + c
        return other + c, left, shift + c

    def _s_Break(self, node):
        f = self.frame
        if not f.loops:
            raise self.error("'break' outside a runtime loop", node)
        f.loop_edges[-1]["break"].append(dict(f.names))
        self.b.break_()
        raise _Terminated

    def _s_Continue(self, node):
        f = self.frame
        if not f.loops:
            raise self.error("'continue' outside a runtime loop", node)
        f.loop_edges[-1]["continue"].append(dict(f.names))
        self.b.continue_()
        raise _Terminated

    def _s_Return(self, node):
        f = self.frame
        if f.is_kernel:
            if node.value is not None:
                raise self.error("a kernel cannot return a value; write to an output array",
                                 node)
            self.b.return_()
            raise _Terminated
        value = None if node.value is None else self.expr(node.value)
        if value is not None:
            f.value_returned = True
        elif f.none_returned is None:
            f.none_returned = (self.loc(node) or (0, "?"))[1]
        if f.ret_flag is None:
            f.ret_value = value
            raise _Terminated
        if value is not None:
            if f.ret_var is None:
                f.ret_var, v = self._new_var(value, "ret",
                                             f"the result of '{f.src.tree.name}'", node)
            else:
                v = self._into_var(f.ret_var, value, "this return gives {t} but an earlier "
                                   f"one gave {f.ret_var.type}", node)
            self.b.assign(f.ret_var, v)
        self.b.assign(f.ret_flag, True)
        if f.loops:
            self.b.break_()
        raise _Terminated

    # ---- assignment --------------------------------------------------------------------
    def _is_comptime_call(self, node) -> bool:
        if isinstance(node, ast.Call):
            try:
                return self._peek(node.func) is lang.comptime
            except CompileError:
                return False
        return False

    def _peek(self, node):
        if isinstance(node, ast.Name):
            return self._lookup(node.id, node)
        if isinstance(node, ast.Attribute):
            base = self._peek(node.value)
            return getattr(base, node.attr, None)
        return None

    def _assign(self, target, value, node, comptime_ok: bool):
        if isinstance(target, ast.Name):
            return self._assign_name(target.id, value, target, comptime_ok)
        if isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, (tuple, list)) or len(value) != len(target.elts):
                raise self.error("cannot unpack this value here", node)
            for t, v in zip(target.elts, value):
                self._assign(t, v, node, comptime_ok)
            return
        if isinstance(target, ast.Subscript):
            base = self.expr(target.value)
            idx = self.expr(target.slice)
            if isinstance(base, MemRef):
                return self._store(base, idx, value, target)
            if is_runtime(base) and isinstance(target.value, ast.Name):
                new = self._lane_set(base, idx, value, target)
                return self._assign_name(target.value.id, new, target.value, False)
            raise self.error("only arrays, shared/local memory and lines can be assigned "
                             "by index", target)
        if isinstance(target, ast.Attribute):
            raise self.error("attributes cannot be assigned in a @cube function", target)
        raise self.error("unsupported assignment target", target)

    def _defines(self, name: str, node):
        f = self.frame
        f.defined.add(name)
        f.conflicts.pop(name, None)
        f.loop_targets.discard(name)
        loc = self.loc(node)
        if loc is not None:
            lines = f.assigned_at.setdefault(name, [])
            if loc[1] not in lines:
                lines.append(loc[1])

    def _assign_name(self, name: str, value, node, comptime_ok: bool, seed_line=None):
        f = self.frame
        if name in lang.BUILTINS:
            raise self.error(f"'{name}' is a builtin and cannot be assigned", node)
        self._defines(name, node)
        numeric = is_runtime(value) or is_number(value)
        runtime_var = name in f.mutable and numeric and (is_runtime(value) or not comptime_ok)
        if not runtime_var:
            if name in f.vars and numeric:
                runtime_var = True  # already a runtime variable: stays one
            elif name in f.vars:
                raise self.error(f"'{name}' holds a runtime {f.vars[name].type} value and "
                                 f"cannot be rebound to {describe(value)}", node)
            else:
                if isinstance(value, ir.Var) and value in self._named_vars():
                    value = self._copy(value)  # the source variable may change later
                f.names[name] = value
                return
        var = f.vars.get(name)
        if var is None:
            var, v = self._new_var(value, name, f"'{name}'", node, seed_line)
            f.vars[name] = var
            f.names[name] = var
            self.b.assign(var, v)
            return
        v = self._into_var(var, value, f"variable '{name}' changes type from {var.type} to "
                           "{t}; cast explicitly (e.g. " + var.type.elem.name + "(...))", node)
        f.names[name] = var
        self.b.assign(var, v)

    def _new_var(self, value, name: str, label: str, node, seed_line=None):
        """A runtime variable for a name's first runtime value, and that value. A variable
        seeded by a compile-time number (or a runtime choice of two) is a site of weak.py:
        its type is the one an earlier translation decided for it, else the number's."""
        seeds = self._weak_seeds(value)
        site = None
        if seeds is not None:
            line = seed_line or (self.loc(node) or (0, "?"))[1]
            site = self.weak.new_site((self.frame.site, id(node), name), label, seeds, line)
        if site is not None and site.hint is not None:
            t = site.hint.elem
            if is_runtime(value):
                v = arith.retype_weak(self.b, value, t)
            else:
                v = arith.literal(self.b, value, t)
        else:
            v = arith.as_runtime(self.b, value)
        var = self.b.var(v.type, name)
        self.weak.carry(var, {site.key} if site is not None else self.weak.origin(v))
        return var, v

    def _weak_seeds(self, value):
        """The numbers a weakly typed value may be: a compile-time int or float, or the two
        literals of a runtime choice (None for anything else)."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return [value]
        if isinstance(value, ir.Var):
            entry = self.b.__dict__.get("_weak_choices", {}).get(id(value))
            if entry is not None and entry[0] is value and all(
                    isinstance(x, (int, float)) and not isinstance(x, bool)
                    for x in entry[2:]):
                return list(entry[2:])
        return None

    def _into_var(self, var, value, message: str, node):
        """`value` as the type of the runtime variable `var` it is assigned to (a literal
        converts; a name seeded by a literal on either side may take the other's type, see
        weak.py); message, with {t} for the value's type, refuses anything else."""
        line = (self.loc(node) or (0, "?"))[1]
        if not is_runtime(value) and is_number(value) and not isinstance(value, bool):
            if isinstance(value, float) and var.type.elem.is_int:
                self.weak.meet_type(var, f32, line)
            self.weak.literal_assigned(var, value, line)
            try:
                return arith.literal(self.b, value, var.type)
            except ArithError as e:
                raise self.error(f"{e}{self.weak.explain_value(var)}", node) from None
        v = arith.retype_weak(self.b, arith.as_runtime(self.b, value, var.type), var.type)
        if v.type != var.type:
            msg = message.format(t=v.type)
            try:
                self.weak.meet(var, v, line, msg)
            except ArithError as e:
                raise self.error(str(e), node) from None
            raise self.error(msg, node)
        return v

    def _materialise(self, stmts) -> None:
        """Before a runtime if/loop: every name its body assigns becomes a runtime variable,
        seeded with the value it holds now (a compile-time number becomes a typed constant)."""
        f = self.frame
        stmt = self._node
        loc = self.loc(stmt) if stmt is not None else None
        what = {ast.If: "if", ast.While: "while loop", ast.For: "for loop"}.get(type(stmt))
        for name in sorted(assigned_names(stmts)):
            if name in f.mutable:
                continue
            f.mutable.add(name)
            if what is not None and loc is not None:
                f.runtime_since[name] = (what, loc[1])
            value = f.names.get(name)
            if name not in f.vars and (is_runtime(value) or is_number(value)):
                lines = f.assigned_at.get(name)  # where the value was bound, for messages
                self._assign_name(name, value, self._node, False, lines[-1] if lines else None)

    def _snapshot(self, value):
        """Runtime variables inside `value` copied to temporaries (tuples recursively)."""
        if isinstance(value, tuple):
            named = self._named_vars()
            return tuple(self._snapshot_one(v, named) for v in value)
        return value

    def _snapshot_one(self, v, named):
        if isinstance(v, tuple):
            return tuple(self._snapshot_one(x, named) for x in v)
        if isinstance(v, ir.Var) and v in named:
            return self._copy(v)
        return v

    def _named_vars(self) -> set:
        out = set()
        for fr in self.frames:
            out.update(fr.vars.values())
        return out

    def _copy(self, v: ir.Var) -> ir.Var:
        c = self.b.var(v.type)
        self.b.assign(c, v)
        self.weak.carry(c, self.weak.origin(v))
        return c

    # ---- memory ------------------------------------------------------------------------
    def _index(self, idx, node):
        if is_runtime(idx):
            if idx.type.lanes != 1 or not idx.type.elem.is_int:
                raise self.error(f"an index must be an integer, got {idx.type}", node)
            return idx
        if isinstance(idx, bool) or not isinstance(idx, int):
            if hasattr(idx, "__index__") and not isinstance(idx, bool):
                idx = int(idx)
            else:
                raise self.error(f"an index must be an integer, got {describe(idx)}", node)
        if idx < 0:  # Python would read from the end; an offset below 0 is out of bounds
            a = ast.unparse(node.value) if isinstance(node, ast.Subscript) else "a"
            raise self.error(f"the index {idx} is negative: cube does not count from the end "
                             f"as Python (write len({a}) - {-idx})", node)
        return ir.Const(idx, u32)

    def _load(self, ref: MemRef, idx, node):
        if isinstance(idx, tuple):  # t[i, j]: NumPy's element (indexing.py)
            return self.b.load(ref.mem, indexing.linear(self, ref, idx, node))
        return self.b.load(ref.mem, self._index(idx, node))

    def _store(self, ref: MemRef, idx, value, node):
        if isinstance(ref.mem, ir.Param) and ref.mem.kind == "scalar":
            raise self.error("scalar arguments are read-only", node)
        idx = indexing.linear(self, ref, idx, node) if isinstance(idx, tuple) else \
            self._index(idx, node)
        self.b.store(ref.mem, idx, self._convert_store(value, ref.type, node))

    def _convert_store(self, value, t: Type, node):
        """Values stored into memory convert implicitly within a kind (f32 -> f16, i64 ->
        i32) and scalars splat into lines; anything else must be cast explicitly."""
        if not is_runtime(value):
            return arith.literal(self.b, value, t)
        value = arith.retype_weak(self.b, value, t)
        vt = value.type
        if vt == t:
            return value
        same_kind = vt.elem.kind == t.elem.kind or (vt.elem.is_int and t.elem.is_int)
        if same_kind and (vt.lanes == t.lanes or vt.lanes == 1):
            return self.b.cast(value, t)
        raise self.error(f"cannot store a {vt} value into memory of {t}; cast it explicitly",
                         node)

    def _to_elem(self, value, elem: Scalar, node):
        if not is_runtime(value):
            return arith.literal(self.b, value, elem)
        if value.type == elem:
            return value
        if value.type.lanes == 1 and value.type.elem.kind == elem.kind:
            return self.b.cast(value, elem)
        raise self.error(f"cannot put a {value.type} into a lane of {elem}", node)

    def _lane_index(self, idx, t: Type, node) -> int:
        if isinstance(idx, bool) or not isinstance(idx, int):
            raise self.error(f"a lane index must be an integer, got {describe(idx)}", node)
        if not 0 <= idx < t.lanes:
            raise self.error(f"lane {idx} is out of range for a line of {t.lanes}", node)
        return idx

    def _runtime_lane(self, idx, node):
        if idx.type.lanes != 1 or not idx.type.elem.is_int:
            raise self.error(f"a lane index must be an integer, got {idx.type}", node)
        return idx

    # A scalar is a line of 1: kernels written over any line size index `v[k]` for k in
    # range(v.size). A runtime lane index selects among the lanes; out of range reads 0 and
    # writes nothing, as out-of-bounds memory does in checked mode.
    def _lane_get(self, base, idx, node):
        t = base.type
        if not is_runtime(idx):
            lane = self._lane_index(idx, t, node.slice)
            return base if t.lanes == 1 else self.b.extract(base, lane)
        idx = self._runtime_lane(idx, node.slice)
        acc = self.b.const(0, t.elem)
        for j in reversed(builtins.range(t.lanes)):
            lane_v = base if t.lanes == 1 else self.b.extract(base, j)
            acc = self.b.select(arith.binop(self.b, "eq", idx, j), lane_v, acc)
        return acc

    def _lane_set(self, base, idx, value, node):
        t = base.type
        x = self._to_elem(value, t.elem, node)
        if not is_runtime(idx):
            lane = self._lane_index(idx, t, node.slice)
            return x if t.lanes == 1 else self.b.insert(base, lane, x)
        idx = self._runtime_lane(idx, node.slice)
        new = base
        for j in builtins.range(t.lanes):
            cur = base if t.lanes == 1 else self.b.extract(base, j)
            v = self.b.select(arith.binop(self.b, "eq", idx, j), x, cur)
            new = v if t.lanes == 1 else self.b.insert(new, j, v)
        return new

    # ---- params ------------------------------------------------------------------------
    def _bind_param(self, frame: Frame, name: str, value):
        frame.names[name] = value
        frame.defined.add(name)

    def _check_def(self, src, cf):
        """What a @cube function's `def` line itself may not say."""
        tree = src.tree
        if isinstance(tree, ast.AsyncFunctionDef):
            raise CompileError(f"'{cf.__name__}' is an async function; @cube functions must "
                               f"be plain `def` functions", src.loc(tree))
        a = tree.args
        for star, what in ((a.vararg, "*"), (a.kwarg, "**")):
            if star is not None:
                raise CompileError(f"'{cf.__name__}' takes {what}{star.arg}; @cube functions "
                                   f"need named parameters", src.loc(star))
        # a yield anywhere, reached or not (after a return), makes Python's function a
        # generator: the body never runs as written
        for n in ast.walk(tree):
            if isinstance(n, (ast.Yield, ast.YieldFrom)):
                raise CompileError(f"{_UNSUPPORTED[type(n)]} is not supported in a @cube "
                                   f"function (it makes '{cf.__name__}' a generator)",
                                   src.loc(n))

    def builtin(self, name: str) -> ir.Var:
        v = self._builtins.get(name)
        if v is None:
            with self.b.into(self.entry):
                v = self.b.builtin(name)
            self._builtins[name] = v
        return v

    def mem_len(self, ref: MemRef):
        if isinstance(ref.mem, (ir.SharedArray, ir.LocalArray)):
            return ref.mem.size
        key = id(ref.mem)
        v = self._lens.get(key)
        if v is None:
            with self.b.into(self.entry):
                v = self.b.len(ref.mem)
            self._lens[key] = v
        return v

    # ---- expressions -------------------------------------------------------------------
    def expr(self, node):
        kind = type(node)
        if kind in _UNSUPPORTED:
            raise self.error(f"{_UNSUPPORTED[kind]} are not supported in a @cube function",
                             node)
        method = getattr(self, "_e_" + kind.__name__, None)
        if method is None:
            raise self.error(f"{kind.__name__} expressions are not supported in a @cube "
                             f"function", node)
        saved, saved_loc = self._node, self.b.loc
        self._node = node
        self.b.loc = self.loc(node)
        try:
            return method(node)
        except (CompileError, _Terminated):
            raise
        except (ArithError, PromotionError) as e:
            raise self.error(str(e), node) from None
        except IRError as e:
            raise CompileError(e.message, e.loc or self.loc(node)) from None
        finally:
            self._node, self.b.loc = saved, saved_loc

    def _e_Constant(self, node):
        return node.value

    def _e_Tuple(self, node):
        return tuple(self.expr(e) for e in node.elts)

    _e_List = _e_Tuple

    def _lookup(self, name: str, node):
        fr = self.frame
        if name in fr.locals:
            if name not in fr.defined:
                raise self.error(self._unbound_message(fr, name), node)
            return fr.names[name]
        if name in fr.names:
            return fr.names[name]
        fn = self.frame.fn
        code = getattr(fn, "__code__", None)
        if code is not None and name in code.co_freevars and fn.__closure__:
            cell = fn.__closure__[code.co_freevars.index(name)]
            try:
                value = cell.cell_contents
            except ValueError:
                pass
            else:
                self.globals_used[(id(cell), name)] = (cell, name, value)
                return value
        g = getattr(fn, "__globals__", {})
        if name in g:
            value = g[name]
            self.globals_used[(id(g), name)] = (g, name, value)
            return value
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise self.error(f"unknown name '{name}'", node)

    def _unbound_message(self, fr: Frame, name: str) -> str:
        lines = fr.assigned_at.get(name)
        if name in fr.conflicts:
            return (f"'{name}' holds different compile-time values (arrays, tuples, helpers "
                    f"or constants) depending on the runtime branch or loop at line "
                    f"{fr.conflicts[name]}; only runtime numbers can be chosen at run time "
                    f"(index one array, or compute the number in both branches)")
        if name in fr.loop_targets:
            return (f"'{name}' is a runtime loop's counter and is only defined inside its "
                    f"loop; copy it to a variable assigned before the loop to keep its value")
        if not lines:
            return (f"'{name}' is read before it is assigned (it is a local variable of "
                    f"'{fr.src.tree.name}': Python would raise UnboundLocalError)")
        where = ", ".join(str(n) for n in lines)
        plural = "s" if len(lines) > 1 else ""
        return (f"'{name}' may be unassigned here: it is assigned at line{plural} {where}, "
                f"but not on every path that reaches this read (a branch that does not "
                f"assign it, or a loop that may run zero times); assign it before")

    def _e_Name(self, node):
        v = self._lookup(node.id, node)
        if isinstance(v, typing.TypeVar):
            raise self.error(f"type variable {v.__name__} is not bound in this "
                             f"specialisation", node)
        return self.resolve(v, node)

    def resolve(self, v, node):
        """Every value read by name, attribute or compile-time call passes here: builtins
        become runtime values, NumPy scalars Python numbers, lists tuples (see kinds.py)."""
        if isinstance(v, lang.BuiltinVar):
            return self._builtin_value(v.name, node)
        if isinstance(v, (list, tuple, collections.abc.Iterator)):
            # enumerate/zip/reversed of compile-time tuples are compile-time tuples too
            return tuple(self.resolve(x, node) for x in v)
        return normalise(v)

    def _builtin_value(self, name: str, node):
        if name == "PLANE_DIM":
            return ir.Const(self.target.plane_size, u32)
        if name == "UNIT_POS_PLANE" and self.target.plane_size == 1:
            return ir.Const(0, u32)
        return self.builtin(name)

    def _e_Attribute(self, node):
        base = self.expr(node.value)
        attr = node.attr
        if isinstance(base, MemRef):
            if attr in ("len", "shape", "stride", "rank", "line_size", "buffer_len"):
                return BoundMethod(base, attr)
            raise self.error(f"{base.describe()} has no attribute '{attr}' (it has len(), "
                             f"shape(d), stride(d), rank(), line_size())", node)
        if is_runtime(base):
            if attr in ("size", "line_size"):
                return base.type.lanes
            if attr == "dtype":
                return base.type.elem
            raise self.error(f"a {base.type} value has no attribute '{attr}'"
                             + self._why_runtime(node.value), node)
        if isinstance(base, BoundMethod):
            raise self.error(f"{describe(base)} has no attribute '{attr}'", node)
        try:
            value = getattr(base, attr)
        except AttributeError:
            raise self.error(f"{describe(base)} has no attribute '{attr}'", node) from None
        except Exception as e:
            raise self.error(f"reading '{attr}' of {describe(base)} failed: "
                             f"{type(e).__name__}: {e}", node) from None
        ns = getattr(base, "__dict__", None)
        if type(ns) in (dict, types.MappingProxyType) and (
                isinstance(base, types.ModuleType) or attr in ns):
            # a module's, an object's or a class's own attribute (`cfg.SCALE`,
            # `params.scale`, `Config.TILE`): a launch checks it as a global (rebinding it
            # recompiles)
            self.globals_used[(id(ns), attr)] = (ns, attr, value)
        if isinstance(value, typing.TypeVar):
            raise self.error(f"type variable {value.__name__} is not bound in this "
                             f"specialisation", node)
        return self.resolve(value, node)

    def _e_Subscript(self, node):
        base = self.expr(node.value)
        idx = self.expr(node.slice)
        if isinstance(base, MemRef):
            return self._load(base, idx, node)
        if is_runtime(base):
            return self._lane_get(base, idx, node)
        if isinstance(base, BoundMethod) and base.name == "shape":  # NumPy's t.shape[d]
            return self._method(base, [idx], node)
        if is_runtime(idx):
            raise self.error("a compile-time value cannot be indexed by a runtime value", node)
        if isinstance(base, BoundMethod) or not (isinstance(base, (tuple, str)) or
                                                 isinstance(base, type)):
            raise self.error(f"{describe(base)} cannot be indexed", node)
        try:
            return self.resolve(base[idx], node)
        except Exception as e:
            raise self.error(f"cannot index {describe(base)} with {idx!r}: {e}", node) \
                from None

    def _e_BinOp(self, node):
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.error("unsupported operator", node)
        return arith.binop(self.b, op, self.expr(node.left), self.expr(node.right))

    def _e_UnaryOp(self, node):
        if isinstance(node.op, ast.Not):
            return arith.unop(self.b, "not", self.condition(node.operand))
        return arith.unop(self.b, _UNOPS[type(node.op)], self.expr(node.operand))

    def condition(self, node):
        """An expression whose truth is all that is used (`if`, `while`, a ternary's test,
        `not`): `and`/`or` there combine their operands' truth, so `i > 3 or CUBE_POS_X`
        works although a bool and a u32 have no common type as values."""
        if not isinstance(node, ast.BoolOp):
            return self.expr(node)
        saved, saved_loc = self._node, self.b.loc
        self._node, self.b.loc = node, self.loc(node)
        try:
            return self._truth_chain(isinstance(node.op, ast.And), node.values, node)
        except (ArithError, PromotionError) as e:
            raise self.error(str(e), node) from None
        finally:
            self._node, self.b.loc = saved, saved_loc

    def _truth_chain(self, is_and, values, node):
        x = self.condition(values[0])
        if not is_runtime(x):
            x = arith.truth(self.b, x)
            if len(values) == 1 or x != is_and:
                return x
            return self._truth_chain(is_and, values[1:], node)
        x = arith.truth(self.b, x)
        if len(values) == 1:
            return x
        rest_nodes = values[1:]
        if any(self._has_effects(v) for v in rest_nodes):
            rest = (lambda: arith.as_runtime(self.b, self._truth_chain(
                is_and, rest_nodes, node), boolean))
            const = (lambda: not is_and)
            return self._choose(x, rest if is_and else const, const if is_and else rest,
                                True, node)
        y = self._truth_chain(is_and, rest_nodes, node)
        if not is_runtime(y):
            return x if y == is_and else y
        return self.b.binary("and" if is_and else "or", x, y)

    def _e_BoolOp(self, node):
        """`and`/`or` as Python: operands are evaluated left to right only while the result
        is undecided, and the result is the deciding operand (`p or q` with ints is p when
        p != 0, else q); on bools that is the logical and/or."""
        return self._bool_chain(node.op, node.values, node)

    def _bool_chain(self, op, values, node):
        is_and = isinstance(op, ast.And)
        x = self.expr(values[0])
        if len(values) == 1:
            return x
        if not is_runtime(x):
            if arith.truth(self.b, x) != is_and:
                return x  # decided: `0 and ...`, `1 or ...`
            return self._bool_chain(op, values[1:], node)
        rest_node = values[1] if len(values) == 2 else ast.BoolOp(op=op, values=values[1:])
        if isinstance(x, MemRef) or not x.type.elem.is_bool:
            cond = arith.truth(self.b, x)
            rest = (lambda: self._bool_chain(op, values[1:], node))
            keep = (lambda: x)
            return self._choose(cond, rest if is_and else keep, keep if is_and else rest,
                                self._has_effects(rest_node), node, numeric_bools=True)
        lazy = self._has_effects(rest_node) and x.type.lanes == 1
        if not lazy:
            y = self._bool_chain(op, values[1:], node)
            if not is_runtime(y):
                return x if arith.truth(self.b, y) == is_and else y
            if y.type.elem.is_bool and y.type.lanes == x.type.lanes:
                return self.b.binary("and" if is_and else "or", x, y)
            rest = (lambda: y)
        else:
            rest = (lambda: self._bool_chain(op, values[1:], node))
        keep = (lambda: x)
        return self._choose(x, rest if is_and else keep, keep if is_and else rest, lazy, node,
                            numeric_bools=True)

    def _has_effects(self, node) -> bool:
        """May evaluating this expression read memory or call a helper/atomic (so Python's
        lazy evaluation must be kept: `i < n and a[i] > 0` never reads a[n])? Plane ops are
        exempt: every unit of a plane must take part in them."""
        for n in ast.walk(node):
            if isinstance(n, ast.Subscript):
                return True
            if isinstance(n, ast.Call):
                try:
                    fn = self._peek(n.func)
                except CompileError:
                    return True
                name = getattr(fn, "__name__", "")
                if fn is lang.comptime or lang.is_type(fn) or isinstance(fn, lang.LineSpec) \
                        or fn in (int, float, bool, len):
                    continue
                if fn is getattr(lang, name, None) and (name.startswith("plane_") or name in (
                        "sqrt", "rsqrt", "exp", "log", "log1p", "sin", "cos", "tanh", "erf",
                        "floor", "ceil", "round", "pow", "fma", "clamp", "select", "abs",
                        "min", "max", "cast", "tan", "asin", "acos", "atan", "sinh", "cosh",
                        "asinh", "acosh", "atanh", "log2", "log10", "exp2", "expm1", "trunc",
                        "atan2", "hypot", "fmod", "copysign")):
                    continue
                if isinstance(n.func, ast.Attribute) and n.func.attr in (
                        "len", "shape", "stride", "rank", "line_size"):
                    continue
                return True
        return False

    def _choose(self, cond, then, orelse, lazy: bool, node, numeric_bools: bool = False):
        """`then() if cond else orelse()`: eagerly as a select, or (lazy) evaluating only the
        side the condition picks, into a variable of both sides' promoted type.
        numeric_bools (and/or): a bool beside a number counts as 0/1 of the number's type,
        which keeps both Python's value and its truth (`u and c` is u when u == 0, else c)."""
        if not lazy:
            a, b = then(), orelse()
            if numeric_bools:
                a, b = self._bools_as_numbers(a, b)
            return self._select(cond, a, b, node)
        with self.b.if_(cond) as h:
            a = then()
            with h.else_():
                b = orelse()
        if numeric_bools:
            with self.b.into(h.op.then):
                a, _ = self._bools_as_numbers(a, b)
            with self.b.into(h.op.orelse):
                _, b = self._bools_as_numbers(a, b)
        if isinstance(a, MemRef) or isinstance(b, MemRef):
            raise self.error("cannot choose between arrays at runtime", node)
        for v in (a, b):
            if not is_runtime(v) and not is_number(v):
                raise self.error(f"a runtime choice needs values, got {describe(v)}", node)
        if not is_runtime(a) and not is_runtime(b):
            a = arith.literal(self.b, a)
        ta = a.type if is_runtime(a) else None
        tb = b.type if is_runtime(b) else None
        if ta is not None and tb is not None and ta.elem != tb.elem:
            try:
                promote(ta, tb)
            except PromotionError as e:
                self.weak.meet(a, b, arith.line_of(self.b), str(e))
        t = promote(ta, tb) if ta is not None and tb is not None else (ta or tb)
        res = self.b.var(t, "choice")
        for block, v in ((h.op.then, a), (h.op.orelse, b)):
            with self.b.into(block):
                v = arith.as_runtime(self.b, v, t)
                self.b.assign(res, self.b.to_type(v, t))
        self.weak.tag(res, a, b)
        return res

    def _bools_as_numbers(self, a, b):
        def elem(v):
            return v.type.elem if is_runtime(v) else (
                boolean if isinstance(v, bool) else f32 if isinstance(v, float) else None)

        def to(v, e):
            if not is_runtime(v):
                return int(v) if e.is_int else float(v)
            return self.b.cast(v, vec(e, v.type.lanes) if v.type.lanes > 1 else e)

        ea, eb = elem(a), elem(b)
        if ea is not None and eb is not None and ea.is_bool != eb.is_bool:
            if ea.is_bool:
                a = to(a, eb)
            else:
                b = to(b, ea)
        return a, b

    def _select(self, cond, a, b, node):
        """`a if cond else b` (and cb.select) with both sides evaluated."""
        if isinstance(a, MemRef) or isinstance(b, MemRef):
            raise self.error("cannot choose between arrays at runtime", node)
        if cond.type.lanes == 1:
            cond = arith.truth(self.b, cond)
        if not is_runtime(a) and not is_runtime(b):
            for v in (a, b):
                if not is_number(v):
                    raise self.error(f"a runtime choice needs values, got {describe(v)}", node)
            if cond.type.lanes == 1:
                return arith.weak_choice(self.b, cond, a, b)
            a = arith.literal(self.b, a)
        given = (a, b)
        x, y, _ = arith.pair(self.b, a, b)
        if cond.type.lanes not in (1, x.type.lanes):
            raise self.error(f"the condition {cond.type} does not match the values {x.type}",
                             node)
        r = self.b.select(cond, x, y)
        self.weak.tag(r, *given)
        return r

    def _e_Compare(self, node):
        return self._compare_chain(self.expr(node.left), node.ops, node.comparators, node)

    def _compare_chain(self, left, ops, comparators, node):
        """`a < b < c` as Python: b is evaluated once, and c only if `a < b` holds."""
        name = _CMPOPS.get(type(ops[0]))
        if name is None:
            raise self.error("only ==, !=, <, <=, >, >= comparisons are supported "
                             "(no 'is'/'in')", node)
        right = self.expr(comparators[0])
        r = arith.binop(self.b, name, left, right)
        if len(ops) == 1:
            return r
        if not is_runtime(r):
            if not arith.truth(self.b, r):
                return r
            return self._compare_chain(right, ops[1:], comparators[1:], node)
        if any(self._has_effects(c) for c in comparators[1:]) and r.type.lanes == 1:
            return self._choose(r, lambda: arith.as_runtime(self.b, self._compare_chain(
                right, ops[1:], comparators[1:], node), boolean), lambda: False, True, node)
        rest = self._compare_chain(right, ops[1:], comparators[1:], node)
        return arith.binop(self.b, "and", r, arith.as_runtime(self.b, rest, boolean))

    def _e_IfExp(self, node):
        cond = self.condition(node.test)
        if not is_runtime(cond):
            return self.expr(node.body if arith.truth(self.b, cond) else node.orelse)
        lazy = self._has_effects(node.body) or self._has_effects(node.orelse)
        if lazy and cond.type.lanes == 1:  # only the chosen side is evaluated, as in Python
            cond = arith.truth(self.b, cond)
            return self._choose(cond, lambda: self.expr(node.body),
                                lambda: self.expr(node.orelse), True, node)
        return self._select(cond, self.expr(node.body), self.expr(node.orelse), node)

    def _e_Call(self, node):
        fn = self.expr(node.func)
        if fn is lang.comptime:
            if len(node.args) != 1 or node.keywords:
                raise self.error("cb.comptime takes one argument", node)
            v = self.expr(node.args[0])
            if is_runtime(v):
                raise self.error("this value is only known at run time, not at compile time"
                                 + self._why_runtime(node.args[0]), node.args[0])
            return v
        # select's condition and bool(...) only use their argument's truth
        truth_arg = (fn is lang.select or fn is bool) and node.args
        args = [self.condition(a) if truth_arg and k == 0 else self.expr(a)
                for k, a in enumerate(node.args)]
        kwargs = {kw.arg: self.expr(kw.value) for kw in node.keywords}
        if None in kwargs:
            raise self.error("'**' arguments are not supported", node)
        return self.call(fn, args, kwargs, node)

    def _why_runtime(self, expr) -> str:
        """For an error about a runtime value: the names in expr that a runtime if/loop made
        runtime variables, and where (a name assigned inside one is one variable for every
        path through it, even where each path gives it a constant)."""
        f = self.frame
        seen = dict.fromkeys(n.id for n in ast.walk(expr) if isinstance(n, ast.Name)
                             and n.id in f.runtime_since and is_runtime(f.names.get(n.id)))
        if not seen:
            return ""
        parts = [f"'{n}' is a runtime variable: the runtime {f.runtime_since[n][0]} at line "
                 f"{f.runtime_since[n][1]} assigns it" for n in seen]
        return ("; " + "; ".join(parts) + " (a name a runtime if or loop assigns is one "
                "variable for all its paths; compute the value before that statement, or in "
                "a @cube helper it calls)")

    def call(self, fn, args, kwargs, node):
        from ..kernel import CubeFunction  # the decorator's class (cycle-free at run time)

        if isinstance(fn, CubeFunction):
            if fn.is_kernel:
                raise self.error(f"'{fn.__name__}' is a launchable kernel; kernels cannot be "
                                 f"called from kernels (make it a plain @cube helper)", node)
            return self.inline(fn, args, kwargs, node)
        if isinstance(fn, BoundMethod):
            if kwargs:
                raise self.error(f"{fn.name}() takes no keyword arguments (got "
                                 f"{', '.join(kwargs)})", node)
            return self._method(fn, args, node)
        intrinsic = INTRINSICS.get(id(fn))
        if intrinsic is not None and intrinsic.fn is fn:
            self._check_intrinsic_args(fn, args, kwargs, node)
            return intrinsic.handler(self, args, kwargs, node)
        if lang.is_type(fn) or isinstance(fn, lang.LineSpec):
            t = self._resolve_type(fn, node)
            if kwargs or len(args) != 1:
                raise self.error(f"{t}(...) takes one value", node)
            return arith.cast(self.b, args[0], t)
        if fn in (int, float, bool):
            if kwargs or len(args) != 1:
                raise self.error(f"{fn.__name__}() takes one value", node)
            if isinstance(args[0], (MemRef, BoundMethod)):  # bool(x) was always True
                raise self.error(f"{fn.__name__}() cannot be applied to {describe(args[0])}",
                                 node)
            if not is_runtime(args[0]):
                return fn(args[0])
            return arith.cast(self.b, args[0], lang.PY_TYPES[fn])
        if fn is len:
            if len(args) == 1 and isinstance(args[0], MemRef) and not kwargs:
                return self._method(BoundMethod(args[0], "len"), [], node)
        if fn is builtins.range or fn is lang.range:
            raise self.error("range(...) can only be used as the iterable of a for loop", node)
        if fn is print:
            raise self.error("print is not supported in a @cube function", node)
        if isinstance(fn, typing.TypeVar):
            raise self.error(f"type variable {fn.__name__} is not bound", node)
        if isinstance(fn, BoundMethod) or isinstance(fn, types.ModuleType):
            raise self.error(f"{describe(fn)} is not callable", node)
        if callable(fn):
            name = getattr(fn, "__name__", None) or describe(fn)
            for a in list(args) + list(kwargs.values()):
                if is_runtime(a) or isinstance(a, (MemRef, BoundMethod)):
                    module = getattr(fn, "__module__", None) or ""
                    if module in ("math", "builtins", "cmath") or module.startswith("numpy"):
                        raise self.error(
                            f"{module.split('.')[0]}.{name} has no kernel form: "
                            f"{describe(a)} cannot go to it (kernels take math.sqrt, exp, "
                            f"exp2, expm1, log, log1p, log2, log10, sin, cos, tan, asin, acos, "
                            f"atan, atan2, sinh, cosh, tanh, asinh, acosh, atanh, erf, hypot, "
                            f"fmod, copysign, floor, ceil, trunc, fabs, pow, isnan, isinf, "
                            f"isfinite, abs, min, max, round, and cube's cb.* functions)",
                            node)
                    raise self.error(f"'{name}' is a plain Python function and cannot take "
                                     f"{describe(a)}; decorate it with @cube to use it in "
                                     f"kernels", node)
            try:
                given = (args, kwargs)
                shielded = shield(given)
                out = fn(*shielded[0], **shielded[1])
                return self.resolve(out if shielded is given else unshield(out), node)
            except CompileError:
                raise
            except Exception as e:
                raise self.error(f"the compile-time call of '{name}' failed: "
                                 f"{type(e).__name__}: {e}", node) from None
        raise self.error(f"{describe(fn)} is not callable", node)

    def _check_intrinsic_args(self, fn, args, kwargs, node):
        """The language's functions take values (and atomics an array first): anything else
        is named in the user's words before a handler sees it."""
        name = getattr(fn, "__name__", "this function")
        for i, a in enumerate(list(args) + list(kwargs.values())):
            if i == 0 and isinstance(a, MemRef) and name.startswith("atomic_"):
                continue
            if i == 0 and isinstance(a, tuple) and name in TAKES_TUPLE:
                continue  # checked by the handler (`max((a, b))`, `any((p, q))`)
            if i == 1 and isinstance(a, tuple) and name in ("SharedMemory", "LocalArray"):
                continue  # a tuple of sizes, checked by the handler
            if is_runtime(a) or is_number(a) or lang.is_type(a) or \
                    isinstance(a, lang.LineSpec) or a in (int, float, bool):
                continue
            raise self.error(f"{name} takes a value, got {describe(a)}", node)

    def _method(self, m: BoundMethod, args, node):
        ref, name = m.ref, m.name
        if name in ("len", "buffer_len"):
            if args:
                raise self.error(f"{name}() takes no arguments", node)
            if isinstance(ref.mem, ir.Param) and ref.mem.kind == "scalar":
                raise self.error("a scalar has no length", node)
            if ref.dims is not None:  # NumPy's len would be the first size, ours the count
                raise self.error(f"{ref.describe()} has {len(ref.dims)} dimensions: write "
                                 f"shape(d) for a size", node)
            return self.mem_len(ref)
        if name == "line_size":
            return ref.type.lanes
        if name == "rank":
            if ref.dims is not None:
                return len(ref.dims)
            if ref.kind != "tensor":
                raise self.error(f"rank() is only defined on tensors, not {ref.describe()}",
                                 node)
            return ref.mem.rank
        if name in ("shape", "stride"):
            rank = indexing.rank_of(ref)
            if rank == 0:
                raise self.error(f"{name}(d) is only defined on tensors and shared/local "
                                 f"memory allocated with a tuple of sizes, not "
                                 f"{ref.describe()}", node)
            if len(args) != 1:
                raise self.error(f"{name}(d) takes one dimension", node)
            d = args[0]
            if not is_runtime(d):
                d = int(d)
                if d < 0:
                    d += rank
                if not 0 <= d < rank:
                    raise self.error(f"dimension {args[0]} is out of range for a rank-"
                                     f"{rank} {'tensor' if ref.dims is None else 'array'}",
                                     node)
                if ref.dims is not None:
                    return (indexing.size if name == "shape" else indexing.stride)(
                        self, ref, d, node).value
                return self._method_dim(ref, name, d, node)
            if ref.dims is not None:
                raise self.error(f"{name}(d) of {ref.describe()} takes a compile-time "
                                 f"dimension", node)
            return getattr(self.b, name)(ref.mem, self._runtime_dim(d, ref.mem.rank, node))
        raise self.error(f"unknown method {name}", node)

    def _method_dim(self, ref: MemRef, name: str, d: int, node):
        """A tensor parameter's shape(d) or stride(d), d a valid compile-time dimension:
        read once, in the entry block."""
        key = (id(ref.mem), name, d)
        v = self._lens.get(key)
        if v is None:
            with self.b.into(self.entry):
                v = getattr(self.b, name)(ref.mem, ir.Const(d, u32))
            self._lens[key] = v
        return v

    def _runtime_dim(self, d, rank: int, node):
        """A runtime dimension as Python reads it: a negative one counts from the end; one
        still outside the rank reads 0 (the IR's rule). No wrap to 32 bits: the IR compares
        the dimension in its own integer type."""
        t = d.type
        if t.lanes != 1 or not (t.is_int or t.is_bool):
            raise self.error(f"a dimension must be an integer, got {t}", node)
        if t.is_bool:
            return arith.cast(self.b, d, u32)
        if t.is_signed:
            neg = self.b.binary("lt", d, self.b.const(0, t))
            d = self.b.select(neg, self.b.binary("add", d, self.b.const(rank, t)), d)
        return d

    # ---- types -------------------------------------------------------------------------
    def _resolve_type(self, t, node) -> Type:
        if isinstance(t, lang.LineSpec):
            elem = self._resolve_type(t.elem, node)
            if t.lanes is None:
                raise self.error("Line[T] needs a size here, e.g. Line[f32, 4]", node)
            return vec(elem, t.lanes)
        if lang.is_type(t):
            return t
        if isinstance(t, type) and t in lang.PY_TYPES:
            return lang.PY_TYPES[t]
        raise self.error(f"{describe(t)} is not an element type", node)

    # ---- helpers (inlining) ------------------------------------------------------------
    def inline(self, cf, args, kwargs, node):
        if any(fr.fn is cf.fn for fr in self.frames):
            raise self.error(f"'{cf.__name__}' calls itself; recursion is not supported", node)
        src = cf.source_info()
        self._check_def(src, cf)
        params = cf.signature().parameters
        names = [n for n, p in params.items() if p.kind != p.KEYWORD_ONLY]
        if len(args) > len(names):
            raise self.error(f"'{cf.__name__}' takes {len(names)} positional argument"
                             f"{'s' if len(names) != 1 else ''}, got {len(args)}", node)
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in params:
                raise self.error(f"'{cf.__name__}' has no parameter '{k}'", node)
            if k in bound:
                raise self.error(f"'{cf.__name__}' got '{k}' twice", node)
            bound[k] = v
        for n, p in params.items():
            if n not in bound:
                if p.default is p.empty:
                    raise self.error(f"'{cf.__name__}' is missing the argument '{n}'", node)
                bound[n] = p.default
        annotations = cf.annotations()
        for n, v in bound.items():
            if isinstance(annotations.get(n), lang.ComptimeSpec) and is_runtime(v):
                raise self.error(f"argument '{n}' of '{cf.__name__}' must be known at compile "
                                 f"time", node)
        if cf not in self.inlined:
            self.inlined.append(cf)
        discarded = node is self._discarded
        frame = Frame(src=src, fn=cf.fn, locals=local_names(src.tree),
                      site=self.frame.site + (id(node),))
        self.frames.append(frame)
        try:
            frame.names.update(bound)
            frame.defined.update(bound)
            if _has_nested_return(src.tree):
                frame.ret_flag = self.b.var(boolean, "returned")
                self.b.assign(frame.ret_flag, False)
            ended = self._block(src.tree.body)
        finally:
            self.frames.pop()
        self._node = node
        if frame.value_returned and not ended and not discarded:
            raise self.error(
                f"'{cf.__name__}' returns a value on some paths but can also reach the end of "
                f"its body (after line {(src.loc(src.tree.body[-1]) or (0, '?'))[1]}) without "
                f"`return`, where Python returns None; return a value on every path", node)
        if frame.value_returned and frame.none_returned is not None and not discarded:
            raise self.error(
                f"'{cf.__name__}' returns a value on some paths but None at line "
                f"{frame.none_returned}, which a kernel value cannot be; return a value on "
                f"every path", node)
        if frame.ret_flag is not None:
            return frame.ret_var if frame.ret_var is not None else frame.ret_value
        return frame.ret_value


__all__ = ["Intrinsic", "Target", "Translator"]

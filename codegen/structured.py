"""The statement layer of the structured-C targets (the C family and WGSL).

Both print the lowered IR as statements in a C-like syntax: one assignment per value op
(whole, or lane by lane for a line the target cannot hold as one value), `if`/`else`,
loops, `break`/`continue`/`return`. That walk is written here once. A target supplies
expressions and spellings through hooks:

    value_lanes(t)          [None] when a value of type t is one target value, else its lanes
    copies_whole(t)         whether `dst = x` copies a whole value of type t
    whole(op)               one expression for a value op's whole dst (a native vector), or None
    val_as(x, t, lane)      x as type t (lane `lane` of it, or all of it when lane is None)
    assign(dst, expr, lane) the statement `dst = expr` (or `dst[lane] = expr`)
    unary/binary/ternary(op, t, ...), select(c, a, b), cast(x, src, dst),
    bitcast(x, src, dst)    expressions
    load_op, store_op, meta, builtin, atomic_op, plane_op, range_op, barrier_lines

A hook's `t` is the type of the value it makes: a scalar when a lane is given, else the
whole (possibly line) type."""
from __future__ import annotations

from cube_ir import ir
from cube_ir.types import Type

VALUE_OPS = (ir.Assign, ir.Unary, ir.Binary, ir.Ternary, ir.Select, ir.Cast, ir.Bitcast,
             ir.Extract, ir.Insert)


def lane_type(t: Type, lane) -> Type:
    """The type of lane `lane` of a value of type t (t itself for lane None)."""
    return t.elem if lane is not None else t


class StructuredEmitter:
    LOOP = "for (;;) {"  # an endless loop's opening line

    def __init__(self, kernel: ir.Kernel):
        self.k = kernel
        self.out: list[str] = []
        self.depth = 1

    # ---- output ------------------------------------------------------------------------
    def line(self, s: str) -> None:
        self.out.append("    " * self.depth + s)

    def block(self, ops) -> None:
        for op in ops:
            self.op(op)

    def nested(self, block) -> None:
        self.depth += 1
        self.block(block)
        self.depth -= 1

    # ---- statements --------------------------------------------------------------------
    def op(self, op) -> None:
        if isinstance(op, VALUE_OPS):
            self.value_op(op)
            return
        match op:
            case ir.Load():
                self.load_op(op)
            case ir.Store():
                self.store_op(op)
            case ir.Meta():
                self.assign(op.dst, self.meta(op))
            case ir.Builtin(dst=d, name=n):
                self.assign(d, self.builtin(n))
            case ir.Atomic():
                self.atomic_op(op)
            case ir.Plane():
                self.plane_op(op)
            case ir.SyncCube():
                for s in self.barrier_lines():
                    self.line(s)
            case ir.If(cond=c):
                self.line(f"if ({self.val_as(c, c.type, None)}) {{")
                self.nested(op.then)
                if op.orelse:
                    self.line("} else {")
                    self.nested(op.orelse)
                self.line("}")
            case ir.Loop(body=body):
                self.line(self.LOOP)
                self.nested(body)
                self.line("}")
            case ir.Range():
                self.range_op(op)
            case ir.Break():
                self.line("break;")
            case ir.Continue():
                self.line("continue;")
            case ir.Return():
                self.line("return;")
            case _:  # pragma: no cover
                raise NotImplementedError(f"{type(self).__name__}: {op!r}")

    def value_op(self, op) -> None:
        d = op.dst
        whole = self.whole(op)
        if whole is not None:
            self.assign(d, whole)
            return
        if isinstance(op, ir.Insert) and d.type.lanes > 1 and self.copies_whole(d.type):
            # copy the line, then overwrite the lane
            self.assign(d, self.val_as(op.vec, d.type, None))
            self.assign(d, self.val_as(op.value, d.type.elem, None), op.lane)
            return
        for ln in self.value_lanes(d.type):
            self.assign(d, self.lane_expr(op, ln), ln)

    def lane_expr(self, op, ln) -> str:
        """The expression for lane `ln` of a value op's dst (all of it for None)."""
        t = op.dst.type
        lt = lane_type(t, ln)
        match op:
            case ir.Assign(src=s):
                return self.val_as(s, t, ln)
            case ir.Unary(op=o, a=a):
                return self.unary(o, lane_type(a.type, ln), self.val_as(a, a.type, ln))
            case ir.Binary(op=o, a=a, b=b):
                st = a.type if not isinstance(a, ir.Const) else b.type  # the operands' type
                return self.binary(o, lane_type(st, ln), self.val_as(a, st, ln),
                                   self.val_as(b, st, ln))
            case ir.Ternary(op=o, a=a, b=b, c=c):
                return self.ternary(o, lt, *(self.val_as(v, t, ln) for v in (a, b, c)))
            case ir.Select(cond=c, a=a, b=b):
                cl = ln if c.type.lanes > 1 else None
                return self.select(self.val_as(c, c.type, cl), self.val_as(a, t, ln),
                                   self.val_as(b, t, ln))
            case ir.Cast(a=a):
                al = ln if a.type.lanes > 1 else None
                return self.cast(self.val_as(a, a.type, al), lane_type(a.type, al), lt)
            case ir.Bitcast(a=a):
                return self.bitcast(self.val_as(a, a.type, ln), lane_type(a.type, ln), lt)
            case ir.Extract(vec=v, lane=k):
                return self.val_as(v, v.type, k)
            case ir.Insert(vec=v, lane=k, value=x):
                return self.val_as(x, lt, None) if ln == k else self.val_as(v, t, ln)
        raise NotImplementedError(f"{type(self).__name__}: {op!r}")  # pragma: no cover

    # ---- hooks -------------------------------------------------------------------------
    def whole(self, op) -> str | None:
        return None

    def select(self, c: str, a: str, b: str) -> str:
        return f"{c} ? {a} : {b}"

    def copies_whole(self, t: Type) -> bool:
        """Whether `dst = x` copies a whole value of type t (a line held lane by lane in
        separate variables cannot be)."""
        return self.value_lanes(t) == [None]

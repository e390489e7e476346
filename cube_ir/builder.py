"""A programmatic way to build kernels: the frontend and the tensor layer's fusion use it.

    b = Builder("axpy")
    x = b.array("x", f32); y = b.array("y", f32); a = b.scalar("a", f32)
    i = b.builtin("ABSOLUTE_POS")
    with b.if_(b.lt(i, b.len(y))):
        b.store(y, i, b.fma(a, b.load(x, i), b.load(y, i)))
    kernel = b.finish()

Python numbers passed as operands become constants of the other operand's type.
"""
from __future__ import annotations

from contextlib import contextmanager

from . import ir
from .ir import Block, Const, Kernel, LocalArray, Param, SharedArray, Value, Var
from .types import SCALARS, Type, boolean, f32, i32, promote, u32, vec, with_elem


class Builder:
    def __init__(self, name: str, plane_size: int = 1, checked: bool = True,
                 nowrap: bool = False):
        self.kernel = Kernel(name=name, params=[], body=Block(), plane_size=plane_size,
                             checked=checked, nowrap=nowrap)
        self._blocks: list[Block] = [self.kernel.body]
        self._next_id = 0
        self.loc = None  # location attached to new ops (the frontend keeps it current)

    # ---- declarations ------------------------------------------------------------------
    def array(self, name: str, elem: Type) -> Param:
        return self._param(name, "array", elem)

    def tensor(self, name: str, elem: Type, rank: int) -> Param:
        return self._param(name, "tensor", elem, rank)

    def scalar(self, name: str, t: Type) -> Param:
        return self._param(name, "scalar", t)

    def _param(self, name, kind, t, rank=0) -> Param:
        p = Param(name, kind, t, len(self.kernel.params), rank)
        self.kernel.params.append(p)
        return p

    def shared(self, t: Type, size: int, name: str | None = None) -> SharedArray:
        s = SharedArray(len(self.kernel.shared), t, int(size), name)
        self.kernel.shared.append(s)
        return s

    def local(self, t: Type, size: int, name: str | None = None) -> LocalArray:
        a = LocalArray(len(self.kernel.locals), t, int(size), name)
        self.kernel.locals.append(a)
        return a

    def var(self, t: Type, name: str | None = None) -> Var:
        v = Var(self._next_id, t, name)
        self._next_id += 1
        self.kernel.vars.append(v)
        return v

    def scalar_param_value(self, p: Param) -> Var:
        """Scalar params are read through a Load at index 0 of the param."""
        return self.emit_load(p, Const(0, u32))

    # ---- emission ----------------------------------------------------------------------
    @property
    def block(self) -> Block:
        return self._blocks[-1]

    def emit(self, op):
        if getattr(op, "loc", None) is None and hasattr(op, "loc"):
            op.loc = self.loc
        self.block.append(op)
        return op

    def const(self, value, t: Type) -> Const:
        if t.elem.is_bool:
            value = bool(value)
        elif t.elem.is_float:
            value = float(value)
        else:
            value = int(value)
        return Const(value, t)

    def _coerce(self, x, like: Type | None) -> Value:
        if isinstance(x, (Var, Const)):
            return x
        if isinstance(x, bool):
            return Const(x, boolean)
        if like is not None:
            return self.const(x, like)
        return Const(x, f32 if isinstance(x, float) else i32)

    def _pair(self, a, b):
        ta = a.type if isinstance(a, (Var, Const)) else None
        tb = b.type if isinstance(b, (Var, Const)) else None
        a = self._coerce(a, tb)
        b = self._coerce(b, ta or a.type)
        return a, b

    def assign(self, dst: Var, src) -> None:
        self.emit(ir.Assign(dst, self._coerce(src, dst.type)))

    def unary(self, op: str, a, t: Type | None = None) -> Var:
        a = self._coerce(a, None)
        dst = self.var(t or (with_elem(a.type, boolean) if op == "not" else a.type))
        self.emit(ir.Unary(dst, op, a))
        return dst

    def to_type(self, x: Value, t: Type) -> Value:
        """x converted to t: constants are retyped, anything else gets a Cast."""
        if x.type == t:
            return x
        if isinstance(x, Const):
            return self.const(x.value, t)
        return self.cast(x, t)

    def binary(self, op: str, a, b, t: Type | None = None) -> Var:
        a, b = self._pair(a, b)
        operand_t = promote(a.type, b.type)
        a, b = self.to_type(a, operand_t), self.to_type(b, operand_t)
        if t is None:
            t = with_elem(operand_t, boolean) if op in ir.COMPARE_OPS else operand_t
        dst = self.var(t)
        self.emit(ir.Binary(dst, op, a, b))
        return dst

    def shift(self, op: str, a, b) -> Value:
        """a << b (op "shl") or a >> b ("shr") as Python, NumPy and PyTorch define them on a
        fixed-width int: a count of the width or more, or a negative one (read as unsigned),
        shifts every bit out, giving 0, or the sign for a signed right shift. The IR's
        shl/shr take the count modulo the width (one instruction everywhere); a count that is
        not a constant adds a compare and a select. A constant negative count is the caller's
        to refuse (Python raises)."""
        a, b = self._pair(a, b)
        t = promote(a.type, b.type)
        a, b = self.to_type(a, t), self.to_type(b, t)
        width, signed = t.elem.bits, t.elem.is_signed
        if isinstance(b, Const):
            if 0 <= b.value < width:
                return self.binary(op, a, b)
            if op == "shr" and signed:
                return self.binary("shr", a, self.const(width - 1, t))
            return self.const(0, t)
        count = self.to_type(b, with_elem(t, SCALARS[f"u{width}"])) if signed else b
        inside = self.binary("lt", count, self.const(width, count.type))
        if op == "shr" and signed:  # the sign fills every bit: a >> (width - 1)
            return self.binary("shr", a, self.select(inside, b, self.const(width - 1, t)))
        return self.select(inside, self.binary(op, a, b), self.const(0, t))

    def ternary(self, op: str, a, b, c) -> Var:
        ref = next((x.type for x in (a, b, c) if isinstance(x, (Var, Const))), f32)
        a, b, c = (self._coerce(x, ref) for x in (a, b, c))
        t = promote(promote(a.type, b.type), c.type)
        a, b, c = (self.to_type(x, t) for x in (a, b, c))
        dst = self.var(t)
        self.emit(ir.Ternary(dst, op, a, b, c))
        return dst

    def select(self, cond, a, b) -> Var:
        a, b = self._pair(a, b)
        t = promote(a.type, b.type)
        a, b = self.to_type(a, t), self.to_type(b, t)
        cond = self._coerce(cond, boolean)
        if t.lanes > 1 and cond.type.lanes == 1 and isinstance(cond, Var):
            pass  # a scalar condition selects whole lines; backends accept it
        dst = self.var(t)
        self.emit(ir.Select(dst, cond, a, b))
        return dst

    def cast(self, a, t: Type) -> Var:
        dst = self.var(t)
        self.emit(ir.Cast(dst, self._coerce(a, t)))
        return dst

    def extract(self, v: Value, lane: int) -> Var:
        dst = self.var(v.type.elem)
        self.emit(ir.Extract(dst, v, lane))
        return dst

    def insert(self, v: Value, lane: int, x) -> Var:
        dst = self.var(v.type)
        self.emit(ir.Insert(dst, v, lane, self._coerce(x, v.type.elem)))
        return dst

    def emit_load(self, mem, index) -> Var:
        dst = self.var(mem.type)
        self.emit(ir.Load(dst, mem, self._coerce(index, u32)))
        return dst

    load = emit_load

    def store(self, mem, index, value) -> None:
        self.emit(ir.Store(mem, self._coerce(index, u32), self._coerce(value, mem.type)))

    def len(self, mem: Param) -> Var:
        dst = self.var(u32)
        self.emit(ir.Meta(dst, "len", mem))
        return dst

    def shape(self, mem: Param, dim) -> Var:
        dst = self.var(u32)
        self.emit(ir.Meta(dst, "shape", mem, self._coerce(dim, u32)))
        return dst

    def stride(self, mem: Param, dim) -> Var:
        dst = self.var(u32)
        self.emit(ir.Meta(dst, "stride", mem, self._coerce(dim, u32)))
        return dst

    def builtin(self, name: str) -> Var:
        assert name in ir.BUILTINS, name
        dst = self.var(u32, name.lower())
        self.emit(ir.Builtin(dst, name))
        return dst

    def atomic(self, op: str, mem, index, value, cmp=None, want_result: bool = True):
        dst = self.var(mem.type) if want_result else None
        value = self._coerce(value, mem.type)
        cmp = None if cmp is None else self._coerce(cmp, mem.type)
        self.emit(ir.Atomic(dst, op, mem, self._coerce(index, u32), value, cmp))
        return dst

    def plane(self, op: str, value, lane=None) -> Var:
        value = self._coerce(value, None)
        dst = self.var(value.type)
        self.emit(ir.Plane(dst, op, value, None if lane is None else self._coerce(lane, u32)))
        return dst

    def sync_cube(self) -> None:
        self.emit(ir.SyncCube())

    def break_(self) -> None:
        self.emit(ir.Break())

    def continue_(self) -> None:
        self.emit(ir.Continue())

    def return_(self) -> None:
        self.emit(ir.Return())

    # ---- structured control flow -------------------------------------------------------
    @contextmanager
    def if_(self, cond):
        op = self.emit(ir.If(self._coerce(cond, boolean)))
        self._blocks.append(op.then)
        try:
            yield _IfHandle(self, op)
        finally:
            self._blocks.pop()

    @contextmanager
    def loop(self):
        op = self.emit(ir.Loop())
        self._blocks.append(op.body)
        try:
            yield op
        finally:
            self._blocks.pop()

    @contextmanager
    def range(self, start, end, step: int = 1, t: Type | None = None):
        start, end = self._pair(start, end)
        var = self.var(t or promote(start.type, end.type))
        op = self.emit(ir.Range(var, start, end, int(step)))
        self._blocks.append(op.body)
        try:
            yield var
        finally:
            self._blocks.pop()

    @contextmanager
    def into(self, block: Block):
        """Emit into an existing block (used for else branches)."""
        self._blocks.append(block)
        try:
            yield
        finally:
            self._blocks.pop()

    # shorthands
    def add(self, a, b): return self.binary("add", a, b)
    def sub(self, a, b): return self.binary("sub", a, b)
    def mul(self, a, b): return self.binary("mul", a, b)
    def div(self, a, b): return self.binary("div", a, b)
    def lt(self, a, b): return self.binary("lt", a, b)
    def fma(self, a, b, c): return self.ternary("fma", a, b, c)

    def finish(self) -> Kernel:
        return self.kernel


class _IfHandle:
    def __init__(self, b: Builder, op: ir.If):
        self._b, self.op = b, op

    @contextmanager
    def else_(self):
        # called inside the `with b.if_()` body: temporarily switch to the else block
        self._b._blocks.append(self.op.orelse)
        try:
            yield
        finally:
            self._b._blocks.pop()


def line_type(elem, lanes: int) -> Type:
    return vec(elem, lanes)

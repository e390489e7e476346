"""IR -> C-family source: one walk over the kernel for all four dialects.

A `Line[T, n]` variable is one native vector where the dialect has that type (OpenCL `float4`,
MSL `float3`; see vectors.py), else n C locals (`v7_0 .. v7_{n-1}`, CUDA/HIP, bool lines,
sizes the dialect lacks). Lane k of either is an lvalue, so every op has a lane-by-lane form
and vector ops are a fast path on top. CUDA/HIP move lines of buffers in 16-byte vector
accesses. f16 and bf16 values are held in float and rounded after each inexact op, which gives
the correctly rounded half result for + - * / sqrt (f32 has more than 2*11+2 bits) and needs no
half arithmetic from the device.
"""
from __future__ import annotations

import re

from cube_ir import ir
from cube_ir.layout import C_FAMILY, layout
from cube_ir.passes.builtins import formula
from cube_ir.types import SCALARS, Scalar, Type, u32

from ..structured import StructuredEmitter
from . import prelude
from .dialects import Dialect
from .values import Values
from .vectors import VecOps

MATH = {"sqrt": "sqrt", "rsqrt": "rsqrt", "exp": "exp", "log": "log", "log1p": "log1p",
        "sin": "sin", "cos": "cos", "tanh": "tanh", "erf": "erf", "floor": "floor",
        "ceil": "ceil", "round": "rint", "abs": "fabs",
        **{o: o for o in ("tan asin acos atan sinh cosh asinh acosh atanh log2 log10 exp2 "
                          "expm1 trunc").split()}}
CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
BITS = {"and": "&", "or": "|", "xor": "^"}
WRAP = {"add": "+", "sub": "-", "mul": "*"}
FORMULA_OPS = {"add": "+", "mul": "*", "rem": "%"}  # u32 builtin formulas (passes.builtins)
# the dialect's index ids (index_ids) of each per-axis builtin
AXIS_IDS = (("UNIT_POS", "u"), ("CUBE_DIM", "d"), ("CUBE_POS", "g"), ("CUBE_COUNT", "c"))


def entry_name(kernel: ir.Kernel) -> str:
    return "cube_" + re.sub(r"[^A-Za-z0-9_]", "_", kernel.name or "kernel")


def _ident(name: str | None, fallback: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", name or "")
    return f"{s}_{fallback}" if s else fallback


class Emitter(StructuredEmitter):
    def __init__(self, kernel: ir.Kernel, d: Dialect, aliased: frozenset = frozenset()):
        super().__init__(kernel)
        self.d = d
        self.aliased = aliased  # buffer positions declared without restrict
        self.bufs: list = []  # (memory type, name, read-only, restrict) once run
        self.needs: dict = {}
        self.v = Values(d, self.needs)
        self.vo = VecOps(d, self.v)
        self.ntemps = 0
        lay = layout(kernel.params, C_FAMILY)
        self.slots, self.nbuf, self.nslots = lay.params, lay.nbuf, lay.nslots
        self.ps = kernel.plane_size
        self.builtins: dict[str, str] = {}  # builtin -> C name, defined in the prologue
        self.names: dict[int, str] = {}
        self.mem_names: dict[int, str] = {}
        self.written = {id(op.mem) for op in ir.walk(kernel.body)
                        if isinstance(op, (ir.Store, ir.Atomic))}

    # ---- output ------------------------------------------------------------------------
    def need(self, *keys: str) -> None:
        self.v.need(*keys)

    # ---- names -------------------------------------------------------------------------
    def var(self, v: ir.Var, k: int = 0) -> str:
        n = self.names.get(v.id)
        if n is None:
            n = self.names[v.id] = _ident(v.name, f"v{v.id}")
        if v.type.lanes == 1:
            return n
        return self.d.lane(n, k) if self.vtype(v.type) else f"{n}_{k}"

    def vname(self, v: ir.Var) -> str:
        """The C name of a native-vector variable as a whole."""
        self.var(v)
        return self.names[v.id]

    def vtype(self, t: Type) -> str | None:
        """The native vector type a line of type t is held in (None: scalarised lanes)."""
        return self.d.vec(t.elem, t.lanes) if t.lanes > 1 else None

    def vval(self, x: ir.Value, e: Scalar, n: int) -> str | None:
        """x as one native vector of n lanes of e (a scalar splats), or None."""
        vt = self.d.vec(e, n)
        if vt is None:
            return None
        if isinstance(x, ir.Const) or x.type.lanes == 1:
            return self.d.splat(vt, self.val(x, 0, e))
        if x.type.lanes != n or not self.vtype(x.type):
            return None
        return self.vo.cast(self.vname(x), x.type.elem, e, n)

    def temp(self) -> str:
        self.ntemps += 1
        return f"cube_v{self.ntemps}"

    def mem_name(self, m) -> str:
        n = self.mem_names.get(id(m))
        if n is None:
            if isinstance(m, ir.Param):
                n = "p_" + _ident(m.name, str(m.index))
            elif isinstance(m, ir.SharedArray):
                n = _ident(m.name, f"sh{m.id}")
            else:
                n = _ident(m.name, f"loc{m.id}")
            self.mem_names[id(m)] = n
        return n

    def val(self, x: ir.Value, k: int, e: Scalar | None = None) -> str:
        """Lane k of x (a scalar broadcasts) as element type e (default: x's own)."""
        e = e or x.type.elem
        if isinstance(x, ir.Const):
            return self.v.const(x.value, e)
        s = self.var(x, k if x.type.lanes > 1 else 0)
        return s if x.type.elem == e else self.v.cast(s, x.type.elem, e)

    def reg(self, e: Scalar) -> str:
        if e.bits == 64 and e.is_float:
            self.need("f64")
        return self.d.reg(e)

    # ---- top level ---------------------------------------------------------------------
    def run(self) -> str:
        k, d = self.k, self.d
        self.block(k.body)
        body, self.out = self.out, []
        self.depth = 1
        self._prologue()
        bufs = self.bufs = []
        for p, s in zip(k.params, self.slots):
            if s.kind != "scalar":
                bufs.append((d.mem(p.type.elem), self.mem_name(p), id(p) not in self.written,
                             len(bufs) not in self.aliased))
        if any(p.kind != "scalar" and p.type.elem.bits == 64 and p.type.elem.is_float
               for p in k.params):
            self.need("f64")
        lane_id = "plane" in self.needs or "UNIT_POS_PLANE" in self.builtins
        sig = d.signature(entry_name(k), bufs, self.ps > 1 and lane_id)
        parts = [f"// generated by cube from {k.source or k.name} ({d.name})",
                 d.header(set(self.needs)), d.args_struct(self.nslots),
                 prelude.render(d, self.needs, self.ps), sig + " {", *self.out, *body, "}"]
        return "\n".join(p for p in parts if p) + "\n"

    def _prologue(self) -> None:
        d, k = self.d, self.k
        ids = d.index_ids()
        if k.cube_dim is not None:
            for i, ax in enumerate("xyz"):
                ids["d" + ax] = f"{int(k.cube_dim[i])}u"
        axis = {f"{b}_{ax.upper()}": ids[c + ax] for b, c in AXIS_IDS for ax in "xyz"}
        done: set[str] = set()

        def define(name: str) -> str:
            """cube_NAME, defined once: per-axis ids from the dialect, the rest (the lane
            for plane ops) by the lowering's formula unless the dialect has its own."""
            if name not in done:
                done.add(name)
                own = d.native_lane(self.ps) if name == "UNIT_POS_PLANE" else None
                expr = axis.get(name) or own or render(formula(name, self.ps, k.cube_dim))
                self.line(f"const {d.uint(32)} cube_{name} = {expr};")
            return f"cube_{name}"

        def render(tree) -> str:
            if isinstance(tree, int):
                return f"{tree}u"
            if isinstance(tree, str):
                return define(tree)
            op, x, y = tree
            return f"({render(x)} {FORMULA_OPS[op]} {render(y)})"

        for b in self.builtins:
            define(b)
        for s in k.shared:
            self.line(d.shared(d.mem(s.type.elem), self.mem_name(s), s.size * s.type.lanes))
        for lo in k.locals:
            self.line(f"{d.mem(lo.type.elem)} {self.mem_name(lo)}[{lo.size * lo.type.lanes}];")
        for v in ir.declared_vars(k):
            if v.id in self.names:
                vt = self.vtype(v.type)
                if vt:
                    self.reg(v.type.elem)
                    self.line(f"{vt} {self.vname(v)} = {d.splat(vt, '0')};")
                    continue
                lanes = ", ".join(f"{self.var(v, i)} = 0" for i in range(v.type.lanes))
                self.line(f"{self.reg(v.type.elem)} {lanes};")

    # ---- statements (codegen.structured walks them; these are its hooks) ---------------
    def set(self, dst: ir.Var, exprs) -> None:
        for i, x in enumerate(exprs):
            self.line(f"{self.var(dst, i)} = {x};")

    def lanes(self, t: Type) -> range:
        return range(t.lanes)

    def value_lanes(self, t: Type) -> list:
        return [None] if t.lanes == 1 else list(range(t.lanes))

    def val_as(self, x: ir.Value, t: Type, lane) -> str:
        return self.val(x, 0 if lane is None else lane, t.elem)

    def assign(self, dst: ir.Var, expr: str, lane=None) -> None:
        whole = lane is None and self.vtype(dst.type)
        self.line(f"{self.vname(dst) if whole else self.var(dst, lane or 0)} = {expr};")

    def whole(self, op) -> str | None:
        return self.vector_op(op) if self.vtype(op.dst.type) else None

    def cast(self, x: str, src: Type, dst: Type) -> str:
        return self.v.cast(x, src.elem, dst.elem)

    def bitcast(self, x: str, src: Type, dst: Type) -> str:
        s, e, d = src.elem, dst.elem, self.d
        if s.is_float:
            u = d.as_uint(s.bits, x)
            return u if e == SCALARS[f"u{s.bits}"] else f"({self.reg(e)})({u})"
        if e.is_float:
            return d.as_float(e.bits, x)
        return f"({self.reg(e)})({x})"

    def load_op(self, op: ir.Load) -> None:
        d = op.dst
        r = self.vload(op.mem, op.index, d.type) if self.vtype(d.type) else None
        if r is not None:
            self.assign(d, r)
        else:
            self.set(d, self.load(op.mem, op.index, d.type))

    def store_op(self, op: ir.Store) -> None:
        self.store(op.mem, op.index, op.value)

    def barrier_lines(self) -> list[str]:
        return [self.d.barrier()]

    def range_op(self, op: ir.Range) -> None:
        v, st = op.var, op.step
        t = v.type.elem
        name = self.var(v)
        cmp = "<" if st > 0 else ">"
        inc = f"{name} += {self.v.const(st, t)}" if st > 0 else \
            f"{name} -= {self.v.const(-st, t)}"
        end = self.val(op.end, 0, t)
        if not isinstance(op.end, ir.Const):  # the end is read once, as the IR's range: the
            e = self.temp()                    # body may rebind the variable it came from
            self.line(f"{{ const {self.reg(t)} {e} = {end};")
            end = e
        if ir.range_steps_past_end(op):  # stop on the distance left, which cannot wrap
            ut = self.reg(SCALARS[f"u{t.bits}"])  # unsigned: no signed overflow
            hi, lo = (end, name) if st > 0 else (name, end)
            left = f"({ut})(({ut})({hi}) - ({ut})({lo}))"
            inc = f"{name} = {left} <= {abs(st)}u ? {end} : " + \
                (f"{name} + {self.v.const(st, t)}" if st > 0 else
                 f"{name} - {self.v.const(-st, t)}")
        self.line(f"for ({name} = {self.val(op.start, 0, t)}; {name} {cmp} {end}; {inc}) {{")
        self.nested(op.body)
        self.line("}" if isinstance(op.end, ir.Const) else "} }")

    def vector_op(self, op) -> str | None:
        """One native-vector expression for op (its dst is a vector), or None: lanes."""
        vo, dt = self.vo, op.dst.type
        e, n = dt.elem, dt.lanes
        match op:
            case ir.Assign(src=s):
                return self.vval(s, e, n)
            case ir.Unary(op=o, a=x):
                a = self.vval(x, x.type.elem, n) if x.type.elem == e else None
                return None if a is None else vo.unary(o, e, n, a)
            case ir.Binary(op=o, a=x, b=y):
                if o in CMP:
                    return None
                a, b = self.vval(x, e, n), self.vval(y, e, n)
                return None if a is None or b is None else vo.binary(o, e, n, a, b)
            case ir.Ternary(op=o, a=x, b=y, c=z):
                ws = [self.vval(w, e, n) for w in (x, y, z)]
                return None if None in ws else vo.ternary(o, e, n, *ws)
            case ir.Select(cond=c, a=x, b=y):
                a, b = self.vval(x, e, n), self.vval(y, e, n)
                if c.type.lanes > 1 or a is None or b is None:
                    return None  # a line of bools is scalarised: lane by lane
                return f"{self.val(c, 0)} ? {a} : {b}"
            case ir.Cast(a=x):
                if x.type.lanes == 1 or not self.vtype(x.type):
                    return None
                return vo.cast(self.vname(x), x.type.elem, e, n)
            case ir.Insert(vec=v, lane=k, value=x):
                whole = self.vval(v, e, n)
                if whole is None:
                    return None
                self.line(f"{self.vname(op.dst)} = {whole};")
                self.line(f"{self.var(op.dst, k)} = {self.val(x, 0, e)};")
                return self.vname(op.dst)
        return None

    # ---- arithmetic --------------------------------------------------------------------
    def unary(self, o: str, t: Type, a: str) -> str:
        e = t.elem
        d = self.d
        if o == "not":
            return f"!{a}" if e.is_bool else f"({a} == 0)"
        if o == "bitnot":
            return f"!{a}" if e.is_bool else f"({self.reg(e)})(~{a})"
        if o == "neg":
            if e.is_float:
                return f"(-{a})"
            return self._wrap(e, "-", self.v.const(0, e), a)
        if o == "abs" and not e.is_float:
            if not e.is_signed:
                return a
            u = d.uint(max(e.bits, 32))
            return f"({self.reg(e)})({a} < 0 ? ({u})0 - ({u}){a} : ({u}){a})"
        if o not in MATH or not e.is_float:
            raise NotImplementedError(f"C codegen: {o} on {e}")
        self.need(*d.math_needs(o))
        if o == "erf" and d.own_erf and e.bits <= 32:
            return self.v.erf("float", a)
        return f"{d.math(MATH[o], e)}({a})"

    def _wrap(self, e: Scalar, sym: str, a: str, b: str) -> str:
        """Wrapping integer arithmetic (C's signed overflow is undefined, the IR's wraps)."""
        if e.is_bool:
            return f"(({a} {sym} {b}) != 0)"
        if not e.is_signed and e.bits >= 32:
            return f"({a} {sym} {b})"
        u = self.d.uint(max(e.bits, 32))
        return f"({self.reg(e)})(({u}){a} {sym} ({u}){b})"

    def binary(self, o: str, e: Scalar, a: str, b: str) -> str:
        d = self.d
        if o in CMP:
            return f"({a} {CMP[o]} {b})"
        if e.is_float:
            self.need(*d.math_needs(o))
            r = d.float_binary(o, e, a, b)
            if r is None:
                raise NotImplementedError(f"C codegen: float {o}")
            return r
        if o in WRAP:
            return self._wrap(e, WRAP[o], a, b)
        if o in BITS:
            return f"({a} {BITS[o]} {b})" if e.is_bool else \
                f"({self.reg(e)})({a} {BITS[o]} {b})"
        if o in ("min", "max"):
            if e.is_bool:
                return f"({a} {'&&' if o == 'min' else '||'} {b})"
            return f"({a} {'<' if o == 'min' else '>'} {b} ? {a} : {b})"
        if e.is_bool:  # other ops on bools: as u8, then != 0
            raise NotImplementedError(f"C codegen: {o} on bool")
        if o in ("shl", "shr"):
            n = f"({b} & {e.bits - 1})"
            if o == "shr":
                return f"({self.reg(e)})({a} >> {n})"
            u = d.uint(max(e.bits, 32))
            return f"({self.reg(e)})(({u}){a} << {n})"
        if o in ("div", "rem"):
            self.need(f"divrem:{e.name}")
            return f"cube_{o}_{e.name}({a}, {b})"
        if o == "pow":
            self.need(f"pow:{e.name}")
            return f"cube_pow_{e.name}({a}, {b})"
        raise NotImplementedError(f"C codegen: {o} on {e}")

    def ternary(self, o: str, e: Scalar, a: str, b: str, c: str) -> str:
        if o == "clamp":
            return self.binary("min", e, self.binary("max", e, a, b), c)
        if o != "fma":
            raise NotImplementedError(o)
        if not e.is_float:
            return self._wrap(e, "+", self._wrap(e, "*", a, b), c)
        return f"{self.d.math('fma', e)}({a}, {b}, {c})"

    # ---- memory ------------------------------------------------------------------------
    def ref(self, m, index: ir.Value, k: int) -> str:
        it = index.type.elem
        idx = self.val(index, 0, u32 if it.is_bool else it)
        n = m.type.lanes
        if n == 1:
            return f"{self.mem_name(m)}[{idx}]"
        return f"{self.mem_name(m)}[({self.d.ints['i64']})({idx}) * {n} + {k}]"

    def space(self, m) -> str:
        return "global" if isinstance(m, ir.Param) else \
            "shared" if isinstance(m, ir.SharedArray) else "local"

    def index(self, index: ir.Value) -> str:
        it = index.type.elem
        return self.val(index, 0, u32 if it.is_bool else it)

    def vload(self, m, index: ir.Value, t: Type) -> str | None:
        """A line load into a native vector (OpenCL vloadN, MSL packed types), or None."""
        n, me = t.lanes, m.type.elem
        if (isinstance(m, ir.Param) and m.kind == "scalar") or m.type.lanes != n or \
                self.d.vec(me, n) is None:
            return None
        x = self.d.vload(self.d.vec(me, n), self.d.mem(me), n, self.index(index),
                         self.mem_name(m), self.space(m))
        return self.vo.cast(x, me, t.elem, n)

    def chunks(self, m, n: int) -> tuple[int, str] | None:
        """CUDA/HIP: w-wide vector accesses for a line of a buffer (buffers are allocated
        aligned and a line of n elements at index i starts at n*i, so a w-chunk that divides
        n is w-element aligned; shared/local arrays are only element aligned)."""
        if not isinstance(m, ir.Param) or m.kind == "scalar" or m.type.lanes != n or n == 1:
            return None
        return self.d.mem_chunks(m.type.elem, n)

    def chunk_at(self, index: ir.Value, per_line: int, j: int) -> str:
        if per_line == 1:
            return self.index(index)
        return f"({self.d.ints['i64']})({self.index(index)}) * {per_line} + {j}"

    def load(self, m, index: ir.Value, t: Type) -> list[str]:
        e = m.type.elem
        if isinstance(m, ir.Param) and m.kind == "scalar":
            s = self.slots[m.index]
            x = self.v.from_bits(e, f"args.s[{s.offset}]")
            return [self.v.cast(x, e, t.elem)] * t.lanes
        ch = self.chunks(m, t.lanes)
        if ch:
            w, vt = ch
            out = []
            for j in range(t.lanes // w):
                tmp = self.temp()
                self.line(f"const {vt} {tmp} = reinterpret_cast<const {vt}*>"
                          f"({self.mem_name(m)})[{self.chunk_at(index, t.lanes // w, j)}];")
                out += [self.v.cast(self.v.from_mem(e, f"{tmp}.{'xyzw'[c]}"), e, t.elem)
                        for c in range(w)]
            return out
        out = []
        for k in self.lanes(t):
            x = self.v.from_mem(e, self.ref(m, index, k if m.type.lanes > 1 else 0))
            out.append(self.v.cast(x, e, t.elem))
        return out

    def store(self, m, index: ir.Value, x: ir.Value) -> None:
        e, n = m.type.elem, m.type.lanes
        p = self.mem_name(m)
        v = self.vval(x, e, n) if n > 1 else None
        if v is not None:
            self.line(self.d.vstore(v, self.d.mem(e), n, self.index(index), p, self.space(m)))
            return
        ch = self.chunks(m, n)
        if ch:
            w, vt = ch
            for j in range(n // w):
                lanes = ", ".join(self.v.to_mem(e, self.val(x, j * w + c, e)) for c in range(w))
                self.line(f"reinterpret_cast<{vt}*>({p})[{self.chunk_at(index, n // w, j)}] = "
                          f"make_{vt}({lanes});")
            return
        for k in self.lanes(m.type):
            self.line(f"{self.ref(m, index, k)} = {self.v.to_mem(e, self.val(x, k, e))};")

    def meta(self, op: ir.Meta) -> str:
        """len of an array/tensor, shape/stride of a tensor at a constant dimension below its
        rank (passes.meta lowered the rest)."""
        s = self.slots[op.mem.index]
        slot = s.len if op.what == "len" else (s.shape if op.what == "shape" else s.stride)(
            int(op.dim.value))
        return f"({self.d.uint(32)})args.s[{slot}]"

    def builtin(self, name: str) -> str:
        self.builtins.setdefault(name, "")
        return f"cube_{name}"

    # ---- atomics -----------------------------------------------------------------------
    def atomic_op(self, op: ir.Atomic) -> None:
        m, e = op.mem, op.mem.type.elem
        if e.is_bool or e.name in ("f16", "bf16") or m.type.lanes != 1:
            raise NotImplementedError(f"C codegen: atomics on {m.type}")
        ref = self.ref(m, op.index, 0)
        v = self.val(op.value, 0, e)
        cmp = None if op.cmp is None else self.val(op.cmp, 0, e)
        # (atomics on unit-private arrays are plain read-modify-writes: passes.local_atomics)
        expr = self._atomic_expr(op.op, e, f"&{ref}", v, cmp,
                                 "global" if isinstance(m, ir.Param) else "shared")
        if op.dst is not None:
            self.set(op.dst, [self.v.cast(expr, e, op.dst.type.elem)])
        else:
            self.line(f"{expr};")

    def _atomic_expr(self, o, e, p, v, cmp, space) -> str:
        d = self.d
        if e.bits == 64:
            self.need("atomic64")
        native = d.atomic_native_call(o, e, p, v, cmp, space)
        if native is not None:
            return native
        self.need(*d.cas_needs())
        name = f"cube_atomic_{o}_{e.name}_{space}"
        key = f"text:{name}"
        if key not in self.needs:
            self.needs[key] = self._cas_helper(name, o, e, space)
        return f"{name}({p}, {cmp}, {v})" if o == "cas" else f"{name}({p}, {v})"

    def _cas_helper(self, name: str, o: str, e: Scalar, space: str) -> str:
        """A compare-and-swap on the bits of e's memory (floats, and dialects whose CAS takes
        unsigned words); read-modify-writes without a native call arrive as loops around it
        (passes.cas_loops)."""
        if o != "cas":
            raise NotImplementedError(f"C codegen: atomic {o} on {e} has no native call")
        d = self.d
        c, bits = self.reg(e), e.bits
        u, up = d.uint(bits), d.uptr(bits, space)
        back = d.as_float(bits, "old") if e.is_float else f"({c})(old)"

        def to_bits(x):
            return d.as_uint(bits, x) if e.is_float else f"({u})({x})"

        old = d.cas_bits(bits, space, f"({up})p", to_bits("cmp"), to_bits("v"))
        return (f"{d.fn} {c} {name}({d.spaces[space]}{c}* p, {c} cmp, {c} v) {{\n"
                f"    {u} old = {old};\n    return {back};\n}}")

    # ---- plane ops ---------------------------------------------------------------------
    def plane_op(self, op: ir.Plane) -> None:
        dst, o, x = op.dst, op.op, op.value
        self.need(*self.d.plane_needs(), "plane")
        my = self.builtin("UNIT_POS_PLANE")
        lane = None if op.lane is None else self.val(op.lane, 0, u32)
        self.set(dst, [self.d.plane(o, self.val(x, i, x.type.elem), x.type.elem, lane, my,
                                    self.ps) for i in self.lanes(dst.type)])

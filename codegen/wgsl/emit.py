"""The WGSL kernel emitter: bindings from the shader ABI, one `main` entry point, IR
variables as function-scope vars, structured control flow as is."""
from __future__ import annotations

import re

from cube_ir import ir
from cube_ir.layout import SHADER, Layout, layout
from cube_ir.types import Type, Vec, u32, with_elem

from ..shader_abi import binding
from ..structured import StructuredEmitter
from .expr import Expr, k
from .types import Unsupported, lit, reg, scalar, wide

XYZ = "xyz"


def entry_name(kernel: ir.Kernel) -> str:
    return "main"


def _ident(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name or "x")


class Emitter(StructuredEmitter):
    LOOP = "loop {"

    def __init__(self, kernel: ir.Kernel, plane_size: int = 1):
        super().__init__(kernel)
        self.plane = plane_size
        self.abi: Layout = layout(kernel.params, SHADER)
        self.helpers: dict[str, str] = {}
        self.x = Expr(self.helpers)
        self.ntmp = 0
        self.atomic = {id(op.mem) for op in ir.walk(kernel.body) if isinstance(op, ir.Atomic)}
        self.stored = {id(op.mem) for op in ir.walk(kernel.body)
                       if isinstance(op, (ir.Store, ir.Atomic))}
        self.names: dict[int, str] = {}  # id(memory) -> WGSL name
        self.uses_f16 = False

    # ---- output ------------------------------------------------------------------------
    def tmp(self, expr: str) -> str:
        self.ntmp += 1
        name = f"t{self.ntmp}"
        self.line(f"let {name} = {expr};")
        return name

    def ty(self, t: Type) -> str:
        if t.elem.name == "f16":
            self.uses_f16 = True
        return reg(t)

    # ---- top level ---------------------------------------------------------------------
    def run(self) -> str:
        k = self.k
        decls = [f"@group(0) @binding(0) var<uniform> cube_meta: array<vec4<u32>, "
                 f"{self.abi.nslots // 4}>;"]
        for slot in self.abi.params:
            p = slot.param
            if not slot.is_buffer:
                continue
            name = f"p_{_ident(p.name)}"
            self.names[id(p)] = name
            # read_write even when the kernel only reads: WebGPU forbids binding one buffer
            # read-only and read-write in a dispatch, and callers may pass aliases
            # (an in-place op, views of one allocation)
            decls.append(f"@group(0) @binding({binding(slot)}) var<storage, read_write> "
                         f"{name}: array<{self._param_elem(p)}>;")
        for s in k.shared:
            name = f"sh{s.id}"
            self.names[id(s)] = name
            elem = self._atomic_elem(s.type) if id(s) in self.atomic else self.ty(s.type)
            decls.append(f"var<workgroup> {name}: array<{elem}, {s.size}>;")
        if k.cube_dim is not None:
            dims = [f"{int(d)}u" for d in k.cube_dim]
            consts = [f"const WG_{a.upper()}: u32 = {d};" for a, d in zip(XYZ, dims)]
        else:
            consts = [f"override WG_{a.upper()}: u32 = 1u;" for a in XYZ]
        body_vars = []
        for v in ir.declared_vars(k):
            body_vars.append(f"    var v{v.id}: {self.ty(v.type)};")
        for lo in k.locals:
            name = f"lo{lo.id}"
            self.names[id(lo)] = name
            body_vars.append(f"    var {name}: array<{self.ty(lo.type)}, {lo.size}>;")
        self.block(k.body)
        head = ["enable f16;"] if self.uses_f16 else []
        sig = ("@compute @workgroup_size(WG_X, WG_Y, WG_Z)\n"
               "fn main(@builtin(local_invocation_id) lid: vec3<u32>,\n"
               "        @builtin(local_invocation_index) lidx: u32,\n"
               "        @builtin(workgroup_id) wid: vec3<u32>,\n"
               "        @builtin(num_workgroups) nwg: vec3<u32>,\n"
               "        @builtin(global_invocation_id) gid: vec3<u32>) {")
        parts = [*head, f"// cube kernel {k.name}", *decls, *consts, *self.helpers.values(),
                 sig, *body_vars, *self.out, "}", ""]
        return "\n".join(parts)

    def _param_elem(self, p: ir.Param) -> str:
        t = p.type
        e = t.elem
        scalar(e)  # raises for types the target lacks
        # (a buffer of a type WGSL cannot address arrives as u32 words: passes.packing)
        if id(p) in self.atomic:
            return self._atomic_elem(t)
        if isinstance(t, Vec) and t.lanes in (2, 4):
            return self.ty(t)
        return self.ty(e)

    def _atomic_elem(self, t: Type) -> str:
        e = t.elem
        if isinstance(t, Vec) or e.name not in ("i32", "u32", "f32"):
            raise Unsupported(f"atomics on {t} are not supported by the wgsl target")
        return f"atomic<{'u32' if e.is_float else scalar(e)}>"

    # ---- values ------------------------------------------------------------------------
    def lanes(self, t: Type) -> list:
        return list(range(t.lanes)) if wide(t) else [None]

    def lt(self, t: Type, lane) -> Type:
        return t.elem if lane is not None else t

    def val(self, v: ir.Value, lane=None) -> str:
        if isinstance(v, ir.Const):
            return lit(v.value, v.type.elem) if lane is not None else k(v.value, v.type)
        name = f"v{v.id}"
        if lane is not None and isinstance(v.type, Vec):
            return f"{name}[{lane}]"
        return name

    def val_as(self, v: ir.Value, t: Type, lane=None) -> str:
        """v's value as type t (the lane of a wide t when lane is given)."""
        if isinstance(v, ir.Const):
            return lit(v.value, t.elem) if lane is not None else k(v.value, t)
        if v.type == t:
            return self.val(v, lane)
        if lane is not None:
            return self.x.cast(v.type.elem, t.elem, self.val(v, lane))
        return self.x.cast(v.type, t, self.val(v))

    def assign(self, d: ir.Var, expr: str, lane=None) -> None:
        self.line(f"v{d.id}{'' if lane is None else f'[{lane}]'} = {expr};")

    # ---- statements (codegen.structured walks them; these are its hooks) ---------------
    value_lanes = lanes

    def copies_whole(self, t: Type) -> bool:  # wide lines are arrays: assignable whole
        return True

    def unary(self, o: str, t: Type, a: str) -> str:
        return self.x.unary(o, t, a)

    def binary(self, o: str, t: Type, a: str, b: str) -> str:
        return self.x.binary(o, t, a, b)

    def ternary(self, o: str, t: Type, a: str, b: str, c: str) -> str:
        return self.x.ternary(o, t, a, b, c)

    def select(self, c: str, a: str, b: str) -> str:
        return self.x.select(c, a, b)

    def cast(self, x: str, src: Type, dst: Type) -> str:
        return self.x.cast(src, dst, x)

    def bitcast(self, x: str, src: Type, dst: Type) -> str:
        return f"bitcast<{self.ty(dst)}>({x})"

    def load_op(self, op: ir.Load) -> None:
        self._load(op.dst, op.mem, op.index)

    def store_op(self, op: ir.Store) -> None:
        self._store(op.mem, op.index, op.value)

    def barrier_lines(self) -> list[str]:
        return ["storageBarrier();", "workgroupBarrier();"]

    def range_op(self, op: ir.Range) -> None:
        t = op.var.type
        v = f"v{op.var.id}"
        end = self.tmp(self.val_as(op.end, t))
        self.assign(op.var, self.val_as(op.start, t))
        cmp = "<" if op.step > 0 else ">"
        self.line("loop {")
        self.depth += 1
        self.line(f"if (!({v} {cmp} {end})) {{ break; }}")
        self.block(op.body)
        self.line("continuing {")
        step = k(op.step, t)
        nxt = self.x.wrap(t, f"({v} + {step})")
        if ir.range_steps_past_end(op):  # stop on the distance left (u32 math wraps, exact)
            hi, lo = (end, v) if op.step > 0 else (v, end)
            nxt = f"select({nxt}, {end}, bitcast<u32>({hi}) - bitcast<u32>({lo}) <= " \
                  f"{abs(op.step)}u)"
        self.line(f"    {v} = {nxt};")
        self.line("}")
        self.depth -= 1
        self.line("}")

    # ---- builtins and metadata ---------------------------------------------------------
    def builtin(self, name: str) -> str:
        """The builtins WGSL reads directly (codegen.wgsl.LOWERING); the lowering computed
        the rest."""
        if name == "UNIT_POS":
            return "lidx"
        base, a = name.rsplit("_", 1)
        src = {"UNIT_POS": "lid", "CUBE_POS": "wid", "CUBE_COUNT": "nwg",
               "ABSOLUTE_POS": "gid"}
        return f"WG_{a}" if base == "CUBE_DIM" else f"{src[base]}.{a.lower()}"

    def word(self, i: int) -> str:
        return f"cube_meta[{i // 4}][{i % 4}]"

    def _slot(self, p: ir.Param):
        for s in self.abi.params:
            if s.param is p:
                return s
        raise KeyError(p.name)

    def meta(self, op: ir.Meta) -> str:
        """len, or shape/stride at a constant dimension below the rank (passes.meta)."""
        s = self._slot(op.mem)
        if op.what == "len":
            return self.word(s.len)
        return self.word((s.shape if op.what == "shape" else s.stride)(int(op.dim.value)))

    def _scalar_param(self, p: ir.Param) -> str:
        w = self.word(self._slot(p).value)
        e = p.type.elem
        if e.is_bool:
            return f"({w} != 0u)"
        if e.name == "f16":
            self.uses_f16 = True
            return f"f16(unpack2x16float({w}).x)"
        if e.name == "bf16":
            return f"bitcast<f32>({w} << 16u)"
        if e.is_float:
            return f"bitcast<f32>({w})"
        return f"bitcast<i32>({w})" if e.is_signed else w

    # ---- memory ------------------------------------------------------------------------
    def _index(self, i: ir.Value) -> str:
        if isinstance(i, ir.Const):  # a negative literal (unchecked mode) wraps, as u32(i)
            return f"{int(i.value) & 0xFFFFFFFF}u"
        return self.tmp(self.val_as(i, u32))

    def _load(self, d: ir.Var, m, i: ir.Value) -> None:
        t = m.type
        if isinstance(m, ir.Param) and m.kind == "scalar":
            self._assign_conv(d, t.elem, self._scalar_param(m))
            return
        idx = self._index(i)
        name = self.names[id(m)]
        if not isinstance(m, ir.Param):
            if id(m) in self.atomic:
                r = f"atomicLoad(&{name}[{idx}])"
                r = f"bitcast<f32>({r})" if t.elem.is_float else r
            else:
                r = f"{name}[{idx}]"
            self._assign_conv(d, t, r)
            return
        e = t.elem
        if id(m) in self.atomic:
            r = f"atomicLoad(&{name}[{idx}])"
            self._assign_conv(d, t, f"bitcast<f32>({r})" if e.is_float else r)
        elif not isinstance(t, Vec) or t.lanes in (2, 4):
            self._assign_conv(d, t, f"{name}[{idx}]")
        else:  # vec3 and wide lines are stored as scalars
            vals = [f"{name}[{idx} * {t.lanes}u + {j}u]" for j in range(t.lanes)]
            self._assign_lanes(d, t, vals)

    def _assign_conv(self, d: ir.Var, t: Type, r: str) -> None:
        if d.type == t:
            self.assign(d, r)
        elif wide(d.type):
            tmp = self.tmp(r)
            for ln in self.lanes(d.type):
                src = f"{tmp}[{ln}]" if isinstance(t, Vec) else tmp
                self.assign(d, self.x.cast(t.elem, d.type.elem, src), ln)
        else:
            self.assign(d, self.x.cast(t, d.type, r))

    def _assign_lanes(self, d: ir.Var, t: Type, vals: list[str]) -> None:
        """Lane values (of t's element register type) into d (of type t)."""
        if not isinstance(t, Vec):
            self._assign_conv(d, t, vals[0])
        elif wide(t) and d.type == t:
            for ln, v in enumerate(vals):
                self.assign(d, v, ln)
        else:
            self._assign_conv(d, t, f"{reg(t)}({', '.join(vals)})")

    def _store(self, m, i: ir.Value, v: ir.Value) -> None:
        t = m.type
        idx = self._index(i)
        name = self.names[id(m)]
        if not isinstance(m, ir.Param):
            val = self.val_as(v, t) if not wide(t) else self._wide_value(v, t)
            if id(m) in self.atomic:
                val = f"bitcast<u32>({val})" if t.elem.is_float else val
                self.line(f"atomicStore(&{name}[{idx}], {val});")
            else:
                self.line(f"{name}[{idx}] = {val};")
            return
        e = t.elem
        if id(m) in self.atomic:
            val = self.val_as(v, t)
            val = f"bitcast<u32>({val})" if e.is_float else val
            self.line(f"atomicStore(&{name}[{idx}], {val});")
        elif not isinstance(t, Vec) or t.lanes in (2, 4):
            self.line(f"{name}[{idx}] = {self.val_as(v, t)};")
        else:
            for j in range(t.lanes):
                self.line(f"{name}[{idx} * {t.lanes}u + {j}u] = {self._lane_value(v, t, j)};")

    def _lane_value(self, v: ir.Value, t: Type, j: int) -> str:
        """Lane j of v as t's element register type."""
        if not isinstance(t, Vec):
            return self.val_as(v, t)
        if wide(t):
            return self.val_as(v, t, j)
        if isinstance(v, ir.Const):
            return lit(v.value, t.elem)
        return f"{self.tmp(self.val_as(v, t))}[{j}]"

    def _wide_value(self, v: ir.Value, t: Type) -> str:
        return f"{reg(t)}({', '.join(self.val_as(v, t, j) for j in range(t.lanes))})"

    # ---- atomics -----------------------------------------------------------------------
    def atomic_op(self, op: ir.Atomic) -> None:
        m, t = op.mem, op.mem.type
        idx = self._index(op.index)
        # (atomics on unit-private arrays are plain read-modify-writes: passes.local_atomics)
        ptr = f"&{self.names[id(m)]}[{idx}]"
        val = self.val_as(op.value, t)
        if op.op == "cas":
            old = self._cas(op, t, ptr, val)
        else:  # i32/u32 (f32 read-modify-writes arrive as CAS loops: passes.cas_loops)
            fn = {"add": "atomicAdd", "sub": "atomicSub", "min": "atomicMin",
                  "max": "atomicMax", "and": "atomicAnd", "or": "atomicOr",
                  "xor": "atomicXor", "exchange": "atomicExchange"}[op.op]
            old = self.tmp(f"{fn}({ptr}, {val})")
        self._atomic_result(op, t, old)

    def _cas(self, op: ir.Atomic, t: Type, ptr: str, val: str) -> str:
        """A strong compare-and-swap on the (u32/i32) bits, from WGSL's weak one: retried
        while it fails spuriously, that is while memory still holds `cmp`."""
        f = t.elem.is_float
        bits = (lambda s: f"bitcast<u32>({s})") if f else (lambda s: s)
        back = (lambda s: f"bitcast<f32>({s})") if f else (lambda s: s)
        self.ntmp += 1
        old = f"old{self.ntmp}"
        self.line(f"var {old} = atomicLoad({ptr});")
        self.line("loop {")
        self.depth += 1
        cmp = bits(self.val_as(op.cmp, t))
        self.line(f"if ({old} != {cmp}) {{ break; }}")
        self.line(f"let r = atomicCompareExchangeWeak({ptr}, {old}, {bits(val)});")
        self.line("if (r.exchanged) { break; }")
        self.line(f"{old} = r.old_value;")
        self.depth -= 1
        self.line("}")
        return back(old)

    def _atomic_result(self, op: ir.Atomic, t: Type, old: str) -> None:
        if op.dst is not None:
            self.assign(op.dst, self.x.cast(t, op.dst.type, old))

    # ---- plane ops ---------------------------------------------------------------------
    def plane_op(self, op: ir.Plane) -> None:
        d = op.dst
        # Subgroups: the runtime checked that the device's subgroups are consecutive runs of
        # `plane` local_invocation_index values (see runtimes.wgpu)
        t = d.type
        if op.op in ("broadcast", "shuffle", "shuffle_xor"):
            # the interpreter's rule: a unit whose source lane is outside the plane, missing
            # (a partial last plane) or inactive reads its own value
            ps = self.plane
            lane = self.val_as(op.lane, u32)
            src = self.tmp(f"(lidx % {ps}u) ^ {lane}" if op.op == "shuffle_xor" else lane)
            ballot = self.tmp("subgroupBallot(true)")
            ok = self.tmp(f"{src} < {ps}u && (({ballot}[min({src}, {ps - 1}u) / 32u] >> "
                          f"({src} % 32u)) & 1u) == 1u")
            for ln in self.lanes(t):
                v = self.val(op.value, ln)
                lt = self.lt(t, ln)
                if lt.elem.is_bool:
                    sh = f"(subgroupShuffle(select(0u, 1u, {v}), min({src}, {ps - 1}u)) != 0u)"
                    if isinstance(lt, Vec):
                        sh = f"(subgroupShuffle(select({reg(with_elem(lt, u32))}(0u), " \
                             f"{reg(with_elem(lt, u32))}(1u), {v}), min({src}, {ps - 1}u)) " \
                             f"!= {reg(with_elem(lt, u32))}(0u))"
                else:
                    sh = f"subgroupShuffle({v}, min({src}, {ps - 1}u))"
                self.assign(d, f"select({v}, {sh}, {ok})", ln)
            return
        if op.op in ("all", "any"):
            fn = "subgroupAll" if op.op == "all" else "subgroupAny"
            for ln in self.lanes(t):
                v = self.val(op.value, ln)
                lt = self.lt(t, ln)
                if isinstance(lt, Vec):
                    v = f"{reg(lt)}({', '.join(f'{fn}({v}[{j}])' for j in range(lt.lanes))})"
                else:
                    v = f"{fn}({v})"
                self.assign(d, v, ln)
            return
        fn = {"sum": "subgroupAdd", "prod": "subgroupMul", "max": "subgroupMax",
              "min": "subgroupMin", "inclusive_sum": "subgroupInclusiveAdd",
              "exclusive_sum": "subgroupExclusiveAdd", "inclusive_prod": "subgroupInclusiveMul",
              "exclusive_prod": "subgroupExclusiveMul"}[op.op]
        exact = op.op in ("max", "min")
        for ln in self.lanes(t):
            lt = self.lt(t, ln)
            v = self.val(op.value, ln)
            if exact:
                r = f"{fn}({v})"
            else:  # (narrow ints and halves accumulate in 32 bits: passes.legalise)
                r = f"{fn}({v})"
            self.assign(d, r, ln)


def emit(kernel: ir.Kernel, plane_size: int = 1) -> tuple[str, Layout]:
    em = Emitter(kernel, plane_size)
    return em.run(), em.abi


__all__ = ["Emitter", "Unsupported", "emit", "entry_name"]

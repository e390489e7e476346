"""The kernel emitter: prologue (argument block), cube loop, regions as unit loops, ops."""
from __future__ import annotations

import re

from cube_ir import ir
from cube_ir.layout import LLVM, layout
from cube_ir.types import Type, Vec, u32

from .arith import Arith
from .fn import Fn, Module
from .regions import CIf, CJump, CLoop, CRange, Plan, Region, plan
from .types import const, mem, mem_bytes, reg, reg_bytes

XYZ = "XYZ"


def entry_name(kernel: ir.Kernel) -> str:
    return "cube_" + re.sub(r"[^A-Za-z0-9_]", "_", kernel.name or "kernel")


class Emitter:
    def __init__(self, kernel: ir.Kernel) -> None:
        self.k = kernel
        self.plan: Plan = plan(kernel)
        self.mod = Module()
        self.fn = Fn(self.mod)
        self.a = Arith(self.fn, nowrap=kernel.nowrap)
        self.layout = layout(kernel.params, LLVM)
        self.slots, self.nslots = self.layout.params, self.layout.nslots
        self.entry = entry_name(kernel)
        self.vars = {v.id: v for v in ir.declared_vars(kernel)}
        self.var_ptr0: dict[int, str] = {}
        self.unit: dict | None = None  # current region: u64, builtins, return target
        self.unit_loops: list[tuple[str, str]] = []  # (break, continue) of IR loops in a region
        self.cube_loops: list[tuple[str, str]] = []
        self.stack_fixed = 0
        self.stack_per_unit = 0

    # ---- top level ---------------------------------------------------------------------
    def run(self) -> str:
        fn, a = self.fn, self.a
        self._prologue()
        cnt = fn.alloca("i64", hint="cube")
        fn.do(f"store i64 %cube_begin, ptr {cnt}")
        hdr, body, latch, done = (fn.label(h) for h in ("cube_hdr", "cube_body", "cube_latch",
                                                         "cube_done"))
        fn.block(hdr)
        c = fn.op(f"load i64, ptr {cnt}", "c")
        fn.cbr(a.icmp("slt", "i64", c, "%cube_end"), body, done)
        fn.block(body)
        self._cube_builtins(c)
        if self.plan.unit_return:
            name = self.mod.declare("llvm.memset.p0.i64", "void", ["ptr", "i8", "i64", "i1"])
            fn.do(f"call void @{name}(ptr {self.exited}, i8 0, i64 {self.nunits}, i1 false)")
        self.cube_latch = latch
        self._tree(self.plan.tree)
        fn.block(latch)
        fn.do(f"store i64 {fn.op(f'add i64 {c}, 1')}, ptr {cnt}")
        fn.br(hdr)
        fn.block(done)
        fn.ret()
        header = (f"define void @{self.entry}(ptr noalias readonly %args, i64 %cube_begin, "
                  f"i64 %cube_end) nounwind")
        self.mod.defs.append(fn.define(header))
        self.mod.defs.append(_par_wrapper(self.entry))
        return self.mod.text()

    def _slot(self, i: int, ty: str = "i64") -> str:
        p = self.fn.op(f"getelementptr inbounds i64, ptr %args, i64 {i}", "s")
        return self.fn.op(f"load {ty}, ptr {p}", "v")

    def _prologue(self) -> None:
        fn, a, k = self.fn, self.a, self.k
        cc = [self._slot(self.layout.header_slot(f"cube_count_{c}")) for c in "xyz"]
        if k.cube_dim is not None:
            cd = [str(int(d)) for d in k.cube_dim]
        else:
            cd = [self._slot(self.layout.header_slot(f"cube_dim_{c}")) for c in "xyz"]
        self.cube_count64, self.cube_dim64 = cc, cd
        self.cd32 = [d if k.cube_dim is not None else a.conv("trunc", "i64", d, "i32")
                     for d in cd]
        self.cdim_const = tuple(k.cube_dim) if k.cube_dim is not None else None
        n = fn.op(f"mul i64 {cd[0]}, {cd[1]}")
        self.nunits = fn.op(f"mul i64 {n}, {cd[2]}", "nunits")
        self.ccxy = fn.op(f"mul i64 {cc[0]}, {cc[1]}")
        # parameters
        self.pptr: dict[int, str] = {}
        self.plen: dict[int, str] = {}
        self.pshape: dict[int, list] = {}
        self.pstride: dict[int, list] = {}
        self.pscalar: dict[int, str] = {}
        for p, s in zip(k.params, self.slots):
            if p.kind == "scalar":
                self.pscalar[p.index] = self._scalar_param(p.type, self._slot(s.offset))
                continue
            self.pptr[p.index] = self._slot(s.ptr, "ptr")
            self.plen[p.index] = self._slot(s.len)
            self.pshape[p.index] = [self._slot(s.shape(d)) for d in range(s.rank)]
            self.pstride[p.index] = [self._slot(s.stride(d)) for d in range(s.rank)]
        # storage
        for v in self.vars.values():
            st = self.plan.storage.get(v.id, "arr" if self.plan.barrier else "reg")
            if st == "arr":
                self.var_ptr0[v.id] = fn.op(f"alloca {reg(v.type)}, i64 {self.nunits}, "
                                            f"align 16", "arr")
                self.stack_per_unit += reg_bytes(v.type) + 8
            else:
                self.var_ptr0[v.id] = fn.alloca(reg(v.type), hint="var")
        self.shared = {}
        for s in k.shared:
            self.shared[s.id] = fn.alloca(f"[{s.size} x {mem(s.type)}]", align=64, hint="sh")
            self.stack_fixed += s.size * mem_bytes(s.type.elem) * s.type.lanes
        self.local = {}
        for loc in k.locals:
            size = loc.size * mem_bytes(loc.type.elem) * loc.type.lanes
            if loc.id in self.plan.local_per_unit:
                n = fn.op(f"mul i64 {self.nunits}, {loc.size}")
                self.local[loc.id] = fn.op(f"alloca {mem(loc.type)}, i64 {n}, align 16", "loc")
                self.stack_per_unit += size
            else:
                self.local[loc.id] = fn.alloca(f"[{loc.size} x {mem(loc.type)}]", hint="loc")
                self.stack_fixed += size
        if self.plan.unit_return:
            self.exited = fn.op(f"alloca i8, i64 {self.nunits}, align 16", "exited")
            self.stack_per_unit += 1

    def _scalar_param(self, t: Type, v: str) -> str:
        a, e = self.a, t.elem
        if e.is_bool:
            return a.icmp("ne", "i64", v, "0")
        if e.name == "bf16":
            return a.bf16_load("float", a.conv("trunc", "i64", v, "i16"))
        bits = a.conv("trunc", "i64", v, f"i{e.bits}")
        if e.is_float:
            bits = a.conv("bitcast", f"i{e.bits}", bits, reg(e))
        if isinstance(t, Vec):
            return a.splat(bits, reg(e), t.lanes)
        return bits

    def _cube_builtins(self, c: str) -> None:
        a = self.a
        cc = self.cube_count64
        x = a.bin("urem", "i64", c, cc[0])
        y = a.bin("urem", "i64", a.bin("udiv", "i64", c, cc[0]), cc[1])
        z = a.bin("udiv", "i64", c, self.ccxy)
        t = [a.conv("trunc", "i64", v, "i32") for v in (x, y, z)]
        c32 = a.conv("trunc", "i64", c, "i32")
        cd = self.cd32
        cdim = a.bin("mul", "i32", a.bin("mul", "i32", cd[0], cd[1]), cd[2])
        cc32 = [a.conv("trunc", "i64", v, "i32") for v in cc]
        ccount = a.bin("mul", "i32", a.bin("mul", "i32", cc32[0], cc32[1]), cc32[2])
        b = {"CUBE_POS": c32, "CUBE_DIM": cdim, "CUBE_COUNT": ccount}
        for i, ax in enumerate(XYZ):
            b[f"CUBE_POS_{ax}"] = t[i]
            b[f"CUBE_DIM_{ax}"] = cd[i]
            b[f"CUBE_COUNT_{ax}"] = cc32[i]
            b[f"_BASE_{ax}"] = a.fn.op(f"mul nuw i32 {t[i]}, {cd[i]}")
        b["_BASE"] = a.fn.op(f"mul nuw i32 {c32}, {cdim}")
        self.cube_vals = b

    # ---- cube level --------------------------------------------------------------------
    def _tree(self, nodes: list) -> None:
        fn = self.fn
        for n in nodes:
            if isinstance(n, Region):
                self._region(n)
            elif isinstance(n, CIf):
                c = self.read(n.cond)
                then, orelse, end = fn.label("cthen"), fn.label("celse"), fn.label("cend")
                fn.cbr(c, then, orelse)
                fn.block(then)
                self._tree(n.then)
                fn.br(end)
                fn.block(orelse)
                self._tree(n.orelse)
                fn.block(end)
            elif isinstance(n, CLoop):
                hdr, exit_ = fn.label("cloop"), fn.label("cloop_end")
                fn.block(hdr)
                self.cube_loops.append((exit_, hdr))
                self._tree(n.body)
                self.cube_loops.pop()
                fn.br(hdr)
                fn.block(exit_)
            elif isinstance(n, CRange):
                self._range(n.op, lambda body=n.body: self._tree(body), self.cube_loops)
            elif isinstance(n, CJump):
                if n.kind == "return":
                    fn.br(self.cube_latch)
                else:
                    brk, cont = self.cube_loops[-1]
                    fn.br(brk if n.kind == "break" else cont)
            else:  # pragma: no cover
                raise TypeError(n)

    # ---- regions: a loop over the cube's units -----------------------------------------
    def _region(self, r: Region) -> None:
        """Units as two loops: rows (y, z together) outside, x inside (vectorisable)."""
        fn, a = self.fn, self.a
        cd, const = self.cd32, self.cdim_const
        loops = []
        if const is None or const[1] * const[2] != 1:
            rows = fn.op(f"mul nuw i32 {cd[1]}, {cd[2]}", "rows")
            loops.append(("row", rows))
        if const is None or const[0] != 1:
            loops.append(("x", cd[0]))
        latches, idx = [], {"row": "0", "x": "0"}
        for name, bound in loops:
            cnt = fn.alloca("i32", hint="u" + name)
            hdr, body, latch, exit_ = (fn.label(h + name) for h in
                                       ("uhdr", "ubody", "ulatch", "uexit"))
            fn.do(f"store i32 0, ptr {cnt}")
            fn.block(hdr)
            v = fn.op(f"load i32, ptr {cnt}", "u")
            fn.cbr(a.icmp("ult", "i32", v, bound), body, exit_)
            fn.block(body)
            idx[name] = v
            latches.append((cnt, v, hdr, latch, exit_))
        row = idx["row"]
        pos = [idx["x"], "0", "0"]
        if const is not None and const[1] == 1:
            pos[2] = row
        elif const is not None and const[2] == 1:
            pos[1] = row
        else:
            pos[1] = fn.op(f"urem i32 {row}, {cd[1]}")
            pos[2] = fn.op(f"udiv i32 {row}, {cd[1]}")
        inner_latch = fn.label("unext")
        lin = fn.op(f"mul nuw i32 {row}, {cd[0]}")
        lin = fn.op(f"add nuw i32 {lin}, {pos[0]}", "upos")
        u64 = fn.op(f"zext i32 {lin} to i64", "uidx")
        cv = self.cube_vals
        b = {"UNIT_POS": lin, "ABSOLUTE_POS": fn.op(f"add nuw i32 {cv['_BASE']}, {lin}")}
        for i, ax in enumerate(XYZ):
            b[f"UNIT_POS_{ax}"] = pos[i]
            b[f"ABSOLUTE_POS_{ax}"] = fn.op(f"add nuw i32 {cv['_BASE_' + ax]}, {pos[i]}")
        self.unit = {"u": u64, "b": b, "ret": inner_latch}
        if self.plan.barrier and self.plan.unit_return:
            p = fn.op(f"getelementptr inbounds i8, ptr {self.exited}, i64 {u64}")
            gone = a.icmp("ne", "i8", fn.op(f"load i8, ptr {p}"), "0")
            go = fn.label("ugo")
            fn.cbr(gone, inner_latch, go)
            fn.block(go)
            self.unit["exited"] = p
        self._block(r.ops)
        fn.block(inner_latch)
        for cnt, v, hdr, latch, exit_ in reversed(latches):
            fn.block(latch)
            fn.do(f"store i32 {fn.op(f'add nuw i32 {v}, 1')}, ptr {cnt}")
            # the vectoriser still interleaves; LLVM's unroller only multiplied code (and
            # compile time) for the remainder loops
            fn.br(hdr, self.mod.loop_md("llvm.loop.unroll.disable"))
            fn.block(exit_)
        self.unit = None

    # ---- values ------------------------------------------------------------------------
    def ptr_of(self, v: ir.Var) -> str:
        base = self.var_ptr0[v.id]
        st = self.plan.storage.get(v.id, "arr" if self.plan.barrier else "reg")
        if st == "arr" and self.unit is not None:
            return self.fn.op(f"getelementptr inbounds {reg(v.type)}, ptr {base}, "
                              f"i64 {self.unit['u']}")
        return base

    def read(self, v: ir.Value) -> str:
        if isinstance(v, ir.Const):
            return const(v.value, v.type)
        return self.fn.op(f"load {reg(v.type)}, ptr {self.ptr_of(v)}")

    def read_as(self, v: ir.Value, t: Type) -> str:
        if isinstance(v, ir.Const):
            return const(v.value, t)
        return self.a.cast(v.type, t, self.read(v))

    def write(self, v: ir.Var, x: str) -> None:
        self.fn.do(f"store {reg(v.type)} {x}, ptr {self.ptr_of(v)}")

    # ---- unit-level ops ----------------------------------------------------------------
    def _block(self, block) -> None:
        for op in block:
            self._op(op)

    def _op(self, op) -> None:
        fn, a = self.fn, self.a
        match op:
            case ir.Assign(dst=d, src=s):
                self.write(d, self.read_as(s, d.type))
            case ir.Unary(dst=d, op=o, a=x):
                self.write(d, a.unary(o, x.type, self.read(x), d.type))
            case ir.Binary(dst=d, op=o, a=x, b=y):
                t = x.type if not isinstance(x, ir.Const) else y.type
                self.write(d, a.binary(o, t, self.read_as(x, t), self.read_as(y, t)))
            case ir.Ternary(dst=d, op=o, a=x, b=y, c=z):
                t = d.type
                self.write(d, a.ternary(o, t, *(self.read_as(v, t) for v in (x, y, z))))
            case ir.Select(dst=d, cond=c, a=x, b=y):
                cv = self.read(c)
                cll = reg(c.type)
                self.write(d, a.select(cv, reg(d.type), self.read_as(x, d.type),
                                       self.read_as(y, d.type), cll))
            case ir.Cast(dst=d, a=x):
                self.write(d, a.cast(x.type, d.type, self.read(x)))
            case ir.Bitcast(dst=d, a=x):
                self.write(d, a.conv("bitcast", reg(x.type), self.read(x), reg(d.type)))
            case ir.Extract(dst=d, vec=v, lane=k):
                self.write(d, fn.op(f"extractelement {reg(v.type)} {self.read(v)}, i32 {k}"))
            case ir.Insert(dst=d, vec=v, lane=k, value=x):
                e = d.type.elem
                xv = self.read_as(x, e)
                self.write(d, fn.op(f"insertelement {reg(d.type)} {self.read_as(v, d.type)}, "
                                    f"{reg(e)} {xv}, i32 {k}"))
            case ir.Load(dst=d, mem=m, index=i):
                self.write(d, self._load(m, i, d.type))
            case ir.Store(mem=m, index=i, value=x):
                self._store(m, i, x)
            case ir.Meta():
                self.write(op.dst, self._meta(op))
            case ir.Builtin(dst=d, name=n):
                self.write(d, self._builtin(n))
            case ir.Atomic():
                self._atomic(op)
            case ir.SyncCube():
                pass  # only in barrier-free regions when the kernel has none (never reached)
            case ir.If(cond=c):
                then, orelse, end = fn.label("then"), fn.label("else"), fn.label("endif")
                fn.cbr(self.read(c), then, orelse if op.orelse else end)
                fn.block(then)
                self._block(op.then)
                fn.br(end)
                if op.orelse:
                    fn.block(orelse)
                    self._block(op.orelse)
                fn.block(end)
            case ir.Loop(body=body):
                hdr, exit_ = fn.label("loop"), fn.label("loop_end")
                fn.block(hdr)
                self.unit_loops.append((exit_, hdr))
                self._block(body)
                self.unit_loops.pop()
                fn.br(hdr)
                fn.block(exit_)
            case ir.Range():
                self._range(op, lambda: self._block(op.body), self.unit_loops)
            case ir.Break():
                fn.br(self.unit_loops[-1][0])
            case ir.Continue():
                fn.br(self.unit_loops[-1][1])
            case ir.Return():
                if "exited" in self.unit:
                    fn.do(f"store i8 1, ptr {self.unit['exited']}")
                fn.br(self.unit["ret"])
            case _:  # pragma: no cover
                raise NotImplementedError(f"llvm codegen: {op!r}")

    def _range(self, op: ir.Range, body, stack: list) -> None:
        fn, a = self.fn, self.a
        t = op.var.type
        ll = reg(t)
        start, end = self.read_as(op.start, t), self.read_as(op.end, t)
        self.write(op.var, start)
        pred = ("s" if t.elem.is_signed else "u") + ("lt" if op.step > 0 else "gt")
        lim = None
        if ir.range_steps_past_end(op):
            # the last value that may take another step (end - step, computed once): the
            # latch compares with it, so the counter never steps past its type's limit and
            # wraps, at one compare an iteration as before
            lo, hi = t.elem.int_range
            s = abs(op.step)
            if op.step > 0:
                ok = a.icmp(pred[0] + "ge", ll, end, const(lo + s, t))
                lim = a.select(ok, ll, fn.op(f"sub {ll} {end}, {const(s, t)}"), const(lo, t))
            else:
                ok = a.icmp(pred[0] + "le", ll, end, const(hi - s, t))
                lim = a.select(ok, ll, fn.op(f"add {ll} {end}, {const(s, t)}"), const(hi, t))
        hdr, bl, latch, exit_ = (fn.label(h) for h in ("rhdr", "rbody", "rlatch", "rexit"))
        fn.block(hdr)
        v = self.read(op.var)
        fn.cbr(a.icmp(pred, ll, v, end), bl, exit_)
        fn.block(bl)
        stack.append((exit_, latch))
        body()
        stack.pop()
        fn.block(latch)
        v = self.read(op.var)
        if lim is not None:
            step = fn.label("rstep")
            fn.cbr(a.icmp(pred, ll, v, lim), step, exit_)
            fn.block(step)
        self.write(op.var, fn.op(f"add {ll} {v}, {const(op.step, t)}"))
        fn.br(hdr)
        fn.block(exit_)

    def _builtin(self, name: str) -> str:
        if name in self.cube_vals:
            return self.cube_vals[name]
        return self.unit["b"][name]

    def _meta(self, op: ir.Meta) -> str:
        """len, or shape/stride at a constant dimension below the rank (passes.meta)."""
        m = op.mem
        if op.what == "len":
            v = self.plen[m.index]
        else:
            v = (self.pshape if op.what == "shape" else self.pstride)[m.index][
                int(op.dim.value)]
        return self.a.conv("trunc", "i64", v, "i32")

    # ---- memory ------------------------------------------------------------------------
    def _addr(self, m, index: ir.Value) -> tuple[str, str, int]:
        a, fn = self.a, self.fn
        it = index.type if not index.type.elem.is_bool else u32
        idx = a.index64(it, self.read_as(index, it))
        if isinstance(m, ir.Param):
            base = self.pptr[m.index]
        elif isinstance(m, ir.SharedArray):
            base = self.shared[m.id]
        elif isinstance(m, ir.LocalArray):
            base = self.local[m.id]
            if m.id in self.plan.local_per_unit:
                off = fn.op(f"mul i64 {self.unit['u']}, {m.size}")
                idx = fn.op(f"add i64 {off}, {idx}")
        else:  # pragma: no cover
            raise TypeError(m)
        mt = mem(m.type)
        if m.type.lanes > 1:  # step in elements: <3 x float> has an alloc size of 16 bytes
            idx = fn.op(f"mul i64 {idx}, {m.type.lanes}")
        p = fn.op(f"getelementptr inbounds {mem(m.type.elem)}, ptr {base}, i64 {idx}", "p")
        return p, mt, mem_bytes(m.type.elem)

    def _load(self, m, index: ir.Value, t: Type) -> str:
        if isinstance(m, ir.Param) and m.kind == "scalar":
            return self.a.cast(m.type, t, self.pscalar[m.index])
        p, mt, al = self._addr(m, index)
        x = self.a.from_mem(m.type, self.fn.op(f"load {mt}, ptr {p}, align {al}"))
        return self.a.cast(m.type, t, x)

    def _store(self, m, index: ir.Value, value: ir.Value) -> None:
        x = self.a.to_mem(m.type, self.read_as(value, m.type))
        p, mt, al = self._addr(m, index)
        self.fn.do(f"store {mt} {x}, ptr {p}, align {al}")

    def _atomic(self, op: ir.Atomic) -> None:
        a, fn = self.a, self.fn
        t = op.mem.type
        e = t.elem
        if isinstance(t, Vec) or e.is_bool or e.name == "bf16":
            raise NotImplementedError(f"atomics on {t}")
        p, mt, al = self._addr(op.mem, op.index)
        ll = reg(t)
        val = self.read_as(op.value, t)
        if op.op == "cas":
            il = f"i{e.bits}"
            cmp = a.conv("bitcast", ll, self.read_as(op.cmp, t), il) if e.is_float else \
                self.read_as(op.cmp, t)
            new = a.conv("bitcast", ll, val, il) if e.is_float else val
            pair = fn.op(f"cmpxchg ptr {p}, {il} {cmp}, {il} {new} seq_cst seq_cst, align {al}")
            old = fn.op(f"extractvalue {{ {il}, i1 }} {pair}, 0")
            old = a.conv("bitcast", il, old, ll) if e.is_float else old
        else:
            if e.is_float:
                rmw = {"add": "fadd", "sub": "fsub", "min": "fmin", "max": "fmax",
                       "exchange": "xchg"}[op.op]
            else:
                rmw = {"add": "add", "sub": "sub", "and": "and", "or": "or", "xor": "xor",
                       "exchange": "xchg", "min": "min" if e.is_signed else "umin",
                       "max": "max" if e.is_signed else "umax"}[op.op]
            old = fn.op(f"atomicrmw {rmw} ptr {p}, {ll} {val} seq_cst, align {al}")
        if op.dst is not None:
            self.write(op.dst, a.cast(t, op.dst.type, old))


def emit(kernel: ir.Kernel) -> Emitter:
    em = Emitter(kernel)
    em.text = em.run()
    return em


def _par_wrapper(entry: str) -> str:
    """`<entry>_par(args, counter, n, chunk)`: claim chunks of cubes from a shared atomic
    counter until none are left, so each thread of a parallel launch makes one call."""
    return f"""define void @{entry}_par(ptr %args, ptr %counter, i64 %n, i64 %chunk) nounwind {{
entry:
  br label %claim
claim:
  %b = atomicrmw add ptr %counter, i64 %chunk monotonic, align 8
  %more = icmp slt i64 %b, %n
  br i1 %more, label %run, label %done
run:
  %e0 = add i64 %b, %chunk
  %lt = icmp slt i64 %e0, %n
  %e = select i1 %lt, i64 %e0, i64 %n
  call void @{entry}(ptr %args, i64 %b, i64 %e) #900
  br label %claim
done:
  ret void
}}

attributes #900 = {{ noinline }}"""

"""Vulkan compute SPIR-V (1.3) straight from the IR, as a binary.

Every IR variable is a Function-storage OpVariable (no phis; drivers run mem2reg). Control
flow maps one to one onto structured constructs: If -> OpSelectionMerge, Loop/Range ->
OpLoopMerge with a continue block (a Range's increment), Break/Continue -> branches to the
innermost loop's merge/continue block, Return -> OpReturn. Statements after a terminator
are unreachable and not emitted. Parameters follow codegen.shader_abi. The workgroup size is
a LocalSize execution mode, so a module is emitted per cube_dim.

Types: f32, i32, u32, bool, and lines of 2 or 4 of them (vectors; storage arrays of vec2/vec4
with ArrayStride 8/16). Everything else (f16, bf16, f64, 8/16/64-bit ints, bool storage,
lines of 3 or more than 4) raises `Unsupported` naming the type and the target.
"""
from __future__ import annotations

import struct

from cube_ir import ir
from cube_ir.layout import SHADER, Layout, layout
from cube_ir.types import Type, Vec, u32

from ..shader_abi import binding
from .module import Module

FUNCTION, INPUT, UNIFORM, WORKGROUP, STORAGE = 7, 1, 2, 4, 12
GLSL = dict(RoundEven=2, Trunc=3, FAbs=4, SAbs=5, Floor=8, Ceil=9, Sin=13, Cos=14, Tan=15,
            Asin=16, Acos=17, Atan=18, Sinh=19, Cosh=20, Tanh=21, Asinh=22, Acosh=23, Atanh=24,
            Atan2=25, Pow=26, Exp=27, Log=28, Exp2=29, Log2=30, Sqrt=31, InverseSqrt=32,
            UMin=38, SMin=39, UMax=41, SMax=42, Fma=50, UnpackHalf2x16=62, NMin=79, NMax=80)
SCOPE_DEVICE, SCOPE_WG = 1, 2
BARRIER_SEM = 0x8 | 0x40 | 0x100  # AcquireRelease | UniformMemory | WorkgroupMemory
XYZ = "xyz"


class Unsupported(NotImplementedError):
    pass


def _check(t: Type) -> None:
    e = t.elem
    if e.name in ("f64", "i64", "u64"):
        raise Unsupported(f"{e.name} is not supported by the spirv target")


def wide(t: Type) -> bool:
    """A line longer than a SPIR-V vector: an OpTypeArray, its ops emitted lane by lane."""
    return isinstance(t, Vec) and t.lanes > 4


def f16_bits(v: float) -> int:
    import numpy as np
    return int(np.array([v], np.float16).view(np.uint16)[0])


class Emitter:
    def __init__(self, kernel: ir.Kernel, cube_dim: tuple) -> None:
        self.k = kernel
        self.m = Module()
        self.cube_dim = cube_dim
        self.abi: Layout = layout(kernel.params, SHADER)
        self.glsl = self.m.id()
        self.atomic = {id(op.mem) for op in ir.walk(kernel.body) if isinstance(op, ir.Atomic)}
        self.stored = {id(op.mem) for op in ir.walk(kernel.body)
                       if isinstance(op, (ir.Store, ir.Atomic))}
        self.vars: dict[int, int] = {}
        # id(mem) -> (var id, storage class, elem type id, layout); layout is "whole" (one
        # element per line) or "lanes" (one scalar per lane)
        self.mems: dict[int, tuple] = {}
        self.loops: list[tuple[int, int]] = []  # (merge, continue)
        self.builtin_vars: dict[str, int] = {}
        self.interface: list[int] = []
        self.storage16 = False
        self.float_atomics = False
        self.subgroup_caps: set[int] = set()  # GroupNonUniform* capabilities used

    # ---- types / constants -------------------------------------------------------------
    def t(self, t: Type) -> int:
        """The register type of t."""
        _check(t)
        m, e = self.m, t.elem
        if e.is_bool:
            s = m.bool()
        elif e.is_float:
            s = m.float(16 if e.name == "f16" else 32)
        else:
            s = m.int(32, e.is_signed)
        if not isinstance(t, Vec):
            return s
        return m.array(s, t.lanes) if wide(t) else m.vec(s, t.lanes)

    def c(self, value, t: Type) -> int:
        m, e = self.m, t.elem
        if e.is_bool:
            s = m.const_bool(bool(value))
        elif e.is_float:
            v = float(value)
            if e.name == "bf16":
                from cube_ir.interpreter import round_bf16
                v = float(round_bf16(v))
            bits = struct.unpack("<I", struct.pack("<f", v))[0] if v == v else 0x7FC00000
            if v != v or v in (float("inf"), float("-inf")) or (
                    e.name == "f16" and abs(v) > 65504):  # naga rejects such literals
                s = m.op("Bitcast", m.float(32), m.const(m.int(32, False), bits))
                if e.name == "f16":
                    s = m.op("FConvert", self.t(e), s)
                if isinstance(t, Vec):
                    return m.op("CompositeConstruct", self.t(t), *([s] * t.lanes))
                return s
            s = m.const(self.t(e), f16_bits(v) if e.name == "f16" else bits)
        else:
            n = int(value) & ((1 << e.bits) - 1)
            if e.is_signed and n >> (e.bits - 1):
                n -= 1 << e.bits  # a narrow negative value sign-extends in its i32 register
            s = m.const(self.t(e), n & 0xFFFFFFFF)
        if isinstance(t, Vec):
            return m.const_composite(self.t(t), (s,) * t.lanes)
        return s

    def u(self, n: int) -> int:
        return self.c(n, u32)

    # ---- module ------------------------------------------------------------------------
    def run(self) -> bytes:
        m, k = self.m, self.k
        m.emit("cap", "Capability", 1)  # Shader
        m.emit("ext", "ExtInstImport", self.glsl, "GLSL.std.450")
        m.emit("mem", "MemoryModel", 0, 1)  # Logical GLSL450
        self._bindings()
        for s in k.shared:
            elem = self._atomic_elem(s.type) if id(s) in self.atomic else self.t(s.type)
            arr = m.array(elem, s.size)
            v = m.id()
            m.emit("globals", "Variable", m.ptr(WORKGROUP, arr), v, WORKGROUP)
            self.mems[id(s)] = (v, WORKGROUP, elem, "whole")
        fn = m.id()
        self.fn = fn
        m.emit("code", "Function", m.void(), fn, 0, m.fn_type(m.void()))
        m.emit("code", "Label", m.id())
        self.var_at = len(m.sec["code"])  # scratch variables are spliced in here
        self.scratch_vars: list[int] = []
        for v in ir.declared_vars(k):
            p = m.id()
            m.emit("code", "Variable", m.ptr(FUNCTION, self.t(v.type)), p, FUNCTION)
            self.vars[v.id] = p
        for lo in k.locals:
            elem = self.t(lo.type)
            p = m.id()
            m.emit("code", "Variable", m.ptr(FUNCTION, m.array(elem, lo.size)), p, FUNCTION)
            self.mems[id(lo)] = (p, FUNCTION, elem, "whole")
        for name in ("lid", "lidx", "wid", "nwg", "gid"):
            self._builtin_var(name)
        self.terminated = False
        self._block(k.body)
        if not self.terminated:
            m.emit("code", "Return")
        m.emit("code", "FunctionEnd")
        if ("float", 16) in m.cache:
            m.emit("cap", "Capability", 9)  # Float16
        for cap in sorted(self.subgroup_caps):
            m.emit("cap", "Capability", cap)
        if self.float_atomics:
            m.emit("cap", "Capability", 6033)  # AtomicFloat32AddEXT
            imports = m.sec["ext"]  # extensions precede OpExtInstImport
            m.sec["ext"] = []
            m.emit("ext", "Extension", "SPV_EXT_shader_atomic_float_add")
            m.sec["ext"] += imports
        if self.storage16:
            m.emit("cap", "Capability", 4433)  # StorageBuffer16BitAccess (core in 1.3)
        code = m.sec["code"]
        code[self.var_at:self.var_at] = self.scratch_vars
        m.emit("entry", "EntryPoint", 5, fn, "main", *self.interface)
        m.emit("mode", "ExecutionMode", fn, 17, *self.cube_dim)
        return m.binary()

    def _builtin_var(self, name: str) -> int:
        m = self.m
        bid = {"lid": 27, "lidx": 29, "wid": 26, "nwg": 24, "gid": 28}[name]
        t = m.int(32, False) if name == "lidx" else m.vec(m.int(32, False), 3)
        v = m.id()
        m.emit("globals", "Variable", m.ptr(INPUT, t), v, INPUT)
        m.emit("annot", "Decorate", v, 11, bid)
        self.interface.append(v)
        self.builtin_vars[name] = v
        return v

    def _bindings(self) -> None:
        m = self.m
        uv4 = m.vec(m.int(32, False), 4)
        arr = m.array(uv4, self.abi.nslots // 4, stride=16)
        st = m.id()
        m.emit("globals", "TypeStruct", st, arr)
        m.emit("annot", "Decorate", st, 2)  # Block
        m.emit("annot", "MemberDecorate", st, 0, 35, 0)
        self.meta = m.id()
        m.emit("globals", "Variable", m.ptr(UNIFORM, st), self.meta, UNIFORM)
        m.emit("annot", "Decorate", self.meta, 34, 0)
        m.emit("annot", "Decorate", self.meta, 33, 0)
        for slot in self.abi.params:
            p = slot.param
            if not slot.is_buffer:
                _check(p.type)
                continue
            t, e = p.type, p.type.elem
            _check(t)
            # (a buffer of a type SPIR-V cannot address arrives as u32 words: passes.packing)
            if id(p) in self.atomic:
                elem, how, size = self._atomic_elem(t), "whole", 4
            elif isinstance(t, Vec) and t.lanes in (2, 4):
                elem, how, size = self.t(t), "whole", e.bits // 8 * t.lanes
            else:  # scalars, and lines of 3 (vec3 would be 16-byte aligned) or > 4
                elem, how, size = self.t(e), "lanes" if isinstance(t, Vec) else "whole", \
                    e.bits // 8
            if e.name == "f16":
                self.storage16 = True
            ra = m.id()
            m.emit("globals", "TypeRuntimeArray", ra, elem)
            m.emit("annot", "Decorate", ra, 6, size)
            st = m.id()
            m.emit("globals", "TypeStruct", st, ra)
            m.emit("annot", "Decorate", st, 2)
            m.emit("annot", "MemberDecorate", st, 0, 35, 0)
            # never NonWritable: a buffer bound twice (aliases, in-place ops) would carry
            # conflicting read-only and read-write usages in one dispatch, which WebGPU forbids
            v = m.id()
            m.emit("globals", "Variable", m.ptr(STORAGE, st), v, STORAGE)
            m.emit("annot", "Decorate", v, 34, 0)
            m.emit("annot", "Decorate", v, 33, binding(slot))
            self.mems[id(p)] = (v, STORAGE, elem, how)

    def _atomic_elem(self, t: Type) -> int:
        if isinstance(t, Vec) or t.elem.name not in ("i32", "u32", "f32"):
            raise Unsupported(f"atomics on {t} are not supported by the spirv target")
        if t.elem.is_float:
            return self.m.float(32)
        return self.m.int(32, t.elem.is_signed)

    def scratch(self, t: int) -> int:
        """A Function variable declared in the entry block (where SPIR-V wants them)."""
        m = self.m
        p = m.id()
        self.scratch_vars += [(4 << 16) | 59, m.ptr(FUNCTION, t), p, FUNCTION]
        return p

    # ---- values ------------------------------------------------------------------------
    def val(self, v: ir.Value) -> int:
        if isinstance(v, ir.Const):
            return self.c(v.value, v.type)
        return self.m.op("Load", self.t(v.type), self.vars[v.id])

    def val_as(self, v: ir.Value, t: Type) -> int:
        if isinstance(v, ir.Const):
            return self.c(v.value, t)
        return self.cast(v.type, t, self.val(v)) if v.type != t else self.val(v)

    def write(self, d: ir.Var, x: int) -> None:
        self.m.emit("code", "Store", self.vars[d.id], x)

    def ext(self, t: Type, name: str, *xs: int) -> int:
        return self.m.op("ExtInst", self.t(t), self.glsl, GLSL[name], *xs)

    def word(self, i: int) -> int:
        m = self.m
        p = m.op("AccessChain", m.ptr(UNIFORM, m.int(32, False)), self.meta, self.u(0),
                 self.u(i // 4), self.u(i % 4))
        return m.op("Load", m.int(32, False), p)

    # ---- blocks ------------------------------------------------------------------------
    def label(self, lab: int) -> None:
        self.m.emit("code", "Label", lab)
        self.terminated = False

    def branch(self, target: int) -> None:
        if not self.terminated:
            self.m.emit("code", "Branch", target)
        self.terminated = True

    def _block(self, block) -> None:
        for op in block:
            if self.terminated:
                return  # the rest is unreachable
            self._op(op)

    def _op(self, op) -> None:
        from .ops import emit_op
        emit_op(self, op)

    def cast(self, src: Type, dst: Type, x: int) -> int:
        from .ops import cast
        return cast(self, src, dst, x)


def emit(kernel: ir.Kernel, cube_dim: tuple = (1, 1, 1)) -> tuple[bytes, Layout]:
    em = Emitter(kernel, tuple(kernel.cube_dim or cube_dim))
    return em.run(), em.abi

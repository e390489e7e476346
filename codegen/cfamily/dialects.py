"""What differs between CUDA, HIP, MSL and OpenCL C: a table per dialect and a few overrides.

The emitter (emit.py) writes everything else the same way for all four: lines as native
vectors where `vec` names one (else lanes), f16/bf16 computed in float, C-semantics helpers
(prelude.py) shared by all.
"""
from __future__ import annotations

from cube_ir.types import SCALARS, Scalar

_C_INTS = {"i8": "signed char", "i16": "short", "i32": "int", "i64": "long long",
           "u8": "unsigned char", "u16": "unsigned short", "u32": "unsigned int",
           "u64": "unsigned long long"}
_CL_INTS = {"i8": "char", "i16": "short", "i32": "int", "i64": "long", "u8": "uchar",
            "u16": "ushort", "u32": "uint", "u64": "ulong"}
XYZ = "xyz"


class Dialect:
    name = "?"
    ints: dict[str, str] = _C_INTS
    fn = "static inline"  # qualifier of helper functions
    spaces = {"global": "", "shared": ""}  # pointer address-space qualifiers
    float_suffix_math = False  # CUDA/HIP spell float math sqrtf, expf, ...
    has_f64 = True
    plane_size = 32  # what `cube dump` assumes without a device

    # ---- types -------------------------------------------------------------------------
    def reg(self, e: Scalar) -> str:
        """The C type a value of element type e is held in (f16/bf16 compute in float)."""
        if e.is_float:
            return "double" if e.bits == 64 else "float"
        if e.is_bool:
            return "bool"
        return self.ints[e.name]

    def mem(self, e: Scalar) -> str:
        """The C type of an element in memory (bool as one byte 0/1, bf16 as its bits)."""
        if e.is_bool:
            return self.ints["u8"]
        if e.name == "bf16":
            return self.ints["u16"]
        if e.name == "f16":
            return self.half_mem
        return self.reg(e)

    half_mem = "unsigned short"

    def uint(self, bits: int) -> str:
        return self.ints[f"u{bits}"]

    # ---- bit casts (helpers and scalar arguments) -----------------------------------------
    def as_float(self, bits: int, x: str) -> str:
        raise NotImplementedError

    def as_uint(self, bits: int, x: str) -> str:
        raise NotImplementedError

    # ---- f16 ---------------------------------------------------------------------------
    def f16_load(self, x: str) -> str:
        """float from a memory f16 value."""
        return f"cube_f16_to_f32({x})"

    def f16_store(self, x: str) -> str:
        """memory f16 value from float (round to nearest even)."""
        return f"cube_f32_to_f16({x})"

    def f16_needs(self) -> set[str]:
        return {"f16"}

    def f16_round(self, x: str) -> str:
        """float x rounded to the nearest f16 (and back to float)."""
        return self.f16_load(self.f16_store(x))

    def f16_from_bits(self, x: str) -> str:
        """float from an f16's 16 bits (a dialect whose f16 memory type is a half)."""
        return f"(float)__builtin_bit_cast(_Float16, (unsigned short)({x}))"

    # ---- what some operations need from the prelude ------------------------------------
    def math_needs(self, name: str) -> set[str]:
        """Prelude helpers a math function needs (a scalar helper: no vector form)."""
        return set()

    def cas_needs(self) -> set[str]:
        """Prelude helpers the emitter's compare-and-swap loops need."""
        return set()

    def vector_int_abs(self, vt: str, a: str) -> str | None:
        """abs of a native signed-int vector, wrapping at MIN as C's scalar code does; None
        to write it lane by lane."""
        return None

    # ---- math --------------------------------------------------------------------------
    def math(self, name: str, e: Scalar) -> str:
        if self.float_suffix_math and e.bits != 64:
            return name + "f"
        return name

    def float_binary(self, o: str, e: Scalar, a: str, b: str) -> str | None:
        """The C expression for a float binary op on scalars or native vectors (the
        operators and math functions are overloaded); None where C has no direct form."""
        if o in ("add", "sub", "mul", "div"):
            return f"({a} {'+-*/'['add sub mul div'.split().index(o)]} {b})"
        if o in ("min", "max"):
            return f"{self.math('f' + o, e)}({a}, {b})"
        fn = {"rem": "fmod", "pow": "pow", "atan2": "atan2", "hypot": "hypot",
              "copysign": "copysign"}.get(o)
        return None if fn is None else f"{self.math(fn, e)}({a}, {b})"

    # ---- kernel frame ------------------------------------------------------------------
    def header(self, needs: set[str]) -> str:
        return ""

    def args_struct(self, nslots: int) -> str:
        u64 = self.uint(64)
        return f"typedef struct {{ {u64} s[{nslots}]; }} cube_args;"

    # the qualifier promising the compiler that a buffer parameter shares its memory with
    # no other ("": the dialect writes none); a launch passing one buffer to two parameters,
    # one of them written, runs a variant without it on those (runtimes/aliasing.py)
    restrict = ""

    def signature(self, entry: str, bufs: list[tuple[str, str, bool, bool]],
                  plane: bool) -> str:
        """The entry point's declaration; bufs: (memory type, name, read-only, restrict) of
        each buffer parameter in order."""
        raise NotImplementedError

    def buffer_param(self, t: str, n: str, ro: bool, restrict: bool, space: str = "") -> str:
        """One buffer parameter: `space const T* restrict name`."""
        q = f" {self.restrict}" if restrict and self.restrict else ""
        return f"{space}{'const ' if ro else ''}{t}*{q} {n}"

    def index_ids(self) -> dict[str, str]:
        """Raw builtins: local id (ux..), cube dim (dx..), cube id (gx..), cube count (cx..)."""
        raise NotImplementedError

    def native_lane(self, plane_size: int) -> str | None:
        """The unit's lane in its plane, where the dialect has it as an input."""
        return None

    def barrier(self) -> str:
        raise NotImplementedError

    def shared(self, mtype: str, name: str, n: int) -> str:
        raise NotImplementedError

    # ---- atomics -----------------------------------------------------------------------
    atomic_native: dict[tuple[str, str], str] = {}  # (op, elem) -> function spelling

    def native_atomic(self, op: str, e: Scalar) -> bool:
        """Whether atomic `op` on e has a native call (the lowering writes a CAS loop for the
        read-modify-writes that do not; `cas` itself always has a form, on the bits)."""
        return (op, e.name) in self.atomic_native

    def atomic_native_call(self, op: str, e: Scalar, p: str, v: str, cmp: str | None,
                           space: str) -> str | None:
        """A native atomic returning the old value, or None (then a CAS loop is used)."""
        f = self.atomic_native.get((op, e.name))
        if f is None:
            return None
        return f"{f}({p}, {cmp}, {v})" if op == "cas" else f"{f}({p}, {v})"

    def cas_bits(self, bits: int, space: str, p: str, cmp: str, v: str) -> str:
        """Compare-and-swap on the unsigned `bits`-wide word at p; the old value."""
        raise NotImplementedError

    def uptr(self, bits: int, space: str) -> str:
        """The pointer type a CAS loop views memory through."""
        return f"{self.spaces[space]}{self.uint(bits)}*".strip()

    # ---- native vectors (see vectors.py) --------------------------------------------------
    vec_sizes: frozenset[int] = frozenset()  # line sizes held in one native vector

    def vec(self, e: Scalar, n: int) -> str | None:
        """The native vector type a Line[e, n] is held in, or None (scalarised lanes)."""
        if n not in self.vec_sizes or e.is_bool or e.name == "bf16" or \
                (e.name == "f16" and not self.vec_f16):
            return None
        return f"{self.reg(e)}{n}"

    # erf from the prelude (f32): MSL has none; PoCL's is ~40x slower than exp and, having
    # branches, stops its work-item vectoriser
    own_erf = False
    vec_f16 = False  # f16 lines as float vectors, rounded through the dialect's half vector

    def lane(self, x: str, k: int) -> str:
        """Lane k of a native vector (also an lvalue)."""
        return f"{x}.{'xyzw'[k]}"

    def splat(self, vt: str, x: str) -> str:
        return f"{vt}({x})"

    def bitcast(self, vt: str, x: str) -> str:
        raise NotImplementedError

    def convert(self, vt: str, x: str, sat: bool = False) -> str | None:
        """Lane-wise conversion to vector type vt (sat: float->int, saturating, NaN -> 0);
        None where the dialect has no such conversion."""
        return None

    def vload(self, vt: str, mt: str, n: int, idx: str, p: str, space: str) -> str:
        """Line idx of memory p (elements of C type mt) as a vt vector."""
        raise NotImplementedError

    def vstore(self, v: str, mt: str, n: int, idx: str, p: str, space: str) -> str:
        raise NotImplementedError

    def mem_chunks(self, e: Scalar, n: int) -> tuple[int, str] | None:
        """Scalarised dialects: (w, vector type) to move a line of n memory elements of e in
        n/w aligned w-wide accesses, or None (one access per lane)."""
        return None

    # ---- plane ops ---------------------------------------------------------------------
    def plane(self, op: str, v: str, e: Scalar, lane: str | None, my_lane: str,
              plane_size: int) -> str:
        raise NotImplementedError

    def plane_needs(self) -> set[str]:
        return set()


class Cuda(Dialect):
    name = "cuda"
    fn = "static __device__ __forceinline__"
    float_suffix_math = True
    plane_size = 32
    atomic_native = {
        **{(op, t): f for op, f in (("add", "atomicAdd"), ("exchange", "atomicExch"),
                                     ("cas", "atomicCAS"))
           for t in ("i32", "u32", "u64")},
        **{("add", t): "atomicAdd" for t in ("f32", "f64")},
        ("exchange", "f32"): "atomicExch",
        **{("sub", t): "atomicSub" for t in ("i32", "u32")},
        **{(op, t): f for op, f in (("min", "atomicMin"), ("max", "atomicMax"))
           for t in ("i32", "u32", "i64", "u64")},
        **{(op, t): f for op, f in (("and", "atomicAnd"), ("or", "atomicOr"),
                                     ("xor", "atomicXor")) for t in ("i32", "u32", "u64")},
    }

    def as_float(self, bits: int, x: str) -> str:
        return f"__uint_as_float({x})" if bits == 32 else f"__longlong_as_double((long long)({x}))"

    def as_uint(self, bits: int, x: str) -> str:
        return f"__float_as_uint({x})" if bits == 32 else \
            f"(unsigned long long)__double_as_longlong({x})"

    def header(self, needs: set[str]) -> str:
        out = []
        if "plane" in needs:
            out.append("#define CUBE_MASK() __activemask()\n"
                       "#define CUBE_SHFL(v, s) __shfl_sync(cube_m, v, s)\n"
                       "#define CUBE_SHFL_UP(v, d) __shfl_up_sync(cube_m, v, d)\n"
                       "#define CUBE_LAST(m) (31 - __clz(m))\n"
                       "#define CUBE_ALL(p) __all_sync(__activemask(), p)\n"
                       "#define CUBE_ANY(p) __any_sync(__activemask(), p)")
        return "\n".join(out)

    restrict = "__restrict__"  # with const: loads may take the read-only cache path

    def signature(self, entry, bufs, plane) -> str:
        ps = [self.buffer_param(*b) for b in bufs]
        return f'extern "C" __global__ void {entry}({", ".join(ps + ["const cube_args args"])})'

    def index_ids(self) -> dict[str, str]:
        out = {}
        for ax in XYZ:
            out["u" + ax] = f"threadIdx.{ax}"
            out["d" + ax] = f"blockDim.{ax}"
            out["g" + ax] = f"blockIdx.{ax}"
            out["c" + ax] = f"gridDim.{ax}"
        return out

    def barrier(self) -> str:
        return "__syncthreads();"

    def shared(self, mtype, name, n) -> str:
        return f"__shared__ {mtype} {name}[{n}];"

    _I64_AS_U64 = ("add", "exchange", "cas", "and", "or", "xor")  # the same bits

    def native_atomic(self, op, e):
        return super().native_atomic(op, e) or (e.name == "i64" and op in self._I64_AS_U64)

    def atomic_native_call(self, op, e, p, v, cmp, space):
        if e.name == "i64" and op in self._I64_AS_U64:
            u = "unsigned long long"
            args = f"({u}*)({p}), ({u})({cmp}), ({u})({v})" if op == "cas" else \
                f"({u}*)({p}), ({u})({v})"
            f = self.atomic_native[(op, "u64")]
            return f"(long long){f}({args})"
        return super().atomic_native_call(op, e, p, v, cmp, space)

    def cas_bits(self, bits, space, p, cmp, v) -> str:
        return f"atomicCAS({p}, {cmp}, {v})"

    def plane(self, op, v, e, lane, my_lane, plane_size) -> str:
        return _shfl_plane(op, v, e, lane, my_lane)

    def plane_needs(self) -> set[str]:
        return {"shfl"}

    def f16_needs(self) -> set[str]:
        return {"f16_ptx"}

    _VEC_NAMES = {"i8": "char", "u8": "uchar", "i16": "short", "u16": "ushort", "i32": "int",
                  "u32": "uint", "f32": "float", "i64": "longlong", "u64": "ulonglong",
                  "f64": "double"}

    def mem_chunks(self, e, n):
        # the memory element: bool is a byte, bf16 (and f16 in CUDA) its 16 bits
        m = {"bool": "u8", "bf16": "u16", "f16": self.f16_mem_vec}.get(e.name, e.name)
        base = self._VEC_NAMES.get(m)
        size = SCALARS[m].bits // 8 if m else 0
        for w in (4, 2):  # aligned 16-byte (or smaller) vector accesses
            if base and n % w == 0 and w * size <= 16:
                return w, f"{base}{w}"
        return None

    f16_mem_vec = "u16"


class Hip(Cuda):
    name = "hip"
    plane_size = 64  # CDNA wavefronts (gfx90a); RDNA devices report 32 at run time
    half_mem = "_Float16"
    # HIP has no atomicMin/atomicMax on long long: those are compare-and-swap loops
    atomic_native = {k: f for k, f in Cuda.atomic_native.items()
                     if k not in (("min", "i64"), ("max", "i64"))}

    def header(self, needs):
        out = ["#include <hip/hip_runtime.h>"]
        if "plane" in needs:
            out.append("#define CUBE_MASK() __ballot(1)\n"
                       "#define CUBE_SHFL(v, s) __shfl(v, s)\n"
                       "#define CUBE_SHFL_UP(v, d) __shfl_up(v, d)\n"
                       "#define CUBE_LAST(m) (63 - __clzll(m))\n"
                       "#define CUBE_ALL(p) __all(p)\n"
                       "#define CUBE_ANY(p) __any(p)")
        return "\n".join(out)

    def f16_load(self, x):
        return f"(float)({x})"

    def f16_store(self, x):
        return f"(_Float16)({x})"

    def f16_needs(self):
        return set()

    f16_mem_vec = None  # _Float16 has no HIP vector type


class OpenCL(Dialect):
    name = "opencl"

    def vector_int_abs(self, vt, a):  # abs gives the unsigned type: bit-cast back wraps MIN
        return self.bitcast(vt, f"abs({a})")
    ints = _CL_INTS
    fn = "static inline"
    spaces = {"global": "__global ", "shared": "__local "}
    plane_size = 1  # subgroups only where the runtime finds them
    vec_sizes = frozenset((2, 3, 4, 8, 16))
    own_erf = True

    def lane(self, x, k):
        return f"{x}.s{k:x}"

    def splat(self, vt, x):
        return f"({vt})({x})"

    def bitcast(self, vt, x):
        return f"as_{vt}({x})"

    # vloadN/vstoreN need only element alignment (and vload3 reads 3, not 4, elements)
    def vload(self, vt, mt, n, idx, p, space):
        return f"vload{n}({idx}, {p})"

    def vstore(self, v, mt, n, idx, p, space):
        return f"vstore{n}({v}, {idx}, {p});"

    def convert(self, vt, x, sat=False):
        # float->int: round toward zero (the default) and, with _sat, clamp and NaN -> 0
        return f"convert_{vt}{'_sat' if sat else ''}({x})"

    atomic_native = {
        **{(op, t): "atomic_" + f for op, f in (
            ("add", "add"), ("sub", "sub"), ("min", "min"), ("max", "max"), ("and", "and"),
            ("or", "or"), ("xor", "xor"), ("exchange", "xchg"), ("cas", "cmpxchg"))
           for t in ("i32", "u32")},
        ("exchange", "f32"): "atomic_xchg",
        **{(op, t): "atom_" + f for op, f in (
            ("add", "add"), ("sub", "sub"), ("min", "min"), ("max", "max"), ("and", "and"),
            ("or", "or"), ("xor", "xor"), ("exchange", "xchg"), ("cas", "cmpxchg"))
           for t in ("i64", "u64")},
    }

    def as_float(self, bits, x):
        return f"as_float((uint)({x}))" if bits == 32 else f"as_double((ulong)({x}))"

    def as_uint(self, bits, x):
        return f"as_uint({x})" if bits == 32 else f"as_ulong({x})"

    def header(self, needs):
        out = []
        if "f64" in needs:
            out.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        if "atomic64" in needs:
            out.append("#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable\n"
                       "#pragma OPENCL EXTENSION cl_khr_int64_extended_atomics : enable")
        if "plane" in needs:
            out.append("#pragma OPENCL EXTENSION cl_khr_subgroups : enable\n"
                       "#pragma OPENCL EXTENSION cl_khr_subgroup_shuffle : enable\n"
                       "#pragma OPENCL EXTENSION cl_khr_subgroup_non_uniform_arithmetic : "
                       "enable")
        return "\n".join(out)

    restrict = "restrict"

    def signature(self, entry, bufs, plane):
        ps = [self.buffer_param(*b, space="__global ") for b in bufs]
        return f"__kernel void {entry}({', '.join(ps + ['const cube_args args'])})"

    def index_ids(self):
        out = {}
        for i, ax in enumerate(XYZ):
            out["u" + ax] = f"(uint)get_local_id({i})"
            out["d" + ax] = f"(uint)get_local_size({i})"
            out["g" + ax] = f"(uint)get_group_id({i})"
            out["c" + ax] = f"(uint)get_num_groups({i})"
        return out

    def barrier(self):
        return "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);"

    def shared(self, mtype, name, n):
        return f"__local {mtype} {name}[{n}];"

    def uptr(self, bits, space):
        return f"volatile {self.spaces[space]}{self.uint(bits)}*"

    def cas_bits(self, bits, space, p, cmp, v):
        return f"{'atomic' if bits == 32 else 'atom'}_cmpxchg({p}, {cmp}, {v})"

    def plane(self, op, v, e, lane, my_lane, plane_size):
        wide = e.is_int and e.bits < 32  # subgroup builtins take 32/64-bit values
        x = f"(int)({v})" if wide else v
        red = {"sum": "sub_group_reduce_add", "max": "sub_group_reduce_max",
               "min": "sub_group_reduce_min", "prod": "sub_group_non_uniform_reduce_mul",
               "inclusive_sum": "sub_group_scan_inclusive_add",
               "exclusive_sum": "sub_group_scan_exclusive_add",
               "inclusive_prod": "sub_group_non_uniform_scan_inclusive_mul",
               "exclusive_prod": "sub_group_non_uniform_scan_exclusive_mul"}
        if op in ("all", "any"):
            return f"(sub_group_{op}((int)({v})) != 0)"
        if op in red:
            r = f"{red[op]}({x})"
        elif op in ("broadcast", "shuffle"):
            r = f"(({lane}) < {plane_size}u ? sub_group_shuffle({x}, {lane}) : ({x}))"
        elif op == "shuffle_xor":
            r = (f"((({my_lane}) ^ ({lane})) < {plane_size}u ? "
                 f"sub_group_shuffle_xor({x}, {lane}) : ({x}))")
        else:
            raise NotImplementedError(op)
        return f"({self.reg(e)}){r}" if wide else r


class Msl(Dialect):
    name = "msl"
    ints = {**_CL_INTS, "i64": "long", "u64": "ulong"}
    fn = "static inline"
    spaces = {"global": "device ", "shared": "threadgroup "}
    has_f64 = False
    half_mem = "half"
    plane_size = 32
    vec_sizes = frozenset((2, 3, 4))
    vec_f16 = True
    own_erf = True

    def vec(self, e, n):
        return None if e.bits == 64 else super().vec(e, n)

    def bitcast(self, vt, x):
        return f"as_type<{vt}>({x})"

    # packed_* types need only element alignment (float3 would be 16 bytes)
    _MSL_SPACE = {"global": "device", "shared": "threadgroup", "local": "thread"}

    def vload(self, vt, mt, n, idx, p, space):
        q = self._MSL_SPACE[space]
        return f"{vt}(*({q} const packed_{mt}{n}*)({p} + (long)({idx}) * {n}))"

    def vstore(self, v, mt, n, idx, p, space):
        q = self._MSL_SPACE[space]
        x = f"half{n}({v})" if mt == "half" else v  # f16 computes in float vectors
        return f"*({q} packed_{mt}{n}*)({p} + (long)({idx}) * {n}) = packed_{mt}{n}({x});"

    def convert(self, vt, x, sat=False):
        return None if sat else f"{vt}({x})"  # MSL leaves out-of-range float->int undefined

    def as_float(self, bits, x):
        return f"as_type<float>((uint)({x}))"

    def as_uint(self, bits, x):
        return f"as_type<uint>({x})"

    def header(self, needs):
        return "#include <metal_stdlib>\nusing namespace metal;"

    def args_struct(self, nslots):
        return f"struct cube_args {{ ulong s[{nslots}]; }};"

    def signature(self, entry, bufs, plane):
        ps = [f"{self.buffer_param(*b, space='device ')} [[buffer({i})]]"
              for i, b in enumerate(bufs)]  # Msl.restrict is "": no promise to break
        ps.append(f"constant cube_args& args [[buffer({len(bufs)})]]")
        ps += ["uint3 cube_tid [[thread_position_in_threadgroup]]",
               "uint3 cube_tdim [[threads_per_threadgroup]]",
               "uint3 cube_gid [[threadgroup_position_in_grid]]",
               "uint3 cube_gdim [[threadgroups_per_grid]]"]
        if plane:
            ps.append("uint cube_simd_lane [[thread_index_in_simdgroup]]")
        return f"kernel void {entry}({', '.join(ps)})"

    def index_ids(self):
        out = {}
        for ax in XYZ:
            out["u" + ax] = f"cube_tid.{ax}"
            out["d" + ax] = f"cube_tdim.{ax}"
            out["g" + ax] = f"cube_gid.{ax}"
            out["c" + ax] = f"cube_gdim.{ax}"
        return out

    def native_lane(self, plane_size):
        return "cube_simd_lane"

    def barrier(self):
        return "threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);"

    def shared(self, mtype, name, n):
        return f"threadgroup {mtype} {name}[{n}];"

    def f16_load(self, x):
        return f"float({x})"

    def f16_store(self, x):
        return f"half({x})"

    def f16_needs(self):
        return set()

    _OWN_MATH = {"log1p": "cube_log1p", "expm1": "cube_expm1", "hypot": "cube_hypot"}

    def math(self, name, e):
        return self._OWN_MATH.get(name, name)

    def math_needs(self, name):  # MSL has no log1p, expm1 or hypot: the prelude's
        return {"mslmath"} if name in self._OWN_MATH else set()

    def cas_needs(self):
        return {"mslcas"}

    def f16_from_bits(self, x):
        return f"float(as_type<half>((ushort)({x})))"

    atomic_native = {
        **{(op, t): f"atomic_fetch_{op}_explicit" for op in ("add", "sub", "min", "max",
                                                             "and", "or", "xor")
           for t in ("i32", "u32")},
        **{("exchange", t): "atomic_exchange_explicit" for t in ("i32", "u32")},
    }

    def atomic_native_call(self, op, e, p, v, cmp, space):
        f = self.atomic_native.get((op, e.name))
        if f is None:
            return None
        at = f"{self.spaces[space]}atomic_{'int' if e.is_signed else 'uint'}*"
        return f"{f}(({at})({p}), {v}, memory_order_relaxed)"

    def uptr(self, bits, space):
        return f"{self.spaces[space]}atomic_uint*"

    def cas_bits(self, bits, space, p, cmp, v):
        return f"cube_cas({p}, {cmp}, {v})"

    def plane(self, op, v, e, lane, my_lane, plane_size):
        simple = {"sum": "simd_sum", "prod": "simd_product", "max": "simd_max",
                  "min": "simd_min", "inclusive_sum": "simd_prefix_inclusive_sum",
                  "exclusive_sum": "simd_prefix_exclusive_sum",
                  "inclusive_prod": "simd_prefix_inclusive_product",
                  "exclusive_prod": "simd_prefix_exclusive_product"}
        if op in simple:
            return f"{simple[op]}({v})"
        if op in ("all", "any"):
            return f"simd_{op}({v})"
        if op in ("broadcast", "shuffle"):
            return f"(({lane}) < {plane_size}u ? simd_shuffle({v}, ushort({lane})) : ({v}))"
        if op == "shuffle_xor":
            return (f"((({my_lane}) ^ ({lane})) < {plane_size}u ? "
                    f"simd_shuffle_xor({v}, ushort({lane})) : ({v}))")
        raise NotImplementedError(op)


def _shfl_plane(op: str, v: str, e: Scalar, lane: str | None, my_lane: str) -> str:
    """CUDA/HIP: helper templates over warp shuffles (prelude 'plane')."""
    if op in ("all", "any"):
        return f"(CUBE_{op.upper()}({v}) != 0)"
    if op in ("broadcast", "shuffle"):
        return f"cube_plane_shuffle({v}, {lane})"
    if op == "shuffle_xor":
        return f"cube_plane_shuffle({v}, ({my_lane}) ^ ({lane}))"
    base = "sum" if op.endswith("sum") else "prod" if op.endswith("prod") else op
    kind = "reduce" if op == base else op.split("_")[0]
    return f"cube_plane_{kind}({v}, {my_lane}, cube_op_{base}())"


DIALECTS: dict[str, Dialect] = {d.name: d for d in (Cuda(), Hip(), Msl(), OpenCL())}

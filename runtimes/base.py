"""What every runtime offers. A runtime knows no frontend: it takes IR kernels."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from cube_ir import ir

from . import buffer as _buffer
from .buffer import Buffer


@dataclass(frozen=True)
class Features:
    """What a runtime's device can do; kernels needing more get a CompileError. Combined
    with what the target's generator can emit by `capabilities` below."""

    plane_size: int = 1
    plane_ops: bool = True
    f16: bool = True
    bf16: bool = True
    f64: bool = True
    int64: bool = True
    atomic_types: frozenset = field(default_factory=lambda: frozenset(
        {"i32", "u32", "i64", "u64", "f32", "f64"}))
    max_shared_bytes: int = 1 << 20
    max_cube_dim: int = 1024
    # a CPU's SIMD register file (0: not a CPU, or unknown): kernels size register tiles
    # from it (dl.kernels.matmul); the widest vector in bits and how many registers
    vector_bits: int = 0
    vector_registers: int = 0


# ---- the capability table ----------------------------------------------------------------
# `Features` says what a device has; `TARGET_LIMITS` what a code generator can emit whatever
# the device. `capabilities(target, features)` combines them into the one table that
# `cube.capabilities` checks every op of a kernel against, before any vendor compiler runs.

SCALAR_TYPES = ("bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
                "f16", "bf16", "f32", "f64")
ATOMIC_OPS = ("add", "sub", "min", "max", "and", "or", "xor", "exchange", "cas")
BIT_OPS = frozenset({"and", "or", "xor"})
# `atomic_cas` whose old value is never read (after dead-code elimination): a target may
# manage it without returning the old value (SPIR-V through naga, see codegen.spirv.ops)
CAS_NO_RESULT = "cas-no-result"
SPACES = ("global", "shared", "local")  # array/tensor arguments, SharedMemory, LocalArray


def atomic_rows(types: Iterable[str], ops: Iterable[str] = ATOMIC_OPS,
                spaces: Iterable[str] = ("global", "shared"), how: str = "native") -> dict:
    """{(op, type, space): how} for every op on every type in the spaces; the bit ops only
    on integers."""
    return {(op, t, s): how for op in ops for t in types for s in spaces
            if not (op in BIT_OPS and not t.startswith(("i", "u")))}


@dataclass(frozen=True)
class TargetLimits:
    """What a code generator cannot emit whatever the device has. atomics=None: every
    (op, type) the device's `atomic_types` names, in global and shared memory (native or
    through a compare-and-swap loop the generator writes)."""

    no_types: frozenset = frozenset()
    atomics: dict | None = None
    how: str = "native"  # how the device's atomics are done when atomics is None


_WGSL_ATOMICS = {**atomic_rows(("i32", "u32")),
                 # WGSL has no f32 atomics: a compare-exchange loop on the bits
                 **atomic_rows(("f32",), how="cas-loop")}
_SPIRV_ATOMICS = {
    # naga loses OpAtomicCompareExchange's result (codegen.spirv.ops._atomic), so no CAS
    # loop and no atomic_cas whose old value is used
    **atomic_rows(("i32", "u32"), [op for op in ATOMIC_OPS if op != "cas"]),
    **atomic_rows(("i32", "u32"), [CAS_NO_RESULT]),
    # OpAtomicFAddEXT / OpAtomicExchange; wgpu's shader-float32-atomic covers storage
    # buffers only ("Float32 atomic operations are only supported in the Storage address
    # space")
    **atomic_rows(("f32",), ("add", "sub", "exchange"), ("global",)),
}
# the C-family emitter calls the dialect's native atomic where it has one, else writes a
# compare-and-swap loop on the bits (codegen.cfamily.dialects.atomic_native)
_C_FAMILY = TargetLimits(how="native or cas-loop")
TARGET_LIMITS: dict[str, TargetLimits] = {
    **dict.fromkeys(("cuda", "hip", "msl", "opencl"), _C_FAMILY),
    "wgsl": TargetLimits(frozenset({"f64", "i64", "u64"}), _WGSL_ATOMICS),
    "spirv": TargetLimits(frozenset({"f64", "i64", "u64"}), _SPIRV_ATOMICS),
}


@dataclass(frozen=True)
class Capabilities:
    """One target on one device: the value types it takes, its atomics as
    {(op, type, space): how} (how: native, cas-loop, rmw; absent: refused), plane ops and
    limits. Built by `capabilities`; read by `cube.capabilities.check_features`."""

    target: str
    types: frozenset
    atomics: dict
    plane_ops: bool
    max_shared_bytes: int
    max_cube_dim: int

    def has_type(self, name: str) -> bool:
        return name in self.types

    def atomic(self, op: str, type_name: str, space: str) -> str | None:
        """How the target does atomic `op` on `type_name` in `space`, or None."""
        how = self.atomics.get((op, type_name, space))
        if how is None and op == CAS_NO_RESULT:
            how = self.atomics.get(("cas", type_name, space))
        return how


def capabilities(target: str, feats: Features) -> Capabilities:
    """The declared table for `target` on a device with `feats`."""
    lim = TARGET_LIMITS.get(target, TargetLimits())
    off = {"f16": feats.f16, "bf16": feats.bf16, "f64": feats.f64, "i64": feats.int64,
           "u64": feats.int64}
    types = frozenset(t for t in SCALAR_TYPES if off.get(t, True) and t not in lim.no_types)
    device = {t for t in feats.atomic_types if t in types}
    if lim.atomics is None:
        atomics = atomic_rows(sorted(device), how=lim.how)
    else:
        atomics = {k: h for k, h in lim.atomics.items() if k[1] in device}
    # unit-private memory: cube_ir.passes.local_atomics makes every atomic there a plain
    # read-modify-write, so every value type the target holds takes them
    atomics.update(atomic_rows(sorted(t for t in types if t != "bool"), spaces=("local",),
                               how="rmw"))
    return Capabilities(target, types, atomics, feats.plane_ops, feats.max_shared_bytes,
                        feats.max_cube_dim)


class Executable:
    """A compiled kernel ready to launch. `args` follow kernel.params in order: a Buffer or
    LineView for array/tensor params, a Python number for scalars."""

    kernel: ir.Kernel
    source: str  # generated source (for `cube dump` and error messages)

    def launch(self, cube_count: tuple, cube_dim: tuple, args: list) -> None:
        raise NotImplementedError


class Runtime:
    name: str = "?"
    target: str = "?"
    features: Features = Features()

    @property
    def plane_size(self) -> int:
        return self.features.plane_size

    def capability_table(self) -> Capabilities:
        """What kernels compiled for this runtime may use (checked by cube.capabilities)."""
        return capabilities(self.target, self.features)

    def device_id(self) -> str:
        """Identifies the device for cache keys (model, driver, CPU features...)."""
        return self.name

    def describe(self) -> str:
        """One line for `cube targets`."""
        return self.device_id()

    # ---- memory --------------------------------------------------------------------------
    def from_numpy(self, arr, dtype=None) -> Buffer:
        """A device copy of arr; dtype (NumPy or cube type, e.g. bf16 over uint16 bits)
        overrides the element type."""
        raise NotImplementedError

    def empty(self, shape, dtype=np.float32) -> Buffer:
        raise NotImplementedError

    zeros = _buffer.zeros  # any element type, bf16 included

    def empty_exact(self, shape: tuple, n: int, elem) -> Buffer:
        """empty(shape, elem) where the caller knows shape is a tuple of ints with n
        elements (host runtimes skip the conversions)."""
        return self.empty(shape, elem)

    def empty_like(self, buf) -> Buffer:
        """A new buffer of `buf`'s shape and element type (a buffer, a line view or a NumPy
        array)."""
        if isinstance(buf, np.ndarray):
            return self.empty(buf.shape, buf.dtype)
        buf = buf.buffer if hasattr(buf, "buffer") else buf
        if not hasattr(buf, "elem") or not hasattr(buf, "shape"):
            raise _buffer.LaunchError(f"empty_like takes a buffer or a NumPy array, got "
                                      f"{type(buf).__name__}")
        return self.empty(buf.shape, buf.elem)

    # ---- kernels -------------------------------------------------------------------------
    def compile(self, kernel: ir.Kernel, cache_key: str | None = None) -> Executable:
        """Generate, compile (or load from the disk cache under cache_key) and return."""
        raise NotImplementedError

    def generate(self, kernel: ir.Kernel) -> str:
        """The target source for a kernel (what `cube dump` prints)."""
        raise NotImplementedError

    def sync(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"<runtime {self.name}>"

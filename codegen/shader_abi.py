"""How a kernel's parameters reach a WGSL or SPIR-V compute shader (shared by both emitters
and by the wgpu runtime, which packs the arguments).

Bind group 0:
    binding 0      uniform `meta`: u32 words, padded to whole vec4s
    binding 1 + k  the k-th array/tensor parameter, a storage buffer

`meta` holds, per parameter in order:
    array   len                                  (elements; lines for line arrays)
    tensor  len, shape[rank], stride[rank]       (shape/stride in scalar elements)
    scalar  the value's 32 bits                  (f16/bf16 raw bits in the low half; i8/i16
                                                  sign-extended; bool 0/1)

Storage buffers hold elements as the cube type says; types a shader cannot address
(8/16-bit ints, bool as one byte, bf16 as its raw 16 bits) are *packed*: the shader sees the
buffer as u32 words and extracts/inserts bytes (stores through atomicAnd/atomicOr so
neighbouring units never lose each other's writes). A runtime pads every buffer to a
multiple of 4 bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

from cube_ir import ir
from cube_ir.types import Scalar

NATIVE_32 = frozenset({"f32", "i32", "u32"})


@dataclass(frozen=True)
class ParamSlot:
    param: ir.Param
    binding: int | None  # storage binding (None for scalars)
    meta: int  # first word in `meta`

    @property
    def kind(self) -> str:
        return self.param.kind


@dataclass(frozen=True)
class ShaderAbi:
    slots: tuple[ParamSlot, ...]
    meta_words: int  # a multiple of 4, at least 4

    @property
    def storage_bindings(self) -> int:
        return sum(1 for s in self.slots if s.binding is not None)


def layout(kernel: ir.Kernel) -> ShaderAbi:
    slots, word, binding = [], 0, 1
    for p in kernel.params:
        if p.kind == "scalar":
            slots.append(ParamSlot(p, None, word))
            word += 1
            continue
        slots.append(ParamSlot(p, binding, word))
        binding += 1
        word += 1 + (2 * p.rank if p.kind == "tensor" else 0)
    return ShaderAbi(tuple(slots), max(4, -(-word // 4) * 4))


def is_packed(e: Scalar, f16: bool = True) -> bool:
    """Stored as bytes inside u32 words (the shader has no type of that width)."""
    if e.name in NATIVE_32 or (e.name == "f16" and f16):
        return False
    return e.bits < 32 or e.is_bool


def private_atomics_lowered(kernel: ir.Kernel) -> ir.Kernel:
    """The kernel with atomics on local arrays made plain read-modify-writes (shaders have no
    atomics in the function address space). The pass pipeline already did this; a kernel
    generated without it (`cube dump --no-opt`) gets a lowered copy."""
    if not any(isinstance(op, ir.Atomic) and isinstance(op.mem, ir.LocalArray)
               for op in ir.walk(kernel.body)):
        return kernel
    from cube_ir.passes import clone_kernel, lower_local_atomics
    kernel = clone_kernel(kernel)
    lower_local_atomics(kernel)
    return kernel

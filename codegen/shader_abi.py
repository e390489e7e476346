"""How a kernel's parameters reach a WGSL or SPIR-V compute shader (shared by both emitters
and by the wgpu runtime).

Bind group 0:
    binding 0      uniform `meta`: the argument block of `cube_ir.layout` with spec SHADER
                   (u32 words, padded to whole vec4s; per parameter len, shape, stride or a
                   scalar's value, in the order every target shares)
    binding 1 + k  the k-th array/tensor parameter (`ParamSlots.buffer`), a storage buffer

Storage buffers hold elements as the cube type says; types a shader cannot address
(8/16-bit ints, bool as one byte, bf16 as its raw 16 bits) are *packed*: the shader sees the
buffer as u32 words and extracts/inserts bytes (stores through atomicAnd/atomicOr so
neighbouring units never lose each other's writes). A runtime pads every buffer to a
multiple of 4 bytes.
"""
from __future__ import annotations

from cube_ir import ir
from cube_ir.layout import ParamSlots
from cube_ir.types import Scalar

NATIVE_32 = frozenset({"f32", "i32", "u32"})
META_BINDING = 0


def binding(s: ParamSlots) -> int:
    """The storage binding of an array/tensor parameter."""
    return 1 + s.buffer


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

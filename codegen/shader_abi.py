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
from cube_ir.passes.legalise import ALL, ARITH_PLANE, NARROW
from cube_ir.passes.lowering import PER_AXIS, Lowering
from cube_ir.types import Scalar

NATIVE_32 = frozenset({"f32", "i32", "u32"})
META_BINDING = 0


def binding(s: ParamSlots) -> int:
    """The storage binding of an array/tensor parameter."""
    return 1 + s.buffer


def is_packed(e: Scalar) -> bool:
    """Stored as bytes inside u32 words (the shader has no type of that width; f16 is a
    type where the adapter has shader-f16, and refused where it has not)."""
    if e.name in NATIVE_32 or e.name == "f16":
        return False
    return e.bits < 32 or e.is_bool


# the builtins both shader languages have: per-axis ids, the local invocation index and the
# global invocation id (everything else is lowered in IR, passes.lowering); bf16 has no
# arithmetic and f16's transcendentals, fma, pow and plane sums/products are done in f32
# (copysign too: the shaders' is a bit operation on f32's sign)
F16_VIA_F32 = frozenset("exp log log1p tanh erf sin cos rsqrt pow fma atan2 hypot rem copysign"
                        .split()) \
    | ARITH_PLANE | (ir.MORE_MATH_UNARY - {"trunc"})
LOWERING = Lowering(PER_AXIS | {"UNIT_POS", "ABSOLUTE_POS_X", "ABSOLUTE_POS_Y",
                                "ABSOLUTE_POS_Z"}, halves={"bf16": ALL, "f16": F16_VIA_F32},
                    narrow=NARROW,  # 8/16-bit ints live in i32/u32 registers
                    packed=is_packed,
                    assumes_finite=True)  # WGSL allows it; naga declares no float controls

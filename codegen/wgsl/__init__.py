"""WGSL for wgpu (WebGPU): one compute entry point `main` per kernel.

Parameters reach the shader as codegen.shader_abi describes (a uniform metadata buffer and
one storage buffer per array/tensor). The workgroup size is the override constants WG_X,
WG_Y, WG_Z (set per pipeline), or constants when the kernel was specialised on a cube_dim.
Types WGSL lacks (f64, i64, u64) raise `Unsupported`; the frontend rejects them first
through the target's Features. 8/16-bit ints, bool and bf16 are emulated: registers in
i32/u32/f32, storage packed into u32 words (see shader_abi). Plane ops with a plane size
above 1 are subgroup builtins (the runtime made sure subgroups are the interpreter's planes).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from cube_ir import ir
from cube_ir.layout import Layout
from cube_ir.passes.lowering import lower

from ..shader_abi import LOWERING
from .emit import emit
from .types import Unsupported

# WGSL's atomics are on atomic<i32/u32>; f32 read-modify-writes are CAS loops on the bits
WGSL_LOWERING = replace(LOWERING, atomics=lambda op, e, space: e in ("i32", "u32"))


@dataclass(frozen=True)
class WgslModule:
    text: str
    abi: Layout
    entry: str = "main"


def emit_module(kernel: ir.Kernel) -> WgslModule:
    # (f16 is a register type: without shader-f16 the capability table refuses it before any
    # code is generated)
    kernel = lower(kernel, WGSL_LOWERING)
    text, abi = emit(kernel, plane_size=kernel.plane_size)
    return WgslModule(text, abi)


__all__ = ["Unsupported", "WgslModule", "emit_module"]

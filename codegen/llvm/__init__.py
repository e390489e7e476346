"""LLVM IR for the CPU: one kernel -> one module with one exported function.

ABI
---
    void <entry>(i64* args, i64 cube_begin, i64 cube_end)

runs the cubes with linear index in [cube_begin, cube_end) of a launch (a linear cube index
c maps to CUBE_POS_X = c % count_x, CUBE_POS_Y = c / count_x % count_y, CUBE_POS_Z =
c / (count_x * count_y)). Several threads may call it at once on disjoint cube ranges with
the same `args`, which the function only reads. `args` is an array of i64 slots laid out
as `cube_ir.layout` describes with spec LLVM (`LlvmModule.layout`):

    [0..3)  cube_count x, y, z
    [3..6)  cube_dim x, y, z
    then, per kernel parameter in order (`LlvmModule.params` gives each offset):
      array   ptr, len                           (len in elements: lines for line arrays)
      tensor  ptr, len, shape[rank], stride[rank] (shape/stride in scalar elements)
      scalar  the value's bits in the low bits   (f32 as its 32 bits, bool 0/1, bf16 raw)

A second function runs a launch on several threads with one call each:

    void <entry>_par(i64* args, i64* counter, i64 ncubes, i64 chunk)

claims `chunk` cubes at a time from `*counter` (an atomic add, starting at 0) and runs them
through <entry> until `ncubes` are claimed.

Pointers are plain addresses; buffers may alias (no `noalias`). Elements are stored as the
cube type says, except bool (one byte, 0/1) and bf16 (its raw 16 bits).

Execution model
---------------
Plane size is 1. Inside a cube the units run as loops (x innermost, so elementwise kernels
vectorise). A kernel with `sync_cube` is split into regions (see `regions.py`): statements
containing a barrier run once per cube with unit 0's (uniform) values, and each barrier-free
run of statements is its own loop over the units; variables live across regions get one slot
per unit. Shared memory is a stack allocation reused by the cubes one call runs in sequence;
`stack_fixed + stack_per_unit * units` bounds the stack a call needs (a runtime runs big ones
on threads with large stacks). `Return` ends the unit (in barrier kernels it marks the unit
finished, so later regions skip it). libm symbols (erf, tanh, log1p, sinf, ..., fmod, pow)
must be resolvable by the JIT.
"""
from __future__ import annotations

from dataclasses import dataclass

from cube_ir import ir
from cube_ir.layout import Layout, ParamSlots
from cube_ir.passes import legalise, lowering

from .emit import emit, entry_name

# the unit and cube loops compute every position themselves (with no-wrap arithmetic that
# LLVM's vectoriser relies on); plane size is 1, so the lowering folds the plane builtins.
# f16 is LLVM's half, whose math functions are f32 ones; bf16 has no arithmetic at all.
# (f16 fma stays: arith does it in double, one rounding.)
F16_VIA_F32 = frozenset("exp log log1p tanh erf sin cos rsqrt pow atan2 hypot".split()) | (
    ir.MORE_MATH_UNARY - {"trunc"})
LOWERING = lowering.Lowering(ir.BUILTINS - {"PLANE_DIM", "UNIT_POS_PLANE"},
                             halves={"bf16": legalise.ALL, "f16": F16_VIA_F32})


@dataclass(frozen=True)
class LlvmModule:
    text: str  # LLVM IR (no target triple: the JIT sets it)
    entry: str  # the exported function's name (and <entry>_par, the parallel driver)
    layout: Layout  # the argument block (spec LLVM)
    stack_fixed: int  # bytes of shared + unit-private stack a call needs...
    stack_per_unit: int  # ...plus this many per unit of the cube
    barrier: bool  # the kernel uses sync_cube

    @property
    def params(self) -> tuple[ParamSlots, ...]:  # one entry per kernel param
        return self.layout.params

    @property
    def nslots(self) -> int:  # i64 slots in the argument block
        return self.layout.nslots


def emit_module(kernel: ir.Kernel) -> LlvmModule:
    em = emit(lowering.lower(kernel, LOWERING))  # (.lower is codegen.llvm.lower)
    return LlvmModule(em.text, em.entry, em.layout, em.stack_fixed,
                      em.stack_per_unit, em.plan.barrier)


__all__ = ["LlvmModule", "ParamSlots", "emit_module", "entry_name"]

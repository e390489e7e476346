"""The target-independent lowering every code generator runs before it prints.

A code generator declares what it prints natively (`Lowering`); `lower` gives a copy of the
optimised kernel in which everything else is already spelled in plain IR, so emitters only
print. In order:

    atomics    atomics on unit-private arrays as plain read-modify-writes (run_pipeline did
               it already; a kernel generated without the optimiser gets it here)
    cas_loops  the read-modify-write atomics the target lacks as compare-and-swap loops
               (passes.cas_loops)
    builtins   derived positions from the per-axis ones (passes.builtins)
    planes     plane ops with plane size 1 are their own value (passes.planes)
    plane_nan  float plane max/min with NaN lanes ignored on every target (passes.planes)
    meta       shape/stride reads down to constant-dimension slot reads (passes.meta)
    floats     float compares, min, max and clamp with their NaN/infinity cases as bit
               tests, for targets whose compilers may assume finite floats
               (passes.float_compares)
    halves     f16/bf16 arithmetic the target lacks in f32, rounded once (passes.legalise)
    narrow     8/16-bit int arithmetic that can leave its range in i32/u32, cast back (wraps)
    packing    buffers of types the target cannot address as u32 words (passes.packing)
    verify     the lowered kernel is still well-typed and well-scoped (barrier placement is
               the frontend's and run_pipeline's to check: these passes add no control flow)

Each pass keeps the kernel runnable by the interpreter, and the tests run it after every pass
(tests/cube_ir/test_lowering.py), so a pass is checked on its own."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..ir import Kernel
from ..types import Scalar
from ..verify import verify
from .builtins import PRIMITIVE, lower_builtins
from .cas_loops import Native, lower_rmw_atomics
from .clone import clone_kernel
from .float_compares import exact_float_compares
from .legalise import promote_halves, promote_narrow_ints
from .local_atomics import lower_local_atomics
from .meta import lower_meta
from .packing import pack_storage
from .planes import fold_unit_planes, plane_extremes_ignore_nan

_AXES = "XYZ"


@dataclass(frozen=True)
class Lowering:
    """What a target reads or prints directly.

    builtins: the builtins it has a spelling for (at least the per-axis unit/cube positions
    and cube counts; the CUBE_DIM_* too unless every kernel it gets has a comptime cube dim).
    halves: the half-precision arithmetic it lacks, computed in f32 and rounded once.
    atomics: which read-modify-write atomics it has; the others become CAS loops (a target
    must have compare-and-swap itself, comparing bits for floats).
    """

    builtins: frozenset[str]
    # half type -> the ops computed in f32 (legalise.ALL: every inexact op)
    halves: Mapping[str, frozenset[str] | None] = field(default_factory=dict)
    # (op, element type, space) -> whether the target has that atomic; None: all of them
    atomics: Native | None = None
    # 8/16-bit int types it has no registers for (computed in 32 bits and cast back)
    narrow: frozenset[str] = frozenset()
    # element types whose buffers it reads and writes as u32 words (None: it addresses all)
    packed: Callable[[Scalar], bool] | None = None
    # its compiler may assume floats are never NaN or infinite (WGSL; SPIR-V through naga to
    # Vulkan): compares and min/max get their non-finite cases spelled in integer tests
    assumes_finite: bool = False


PER_AXIS = PRIMITIVE | frozenset(f"CUBE_DIM_{a}" for a in _AXES)

PASSES = (
    ("atomics", lambda k, low: lower_local_atomics(k)),
    ("cas_loops", lambda k, low: lower_rmw_atomics(k, low.atomics)),
    ("builtins", lambda k, low: lower_builtins(k, low.builtins)),
    ("planes", lambda k, low: fold_unit_planes(k)),
    ("plane_nan", lambda k, low: plane_extremes_ignore_nan(k)),
    ("meta", lambda k, low: lower_meta(k)),
    ("floats", lambda k, low: low.assumes_finite and exact_float_compares(k)),
    ("halves", lambda k, low: promote_halves(k, low.halves)),
    ("narrow", lambda k, low: promote_narrow_ints(k, low.narrow)),
    ("packing", lambda k, low: pack_storage(k, low.packed)),
)


def lower(kernel: Kernel, lowering: Lowering) -> Kernel:
    """A lowered copy of `kernel` (the original, which caches and `cube dump --target ir`
    show, is left as it is)."""
    k = clone_kernel(kernel)
    for _, run in PASSES:
        run(k, lowering)
    verify(k, barriers=False)
    return k

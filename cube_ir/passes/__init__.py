"""IR passes: bounds checks, constant folding, unrolling, dead code; and the pipeline.

One module per pass, each with a function of its own name (`dce.dce(kernel)`,
`const_fold.const_fold`, `unroll.unroll`, `bounds.bounds_check`) that works in place on a
verified kernel and returns whether it changed anything; `clone_kernel` gives a copy first
where the original must survive. (The pass functions are not re-exported here: a function
named like its module would hide the module.)"""
from __future__ import annotations

from .. import ir
from ..ir import Kernel
from ..verify import verify
from . import const_fold, dce, unroll
from .bounds import bounds_check, drop_constant_out_of_bounds
from .clone import clone_kernel
from .local_atomics import lower_local_atomics
from .unroll import unroll_range


def run_pipeline(kernel: Kernel, *, checked: bool | None = None) -> Kernel:
    """verify -> local atomics -> bounds (checked mode) -> const_fold -> unroll (->
    const_fold) -> constant out-of-bounds accesses -> dce -> verify. Works in place and
    returns the kernel.

    Verifying first makes errors point at what the frontend emitted (the user's code) and lets
    the passes assume well-typed IR; verifying last catches a pass's own mistakes."""
    verify(kernel)
    lower_local_atomics(kernel)  # before bounds: the load and store it makes get guarded
    if kernel.checked if checked is None else checked:
        bounds_check(kernel)
    const_fold.const_fold(kernel)
    if unroll.unroll(kernel):
        const_fold.const_fold(kernel)  # the copies' loop constants fold further
    drop_constant_out_of_bounds(kernel)  # also what folding turned into one
    dce.dce(kernel)
    mark_readonly(kernel)
    verify(kernel)
    return kernel


def mark_readonly(kernel: Kernel) -> None:
    """Set `Param.readonly` for array/tensor params nothing stores to."""
    written = {op.mem for op in ir.walk(kernel.body) if isinstance(op, (ir.Store, ir.Atomic))}
    for p in kernel.params:
        if p.kind != "scalar":
            p.readonly = p not in written


# const_fold, dce, unroll: the modules
__all__ = ["bounds_check", "clone_kernel", "const_fold", "dce", "drop_constant_out_of_bounds",
           "lower_local_atomics",
           "mark_readonly", "run_pipeline", "unroll", "unroll_range"]

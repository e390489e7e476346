"""C-family source for CUDA, HIP, Metal (MSL) and OpenCL C from one emitter.

`emit_source(kernel, dialect)` returns a `CSource`: the text, the entry point's name and the
argument layout (`cube_ir.layout`, spec C_FAMILY); a runtime compiles the text with its vendor
compiler. The dialects differ only in the table and overrides in `dialects.py`.
"""
from __future__ import annotations

from dataclasses import dataclass

from cube_ir import ir
from cube_ir.layout import C_FAMILY, Layout, layout
from cube_ir.passes import legalise
from cube_ir.passes.lowering import PER_AXIS, Lowering, lower
from cube_ir.types import SCALARS

from .dialects import DIALECTS, Dialect
from .emit import Emitter, entry_name


# what the C family prints itself: the per-axis ids (threadIdx.x, get_local_id(0), ...);
# every other builtin, plane ops at plane size 1 and runtime shape dims are lowered in IR
# (f16 and bf16 compute in float on every dialect: their inexact ops are rounded once in IR;
# the atomics a dialect has no call for become CAS loops)
def lowering(d: Dialect) -> Lowering:
    return Lowering(PER_AXIS, halves={"f16": legalise.ALL, "bf16": legalise.ALL},
                    atomics=lambda op, e, space: d.native_atomic(op, SCALARS[e]))


LOWERINGS = {name: lowering(d) for name, d in DIALECTS.items()}


@dataclass(frozen=True)
class CSource:
    text: str
    entry: str
    layout: Layout  # buffer arguments (nbuf of them) before cube_args, its 64-bit slots
    # per buffer argument, in order: whether the kernel writes it, whether the signature
    # declares it `restrict` (shares its memory with no other argument)
    written: tuple[bool, ...] = ()
    restrict: tuple[bool, ...] = ()


def emit_source(kernel: ir.Kernel, dialect: str | Dialect,
                aliased: frozenset[int] = frozenset()) -> CSource:
    """aliased: the positions (among the buffer arguments) of buffers a launch passes
    sharing memory: declared without `restrict` (runtimes/aliasing.py)."""
    d = DIALECTS[dialect] if isinstance(dialect, str) else dialect
    kernel = lower(kernel, LOWERINGS[d.name] if DIALECTS.get(d.name) is d else lowering(d))
    em = Emitter(kernel, d, frozenset(aliased))
    text = em.run()
    return CSource(text, entry_name(kernel), layout(kernel.params, C_FAMILY),
                   tuple(not ro for _, _, ro, _ in em.bufs),
                   tuple(r and bool(d.restrict) for _, _, _, r in em.bufs))


__all__ = ["CSource", "DIALECTS", "Dialect", "emit_source", "entry_name"]

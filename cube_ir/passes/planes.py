"""Plane ops every target prints alike.

`fold_unit_planes`: with a plane size of 1 every plane op is its unit's own value.

A plane of one unit reduces, scans and shuffles over that unit alone: sum/prod/max/min/all/
any/broadcast/shuffle/inclusive scans return the value itself, exclusive scans the identity
(0, or False for bool; 1 for prod). Folding it here means no target writes a plane-size-1
path (and a target without plane ops runs every kernel specialised for plane size 1).

`plane_extremes_ignore_nan`: a plane max/min of floats ignores NaN lanes (the IR's meaning,
as C's fmax), NaN only when every lane is NaN. The targets' own plane reductions do not
agree on NaN (CUDA/HIP's shuffle scans kept a NaN that came first and lost the rest: a plane
holding inf and NaNs gave 7.0; WGSL promises nothing; lavapipe gave -inf for a plane of
NaNs), so each target gets NaN-free lanes:

    select(plane_all(v != v), v, plane_max(select(v != v, -inf, v)))

(`v != v` is IEEE's isnan; passes.float_compares spells it in bits where needed)."""
from __future__ import annotations

import math

from .. import ir
from ..ir import Const, Kernel
from ..types import boolean, with_elem
from .util import VarAlloc, rewrite


def fold_unit_planes(kernel: Kernel) -> bool:
    if kernel.plane_size != 1:
        return False
    return rewrite(kernel.body, lambda op: [ir.Assign(op.dst, _own(op), op.loc)]
                   if isinstance(op, ir.Plane) else None)


def _own(op: ir.Plane):
    t = op.dst.type
    if op.op == "exclusive_sum":
        return Const(False if t.elem.is_bool else 0, t)
    if op.op == "exclusive_prod":
        return Const(True if t.elem.is_bool else 1, t)
    return op.value


def plane_extremes_ignore_nan(kernel: Kernel) -> bool:
    alloc = VarAlloc(kernel)

    def spell(op):
        if not (isinstance(op, ir.Plane) and op.op in ("max", "min")
                and op.dst.type.elem.is_float):
            return None
        t, v, loc = op.dst.type, op.value, op.loc
        bt = with_elem(t, boolean)
        nan = alloc.new(bt, "nan")
        clean = alloc.new(t, "real")
        r = alloc.new(t, op.op)
        every = alloc.new(bt, "all_nan")
        ident = Const(-math.inf if op.op == "max" else math.inf, t)
        return [ir.Binary(nan, "ne", v, v, loc), ir.Select(clean, nan, ident, v, loc),
                ir.Plane(r, op.op, clean, None, loc), ir.Plane(every, "all", nan, None, loc),
                ir.Select(op.dst, every, v, r, loc)]
    return rewrite(kernel.body, spell)

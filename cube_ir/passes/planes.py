"""With a plane size of 1 every plane op is its unit's own value.

A plane of one unit reduces, scans and shuffles over that unit alone: sum/prod/max/min/all/
any/broadcast/shuffle/inclusive scans return the value itself, exclusive scans the identity
(0, or False for bool; 1 for prod). Folding it here means no target writes a plane-size-1
path (and a target without plane ops runs every kernel specialised for plane size 1)."""
from __future__ import annotations

from .. import ir
from ..ir import Const, Kernel
from .util import rewrite


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

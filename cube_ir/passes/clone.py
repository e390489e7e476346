"""Deep copies of IR: whole kernels (for non-destructive passes) and blocks with values
substituted (for unrolling)."""
from __future__ import annotations

import copy
import dataclasses

from .. import ir
from ..ir import Block, Kernel, LocalArray, Param, SharedArray, Var

_MEMORY = (Param, SharedArray, LocalArray)


def clone_op(op, values: dict, mems: dict | None = None):
    """A copy of `op` (nested blocks copied too) with vars replaced through `values` (a var
    missing from it is kept) and memories through `mems`. A written var must map to a Var."""
    mems = mems or {}

    def conv(x):
        if isinstance(x, Var):
            return values.get(x, x)
        if isinstance(x, Block):
            return clone_block(x, values, mems)
        if isinstance(x, _MEMORY):
            return mems.get(x, x)
        return x

    new = type(op)(**{f.name: conv(getattr(op, f.name)) for f in dataclasses.fields(op)})
    w = ir.writes(new)
    if w is not None and not isinstance(w, Var):
        raise ValueError(f"{op!r} writes a var mapped to the non-var {w!r}")
    return new


def clone_block(block: Block, values: dict, mems: dict | None = None) -> Block:
    return Block(clone_op(op, values, mems) for op in block)


def clone_kernel(kernel: Kernel) -> Kernel:
    """A deep copy: new Params, shared/local arrays and Vars (same ids, types, names), mapped
    consistently everywhere they occur."""
    from .util import all_vars

    mems: dict = {}
    for m in (*kernel.params, *kernel.shared, *kernel.locals):
        mems[m] = copy.copy(m)
    values = {v: Var(v.id, v.type, v.name) for v in all_vars(kernel)}
    body = clone_block(kernel.body, values, mems)
    return dataclasses.replace(
        kernel, params=[mems[p] for p in kernel.params], body=body,
        vars=[values[v] for v in kernel.vars], shared=[mems[s] for s in kernel.shared],
        locals=[mems[a] for a in kernel.locals])

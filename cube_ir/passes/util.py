"""Small helpers the passes share: use counts, in-place operand rewriting, fresh vars."""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from .. import ir
from ..ir import Block, Kernel, Var
from ..types import Type

# The fields holding the values an op reads (the same order as ir.reads).
READ_FIELDS: dict[type, tuple[str, ...]] = {
    ir.Assign: ("src",), ir.Unary: ("a",), ir.Binary: ("a", "b"), ir.Ternary: ("a", "b", "c"),
    ir.Select: ("cond", "a", "b"), ir.Cast: ("a",), ir.Bitcast: ("a",), ir.Extract: ("vec",),
    ir.Insert: ("vec", "value"), ir.Load: ("index",), ir.Store: ("index", "value"),
    ir.Meta: ("dim",), ir.Atomic: ("index", "value", "cmp"), ir.Plane: ("value", "lane"),
    ir.If: ("cond",), ir.Range: ("start", "end"),
}


def map_reads(op, fn: Callable) -> bool:
    """Replace every value `op` reads (not in nested blocks) by fn(value); True if any
    changed."""
    changed = False
    for name in READ_FIELDS.get(type(op), ()):
        old = getattr(op, name)
        if old is None:
            continue
        new = fn(old)
        if new is not old:
            setattr(op, name, new)
            changed = True
    return changed


def read_counts(block: Block) -> Counter:
    """How many times each var is read in `block` (nested blocks included)."""
    c: Counter = Counter()
    for op in ir.walk(block):
        for v in ir.reads(op):
            if isinstance(v, Var):
                c[v] += 1
    return c


def write_counts(block: Block) -> Counter:
    c: Counter = Counter()
    for op in ir.walk(block):
        w = ir.writes(op)
        if w is not None:
            c[w] += 1
    return c


def all_vars(kernel: Kernel) -> list[Var]:
    """kernel.vars plus any var an op mentions, in a stable order."""
    seen = dict.fromkeys(kernel.vars)
    for op in ir.walk(kernel.body):
        w = ir.writes(op)
        if w is not None:
            seen.setdefault(w)
        for v in ir.reads(op):
            if isinstance(v, Var):
                seen.setdefault(v)
    return list(seen)


def size(block: Block) -> int:
    return sum(1 for _ in ir.walk(block))


class VarAlloc:
    """Fresh vars for a kernel: ids above every id in use, registered in kernel.vars."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.next_id = 1 + max((v.id for v in all_vars(kernel)), default=-1)

    def new(self, t: Type, name: str | None = None) -> Var:
        v = Var(self.next_id, t, name)
        self.next_id += 1
        self.kernel.vars.append(v)
        return v


def rewrite(block: Block, fn: Callable) -> bool:
    """Replace, children first, every op for which fn(op) gives a list of ops (None: keep
    the op) by that list, through nested blocks; True if any was."""
    changed, out = False, Block()
    for op in block:
        for child in ir.child_blocks(op):
            changed |= rewrite(child, fn)
        new = fn(op)
        if new is None:
            out.append(op)
        else:
            out.extend(new)
            changed = True
    block[:] = out
    return changed


def exits(block: Block) -> bool:
    """True if running `block` always leaves it through break/continue/return."""
    for op in block:
        if isinstance(op, (ir.Break, ir.Continue, ir.Return)):
            return True
        if isinstance(op, ir.If) and exits(op.then) and exits(op.orelse):
            return True
    return False

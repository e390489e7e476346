"""Full unrolling of small constant `Range` loops.

A range with constant bounds, at most MAX_TRIPS iterations and a body of at most MAX_BODY
ops, with no break/continue of its own, no return and no sync_cube, becomes one copy of its
body per iteration with the loop var replaced by a constant. Vars keep their identity across
copies (iterations run in order, so that is the original semantics), except *body-local*
vars (never touched outside the body, and written before any read on every path through it):
those get a fresh var per copy, so constant folding can propagate them afterwards."""
from __future__ import annotations

from .. import ir
from ..ir import Block, Const, Kernel, Range, Var
from .clone import clone_block
from .const_eval import wrap
from .const_fold import trip_count
from .util import VarAlloc, read_counts, size, write_counts

MAX_TRIPS = 16
MAX_BODY = 64


def unroll(kernel: Kernel, max_trips: int = MAX_TRIPS, max_body: int = MAX_BODY) -> bool:
    """Unroll in place (innermost loops first); True if anything changed."""
    changed = False
    alloc = VarAlloc(kernel)
    while True:
        u = _Unroller(kernel, alloc, max_trips, max_body)
        kernel.body[:] = u.block(kernel.body)
        if not u.changed:
            return changed
        changed = True


def unroll_range(op: Range, renames=(), alloc: VarAlloc | None = None) -> Block:
    """The copies of `op`'s body, one per iteration (its bounds must be constants). Vars in
    `renames` get a fresh var from `alloc` in every copy but the first."""
    n = trip_count(op)
    if n is None:
        raise ValueError("unroll_range needs a range with constant bounds")
    out = Block()
    t = op.var.type
    for k, value in enumerate(range(int(op.start.value), int(op.end.value), op.step)):
        # bounds count in their own types; the var takes each value converted to its type
        values: dict = {op.var: Const(wrap(value, t.elem), t)}
        if k > 0 and alloc is not None:
            values.update((v, alloc.new(v.type, v.name)) for v in renames)
        out.extend(clone_block(op.body, values))
    return out


def _own_exit(block: Block, depth: int = 0) -> bool:
    """A break/continue of this loop (not an inner one), or a return, or a barrier."""
    for op in block:
        if isinstance(op, (ir.Return, ir.SyncCube)):
            return True
        if isinstance(op, (ir.Break, ir.Continue)) and depth == 0:
            return True
        inner = depth + 1 if isinstance(op, (ir.Loop, Range)) else depth
        if any(_own_exit(b, inner) for b in ir.child_blocks(op)):
            return True
    return False


class _Unroller:
    def __init__(self, kernel: Kernel, alloc: VarAlloc, max_trips: int, max_body: int):
        self.reads = read_counts(kernel.body)
        self.writes = write_counts(kernel.body)
        self.alloc, self.max_trips, self.max_body = alloc, max_trips, max_body
        self.changed = False

    def block(self, block: Block) -> Block:
        out = Block()
        for op in block:
            for child in ir.child_blocks(op):
                child[:] = self.block(child)
            # one loop per round: the use counts are stale once anything changed
            if isinstance(op, Range) and not self.changed and self._eligible(op):
                out.extend(unroll_range(op, self._locals(op), self.alloc))
                self.changed = True
            else:
                out.append(op)
        return out

    def _eligible(self, op: Range) -> bool:
        n = trip_count(op)
        if n is None or n > self.max_trips:
            return False
        if size(op.body) > self.max_body or _own_exit(op.body):
            return False
        # after the loop the var holds its last value: keep loops whose var is read there
        return read_counts(op.body)[op.var] == self.reads[op.var]

    def _locals(self, op: Range) -> list[Var]:
        """Vars only the body touches, written before every read on every path through it:
        no value flows from one iteration to the next, so each copy may have its own."""
        body_reads, body_writes = read_counts(op.body), write_counts(op.body)
        early: set[Var] = set()
        _read_before_write(op.body, {op.var}, early)
        return [v for v in body_writes if v is not op.var and v not in early
                and body_writes[v] == self.writes[v] and body_reads[v] == self.reads[v]]


def _read_before_write(block: Block, assigned: set, early: set) -> None:
    """Add to `early` the vars some path through `block` may read before writing; `assigned`
    (updated) holds the vars written on every path so far. Exits need no care here: unrolled
    bodies have none of their own, and an inner loop's writes never count as certain."""
    def read(values) -> None:
        early.update(v for v in values if isinstance(v, Var) and v not in assigned)

    for op in block:
        read(ir.reads(op))
        if isinstance(op, ir.If):
            branches = [set(assigned), set(assigned)]
            _read_before_write(op.then, branches[0], early)
            _read_before_write(op.orelse, branches[1], early)
            assigned |= branches[0] & branches[1]
        elif isinstance(op, (ir.Loop, Range)):
            inner = set(assigned) | ({op.var} if isinstance(op, Range) else set())
            _read_before_write(op.body, inner, early)
        elif ir.writes(op) is not None:
            assigned.add(ir.writes(op))

"""Dead code elimination, to a fixpoint.

Removes: ops without side effects whose result is never read (plane ops included: a collective
whose result nobody uses needs no partner units); code after break/continue/return (or after
an `if` whose branches both leave); stores into shared/local arrays that nothing ever loads
(private to the cube/unit, so unobservable); `if`s with two empty branches and ranges with an
empty body whose var is unread; a `loop` that breaks at once. An atomic whose result is unused
keeps its effect but drops its dst. Finally unused vars, shared and local arrays leave the
kernel's lists."""
from __future__ import annotations

from .. import ir
from ..ir import Block, Kernel, LocalArray, SharedArray, Var
from .util import exits, read_counts

_PURE = (ir.Assign, ir.Unary, ir.Binary, ir.Ternary, ir.Select, ir.Cast, ir.Bitcast, ir.Extract,
         ir.Insert,
         ir.Load, ir.Meta, ir.Builtin, ir.Plane)
_MAX_ROUNDS = 64


def dce(kernel: Kernel) -> bool:
    """Remove dead code in place; True if anything changed."""
    changed = False
    for _ in range(_MAX_ROUNDS):
        round_changed = _truncate(kernel.body)
        d = _Sweep(kernel)
        kernel.body[:] = d.block(kernel.body)
        if not (round_changed or d.changed):
            break
        changed = True
    changed |= _prune_lists(kernel)
    return changed


def _truncate(block: Block) -> bool:
    """Drop unreachable ops after an unconditional exit, in every block."""
    changed = False
    for i, op in enumerate(block):
        for child in ir.child_blocks(op):
            changed |= _truncate(child)
        leaves = isinstance(op, (ir.Break, ir.Continue, ir.Return)) or (
            isinstance(op, ir.If) and exits(op.then) and exits(op.orelse))
        if leaves and i + 1 < len(block):
            del block[i + 1:]
            return True
    return changed


class _Sweep:
    def __init__(self, kernel: Kernel):
        self.reads = read_counts(kernel.body)
        used = set()  # memories something reads from
        for op in ir.walk(kernel.body):
            if isinstance(op, (ir.Load, ir.Atomic)):
                used.add(op.mem)
        self.unread = {m for m in (*kernel.shared, *kernel.locals) if m not in used}
        self.changed = False

    def _drop(self, op) -> None:
        """Forget op's reads (its nested blocks are already empty or being dropped)."""
        for x in ir.walk(Block([op])):
            for v in ir.reads(x):
                if isinstance(v, Var):
                    self.reads[v] -= 1
        self.changed = True

    def block(self, block: Block) -> Block:
        # backwards, so a chain of dead values dies in one sweep
        out = []
        for op in reversed(block):
            for child in ir.child_blocks(op):
                child[:] = self.block(child)
            if self._dead(op):
                self._drop(op)
                continue
            if isinstance(op, ir.Atomic) and op.dst is not None and self.reads[op.dst] == 0:
                op.dst = None
                self.changed = True
            out.append(op)
        return Block(reversed(out))

    def _dead(self, op) -> bool:
        if isinstance(op, _PURE):
            return self.reads[op.dst] == 0
        if isinstance(op, ir.Store):
            return isinstance(op.mem, (SharedArray, LocalArray)) and op.mem in self.unread
        if isinstance(op, ir.If):
            return not op.then and not op.orelse
        if isinstance(op, ir.Range):
            return not op.body and self.reads[op.var] == 0
        if isinstance(op, ir.Loop):
            return bool(op.body) and isinstance(op.body[0], ir.Break)
        return False


def _prune_lists(kernel: Kernel) -> bool:
    used_vars = _mentioned(kernel)
    mems = {op.mem for op in ir.walk(kernel.body) if isinstance(op, (ir.Load, ir.Store,
                                                                      ir.Atomic))}
    before = (len(kernel.vars), len(kernel.shared), len(kernel.locals))
    kernel.vars[:] = [v for v in kernel.vars if v in used_vars]
    kernel.shared[:] = [s for s in kernel.shared if s in mems]
    kernel.locals[:] = [a for a in kernel.locals if a in mems]
    return before != (len(kernel.vars), len(kernel.shared), len(kernel.locals))


def _mentioned(kernel: Kernel) -> set[Var]:
    out: set[Var] = set()
    for op in ir.walk(kernel.body):
        w = ir.writes(op)
        if w is not None:
            out.add(w)
        out.update(v for v in ir.reads(op) if isinstance(v, Var))
    return out

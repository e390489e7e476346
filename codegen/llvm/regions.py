"""Region formation: how a cube's units run as loops while `sync_cube` keeps its meaning.

Statements that (transitively) contain a `SyncCube` run at *cube level*: their conditions and
loop bounds are uniform (the verifier guarantees it), so they are evaluated once per cube from
unit 0's values. Maximal runs of barrier-free statements become *regions*, each executed as a
loop over the cube's units. Inside a cube-level loop, a statement holding a Break/Continue for
that loop, or a Return, is cube level too (it must be uniform, and a unit-level copy could not
leave the cube loop). A kernel without barriers is one region.

Variable storage follows from where a variable is accessed:
- `reg`: one scalar (an alloca that mem2reg turns into registers): variables of one region
  outside cube-level loops, or temporaries (written before any read) of one region;
- `arr`: one slot per unit (values that live across regions); cube level reads unit 0's slot;
- `ureg`: one value for the cube: the variable of a cube-level `Range`, and variables
  assigned once from uniform values (lengths, scalar params, uniform builtins, constants) that
  every unit would write identically.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from cube_ir import ir


@dataclass(eq=False)
class Region:
    ops: list
    rid: int
    in_loop: bool


@dataclass(eq=False)
class CIf:
    cond: ir.Value
    then: list
    orelse: list


@dataclass(eq=False)
class CLoop:
    body: list


@dataclass(eq=False)
class CRange:
    op: ir.Range
    body: list


@dataclass(eq=False)
class CJump:
    kind: str  # "break" | "continue" | "return"


@dataclass
class Plan:
    barrier: bool
    tree: list
    storage: dict = field(default_factory=dict)  # var id -> "reg" | "arr" | "ureg"
    local_per_unit: set = field(default_factory=set)  # LocalArray ids kept per unit
    unit_return: bool = False  # a Return inside a region of a barrier kernel


def _contains(op, pred, into_loops: bool = True) -> bool:
    for blk in ir.child_blocks(op):
        for o in blk:
            if pred(o):
                return True
            if isinstance(o, (ir.Loop, ir.Range)) and not into_loops:
                continue
            if _contains(o, pred, into_loops):
                return True
    return False


class _Former:
    def __init__(self) -> None:
        self.sync: dict[int, bool] = {}
        self.regions: list[Region] = []

    def has_sync(self, op) -> bool:
        k = id(op)
        if k not in self.sync:
            self.sync[k] = isinstance(op, ir.SyncCube) or _contains(
                op, lambda o: isinstance(o, ir.SyncCube))
        return self.sync[k]

    def build(self, block, in_loop: bool) -> list:
        nodes: list = []
        run: list = []

        def flush() -> None:
            if run:
                r = Region(list(run), len(self.regions), in_loop)
                self.regions.append(r)
                nodes.append(r)
                run.clear()

        for op in block:
            if isinstance(op, ir.SyncCube):
                flush()
            elif isinstance(op, (ir.Break, ir.Continue, ir.Return)):
                flush()
                nodes.append(CJump(type(op).__name__.lower()))
                break  # the rest of the block is unreachable
            elif self.has_sync(op) or (in_loop and isinstance(op, ir.If) and (
                    _contains(op, lambda o: isinstance(o, (ir.Break, ir.Continue)), False)
                    or _contains(op, lambda o: isinstance(o, ir.Return)))):
                flush()
                nodes.append(self.cube_node(op, in_loop))
            else:
                run.append(op)
        flush()
        return nodes

    def cube_node(self, op, in_loop: bool):
        if isinstance(op, ir.If):
            return CIf(op.cond, self.build(op.then, in_loop), self.build(op.orelse, in_loop))
        if isinstance(op, ir.Loop):
            return CLoop(self.build(op.body, True))
        if isinstance(op, ir.Range):
            return CRange(op, self.build(op.body, True))
        raise TypeError(f"unexpected cube-level op {op!r}")


def plan(kernel: ir.Kernel) -> Plan:
    if not kernel.uses_barrier():
        tree = [Region(list(kernel.body), 0, False)]
        return Plan(False, tree, {v.id: "reg" for v in kernel.vars})
    f = _Former()
    tree = f.build(kernel.body, False)
    p = Plan(True, tree)
    _classify(p, f.regions, kernel)
    return p


def _classify(p: Plan, regions: list[Region], kernel: ir.Kernel) -> None:
    acc: dict[int, list] = {}  # var id -> [(ctx, path, pure_write)]
    local_ctx: dict[int, set] = {}
    ureg: set[int] = set()

    def note(v, ctx, path, pure=False) -> None:
        if isinstance(v, ir.Var):
            acc.setdefault(v.id, []).append((ctx, path, pure))

    def walk_region(block, r: Region, path: tuple) -> None:
        for i, op in enumerate(block):
            here = path + ((id(block), i),)
            rd = ir.reads(op)
            for v in rd:
                note(v, r.rid, here)
            w = ir.writes(op)
            if w is not None:
                note(w, r.rid, here, not any(x is w for x in rd))
            mem = getattr(op, "mem", None)
            if isinstance(mem, ir.LocalArray):
                local_ctx.setdefault(mem.id, set()).add(r.rid)
            if isinstance(op, ir.Return):
                p.unit_return = True
            for blk in ir.child_blocks(op):
                walk_region(blk, r, here)

    def walk_tree(nodes) -> None:
        for n in nodes:
            if isinstance(n, Region):
                walk_region(n.ops, n, ())
            elif isinstance(n, CIf):
                note(n.cond, "cube", ())
                walk_tree(n.then)
                walk_tree(n.orelse)
            elif isinstance(n, CLoop):
                walk_tree(n.body)
            elif isinstance(n, CRange):
                note(n.op.start, "cube", ())
                note(n.op.end, "cube", ())
                ureg.add(n.op.var.id)
                walk_tree(n.body)

    walk_tree(p.tree)
    ureg |= _uniform_once(kernel)
    in_loop = {r.rid: r.in_loop for r in regions}
    for v in kernel.vars:
        recs = acc.get(v.id, [])
        ctxs = {c for c, _, _ in recs}
        if v.id in ureg:
            p.storage[v.id] = "ureg"
        elif len(ctxs) <= 1 and (not ctxs or "cube" in ctxs or not in_loop[next(iter(ctxs))]
                                 or _is_temp(recs)):
            p.storage[v.id] = "reg"
        else:
            p.storage[v.id] = "arr"
    for lid, ctxs in local_ctx.items():
        if len(ctxs) > 1 or any(in_loop[c] for c in ctxs):
            p.local_per_unit.add(lid)


def _is_temp(recs: list) -> bool:
    """Written before any read, every access inside the block of that first write."""
    _, path0, pure = recs[0]
    if not pure:
        return False
    prefix = path0[:-1]
    block0 = path0[-1][0]
    for _, path, _ in recs[1:]:
        if path[:len(prefix)] != prefix or len(path) <= len(prefix) \
                or path[len(prefix)][0] != block0:
            return False
    return True


_PURE = (ir.Assign, ir.Cast, ir.Bitcast, ir.Unary, ir.Binary, ir.Ternary, ir.Select, ir.Extract,
         ir.Insert)


def _uniform_once(kernel: ir.Kernel) -> set[int]:
    """Ids of variables written exactly once, by an op whose value is the same for every
    unit of a cube (so one scalar serves all units, across regions)."""
    count: dict[int, int] = {}
    defs: dict[int, object] = {}
    for op in ir.walk(kernel.body):
        w = ir.writes(op)
        if w is not None:
            count[w.id] = count.get(w.id, 0) + 1
            defs[w.id] = op
    uniform: set[int] = set()
    changed = True
    while changed:
        changed = False
        for vid, op in defs.items():
            if vid in uniform or count[vid] != 1:
                continue
            if isinstance(op, ir.Meta):
                ok = op.dim is None or _is_uniform(op.dim, uniform)
            elif isinstance(op, ir.Builtin):
                ok = op.name in ir.UNIFORM_BUILTINS
            elif isinstance(op, ir.Load):
                ok = isinstance(op.mem, ir.Param) and op.mem.kind == "scalar"
            elif isinstance(op, _PURE):
                ok = all(_is_uniform(v, uniform) for v in ir.reads(op))
            else:
                ok = False
            if ok:
                uniform.add(vid)
                changed = True
    return uniform


def _is_uniform(v, uniform: set[int]) -> bool:
    return isinstance(v, ir.Const) or v.id in uniform

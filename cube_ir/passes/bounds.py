"""Checked mode: guard every memory access so an out-of-bounds index never touches memory.

    %iu: u32 = cast %i              (only for a signed or narrow index; i64/u64 use u64)
    %inb: bool = lt %iu, %len       (%len: `len` of the param, hoisted to the kernel's entry;
    if %inb {                        a constant for shared/local arrays)
      %x = load @a[%i]
    } else {
      %x = 0                        (a zero line for line arrays; nothing for stores)
    }

Comparing as unsigned makes a negative index huge, so one comparison covers both ends. A
negative constant index (`a[-1]`) is out of bounds whatever the length: the access becomes its
fallback, so no target is handed a negative literal index. Constant indices into shared/local
arrays are checked here, at compile time. An access that is already the first op under exactly
such a guard (ours, or the user's own `if i < a.len()`) is left alone, so the pass is
idempotent."""
from __future__ import annotations

from .. import ir
from ..ir import Assign, Block, Cast, Const, Kernel, LocalArray, Param, SharedArray, Var
from ..types import Scalar, Type, boolean, u32, u64
from .const_eval import wrap
from .util import VarAlloc, write_counts


def bounds_check(kernel: Kernel) -> bool:
    """Guard every Load/Store/Atomic on arrays, tensors, shared and local arrays, in place;
    True if anything changed."""
    return _Bounds(kernel).run()


def needs_check(op) -> bool:
    if not isinstance(op, (ir.Load, ir.Store, ir.Atomic)):
        return False
    m = op.mem
    return isinstance(m, (SharedArray, LocalArray)) or (
        isinstance(m, Param) and m.kind in ("array", "tensor"))


def zero(t: Type) -> Const:
    e = t.elem
    return Const(False if e.is_bool else 0.0 if e.is_float else 0, t)


def _unsigned_for(t: Type) -> Scalar:
    return u64 if t.elem.bits == 64 else u32


def _is_unsigned(t: Type, at_least: int) -> bool:
    return t.lanes == 1 and t.elem.kind == "uint" and t.elem.bits >= max(at_least, 32)


def fallback(op) -> list:
    """What an out-of-bounds access does: a load/atomic gives 0, a store nothing."""
    dst = getattr(op, "dst", None)
    return [] if dst is None else [Assign(dst, zero(dst.type), op.loc)]


def never_in_bounds(op) -> bool:
    """A constant index no length can cover: negative, at least a shared/local array's size,
    or at least 2**32 - 1 (a length is a u32)."""
    i = op.index
    if not isinstance(i, Const):
        return False
    n = int(i.value)
    limit = op.mem.size if isinstance(op.mem, (SharedArray, LocalArray)) else 0xFFFFFFFF
    return n < 0 or n >= limit


def drop_constant_out_of_bounds(kernel: Kernel) -> bool:
    """Replace every access whose constant index is never in bounds by its fallback, in
    either mode: in checked mode such accesses only survive under guards that are never
    true (an index folded after the bounds pass), in unchecked mode they are undefined; and
    code generators must not be handed them (naga rejects a constant index out of range,
    WGSL has no negative u32 literal)."""
    changed = False

    def block(b: Block) -> None:
        nonlocal changed
        out = Block()
        for op in b:
            for child in ir.child_blocks(op):
                block(child)
            if needs_check(op) and never_in_bounds(op):
                out.extend(fallback(op))
                changed = True
            else:
                out.append(op)
        b[:] = out

    block(kernel.body)
    return changed


class _Bounds:
    def __init__(self, kernel: Kernel):
        self.k = kernel
        self.alloc = VarAlloc(kernel)
        self.writes = write_counts(kernel.body)
        self.defs = {ir.writes(op): op for op in ir.walk(kernel.body)
                     if ir.writes(op) is not None and self.writes[ir.writes(op)] == 1}
        self.entry: list = []  # new ops for the kernel's entry
        self.lens: dict = {}  # (param, unsigned type) -> its length as a Var of that type
        self._find_entry_lens()
        self.changed = False

    def run(self) -> bool:
        body = self.block(self.k.body, None)
        self.k.body[:] = self.entry + body
        return self.changed or bool(self.entry)

    # ---- lengths -----------------------------------------------------------------------
    def _find_entry_lens(self) -> None:
        """Reuse `len` ops (and their u64 casts) already at the kernel's entry."""
        for op in self.k.body:
            if isinstance(op, ir.Meta) and op.what == "len" and op.dst in self.defs:
                self.lens.setdefault((op.mem, u32), op.dst)
            elif isinstance(op, Cast) and op.dst in self.defs and op.dst.type == u64 \
                    and self._len_of(op.a) is not None:
                self.lens.setdefault((self._len_of(op.a), u64), op.dst)
            elif not isinstance(op, (ir.Meta, ir.Builtin, Cast)) and not (
                    isinstance(op, ir.Load) and getattr(op.mem, "kind", "") == "scalar"):
                break

    def _len_of(self, v) -> Param | None:
        """The param whose length `v` is (its single write is a `len`), if it is one."""
        d = self.defs.get(v) if isinstance(v, Var) else None
        return d.mem if isinstance(d, ir.Meta) and d.what == "len" else None

    def _len(self, p: Param, t: Scalar) -> Var:
        key = (p, t)
        if key not in self.lens:
            n = self.alloc.new(u32, f"len_{p.name}")
            self.entry.append(ir.Meta(n, "len", p))
            self.defs[n] = self.entry[-1]
            self.lens[(p, u32)] = n
            if t == u64:
                n64 = self.alloc.new(u64, f"len_{p.name}")
                self.entry.append(Cast(n64, n))
                self.defs[n64] = self.entry[-1]
                self.lens[key] = n64
        return self.lens[key]

    def _is_bound(self, b, mem) -> bool:
        """Whether `b` is `mem`'s length (or less), maybe cast to u64."""
        if isinstance(mem, (SharedArray, LocalArray)):
            return isinstance(b, Const) and 0 <= int(b.value) <= mem.size
        if self._len_of(b) is mem:
            return True
        d = self.defs.get(b) if isinstance(b, Var) else None
        return isinstance(d, Cast) and d.dst.type == u64 and self._len_of(d.a) is mem

    # ---- guards ------------------------------------------------------------------------
    def _already_guarded(self, block: Block, i: int) -> bool:
        """block[i] is `if (lt iu, bound) { access; ... }` with the compare (and the index's
        cast) just before it: the access at the head of `then` needs no second guard."""
        g = block[i]
        if not (isinstance(g, ir.If) and g.then and needs_check(g.then[0]) and i >= 1):
            return False
        op, cmp = g.then[0], block[i - 1]
        if not (isinstance(cmp, ir.Binary) and cmp.op == "lt" and cmp.dst is g.cond):
            return False
        if not _is_unsigned(cmp.a.type, op.index.type.elem.bits):
            return False
        prev = block[i - 2] if i >= 2 else None
        return self._is_index(cmp.a, op.index, prev) and self._is_bound(cmp.b, op.mem)

    @staticmethod
    def _is_index(a, idx, prev) -> bool:
        """Whether `a` is `idx` as the unsigned type of `a` (`prev` may be its cast)."""
        def same(x) -> bool:
            if isinstance(x, Const) and isinstance(idx, Const):
                return int(x.value) == wrap(int(idx.value), a.type.elem)
            return x is idx
        if a is idx or isinstance(a, Const):
            return same(a)
        if isinstance(prev, Cast) and prev.dst is a:
            return same(prev.a)
        # a cast of a constant index, folded (unrolled copies)
        return isinstance(prev, Assign) and prev.dst is a and isinstance(prev.src, Const) \
            and same(prev.src)

    def block(self, block: Block, skip) -> Block:
        out = Block()
        for i, op in enumerate(block):
            if isinstance(op, ir.If):
                guarded = self._already_guarded(block, i)
                op.then = self.block(op.then, op.then[0] if guarded else None)
                op.orelse = self.block(op.orelse, None)
            elif isinstance(op, (ir.Loop, ir.Range)):
                op.body = self.block(op.body, None)
            if needs_check(op) and op is not skip:
                new = self._guard(op)
                self.changed |= new != [op]
                out.extend(new)
            else:
                out.append(op)
        return out

    def _fallback(self, op) -> list:
        return fallback(op)

    def _guard(self, op) -> list:
        idx, mem, loc = op.index, op.mem, op.loc
        if isinstance(mem, (SharedArray, LocalArray)) and isinstance(idx, Const):
            return [op] if 0 <= int(idx.value) < mem.size else self._fallback(op)
        ut = _unsigned_for(idx.type)
        pre: list = []
        if isinstance(idx, Const) and never_in_bounds(op):
            return self._fallback(op)  # `a[-1]`: out of bounds, and no code indexes with it
        if isinstance(idx, Const):
            iu = Const(wrap(int(idx.value), ut), ut)
        elif idx.type == ut:
            iu = idx
        else:
            iu = self.alloc.new(ut)
            pre.append(Cast(iu, idx, loc))
        if isinstance(mem, Param):
            bound = self._len(mem, ut)
        else:
            bound = Const(mem.size, ut)
        inb = self.alloc.new(boolean, "inb")
        pre.append(ir.Binary(inb, "lt", iu, bound, loc))
        return pre + [ir.If(inb, Block([op]), Block(self._fallback(op)), loc)]

"""Buffers of element types a target cannot address are read and written as u32 words.

WGSL and SPIR-V have no 8/16-bit ints, no bool storage and no bf16 type: such a buffer is
*packed*, `32 / bits` elements a word (bool: one byte each), and the parameter becomes a
u32 buffer in the lowered kernel. Element k of it is bits `(k % per) * bits` of word
`k / per`:

    load:   %w = load p[k / per];  %raw = (%w >> shift) & mask;  then to the element type:
            ints a cast (it wraps, so a u32 0xFF is i8 -1), bool `raw != 0`, bf16 the high
            half of an f32 (`bitcast(raw << 16)`)
    store:  atomic_and p[k / per], ~(mask << shift);  atomic_or p[k / per], raw << shift
            (two atomics, so units writing neighbouring elements of one word never lose
            each other's bytes)

A line of n elements is n such elements from index `i * n`. Lengths stay in elements: the
layout slot `len` is the caller's element count, and bounds checks ran before this pass.
The interpreter runs the packed kernel on the buffer's words (`interpreter.packed`)."""
from __future__ import annotations

from collections.abc import Callable

from .. import ir
from ..ir import Const, Kernel
from ..types import Scalar, boolean, f32, u32
from .util import VarAlloc, rewrite


def packed_geometry(e: Scalar) -> tuple[int, int]:
    """(elements a word, bits an element)."""
    bits = 8 if e.is_bool else e.bits
    return 32 // bits, bits


def pack_storage(kernel: Kernel, packed: Callable[[Scalar], bool] | None) -> bool:
    """Rewrite, in place, every array/tensor parameter whose element type `packed` names
    into a u32 buffer and its loads and stores into word accesses; True if any was."""
    if packed is None:
        return False
    params = {p: p.type for p in kernel.params
              if p.kind != "scalar" and packed(p.type.elem)}
    if not params:
        return False
    for p in params:
        e = params[p].elem
        if e.name == "f16" or e.is_float and e.name != "bf16":
            raise ValueError(f"no packed form for {e}")
    alloc = VarAlloc(kernel)

    def fn(op):
        if isinstance(op, ir.Load) and op.mem in params:
            return _load(op, params[op.mem], alloc)
        if isinstance(op, ir.Store) and op.mem in params:
            return _store(op, params[op.mem], alloc)
        if isinstance(op, ir.Atomic) and op.mem in params:
            raise ValueError(f"no atomics on packed {params[op.mem]} memory")
        return None
    rewrite(kernel.body, fn)
    for p in params:
        p.type = u32
    return True


class _Ops(list):
    """A list of ops with a helper that appends one and returns its dst."""

    def __init__(self, alloc: VarAlloc, loc):
        super().__init__()
        self.alloc, self.loc = alloc, loc

    def bin(self, op: str, a, b, t=u32, name=None):
        v = self.alloc.new(t if op not in ir.COMPARE_OPS else boolean, name)
        self.append(ir.Binary(v, op, a, b, self.loc))
        return v

    def unop(self, cls, a, t, name=None):
        v = self.alloc.new(t, name)
        self.append(cls(v, a, self.loc))
        return v


def _element_index(o: _Ops, index: ir.Value, lanes: int, j: int):
    """Index of lane j of line `index` in elements (u32; bounds checks already held)."""
    i = index if index.type == u32 else o.unop(ir.Cast, index, u32, "idx")
    if lanes == 1:
        return i
    return o.bin("add", o.bin("mul", i, Const(lanes, u32)), Const(j, u32), name="elem")


def _word_and_shift(o: _Ops, k, e: Scalar):
    per, bits = packed_geometry(e)
    word = o.bin("div", k, Const(per, u32), name="word")
    shift = o.bin("mul", o.bin("rem", k, Const(per, u32)), Const(bits, u32), name="shift")
    return word, shift, (1 << bits) - 1


def _load(op: ir.Load, t, alloc: VarAlloc) -> list:
    o = _Ops(alloc, op.loc)
    e = t.elem
    lanes = []
    for j in range(t.lanes):
        word, shift, mask = _word_and_shift(o, _element_index(o, op.index, t.lanes, j), e)
        w = alloc.new(u32, "w")
        o.append(ir.Load(w, op.mem, word, op.loc))
        raw = o.bin("and", o.bin("shr", w, shift), Const(mask, u32), name="raw")
        if e.is_bool:
            x = o.bin("ne", raw, Const(0, u32))
        elif e.name == "bf16":
            hi = o.unop(ir.Bitcast, o.bin("shl", raw, Const(16, u32)), f32, "hi")
            x = o.unop(ir.Cast, hi, e)
        else:
            x = o.unop(ir.Cast, raw, e)  # wraps: u32 0xFF is i8 -1
        lanes.append(x)
    if t.lanes == 1:
        o.append(ir.Assign(op.dst, lanes[0], op.loc))
        return o
    acc = alloc.new(t, "line")
    o.append(ir.Cast(acc, lanes[0], op.loc))  # lane 0 splat, then the others inserted
    for j, x in enumerate(lanes[1:], 1):
        nxt = op.dst if j == t.lanes - 1 else alloc.new(t, "line")
        o.append(ir.Insert(nxt, acc, j, x, op.loc))
        acc = nxt
    return o


def _store(op: ir.Store, t, alloc: VarAlloc) -> list:
    o = _Ops(alloc, op.loc)
    e = t.elem
    for j in range(t.lanes):
        x = op.value
        if t.lanes > 1:
            x = alloc.new(e, "lane")
            o.append(ir.Extract(x, op.value, j, op.loc))
        word, shift, mask = _word_and_shift(o, _element_index(o, op.index, t.lanes, j), e)
        if e.is_bool:
            raw = alloc.new(u32, "raw")
            o.append(ir.Select(raw, x, Const(1, u32), Const(0, u32), op.loc))
        elif e.name == "bf16":
            bits = o.unop(ir.Bitcast, o.unop(ir.Cast, x, f32), u32, "bits")
            raw = o.bin("shr", bits, Const(16, u32), name="raw")
        else:
            raw = o.bin("and", o.unop(ir.Cast, x, u32), Const(mask, u32), name="raw")
        keep = o.bin("xor", o.bin("shl", Const(mask, u32), shift), Const(0xFFFFFFFF, u32))
        o.append(ir.Atomic(None, "and", op.mem, word, keep, None, op.loc))
        o.append(ir.Atomic(None, "or", op.mem, word, o.bin("shl", raw, shift), None, op.loc))
    return o


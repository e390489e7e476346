"""The IR: typed, structured, target-free.

A kernel is a tree of blocks. Values are `Var`s (mutable typed locals, not SSA: a backend
gives each a register/alloca, the interpreter a per-unit array) and `Const`s. Control flow is
structured (`If`, `Loop`, `Range`, `Break`, `Continue`, `Return`), which every target needs
(WGSL and SPIR-V demand it; C and LLVM are happy with it).

Semantics every backend and the interpreter share:
- integer `div`/`rem` truncate toward zero (C semantics); float `rem` is fmod. The frontend
  lowers Python's `//` and `%` (floor semantics) into these.
- `shr` is arithmetic for signed ints, logical for unsigned; shift counts are taken modulo the
  bit width.
- `Binary`, `Ternary` and `Select` operands all have one type (the dst's type; for comparisons
  the dst is bool-shaped): the builder inserts the `Cast`s (widening, scalar->line splats).
- comparisons yield `bool` (or a line of bool for lines). Float comparisons are IEEE's: false
  when an operand is NaN, except `ne`, which is true. Float `min`/`max` (and `clamp`, which is
  min(max(a, lo), hi)) return the other operand of a NaN, as C's fmin/fmax. Targets whose
  compilers may assume finite floats get these spelled in bit tests (passes.float_compares).
- `Cast` from a scalar to a line splats; float->int truncates toward zero (saturating is not
  promised); int->bool and float->bool are `!= 0`.
- `Load`/`Store`/`Atomic` index a memory in units of its element type (a line for line arrays).
  After the bounds-check pass they are guarded; before it (or with `unchecked`) an out-of-bounds
  index is undefined behaviour.
- `Meta` values are u32: `len` is the number of elements (lines for line arrays) of an array or
  tensor; `shape`/`stride` are in scalar elements; `rank` is a comptime constant for tensors.
- all builtins are u32.
- a scalar kernel argument is a `Param` of kind 'scalar'; it is read with `Load(dst, param, 0)`
  (the index is ignored) and never stored to or bounds-checked.
- `Plane` ops act on the units of one plane (plane_size consecutive linear unit positions);
  with plane_size 1 every plane op returns its own value (exclusive ops return 0 / 1).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from .types import Scalar, Type, Vec

Loc = tuple  # (filename, line, col, source_line) or None


@dataclass(eq=False, slots=True)
class Var:
    id: int
    type: Type
    name: str | None = None

    def __repr__(self) -> str:
        return f"%{self.name or ''}{self.id}"


@dataclass(frozen=True, slots=True)
class Const:
    value: object  # python bool/int/float; for a line type every lane holds it
    type: Type

    def __repr__(self) -> str:
        return f"{self.value!r}:{self.type!r}"


Value = Var | Const


@dataclass(eq=False, slots=True)
class Param:
    """A kernel argument. `kind` is 'array', 'tensor' or 'scalar'.

    For arrays/tensors `type` is the element type (a `Vec` for line arrays); for tensors `rank`
    is the comptime rank. `readonly` is set by analysis (never stored to)."""

    name: str
    kind: str
    type: Type
    index: int
    rank: int = 0
    readonly: bool = False

    def __repr__(self) -> str:
        return f"@{self.name}"


@dataclass(eq=False, slots=True)
class SharedArray:
    """Cube-shared memory (`cb.SharedMemory(T, n)`), one instance per cube."""

    id: int
    type: Type
    size: int
    name: str | None = None

    def __repr__(self) -> str:
        return f"$shared{self.id}"


@dataclass(eq=False, slots=True)
class LocalArray:
    """Unit-private array (`cb.LocalArray(T, n)`)."""

    id: int
    type: Type
    size: int
    name: str | None = None

    def __repr__(self) -> str:
        return f"$local{self.id}"


Memory = Param | SharedArray | LocalArray


class Block(list):
    """An ordered list of ops."""


# ---- ops -------------------------------------------------------------------------------

# the float math beyond the first set (Python's math module; trunc keeps the float type)
MORE_MATH_UNARY = frozenset(
    "tan asin acos atan sinh cosh asinh acosh atanh log2 log10 exp2 expm1 trunc".split()
)
UNARY_OPS = frozenset(
    "neg not bitnot abs sqrt rsqrt exp log log1p sin cos tanh erf floor ceil round".split()
) | MORE_MATH_UNARY
FLOAT_ONLY_UNARY = frozenset(
    "sqrt rsqrt exp log log1p sin cos tanh erf floor ceil round".split()) | MORE_MATH_UNARY
# atan2(y, x), hypot(x, y), copysign(x, y) as Python's math; math.fmod is float `rem`
FLOAT_ONLY_BINARY = frozenset(("atan2", "hypot", "copysign"))
BINARY_OPS = frozenset(
    "add sub mul div rem pow min max and or xor shl shr eq ne lt le gt ge".split()
) | FLOAT_ONLY_BINARY
COMPARE_OPS = frozenset("eq ne lt le gt ge".split())
TERNARY_OPS = frozenset(("fma", "clamp"))
ATOMIC_OPS = frozenset("add sub min max and or xor exchange cas".split())
PLANE_OPS = frozenset(
    "sum prod max min all any broadcast shuffle shuffle_xor inclusive_sum exclusive_sum "
    "inclusive_prod exclusive_prod".split()
)
PLANE_OPS_WITH_LANE = frozenset(("broadcast", "shuffle", "shuffle_xor"))
BUILTINS = frozenset(
    """UNIT_POS UNIT_POS_X UNIT_POS_Y UNIT_POS_Z CUBE_POS CUBE_POS_X CUBE_POS_Y CUBE_POS_Z
    CUBE_DIM CUBE_DIM_X CUBE_DIM_Y CUBE_DIM_Z CUBE_COUNT CUBE_COUNT_X CUBE_COUNT_Y CUBE_COUNT_Z
    ABSOLUTE_POS ABSOLUTE_POS_X ABSOLUTE_POS_Y ABSOLUTE_POS_Z PLANE_DIM UNIT_POS_PLANE""".split()
)
# Builtins whose value is the same for every unit of a cube.
UNIFORM_BUILTINS = frozenset(
    """CUBE_POS CUBE_POS_X CUBE_POS_Y CUBE_POS_Z CUBE_DIM CUBE_DIM_X CUBE_DIM_Y CUBE_DIM_Z
    CUBE_COUNT CUBE_COUNT_X CUBE_COUNT_Y CUBE_COUNT_Z PLANE_DIM""".split()
)


@dataclass(eq=False, slots=True)
class Assign:
    dst: Var
    src: Value
    loc: Loc = None


@dataclass(eq=False, slots=True)
class Unary:
    dst: Var
    op: str
    a: Value
    loc: Loc = None


@dataclass(eq=False, slots=True)
class Binary:
    dst: Var
    op: str
    a: Value
    b: Value
    loc: Loc = None


@dataclass(eq=False, slots=True)
class Ternary:
    """fma(a, b, c) = a*b+c; clamp(a, lo=b, hi=c)."""

    dst: Var
    op: str
    a: Value
    b: Value
    c: Value
    loc: Loc = None


@dataclass(eq=False, slots=True)
class Select:
    dst: Var
    cond: Value  # bool (selects whole values), or a line of bool of the same lanes as dst
    a: Value  # taken where cond is true
    b: Value
    loc: Loc = None


@dataclass(eq=False, slots=True)
class Cast:
    dst: Var
    a: Value
    loc: Loc = None


@dataclass(eq=False, slots=True)
class Bitcast:
    """dst = a's bits read as dst's type: a 32- or 64-bit float or int, per lane, to another
    of the same width (the lowering compares float bits with it; no frontend spelling)."""

    dst: Var
    a: Value
    loc: Loc = None


@dataclass(eq=False, slots=True)
class Extract:
    """dst = vec[lane] (lane a comptime int)."""

    dst: Var
    vec: Value
    lane: int
    loc: Loc = None


@dataclass(eq=False, slots=True)
class Insert:
    """dst = vec with lane replaced by value."""

    dst: Var
    vec: Value
    lane: int
    value: Value
    loc: Loc = None


@dataclass(eq=False, slots=True)
class Load:
    dst: Var
    mem: Memory
    index: Value
    loc: Loc = None


@dataclass(eq=False, slots=True)
class Store:
    mem: Memory
    index: Value
    value: Value
    loc: Loc = None


@dataclass(eq=False, slots=True)
class Meta:
    """dst (u32) = len(mem) | shape(mem, dim) | stride(mem, dim). dim is a Value (u32)."""

    dst: Var
    what: str
    mem: Param
    dim: Value | None = None
    loc: Loc = None


@dataclass(eq=False, slots=True)
class Builtin:
    dst: Var
    name: str
    loc: Loc = None


@dataclass(eq=False, slots=True)
class Atomic:
    """Atomically: old = mem[index]; mem[index] = op(old, value); dst = old.

    For `cas`: if old == cmp then mem[index] = value. dst may be None if unused."""

    dst: Var | None
    op: str
    mem: Memory
    index: Value
    value: Value
    cmp: Value | None = None
    loc: Loc = None


@dataclass(eq=False, slots=True)
class Plane:
    """A plane (warp/subgroup) op over the active units of the plane.

    `lane` is the source lane (broadcast, shuffle) or the xor mask (shuffle_xor). Units whose
    source lane is outside the plane read their own value."""

    dst: Var
    op: str
    value: Value
    lane: Value | None = None
    loc: Loc = None


@dataclass(eq=False, slots=True)
class SyncCube:
    loc: Loc = None


@dataclass(eq=False, slots=True)
class If:
    cond: Value
    then: Block = field(default_factory=Block)
    orelse: Block = field(default_factory=Block)
    loc: Loc = None


@dataclass(eq=False, slots=True)
class Loop:
    """Repeat body until a Break (a `while` lowers to Loop{ if !cond: break; ... })."""

    body: Block = field(default_factory=Block)
    loc: Loc = None


@dataclass(eq=False, slots=True)
class Range:
    """for var in range(start, end, step): body. `step` is a nonzero comptime int.

    Continue jumps to the increment. var is written only by the loop."""

    var: Var
    start: Value
    end: Value
    step: int
    body: Block = field(default_factory=Block)
    loc: Loc = None


def range_steps_past_end(r: Range) -> bool:
    """Whether the counter of r, stepped past its last value, may leave its type's range:
    a step of magnitude above 1 and an end that is not a constant far enough from the type's
    limit (`range(n, 0, -2)` on u32 from 5 reaches 1, then 2**32 - 1). Such a loop must stop
    on the distance left to the end, not on a compare of the wrapped counter."""
    if abs(r.step) == 1:
        return False  # the counter reaches end exactly, inside the type
    if not isinstance(r.end, Const):
        return True
    lo, hi = r.var.type.elem.int_range
    end = int(r.end.value)
    return end + r.step - 1 > hi if r.step > 0 else end + r.step + 1 < lo


@dataclass(eq=False, slots=True)
class Break:
    loc: Loc = None


@dataclass(eq=False, slots=True)
class Continue:
    loc: Loc = None


@dataclass(eq=False, slots=True)
class Return:
    loc: Loc = None


Op = (
    Assign | Unary | Binary | Ternary | Select | Cast | Bitcast | Extract | Insert | Load | Store
    | Meta | Builtin | Atomic | Plane | SyncCube | If | Loop | Range | Break | Continue | Return
)
CONTROL = (If, Loop, Range)


@dataclass(eq=False)
class Kernel:
    name: str
    params: list[Param]
    body: Block
    vars: list[Var] = field(default_factory=list)
    shared: list[SharedArray] = field(default_factory=list)
    locals: list[LocalArray] = field(default_factory=list)
    plane_size: int = 1  # comptime plane size the kernel was specialised for
    cube_dim: tuple[int, int, int] | None = None  # comptime cube dim, when specialised on it
    checked: bool = True  # bounds checks wanted (applied by passes.bounds)
    # the author's promise that the kernel's unsigned index arithmetic never wraps: code
    # generators may mark unsigned adds and multiplies no-wrap, which lets LLVM keep
    # per-row offsets as pointers stepping through a loop (2x on the CPU's matmul tiles)
    nowrap: bool = False
    source: str = ""  # where it came from, for messages

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def uses_barrier(self) -> bool:
        return any(isinstance(op, SyncCube) for op in walk(self.body))


def walk(block: Block) -> Iterator:
    """Every op in the block, depth first, parents before children."""
    for op in block:
        yield op
        if isinstance(op, If):
            yield from walk(op.then)
            yield from walk(op.orelse)
        elif isinstance(op, (Loop, Range)):
            yield from walk(op.body)


def child_blocks(op) -> tuple:
    if isinstance(op, If):
        return (op.then, op.orelse)
    if isinstance(op, (Loop, Range)):
        return (op.body,)
    return ()


def reads(op) -> list:
    """The values an op reads (not counting nested blocks)."""
    match op:
        case Assign(src=s) | Cast(a=s) | Bitcast(a=s) | Unary(a=s):
            return [s]
        case Binary(a=a, b=b):
            return [a, b]
        case Ternary(a=a, b=b, c=c):
            return [a, b, c]
        case Select(cond=c, a=a, b=b):
            return [c, a, b]
        case Extract(vec=v):
            return [v]
        case Insert(vec=v, value=x):
            return [v, x]
        case Load(index=i):
            return [i]
        case Store(index=i, value=v):
            return [i, v]
        case Meta(dim=d):
            return [] if d is None else [d]
        case Atomic(index=i, value=v, cmp=c):
            return [i, v] + ([] if c is None else [c])
        case Plane(value=v, lane=lane):
            return [v] + ([] if lane is None else [lane])
        case If(cond=c):
            return [c]
        case Range(start=s, end=e):
            return [s, e]
    return []


def writes(op) -> Var | None:
    """The var an op writes, if any (Range writes its loop var)."""
    if isinstance(op, Range):
        return op.var
    return getattr(op, "dst", None)


def declared_vars(kernel: Kernel) -> list[Var]:
    """The variables a code generator declares: kernel.vars, then any other var an op
    mentions, one per id (the name backends give it), in a stable order."""
    seen = {v.id: v for v in kernel.vars}
    for op in walk(kernel.body):
        for v in [*reads(op), writes(op)]:
            if isinstance(v, Var) and v.id not in seen:
                seen[v.id] = v
    return list(seen.values())


def is_vec(t: Type) -> bool:
    return isinstance(t, Vec)


def scalar_of(t: Type) -> Scalar:
    return t.elem

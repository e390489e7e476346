"""Derived builtins become IR arithmetic on the ones a target reads directly.

Every target has some positions natively (CUDA: threadIdx/blockIdx/blockDim/gridDim per axis;
WGSL and SPIR-V also the linear local index and the global id; the CPU's unit loops all of
them) and must compute the rest. The formulas live here, once, instead of in each emitter:

    UNIT_POS       = UNIT_POS_X + CUBE_DIM_X * (UNIT_POS_Y + CUBE_DIM_Y * UNIT_POS_Z)
    CUBE_POS       = CUBE_POS_X + CUBE_COUNT_X * (CUBE_POS_Y + CUBE_COUNT_Y * CUBE_POS_Z)
    CUBE_DIM       = CUBE_DIM_X * CUBE_DIM_Y * CUBE_DIM_Z          (CUBE_COUNT alike)
    ABSOLUTE_POS   = CUBE_POS * CUBE_DIM + UNIT_POS
    ABSOLUTE_POS_X = CUBE_POS_X * CUBE_DIM_X + UNIT_POS_X          (Y, Z alike)
    PLANE_DIM      = the kernel's plane size (a constant)
    UNIT_POS_PLANE = UNIT_POS % plane size                         (0 for plane size 1)

A cube dim the kernel was specialised on makes CUBE_DIM_* constants. Each derived builtin the
kernel reads is computed once at the top of the kernel (they are the same all through a
unit's run) and the reads become copies of it, which constant folding and the targets'
compilers propagate."""
from __future__ import annotations

from .. import ir
from ..ir import Const, Kernel, Var
from ..types import u32
from .util import VarAlloc, rewrite

XYZ = "XYZ"
# The builtins every target must read natively: positions per axis have no formula.
PRIMITIVE = frozenset(f"{b}_{a}" for b in ("UNIT_POS", "CUBE_POS", "CUBE_COUNT") for a in XYZ)
assert PRIMITIVE | {f"CUBE_DIM_{a}" for a in XYZ} <= ir.BUILTINS


def lower_builtins(kernel: Kernel, native: frozenset[str]) -> bool:
    """Rewrite every read of a builtin outside `native` (which must hold PRIMITIVE, and the
    CUBE_DIM_* unless the kernel has a comptime cube dim) in place; True if any was."""
    missing = PRIMITIVE - native
    if missing:
        raise ValueError(f"a target must read {sorted(missing)} natively")
    reads = [op for op in ir.walk(kernel.body)
             if isinstance(op, ir.Builtin) and op.name not in native]
    if not reads:
        return False
    d = _Deriver(kernel, native)
    for op in reads:
        d.value(op.name)
    kernel.body[:0] = d.prologue
    vals = d.vars
    rewrite(kernel.body, lambda op: [ir.Assign(op.dst, vals[op.name], op.loc)]
            if isinstance(op, ir.Builtin) and op.name in vals and vals[op.name] is not op.dst
            else None)
    return True


def formula(name: str, plane_size: int, cube_dim=None):
    """How builtin `name` is computed: an expression tree whose leaves are builtin names and
    ints and whose nodes are (op, a, b) with op add/mul/rem on u32 (None for a per-axis
    position, which has no formula). The IR pass below and an emitter that must print a
    position for itself (the C family's lane for plane ops) both read this one table."""
    if name.startswith("CUBE_DIM_") and cube_dim is not None:
        return int(cube_dim[XYZ.index(name[-1])])
    if name == "PLANE_DIM":
        return plane_size
    if name == "UNIT_POS_PLANE":
        return 0 if plane_size == 1 else ("rem", "UNIT_POS", plane_size)
    if name in ("UNIT_POS", "CUBE_POS"):
        dims = "CUBE_DIM" if name == "UNIT_POS" else "CUBE_COUNT"
        inner = ("add", f"{name}_Y", ("mul", f"{dims}_Y", f"{name}_Z"))
        return ("add", f"{name}_X", ("mul", f"{dims}_X", inner))
    if name in ("CUBE_DIM", "CUBE_COUNT"):
        return ("mul", ("mul", f"{name}_X", f"{name}_Y"), f"{name}_Z")
    if name == "ABSOLUTE_POS":
        return ("add", ("mul", "CUBE_POS", "CUBE_DIM"), "UNIT_POS")
    if name.startswith("ABSOLUTE_POS_"):
        a = name[-1]
        return ("add", ("mul", f"CUBE_POS_{a}", f"CUBE_DIM_{a}"), f"UNIT_POS_{a}")
    return None


class _Deriver:
    def __init__(self, kernel: Kernel, native: frozenset[str]):
        self.k, self.native = kernel, native
        self.alloc = VarAlloc(kernel)
        self.prologue: list = []
        self.vars: dict[str, Var | Const] = {}

    def value(self, name: str) -> Var | Const:
        """A builtin's value: native ones are read (once), derived ones computed (once)."""
        got = self.vars.get(name)
        if got is not None:
            return got
        tree = None if name in self.native else formula(name, self.k.plane_size,
                                                          self.k.cube_dim)
        if tree is None:
            if name not in ir.BUILTINS:
                raise ValueError(f"no builtin {name}")
            got = self.alloc.new(u32, name.lower())
            self.prologue.append(ir.Builtin(got, name))
        else:
            got = self._eval(tree, name.lower())
        self.vars[name] = got
        return got

    def _eval(self, tree, name: str | None = None) -> Var | Const:
        if isinstance(tree, int):
            return Const(tree, u32)
        if isinstance(tree, str):
            return self.value(tree)
        op, a, b = tree
        a, b = self._eval(a), self._eval(b)
        if isinstance(a, Const) and isinstance(b, Const):
            return Const(_fold(op, a.value, b.value), u32)
        v = self.alloc.new(u32, name)
        self.prologue.append(ir.Binary(v, op, a, b))
        return v


def _fold(op: str, a: int, b: int) -> int:
    r = {"add": a + b, "mul": a * b, "rem": a % b if b else 0}[op]
    return r & 0xFFFFFFFF

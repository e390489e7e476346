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
from ..ir import Block, Const, Kernel, Var
from ..types import u32
from .util import VarAlloc

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
    _replace(kernel.body, d.vars)
    return True


class _Deriver:
    def __init__(self, kernel: Kernel, native: frozenset[str]):
        self.k, self.native = kernel, native
        self.alloc = VarAlloc(kernel)
        self.prologue: list = []
        self.vars: dict[str, Var | Const] = {}

    def value(self, name: str) -> Var | Const:
        got = self.vars.get(name)
        if got is None:
            got = self.vars[name] = self._derive(name)
        return got

    def _read(self, name: str):
        """A builtin's value: native ones are read (once), derived ones computed."""
        if name in self.native:
            if name not in self.vars:
                v = self.alloc.new(u32, name.lower())
                self.prologue.append(ir.Builtin(v, name))
                self.vars[name] = v
            return self.vars[name]
        return self.value(name)

    def _op(self, op: str, a, b, name: str | None = None) -> Var | Const:
        if isinstance(a, Const) and isinstance(b, Const):
            return Const(_fold(op, a.value, b.value), u32)
        v = self.alloc.new(u32, name)
        self.prologue.append(ir.Binary(v, op, a, b))
        return v

    def _derive(self, name: str) -> Var | Const:
        r, ps, cd = self._read, self.k.plane_size, self.k.cube_dim
        if name.startswith("CUBE_DIM_") and cd is not None:
            return Const(int(cd[XYZ.index(name[-1])]), u32)
        if name == "PLANE_DIM":
            return Const(ps, u32)
        if name == "UNIT_POS_PLANE":
            return Const(0, u32) if ps == 1 else self._op("rem", r("UNIT_POS"), Const(ps, u32),
                                                           "lane")
        if name in ("UNIT_POS", "CUBE_POS"):
            dims = "CUBE_DIM" if name == "UNIT_POS" else "CUBE_COUNT"
            inner = self._op("add", r(f"{name}_Y"),
                             self._op("mul", r(f"{dims}_Y"), r(f"{name}_Z")))
            return self._op("add", r(f"{name}_X"), self._op("mul", r(f"{dims}_X"), inner),
                            name.lower())
        if name in ("CUBE_DIM", "CUBE_COUNT"):
            xy = self._op("mul", r(f"{name}_X"), r(f"{name}_Y"))
            return self._op("mul", xy, r(f"{name}_Z"), name.lower())
        if name == "ABSOLUTE_POS":
            return self._op("add", self._op("mul", r("CUBE_POS"), r("CUBE_DIM")),
                            r("UNIT_POS"), "abs_pos")
        if name.startswith("ABSOLUTE_POS_"):
            a = name[-1]
            return self._op("add", self._op("mul", r(f"CUBE_POS_{a}"), r(f"CUBE_DIM_{a}")),
                            r(f"UNIT_POS_{a}"), name.lower())
        raise ValueError(f"no formula for the builtin {name}")


def _fold(op: str, a: int, b: int) -> int:
    r = {"add": a + b, "mul": a * b, "rem": a % b if b else 0}[op]
    return r & 0xFFFFFFFF


def _replace(block: Block, vals: dict) -> None:
    for i, op in enumerate(block):
        for child in ir.child_blocks(op):
            _replace(child, vals)
        if isinstance(op, ir.Builtin) and op.name in vals and vals[op.name] is not op.dst:
            block[i] = ir.Assign(op.dst, vals[op.name], op.loc)

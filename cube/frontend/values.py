"""Frontend-only values: references to memories and bound methods on them."""
from __future__ import annotations

from dataclasses import dataclass

from cube_ir import ir


@dataclass(frozen=True)
class MemRef:
    """An array-like in a kernel: a buffer parameter, shared memory or a local array."""

    mem: ir.Param | ir.SharedArray | ir.LocalArray
    # sizes of shared/local memory allocated with a tuple of two or more (row-major; a
    # tuple index names NumPy's element, `frontend/indexing.py`); None: one linear index
    dims: tuple[int, ...] | None = None

    @property
    def type(self):
        return self.mem.type

    @property
    def kind(self) -> str:
        if isinstance(self.mem, ir.SharedArray):
            return "shared"
        if isinstance(self.mem, ir.LocalArray):
            return "local"
        return self.mem.kind

    def describe(self) -> str:
        name = getattr(self.mem, "name", None) or repr(self.mem)
        return f"{self.kind} '{name}'"


@dataclass(frozen=True)
class BoundMethod:
    ref: MemRef
    name: str

"""The argument block: one array of i64 slots that the runtime fills for each launch."""
from __future__ import annotations

from dataclasses import dataclass

from cube_ir import ir

HEADER = 6  # cube_count x, y, z; cube_dim x, y, z


@dataclass(frozen=True)
class ParamSlots:
    """Where one kernel parameter lives in the argument block.

    array:  [ptr, len]
    tensor: [ptr, len, shape[0..rank), stride[0..rank)]
    scalar: [bits]  (the value's bit pattern in the low bits; bool as 0/1)
    """

    name: str
    kind: str
    offset: int
    rank: int = 0

    @property
    def ptr(self) -> int:
        return self.offset

    @property
    def len(self) -> int:
        return self.offset + 1

    def shape(self, d: int) -> int:
        return self.offset + 2 + d

    def stride(self, d: int) -> int:
        return self.offset + 2 + self.rank + d


def layout(params: list[ir.Param]) -> tuple[tuple[ParamSlots, ...], int]:
    out, off = [], HEADER
    for p in params:
        rank = p.rank if p.kind == "tensor" else 0
        out.append(ParamSlots(p.name, p.kind, off, rank))
        off += 1 if p.kind == "scalar" else 2 + 2 * rank
    return tuple(out), off

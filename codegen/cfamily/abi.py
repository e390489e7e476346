"""The launch ABI of C-family kernels: one pointer per array/tensor, then one by-value struct.

    <entry>(T0* p0, T1* p1, ..., cube_args args)

Buffers come first, in the order of the kernel's array/tensor params. `cube_args` is a struct
of 64-bit slots (`unsigned long long s[n]`), filled by the runtime for each launch:

    array   len                           (elements; lines for line arrays)
    tensor  len, shape[rank], stride[rank] (shape/stride in scalar elements)
    scalar  the value's bits in the low bits (f32 as its 32 bits, bool 0/1, f16/bf16 raw)

One small struct passed by value costs no buffer upload on any API (CUDA/HIP kernel params,
OpenCL clSetKernelArg with bytes, Metal setBytes), unlike a metadata buffer.
"""
from __future__ import annotations

from dataclasses import dataclass

from cube_ir import ir


@dataclass(frozen=True)
class Slots:
    """Where one kernel parameter lives: `buffer` is its pointer's position among the buffer
    arguments (-1 for scalars), `offset` its first slot in cube_args."""

    name: str
    kind: str
    buffer: int
    offset: int
    rank: int = 0

    @property
    def len(self) -> int:
        return self.offset

    def shape(self, d: int) -> int:
        return self.offset + 1 + d

    def stride(self, d: int) -> int:
        return self.offset + 1 + self.rank + d


def layout(params: list[ir.Param]) -> tuple[tuple[Slots, ...], int, int]:
    """(slots per param, number of buffers, number of 64-bit slots (at least 1))."""
    out, off, nbuf = [], 0, 0
    for p in params:
        if p.kind == "scalar":
            out.append(Slots(p.name, p.kind, -1, off))
            off += 1
            continue
        rank = p.rank if p.kind == "tensor" else 0
        out.append(Slots(p.name, p.kind, nbuf, off, rank))
        nbuf += 1
        off += 1 + 2 * rank
    return tuple(out), nbuf, max(off, 1)

"""The argument block: where a kernel's parameters live at launch, for every target.

A launch hands a kernel one block of equal-width slots (and, where the target keeps them
outside the block, one buffer per array/tensor parameter). One description, parameterised
by a `Spec`:

    [header words]                   e.g. cube_count x, y, z; cube_dim x, y, z
    then, per kernel parameter in order:
      array   [ptr], len                            (len in elements: lines for line arrays)
      tensor  [ptr], len, shape[rank], stride[rank] (shape/stride in scalar elements)
      scalar  value                                 (its bits in the low bits of the slot)
    padding up to a whole number of `Spec.align` slots (at least `Spec.min_slots`)

`ptr` is there only where the spec keeps buffer pointers in the block. The order is the same
for every spec, so a reader of the metadata (a code generator, or a pass lowering `len`,
`shape(d)` and `stride(d)` to slot reads) needs only `ParamSlots`' indices.

How a scalar's value fills its slot (a target-independent rule, applied by the runtimes'
packer): f32 as its 32 bits, f64/i64/u64 as their 64 (64-bit slots only), f16/bf16 as their
raw 16 bits in the low half, bool as 0/1, unsigned ints zero-extended; a signed int is its
own bits with zeros above in a 64-bit slot, and sign-extended to 32 bits in a 32-bit slot (an
i8/i16 reads as a valid i32 there). Metadata slots hold their value modulo 2**slot_bits (a
negative stride as its two's complement).

The specs in use (the generated code's ABI differs per target; the description does not):

    C_FAMILY  64-bit slots, no pointers, no header: CUDA/HIP/MSL/OpenCL take the buffers as
              separate arguments, then the block as one by-value struct (`cube_args`)
    LLVM      64-bit slots with pointers and the grid header: the CPU's one i64 block
    SHADER    32-bit slots (u32 words), no pointers, padded to whole vec4s: the uniform
              `meta` of WGSL / SPIR-V (storage buffers are bound separately)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from . import ir
from .types import Scalar

GRID = ("cube_count_x", "cube_count_y", "cube_count_z", "cube_dim_x", "cube_dim_y",
        "cube_dim_z")


@dataclass(frozen=True)
class Spec:
    slot_bits: int = 64  # 32 or 64
    pointers: bool = False  # buffer pointers live in the block (one slot each)
    header: tuple[str, ...] = ()  # names of the words before the parameters
    align: int = 1  # the block is a whole number of this many slots...
    min_slots: int = 1  # ...and at least this many

    def __post_init__(self) -> None:
        if self.slot_bits not in (32, 64):
            raise ValueError(f"slot width must be 32 or 64 bits, got {self.slot_bits}")
        if self.pointers and self.slot_bits != 64:
            raise ValueError("pointers need 64-bit slots")

    @property
    def slot_bytes(self) -> int:
        return self.slot_bits // 8


C_FAMILY = Spec(64)
LLVM = Spec(64, pointers=True, header=GRID)
SHADER = Spec(32, align=4, min_slots=4)


@dataclass(frozen=True)
class ParamSlots:
    """Where one kernel parameter lives: slot indices into the block, and for arrays/tensors
    its position among the buffer parameters (`buffer`, -1 for scalars)."""

    name: str
    kind: str  # 'array', 'tensor' or 'scalar'
    index: int  # the parameter's position in the kernel's signature
    elem: Scalar  # element type (a scalar's type)
    rank: int  # 0 for arrays and scalars
    buffer: int
    offset: int  # first slot
    has_ptr: bool = False
    param: ir.Param | None = field(default=None, compare=False, repr=False)

    @property
    def is_buffer(self) -> bool:
        return self.kind != "scalar"

    @property
    def ptr(self) -> int:
        if not self.has_ptr:
            raise AttributeError(f"{self.name}: this layout keeps no pointer in the block")
        return self.offset

    @property
    def value(self) -> int:
        """A scalar's slot."""
        if self.kind != "scalar":
            raise AttributeError(f"{self.name} is a {self.kind}, not a scalar")
        return self.offset

    @property
    def len(self) -> int:
        return self.offset + self.has_ptr

    def shape(self, d: int) -> int:
        return self.offset + self.has_ptr + 1 + d

    def stride(self, d: int) -> int:
        return self.offset + self.has_ptr + 1 + self.rank + d

    @property
    def end(self) -> int:
        """One past the parameter's last slot."""
        if self.kind == "scalar":
            return self.offset + 1
        return self.offset + self.has_ptr + 1 + 2 * self.rank


@dataclass(frozen=True)
class Layout:
    spec: Spec
    params: tuple[ParamSlots, ...]
    nslots: int  # slots in the block, padding included
    nbuf: int  # array/tensor parameters

    @property
    def slot_bits(self) -> int:
        return self.spec.slot_bits

    @property
    def nbytes(self) -> int:
        return self.nslots * self.spec.slot_bytes

    @cached_property
    def buffers(self) -> tuple[ParamSlots, ...]:
        """The array/tensor parameters, in buffer order (every launch's buffer check reads
        them)."""
        return tuple(s for s in self.params if s.buffer >= 0)

    def header_slot(self, name: str) -> int:
        return self.spec.header.index(name)

    def of(self, param: ir.Param) -> ParamSlots:
        return self.params[param.index]


def layout(params: list[ir.Param], spec: Spec) -> Layout:
    out, off, nbuf = [], len(spec.header), 0
    for p in params:
        elem = p.type.elem
        if p.kind == "scalar":
            s = ParamSlots(p.name, p.kind, p.index, elem, 0, -1, off, False, p)
        else:
            rank = p.rank if p.kind == "tensor" else 0
            s = ParamSlots(p.name, p.kind, p.index, elem, rank, nbuf, off, spec.pointers, p)
            nbuf += 1
        out.append(s)
        off = s.end
    n = max(off, spec.min_slots)
    n = -(-n // spec.align) * spec.align
    return Layout(spec, tuple(out), n, nbuf)

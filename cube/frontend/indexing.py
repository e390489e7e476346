"""NumPy-style tuple indices: `t[i, j]` on a tensor parameter and `s[i, j]` on a shared or
local array allocated with a tuple of sizes (`cb.SharedMemory(f32, (16, 16))`).

The element they name is NumPy's: the sum of each index times its dimension's stride (a
tensor's launch strides; a multi-dimensional allocation is row-major). One index per
dimension. An index outside its own dimension never reaches a neighbouring row: a constant
one is a CompileError where the size is known, and in checked mode a runtime one makes the
whole access out of bounds (a read gives 0, a write is dropped), as a single index past the
end does. Unchecked kernels skip the runtime test, as they skip every bounds test."""
from __future__ import annotations

import math

from cube_ir import ir
from cube_ir.types import boolean, u32

from .arith import is_runtime
from .kinds import describe
from .values import MemRef

OUT_OF_BOUNDS = 0xFFFFFFFF  # past the end of any buffer a u32 index reaches


def rank_of(ref: MemRef) -> int:
    """How many indices a tuple index of ref takes (0: ref takes one linear index only)."""
    if ref.dims is not None:
        return len(ref.dims)
    if ref.kind == "tensor":
        return ref.mem.rank
    return 0


def linear(tr, ref: MemRef, idx: tuple, node):
    """The linear element index of `ref[idx]`, idx a tuple of one value per dimension."""
    rank = rank_of(ref)
    if rank == 0:
        raise tr.error(f"{ref.describe()} takes one linear index (a tuple index needs a "
                       f"tensor, or shared/local memory allocated with a tuple of sizes)",
                       node)
    if ref.dims is None and ref.type.lanes > 1:  # its shape and strides count elements
        raise tr.error(f"{ref.describe()} holds lines: index it with one linear line index "
                       f"(a tuple index counts elements)", node)
    if len(idx) != rank:
        raise tr.error(f"{ref.describe()} has {rank} dimension{'s' * (rank != 1)}: index it "
                       f"with {rank} value{'s' * (rank != 1)}, got {len(idx)}", node)
    b = tr.b
    check = b.kernel.checked
    total = None
    ok = None
    for d, v in enumerate(idx):
        if is_runtime(v):
            if v.type.lanes != 1 or not v.type.elem.is_int:
                raise tr.error(f"an index must be an integer, got {v.type}", node)
            v = v if v.type == u32 else b.cast(v, u32)  # a negative one: past any size
        elif isinstance(v, int) and not isinstance(v, bool) or \
                (hasattr(v, "__index__") and not isinstance(v, (bool, tuple, MemRef))):
            v = constant(tr, ref, d, int(v), node)
        else:
            raise tr.error(f"an index must be an integer, got {describe(v)}", node)
        if check and (is_runtime(v) or ref.dims is None):  # sizes known: checked above
            inside = b.binary("lt", v, size(tr, ref, d, node), boolean)
            ok = inside if ok is None else b.binary("and", ok, inside, boolean)
        term = b.mul(v, stride(tr, ref, d, node))
        total = term if total is None else b.add(total, term)
    if ok is not None:
        total = b.select(ok, total, ir.Const(OUT_OF_BOUNDS, u32))
    return total


def constant(tr, ref: MemRef, d: int, v: int, node) -> ir.Const:
    """A compile-time index along dimension d: inside [0, size) where the size is known."""
    if v < 0:
        raise tr.error(f"the index {v} is negative: cube does not count from the end as "
                       f"Python (write {_name(ref)}.shape({d}) - {-v})", node)
    if ref.dims is not None and v >= ref.dims[d]:
        raise tr.error(f"index {v} is out of range for dimension {d} of {ref.describe()} "
                       f"(size {ref.dims[d]})", node)
    return ir.Const(v, u32)


def _name(ref: MemRef) -> str:
    return getattr(ref.mem, "name", None) or "a"


def size(tr, ref: MemRef, d: int, node):
    if ref.dims is not None:
        return ir.Const(ref.dims[d], u32)
    return tr._method_dim(ref, "shape", d, node)


def stride(tr, ref: MemRef, d: int, node):
    if ref.dims is not None:
        return ir.Const(math.prod(ref.dims[d + 1:]), u32)
    return tr._method_dim(ref, "stride", d, node)


def alloc_dims(tr, kind: str, n, node) -> tuple[int, tuple | None]:
    """(element count, dims or None) of `cb.SharedMemory(T, n)` / `cb.LocalArray(T, n)`:
    n a positive int, or a tuple of them (a row-major multi-dimensional array)."""
    dims = tuple(n) if isinstance(n, tuple) else None
    for s in (dims if dims is not None else (n,)):
        if is_runtime(s):
            raise tr.error(f"the size of cb.{kind} must be known at compile time (use a "
                           f"Comptime parameter)", node)
        if not isinstance(s, int) or isinstance(s, bool) or s <= 0:
            raise tr.error(f"the size of cb.{kind} must be a positive integer or a tuple of "
                           f"them, got {describe(s)}", node)
    if dims == ():
        raise tr.error(f"the size of cb.{kind} must be a positive integer or a tuple of "
                       f"them, got ()", node)
    return (math.prod(dims), dims if dims is not None and len(dims) > 1 else None) \
        if dims is not None else (n, None)

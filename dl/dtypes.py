"""Tensor element types and the promotion rules of the tensor layer (docs/dl.md).

A `DType` names a cube element type (what kernels see), its NumPy storage dtype (bf16 is kept
as raw uint16 bits) and the type its arithmetic runs in: f16/bf16 compute in f32 and round back
after every op, so a fused chain gives bit-identical results to the same ops unfused."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import cube as cb


@dataclass(frozen=True, eq=False)
class DType:
    """One instance per type (the module's constants; copies and unpickling give the same
    object back), so equality and hashing are identity's, in C: dtypes key every dispatch
    plan and fused kernel, and a Python-level __hash__ or field-wise __eq__ cost ~0.15 us a
    call on the eager path."""

    name: str
    cube: object  # cube_ir Scalar
    category: int  # 0 bool, 1 int, 2 float: promotion goes up this order
    itemsize: int

    def __repr__(self) -> str:
        return f"dl.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    @property
    def is_float(self) -> bool:
        return self.category == 2

    @property
    def storage_np(self) -> np.dtype:
        return self.cube.np

    @property
    def compute(self) -> DType:
        """The type arithmetic runs in (f16/bf16 in f32)."""
        return float32 if self.name in ("float16", "bfloat16") else self


float16 = DType("float16", cb.f16, 2, 2)
bfloat16 = DType("bfloat16", cb.bf16, 2, 2)
float32 = DType("float32", cb.f32, 2, 4)
float64 = DType("float64", cb.f64, 2, 8)
int32 = DType("int32", cb.i32, 1, 4)
int64 = DType("int64", cb.i64, 1, 8)
bool_ = DType("bool", cb.bool_, 0, 1)

# internal: the RNG's u32 keys (not a tensor dtype)
uint32 = DType("uint32", cb.u32, 1, 4)

ALL = (float16, bfloat16, float32, float64, int32, int64, bool_)
_BY_NAME = {d.name: d for d in ALL} | {
    "f16": float16, "half": float16, "bf16": bfloat16, "f32": float32, "float": float32,
    "f64": float64, "double": float64, "i32": int32, "int": int64, "i64": int64,
    "long": int64, "bool_": bool_}
_FROM_NP = {np.dtype(np.float16): float16, np.dtype(np.float32): float32,
            np.dtype(np.float64): float64, np.dtype(np.int32): int32,
            np.dtype(np.int64): int64, np.dtype(np.bool_): bool_}
# NumPy types we accept on input by converting (no cube counterpart in the tensor layer)
_NP_WIDEN = {np.dtype(t): int64 for t in (np.int8, np.int16, np.uint8, np.uint16, np.uint32)}

default_float = float32


def get(d) -> DType:
    """A DType from a DType, a name ('float32', 'f16', ...), a NumPy dtype or a torch dtype."""
    if isinstance(d, DType):
        return d
    if d is None:
        return default_float
    if isinstance(d, str):
        try:
            return _BY_NAME[d]
        except KeyError:
            raise TypeError(f"unknown dtype '{d}' (known: "
                            f"{', '.join(x.name for x in ALL)})") from None
    if d is float:
        return float32
    if d is int:
        return int64
    if d is bool:
        return bool_
    mod = type(d).__module__
    if mod.startswith("torch"):  # torch.float32 -> 'float32'
        return get(str(d).removeprefix("torch."))
    try:
        nd = np.dtype(d)
    except TypeError:
        raise TypeError(f"not a dtype: {d!r}") from None
    return from_numpy(nd)


def from_numpy(nd) -> DType:
    nd = np.dtype(nd)
    if nd in _FROM_NP:
        return _FROM_NP[nd]
    if nd in _NP_WIDEN:
        return _NP_WIDEN[nd]
    raise TypeError(f"NumPy dtype {nd} has no tensor dtype (use one of "
                    f"{', '.join(x.name for x in ALL)})")


def _by_name(name: str) -> DType:
    return uint32 if name == "uint32" else _BY_NAME[name]


def index_dtype(device) -> DType:
    """The dtype of the indices an op returns on `device`: int64 as PyTorch's, int32 where
    the device has no 64-bit integers (WGSL, SPIR-V here)."""
    return int64 if getattr(device.rt.features, "int64", True) else int32


def promote(a: DType, b: DType) -> DType:
    """Two tensors: the higher category wins; within a category the wider type; f16 with
    bf16 gives f32 (as in PyTorch)."""
    if a is b:
        return a
    if a.category != b.category:
        return a if a.category > b.category else b
    if a.itemsize == b.itemsize:  # float16 with bfloat16
        return float32
    return a if a.itemsize > b.itemsize else b


def scalar_kind(x) -> int:
    """The category of a Python scalar (weak: it never widens a tensor of its category)."""
    if isinstance(x, bool | np.bool_):
        return 0
    if isinstance(x, int | np.integer):
        return 1
    return 2


def promote_scalar(t: DType, x) -> DType:
    """A tensor with a Python scalar: the tensor's type unless the scalar is of a higher
    category (int tensor * 0.5 -> the default float; bool tensor + 1 -> int64)."""
    k = scalar_kind(x)
    if k <= t.category:
        return t
    return default_float if k == 2 else int64

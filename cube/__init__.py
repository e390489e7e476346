"""cube: write GPU/CPU kernels as Python functions.

    from cube import cube, Array, Line, f32, ABSOLUTE_POS
    import cube as cb

    @cube(launch=True)
    def add(a: Array[Line[f32]], b: Array[Line[f32]], out: Array[Line[f32]]):
        i = ABSOLUTE_POS
        if i < out.len():
            out[i] = a[i] + b[i]

    rt = cb.runtime("cpu")
"""
from typing import TypeVar

from cube_ir.types import (
    bf16,
    boolean,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
)
from runtimes import __version__

from .errors import (
    BackendCompileError,
    CapabilityError,
    CompileError,
    CubeError,
    LaunchError,
    RuntimeUnavailable,
)
from .kernel import CubeFunction, cube
from .lang import (
    ABSOLUTE_POS,
    ABSOLUTE_POS_X,
    ABSOLUTE_POS_Y,
    ABSOLUTE_POS_Z,
    CUBE_COUNT,
    CUBE_COUNT_X,
    CUBE_COUNT_Y,
    CUBE_COUNT_Z,
    CUBE_DIM,
    CUBE_DIM_X,
    CUBE_DIM_Y,
    CUBE_DIM_Z,
    CUBE_POS,
    CUBE_POS_X,
    CUBE_POS_Y,
    CUBE_POS_Z,
    PLANE_DIM,
    UNIT_POS,
    UNIT_POS_PLANE,
    UNIT_POS_X,
    UNIT_POS_Y,
    UNIT_POS_Z,
    Array,
    Comptime,
    Line,
    LocalArray,
    SharedMemory,
    Tensor,
    abs,
    acos,
    acosh,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    atomic_add,
    atomic_and,
    atomic_cas,
    atomic_exchange,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_sub,
    atomic_xor,
    cast,
    ceil,
    clamp,
    comptime,
    copysign,
    cos,
    cosh,
    erf,
    exp,
    exp2,
    expm1,
    floor,
    fma,
    fmod,
    hypot,
    isfinite,
    isinf,
    isnan,
    log,
    log1p,
    log2,
    log10,
    max,
    min,
    plane_all,
    plane_any,
    plane_broadcast,
    plane_exclusive_prod,
    plane_exclusive_sum,
    plane_inclusive_prod,
    plane_inclusive_sum,
    plane_max,
    plane_min,
    plane_prod,
    plane_shuffle,
    plane_shuffle_xor,
    plane_sum,
    pow,
    range,
    round,
    rsqrt,
    select,
    sin,
    sinh,
    sqrt,
    sync_cube,
    tan,
    tanh,
    trunc,
)
from .targets import available_runtimes, runtime, targets_table

bool_ = boolean

__all__ = [n for n in dir() if not n.startswith("_")]

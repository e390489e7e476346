"""Host <-> device copies (NumPy is the host format; never used to compute tensor values)."""
from __future__ import annotations

import numpy as np

from runtimes.scalar_bits import bf16_bits_array

from .. import dtypes


def to_storage(arr: np.ndarray, dt: dtypes.DType) -> np.ndarray:
    """Host values converted to the storage layout of dt (bf16: round-to-nearest-even bits)."""
    if dt is dtypes.bfloat16:
        if arr.dtype == np.uint16:
            return arr
        return bf16_bits_array(arr)
    return np.asarray(arr, dt.storage_np)


def from_storage(arr: np.ndarray, dt: dtypes.DType) -> np.ndarray:
    """Storage values as a NumPy array a user can read (bf16 widens to float32)."""
    if dt is dtypes.bfloat16:
        return (arr.astype(np.uint32) << 16).view(np.float32)
    return arr

"""torch.nn.functional.one_hot: class indices to one-hot rows, composed of a broadcast
compare with arange (one fused kernel)."""
from __future__ import annotations

from cube import recording

from .. import dtypes
from ..ops import elementwise as ew
from ..ops.creation import arange
from ..ops.index import stack
from ..ops.reduce import amax, amin
from ..tensor import Tensor

__all__ = ["one_hot"]


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """A tensor of shape (*tensor.shape, num_classes) holding 1 where the last index equals
    tensor's value, else 0; int64 (int32 on devices without 64-bit integers), as
    torch.nn.functional.one_hot.

    num_classes -1: max(tensor) + 1 (an empty tensor is refused, as PyTorch). A negative
    class, or one >= num_classes, is a RuntimeError with PyTorch's message: the check reads
    the tensor's min and max back (one host synchronisation; skipped inside a capture when
    num_classes is given). Integer tensors only: int64 as PyTorch, and int32 too (dl's index
    dtype where a device has no int64); others are refused (DTypeError)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"one_hot: expected a tensor, got {type(tensor).__name__}")
    if tensor.dtype not in (dtypes.int64, dtypes.int32):
        raise ew.DTypeError(f"one_hot is only applicable to index tensor of type LongTensor "
                            f"(int64; int32 is taken too), got {tensor.dtype.name}")
    num_classes = int(num_classes)
    if num_classes == -1 and tensor.numel() == 0:
        raise RuntimeError("Can not infer total number of classes from empty tensor.")
    if num_classes != -1 and num_classes < 0:
        raise RuntimeError("Class values must be smaller than num_classes.")
    if tensor.numel() and (num_classes == -1 or recording.current() is None):
        lo, hi = (int(v) for v in stack([amin(tensor), amax(tensor)]).tolist())
        if lo < 0:
            raise RuntimeError("Class values must be non-negative.")
        if num_classes == -1:
            num_classes = hi + 1
        elif hi >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    out = dtypes.index_dtype(tensor.device)
    # arange computes integers in int64: without it the classes are float32 (exact: a
    # one-hot tensor of 2**24 classes is beyond such devices' memory)
    classes = arange(num_classes, dtype=tensor.dtype if out is dtypes.int64 else
                     dtypes.float32, device=tensor.device)
    return (tensor.unsqueeze(-1) == classes).to(out)

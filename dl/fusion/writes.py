"""In-place writes: what must happen before a tensor's storage is overwritten.

Two things read a storage later than the op that used it: a lazy tensor (computed when its
value is needed) and a gradient closure (run at `backward`). Both must see the values of
when they were made, as PyTorch's eager ops do. So every in-place writer (`assign`, the
indexing writers, the optimisers) calls `before_write` first, which

- computes the pending lazy tensors whose graphs read that storage (`y = x * 2; x[0] = 5`
  leaves y at the old x times two), and
- stamps the storage with a new write number: autograd compares it with the number current
  when an op recorded its gradient, and with the one when a tensor's history was last set
  (dl/autograd/overwrites.py), and refuses a backward that reads a storage written since.

Lazy tensors are found through `dl.tensor.PENDING` (weak references, pruned as it grows)."""
from __future__ import annotations

from .. import shapes
from ..tensor import Tensor, prune_pending
from .lazy import reads_storage as _reads
from .lazy import realise

# the number of the latest in-place write (a storage carries its own as `_written`)
count = [0]


def before_write(x: Tensor, keep: tuple = ()) -> None:
    """Call before overwriting materialised x's storage. keep: lazy values the write itself
    computes (they stay lazy to be fused into the write; their reads of x are the write's)."""
    before_writes([x._buf], keep)


def refuse_overlap(x: Tensor) -> None:
    """Refuse to write values that differ per element into a view whose elements share
    memory (an expanded dim), as PyTorch does: which of them would remain is not defined.
    (One value written everywhere, `fill_`, is well defined and allowed.)"""
    if shapes.overlapping(x.shape, x._strides):
        raise RuntimeError(
            f"an in-place write into a tensor of shape {x.shape} with strides {x._strides}: "
            f"several of its elements are one memory location (an expanded view); clone() "
            f"it first")


def compute_readers(bufs: list, keep: tuple = ()) -> None:
    """Computes the pending lazy tensors whose graphs read one of these storages (a buffer
    each), but those in keep."""
    ids = {id(b) for b in bufs}
    kept = {id(k) for k in keep}
    seen: set = set()
    hits = [t for t in prune_pending() if id(t) not in kept and _reads(t._node, ids, seen)]
    if hits:
        realise(hits)


def before_writes(bufs: list, keep: tuple = ()) -> None:
    """`before_write` for several storages (a buffer each) at once."""
    compute_readers(bufs, keep)
    count[0] += 1
    for b in bufs:
        b._written = count[0]


def written_since(t, at: int) -> bool:
    """Whether t's storage was written in place after write number `at`."""
    b = t._buf
    return b is not None and b.__dict__.get("_written", 0) > at

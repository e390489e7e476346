"""Shape arithmetic shared by views, broadcasting and kernels (no memory, no kernels)."""
from __future__ import annotations

import math


def numel(shape) -> int:
    return math.prod(shape)


_STRIDES: dict = {}  # shape -> its row-major strides (every new tensor asks)


def contiguous_strides(shape) -> tuple:
    st = _STRIDES.get(shape)
    if st is not None:
        return st
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(s, 1)
    st = tuple(reversed(out))
    if type(shape) is tuple:
        if len(_STRIDES) > 4096:
            _STRIDES.clear()
        _STRIDES[shape] = st
    return st


def is_contiguous(shape, strides) -> bool:
    """Row-major up to dims of size 1 (whose stride never matters)."""
    acc = 1
    for s, st in zip(reversed(shape), reversed(strides)):
        if s != 1 and st != acc:
            return False
        acc *= s
    return True


def overlapping(shape, strides) -> bool:
    """Whether several elements of a view share memory (a broadcast dim: stride 0, size > 1),
    so that an in-place write of values that differ per element would race. An empty view
    has no elements to share (`x.expand(0, 3).exp_()`: as torch's, no error)."""
    return 0 not in shape and any(st == 0 and n > 1 for n, st in zip(shape, strides))


_BROADCAST: dict = {}  # shapes -> their broadcast shape (eager ops repeat a few pairs)


def broadcast_shapes(*shapes) -> tuple:
    """NumPy broadcasting; the error names every shape and the dimension that clashes."""
    n = len(shapes)
    if n == 1 or n == 2 and shapes[0] == shapes[1]:  # the common case: no broadcasting
        return tuple(shapes[0])
    try:
        hit = _BROADCAST.get(shapes)
    except TypeError:  # a list among them
        return _broadcast(shapes)
    if hit is None:
        hit = _broadcast(shapes)
        if len(_BROADCAST) > 4096:
            _BROADCAST.clear()
        _BROADCAST[shapes] = hit
    return hit


def _broadcast(shapes) -> tuple:
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(-rank, 0):
        size = 1
        for s in shapes:
            if len(s) >= -d:
                n = s[d]
                if n != 1:
                    if size not in (1, n):
                        raise ValueError(
                            f"shapes {' and '.join(str(tuple(x)) for x in shapes)} cannot be "
                            f"broadcast: dimension {d} is {size} in one and {n} in another")
                    size = n
        out.append(size)
    return tuple(out)


def broadcast_strides(shape, strides, target) -> tuple:
    """Strides that read a tensor of `shape` broadcast to `target` (0 where it repeats)."""
    pad = len(target) - len(shape)
    out = [0] * pad
    for s, st, t in zip(shape, strides, target[pad:]):
        out.append(0 if s == 1 and t != 1 else st)
    return tuple(out)


def coalesce(shape, strides_list) -> tuple:
    """(shape, strides_list) with size-1 dims dropped and neighbouring dims merged wherever
    every operand steps through them as one (stride[d] == stride[d+1] * shape[d+1]): the
    same elements in the same row-major order, with less index arithmetic per element (a
    per-channel operand of an (N, C, H, W) graph becomes (N, C, H*W))."""
    keep = [d for d, n in enumerate(shape) if n != 1]
    out_shape: list = []
    out_strides: list[list] = [[] for _ in strides_list]
    for d in keep:
        if out_shape and all(st[-1] == s[d] * shape[d]
                             for st, s in zip(out_strides, strides_list, strict=True)):
            out_shape[-1] *= shape[d]
            for st, s in zip(out_strides, strides_list, strict=True):
                st[-1] = s[d]
        else:
            out_shape.append(shape[d])
            for st, s in zip(out_strides, strides_list, strict=True):
                st.append(s[d])
    if not out_shape:
        return (1,), [(0,) for _ in strides_list]
    return tuple(out_shape), [tuple(st) for st in out_strides]


def empty_dims(dim) -> bool:
    """dim is () or []: PyTorch's reductions take it as every dim (any/all as none)."""
    return dim.__class__ in (tuple, list) and not dim


def norm_dim(d: int, rank: int, what: str = "dim") -> int:
    if not -max(rank, 1) <= d < max(rank, 1):
        raise IndexError(f"{what} {d} is out of range for a tensor of rank {rank}")
    return d % max(rank, 1)


def infer_shape(shape, n: int) -> tuple:
    """Resolve one -1 in a reshape target."""
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise ValueError(f"only one dimension can be -1, got {shape}")
    if -1 in shape:
        rest = numel(s for s in shape if s != -1)
        if rest == 0 or n % rest:
            raise ValueError(f"cannot reshape {n} elements into {shape}")
        shape = tuple(n // rest if s == -1 else s for s in shape)
    if numel(shape) != n:
        raise ValueError(f"cannot reshape a tensor of {n} elements into shape {shape}")
    return shape


def view_strides(shape, strides, new_shape):
    """Strides for viewing (shape, strides) as new_shape without a copy, or None when the
    memory layout does not allow it (PyTorch's rule: each group of new dims must map onto a
    run of old dims that is contiguous within itself)."""
    if numel(shape) == 0 or not shape:
        return contiguous_strides(new_shape)
    old = [(s, st) for s, st in zip(shape, strides) if s != 1]
    new = list(new_shape)
    out = [0] * len(new)
    oi, ni = 0, 0
    while ni < len(new):
        if new[ni] == 1:
            out[ni] = 1
            ni += 1
            continue
        if oi >= len(old):
            return None
        # take old dims until their product reaches the product of new dims
        o_prod = old[oi][0]
        n_prod, n_start = new[ni], ni
        while o_prod != n_prod:
            if o_prod < n_prod:
                oi += 1
                if oi >= len(old):
                    return None
                if old[oi - 1][1] != old[oi][0] * old[oi][1]:
                    return None  # the old dims of this group are not contiguous together
                o_prod *= old[oi][0]
            else:
                ni += 1
                while ni < len(new) and new[ni] == 1:
                    ni += 1
                if ni >= len(new):
                    return None
                n_prod *= new[ni]
        # the group's innermost stride; new dims laid out row-major over it
        acc = old[oi][1]
        for k in range(ni, n_start - 1, -1):
            out[k] = acc if new[k] != 1 else 1
            acc *= new[k]
        oi += 1
        ni += 1
    if oi != len(old):
        return None
    return tuple(out)

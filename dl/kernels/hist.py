"""Searching and counting: searchsorted (a binary search per value), bincount and histc
(one unit per element, atomic adds into the bins)."""
from __future__ import annotations

import typing

import cube as cb
from cube import ABSOLUTE_POS, Array, Comptime, Tensor, cube, i32, u32

from .launch import cube_count

F = typing.TypeVar("F")
W = typing.TypeVar("W")
I = typing.TypeVar("I")  # noqa: E741 - the index type variable


@cube(launch=True)
def searchsorted_kernel(seq: Tensor[F], vals: Tensor[F], out: Tensor[I], RIGHT: Comptime[bool],
                        SHARED: Comptime[bool]):
    """seq: (rows or 1, m) ascending; vals, out: (rows, k). One unit per value: the first
    position whose entry is >= the value (RIGHT: > it), PyTorch's binary search step for
    step (so nan in either place gives its answers: a nan value goes to the end)."""
    p = ABSOLUTE_POS
    k = vals.shape(1)
    r = p // k
    c = p % k
    if r < vals.shape(0):
        v = vals[r * vals.stride(0) + c * vals.stride(1)]
        sr = r
        if SHARED:
            sr = u32(0)
        base = sr * seq.stride(0)
        lo = u32(0)
        hi = seq.shape(1)
        while lo < hi:
            mid = (lo + hi) // 2
            s = seq[base + mid * seq.stride(1)]
            go = not (s >= v)
            if RIGHT:
                go = not (s > v)
            if go:
                lo = mid + 1
            else:
                hi = mid
        out[r * out.stride(0) + c * out.stride(1)] = I(lo)


@cube(launch=True)
def bincount_kernel(x: Array[i32], w: Array[W], bins: Array[W], WEIGHTED: Comptime[bool]):
    i = ABSOLUTE_POS
    if i < x.len():
        b = u32(x[i])
        if WEIGHTED:
            cb.atomic_add(bins, b, w[i])
        else:
            cb.atomic_add(bins, b, W(1))


@cube(launch=True)
def histc_kernel(x: Array[F], bins: Array[i32], lo: F, hi: F):
    i = ABSOLUTE_POS
    if i < x.len():
        v = x[i]
        if v >= lo and v <= hi:
            nb = bins.len()
            b = u32((v - lo) * F(nb) / (hi - lo))
            if b >= nb:
                b = nb - 1
            cb.atomic_add(bins, b, 1)


def searchsorted(rt, seq, vals, out, right: bool, shared: bool):
    seq, vals, out = seq.buffer, vals.buffer, out.buffer
    n = vals.shape[0] * vals.shape[1]
    if n:
        searchsorted_kernel.launch(rt, cube_count=cube_count(n, 128), cube_dim=128, seq=seq,
                                   vals=vals, out=out, RIGHT=bool(right), SHARED=bool(shared))
    return out


def bincount(rt, x, w, bins):
    """bins[x[i]] += w[i] (or 1 without w); x: int32 values, all < len(bins)."""
    x, bins = x.buffer, bins.buffer
    n = x.size
    if n:
        bincount_kernel.launch(rt, cube_count=cube_count(n, 256), cube_dim=256, x=x,
                               w=bins if w is None else w.buffer, bins=bins,
                               WEIGHTED=w is not None)
    return bins


def histc(rt, x, bins, lo: float, hi: float):
    """bins (int32, zeros) += counts of x's values in len(bins) equal bins over [lo, hi]."""
    x, bins = x.buffer, bins.buffer
    n = x.size
    if n:
        histc_kernel.launch(rt, cube_count=cube_count(n, 256), cube_dim=256, x=x, bins=bins,
                            lo=float(lo), hi=float(hi))
    return bins


# the specialisations `cube check dl.kernels.hist` builds (docs/check.md)
CUBE_CHECK = {
    searchsorted_kernel: [dict(type={"F": cb.f32, "I": cb.i32},
                               comptime={"RIGHT": True, "SHARED": False}),
                          dict(type={"F": cb.f64, "I": cb.i64},
                               comptime={"RIGHT": False, "SHARED": True})],
    bincount_kernel: [dict(type={"W": cb.i32}, comptime={"WEIGHTED": False}),
                      dict(type={"W": cb.f32}, comptime={"WEIGHTED": True})],
    histc_kernel: [dict(type={"F": cb.f32}), dict(type={"F": cb.f64})],
}

"""Entries for scans, sorting and selection (dl/ops/sorting.py): cumsum, cumprod,
logcumsumexp, sort, argsort, topk, kthvalue, median, unique, searchsorted, bincount, histc.

Indices are int64, int32 on devices without 64-bit ints (wgpu; the runner accepts that and
hands int64 sample arrays over as int32 there); `_checked` and `_index` check the index dtype
per device and the named results. torch's sort is
unstable: samples with ties pass stable=True (dl's sort is always stable); topk, kthvalue and
median take rows of distinct values (`distinct`), so their indices are torch's. Rows of
1024+ elements take the multi-block scan and the multi-pass sort on every runtime.
Integer dtypes under test turn the float samples into integers (the runner's rule)."""
from __future__ import annotations

import numpy as np
import torch

import dl

from .core import ALL, ALL_FLOATS, FLOATS, INTS, OpInfo, Sample, arr, edge_values, iarr

SCAN_TOL = {dl.float32: (1e-4, 1e-5), dl.float64: (1e-10, 1e-11), dl.float16: (4e-3, 4e-3),
            dl.bfloat16: (3e-2, 3e-2)}
# ops whose forward and gradient are library kernels only (no elementwise graph to fuse)
LIB = dict(fusion_modes=(True,))
NO_BF16 = (dl.float32, dl.float64, dl.float16)  # odd integers up to 2048 are exact
# integer entries: int arrays keep their dtype; the kernels are the float ones specialised
INT_SKIP = dict(opencl="the float kernels specialised: interp, cpu and wgpu cover them")


def _want_index(x):
    return dl.int64 if getattr(x.device.rt.features, "int64", True) else dl.int32


def _checked(out, x):
    """out's values in x's dtype and indices int64 (int32 without 64-bit ints); returns out."""
    vals, idx = out
    assert vals.dtype is x.dtype, f"values: {vals.dtype}, want {x.dtype}"
    assert idx.dtype is _want_index(x), f"indices: {idx.dtype}, want {_want_index(x)}"
    assert out.values is vals and out.indices is idx
    return out


def _index(t, x):
    assert t.dtype is _want_index(x), f"indices: {t.dtype}, want {_want_index(x)}"
    return t


def _unique(x, **kw):
    out = dl.unique(x, **kw)
    outs = out if isinstance(out, tuple) else (out,)
    assert outs[0].dtype is x.dtype
    for t in outs[1:]:
        _index(t, x)
    return out


def _ties(shape, seed=0, k=4):
    """Floats with many ties (small integers)."""
    return np.random.default_rng(seed).integers(0, k, shape).astype(np.float64)


def distinct(shape, seed=0):
    """Rows of distinct odd integers in [-n, n] (as floats): no ties in any dtype holding them,
    none with the integers the runner makes of nan and inf (0, +-100)."""
    rng = np.random.default_rng(seed)
    n = shape[-1]
    rows = [2 * (rng.permutation(n) - n // 2) + 1 for _ in range(int(np.prod(shape[:-1])))]
    return np.asarray(rows, np.float64).reshape(shape)


def dint(shape, seed=0, dtype=np.int64):
    """`distinct` as an integer array (kept by the runner: the range is not clipped)."""
    return distinct(shape, seed).astype(dtype)


def _with_zeros():
    """Rows with no zero, one zero, two zeros and a leading zero (cumprod's gradient)."""
    a = arr((4, 9), 3, 0.5, 1.5)
    a[1, 4] = 0.0
    a[2, 2] = 0.0
    a[2, 6] = 0.0
    a[3, 0] = 0.0
    return a


def _nan_rows(a):
    a = a.copy()
    a[0, 1] = np.nan
    a[-1, -1] = np.nan
    a[-1, 0] = np.inf
    return a


def _tdt(name):
    return None if name is None else getattr(torch, name)


def _sorted_seq(n, seed=5):
    return np.sort(arr((n,), seed, -3, 3))


def _queries():
    s = _sorted_seq(40)
    q = arr((3, 13), 6, -3.5, 3.5)
    q[0, :5] = s[[0, 3, 3, 17, 39]]  # equal to entries: left and right differ
    return q


def _scan_samples():
    return [
        Sample(arr((2, 2500)), 1, desc="long rows: multi-block scan"),
        Sample(arr((5, 37), 1), 0, noncontig=True, desc="non-contiguous, dim 0"),
        Sample(arr((3, 1030), 2), -1, desc="just over one tile"),
        Sample(arr((40, 7), 3), 1, desc="many short rows"),
        Sample(arr((2, 3, 5), 4), 1, desc="middle dim"),
        Sample(arr((0, 4)), 1, desc="size 0"),
        Sample(arr((4, 0)), 1, desc="empty rows"),
        Sample(arr((1, 1)), 0, desc="size 1"),
        Sample(arr(()), 0, desc="0-d"),
    ]


OPS = [
    OpInfo("cumsum", op=lambda x, d, dtype=None: dl.cumsum(x, d, dtype=dtype),
           ref=lambda x, d, dtype=None: torch.cumsum(x, d, dtype=_tdt(dtype)),
           samples=lambda: _scan_samples() + [
               Sample(edge_values(), 0, desc="inf, nan, -0.0"),
               Sample(_ties((3, 6)), 1, dtype="float32", desc="dtype= (exact values)",
                      grad=()),
               # a dtype given is the result's, integer too (int64 input, int32 out)
               Sample(np.array([[2 ** 31 - 5, 3, 4], [1, 2, 3]]), 1, dtype="int32",
                      desc="dtype=int32 of int64 (wraps as PyTorch's)"),
           ], dtypes=ALL, tol=SCAN_TOL),
    OpInfo("cumprod", op=lambda x, d: dl.cumprod(x, d), ref=lambda x, d: torch.cumprod(x, d),
           samples=lambda: [
               Sample(_with_zeros(), 1, desc="zeros: the gradient"),
               Sample(arr((2, 2100), 2, 0.9, 1.1), 1, desc="long rows: multi-block scan",
                      grad=()),
               Sample(arr((6, 5), 1), 0, noncontig=True, desc="non-contiguous, dim 0"),
               Sample(arr((0, 4)), 1, desc="size 0"),
               Sample(arr((1, 1)), 0, desc="size 1"),
               Sample(edge_values(), 0, desc="inf, nan, -0.0", grad=()),
           ], dtypes=ALL, tol=SCAN_TOL),
    OpInfo("logcumsumexp", op=lambda x, d: dl.logcumsumexp(x, d),
           ref=lambda x, d: torch.logcumsumexp(x, d),
           samples=lambda: [
               Sample(arr((2, 2500), 0, -30, 30), 1, desc="long rows: multi-block scan"),
               Sample(np.array([[-np.inf, -np.inf, 0.0, np.inf, 1.0, np.inf],
                                [np.nan, 0.0, 1.0, -np.inf, 2.0, -1.0]]), 1,
                      desc="inf, -inf, nan", grad=()),
               Sample(arr((5, 37), 1), 0, noncontig=True, desc="non-contiguous, dim 0"),
               Sample(arr((40, 7), 3), 1, desc="many short rows"),
               Sample(arr((0, 4)), 1, desc="size 0"),
               Sample(arr((1, 1)), 0, desc="size 1"),
           ], dtypes=ALL_FLOATS, tol=SCAN_TOL),
    OpInfo("sort", op=lambda x, d=-1, descending=False: _checked(
               dl.sort(x, d, descending=descending, stable=True), x),
           ref=lambda x, d=-1, descending=False: torch.sort(x, dim=d, descending=descending,
                                                            stable=True),
           samples=lambda: [
               Sample(_nan_rows(arr((3, 1500))), -1, desc="long rows: multi-pass bitonic sort"),
               Sample(edge_values(), 0, descending=True, desc="nan, inf, -0.0, ties, descending"),
               Sample(edge_values(), 0, desc="nan, inf, -0.0 and ties"),
               Sample(_ties((6, 33), 1), 0, noncontig=True, descending=True,
                      desc="ties, non-contiguous, dim 0, descending"),
               Sample(_nan_rows(arr((4, 100), 2)), 1, desc="nan, 100 (not a power of two)"),
               Sample(_ties((2, 1100), 3, 50), 1, descending=True, desc="long rows with ties"),
               Sample(arr((2, 3, 5), 4), 1, desc="middle dim"),
               Sample(arr((0, 4)), 1, desc="size 0"),
               Sample(arr((4, 1)), 1, desc="size 1"),
               Sample(arr(()), 0, desc="0-d"),
           ], dtypes=ALL, **LIB),
    OpInfo("sort_unstable", op=lambda x, d=-1, descending=False: _checked(
               x.sort(d, descending), x),
           ref=lambda x, d=-1, descending=False: torch.sort(x, d, descending),
           samples=lambda: [Sample(arr((5, 77)), 1, descending=True, desc="default: no ties"),
                            Sample(arr((6, 9), 1), 0, noncontig=True)],
           note="dl's sort is always stable (stable=False included)", **LIB),
    OpInfo("argsort", op=lambda x, d=-1, descending=False: _index(
               dl.argsort(x, d, descending=descending, stable=True), x),
           ref=lambda x, d=-1, descending=False: torch.argsort(x, dim=d, descending=descending,
                                                               stable=True),
           samples=lambda: [
               Sample(_ties((2, 1300), 1, 30), 1, desc="ties, long rows"),
               Sample(arr((7, 6), 1), 0, noncontig=True, descending=True),
               Sample(edge_values(), 0, desc="nan, inf, -0.0"),
               Sample(arr((0, 3)), 1, desc="size 0"),
           ], dtypes=ALL, grad=False, **LIB),
    OpInfo("topk", op=lambda x, k, d=-1, largest=True: _checked(
               dl.topk(x, k, d, largest=largest), x),
           ref=lambda x, k, d=-1, largest=True: torch.topk(x, k, d, largest=largest),
           samples=lambda: [
               Sample(_nan_rows(distinct((3, 1500))), 7, -1, desc="long rows, nan largest"),
               Sample(distinct((9, 6), 1).T, 3, 0, largest=False, noncontig=True,
                      desc="smallest, non-contiguous, dim 0"),
               Sample(_nan_rows(distinct((3, 50), 2)), 4, 1, largest=False,
                      desc="smallest with nan"),
               Sample(distinct((4, 5), 3), 0, 1, desc="k = 0"),
               Sample(distinct((4, 5), 3), 5, 1, desc="k = n"),
               Sample(arr((1, 1)), 1, 0, desc="size 1"),
               Sample(arr((0, 4)), 2, 1, desc="size 0"),
           ], dtypes=NO_BF16, note="sorted=False returns sorted values", **LIB),
    OpInfo("kthvalue", op=lambda x, k, d=-1, keepdim=False: _checked(
               dl.kthvalue(x, k, d, keepdim), x),
           ref=lambda x, k, d=-1, keepdim=False: torch.kthvalue(x, k, d, keepdim),
           samples=lambda: [
               Sample(distinct((3, 1501)), 700, 1, desc="long rows"),
               Sample(distinct((7, 5), 1).T, 3, 0, keepdim=True, noncontig=True,
                      desc="keepdim, non-contiguous, dim 0"),
               Sample(_nan_rows(distinct((3, 10), 2)), 10, 1, desc="k = n with nan"),
               Sample(arr((4, 1)), 1, 1, desc="size 1"),
               Sample(arr(()), 1, 0, desc="0-d"),
           ], dtypes=NO_BF16, **LIB),
    OpInfo("median", op=lambda x, d, keepdim=False: _checked(dl.median(x, d, keepdim), x),
           ref=lambda x, d, keepdim=False: torch.median(x, d, keepdim),
           samples=lambda: [
               Sample(_nan_rows(distinct((4, 1200), 1)), 1,
                      desc="long rows; nan rows give nan at the first nan"),
               Sample(distinct((6, 8), 1).T, 0, keepdim=True, noncontig=True,
                      desc="even length: the lower median"),
               Sample(distinct((5, 7), 2), 1, desc="odd length"),
               Sample(arr((4, 1)), 1, desc="size 1"),
           ], dtypes=NO_BF16),
    OpInfo("topk_int", op=lambda x, k, d=-1, largest=True: _checked(
               dl.topk(x, k, d, largest=largest), x),
           ref=lambda x, k, d=-1, largest=True: torch.topk(x, k, d, largest=largest),
           samples=lambda: [Sample(dint((3, 1500)), 7, -1, desc="int64, long rows"),
                            Sample(dint((5, 33), 1, np.int32), 4, 1, largest=False,
                                   desc="int32")],
           dtypes=(dl.int64,), grad=False, skip=INT_SKIP, **LIB),
    OpInfo("kthvalue_int", op=lambda x, k, d=-1: _checked(dl.kthvalue(x, k, d), x),
           ref=lambda x, k, d=-1: torch.kthvalue(x, k, d),
           samples=lambda: [Sample(dint((3, 1501)), 9, 1, desc="int64, long rows"),
                            Sample(dint((7, 5), 1, np.int32).T, 3, 0, desc="int32, dim 0")],
           dtypes=(dl.int64,), grad=False, skip=INT_SKIP, **LIB),
    OpInfo("median_int", op=lambda x, d: _checked(dl.median(x, d), x),
           ref=lambda x, d: torch.median(x, d),
           samples=lambda: [Sample(dint((3, 1200)), 1, desc="int64, long rows"),
                            Sample(dint((6, 8), 1, np.int32).T, 0, desc="int32, dim 0")],
           dtypes=(dl.int64,), grad=False, skip=INT_SKIP, **LIB),
    OpInfo("median_all", op=lambda x: dl.median(x), ref=lambda x: torch.median(x),
           samples=lambda: [
               Sample(distinct((30, 41))), Sample(arr((6, 8), 1), noncontig=True),
               Sample(_nan_rows(arr((3, 4), 2)), desc="nan: the gradient shared by the nans"),
               Sample(_ties((5, 6), 3), desc="ties: the gradient shared by the ties"),
           ], dtypes=NO_BF16),
    OpInfo("unique", op=_unique, ref=lambda x, **kw: torch.unique(x, **kw),
           samples=lambda: [
               Sample(_ties((5, 40), 1, 9), return_inverse=True, return_counts=True,
                      desc="inverse and counts"),
               Sample(_ties((3, 7), 2, 5) * 0.5 - 1, return_counts=True, noncontig=True),
               Sample(np.array([1.0, -0.0, 0.0, np.inf, -np.inf, 1.0]), desc="edges"),
               Sample(arr((0, 3)), return_inverse=True, desc="size 0"),
           ], dtypes=ALL, grad=False,
           note="host-side; always sorted; dim must be None", **LIB),
    OpInfo("searchsorted", op=lambda s, v, **kw: _index(dl.searchsorted(s, v, **kw), s),
           ref=lambda s, v, **kw: torch.searchsorted(s, v, **kw),
           samples=lambda: [
               Sample(_sorted_seq(40), _queries(), desc="1-d sequence, ties with entries"),
               Sample(np.sort(arr((3, 17), 7), -1), _queries(), side="right",
                      desc="a sequence per row, side='right'"),
               Sample(_sorted_seq(40), _queries(), right=True, desc="right"),
               Sample(np.sort(arr((3, 17), 7), -1), _queries(), desc="a sequence per row"),
               Sample(np.array([0.0, 1.0, 2.0, np.inf, np.nan]),
                      np.array([np.nan, np.inf, -np.inf, 1.0, 5.0]), desc="nan, inf"),
               Sample(_sorted_seq(5), arr((0,)), desc="no values"),
           ], dtypes=FLOATS + INTS, grad=False, **LIB),
    OpInfo("searchsorted_sorter", op=lambda s, v, sorter, **kw: dl.searchsorted(
               s, v, sorter=sorter, **kw),
           ref=lambda s, v, sorter, **kw: torch.searchsorted(s, v, sorter=sorter, **kw),
           samples=lambda: [
               Sample(arr((25,), 8), _queries(), np.argsort(arr((25,), 8)), desc="sorter"),
               Sample(arr((25,), 8), _queries(), np.argsort(arr((25,), 8)), right=True,
                      out_int32=True, desc="right, out_int32"),
           ], grad=False, **LIB),
    OpInfo("bincount", op=lambda x, w=None, **kw: dl.bincount(x, w, **kw),
           ref=lambda x, w=None, **kw: torch.bincount(x, w, **kw),
           samples=lambda: [
               Sample(iarr((500,), 37), arr((500,), 1, 0, 1), desc="weights"),
               Sample(iarr((100,), 12, 2), minlength=20, desc="counts, minlength"),
               Sample(iarr((0,), 3), minlength=4, desc="empty, minlength"),
               Sample(iarr((0,), 3), desc="empty"),
           ], grad=False, tol={dl.float32: (1e-5, 1e-5)},
           note="float sums by atomics: the order varies", **LIB),
    OpInfo("bincount_int_weights", op=lambda x, w: dl.bincount(x, w),
           ref=lambda x, w: torch.bincount(x, w),
           samples=lambda: [Sample(iarr((50,), 5, 3), arr((50,), 4, -3, 3))],
           dtypes=INTS, grad=False, skip={r: "int weights give float64, which the device lacks"
                                          for r in ("wgpu", "wgpu-spirv", "metal")}, **LIB),
    OpInfo("histc", op=lambda x, *a, **kw: dl.histc(x, *a, **kw),
           ref=lambda x, *a, **kw: torch.histc(x, *a, **kw),
           samples=lambda: [
               Sample(arr((1000,)), 10, desc="data range"),
               Sample(arr((7, 30), 1), bins=6, min=-1, max=1.5, noncontig=True,
                      desc="explicit range: outside values dropped"),
               Sample(np.array([0.0, 0.25, 0.5, 1.0, np.nan, 2.0, -1.0, 1.0]), 4, 0, 1,
                      desc="the max in the last bin, nan dropped"),
               Sample(np.full((5,), 3.0), 4, desc="all equal: widened by 1"),
               Sample(arr((0,)), 3, 0, 1, desc="size 0"),
           ], grad=False, **LIB),
]

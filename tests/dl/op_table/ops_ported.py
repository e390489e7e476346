"""Entries for the torch functions added for ported PyTorch code (each composed of existing dl
ops): one_hot, normalize, cosine_similarity, pairwise_distance, softmin, ...

Integer samples that must run on the wgpu runtimes use int32 arrays (no int64 there);
int64 index arrays arrive there as int32, and int64 results may come back as int32."""
from __future__ import annotations

import warnings

import numpy as np
import torch
import torch.nn.functional as TF

import dl
import dl.nn.functional as F

from .core import ALL_FLOATS, FLOATS, OpInfo, Sample, arr, barr, edge_values, iarr, ties
from .ops_math import _binary_samples, _t, _unary_samples

I32 = np.int32
INF, NAN = float("inf"), float("nan")
EDGE = edge_values()
_FINITE = "WGSL and Vulkan may assume finite floats (infinities and nan among the samples)"
SHADER_FINITE = {"wgpu": _FINITE, "wgpu-spirv": _FINITE}
NO_I64_SUM = "integer sums accumulate in int64 (as torch's), which the wgpu runtimes lack"


def _dt(lib, kw: dict) -> dict:
    """A dtype given by name in a sample, as lib's dtype."""
    return {k: getattr(lib, v) if k == "dtype" else v for k, v in kw.items()}


def _warned(fn, *args):
    """fn(*args), which must warn (the implicit softmax dim)."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = fn(*args)
    assert any("Implicit dimension" in str(m.message) for m in w), [str(m.message) for m in w]
    return y


def _nans(shape, seed=0, p=0.3):
    """Random values with about a share p of nan."""
    return np.where(barr(shape, seed + 5, p), NAN, arr(shape, seed))


def _zeros(shape, seed=0):
    """Random values with about a third of zeros."""
    return np.where(barr(shape, seed + 5, 0.33), 0.0, arr(shape, seed))


def _zero_rows(shape, seed=0):
    """Random values with the first row all zeros (a zero norm: eps clamps it)."""
    a = arr(shape, seed)
    a[0] = 0.0
    return a


OPS = [
    # ---- nn.functional: encodings and distances ----------------------------------------
    # dl takes int32 indices too (torch: int64 only; the reference casts them)
    OpInfo("one_hot", op=lambda t, *a: F.one_hot(t, *a),
           ref=lambda t, *a: TF.one_hot(t.long(), *a), grad=False, dtypes=(dl.float32,),
           samples=lambda: [Sample(iarr((3, 4), 5), 5, desc="num_classes given"),
                            Sample(iarr((7,), 6, 1), desc="inferred (max + 1)"),
                            Sample(np.array(2, np.int64), 4, desc="0-d"),
                            Sample(iarr((0, 2), 3), 3, desc="size 0"),
                            Sample(iarr((2, 3), 4, 2).astype(np.int32) * 0 + 3, 4,
                                   desc="int32, last class")]),
    OpInfo("normalize", op=lambda x, *a, **k: F.normalize(x, *a, **k),
           ref=lambda x, *a, **k: TF.normalize(x, *a, **k), dtypes=ALL_FLOATS,
           samples=lambda: [Sample(arr((3, 4)), desc="p 2 dim 1"),
                            Sample(arr((4, 3), 1), 1.0, 0, noncontig=True, desc="p 1 dim 0"),
                            Sample(_zero_rows((3, 4), 2), dim=-1, desc="zero row (eps)"),
                            Sample(arr((2, 3, 2), 3), 3.0, -2, desc="p 3, 3-d"),
                            Sample(arr((5,), 4), dim=0, eps=0.5, desc="1-d, big eps"),
                            Sample(arr((0, 3)), desc="size 0")]),
    OpInfo("cosine_similarity", op=lambda a, b, *r, **k: F.cosine_similarity(a, b, *r, **k),
           ref=lambda a, b, *r, **k: TF.cosine_similarity(a, b, *r, **k),
           samples=lambda: [Sample(arr((3, 4)), arr((3, 4), 1), desc="dim 1"),
                            Sample(arr((2, 1, 4), 2), arr((3, 4), 3), dim=-1,
                                   desc="broadcast, dim -1"),
                            Sample(arr((4, 3), 4), _zero_rows((4, 3), 5), 0,
                                   desc="a zero vector (eps)"),
                            Sample(arr((3, 4), 6) * 1e-10, arr((3, 4), 7), eps=1e-6,
                                   desc="norm below eps"),
                            Sample(arr((3, 4), 8), iarr((3, 4), 5, 9), desc="int operand"),
                            Sample(arr((0, 3)), arr((0, 3), 1), desc="size 0")]),
    OpInfo("pairwise_distance", op=lambda a, b, *r, **k: F.pairwise_distance(a, b, *r, **k),
           ref=lambda a, b, *r, **k: TF.pairwise_distance(a, b, *r, **k),
           samples=lambda: [Sample(arr((3, 4)), arr((3, 4), 1), desc="p 2"),
                            Sample(arr((3, 4), 2), arr((4,), 3), 1.0, keepdim=True,
                                   desc="broadcast, p 1, keepdim"),
                            Sample(arr((2, 3), 4), arr((2, 3), 5), float("inf"), desc="p inf"),
                            Sample(arr((2, 3), 6), arr((2, 3), 7), -1.0, desc="p -1"),
                            Sample(np.array(1.5), np.array(-0.5), desc="0-d"),
                            Sample(arr((2, 3), 8), arr((2, 3), 8), desc="equal (eps only)")]),
    OpInfo("softmin", op=lambda x, *a, **k: F.softmin(x, *a, **_dt(dl, k)),
           ref=lambda x, *a, **k: TF.softmin(x, *a, **_dt(torch, k)), dtypes=FLOATS,
           samples=lambda: [Sample(arr((3, 5)), 1), Sample(arr((2, 3, 4), 1), -1),
                            Sample(arr((4,), 2), 0, dtype="float64", desc="dtype"),
                            Sample(arr((0, 3)), 1, desc="size 0")]),
    OpInfo("softmin_implicit_dim", op=lambda x: _warned(F.softmin, x),
           ref=lambda x: _warned(TF.softmin, x),
           samples=lambda: [Sample(arr((3, 4))), Sample(arr((2, 3, 4), 1))]),
    # ---- dims and diagonals ---------------------------------------------------------------
    OpInfo("movedim", op=lambda x, s, d: dl.movedim(x, s, d),
           ref=lambda x, s, d: torch.movedim(x, s, d), dtypes=ALL_FLOATS,
           samples=lambda: [Sample(arr((2, 3, 4)), 0, -1, desc="int dims, negative"),
                            Sample(arr((2, 3, 4, 2), 1), (0, 1), (2, 0), desc="tuples"),
                            Sample(arr((3, 4), 2), [1], [0], noncontig=True,
                                   desc="lists, noncontig"),
                            Sample(arr((0, 3)), 0, 1, desc="size 0"),
                            Sample(np.array(1.5), 0, -1, desc="0-d")]),
    OpInfo("moveaxis_method", op=lambda x, s, d: x.moveaxis(s, d),
           ref=lambda x, s, d: x.moveaxis(s, d),
           samples=lambda: [Sample(arr((2, 3, 4)), (2, 0), (0, 1))]),
    OpInfo("diagonal", op=lambda x, *a, **k: dl.diagonal(x, *a, **k),
           ref=lambda x, *a, **k: torch.diagonal(x, *a, **k), dtypes=ALL_FLOATS,
           samples=lambda: [Sample(arr((4, 4))),
                            Sample(arr((3, 5), 1), 1, desc="offset 1, wide"),
                            Sample(arr((5, 3), 2), -2, noncontig=True, desc="offset -2"),
                            Sample(arr((2, 3, 4), 3), 1, 2, 0, desc="dims (2, 0), 3-d"),
                            Sample(arr((2, 3, 4), 4), dim1=-1, dim2=-2, desc="negative dims"),
                            Sample(arr((2, 3), 5), 5, desc="off the matrix: empty"),
                            Sample(arr((0, 3)), desc="size 0")]),
    OpInfo("diagonal_method", op=lambda x, *a: x.diagonal(*a),
           ref=lambda x, *a: x.diagonal(*a), samples=lambda: [Sample(arr((3, 4)), -1)]),
    OpInfo("diag_embed", op=lambda x, *a, **k: dl.diag_embed(x, *a, **k),
           ref=lambda x, *a, **k: torch.diag_embed(x, *a, **k), dtypes=ALL_FLOATS,
           samples=lambda: [Sample(arr((2, 3))),
                            Sample(arr((2, 3), 1), 1, 0, 2, desc="offset 1, dims (0, 2)"),
                            Sample(arr((3,), 2), -2, desc="offset -2"),
                            Sample(arr((2, 3), 3), -1, 2, 0, desc="dims (2, 0)"),
                            Sample(arr((2, 0), 4), 1, desc="empty diagonal")]),
    OpInfo("diag_embed_int", op=lambda x, *a: dl.diag_embed(x, *a),
           ref=lambda x, *a: torch.diag_embed(x, *a), grad=False,
           samples=lambda: [Sample(iarr((2, 3), 9).astype(I32), 1, desc="int32"),
                            Sample(iarr((3,), 2, 1) == 1, -1, desc="bool")]),
    OpInfo("diag", op=lambda x, *a: dl.diag(x, *a), ref=lambda x, *a: torch.diag(x, *a),
           samples=lambda: [Sample(arr((3,)), desc="1-d"), Sample(arr((3, 4), 1), desc="2-d"),
                            Sample(arr((3,), 2), -1, desc="1-d, offset -1"),
                            Sample(arr((4, 3), 3), 1, noncontig=True, desc="2-d, offset 1"),
                            Sample(arr((0,)), 2, desc="1-d empty, offset 2")]),
    OpInfo("trace", op=lambda x: dl.trace(x), ref=lambda x: torch.trace(x), dtypes=ALL_FLOATS,
           samples=lambda: [Sample(arr((3, 3))), Sample(arr((2, 4), 1), noncontig=True),
                            Sample(arr((0, 3)), desc="size 0")]),
    OpInfo("trace_int", op=lambda x: x.trace(), ref=lambda x: x.trace(), grad=False,
           skip={"wgpu": NO_I64_SUM, "wgpu-spirv": NO_I64_SUM},
           samples=lambda: [Sample(iarr((3, 4), 9).astype(I32), desc="int32: int64 sum")]),
    # ---- elementwise special functions ---------------------------------------------------
    *[OpInfo(n, op=lambda a, b, n=n: getattr(dl, n)(a, b),
             ref=lambda a, b, n=n: getattr(torch, n)(a, _t(b, a)), dtypes=ALL_FLOATS,
             samples=_binary_samples())
      for n in ("logaddexp", "logaddexp2")],
    # PyTorch's gradients at infinities: nan where both are the same infinity
    *[OpInfo(f"{n}_infinities", op=lambda a, b, n=n: getattr(dl, n)(a, b),
             ref=lambda a, b, n=n: getattr(torch, n)(a, b),
             skip=SHADER_FINITE,
             samples=lambda: [Sample(np.array([INF, -INF, INF, -INF, 1.0, -INF]),
                                     np.array([INF, -INF, -INF, 1.0, 1.0, 2.0]))])
      for n in ("logaddexp", "logaddexp2")],
    OpInfo("xlogy", op=lambda a, b: dl.xlogy(a, b), ref=lambda a, b: torch.xlogy(a, b),
           dtypes=ALL_FLOATS,
           samples=lambda: [Sample(arr((3, 5)), arr((3, 5), 1, 0.1, 3.0), desc="typical"),
                            Sample(arr((4, 1, 3), 2), arr((5, 1), 3, 0.1, 3.0),
                                   desc="broadcast"),
                            Sample(arr((2, 3), 4), 2.5, desc="scalar other"),
                            Sample(1.5, arr((2, 3), 5, 0.1, 3.0), desc="scalar self"),
                            Sample(arr((0, 3)), arr((1, 3), 1), desc="size 0")]),
    # a = 0: 0 whatever b but nan; gradients PyTorch's (0 for a where a = 0 and b <= 0)
    OpInfo("xlogy_special", op=lambda a, b: dl.xlogy(a, b), ref=lambda a, b: torch.xlogy(a, b),
           skip=SHADER_FINITE,
           samples=lambda: [Sample(np.array([0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0, -0.0]),
                                   np.array([0.0, -1.0, NAN, INF, 2.0, 0.0, -1.0, 0.5])),
                            Sample(np.array([0.0, 1.0, 0.0]), -1.0, desc="scalar b <= 0")]),
    OpInfo("xlogy_int", op=lambda a, b: dl.xlogy(a, b), ref=lambda a, b: torch.xlogy(a, b),
           grad=False, samples=lambda: [Sample(iarr((3, 4), 5).astype(I32),
                                               iarr((3, 4), 5, 1, 1).astype(I32))]),
    OpInfo("copysign", op=lambda a, b: dl.copysign(a, b),
           ref=lambda a, b: torch.copysign(a, b), dtypes=ALL_FLOATS, signed_zero=True,
           samples=lambda: [*_binary_samples()(),
                            Sample(np.array([0.0, -0.0, 1.0, -2.0, 3.0]),
                                   np.array([-1.0, 1.0, -0.0, 0.0, -0.0]),
                                   desc="zeros (the gradient's 0 at a = 0)")]),
    OpInfo("copysign_int", op=lambda a, b: dl.copysign(a, b),
           ref=lambda a, b: torch.copysign(a, b), grad=False,
           samples=lambda: [Sample(iarr((3, 4), 5, 0, -5).astype(I32),
                                   iarr((3, 4), 5, 1, -5).astype(I32)),
                            Sample(arr((2, 3)), iarr((2, 3), 3, 2, -3).astype(I32),
                                   desc="float and int")]),
    OpInfo("frac", op=lambda x: dl.frac(x), ref=lambda x: torch.frac(x), dtypes=ALL_FLOATS,
           signed_zero=True, samples=_unary_samples(-5.0, 5.0)),
    OpInfo("sinc", op=lambda x: dl.sinc(x), ref=lambda x: torch.sinc(x), dtypes=ALL_FLOATS,
           samples=_unary_samples(), tol={dl.float32: (1e-5, 1e-6)}),
    OpInfo("sinc_zero", op=lambda x: dl.sinc(x), ref=lambda x: torch.sinc(x),
           samples=lambda: [Sample(np.array([0.0, -0.0, 1.0, -0.5, 1e-30, 2.5]),
                                   desc="0 (1, gradient 0), integers (0)")]),
    OpInfo("special_methods",
           op=lambda a, b: (a.logaddexp(b), a.logaddexp2(b), b.xlogy(b), a.copysign(b),
                            a.frac(), a.sinc()),
           ref=lambda a, b: (a.logaddexp(b), a.logaddexp2(b), b.xlogy(b), a.copysign(b),
                             a.frac(), a.sinc()),
           samples=lambda: [Sample(arr((3, 4)), arr((3, 4), 1, 0.1, 2.0))]),
    # ---- reductions ------------------------------------------------------------------------
    OpInfo("nansum", op=lambda x, *a, **k: dl.nansum(x, *a, **_dt(dl, k)),
           ref=lambda x, *a, **k: torch.nansum(x, *a, **_dt(torch, k)), dtypes=ALL_FLOATS,
           skip=SHADER_FINITE,
           samples=lambda: [Sample(_nans((3, 5)), 1, desc="dim 1"),
                            Sample(_nans((2, 3, 4), 1), (0, -1), keepdim=True,
                                   desc="dims (0, -1), keepdim"),
                            Sample(_nans((4, 3), 2), noncontig=True, desc="all dims"),
                            Sample(_nans((3, 4), 3), 0, dtype="float64", desc="dtype"),
                            Sample(np.full((2, 2), NAN), 1, desc="all nan"),
                            Sample(arr((0, 3)), 1, desc="size 0")]),
    OpInfo("nansum_int", op=lambda x, *a: dl.nansum(x, *a), ref=lambda x, *a: torch.nansum(x, *a),
           grad=False, skip={"wgpu": NO_I64_SUM, "wgpu-spirv": NO_I64_SUM},
           samples=lambda: [Sample(iarr((3, 4), 9).astype(I32), 0, desc="int32: int64"),
                            Sample(barr((3, 4)), desc="bool: int64")]),
    OpInfo("nanmean", op=lambda x, *a, **k: dl.nanmean(x, *a, **_dt(dl, k)),
           ref=lambda x, *a, **k: torch.nanmean(x, *a, **_dt(torch, k)), dtypes=ALL_FLOATS,
           skip=SHADER_FINITE,
           samples=lambda: [Sample(_nans((3, 5)), 1, desc="dim 1"),
                            Sample(_nans((2, 3, 4), 1), (0, 2), True, desc="dims, keepdim"),
                            Sample(_nans((4, 3), 2), noncontig=True, desc="all dims"),
                            Sample(np.array([[NAN, NAN], [1.0, NAN]]), -1,
                                   desc="an all-nan row (nan)"),
                            Sample(_nans((3, 4), 3), 0, dtype="float64", desc="dtype")]),
    OpInfo("count_nonzero", op=lambda x, *a: dl.count_nonzero(x, *a),
           ref=lambda x, *a: torch.count_nonzero(x, *a), grad=False, dtypes=ALL_FLOATS,
           skip={"wgpu": NO_I64_SUM, "wgpu-spirv": NO_I64_SUM},
           samples=lambda: [Sample(_zeros((3, 5))), Sample(_zeros((3, 5), 1), 1, desc="dim 1"),
                            Sample(_zeros((2, 3, 4), 2), (0, -1), desc="dims (0, -1)"),
                            Sample(iarr((3, 4), 3).astype(I32), -1, desc="int32"),
                            Sample(barr((3, 4)), 0, desc="bool"),
                            Sample(arr((0, 3)), 0, desc="size 0")]),
    *[OpInfo(n, op=lambda x, *a, n=n, **k: getattr(dl, n)(x, *a, **k),
             ref=lambda x, *a, n=n, **k: getattr(torch, n)(x, *a, **k), dtypes=ALL_FLOATS,
             samples=lambda: [Sample(arr((3, 5)), 1, desc="dim 1"),
                              Sample(arr((2, 3, 4), 1), (0, 2), False, True,
                                     desc="dims, unbiased False, keepdim"),
                              Sample(arr((4, 3), 2), noncontig=True, desc="all dims"),
                              Sample(arr((3, 4), 3), False, desc="unbiased as 2nd argument"),
                              Sample(arr((3, 4), 4), dim=0, correction=2, keepdim=True,
                                     desc="correction 2"),
                              Sample(np.ones((2, 3)), 1, desc="constant (std's 0 gradient)")])
      for n in ("var_mean", "std_mean")],
    OpInfo("aminmax", op=lambda x, **k: dl.aminmax(x, **k),
           ref=lambda x, **k: torch.aminmax(x, **k), dtypes=ALL_FLOATS,
           samples=lambda: [Sample(ties((3, 5)), dim=1, desc="dim 1, ties"),
                            Sample(ties((3, 4), 1), desc="all, ties"),
                            Sample(arr((2, 3, 4), 2), dim=-2, keepdim=True,
                                   desc="dim -2, keepdim"),
                            Sample(arr((4, 3), 3), keepdim=True, noncontig=True,
                                   desc="all, keepdim"),
                            Sample(np.array(1.5), dim=0, desc="0-d"),
                            Sample(arr((0, 3)), dim=1, desc="size 0 kept")]),
    OpInfo("aminmax_int", op=lambda x, **k: x.aminmax(**k), ref=lambda x, **k: x.aminmax(**k),
           grad=False, samples=lambda: [Sample(iarr((3, 4), 9).astype(I32), dim=0),
                                        Sample(barr((3, 4)), desc="bool")]),
    OpInfo("diff", op=lambda x, *a, **k: dl.diff(x, *a, **k),
           ref=lambda x, *a, **k: torch.diff(x, *a, **k), dtypes=ALL_FLOATS,
           samples=lambda: [Sample(arr((3, 5))),
                            Sample(arr((4, 3), 1), 2, 0, noncontig=True, desc="n 2, dim 0"),
                            Sample(arr((2, 3), 2), 1, -1, arr((2, 1), 3), arr((2, 2), 4),
                                   desc="prepend, append"),
                            Sample(arr((3,), 5), 5, desc="n past the length"),
                            Sample(arr((3,), 6), 0, desc="n 0"),
                            Sample(arr((0, 3)), 1, 0, desc="size 0")]),
    OpInfo("diff_int_bool", op=lambda x, *a, **k: x.diff(*a, **k),
           ref=lambda x, *a, **k: x.diff(*a, **k), grad=False,
           samples=lambda: [Sample(iarr((3, 4), 9).astype(I32), 2, desc="int32"),
                            Sample(barr((3, 4)), 1, 0, desc="bool: !="),
                            Sample(iarr((2, 3), 9).astype(I32), 1, -1, arr((2, 1)),
                                   desc="int32, float prepend: float")]),
]

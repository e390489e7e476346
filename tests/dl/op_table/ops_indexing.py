"""Entries for indexing and data movement (issue 17 item 1): scatter, scatter_add, index_add,
index_put and setitem, advanced getitem, masked_fill/masked_select, nonzero, take_along_dim,
chunk/split/unbind/narrow, flip/roll, tril/triu, pad."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as tF

import dl

from .core import OpInfo, Sample, arr, barr, edge_values, iarr

DATA = (dl.float32, dl.float64, dl.int64, dl.bool_)
WGPU_INDEX = "index tensors are int64 and WGSL has no 64-bit integers (int32 indices are " \
    "tested in tests/dl/test_dl_indexing.py)"
NO_I64 = {"wgpu:int64": "WGSL has no 64-bit integers", "wgpu-spirv:int64": "no 64-bit integers"}
IDX_SKIP = {"wgpu": WGPU_INDEX, "wgpu-spirv": WGPU_INDEX}


def uniq(shape, dim: int, size: int, seed: int = 0) -> np.ndarray:
    """An int64 index of `shape` whose entries along `dim` are distinct in every row (scatter
    without reduce is unspecified for repeated indices)."""
    rng = np.random.default_rng(seed)
    moved = list(shape)
    k = moved.pop(dim)
    rows = [rng.permutation(size)[:k] for _ in range(int(np.prod(moved)))]
    out = np.array(rows, np.int64).reshape(*moved, k) if moved else np.array(rows[0])
    return np.moveaxis(out, -1, dim) if moved else out


def _setitem(x, idx, v):
    x[idx] = v
    return x


def _set_mask(x, m, v):
    x[m] = v
    return x


OPS = [
    # ---- scatter -------------------------------------------------------------------------
    OpInfo("scatter",
           note="repeated indices without reduce: one of the values wins (torch: unspecified)",
           op=lambda x, d, i, s: dl.scatter(x, d, i, s),
           ref=lambda x, d, i, s: torch.scatter(x, d, i, s), dtypes=DATA, skip=IDX_SKIP,
           samples=lambda: [
               Sample(arr((4, 5)), 0, uniq((3, 5), 0, 4), arr((3, 5), 1)),
               Sample(arr((5, 5)), 1, uniq((4, 3), 1, 5, 2), arr((4, 3), 3), noncontig=True),
               Sample(arr((3, 0)), 0, uniq((2, 0), 0, 3), arr((2, 0), 1), desc="size 0"),
               Sample(arr((1, 4)), 1, uniq((1, 4), 1, 4), arr((1, 4), 1), desc="size 1"),
               Sample(edge_values(), 0, uniq((12,), 0, 12), edge_values()[::-1].copy(),
                      desc="edge values"),
               Sample(arr((2, 3, 4)), -1, uniq((2, 2, 3), 2, 4), arr((2, 3, 3), 1), grad=(0,),
                      desc="rank 3, negative dim, src larger than index (torch's "
                      "gradient fails there: input only)")]),
    OpInfo("scatter_value", op=lambda x, d, i, v: x.scatter(d, i, v),
           ref=lambda x, d, i, v: x.scatter(d, i, v), dtypes=DATA, skip=IDX_SKIP,
           samples=lambda: [Sample(arr((4, 5)), 1, iarr((4, 3), 5), 1.5),
                            Sample(arr((5, 5)), 0, iarr((3, 5), 5, 1), -0.0, noncontig=True),
                            Sample(arr((0, 3)), 1, iarr((0, 2), 3), 2.0, desc="size 0")]),
    OpInfo("scatter_reduce_arg", op=lambda x, d, i, s, r: x.scatter(d, i, s, reduce=r),
           ref=lambda x, d, i, s, r: x.scatter(d, i, s, reduce=r), grad=False,
           skip=IDX_SKIP, note="torch has no gradient for scatter with reduce=; dl has one "
           "for 'add' (none for 'multiply')",
           samples=lambda: [Sample(arr((3, 5)), 0, iarr((4, 5), 3), arr((4, 5), 1), "add",
                                   desc="repeated indices accumulate"),
                            Sample(arr((3, 5)), 1, iarr((3, 6), 5), arr((3, 6), 1),
                                   "multiply")]),
    OpInfo("scatter_", op=lambda x, d, i, s: x.clone().scatter_(d, i, s),
           ref=lambda x, d, i, s: x.clone().scatter_(d, i, s), skip=IDX_SKIP,
           samples=lambda: [Sample(arr((4, 5)), 0, uniq((3, 5), 0, 4), arr((3, 5), 1)),
                            Sample(arr((5, 5)), 1, uniq((5, 2), 1, 5, 1), arr((5, 2), 2),
                                   noncontig=True)]),
    OpInfo("scatter_add", op=lambda x, d, i, s: dl.scatter_add(x, d, i, s),
           ref=lambda x, d, i, s: torch.scatter_add(x, d, i, s), dtypes=DATA,
           skip=IDX_SKIP,
           samples=lambda: [
               Sample(arr((3, 5)), 0, iarr((6, 5), 3), arr((6, 5), 1),
                      desc="repeated indices accumulate"),
               Sample(arr((5, 5)), 1, iarr((4, 7), 5, 2), arr((4, 7), 3), noncontig=True),
               Sample(arr((0, 4)), 1, iarr((0, 4), 4), arr((0, 4), 1), desc="size 0"),
               Sample(arr((1, 1)), 0, np.zeros((3, 1), np.int64), arr((3, 1), 1),
                      desc="size 1, all to one"),
               Sample(edge_values(), 0, iarr((12,), 4), edge_values()[::-1].copy(),
                      desc="edge values")]),
    OpInfo("scatter_add_", op=lambda x, d, i, s: x.clone().scatter_add_(d, i, s),
           ref=lambda x, d, i, s: x.clone().scatter_add_(d, i, s), skip=IDX_SKIP,
           samples=lambda: [Sample(arr((3, 5)), 1, iarr((3, 8), 5), arr((3, 8), 1)),
                            Sample(arr((4, 4)), 0, iarr((5, 4), 4, 1), arr((5, 4), 2),
                                   noncontig=True)]),
    # ---- index_add / index_put / setitem ----------------------------------------------------
    OpInfo("index_add", op=lambda x, d, i, s, **k: dl.index_add(x, d, i, s, **k),
           ref=lambda x, d, i, s, **k: torch.index_add(x, d, i, s, **k), dtypes=DATA,
           skip=IDX_SKIP,
           samples=lambda: [
               Sample(arr((4, 3)), 0, np.array([0, 2, 0, 3, 0]), arr((5, 3), 1), alpha=2,
                      desc="repeated indices accumulate, alpha"),
               Sample(arr((4, 5)), 1, np.array([4, 1, 3]), arr((4, 3), 2), noncontig=True),
               Sample(arr((0, 3)), 1, np.array([2, 2]), arr((0, 2), 1), desc="size 0"),
               Sample(arr((3, 1)), 1, np.array([0]), arr((3, 1), 1), desc="size 1"),
               Sample(edge_values(), 0, iarr((12,), 12, 3), edge_values()[::-1].copy(),
                      desc="edge values")]),
    OpInfo("index_add_", op=lambda x, d, i, s: x.clone().index_add_(d, i, s),
           ref=lambda x, d, i, s: x.clone().index_add_(d, i, s), skip=IDX_SKIP,
           samples=lambda: [Sample(arr((4, 3)), 0, np.array([1, 1, 3]), arr((3, 3), 1)),
                            Sample(arr((4, 4)), 1, np.array([3, 0]), arr((4, 2), 1),
                                   noncontig=True)]),
    OpInfo("index_put",
           note="repeated indices without accumulate: one of the values wins",
           op=lambda x, i, v, **k: dl.index_put(x, i, v, **k),
           ref=lambda x, i, v, **k: torch.index_put(x, i, v, **k), dtypes=DATA, skip=IDX_SKIP,
           samples=lambda: [
               Sample(arr((4, 5)), (np.array([0, 3, 2]), np.array([1, 1, 4])), arr((3,), 1)),
               Sample(arr((5, 4)), (np.array([[4, 0]]),), arr((1, 1), 2), noncontig=True,
                      desc="row index, value broadcast"),
               Sample(arr((3, 4)), (barr((3, 4), 1),), arr((), 1), desc="bool mask"),
               Sample(arr((0, 2)), (np.zeros(0, np.int64),), arr((0, 2)), desc="size 0"),
               Sample(edge_values(), (np.array([0, 5, 2]),), edge_values()[:3].copy(),
                      desc="edge values")]),
    OpInfo("index_put_accumulate",
           op=lambda x, i, v: dl.index_put(x, i, v, accumulate=True),
           ref=lambda x, i, v: torch.index_put(x, i, v, accumulate=True), dtypes=DATA,
           skip=IDX_SKIP,
           samples=lambda: [
               Sample(arr((4, 3)), (np.array([1, 1, 0, 1]), np.array([2, 2, 0, 2])),
                      arr((4,), 1), desc="repeated indices accumulate"),
               Sample(arr((5, 5)), (np.array([[4], [0], [4]]), np.array([1, 3])),
                      arr((3, 2), 2), noncontig=True, desc="broadcast index tensors"),
               Sample(arr((3, 4)), (barr((3, 4), 1),), arr((), 1), desc="bool mask"),
               Sample(arr((1, 3)), (np.array([0, 0]),), arr((1, 3), 1), desc="size 1")]),
    OpInfo("index_put_", op=lambda x, i, v: x.clone().index_put_(i, v),
           ref=lambda x, i, v: x.clone().index_put_(i, v), skip=IDX_SKIP,
           samples=lambda: [Sample(arr((4, 5)), (np.array([3, 1]),), arr((2, 5), 1)),
                            Sample(arr((4, 4)), (np.array([0, 2]), np.array([3, 1])),
                                   arr((2,), 1), noncontig=True)]),
    OpInfo("setitem_index", op=lambda x, i, v: _setitem(x.clone(), i, v),
           ref=lambda x, i, v: _setitem(x.clone(), i, v), dtypes=DATA, skip=IDX_SKIP,
           samples=lambda: [
               Sample(arr((4, 5)), (slice(1, 3), np.array([4, 0, 2])), arr((2, 3), 1)),
               Sample(arr((5, 4)), (np.array([3, 0]), slice(None)), arr((4,), 2),
                      noncontig=True, desc="value broadcast"),
               Sample(arr((3, 4, 2)), (np.array([2, 0]), 1, np.array([1, 0])), 2.5,
                      desc="int between index tensors (apart: index dims first)"),
               Sample(arr((2, 3)), (Ellipsis, np.array([[1], [2]])), arr((2, 2, 1), 3),
                      desc="ellipsis, 2-D index"),
               Sample(arr((3, 4)), (slice(None), 1), arr((3,), 1), desc="basic")]),
    OpInfo("setitem_mask", op=lambda x, m, v: _set_mask(x.clone(), m, v),
           ref=lambda x, m, v: _set_mask(x.clone(), m, v), dtypes=DATA,
           samples=lambda: [Sample(arr((4, 5)), barr((4, 5), 1), 0.5),
                            Sample(arr((5, 4)), barr((5,), 2), arr((4,), 3), noncontig=True,
                                   desc="row mask, row value"),
                            Sample(arr((3, 0)), barr((3, 0)), 1.0, desc="size 0"),
                            Sample(edge_values(), edge_values() > 0, -0.0,
                                   desc="edge values")]),
    # ---- advanced getitem ----------------------------------------------------------------
    OpInfo("getitem_index", op=lambda x, i: x[i], ref=lambda x, i: x[i], dtypes=DATA,
           skip=IDX_SKIP,
           samples=lambda: [
               Sample(arr((4, 5)), (np.array([[3, 0], [1, 3]]), np.array([4, -1]))),
               Sample(arr((5, 4)), (slice(1, None), np.array([0, 3, 0])), noncontig=True,
                      desc="slice then index, repeats"),
               Sample(arr((3, 4, 5)), (np.array([2, 0]), slice(None), np.array([1, 4])),
                      desc="index tensors apart: index dims first"),
               Sample(arr((3, 4, 5)), (None, 1, np.array([0, 0, 3])), desc="None and int"),
               Sample(arr((4, 0)), np.array([1, 2]), desc="size 0"),
               Sample(arr((1, 3)), (np.zeros(0, np.int64),), desc="empty index"),
               Sample(edge_values(), np.array([2, 3, 0, 1, 2]), desc="edge values")]),
    OpInfo("getitem_mask",
           note="host-synchronising (the count decides the shape), as torch on GPUs",
           op=lambda x, m: x[m], ref=lambda x, m: x[m], dtypes=DATA,
           samples=lambda: [
               Sample(arr((4, 5)), barr((4, 5), 1)),
               Sample(arr((5, 4)), barr((5,), 2), noncontig=True, desc="row mask"),
               Sample(arr((3, 4, 2)), (slice(None), barr((4, 2), 3)), desc="mask after a slice"),
               Sample(arr((0, 3)), barr((0, 3)), desc="size 0"),
               Sample(edge_values(), edge_values() != 1, desc="edge values")]),
    # ---- masks -------------------------------------------------------------------------------
    OpInfo("masked_fill", op=lambda x, m, v: x.masked_fill(m, v),
           ref=lambda x, m, v: x.masked_fill(m, v), dtypes=DATA, skip=NO_I64,
           signed_zero=True,
           samples=lambda: [
               Sample(arr((4, 5)), barr((4, 5), 1), -1.5),
               Sample(arr((5, 4)), barr((4,), 2), 0.25, noncontig=True, desc="broadcast mask"),
               Sample(arr((3, 0)), barr((3, 0)), 1.0, desc="size 0"),
               Sample(edge_values(), barr((12,), 3), 2.0, desc="edge values"),
               Sample(arr((3, 1)), barr((3, 1), 1), -0.0, desc="size 1, -0.0")]),
    OpInfo("masked_fill_tensor_value", op=lambda x, m, v: x.masked_fill(m, v),
           ref=lambda x, m, v: x.masked_fill(m, v),
           samples=lambda: [Sample(arr((4, 5)), barr((4, 5), 1), arr((), 2)),
                            Sample(arr((4, 4)), barr((4, 4), 2), arr((), 3), noncontig=True)]),
    OpInfo("masked_fill_", op=lambda x, m, v: x.clone().masked_fill_(m, v),
           ref=lambda x, m, v: x.clone().masked_fill_(m, v), dtypes=DATA, skip=NO_I64,
           samples=lambda: [Sample(arr((4, 5)), barr((4, 5), 1), 3.0),
                            Sample(arr((4, 4)), barr((4, 1), 2), -2.0, noncontig=True)]),
    OpInfo("masked_select",
           note="host-synchronising (the count decides the shape), as torch on GPUs",
           op=lambda x, m: dl.masked_select(x, m),
           ref=lambda x, m: torch.masked_select(x, m), dtypes=DATA, skip=NO_I64,
           samples=lambda: [
               Sample(arr((4, 5)), barr((4, 5), 1)),
               Sample(arr((5, 4)), barr((4,), 2), noncontig=True, desc="broadcast mask"),
               Sample(arr((3, 1)), barr((3, 4), 3), desc="broadcast input"),
               Sample(arr((0, 3)), barr((0, 3)), desc="size 0"),
               Sample(edge_values(), edge_values() == edge_values(), desc="edge values")]),
    OpInfo("nonzero",
           note="host-synchronising; the result is int32 on WGSL (no 64-bit integers)",
           op=lambda x: dl.nonzero(x), ref=lambda x: torch.nonzero(x),
           dtypes=(dl.bool_, dl.float32, dl.int64), grad=False,
           skip={**IDX_SKIP, "wgpu": "the result is int32 on WGSL"},
           samples=lambda: [
               Sample(barr((4, 5), 1)), Sample(arr((5, 6), 2), noncontig=True),
               Sample(barr((0, 3)), desc="size 0"), Sample(np.array(True), desc="0-d"),
               Sample(barr((65, 64), 4, 0.1), desc="many chunks"),
               Sample(edge_values(), desc="edge values")]),
    OpInfo("nonzero_tuple", op=lambda x: dl.nonzero(x, as_tuple=True),
           ref=lambda x: torch.nonzero(x, as_tuple=True), dtypes=(dl.bool_, dl.float32),
           grad=False, skip={**IDX_SKIP, "wgpu": "the result is int32 on WGSL"},
           samples=lambda: [Sample(barr((4, 5), 1)), Sample(arr((3, 4, 2), 2)),
                            Sample(barr((0,)), desc="size 0")]),
    OpInfo("take_along_dim", op=lambda x, i, *d: dl.take_along_dim(x, i, *d),
           ref=lambda x, i, *d: torch.take_along_dim(x, i, *d), dtypes=DATA, skip=IDX_SKIP,
           samples=lambda: [
               Sample(arr((4, 5)), iarr((4, 3), 5), 1),
               Sample(arr((5, 5)), iarr((2, 5), 5, 1), 0, noncontig=True),
               Sample(arr((3, 1, 4)), iarr((1, 5, 2), 4, 2), 2, desc="broadcast"),
               Sample(arr((3, 4)), iarr((5,), 12, 3), desc="dim None"),
               Sample(arr((0, 4)), iarr((0, 2), 4), 1, desc="size 0")]),
    # ---- views -----------------------------------------------------------------------------
    OpInfo("chunk", op=lambda x, c, d: x.chunk(c, d), ref=lambda x, c, d: x.chunk(c, d),
           dtypes=DATA, skip=NO_I64,
           samples=lambda: [Sample(arr((5, 7)), 3, 1), Sample(arr((6, 4)), 4, 0, noncontig=True),
                            Sample(arr((6, 2)), 4, 0, desc="fewer chunks than asked"),
                            Sample(arr((0, 3)), 2, 0, desc="size 0"),
                            Sample(arr((1, 3)), 2, 0, desc="size 1")]),
    OpInfo("split", op=lambda x, s, d: dl.split(x, s, d), ref=lambda x, s, d: torch.split(x, s, d),
           dtypes=DATA, skip=NO_I64,
           samples=lambda: [Sample(arr((7, 4)), 3, 0), Sample(arr((6, 5)), [1, 4, 0, 1], 0,
                                                               noncontig=True),
                            Sample(arr((2, 0)), 1, 1, desc="size 0"),
                            Sample(arr((1, 5)), [2, 3], -1, desc="sizes, size 1")]),
    OpInfo("unbind", op=lambda x, d: x.unbind(d), ref=lambda x, d: x.unbind(d), dtypes=DATA,
           skip=NO_I64,
           samples=lambda: [Sample(arr((3, 4)), 1), Sample(arr((4, 3)), 0, noncontig=True),
                            Sample(arr((1, 0)), 0, desc="size 0")]),
    OpInfo("narrow", op=lambda x, d, s, n: x.narrow(d, s, n),
           ref=lambda x, d, s, n: x.narrow(d, s, n), dtypes=DATA, skip=NO_I64,
           samples=lambda: [Sample(arr((4, 6)), 1, 2, 3), Sample(arr((5, 4)), 0, -3, 2,
                                                                 noncontig=True),
                            Sample(arr((3, 4)), 0, 3, 0, desc="length 0")]),
    # ---- flip, roll, tril, triu ----------------------------------------------------------
    OpInfo("flip", op=lambda x, d: x.flip(d), ref=lambda x, d: x.flip(d), dtypes=DATA,
           skip=NO_I64, signed_zero=True,
           samples=lambda: [Sample(arr((3, 4, 5)), (0, 2)), Sample(arr((4, 5)), -1, noncontig=True),
                            Sample(arr((0, 3)), (0, 1), desc="size 0"),
                            Sample(edge_values(), 0, desc="edge values"),
                            Sample(arr((1, 4)), (), desc="no dims")]),
    OpInfo("roll", op=lambda x, s, d: x.roll(s, d), ref=lambda x, s, d: x.roll(s, d),
           dtypes=DATA, skip=NO_I64,
           samples=lambda: [Sample(arr((3, 4, 5)), (1, -7), (0, 2)),
                            Sample(arr((4, 5)), 2, 1, noncontig=True),
                            Sample(arr((0, 3)), 1, 1, desc="size 0"),
                            Sample(edge_values(), 5, 0, desc="edge values")]),
    OpInfo("roll_flat", op=lambda x, s: x.roll(s), ref=lambda x, s: x.roll(s), dtypes=DATA,
           skip=NO_I64,
           samples=lambda: [Sample(arr((3, 4)), 5), Sample(arr((4, 5)), -3, noncontig=True),
                            Sample(arr((1, 1)), 1, desc="size 1")]),
    OpInfo("tril", op=lambda x, k: x.tril(k), ref=lambda x, k: x.tril(k), dtypes=DATA,
           skip=NO_I64,
           samples=lambda: [Sample(arr((4, 5)), 0), Sample(arr((2, 5, 4)), -1, noncontig=True),
                            Sample(arr((3, 0)), 1, desc="size 0"),
                            Sample(arr((1, 4)), 2, desc="size 1"),
                            Sample(edge_values().reshape(3, 4), 1, desc="edge values")]),
    OpInfo("triu", op=lambda x, k: x.triu(diagonal=k), ref=lambda x, k: x.triu(diagonal=k),
           dtypes=DATA, skip=NO_I64,
           samples=lambda: [Sample(arr((4, 5)), 1), Sample(arr((2, 5, 4)), -2, noncontig=True),
                            Sample(arr((0, 3)), 0, desc="size 0"),
                            Sample(edge_values().reshape(4, 3), 0, desc="edge values")]),
    OpInfo("tril_", op=lambda x, k: x.clone().tril_(k), ref=lambda x, k: x.clone().tril_(k),
           samples=lambda: [Sample(arr((4, 5)), 1), Sample(arr((5, 5)), 0, noncontig=True)]),
    # ---- pad ---------------------------------------------------------------------------------
    OpInfo("pad_constant", op=lambda x, p, **k: dl.nn.functional.pad(x, p, **k),
           ref=lambda x, p, **k: tF.pad(x, p, **k), dtypes=DATA, skip=NO_I64,
           samples=lambda: [Sample(arr((2, 3, 4)), (1, 2, 0, 1), value=1.5),
                            Sample(arr((4, 5)), (2, -1, -1, 3), noncontig=True,
                                   desc="negative pads crop"),
                            Sample(arr((0, 3)), (1, 1), desc="size 0"),
                            Sample(edge_values(), (2, 1), desc="edge values")]),
    OpInfo("pad_reflect", op=lambda x, p: dl.pad(x, p, mode="reflect"),
           ref=lambda x, p: tF.pad(x, p, mode="reflect"),
           samples=lambda: [Sample(arr((2, 4, 5)), (2, 3, 1, 3)),
                            Sample(arr((3, 5, 4)), (3, 1), noncontig=True),
                            Sample(arr((1, 2)), (1, 1), desc="size 1 batch")]),
    OpInfo("pad_replicate", op=lambda x, p: dl.pad(x, p, mode="replicate"),
           ref=lambda x, p: tF.pad(x, p, mode="replicate"),
           samples=lambda: [Sample(arr((2, 3, 4)), (2, 3, 1, 0)),
                            Sample(arr((2, 3, 4, 5)), (1, 2, 0, 3, 2, 1), noncontig=True),
                            Sample(arr((1, 1)), (3, 2), desc="size 1")]),
    OpInfo("pad_circular", op=lambda x, p: dl.pad(x, p, mode="circular"),
           ref=lambda x, p: tF.pad(x, p, mode="circular"),
           samples=lambda: [Sample(arr((2, 3, 4)), (2, 3, 1, 0)),
                            Sample(arr((2, 4, 5)), (1, -1), noncontig=True)]),
]

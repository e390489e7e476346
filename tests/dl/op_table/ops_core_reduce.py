"""Entries for the reductions, row ops (softmax, log_softmax, layer_norm) and matrix
products dl had before the op table (commit b41ee54)."""
from __future__ import annotations

import warnings

import numpy as np
import torch
import torch.nn.functional as TF

import dl

from .core import ALL, ALL_FLOATS, OpInfo, Sample, arr, edge_values, ties

NO_BOOL = ALL_FLOATS + (dl.int64, dl.int32)


def _red_samples(empty_ok=True, edge=True, tied=False):
    def samples():
        ss = [Sample(arr((3, 5)), dim=1),
              Sample(arr((4, 6), 1), dim=0, noncontig=True, desc="transposed view"),
              Sample(arr((2, 3, 4), 2), desc="all dims"),
              Sample(arr((2, 3, 4), 3), dim=(0, 2), desc="two dims"),
              Sample(arr((2, 3, 4), 4), dim=-1, keepdim=True, desc="keepdim"),
              Sample(arr((3, 1, 4), 5), dim=1, desc="size-1 dim"),
              Sample(arr((), 6), desc="0-dim")]
        if edge:
            ss.append(Sample(edge_values().reshape(3, 4), dim=1, grad=(),
                             desc="inf, nan, -0.0"))
        if empty_ok:
            ss.append(Sample(arr((0, 4)), dim=0, desc="reduce a size-0 dim"))
            ss.append(Sample(arr((3, 0)), dim=0, desc="size-0 result"))
        if tied:
            ss.insert(1, Sample(ties((4, 5)), dim=1, desc="ties"))
        return ss
    return samples


def reduction(name, dtypes=ALL, empty_ok=True, edge=True, tied=False, fn=None, ref=None,
              **kw):
    fn = fn or (lambda x, **k: getattr(dl, name)(x, **k))
    ref = ref or (lambda x, **k: getattr(torch, name)(x, **k))
    return OpInfo(name, op=fn, ref=ref, samples=_red_samples(empty_ok, edge, tied),
                  dtypes=dtypes, **kw)


def _dim_samples(edge=True):
    """max/min/argmax/argmin along one dim (a single int dim, as PyTorch's)."""
    def samples():
        ss = [Sample(arr((3, 5)), 1),
              Sample(ties((4, 5)), 1, desc="ties: the lowest index"),
              Sample(arr((4, 6), 1), 0, noncontig=True, desc="transposed view"),
              Sample(arr((2, 3, 4), 2), -1, keepdim=True, desc="keepdim"),
              Sample(arr((3, 1, 4), 3), 1, desc="size-1 dim"),
              Sample(arr((3, 0), 4), 0, desc="size-0 result")]
        if edge:
            e = edge_values()
            ss.append(Sample(e[[0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1]].reshape(3, 4), 1,
                             grad=(), desc="inf, -0.0, ties"))
        return ss
    return samples


def _warned(fn, x):
    """fn(x), which must warn (the implicit softmax dim); the warning kept from the output."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = fn(x)
    assert any("Implicit dimension" in str(m.message) for m in w), [str(m.message) for m in w]
    return y


def _var_samples():
    return [Sample(arr((3, 5)), dim=1),
            Sample(arr((4, 6), 1), dim=0, correction=0, noncontig=True, desc="correction 0"),
            Sample(arr((2, 3, 4), 2), desc="all dims"),
            Sample(arr((2, 3, 4), 3), dim=(0, 2), keepdim=True, desc="two dims, keepdim"),
            Sample(arr((3, 4), 4), dim=1, unbiased=False, desc="unbiased=False"),
            Sample(arr((3, 1), 5), dim=1, grad=(), desc="n <= correction: nan"),
            Sample(arr((3, 4), 6), dim=1, correction=2, desc="correction 2"),
            # std's gradient where it is 0: 0, as PyTorch's (sqrt's own is NaN there)
            Sample(np.array([[1.5, 1.5, 1.5], [1.0, 2.0, 4.0]]), dim=1, desc="a constant row")]


_ARG_I32 = "argmax/argmin/max/min indices are int32 on devices without 64-bit ints (wgpu)"


def _mm_samples(kind):
    def samples():
        if kind == "mm":
            return [Sample(arr((3, 4)), arr((4, 5), 1)),
                    Sample(arr((5, 4), 2), arr((4, 6), 3), noncontig=True,
                           desc="transposed views"),
                    Sample(arr((1, 4), 4), arr((4, 1), 5), desc="size-1 dims"),
                    Sample(arr((0, 4)), arr((4, 3), 6), desc="size-0 rows"),
                    Sample(arr((3, 0)), arr((0, 2)), desc="size-0 inner dim")]
        if kind == "bmm":
            return [Sample(arr((2, 3, 4)), arr((2, 4, 5), 1)),
                    Sample(arr((2, 5, 4), 2), arr((2, 4, 3), 3), noncontig=True,
                           desc="transposed views"),
                    Sample(arr((0, 3, 4)), arr((0, 4, 2)), desc="size-0 batch")]
        return [Sample(arr((3, 4)), arr((4, 5), 1)),
                Sample(arr((2, 1, 3, 4), 2), arr((5, 4, 2), 3), desc="batch broadcast"),
                Sample(arr((4,), 4), arr((4, 3), 5), desc="1-D @ 2-D"),
                Sample(arr((2, 3, 4), 6), arr((4,), 7), desc="3-D @ 1-D"),
                Sample(arr((4,), 8), arr((4,), 9), desc="1-D @ 1-D"),
                Sample(arr((2, 5, 4), 10), arr((2, 4, 3), 11), noncontig=True,
                       desc="transposed views"),
                Sample(arr((0, 4)), arr((4, 3), 12), desc="size 0")]
    return samples


def _linear_samples():
    return [Sample(arr((3, 4)), arr((5, 4), 1), arr((5,), 2)),
            Sample(arr((2, 3, 4), 3), arr((5, 4), 4), None, desc="3-D input, no bias"),
            Sample(arr((4, 6), 5), arr((3, 6), 6), arr((3,), 7), noncontig=True,
                   desc="transposed input and weight"),
            Sample(arr((1, 4), 8), arr((1, 4), 9), arr((1,), 10), desc="size 1"),
            Sample(arr((0, 4)), arr((3, 4), 11), arr((3,), 12), desc="size-0 batch"),
            Sample(arr((2, 3, 4), 13), arr((4,), 14), arr((), 15), desc="1-D weight")]


def _rows_samples(edge=True):
    def samples():
        ss = [Sample(arr((3, 5)), 1),
              Sample(arr((4, 6), 1), 0, noncontig=True, desc="transposed view, dim 0"),
              Sample(arr((2, 3, 4), 2), 1, desc="middle dim"),
              Sample(arr((3, 1), 3), 1, desc="size-1 rows"),
              Sample(arr((0, 4)), 1, desc="size 0"),
              Sample(arr((5,), 4, -50, 50), 0, desc="large logits")]
        if edge:
            ss.append(Sample(np.array([[0.0, -np.inf, 1.0, 2.0], [1.0, 1.0, 1.0, 1.0],
                                       [-np.inf, -np.inf, 0.0, -0.0]]), 1, grad=(),
                             desc="-inf, ties"))
        return ss
    return samples


def _ln_samples():
    return [Sample(arr((3, 5)), (5,), arr((5,), 1), arr((5,), 2)),
            Sample(arr((2, 3, 4), 3), (3, 4), arr((3, 4), 4), arr((3, 4), 5),
                   desc="two normalized dims"),
            Sample(arr((4, 6), 6), (6,), None, None, noncontig=True,
                   desc="transposed view, no affine"),
            Sample(arr((3, 5), 7), 5, arr((5,), 8), None, desc="weight only, int shape"),
            Sample(arr((0, 5)), (5,), arr((5,), 9), arr((5,), 10), desc="size 0"),
            Sample(arr((3, 1), 11), (1,), arr((1,), 12), arr((1,), 13), desc="size-1 rows")]


def _fn(mod, name):
    return lambda *a: getattr(mod, name)(*a)


def _linear_act(act):
    return lambda x, w, b: dl.linear(x, w, b, act=act)


def _prod_dims(x, dim, keepdim=False):
    """torch.prod over several dims (torch's takes one)."""
    for d in sorted((d % x.ndim for d in dim), reverse=True):
        x = torch.prod(x, d, keepdim=keepdim)
    return x


OPS = [
    reduction("sum", dtypes=ALL, tied=True),
    OpInfo("sum_dtype", op=lambda x: dl.sum(x, 1, dtype=dl.float64),
           ref=lambda x: torch.sum(x, 1, dtype=torch.float64), dtypes=ALL,
           samples=lambda: [Sample(arr((3, 5))), Sample(arr((4, 6), 1), noncontig=True)]),
    OpInfo("sum_method", op=lambda x: x.sum(), ref=lambda x: x.sum(), dtypes=ALL,
           samples=lambda: [Sample(arr((3, 5))), Sample(arr((40, 70), 1), noncontig=True,
                                                        desc="larger, transposed")]),
    reduction("mean", dtypes=ALL_FLOATS),
    reduction("prod", dtypes=ALL,
              ref=lambda x, **k: torch.prod(x, **k) if "dim" not in k or isinstance(
                  k["dim"], int) else _prod_dims(x, **k)),
    OpInfo("prod_zero", op=lambda x, **k: dl.prod(x, **k), ref=lambda x, **k: torch.prod(x, **k),
           samples=lambda: [Sample(np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 1.5],
                                             [1.0, 2.0, -1.0]]), dim=1, desc="zeros"),
                            Sample(np.array([1.5, 0.0, -2.0]), desc="one zero, all dims")]),
    OpInfo("prod_fd", op=lambda x, **k: dl.prod(x, **k), ref=lambda x, **k: torch.prod(x, **k),
           grad_check="fd", dtypes=(dl.float64,),
           samples=lambda: [Sample(arr((2, 3)), dim=1), Sample(arr((3, 2), 1), dim=0,
                                                               noncontig=True),
                            Sample(np.array([[2.0, 0.0, 3.0], [0.5, 1.5, -1.0]]), dim=1,
                                   desc="a zero")]),
    reduction("amax", dtypes=NO_BOOL, empty_ok=False, edge=False, tied=True),
    reduction("amin", dtypes=NO_BOOL, empty_ok=False, edge=False, tied=True),
    # dim=() or []: every dim (any/all: none), as PyTorch's (dl once reduced none). No
    # gradient row for std/var: PyTorch's backward takes dim=() as no dims (inf gradients
    # for a forward over every dim); ours is the forward's
    *[OpInfo(f"{n}_dim_empty", op=lambda x, d, n=n: getattr(dl, n)(x, dim=d),
             ref=lambda x, d, n=n: getattr(torch, n)(x, dim=d),
             grad=n in ("sum", "mean", "amax", "amin"),
             samples=lambda: [Sample(arr((2, 3)), (), desc="dim=()"),
                              Sample(arr((2, 3), 1), [], desc="dim=[]")])
      for n in ("sum", "mean", "amax", "amin", "std", "var", "any", "all")],
    *[OpInfo(f"{n}_nan", op=_fn(dl, n), ref=_fn(torch, n), dtypes=ALL_FLOATS, grad=False,
             samples=lambda: [Sample(edge_values().reshape(3, 4), 1, desc="inf, nan, -0.0"),
                              Sample(edge_values().reshape(3, 4), 0, desc="strided rows")])
      for n in ("amax", "amin", "max", "min")],
    # a lazy (fused) input: the fused reduction keeps nan too
    *[OpInfo(f"{n}_nan_fused", op=lambda x, d, n=n: getattr(dl, n)(x * 1.0, d),
             ref=lambda x, d, n=n: getattr(torch, n)(x * 1.0, d), dtypes=ALL_FLOATS, grad=False,
             samples=lambda: [Sample(edge_values().reshape(3, 4), 1, desc="inf, nan, -0.0"),
                              Sample(edge_values().reshape(3, 4), 0, desc="strided rows")])
      for n in ("amax", "amin")],
    OpInfo("max_all", op=lambda x: dl.max(x), ref=lambda x: torch.max(x), dtypes=NO_BOOL,
           samples=lambda: [Sample(arr((3, 5))), Sample(ties((4, 6), 1), noncontig=True),
                            Sample(arr((), 2), desc="0-dim")]),
    OpInfo("min_all", op=lambda x: dl.min(x), ref=lambda x: torch.min(x), dtypes=NO_BOOL,
           samples=lambda: [Sample(arr((3, 5))), Sample(ties((4, 6), 1), noncontig=True),
                            Sample(arr((), 2), desc="0-dim")]),
    OpInfo("max_dim", op=lambda x, d, **k: dl.max(x, d, **k),
           ref=lambda x, d, **k: torch.max(x, d, **k), dtypes=NO_BOOL,
           samples=_dim_samples(), note=_ARG_I32),
    OpInfo("min_dim", op=lambda x, d, **k: dl.min(x, d, **k),
           ref=lambda x, d, **k: torch.min(x, d, **k), dtypes=NO_BOOL,
           samples=_dim_samples(), note=_ARG_I32),
    OpInfo("argmax", op=lambda x, d, **k: dl.argmax(x, d, **k),
           ref=lambda x, d, **k: torch.argmax(x, d, **k), dtypes=NO_BOOL, grad=False,
           samples=lambda: [*_dim_samples()()[:5], Sample(arr((3, 4), 9), None,
                                                           desc="flattened"),
                            Sample(arr((3, 4), 10), None, keepdim=True,
                                   desc="flattened keepdim")]),
    OpInfo("argmin", op=lambda x, d, **k: dl.argmin(x, d, **k),
           ref=lambda x, d, **k: torch.argmin(x, d, **k), dtypes=NO_BOOL, grad=False,
           samples=lambda: [*_dim_samples()()[:5], Sample(arr((3, 4), 9), None,
                                                           desc="flattened")]),
    # max(a, b) / min(a, b) of two tensors: maximum / minimum, as PyTorch's
    *[OpInfo(f"{n}_binary", op=lambda a, b, n=n: getattr(dl, n)(a, b),
             ref=lambda a, b, n=n: getattr(torch, n)(a, b), dtypes=NO_BOOL,
             samples=lambda: [Sample(arr((3, 4)), arr((3, 4), 1)),
                              Sample(arr((3, 4), 2), arr((4,), 3), desc="broadcast")])
      for n in ("max", "min")],
    OpInfo("argmax_nan", op=lambda x: dl.argmax(x, 1), ref=lambda x: torch.argmax(x, 1),
           grad=False, samples=lambda: [Sample(np.array([[1.0, np.nan, 2.0],
                                                         [np.nan, 3.0, np.nan]]))]),
    OpInfo("var", op=lambda x, **k: dl.var(x, **k), ref=lambda x, **k: torch.var(x, **k),
           samples=_var_samples, dtypes=ALL_FLOATS),
    OpInfo("std", op=lambda x, **k: dl.std(x, **k), ref=lambda x, **k: torch.std(x, **k),
           samples=_var_samples, dtypes=ALL_FLOATS),
    # PyTorch's positional overloads: (dim, unbiased, keepdim) and (unbiased) alone
    *[OpInfo(f"{n}_positional", op=lambda x, *a, n=n: getattr(x, n)(*a),
             ref=lambda x, *a, n=n: getattr(x, n)(*a),
             samples=lambda: [Sample(arr((3, 5)), 0, False, desc="dim, unbiased=False"),
                              Sample(arr((3, 5), 1), 1, True, True,
                                     desc="dim, unbiased, keepdim"),
                              Sample(arr((3, 5), 2), False, desc="unbiased=False alone"),
                              Sample(arr((2, 3, 4), 3), (0, 2), False, True,
                                     desc="dims, biased, keepdim")])
      for n in ("var", "std")],
    # ---- rows ------------------------------------------------------------------------------
    OpInfo("softmax", op=lambda x, d: dl.softmax(x, d), ref=lambda x, d: torch.softmax(x, d),
           samples=_rows_samples(), dtypes=ALL_FLOATS),
    OpInfo("log_softmax", op=lambda x, d: dl.log_softmax(x, d),
           ref=lambda x, d: torch.log_softmax(x, d), samples=_rows_samples(),
           dtypes=ALL_FLOATS),
    OpInfo("softmax_method", op=lambda x, d: x.softmax(d), ref=lambda x, d: x.softmax(d),
           samples=lambda: _rows_samples(False)()[:2]),
    # no dim: PyTorch's legacy implicit dim (1 for 2-D and 4-D, 0 for 1-D and 3-D), warned
    *[OpInfo(f"{n}_implicit_dim", op=lambda x, n=n: _warned(getattr(dl.nn.functional, n), x),
             ref=lambda x, n=n: _warned(getattr(TF, n), x),
             samples=lambda: [Sample(arr((5,))), Sample(arr((3, 4), 1)),
                              Sample(arr((2, 3, 4), 2)), Sample(arr((2, 3, 2, 2), 3))])
      for n in ("softmax", "log_softmax")],
    OpInfo("layer_norm", op=lambda x, ns, w, b: dl.layer_norm(x, ns, w, b),
           ref=lambda x, ns, w, b: TF.layer_norm(x, (ns,) if isinstance(ns, int) else ns,
                                                 w, b),
           samples=_ln_samples, dtypes=ALL_FLOATS, tol={dl.float32: (1e-4, 1e-5)}),
    # ---- matrix products ---------------------------------------------------------------
    OpInfo("matmul", op=lambda a, b: dl.matmul(a, b), ref=torch.matmul, samples=_mm_samples(
        "matmul"), dtypes=ALL_FLOATS, tol={dl.float32: (1e-5, 1e-5)}),
    OpInfo("__matmul__", op=lambda a, b: a @ b, ref=lambda a, b: a @ b,
           samples=lambda: _mm_samples("mm")()[:2]),
    OpInfo("mm", op=lambda a, b: dl.mm(a, b), ref=torch.mm, samples=_mm_samples("mm"),
           dtypes=ALL_FLOATS),
    OpInfo("bmm", op=lambda a, b: dl.bmm(a, b), ref=torch.bmm, samples=_mm_samples("bmm"),
           dtypes=ALL_FLOATS),
    OpInfo("linear", op=lambda x, w, b: dl.linear(x, w, b), ref=TF.linear,
           samples=_linear_samples, dtypes=ALL_FLOATS, tol={dl.float32: (1e-5, 1e-5)}),
    *[OpInfo(f"linear_{act}", op=_linear_act(act),
             ref=ref, samples=lambda: _linear_samples()[:3], tol={dl.float32: (1e-5, 1e-5)},
             note="dl.linear takes a fused activation `act` (PyTorch's F.linear does not)")
      for act, ref in (("relu", lambda x, w, b: torch.relu(TF.linear(x, w, b))),
                       ("gelu", lambda x, w, b: TF.gelu(TF.linear(x, w, b))),
                       ("tanh", lambda x, w, b: torch.tanh(TF.linear(x, w, b))))],
]

"""Entries for the shape, view, copy and join ops dl had before the op table (commit
b41ee54): reshape/view, permute, transpose, expand, flatten, squeeze/unsqueeze, basic
indexing (getitem/setitem), cat/stack, gather/index_select, repeat, in-place fills and
copies, creation ops."""
from __future__ import annotations

import numpy as np
import torch

import dl

from .core import ALL, ALL_FLOATS, OpInfo, Sample, arr, iarr

E = Ellipsis


def _set(x, idx, v):
    x[idx] = v
    return x


def _copy(x, v):
    x.copy_(v)
    return x


def _getitem(idx):
    return lambda x: x[idx]


def _one_sample(shape, noncontig):
    return lambda: [Sample(arr(shape), noncontig=noncontig)]


def _tdt(name):
    return None if name is None else getattr(torch, name)


def _creation(mod, name):
    if mod is torch:
        return lambda size, dt=None: getattr(torch, name)(size, dtype=_tdt(dt))
    return lambda size, dt=None: getattr(dl, name)(size, dtype=dt)


def _creation_like(mod, name):
    return lambda x: getattr(mod, name)(x)


def _rand_props(mod, name):
    """(shape, dtype, in range, mean and std near the distribution's) of a random draw."""
    def props(*size):
        x = getattr(mod, name)(*size)
        a = np.asarray(x.numpy(), np.float64)
        lo, hi, mu, sd = (0.0, 1.0, 0.5, 12 ** -0.5) if name == "rand" else (
            -np.inf, np.inf, 0.0, 1.0)
        ok = bool(np.all((a >= lo) & (a < hi)))
        # Six standard errors of the mean (sd / sqrt(n)) and of the std (at most
        # sd / sqrt(2n), a normal's; a uniform's is smaller): a fair draw (dl's or torch's,
        # the reference is random too) misses about once in 10^8, a wrong distribution
        # (uniform for normal: std 0.29) never passes. 0.05 was 2.3 standard errors of a
        # 2048-sample mean: torch's own draw failed it.
        n = max(a.size, 1)
        moments = a.size == 0 or (abs(a.mean() - mu) < 6 * sd / np.sqrt(n)
                                  and abs(a.std() - sd) < 6 * sd / np.sqrt(2 * n))
        return tuple(x.shape), str(x.dtype).replace("torch.", "").replace("dl.", ""), ok, \
            bool(moments)
    return props


def _view_samples(args_list):
    """Samples of x (3-D (2, 3, 4) unless given) with the op's extra args."""
    def samples():
        return [Sample(arr(shape, i), *a, noncontig=nc, desc=d)
                for i, (shape, a, nc, d) in enumerate(args_list)]
    return samples


def _shape_op(name, fn, ref, cases, dtypes=ALL, **kw):
    return OpInfo(name, op=fn, ref=ref, samples=_view_samples(cases), dtypes=dtypes, **kw)


_IDX = [((5, 6), (1,), False, "int"),
        ((5, 6), (-1,), True, "negative int, transposed view"),
        ((5, 6), (slice(1, 4),), False, "slice"),
        ((5, 6), ((slice(None), slice(0, 6, 2)),), True, "step 2 on a view"),
        ((2, 3, 4), ((E, 1),), False, "ellipsis"),
        ((2, 3, 4), ((None, 1, slice(None), None),), False, "None"),
        ((5, 6), ((slice(3, 3),),), False, "empty slice"),
        ((5, 6), ((2, 3),), False, "scalar element"),
        ((0, 4), ((slice(None), 1),), False, "size 0")]

OPS = [
    _shape_op("reshape", lambda x, *s: dl.reshape(x, *s), lambda x, *s: torch.reshape(x, s),
              [((2, 3, 4), (6, 4), False, ""), ((4, 6), (-1,), True, "transposed: a copy"),
               ((2, 3, 4), (4, -1, 2), False, "-1"), ((0, 3), (3, 0), False, "size 0"),
               ((1, 1), (), False, "to 0-dim")]),
    _shape_op("view", lambda x, *s: x.view(*s), lambda x, *s: x.view(s),
              [((2, 3, 4), (6, 4), False, ""), ((2, 3, 4), (2, 12), False, ""),
               ((1,), (), False, "to 0-dim")]),
    _shape_op("flatten", lambda x, *a: dl.flatten(x, *a), lambda x, *a: torch.flatten(x, *a),
              [((2, 3, 4), (), False, ""), ((2, 3, 4), (1,), True, "from dim 1, a view"),
               ((2, 3, 4, 5), (1, 2), False, "middle dims"), ((), (), False, "0-dim")]),
    _shape_op("permute", lambda x, *d: dl.permute(x, *d), lambda x, *d: x.permute(*d),
              [((2, 3, 4), (2, 0, 1), False, ""), ((3, 4), (1, 0), True, "of a view"),
               ((2, 0, 3), (1, 2, 0), False, "size 0"), ((2, 3), (-1, -2), False, "negative")]),
    _shape_op("transpose", lambda x, a, b: dl.transpose(x, a, b),
              lambda x, a, b: torch.transpose(x, a, b),
              [((2, 3, 4), (0, 2), False, ""), ((3, 4), (0, 1), True, "of a view"),
               ((2, 3, 4), (-1, 1), False, "negative")]),
    _shape_op("swapaxes", lambda x, a, b: x.swapaxes(a, b),
              lambda x, a, b: x.swapaxes(a, b), [((2, 3, 4), (0, 2), False, "")]),
    _shape_op("t", lambda x: dl.t(x), lambda x: torch.t(x),
              [((3, 4), (), False, ""), ((3, 4), (), True, "of a view"), ((5,), (), False, "1-D")]),
    _shape_op("T", lambda x: x.T, lambda x: x.T, [((3, 4), (), False, "")]),
    _shape_op("mT", lambda x: x.mT, lambda x: x.mT, [((2, 3, 4), (), False, "")]),
    _shape_op("squeeze", lambda x, *d: dl.squeeze(x, *d), lambda x, *d: torch.squeeze(x, *d),
              [((2, 1, 3, 1), (), False, "all"), ((2, 1, 3), (1,), False, "one dim"),
               ((2, 3), (0,), False, "not size 1: unchanged"), ((1, 1), (), True, "to 0-dim")]),
    _shape_op("unsqueeze", lambda x, d: dl.unsqueeze(x, d), lambda x, d: torch.unsqueeze(x, d),
              [((2, 3), (1,), False, ""), ((2, 3), (-1,), True, "last, of a view"),
               ((), (0,), False, "0-dim"), ((0, 3), (0,), False, "size 0")]),
    _shape_op("expand", lambda x, *s: dl.expand(x, *s), lambda x, *s: x.expand(*s),
              [((3, 1), (3, 4), False, ""), ((1, 3), (2, 4, 3), False, "new dims"),
               ((3, 1), (-1, 5), False, "-1"), ((1,), (0,), False, "to size 0"),
               ((2, 1), (2, 3), True, "of a view")]),
    _shape_op("broadcast_to", lambda x, s: dl.broadcast_to(x, s),
              lambda x, s: torch.broadcast_to(x, s),
              [((3, 1), ((2, 3, 4),), False, "")]),
    OpInfo("expand_as", op=lambda x, o: x.expand_as(o), ref=lambda x, o: x.expand_as(o),
           samples=lambda: [Sample(arr((3, 1)), arr((2, 3, 4), 1), grad=(0,))]),
    OpInfo("repeat", op=lambda x, *s: dl.repeat(x, *s), ref=lambda x, *s: x.repeat(*s),
           dtypes=ALL, samples=lambda: [
               Sample(arr((2, 3)), 2, 3), Sample(arr((2, 3), 1), 2, 1, 2, desc="more dims"),
               Sample(arr((3, 4), 2), 1, 2, noncontig=True, desc="of a view"),
               Sample(arr((2, 3), 3), 0, 1, desc="zero repeats")]),
    OpInfo("contiguous", op=lambda x: dl.contiguous(x), ref=lambda x: x.contiguous(),
           dtypes=ALL, samples=lambda: [Sample(arr((3, 4)), noncontig=True),
                                        Sample(arr((3, 4), 1))]),
    OpInfo("clone", op=lambda x: dl.clone(x), ref=lambda x: torch.clone(x), dtypes=ALL,
           samples=lambda: [Sample(arr((3, 4))), Sample(arr((3, 4), 1), noncontig=True),
                            Sample(arr((0, 2)), desc="size 0")]),
    OpInfo("detach", op=lambda x: dl.detach(x), ref=lambda x: x.detach(), grad=False,
           samples=lambda: [Sample(arr((3, 4)))]),
    # ---- indexing ----------------------------------------------------------------------
    *[OpInfo(f"getitem_{d.replace(' ', '_').replace(',', '')}", op=_getitem(idx),
             ref=_getitem(idx), dtypes=ALL,
             samples=_one_sample(shape, nc))
      for shape, (idx,), nc, d in _IDX],
    OpInfo("setitem_slice", op=lambda x, v: _set(x, (slice(1, 3), slice(None, None, 2)), v),
           ref=lambda x, v: _set(x, (slice(1, 3), slice(None, None, 2)), v), dtypes=ALL,
           inplace=True, grad=False,
           samples=lambda: [Sample(arr((4, 6)), arr((2, 3), 1)),
                            Sample(arr((4, 6), 2), arr((3,), 3), noncontig=True,
                                   desc="broadcast value into a view"),
                            Sample(arr((4, 6), 4), 2.5, desc="python scalar")]),
    OpInfo("setitem_int", op=lambda x, v: _set(x, 1, v), ref=lambda x, v: _set(x, 1, v),
           inplace=True, grad=False, dtypes=ALL,
           samples=lambda: [Sample(arr((3, 4)), arr((4,), 1)),
                            Sample(arr((3, 4), 2), -0.0, desc="-0.0")], signed_zero=True),
    OpInfo("setitem_grad", op=lambda x, v: _set(x * 1.0, (slice(0, 2),), v),
           ref=lambda x, v: _set(x * 1.0, (slice(0, 2),), v),
           samples=lambda: [Sample(arr((3, 4)), arr((2, 4), 1)),
                            Sample(arr((3, 4), 2), arr((4,), 3), desc="broadcast value")]),
    # ---- joins ---------------------------------------------------------------------------
    OpInfo("cat", op=lambda a, b, d: dl.cat([a, b], d), ref=lambda a, b, d: torch.cat([a, b], d),
           dtypes=ALL, samples=lambda: [
               Sample(arr((2, 3)), arr((4, 3), 1), 0),
               Sample(arr((3, 2), 2), arr((3, 5), 3), 1, noncontig=True, desc="views, dim 1"),
               Sample(arr((2, 3, 4), 4), arr((2, 1, 4), 5), -2, desc="negative dim"),
               Sample(arr((0, 3)), arr((2, 3), 6), 0, desc="size 0 part"),
               Sample(arr((0,)), arr((2, 3), 7), 0, grad=(1,), desc="legacy empty 1-D")],
           note="cat skips a legacy empty 1-D part: it gets no gradient (PyTorch: an empty "
                "one)"),
    OpInfo("cat_dtypes", op=lambda a, b: dl.cat([a, b.to(dl.float64)]),
           ref=lambda a, b: torch.cat([a, b.double()]), dtypes=(dl.float32, dl.float16),
           samples=lambda: [Sample(arr((2, 3)), arr((1, 3), 1))]),
    OpInfo("concat", op=lambda a, b: dl.ops.OPS["concat"]([a, b], 1),
           ref=lambda a, b: torch.concat([a, b], 1),
           samples=lambda: [Sample(arr((2, 3)), arr((2, 2), 1))]),
    OpInfo("stack", op=lambda a, b, d: dl.stack([a, b], d),
           ref=lambda a, b, d: torch.stack([a, b], d), dtypes=ALL, samples=lambda: [
               Sample(arr((2, 3)), arr((2, 3), 1), 0),
               Sample(arr((3, 4), 2), arr((3, 4), 3), 2, noncontig=True, desc="last, views"),
               Sample(arr((0, 3)), arr((0, 3)), 1, desc="size 0"),
               Sample(arr(()), arr((), 4), 0, desc="0-dim")]),
    OpInfo("gather", op=lambda x, d, i: dl.gather(x, d, i),
           ref=lambda x, d, i: torch.gather(x, d, i), dtypes=ALL, samples=lambda: [
               Sample(arr((3, 5)), 1, iarr((3, 4), 5)),
               Sample(arr((4, 6), 1), 0, iarr((2, 6), 4, 1), noncontig=True,
                      desc="dim 0 of a view"),
               Sample(arr((3, 5), 2), 1, iarr((2, 3), 5, 2), desc="smaller index"),
               Sample(arr((3, 5), 3), 1, np.array([[0, 0], [4, 4], [2, 2]]),
                      desc="repeated: grads accumulate"),
               Sample(arr((3, 5), 4), 1, iarr((3, 0), 5), desc="size-0 index")]),
    OpInfo("index_select", op=lambda x, d, i: dl.index_select(x, d, i),
           ref=lambda x, d, i: torch.index_select(x, d, i), dtypes=ALL, samples=lambda: [
               Sample(arr((4, 5)), 0, np.array([3, 0, 3])),
               Sample(arr((4, 6), 1), 1, np.array([5, 1]), noncontig=True, desc="dim 1, view"),
               Sample(arr((4, 5), 2), 0, np.array([], np.int64), desc="empty index"),
               Sample(arr((2, 3, 4), 3), -1, np.array([0, 0, 3]), desc="negative dim")]),
    # ---- in place ------------------------------------------------------------------------
    OpInfo("zero_", op=lambda x: x.zero_(), ref=lambda x: x.zero_(), inplace=True, grad=False,
           dtypes=ALL, samples=lambda: [Sample(arr((3, 4))),
                                        Sample(arr((3, 4), 1), noncontig=True)]),
    OpInfo("fill_", op=lambda x, v: x.fill_(v), ref=lambda x, v: x.fill_(v), inplace=True,
           grad=False, dtypes=ALL, signed_zero=True,
           samples=lambda: [Sample(arr((3, 4)), 1.5), Sample(arr((3, 4), 1), -0.0,
                                                             noncontig=True, desc="-0.0")]),
    OpInfo("copy_", op=_copy, ref=_copy, inplace=True, grad=False, dtypes=ALL,
           samples=lambda: [Sample(arr((3, 4)), arr((3, 4), 1)),
                            Sample(arr((3, 4), 2), arr((4,), 3), noncontig=True,
                                   desc="broadcast into a view"),
                            Sample(arr((3, 4), 4), arr((3, 4), 5).astype(np.int64),
                                   desc="from int64")]),
    # ---- creation (no tensor inputs: the dtype under test is the requested one) ---------
    *[OpInfo(f"{n}_creation", op=_creation(dl, n), ref=_creation(torch, n), grad=False,
             samples=lambda: [Sample((2, 3)), Sample((0, 4), desc="size 0"),
                              Sample((), desc="0-dim"), Sample((2,), "int64"),
                              Sample((3,), "bool"), Sample((2, 2), "float16"),
                              Sample((2, 2), "bfloat16"), Sample((1, 2), "float64")])
      for n in ("zeros", "ones")],
    OpInfo("full", op=lambda s, v, dt=None: dl.full(s, v, dtype=dt),
           ref=lambda s, v, dt=None: torch.full(s, v, dtype=_tdt(dt)), grad=False,
           signed_zero=True,
           samples=lambda: [Sample((2, 3), 1.5), Sample((2,), -0.0, "float64"),
                            Sample((0, 2), 1), Sample((2,), True), Sample((3,), 2, "int32"),
                            Sample((2, 2), 0.1, "float16")]),
    OpInfo("arange", op=lambda *a: dl.arange(*a), ref=lambda *a: torch.arange(*a), grad=False,
           samples=lambda: [Sample(5), Sample(2, 9, 3), Sample(0.5, 2.0, 0.25),
                            Sample(3, 3), Sample(-1.0, 1.0)]),
    # an integer dtype truncates float arguments first, as PyTorch (0.5..5.2 by 1.5: 0..4)
    OpInfo("arange_int_dtype", op=lambda *a: dl.arange(*a, dtype=dl.int64),
           ref=lambda *a: torch.arange(*a, dtype=torch.int64), grad=False,
           samples=lambda: [Sample(0.5, 5.2, 1.5), Sample(-2.5, 2.5, 1.5),
                            Sample(0, 5.9, 2.9)]),
    OpInfo("eye", op=lambda *a: dl.eye(*a), ref=lambda *a: torch.eye(*a), grad=False,
           samples=lambda: [Sample(3), Sample(2, 4), Sample(0)]),
    *[OpInfo(f"{n}", op=_creation_like(dl, n), ref=_creation_like(torch, n), grad=False,
             dtypes=ALL, samples=lambda: [Sample(arr((2, 3))), Sample(arr((0, 3)))])
      for n in ("zeros_like", "ones_like")],
    OpInfo("full_like", op=lambda x: dl.full_like(x, 2.5), ref=lambda x: torch.full_like(x, 2.5),
           grad=False, dtypes=ALL_FLOATS, samples=lambda: [Sample(arr((2, 3)))]),
    OpInfo("type_as", op=lambda x, o: x.type_as(o), ref=lambda x, o: x.type_as(o), dtypes=ALL,
           grad=False, samples=lambda: [Sample(arr((2, 3)), arr((1,), 1).astype(np.int64)),
                                        Sample(arr((2, 3), 2), np.array([True]))]),
    OpInfo("cpu", op=lambda x: x.cpu(), ref=lambda x: x.cpu(), dtypes=ALL, grad=False,
           samples=lambda: [Sample(arr((2, 3))), Sample(arr((3, 4), 1), noncontig=True)]),
    OpInfo("requires_grad_", op=lambda x: x.detach().requires_grad_().requires_grad,
           ref=lambda x: x.detach().requires_grad_().requires_grad, grad=False,
           samples=lambda: [Sample(arr((2, 3)))]),
    OpInfo("concatenate", op=lambda a, b: dl.ops.OPS["concatenate"]([a, b], 0),
           ref=lambda a, b: torch.concatenate([a, b], 0),
           samples=lambda: [Sample(arr((2, 3)), arr((1, 3), 1))]),
    *[OpInfo(f"{n}_properties", op=_rand_props(dl, n), ref=_rand_props(torch, n),
             grad=False, dtypes=(dl.float32,), samples=lambda: [Sample(64, 32),
                                                                Sample(0, 3)],
             note="rand/randn draw from dl's counter-based generator: not torch's stream "
                  "(the entry compares shape, dtype, range and moments only)")
      for n in ("rand", "randn")],
    # ---- Python values -------------------------------------------------------------------
    OpInfo("item", op=lambda x: x.item(), ref=lambda x: x.item(), dtypes=ALL, grad=False,
           samples=lambda: [Sample(arr((), 0, -3, 3)), Sample(arr((1, 1), 1, -3, 3)),
                            Sample(np.array([np.nan]), desc="nan")]),
    OpInfo("tolist", op=lambda x: x.tolist(), ref=lambda x: x.tolist(), dtypes=ALL,
           grad=False, samples=lambda: [Sample(arr((2, 3), 0, -3, 3)),
                                        Sample(arr((3, 2), 1, -3, 3), noncontig=True),
                                        Sample(arr((), 2, -3, 3), desc="0-dim")]),
    OpInfo("numel_dim_size", op=lambda x: (x.numel(), x.dim(), x.size(), x.size(-1), x.ndim),
           ref=lambda x: (x.numel(), x.dim(), x.size(), x.size(-1), x.ndim), grad=False,
           samples=lambda: [Sample(arr((2, 3, 4))), Sample(arr((0, 5)), desc="size 0")]),
    OpInfo("tensor", op=lambda v: dl.tensor(v), ref=lambda v: torch.tensor(v), grad=False,
           samples=lambda: [Sample([[1.5, 2.0], [3.0, -0.0]]), Sample([1, 2, 3]),
                            Sample([True, False]), Sample(2.5), Sample(7)]),
]

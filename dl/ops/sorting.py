"""Scans, sorting and selection: cumsum/cumprod, sort/topk, searchsorted, bincount, histc (issue
17).

Every op runs on the kernel library: scans on dl/kernels/scan.py (a block scan per row, with a
multi-block pass for long rows), sort, argsort, topk, kthvalue and median on the stable
bitonic sort of dl/kernels/sort.py, searchsorted, bincount and histc on dl/kernels/hist.py.
The op's dim is moved last and the leading dims flattened into rows (a copy only where the
view does not allow it). `unique`, `bincount` and `histc` (with min = max) read values on the
host, as PyTorch does (they synchronise).

Where dl differs from PyTorch:
- indices are int64, or int32 on devices without 64-bit ints (the wgpu runtimes);
- every sort is stable (`stable=False` gives the stable order too); `topk(sorted=False)`
  returns the values sorted; `unique(sorted=False)` returns them sorted;
- `unique` takes dim=None only;
- bincount's and histc's float sums use atomics: the order of the additions (the last bits
  of a weighted bincount) may vary between runs.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes, shapes
from ..autograd import no_grad, record, saved_output
from ..kernels import hist as lib_hist
from ..kernels import scan as lib_scan
from ..kernels import sort as lib_sort
from ..tensor import Tensor
from .creation import tensor as _tensor
from .creation import zeros
from .elementwise import cast, check_dtype, where
from .libcall import counted, operand
from .registry import register
from .shape import contiguous, reshape

__all__ = ["cumsum", "cumprod", "logcumsumexp", "sort", "argsort", "topk", "kthvalue",
           "median", "unique", "searchsorted", "bincount", "histc"]


class _Ret(tuple):
    """A (values, indices) pair with names, as PyTorch's torch.return_types."""

    _name = "result"

    def __new__(cls, values, indices):
        return super().__new__(cls, (values, indices))

    values = property(lambda self: self[0])
    indices = property(lambda self: self[1])

    def __repr__(self) -> str:
        return f"dl.return_types.{self._name}(values={self[0]!r}, indices={self[1]!r})"


def _ret(name: str):
    return type(name, (_Ret,), {"_name": name, "__doc__": f"{name}'s (values, indices) pair, "
                                f"as torch.return_types.{name}."})


SortResult, TopkResult = _ret("sort"), _ret("topk")
KthvalueResult, MedianResult = _ret("kthvalue"), _ret("median")


# ---- helpers -----------------------------------------------------------------------------

def _compute_dtype(dt):
    """The type a kernel runs in: halves in float32, bool in int32."""
    if dt.is_float:
        return dtypes.float32 if dt.itemsize == 2 else dt
    return dtypes.int32 if dt is dtypes.bool_ else dt


_BOOL_HINT = " (as PyTorch's; .int() first)"


class _Rows:
    """x with `dim` moved last, seen as (rows, n): `t` (a tensor, materialised, no autograd)
    and the way back to x's layout."""

    def __init__(self, x: Tensor, dim, what: str):
        self.ndim = x.ndim
        if x.ndim == 0:
            if dim not in (None, 0, -1):
                raise IndexError(f"{what}: dim {dim} out of range for a 0-d tensor")
            self.d, self.last = 0, 0
            xm = reshape(x.detach(), 1)
        else:
            self.d = shapes.norm_dim(dim, x.ndim)
            self.last = x.ndim - 1
            xm = x.detach()
            if self.d != self.last:
                xm = xm.transpose(self.d, self.last)
        self.moved = xm.shape
        self.n = xm.shape[-1]
        self.rows = shapes.numel(xm.shape[:-1])
        with no_grad():
            self.t = reshape(xm, self.rows, self.n)._materialise()

    def back(self, t2: Tensor, width: int | None = None) -> Tensor:
        """A (rows, width) result in x's layout (dim of size width)."""
        width = self.n if width is None else width
        shape = self.moved[:-1] + (width,)
        y = reshape(t2, *shape) if shape else reshape(t2, ())
        if self.ndim == 0:
            return reshape(y, ())
        return y if self.d == self.last else y.transpose(self.d, self.last)

    def to_rows(self, g: Tensor) -> Tensor:
        """A tensor in x's layout (dim of any size) as contiguous (rows, size) rows."""
        if self.ndim == 0:
            return reshape(g, 1, 1)
        gm = g if self.d == self.last else g.transpose(self.d, self.last)
        return contiguous(reshape(gm, self.rows, gm.shape[-1]))


def _out2(rows: int, width: int, dtype, device) -> Tensor:
    return Tensor._empty((rows, width), dtype, device)


def _as_lib(t: Tensor):
    return operand(t)


# ---- scans -------------------------------------------------------------------------------

def _scan_rows(t2: Tensor, op: str, rev: bool = False) -> Tensor:
    """The inclusive scan of the (rows, n) tensor t2 (a compute dtype) along its rows."""
    t2 = t2._materialise()
    out = _out2(t2.shape[0], t2.shape[1], t2.dtype, t2.device)
    if t2.numel():
        counted("scan", lib_scan.scan, t2.device.rt, _as_lib(t2), _as_lib(out), op, rev)
    return out


def _scan(x: Tensor, dim, op: str, dtype, rev: bool = False, name: str = "cumsum") -> Tensor:
    """(the scan of x along dim in x's layout, the _Rows): no autograd."""
    if dtype is not None:
        x = cast(x, dtypes.get(dtype))
    out_dt = x.dtype
    if dtype is None and op != "logsumexp" and not out_dt.is_float:
        # ints and bools accumulate in int64, as PyTorch (a dtype given is the result's:
        # cumsum(dtype=int32) of int64 is int32 there too)
        out_dt = dtypes.index_dtype(x.device)
    r = _Rows(x, dim, name)
    src = r.t
    cdt = _compute_dtype(out_dt)
    if src.dtype is not cdt:
        src = cast(src, cdt)
    y = _scan_rows(src, op, rev)
    if y.dtype is not out_dt:
        y = cast(y, out_dt)
    return r.back(y), r


def _rev_cumsum(g: Tensor, dim: int) -> Tensor:
    return _scan(g, dim, "sum", None, rev=True)[0]


@register("cumsum", method=True)
def cumsum(x: Tensor, dim: int, dtype=None) -> Tensor:
    """The cumulative sum of x along `dim`: y[i] = x[0] + ... + x[i].

    Integer and bool tensors give int64 (int32 on devices without 64-bit ints), as PyTorch;
    `dtype` casts x first and is the result's; float16/bfloat16 accumulate in float32. A
    block scan per row on the device (a multi-block pass for long rows). Differentiable:
    the gradient is the reverse cumulative sum. Also `t.cumsum(dim)`."""
    y, r = _scan(x, dim, "sum", dtype, name="cumsum")
    if y.dtype.is_float:
        d = r.d
        record(y, "cumsum", (x,), lambda g: (cast(_rev_cumsum(g, d), x.dtype),))
    return y


@register("cumprod", method=True)
def cumprod(x: Tensor, dim: int, dtype=None) -> Tensor:
    """The cumulative product of x along `dim`: y[i] = x[0] * ... * x[i].

    dtypes as cumsum (ints and bools give int64). Differentiable, correct with zeros in the
    input (PyTorch's rule: positions before a row's first zero get sum_{j>=i} g_j y_j / x_i,
    the first zero gets the reverse sum of g times the product with that zero left out,
    later positions 0). Also `t.cumprod(dim)`."""
    y, r = _scan(x, dim, "prod", dtype, name="cumprod")
    if y.dtype.is_float:
        d = r.d
        ys = saved_output(y)

        def back(g):
            xd, yd = x.detach(), ys
            if xd.dtype is not yd.dtype:
                xd = cast(xd, yd.dtype)
            zero = xd == 0
            nz = _scan(zero, d, "sum", None)[0]  # zeros up to and including i
            before = nz == 0
            first = zero & (nz == 1)
            safe = where(before, xd, 1.0)
            ga = _rev_cumsum(g * yd, d) / safe
            x1 = where(first, 1.0, xd)
            y1 = _scan(x1, d, "prod", None)[0]
            gz = _rev_cumsum(g * y1, d)
            gx = where(before, ga, where(first, gz, 0.0))
            return (cast(gx, x.dtype),)
        record(y, "cumprod", (x,), back, saved=ys)
    return y


@register("logcumsumexp", method=True)
def logcumsumexp(x: Tensor, dim: int) -> Tensor:
    """log(cumsum(exp(x))) along `dim`, computed without overflow (a scan of logaddexp).

    Float tensors only. Differentiable: the gradient exp(x_i) * sum_{j>=i} g_j exp(-y_j) is
    computed as PyTorch's, with reverse log-cumsum-exps of log(g+) - y and log(g-) - y.
    Also `t.logcumsumexp(dim)`."""
    if not x.dtype.is_float:
        raise TypeError(f"logcumsumexp takes float tensors, got {x.dtype}")
    y, r = _scan(x, dim, "logsumexp", None, name="logcumsumexp")
    d = r.d
    ys = saved_output(y)

    def back(g):
        xd, yd = x.detach(), ys
        gp = where(g > 0, g, 0.0).log() - yd
        gn = where(g < 0, -g, 0.0).log() - yd
        rp = _scan(gp, d, "logsumexp", None, rev=True)[0]
        rn = _scan(gn, d, "logsumexp", None, rev=True)[0]
        return (cast((rp + xd).exp() - (rn + xd).exp(), x.dtype),)
    return record(y, "logcumsumexp", (x,), back, saved=ys)


# ---- sorting and selection ---------------------------------------------------------------

def _sorted_rows(r: _Rows, descending: bool, lo: int, hi: int, dtype):
    """Positions lo..hi-1 of each sorted row: (values (rows, hi-lo) in x's dtype, indices)."""
    src = r.t
    cdt = _compute_dtype(src.dtype)
    if src.dtype is not cdt:
        src = cast(src, cdt)._materialise()
    idt = dtypes.index_dtype(src.device)
    vals = _out2(r.rows, hi - lo, cdt, src.device)
    inds = _out2(r.rows, hi - lo, idt, src.device)
    if r.rows and hi > lo:
        counted("sort", lib_sort.sort_rows, src.device.rt, _as_lib(src), _as_lib(vals),
                _as_lib(inds), bool(descending), lo, hi)
    if vals.dtype is not dtype:
        vals = cast(vals, dtype)
    return vals, inds


def _record_select(vals: Tensor, x: Tensor, r: _Rows, inds2: Tensor, name: str) -> Tensor:
    """The gradient of selected values: g scattered back to the chosen indices."""
    if not x.dtype.is_float:
        return vals
    n, rows = r.n, r.rows

    def back(g):
        if r.ndim and g.ndim < r.ndim:  # keepdim=False removed dim
            g = g.unsqueeze(r.d)
        g2 = r.to_rows(g)
        if g2.dtype is not _compute_dtype(g2.dtype):
            g2 = cast(g2, _compute_dtype(g2.dtype))
        g2 = contiguous(g2)._materialise()
        out = zeros(rows, n, dtype=g2.dtype, device=g2.device)._materialise()
        if g2.numel():
            counted("scatter_rows", lib_sort.scatter_rows, g2.device.rt, _as_lib(g2),
                    _as_lib(inds2), _as_lib(out))
        return (cast(r.back(out), x.dtype),)
    return record(vals, name, (x,), back)


@register("sort", method=True)
def sort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):
    """x sorted along `dim`: a (values, indices) named pair, indices into x along dim.

    nan sorts as the largest value (last, or first when descending), as PyTorch. Every sort
    is stable here (equal values keep their order; `stable=False` gives that order too).
    Indices are int64 (int32 on devices without 64-bit ints). A bitonic sort per row on the
    device. The values are differentiable (the gradient goes back to the indices). Also
    `t.sort(dim)`."""
    r = _Rows(x, dim, "sort")
    vals2, inds2 = _sorted_rows(r, descending, 0, r.n, x.dtype)
    vals, inds = r.back(vals2), r.back(inds2)
    return SortResult(_record_select(vals, x, r, inds2, "sort"), inds)


@register("argsort", method=True)
def argsort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):
    """The indices that sort x along `dim` (sort's indices; stable). Also `t.argsort()`."""
    return sort(x.detach(), dim, descending, stable).indices


@register("topk", method=True)
def topk(x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):  # noqa: A002
    """The k largest (or, `largest=False`, smallest) entries of x along `dim`: a (values,
    indices) named pair, in sorted order (also with `sorted=False`).

    nan counts as the largest value; among equal values the lower index comes first. The
    values are differentiable. Also `t.topk(k)`."""
    check_dtype("topk", x.dtype, "no_bool", _BOOL_HINT)
    r = _Rows(x, dim, "topk")
    k = int(k)
    if not 0 <= k <= r.n:
        raise RuntimeError(f"topk: k ({k}) is out of range for dimension {dim} of size {r.n} "
                           f"(input shape {tuple(x.shape)})")
    vals2, inds2 = _sorted_rows(r, largest, 0, k, x.dtype)
    vals, inds = r.back(vals2, k), r.back(inds2, k)
    return TopkResult(_record_select(vals, x, r, inds2, "topk"), inds)


def _squeeze(t: Tensor, r: _Rows, keepdim: bool) -> Tensor:
    if keepdim or r.ndim == 0:
        return t
    return t.squeeze(r.d)


def _pick(x: Tensor, r: _Rows, pos: int, keepdim: bool, name: str, cls):
    """The entry at sorted position pos of each row (kthvalue, median)."""
    vals2, inds2 = _sorted_rows(r, False, pos, pos + 1, x.dtype)
    vals = _squeeze(r.back(vals2, 1), r, keepdim)
    inds = _squeeze(r.back(inds2, 1), r, keepdim)
    return cls(_record_select(vals, x, r, inds2, name), inds)


@register("kthvalue", method=True)
def kthvalue(x: Tensor, k: int, dim: int = -1, keepdim: bool = False):
    """The k-th smallest entry (k from 1) of x along `dim`: a (values, indices) named pair.

    nan counts as the largest value. keepdim keeps dim with size 1. The values are
    differentiable. Also `t.kthvalue(k, dim)`."""
    check_dtype("kthvalue", x.dtype, "no_bool", _BOOL_HINT)
    r = _Rows(x, dim, "kthvalue")
    k = int(k)
    if not 1 <= k <= r.n:
        raise RuntimeError(f"kthvalue: k ({k}) is out of range for dimension {dim} of size "
                           f"{r.n} (input shape {tuple(x.shape)})")
    return _pick(x, r, k - 1, keepdim, "kthvalue", KthvalueResult)


@register("median", method=True)
def median(x: Tensor, dim=None, keepdim: bool = False):
    """The lower median of x: element (n - 1) // 2 of the sorted values.

    No dim: the median of all elements (a 0-d tensor). With dim: a (values, indices) named
    pair along dim; keepdim keeps dim with size 1. A row holding nan gives nan (and, with
    dim, the index of its first nan), as PyTorch. The values are differentiable. Also
    `t.median()`."""
    check_dtype("median", x.dtype, "no_bool", _BOOL_HINT)
    if dim is None:
        if x.numel() == 0:
            raise RuntimeError("median() of an empty tensor")
        with no_grad():
            v = median(reshape(x.detach(), -1), 0).values
        if x.dtype.is_float:
            ys = saved_output(v)

            def back(g):  # shared evenly by the entries equal to the median (nan: the nans)
                xd, vd = x.detach(), ys
                hit = cast((xd == vd) | (~(xd == xd) & ~(vd == vd)), x.dtype)
                return (g * hit / hit.sum(),)
            record(v, "median", (x,), back, saved=ys)
        return v
    r = _Rows(x, dim, "median")
    if r.n == 0:
        raise RuntimeError(f"median: dimension {dim} of the input shape {tuple(x.shape)} is "
                           f"empty")
    m = (r.n - 1) // 2
    if not x.dtype.is_float:
        return _pick(x, r, m, keepdim, "median", MedianResult)
    # a row with nan: its first nan, at sorted position n - (number of nans)
    vals2, inds2 = _sorted_rows(r, False, 0, r.n, x.dtype)
    with no_grad():
        nans = cast(~(r.t == r.t), dtypes.float32).sum(1, keepdim=True)  # exact below 2**24
        pos = cast(where(nans > 0, r.n - nans, m), dtypes.int64
                   if inds2.dtype is dtypes.int64 else dtypes.int32)._materialise()
        v2 = vals2.gather(1, pos)._materialise()
        i2 = inds2.gather(1, pos)._materialise()
    vals = _squeeze(r.back(v2, 1), r, keepdim)
    inds = _squeeze(r.back(i2, 1), r, keepdim)
    return MedianResult(_record_select(vals, x, r, i2, "median"), inds)


@register("unique", method=True)
def unique(x: Tensor, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
           return_counts: bool = False, dim=None):
    """The distinct values of x (flattened), in ascending order.

    return_inverse: also the index of each element of x in the result (x's shape);
    return_counts: also how often each value occurs. Returns a tensor, or a tuple (values,
    inverse?, counts?) as PyTorch. Host-side: x is sorted on the device, then the host reads
    the sorted values to find where runs of equal values begin (a synchronisation). Always
    sorted (also with `sorted=False`); dim must be None. nan values are each distinct. Not
    differentiable."""
    if dim is not None:
        raise NotImplementedError("unique(dim=...) is not supported: dim must be None")
    flat = reshape(x.detach(), -1)
    s = sort(flat)
    v = s.values.numpy()
    perm = s.indices.numpy().astype(np.int64)
    starts = np.ones(v.shape[0], bool)
    if v.shape[0]:
        starts[1:] = v[1:] != v[:-1]
    pos = np.flatnonzero(starts)
    dev = x.device
    out = [_tensor(np.ascontiguousarray(v[pos]), dtype=x.dtype, device=dev)]
    idt = dtypes.index_dtype(x.device)
    if return_inverse:
        inv = np.empty(v.shape[0], np.int64)
        inv[perm] = np.cumsum(starts) - 1
        out.append(_tensor(inv.reshape(x.shape), dtype=idt, device=dev))
    if return_counts:
        counts = np.diff(np.append(pos, v.shape[0]))
        out.append(_tensor(counts.astype(np.int64), dtype=idt, device=dev))
    return out[0] if len(out) == 1 else tuple(out)


# ---- searching and counting --------------------------------------------------------------

@register("searchsorted")
def searchsorted(sorted_sequence: Tensor, input, *, out_int32: bool = False,  # noqa: A002
                 right: bool = False, side: str | None = None, sorter: Tensor | None = None):
    """Indices where the values `input` would be inserted into the rows of sorted_sequence
    (its last dim, ascending) to keep them sorted.

    sorted_sequence: 1-D (searched for every value) or with input's leading dims. right /
    side="right": the index after equal entries (default: before them). sorter: indices
    that sort sorted_sequence along its last dim. int64 (out_int32: int32). nan counts as
    the largest value. A binary search per value on the device."""
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise RuntimeError("searchsorted: side='left' and right=True contradict")
        right = side == "right"
    seq = sorted_sequence
    scalar = not isinstance(input, Tensor)
    vals = _tensor(input, device=seq.device) if scalar else input
    if sorter is not None:
        if sorter.shape != seq.shape:
            raise RuntimeError(f"searchsorted: sorter shape {tuple(sorter.shape)} differs "
                               f"from the sorted_sequence shape {tuple(seq.shape)}")
        seq = seq.detach().gather(seq.ndim - 1, sorter)
    if seq.ndim == 0:
        raise RuntimeError("searchsorted: sorted_sequence must have at least one dim")
    shared = seq.ndim == 1
    if not shared and (vals.ndim != seq.ndim or vals.shape[:-1] != seq.shape[:-1]):
        raise RuntimeError(f"searchsorted: the leading dims of sorted_sequence "
                           f"{tuple(seq.shape)} and input {tuple(vals.shape)} differ")
    dt = dtypes.promote(seq.dtype, vals.dtype)
    cdt = _compute_dtype(dt)
    m = seq.shape[-1]
    idt = dtypes.int32 if out_int32 else dtypes.index_dtype(seq.device)
    if vals.numel() == 0 or m == 0:
        return zeros(*vals.shape, dtype=idt, device=seq.device)
    s2 = contiguous(cast(reshape(seq.detach(), -1, m), cdt))._materialise()
    k = vals.shape[-1] if vals.ndim else 1
    v2 = contiguous(cast(reshape(vals.detach(), -1, k), cdt))._materialise()
    out = _out2(v2.shape[0], k, idt, seq.device)
    if out.numel():
        counted("searchsorted", lib_hist.searchsorted, seq.device.rt, _as_lib(s2),
                _as_lib(v2), _as_lib(out), bool(right), shared)
    return reshape(out, *vals.shape) if vals.ndim else reshape(out, ())


@register("bincount", method=True)
def bincount(x: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value 0, 1, ..., max(x) occurs in the 1-D non-negative integer tensor x
    (at least `minlength` bins).

    weights (x's shape): sums of the weights instead of counts, in the weights' float dtype
    (integer weights give float64, as PyTorch). Reads max(x) on the host (a synchronisation,
    as PyTorch). Counts are int64. Atomics on the device: weighted sums may differ in their
    last bits between runs. Not differentiable."""
    if x.ndim != 1 or x.dtype.is_float:
        raise RuntimeError(f"bincount: needs a 1-D integer tensor, got shape {tuple(x.shape)} "
                           f"of {x.dtype}")
    if minlength < 0:
        raise RuntimeError(f"bincount: minlength must be non-negative, got {minlength}")
    if weights is not None and weights.shape != x.shape:
        raise RuntimeError(f"bincount: weights of shape {tuple(weights.shape)} must have the "
                           f"input's shape {tuple(x.shape)}")
    xi = contiguous(cast(x.detach(), dtypes.int32))._materialise()
    if x.numel():
        xf = cast(x.detach(), dtypes.float64 if getattr(x.device.rt.features, "f64", True)
                  else dtypes.float32)  # the library reduces floats (exact below 2**24)
        lo = int(xf.amin().item())
        if lo < 0:
            raise RuntimeError("bincount: the input must be non-negative")
        hi = int(xf.amax().item())
    else:
        hi = -1
    nb = max(hi + 1, int(minlength))
    dev = x.device
    if weights is None:
        odt = dtypes.index_dtype(x.device)
        counts = zeros(nb, dtype=dtypes.int32, device=dev)._materialise()
        if x.numel() and nb:
            counted("bincount", lib_hist.bincount, dev.rt, _as_lib(xi), None, _as_lib(counts))
        return cast(counts, odt)
    wdt = weights.dtype if weights.dtype.is_float else (
        dtypes.float64 if getattr(dev.rt.features, "f64", True) else dtypes.float32)
    cdt = _compute_dtype(wdt)
    w = contiguous(cast(weights.detach(), cdt))._materialise()
    sums = zeros(nb, dtype=cdt, device=dev)._materialise()
    if x.numel() and nb:
        counted("bincount", lib_hist.bincount, dev.rt, _as_lib(xi), _as_lib(w), _as_lib(sums))
    return sums if cdt is wdt else cast(sums, wdt)


@register("histc", method=True)
def histc(x: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
    """A histogram of x's values: `bins` equal-width bins over [min, max] (a value equal to
    max goes into the last bin; values outside, and nan, are ignored).

    min = max (the default 0, 0) uses the data's range (read on the host: a
    synchronisation), widened by 1 either side when all values are equal. Float tensors;
    the counts come in x's dtype. Atomics on the device. Not differentiable."""
    if not x.dtype.is_float:
        raise RuntimeError(f"histc: needs a float tensor, got {x.dtype}")
    bins = int(bins)
    if bins <= 0:
        raise RuntimeError(f"histc: bins must be > 0, got {bins}")
    lo, hi = float(min), float(max)
    if lo > hi:
        raise RuntimeError(f"histc: max ({hi}) must be larger than min ({lo})")
    xd = x.detach()
    if lo == hi and x.numel():
        lo, hi = float(xd.amin().item()), float(xd.amax().item())
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"histc: range of [{lo}, {hi}] is not finite")
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    cdt = _compute_dtype(x.dtype)
    x1 = contiguous(cast(reshape(xd, -1), cdt))._materialise()
    counts = zeros(bins, dtype=dtypes.int32, device=x.device)._materialise()
    if x.numel():
        counted("histc", lib_hist.histc, x.device.rt, _as_lib(x1), _as_lib(counts), lo, hi)
    return cast(counts, x.dtype)

"""Reductions with dim/keepdim: sum mean prod max min amax amin argmax argmin var std, and
`sum_to` (summing a broadcast gradient back to an input's shape).

Lazy inputs (an elementwise graph) are reduced by a kernel that evaluates the graph on read
(dl/fusion/reduce.py); materialised float32/float64 inputs use the kernel library's tuned
reduction (dl/kernels/reduce.py), one launch per reduced axis or per block of adjacent axes
that collapse into one."""
from __future__ import annotations

from .. import dtypes, shapes
from ..autograd import record, saved_output
from ..fusion import elementwise
from ..fusion import fusion as fusion_setting
from ..fusion.reduce import can_fuse, reduce_lazy
from ..kernels import reduce as lib
from ..kernels.common import has_f64
from ..tensor import Tensor
from .creation import full
from .libcall import counted, operand, planned_result, result
from .registry import OPS, register

FUSED_MIN_ROWS = 64  # outputs (units) for a fused reduction over a big graph
FUSED_MAX_SERIAL = 1 << 14  # below this many elements one unit per output is fast enough


_DIMS: dict = {}  # (rank, dim) -> the sorted reduced dims


def _dims(x: Tensor, dim) -> list[int]:
    if dim is None or shapes.empty_dims(dim):  # dim=() or []: every dim, as PyTorch's
        return list(range(x.ndim))
    k = (x.ndim, dim) if dim.__class__ in (int, tuple) else None
    got = _DIMS.get(k) if k is not None else None
    if got is not None:
        return list(got)
    ds = dim if isinstance(dim, (tuple, list)) else (dim,)
    out = sorted({shapes.norm_dim(d, (x.ndim or 1)) for d in ds} & set(range(x.ndim)))
    if k is not None and len(_DIMS) < 4096:
        _DIMS[k] = tuple(out)
    return out


def _acc(op: str, d: dtypes.DType) -> dtypes.DType:
    """The result type (PyTorch's): sums and products of ints and bools are int64; f16/bf16
    accumulate in float32 and round back at the end."""
    if d.is_float:
        return dtypes.float32 if d.itemsize == 2 else d
    return dtypes.int64 if op in ("sum", "prod") or d is dtypes.bool_ else d


def _keep_shape(x: Tensor, dims) -> tuple:
    return tuple(1 if d in dims else s for d, s in enumerate(x.shape))


def _cast(x: Tensor, dt) -> Tensor:
    return x if x.dtype is dt else elementwise("cast", [x], [x.dtype.compute], dt)


def raw_reduce(x: Tensor, dims: list[int], op: str) -> Tensor:
    """op over sorted dims, no autograd; the result has the kept dims, in `_acc`'s type
    (bool for the max or min of bools: their or / and, as PyTorch's)."""
    if x.dtype is dtypes.bool_ and op in ("max", "min"):
        return _cast(raw_reduce(_cast(x, dtypes.int32), dims, op), dtypes.bool_)._materialise()
    acc = _acc(op, x.dtype)
    if not dims:
        return _cast(x, acc).clone()._materialise()
    if x.numel() == 0 or any(x.shape[d] == 0 for d in dims):
        shape = tuple(s for d, s in enumerate(x.shape) if d not in dims)
        if all(x.shape[d] for d in dims):  # no output either (a kept dim is 0): no values
            return full(shape, 0, dtype=acc, device=x.device)
        init = {"sum": 0, "mean": float("nan"), "prod": 1}.get(op)
        if init is None:
            raise RuntimeError(f"{op}() of an empty dimension is not defined")
        return full(shape, init, dtype=acc, device=x.device)
    rows = x.numel() // shapes.numel(x.shape[d] for d in dims)
    if x._node is not None and (not can_fuse(x) or (
            acc.is_float and rows < FUSED_MIN_ROWS and x.numel() > FUSED_MAX_SERIAL)):
        # the fused kernel runs one unit per output: few long rows would be serial there,
        # so the graph is computed (one parallel kernel) and the library reduces it
        x._materialise()
    if x._node is None and not acc.is_float:
        # ints and bools (the library reduces floats only): a lazy cast read by the fused
        # reduction, with fusion off too
        with fusion_setting(True):
            return reduce_lazy(elementwise("cast", [x], [x.dtype.compute], acc), dims, op, acc)
    if x._node is None and x.dtype is not acc:
        # halves: a lazy cast read by the fused reduction (fusion off: the cast runs, the
        # library reduces in float32)
        x = elementwise("cast", [x], [x.dtype.compute], acc)
    if x._node is not None:
        return reduce_lazy(x, dims, op, acc)
    return _library(x, dims, op)


def _blocks(x: Tensor, dims: list[int]) -> list[list[int]]:
    """Runs of adjacent reduced dims (each becomes one library axis when it collapses)."""
    runs: list[list[int]] = []
    for d in dims:
        if runs and runs[-1][-1] == d - 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    return runs


def _library(x: Tensor, dims: list[int], op: str) -> Tensor:
    rt = x.device.rt
    for run in reversed(_blocks(x, dims)):  # the last axes first: later indices stay put
        a, b = run[0], run[-1]
        merged = x.shape[:a] + (shapes.numel(x.shape[a:b + 1]),) + x.shape[b + 1:]
        st = shapes.view_strides(x.shape, x._strides, merged)
        v = x if st is None else x._view(merged, st, x.offset)
        if st is None:  # the run does not collapse in place: reduce axis by axis
            for d in reversed(run):
                x = _one_axis(rt, x, d, op)
            continue
        x = _one_axis(rt, v, a, op)
    return x


def _one_axis(rt, x: Tensor, axis: int, op: str) -> Tensor:
    try:
        buf = counted("reduce", lib.reduce, rt, operand(x), axis, op)
    except ValueError:  # dims around the axis do not collapse: copy contiguous
        buf = counted("reduce", lib.reduce, rt, operand(x, contiguous=True), axis, op)
    shape = x.shape[:axis] + x.shape[axis + 1:]
    return result(buf, x.dtype, x.device, shape)


def _finish(y: Tensor, x: Tensor, dims, keepdim: bool) -> Tensor:
    if x.dtype.is_float and y.dtype is not x.dtype:
        y = _cast(y, x.dtype)
    return y.reshape(_keep_shape(x, dims)) if keepdim else y


def _reduced(x: Tensor, dims: list[int], op: str, keepdim: bool) -> Tensor:
    """op over dims with keepdim, no autograd: through a tensor-level dispatch plan when x
    is materialised (a repeated eager reduction skips the Python above the launches)."""
    y = planned_result((_reduced, op, tuple(dims), keepdim), (x,),
                       lambda: _finish(raw_reduce(x, dims, op), x, dims, keepdim))
    return y if y is not None else _finish(raw_reduce(x, dims, op), x, dims, keepdim)


def _expand_grad(g: Tensor, x: Tensor, dims) -> Tensor:
    return g.reshape(_keep_shape(x, dims)).expand(*x.shape)


@register("sum", method=True)
def sum(x: Tensor, dim=None, keepdim: bool = False, dtype=None) -> Tensor:  # noqa: A001
    """The sum of x's elements over `dim` (an int, a tuple, or None: all dims).

    keepdim keeps the reduced dims with size 1; `dtype` casts x first. Integer and bool
    tensors sum in int64 (as PyTorch); float16/bfloat16 accumulate in float32. A lazy x is
    summed as it is computed (one kernel). Differentiable. Also `t.sum()`."""
    if dtype is not None:
        x = x.to(dtype)
    dims = _dims(x, dim)
    y = _reduced(x, dims, "sum", keepdim)
    if x.dtype.is_float:
        record(y, "sum", (x,), lambda g: (_expand_grad(g, x, dims),))
    return y


def _float_input(x: Tensor, op: str) -> None:
    if not x.dtype.is_float:
        raise TypeError(f"{op}() needs a float tensor, got {x.dtype} (use .float())")


@register("mean", method=True)
def mean(x: Tensor, dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """The mean of x over `dim` (an int, a tuple, or None: all dims).

    Float tensors only (a TypeError otherwise, as PyTorch); `dtype` casts x first. The mean
    of no elements is nan. Differentiable. Also `t.mean()`."""
    if dtype is not None:
        x = x.to(dtype)
    _float_input(x, "mean")
    dims = _dims(x, dim)
    n = shapes.numel(x.shape[d] for d in dims)
    y = _reduced(x, dims, "mean", keepdim)
    return record(y, "mean", (x,), lambda g: (_expand_grad(g * (1.0 / (n or 1)), x, dims),))


@register("prod", method=True)
def prod(x: Tensor, dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """The product of x's elements over `dim` (an int, a tuple, or None: all dims).

    keepdim, dtype and result dtypes as in sum (integer and bool tensors give int64).
    The gradient is the product of the other elements, zeros included as PyTorch's: out / x
    where x is not 0; at a row's only zero the product of the rest; 0 at a row's zeros
    when it has several. Also `t.prod()`."""
    if dtype is not None:
        x = x.to(dtype)
    dims = _dims(x, dim)
    y = _reduced(x, dims, "prod", keepdim)
    if x.dtype.is_float:
        ys = saved_output(y)
        record(y, "prod", (x,), lambda g: (_prod_grad(g, x, ys, dims),),
               saved=ys)
    return y


def _prod_grad(g: Tensor, x: Tensor, y: Tensor, dims) -> Tensor:
    where = OPS["where"]  # (dl/ops/elementwise.py imports this module)
    xd = x.detach()
    zero = xd == 0
    safe = where(zero, 1.0, xd)
    zeros = sum(zero.to(x.dtype), dims, keepdim=True)  # zeros per output
    rest = prod(safe, dims, keepdim=True)  # the product of the non-zeros
    at_zero = where(_expand_grad(zeros, x, dims) == 1, _expand_grad(rest, x, dims), 0.0)
    d = where(zero, at_zero, _expand_grad(y, x, dims) / safe)
    return _expand_grad(g, x, dims) * d


def _amax(op: str):
    def fn(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
        dims = _dims(x, dim)
        y = _reduced(x, dims, op, keepdim)
        if x.dtype.is_float:
            ys = saved_output(y)

            def back(g):  # shared evenly between tied extremes, as PyTorch's amax
                hit = (x == _expand_grad(ys, x, dims)).to(x.dtype)
                cnt = sum(hit, dims, keepdim=True)
                return (_expand_grad(g, x, dims) * hit / cnt,)
            record(y, "a" + op, (x,), back, saved=ys)
        return y
    fn.__name__ = "a" + op
    fn.__doc__ = (f"The {op}imum of x over `dim` (an int, a tuple, or None: all dims), in x's "
                  f"dtype.\n\n    keepdim keeps the reduced dims with "
                  f"size 1. The gradient is shared evenly between\n    tied extremes, as "
                  f"PyTorch's. Also `t.a{op}()`.")
    return fn


amax = register("amax", method=True)(_amax("max"))
amin = register("amin", method=True)(_amax("min"))


def _arg(op: str, bools: bool = False):
    """argmax / argmin; bools: taking bool tensors too (max(dim) of bools, which torch
    takes; its argmax refuses them)."""
    def fn(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
        if x.dtype is dtypes.bool_ and not bools:
            raise RuntimeError(f"{op}() does not support bool input, as PyTorch's (.int() "
                               f"first)")
        src = x.reshape(-1) if dim is None else x
        d = 0 if dim is None else shapes.norm_dim(dim, (x.ndim or 1))
        if src.ndim == 0:
            src, d = src.reshape(1), 0
        if src.shape[d] == 0:
            raise RuntimeError(f"{op}() of an empty dimension")
        want = dtypes.float64 if has_f64(x.device.rt) else dtypes.float32
        if src.dtype not in (dtypes.float32, dtypes.float64):
            src = _cast(src, want if not src.dtype.is_float else dtypes.float32)
        src._materialise()
        try:
            buf = counted(op, lib.reduce, src.device.rt, operand(src), d, op)
        except ValueError:
            buf = counted(op, lib.reduce, src.device.rt, operand(src, contiguous=True), d, op)
        shape = src.shape[:d] + src.shape[d + 1:]
        it = dtypes.index_dtype(x.device)
        idx = _cast(result(buf, dtypes.uint32, x.device, shape), it)._materialise()
        if keepdim:
            ks = (1,) * x.ndim if dim is None else _keep_shape(x, [d])
            idx = idx.reshape(ks)
        return idx
    fn.__name__ = op
    fn.__doc__ = (f"The index of the {op[3:]}imum of x along `dim` (None: of the flattened "
                  f"x).\n\n    Ties give the lowest index. int64, or int32 on devices "
                  f"without 64-bit ints (the wgpu\n    runtimes). keepdim keeps the dim with "
                  f"size 1. Not differentiable. Also `t.{op}()`.")
    return fn


argmax = register("argmax", method=True)(_arg("argmax"))
argmin = register("argmin", method=True)(_arg("argmin"))
_ARG_ANY = {"max": _arg("argmax", bools=True), "min": _arg("argmin", bools=True)}


def _max_min(op: str):
    def fn(x: Tensor, dim=None, keepdim: bool = False):
        """The maximum (max) or minimum (min) of x.

        No dim: the extreme value over all elements (the gradient shared between ties). With
        dim: a (values, indices) named tuple along dim (ties: the lowest index), the gradient
        going to the index (PyTorch's rule). A tensor in dim's place: `maximum` / `minimum`
        of the two, elementwise, as PyTorch's max(a, b). Also `t.max()` / `t.min()`."""
        if dim is None:
            return (amax if op == "max" else amin)(x)
        if isinstance(dim, Tensor):
            return OPS["maximum" if op == "max" else "minimum"](x, dim)
        d = shapes.norm_dim(dim, (x.ndim or 1))
        idx = _ARG_ANY[op](x, d, keepdim=True)
        vals = x.gather(d, idx) if x.ndim else x
        if not keepdim and x.ndim:
            vals, idx = vals.squeeze(d), idx.squeeze(d)
        return MinMax(vals, idx)
    fn.__name__ = op
    return fn


class MinMax(tuple):
    """(values, indices), like PyTorch's return type for max/min along a dim."""

    def __new__(cls, values, indices):
        return super().__new__(cls, (values, indices))

    values = property(lambda self: self[0])
    indices = property(lambda self: self[1])


max = register("max", method=True)(_max_min("max"))  # noqa: A001
min = register("min", method=True)(_max_min("min"))  # noqa: A001


def var_args(what: str, dim, unbiased, correction) -> tuple:
    """(dim, correction) from PyTorch's var/std overloads: (dim, unbiased, keepdim)
    positionally, `var(unbiased)` (a bool first: every dim), or correction by keyword."""
    if isinstance(dim, bool):  # torch.var(x, False): unbiased, over every dim
        if unbiased is not None:
            raise TypeError(f"{what}: unbiased given twice (as the first argument and again)")
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError(f"{what}: cannot take both unbiased and correction (PyTorch's "
                        f"overloads take one)")
    if unbiased is not None:
        return dim, int(bool(unbiased))
    return dim, 1 if correction is None else correction


@register("var", method=True)
def var(x: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction=None) -> Tensor:
    """The variance of x over `dim` (an int, a tuple, or None: all dims).

    Divides by n - correction (1: the unbiased estimate, PyTorch's default); PyTorch's
    overloads: `var(x, dim, unbiased, keepdim)` positionally, `var(x, unbiased)` over every
    dim, `correction=` by keyword. nan where n <= correction. Two passes, both fused
    reductions: the mean, then the squares of (x - mean) summed on read. Differentiable
    through those ops. Float tensors only (a TypeError naming var, or std, otherwise).
    Also `t.var()`."""
    dim, correction = var_args("var", dim, unbiased, correction)
    _float_input(x, "var")
    dims = _dims(x, dim)
    n = shapes.numel(x.shape[d] for d in dims)
    d = x - mean(x, dims, keepdim=True)
    scale = 1.0 / (n - correction) if n > correction else float("nan")
    return sum(d * d, dims, keepdim=keepdim) * scale


@register("std", method=True)
def std(x: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction=None) -> Tensor:
    """The standard deviation of x over `dim`: sqrt(var(x, ...)), with var's
    arguments. Differentiable; where the deviation is 0 the gradient is 0, as PyTorch's
    (sqrt's own, g / (2 * 0) times var's 0, is NaN). Also `t.std()`."""
    dim, correction = var_args("std", dim, unbiased, correction)
    _float_input(x, "std")
    v = var(x, dim, keepdim=keepdim, correction=correction)
    y = v.detach().sqrt()
    if v.requires_grad:
        ys = saved_output(y)

        def back(g):
            return (OPS["where"](ys == 0, 0.0, g / (ys * 2.0)),)
        record(y, "std", (v,), back, saved=ys)
    return y


def sum_to(g: Tensor, shape) -> Tensor:
    """Sum a broadcast gradient back to `shape` (the input's shape)."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    dims = list(range(lead)) + [lead + d for d, s in enumerate(shape)
                                if s == 1 and g.shape[lead + d] != 1]
    return sum(g, dims).reshape(shape)


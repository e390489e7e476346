"""matmul (batched, broadcasting; `@`) and linear (matmul with a fused bias + activation
epilogue) on the kernel library's tuned matmul. Gradients are matmuls of transposed views
(a transpose is only a choice of strides; the library reads any strides)."""
from __future__ import annotations

from .. import dtypes, shapes
from ..autograd import record, saved_output
from ..autograd.tape import needs_grad
from ..kernels import matmul as lib
from ..kernels import plan
from ..kernels.view import transpose
from ..tensor import Tensor
from .creation import zeros
from .elementwise import relu_grad
from .libcall import counted, operand, result
from .reduce import sum_to
from .registry import register

_F = (dtypes.float32, dtypes.float64)


def _check(a: Tensor, b: Tensor, what: str):
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(f"{what} takes tensors")
    if a.dtype is not b.dtype:
        raise TypeError(f"{what}: operands differ in dtype ({a.dtype} and {b.dtype})")
    if not a.dtype.is_float:
        raise TypeError(f"{what} takes float tensors, got {a.dtype}")
    if a.device is not b.device and a.device != b.device:
        raise ValueError(f"{what}: tensors on different devices ({a.device}, {b.device})")


def _as3(t: Tensor, batch: tuple) -> Tensor:
    """t (..., M, K) as a (B, M, K) view (B = 1 when t has no batch of its own: the library
    broadcasts it by a zero stride); a broadcast batch is copied."""
    m, k = t.shape[-2:]
    if shapes.numel(t.shape[:-2]) == 1:
        return t.reshape(1, m, k)
    if t.shape[:-2] != batch:
        t = t.expand(*batch, m, k)
    return t.reshape(shapes.numel(batch), m, k)


def _mm2d(av, bv, dt, device, bias: Tensor | None, act: str) -> Tensor:
    """act(a @ b + bias) of two 2-D library views (float32/float64): a transpose is a view
    of the storage, no tensor of its own (the tensor layer's reshapes and permutes were
    half the Python cost of a small nn.Linear)."""
    m, n = av.shape[0], bv.shape[1]
    if m * n == 0 or av.shape[1] == 0:
        return None
    buf = counted("matmul", lib.matmul, device.rt, av, bv,
                  bias=None if bias is None else operand(bias, contiguous=True), act=act)
    return result(buf, dt, device, (m, n))


def _planned_2d(a: Tensor, b: Tensor, bias: Tensor | None, act: str, ta: bool, tb: bool):
    """The 2-D product through a dispatch plan keyed on the tensors themselves (their
    shapes and strides, not the library views built from them): a repeated nn.Linear or
    matmul skips the views, checks and library call; None where the plan cannot serve."""
    # a lazy operand is computed first, as the library path computes it (the layer after
    # an eager ReLU took that path, with its views and checks, at every step)
    a._materialise()
    b._materialise()
    if a.offset or b.offset or 0 in a.shape or 0 in b.shape:
        return None
    if bias is None:
        bufs: tuple = (a._buf, b._buf)
        bkey = None
    else:
        bias._materialise()
        if bias.offset or not bias.is_contiguous():
            return None
        bufs = (a._buf, b._buf, bias._buf)
        bkey = bias.shape
    m, n = (a.shape[1] if ta else a.shape[0]), (b.shape[0] if tb else b.shape[1])
    tag = (_planned_2d, a.shape, a._strides, b.shape, b._strides, bkey, act, ta, tb,
           a.dtype)
    buf = plan.planned_bufs(tag, a.device.rt, bufs,
                            lambda: _mm_views(a, b, bias, act, ta, tb)._buf)
    return Tensor(buf, (m, n), (n, 1), 0, a.dtype, a.device)


def _mm_views(a, b, bias, act, ta, tb) -> Tensor | None:
    """The 2-D product through library views of a and b (None for an empty product)."""
    av, bv = operand(a), operand(b)
    av, bv = transpose(av) if ta else av, transpose(bv) if tb else bv
    if av.shape[1] != bv.shape[0]:
        raise ValueError(f"matmul: shapes {tuple(av.shape)} and {tuple(bv.shape)} do not "
                         f"match")
    return _mm2d(av, bv, a.dtype, a.device, bias, act)


def mm_raw(a: Tensor, b: Tensor, bias: Tensor | None = None, act: str = "none",
           ta: bool = False, tb: bool = False) -> Tensor:
    """act(a' @ b' + bias) without autograd; a (..., M, K), b (..., K, N), rank >= 2; with
    `ta`/`tb` (2-D only) a' / b' is the transpose of the 2-D a / b."""
    dt = a.dtype
    if dt in _F and a.ndim == 2 and b.ndim == 2 and a.dtype is b.dtype and \
            (bias is None or bias.dtype is dt):
        if plan.enabled and (a.shape[0] if ta else a.shape[1]) == \
                (b.shape[1] if tb else b.shape[0]):
            y = _planned_2d(a, b, bias, act, ta, tb)
            if y is not None:
                return y
        y = _mm_views(a, b, bias, act, ta, tb)
        if y is not None:
            return y
    a, b = (a.mT if ta else a), (b.mT if tb else b)
    if dt not in _F:  # halves multiply in float32
        a, b = a.to(dtypes.float32), b.to(dtypes.float32)
        bias = bias.to(dtypes.float32) if bias is not None else None
    batch = shapes.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not match")
    m, n = a.shape[-2], b.shape[-1]
    out_shape = (*batch, m, n)
    if shapes.numel(out_shape) == 0 or a.shape[-1] == 0:
        y = zeros(out_shape, dtype=a.dtype, device=a.device)
        return (y + bias if bias is not None else y).to(dt)
    a3, b3 = _as3(a, batch), _as3(b, batch)
    buf = counted("matmul", lib.matmul, a.device.rt, operand(a3), operand(b3),
                  bias=None if bias is None else operand(bias, contiguous=True), act=act)
    y = result(buf, a3.dtype, a.device, out_shape)
    return y if y.dtype is dt else y.to(dt)


@register("matmul", method=True, dunder="__matmul__", rdunder="__rmatmul__")
def matmul(a: Tensor, b: Tensor) -> Tensor:
    """The matrix product a @ b, with NumPy/PyTorch semantics.

    1-D operands are promoted to a row (a) or a column (b) and the added dim removed; leading
    (batch) dims broadcast. Both operands must be float tensors of the same dtype on the same
    device (no promotion; integer matmul is not supported, unlike PyTorch's).
    float16/bfloat16 multiply in float32. Differentiable. Also `a.matmul(b)` and `a @ b`."""
    _check(a, b, "matmul")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: both operands need at least one dimension")
    if a.ndim == 1 and b.ndim == 1:
        return matmul(a.unsqueeze(0), b.unsqueeze(-1)).reshape(())
    if a.ndim == 1:
        return matmul(a.unsqueeze(0), b).squeeze(-2)
    if b.ndim == 1:
        return matmul(a, b.unsqueeze(-1)).squeeze(-1)
    y = mm_raw(a, b)

    def back(g):
        ga = sum_to(mm_raw(g, b.mT), a.shape) if a.requires_grad else None
        gb = sum_to(mm_raw(a.mT, g), b.shape) if b.requires_grad else None
        return ga, gb
    return record(y, "matmul", (a, b), back, plan=(("matmul",), ()))


@register("mm", "bmm", method=("mm", "bmm"))
def mm(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product of two 2-D tensors (mm) or two 3-D batches (bmm); also
    `dl.bmm`, `a.mm(b)`, `a.bmm(b)`. Unlike PyTorch, either name takes either rank."""
    if a.ndim != b.ndim or a.ndim not in (2, 3):
        raise ValueError(f"mm/bmm take two 2-D or two 3-D tensors, got {a.shape}, {b.shape}")
    return matmul(a, b)


bmm = mm


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None, act: str = "none"):
    """act(x @ weight.T + bias) in one kernel (the matmul's epilogue). act: none, relu, gelu,
    tanh. When a gradient is needed, gelu/tanh run as a lazy op after the matmul (their
    derivative needs the pre-activation), relu stays fused (its derivative is y > 0)."""
    _check(x, weight, "linear")
    nd = len(x.shape)
    if nd == 0:
        raise ValueError("linear: the input needs at least one dimension")
    if weight.ndim == 1 and weight.shape[0] == x.shape[-1]:  # torch's: one output, no dim
        return linear(x, weight.reshape(1, -1), None if bias is None else bias.reshape(1),
                      act).squeeze(-1)
    if weight.ndim != 2 or weight.shape[1] != x.shape[-1]:
        raise ValueError(f"linear: an input of shape {x.shape} needs a weight of shape "
                         f"(out_features, {x.shape[-1]}), got {weight.shape}")
    x2 = x if nd == 2 else x.reshape(shapes.numel(x.shape[:-1]), x.shape[-1])
    grad = needs_grad(x, weight, bias)
    fused = act if (not grad or act in ("none", "relu")) else "none"
    y = mm_raw(x2, weight, bias, fused, tb=True)
    if grad:
        ys = saved_output(y)

        def back(g):
            # relu's gradient: g where the output is positive, else 0 (not g * mask: an
            # inf or nan g must not make nan where torch's gives 0)
            gz = g if fused == "none" else relu_grad(g, ys)
            gx = mm_raw(gz, weight) if x.requires_grad else None
            gw = mm_raw(gz, x2, ta=True) if weight.requires_grad else None
            gb = gz.sum(0) if bias is not None and bias.requires_grad else None
            return gx, gw, gb
        record(y, "linear", (x2, weight, bias), back, saved=ys,
               plan=(("linear", fused), (), fused != "none"))
    if fused != act:
        y = {"gelu": lambda t: t.gelu(), "tanh": lambda t: t.tanh()}[act](y)
    return y if nd == 2 else y.reshape(*x.shape[:-1], y.shape[-1])


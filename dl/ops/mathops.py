"""Math beyond the elementwise core: einsum, norms, cdist, logsumexp, outer, addmm/baddbmm,
any/all, isclose/allclose, linspace/logspace (issue 17).

Everything here is built from the lazy elementwise ops (they fuse), the reductions of
dl/ops/reduce.py (a lazy input is reduced as it is computed) and matmul: einsum lowers to
diagonal views (dl/ops/diagonals.py), permutes, reshapes and one batched matmul (or a
broadcast multiply and a sum) per pair of operands. The elementwise ops of the family (atan2,
remainder, bitwise ops, predicates, lerp, hypot, activations) are declared in
dl/ops/elementwise.py."""
from __future__ import annotations

import builtins as _builtins
import math

from .. import devices as _device
from .. import dtypes, shapes
from ..autograd import no_grad, record
from ..tensor import Tensor
from . import linalg as _linalg_module
from .common import is_tensor, result_type
from .creation import arange, full
from .diagonals import diagonal
from .elementwise import (
    DTypeError,
    abs,
    exp,
    isfinite,
    isnan,
    log,
    sign,
    sqrt,
    where,
)
from .linalg import matmul
from .moving_dims import movedim
from .reduce import amax, amin
from .reduce import sum as _sum
from .registry import register

__all__ = ["addmm", "all", "allclose", "any", "baddbmm", "cdist", "einsum", "isclose",
           "linspace", "logspace", "logsumexp", "norm", "outer", "vector_norm"]


def _dims(x: Tensor, dim) -> list[int]:
    if dim is None or shapes.empty_dims(dim):  # dim=() or []: every dim, as PyTorch's
        return list(range(x.ndim))
    ds = dim if isinstance(dim, (tuple, list)) else (dim,)
    return sorted({shapes.norm_dim(int(d), x.ndim) for d in ds})


def _keep(x: Tensor, dims) -> tuple:
    return tuple(1 if d in dims else s for d, s in enumerate(x.shape))


def _drop(x: Tensor, dims) -> tuple:
    return tuple(s for d, s in enumerate(x.shape) if d not in dims)


# ---- logsumexp -----------------------------------------------------------------------------
@register("logsumexp", method=True)
def logsumexp(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A002
    """log(sum(exp(x))) over `dim` (an int or a tuple; None: all dims), computed stably
    (the max is subtracted first; an infinite max is left out).

    Integer and bool tensors give float32. Over no elements the result is -inf.
    Differentiable (the gradient is softmax(x)). Also `t.logsumexp(dim)`."""
    if shapes.empty_dims(dim):  # PyTorch raises too (sum reduces all)
        raise RuntimeError("logsumexp: dim must name at least one dim, got an empty one")
    x = input if input.dtype.is_float else input.to(dtypes.default_float)
    dims = _dims(x, dim)
    if _builtins.any(x.shape[d] == 0 for d in dims):  # -inf (the sum keeps the graph)
        y = _sum(x, dims, keepdim=True) - math.inf
    else:
        with no_grad():
            m = amax(x.detach(), dims, keepdim=True)
            m = where(isfinite(m), m, 0.0)
        y = log(_sum(exp(x - m), dims, keepdim=True)) + m
    return y if keepdim else y.reshape(_drop(x, dims))


# ---- norms ---------------------------------------------------------------------------------
def _check_float(what: str, x: Tensor) -> None:
    if not x.dtype.is_float:
        raise DTypeError(f"{what}: expected a floating point tensor as input, got "
                         f"{x.dtype.name}")


def _norm_forward(x: Tensor, p: float, dims: list[int]) -> Tensor:
    """The p-norm over dims with the reduced dims kept (size 1); no autograd."""
    if p == 2:
        return sqrt(_sum(x * x, dims, keepdim=True))
    a = abs(x)
    if p == 1:
        return _sum(a, dims, keepdim=True)
    if p == math.inf:
        return amax(a, dims, keepdim=True)
    if p == -math.inf:
        return amin(a, dims, keepdim=True)
    if p == 0:
        return _sum((x != 0).to(x.dtype), dims, keepdim=True)
    return _sum(a ** p, dims, keepdim=True) ** (1.0 / p)


def _norm_backward(g: Tensor, x: Tensor, y: Tensor, p: float, dims: list[int]) -> Tensor:
    """PyTorch's norm_backward (FunctionsManual.cpp), with g and y keepdim-shaped: 0 where
    the norm is 0 (2-norm and p > 1), ties sharing the gradient of the inf-norms."""
    if p == 0:
        return x * 0.0
    if p == 1:
        return sign(x) * g
    if p == 2:
        return g * where(y == 0, 0.0, x / y)
    if math.isinf(p):
        a = abs(x)
        hit = ((a == y) | isnan(a)).to(x.dtype)
        return sign(x) * (g / _sum(hit, dims, keepdim=True)) * hit
    if p < 1:
        scaled = sign(x) * where(x == 0, 0.0, abs(x) ** (p - 1))
        return scaled * g * y ** (1 - p)
    scale = where(y == 0, 0.0, g / y ** (p - 1))
    if p < 2:
        return sign(x) * abs(x) ** (p - 1) * scale
    return x * abs(x) ** (p - 2) * scale


def _vector_norm(x: Tensor, p, dim, keepdim: bool, what: str) -> Tensor:
    _check_float(what, x)
    if isinstance(p, str) or not isinstance(p, (int, float)):
        raise ValueError(f"{what}: ord must be a number or inf, got {p!r}")
    p = float(p)
    dims = _dims(x, dim)
    if math.isinf(p) and (_builtins.any(x.shape[d] == 0 for d in dims) or x.numel() == 0):
        raise RuntimeError(f"{what}: cannot compute the {p} norm of an empty tensor (shape "
                           f"{x.shape}) over dims {tuple(dims)}")
    with no_grad():
        yk = _norm_forward(x.detach(), p, dims)
    yk = yk._materialise()
    out = yk if keepdim else yk.reshape(_drop(x, dims))
    if not x.requires_grad:
        return out

    def back(g):
        gk = g.reshape(_keep(x, dims))
        return (_norm_backward(gk, x.detach(), yk, p, dims),)
    return record(out, "vector_norm", (x,), back)


def vector_norm(x: Tensor, ord=2, dim=None, keepdim: bool = False, *,  # noqa: A002
                dtype=None) -> Tensor:
    """The vector ord-norm of x over `dim` (an int or a tuple; None: all elements), as
    torch.linalg.vector_norm: ord 2 (default), 1, inf (max |x|), -inf (min |x|), 0 (the
    count of non-zeros) or any other p ((sum |x|^p)^(1/p)).

    Float tensors only; `dtype` casts x first. keepdim keeps the reduced dims (size 1).
    Differentiable with PyTorch's gradient (0 where the norm is 0; ties of the inf-norms share
    it). Also `dl.linalg.vector_norm`."""
    if dtype is not None:
        x = x.to(dtype)
    return _vector_norm(x, ord, dim, keepdim, "linalg.vector_norm")


# `dl.linalg.vector_norm` (dl.linalg is dl/ops/linalg.py, whose names dl exports)
_linalg_module.vector_norm = vector_norm


@register("norm", method=True)
def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False,  # noqa: A002
         dtype=None) -> Tensor:
    """The p-norm of x over `dim` (None: all elements), as torch.norm: p "fro" (the
    default: the 2-norm of the elements), or a number / inf as in `vector_norm`.

    "nuc" is not supported (ValueError). Float tensors only; `dtype` casts x first.
    Differentiable. Also `t.norm(p, dim)`."""
    if dtype is not None:
        input = input.to(dtype)  # noqa: A001
    if p == "fro":
        p = 2
    elif isinstance(p, str):
        raise ValueError(f"norm: p={p!r} is not supported (use 'fro' or a number)")
    return _vector_norm(input, p, dim, keepdim, "norm")


# ---- cdist ---------------------------------------------------------------------------------
def cdist(x1: Tensor, x2: Tensor, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The p-norm distance between each row of x1 (..., P, M) and each row of x2
    (..., R, M): a (..., P, R) tensor; batch dims broadcast.

    The differences x1[..., :, None, :] - x2[..., None, :, :] are a lazy graph that the norm
    reduction computes as it reads it (no (P, R, M) tensor in the forward pass). p >= 0
    (inf too); compute_mode is accepted and ignored (no matrix-product shortcut for p = 2,
    so no cancellation error). Float tensors only. Differentiable (0 where a distance is 0)."""
    if not is_tensor(x1) or not is_tensor(x2):
        raise TypeError("cdist takes two tensors")
    if x1.ndim < 2 or x2.ndim < 2:
        raise ValueError(f"cdist only supports at least 2-D tensors, got shapes {x1.shape} "
                         f"and {x2.shape}")
    if x1.shape[-1] != x2.shape[-1]:
        raise ValueError(f"cdist: x1 {x1.shape} and x2 {x2.shape} must have the same number "
                         f"of columns ({x1.shape[-1]} != {x2.shape[-1]})")
    if p < 0:
        raise ValueError(f"cdist only supports non-negative p values, got {p}")
    _check_float("cdist", x1)
    _check_float("cdist", x2)
    shapes.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return _vector_norm(diff, p, -1, False, "cdist")


# ---- products ------------------------------------------------------------------------------
@register("outer", "ger", method=("outer", "ger"))
def outer(input: Tensor, vec2: Tensor) -> Tensor:  # noqa: A002
    """The outer product of two 1-D tensors: out[i, j] = input[i] * vec2[j] (a broadcast
    multiply: lazy, it fuses). The promoted dtype. Differentiable. Also `t.outer(v)`,
    registered as "ger" too."""
    if input.ndim != 1 or vec2.ndim != 1:
        raise ValueError(f"outer: expected two 1-D tensors, got shapes {input.shape} and "
                         f"{vec2.shape}")
    return input.unsqueeze(-1) * vec2


def _add_scaled(prod: Tensor, input: Tensor, beta, alpha, what: str) -> Tensor:  # noqa: A002
    try:
        shapes.broadcast_shapes(input.shape, prod.shape)
    except ValueError:
        raise ValueError(f"{what}: input of shape {input.shape} does not broadcast to the "
                         f"product's shape {prod.shape}") from None
    if shapes.broadcast_shapes(input.shape, prod.shape) != prod.shape:
        raise ValueError(f"{what}: input of shape {input.shape} does not broadcast to the "
                         f"product's shape {prod.shape}")
    if alpha == 0 and what == "addmm":  # the product ignored, its nan and inf too, and zero
        # gradients, as PyTorch's addmm (a BLAS gemm); its baddbmm keeps 0 * inf = nan
        never = full((), False, dtype=dtypes.bool_, device=prod.device)
        if beta != 0:
            rest = input if beta == 1 else input * beta
        else:
            rest = full(prod.shape, 0, dtype=prod.dtype, device=prod.device)
            if input.requires_grad:
                rest = where(never, input, rest)
        return where(never, prod, rest)  # broadcast to the product's shape
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:  # input ignored: its nan and inf do not propagate (as PyTorch)
        if input.requires_grad:  # ... and its gradient is zero
            never = full((), False, dtype=dtypes.bool_, device=prod.device)
            return where(never, input, prod)
        return prod
    return prod + (input if beta == 1 else input * beta)


@register("addmm", method=True)
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """beta * input + alpha * (mat1 @ mat2): mat1 (n, m), mat2 (m, p), input broadcast to
    (n, p). With beta 0 input is ignored (nan in it does not propagate), with alpha 0 the
    product, as PyTorch. Float tensors of one dtype (matmul's rule). Differentiable in all three."""
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise ValueError(f"addmm: mat1 and mat2 must be 2-D, got shapes {mat1.shape} and "
                         f"{mat2.shape}")
    if mat1.shape[1] != mat2.shape[0]:
        raise ValueError(f"addmm: mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}"
                         f"x{mat1.shape[1]} and {mat2.shape[0]}x{mat2.shape[1]})")
    return _add_scaled(matmul(mat1, mat2), input, beta, alpha, "addmm")


@register("baddbmm", method=True)
def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1,  # noqa: A002
            alpha=1) -> Tensor:
    """beta * input + alpha * (batch1 @ batch2) per batch: batch1 (b, n, m), batch2
    (b, m, p), input broadcast to (b, n, p). With beta 0 input is ignored, as PyTorch.
    Float tensors of one dtype. Differentiable in all three."""
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise ValueError(f"baddbmm: batch1 and batch2 must be 3-D, got shapes "
                         f"{batch1.shape} and {batch2.shape}")
    if batch1.shape[0] != batch2.shape[0] or batch1.shape[2] != batch2.shape[1]:
        raise ValueError(f"baddbmm: batch shapes {batch1.shape} and {batch2.shape} cannot be "
                         f"multiplied")
    return _add_scaled(matmul(batch1, batch2), input, beta, alpha, "baddbmm")


# ---- einsum --------------------------------------------------------------------------------
def _parse_term(term: str, what: str) -> list:
    out, k = [], 0
    while k < len(term):
        if term.startswith("...", k):
            out.append("...")
            k += 3
            continue
        c = term[k]
        if not c.isalpha():
            raise ValueError(f"einsum(): invalid subscript {c!r} in {what}: subscripts "
                             f"are letters a-z, A-Z and '...'")
        out.append(c)
        k += 1
    if out.count("...") > 1:
        raise ValueError(f"einsum(): more than one ellipsis in {what}")
    return out


def _expand_ellipsis(labels: list, nd: int, ell: int) -> list:
    """The labels of one operand with its ellipsis replaced by ell tokens, right-aligned."""
    if "..." not in labels:
        return labels
    k = labels.index("...")
    n = nd - (len(labels) - 1)
    return labels[:k] + [("...", e) for e in range(ell - n, ell)] + labels[k + 1:]


def _sum_labels(x: Tensor, labels: list, drop) -> tuple[Tensor, list]:
    dims = [d for d, lab in enumerate(labels) if lab in drop]
    if not dims:
        return x, labels
    return _sum(x, dims), [lab for lab in labels if lab not in drop]


def _arrange(x: Tensor, labels: list, order: list, sizes: dict) -> Tensor:
    """x permuted to `order` (labels it lacks become size-1 dims) and expanded to the
    labels' sizes where it has size 1."""
    perm = [labels.index(lab) for lab in order if lab in labels]
    if perm != list(range(len(perm))):
        x = x.permute(*perm)
    shape = tuple(x.shape[[lab for lab in order if lab in labels].index(lab)]
                  if lab in labels else 1 for lab in order)
    if shape != x.shape:
        x = x.reshape(shape)
    return x


def _contract(a: Tensor, la: list, b: Tensor, lb: list, keep: set, sizes: dict):
    batch = [lab for lab in la if lab in lb and lab in keep]
    red = [lab for lab in la if lab in lb and lab not in keep]
    a_only = [lab for lab in la if lab not in lb]
    b_only = [lab for lab in lb if lab not in la]
    out_labels = batch + a_only + b_only
    bs = [sizes[lab] for lab in batch]
    ms, ns, ks = ([sizes[lab] for lab in g] for g in (a_only, b_only, red))
    if not red or not a.dtype.is_float:  # a broadcast multiply (and a sum)
        order_a = batch + a_only + b_only + red
        x = _arrange(a, la, order_a, sizes) * _arrange(b, lb, order_a, sizes)
        if red:
            x = _sum(x, list(range(len(out_labels), len(order_a))))
        want = tuple(bs + ms + ns)
        return (x if x.shape == want else x.expand(*want)), out_labels
    full_a = tuple(bs + ms + ks)
    full_b = tuple(bs + ks + ns)
    xa = _arrange(a, la, batch + a_only + red, sizes)
    xb = _arrange(b, lb, batch + red + b_only, sizes)
    if xa.shape != full_a:
        xa = xa.expand(*full_a)
    if xb.shape != full_b:
        xb = xb.expand(*full_b)
    nb, m, n, k = (shapes.numel(v) for v in (bs, ms, ns, ks))
    y = matmul(xa.reshape(nb, m, k), xb.reshape(nb, k, n))
    return y.reshape(*bs, *ms, *ns), out_labels


@register("einsum")
def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation, as torch.einsum: `einsum("bij,bjk->bik", a, b)`.

    Explicit ('->') or implicit output (the labels seen once, in alphabetical order, after
    the ellipsis dims), '...' (broadcast batch dims), repeated labels in one operand
    (diagonals: `einsum("ii->i", a)`), labels summed away, outer products; size-1 dims
    broadcast. Operands may also come as one list. Lowered to diagonal views, permutes,
    reshapes, and per pair of operands (left to right) one batched matmul (a sum of a
    broadcast multiply for integer operands, and a broadcast multiply where nothing is
    contracted). The promoted dtype. Differentiable."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands or not _builtins.all(is_tensor(t) for t in operands):
        raise TypeError("einsum(): the operands must be tensors")
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum(): {equation!r} has subscripts for {len(terms)} operands "
                         f"but {len(operands)} operands were given")
    parsed = [_parse_term(t, f"operand {k}") for k, t in enumerate(terms)]
    ell = 0
    for k, (labs, t) in enumerate(zip(parsed, operands)):
        named = len(labs) - ("..." in labs)
        if ("..." in labs and named > t.ndim) or ("..." not in labs and named != t.ndim):
            raise ValueError(f"einsum(): the subscripts {terms[k]!r} of operand {k} do not "
                             f"match its shape {t.shape}")
        if "..." in labs:
            ell = max(ell, t.ndim - named)
    dt = result_type(*operands)
    ops = [t if t.dtype is dt else t.to(dt) for t in operands]
    labels = [_expand_ellipsis(labs, t.ndim, ell) for labs, t in zip(parsed, ops)]
    sizes: dict = {}
    for k, (labs, t) in enumerate(zip(labels, ops)):
        for lab, s in zip(labs, t.shape):
            have = sizes.get(lab, 1)
            if s != 1 and have != 1 and s != have:
                name = "..." if isinstance(lab, tuple) else lab
                raise ValueError(f"einsum(): subscript {name!r} has size {s} in operand {k} "
                                 f"(shape {t.shape}) but {have} elsewhere in {equation!r}")
            if s != 1 or lab not in sizes:
                sizes[lab] = s
    ell_tokens = [("...", e) for e in range(ell)]
    if arrow:
        out = _parse_term(rhs, "the output")
        if len(set(out)) != len(out):
            raise ValueError(f"einsum(): the output subscripts {rhs!r} repeat a label")
        seen = {lab for labs in labels for lab in labs}
        for lab in out:
            if lab != "..." and lab not in seen:
                raise ValueError(f"einsum(): output subscript {lab!r} does not appear in the "
                                 f"operands' subscripts")
        k = out.index("...") if "..." in out else None
        out = out if k is None else out[:k] + ell_tokens + out[k + 1:]
    else:
        counts: dict = {}
        for labs in labels:
            for lab in labs:
                if not isinstance(lab, tuple):
                    counts[lab] = counts.get(lab, 0) + 1
        out = ell_tokens + sorted(lab for lab, c in counts.items() if c == 1)
    # diagonals of repeated labels
    for k in range(len(ops)):
        labs = list(labels[k])
        x = ops[k]
        while len(set(labs)) != len(labs):
            i = next(d for d, lab in enumerate(labs) if labs.count(lab) > 1)
            j = labs.index(labs[i], i + 1)
            if x.shape[i] != x.shape[j]:
                raise ValueError(f"einsum(): subscript {labs[i]!r} is repeated in operand {k} "
                                 f"(shape {ops[k].shape}) over dims of sizes {x.shape[i]} and "
                                 f"{x.shape[j]}")
            x = movedim(diagonal(x, 0, i, j), -1, i)  # the diagonal in dim i's place
            del labs[j]
        ops[k], labels[k] = x, labs
    out_set = set(out)
    # labels used by one operand only and not in the output are summed first
    for k in range(len(ops)):
        others = {lab for m, labs in enumerate(labels) if m != k for lab in labs}
        ops[k], labels[k] = _sum_labels(ops[k], labels[k],
                                        set(labels[k]) - others - out_set)
    x, lx = ops[0], labels[0]
    for k in range(1, len(ops)):
        keep = out_set | {lab for labs in labels[k + 1:] for lab in labs}
        x, lx = _contract(x, lx, ops[k], labels[k], keep, sizes)
    x, lx = _sum_labels(x, lx, set(lx) - out_set)
    if out:
        x = _arrange(x, lx, out, sizes).expand(*(sizes[lab] for lab in out))
    return x if x.dtype is dt else x.to(dt)  # integer sums are int64


# ---- any / all -----------------------------------------------------------------------------
def _any_all(op: str, x: Tensor, dim, keepdim: bool) -> Tensor:
    if shapes.empty_dims(dim):  # over no dims, as PyTorch's any/all
        return x.clone() if x.dtype is dtypes.bool_ else x != 0
    dims = _dims(x, dim)
    shape = _keep(x, dims) if keepdim else _drop(x, dims)
    if _builtins.any(x.shape[d] == 0 for d in dims):
        return full(shape, op == "all", dtype=dtypes.bool_, device=x.device)
    b = x if x.dtype is dtypes.bool_ else x != 0
    r = (amax if op == "any" else amin)(b.to(dtypes.int32), dims, keepdim=keepdim)
    return r != 0


@register("any", method=True)
def any(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001, A002
    """True where any element over `dim` (an int, a tuple, None: all) is non-zero; a bool
    tensor (False over no elements). A lazy input is reduced as it is computed. Also
    `t.any()`."""
    return _any_all("any", input, dim, keepdim)


@register("all", method=True)
def all(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001, A002
    """True where every element over `dim` (an int, a tuple, None: all) is non-zero; a bool
    tensor (True over no elements). Also `t.all()`."""
    return _any_all("all", input, dim, keepdim)


# ---- isclose / allclose --------------------------------------------------------------------
@register("isclose", method=True)
def isclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
            equal_nan: bool = False) -> Tensor:
    """A bool tensor: |input - other| <= atol + rtol * |other| elementwise (PyTorch's rule:
    equal values, infinities included, are close; nan only with equal_nan). Tensors of one
    dtype (a Python scalar other is fine). Lazy (fuses). Also `t.isclose(other)`."""
    if is_tensor(other) and other.dtype is not input.dtype:
        raise DTypeError(f"isclose: other's dtype {other.dtype.name} differs from input's "
                         f"{input.dtype.name}")
    if rtol < 0 or atol < 0:
        raise ValueError(f"isclose: rtol ({rtol}) and atol ({atol}) must be non-negative")
    close = input == other
    if not input.dtype.is_float and not (rtol or atol):
        return close
    a = input if input.dtype.is_float else input.to(dtypes.default_float)
    b = other.to(a.dtype) if is_tensor(other) else other
    err = abs(a - b)
    allowed = atol + rtol * (abs(b) if is_tensor(b) else math.fabs(b))
    close = close | (isfinite(err) & (err <= allowed))
    if equal_nan:
        close = close | (isnan(a) & (isnan(b) if is_tensor(b) else math.isnan(b)))
    return close


@register("allclose", method=True)
def allclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
             equal_nan: bool = False) -> bool:
    """Whether every element of input is close to other's (`isclose`), as a Python bool
    (one reduced value is read back). Also `t.allclose(other)`."""
    return bool(all(isclose(input, other, rtol, atol, equal_nan)).item())


# ---- linspace / logspace -------------------------------------------------------------------
def _scalar(v, what: str):
    if is_tensor(v):
        if v.numel() != 1:
            raise ValueError(f"{what} must be a scalar or a 0-d tensor, got shape {v.shape}")
        return v.item()
    return v


def _linspace(start, end, steps: int, ct: dtypes.DType, dev) -> Tensor:
    """PyTorch's linspace in the compute dtype ct: start + i * step in the first half,
    end - (steps - 1 - i) * step in the second (lazy: one fused generator)."""
    if steps == 1:
        return full((1,), start, dtype=ct, device=dev)
    step = (end - start) / (steps - 1)
    i = arange(steps, dtype=ct, device=dev)
    return where(i < steps // 2, i * step + start, (i - (steps - 1)) * step + end)


def _space_args(start, end, steps, dtype, device, what: str):
    start, end = _scalar(start, "start"), _scalar(end, "end")
    steps = int(_scalar(steps, "steps"))
    if steps < 0:
        raise ValueError(f"{what}: number of steps must be non-negative, got {steps}")
    dt = dtypes.get(dtype) if dtype is not None else dtypes.default_float
    dev = _device.get(device)
    ct = dtypes.float64 if dev.rt.features.f64 and dt in (dtypes.float64, dtypes.int64,
                                                            dtypes.int32) else dtypes.float32
    return start, end, steps, dt, dev, ct


@register("linspace")
def linspace(start, end, steps: int, *, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """steps values evenly spaced from start to end (both included), 1-D.

    float32 unless `dtype` (integer dtypes truncate, as PyTorch); computed as PyTorch (from
    start in the first half, from end in the second). start/end may be 0-d tensors. Lazy."""
    start, end, steps, dt, dev, ct = _space_args(start, end, steps, dtype, device,
                                                 "linspace")
    if steps == 0:
        y = full((0,), 0, dtype=dt, device=dev)
    else:
        y = _linspace(start, end, steps, ct, dev).to(dt)
    return y.requires_grad_(True) if requires_grad else y


@register("logspace")
def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """base ** linspace(start, end, steps), 1-D: steps values from base^start to base^end
    on a log scale. float32 unless `dtype`. Lazy."""
    start, end, steps, dt, dev, ct = _space_args(start, end, steps, dtype, device,
                                                 "logspace")
    if steps == 0:
        y = full((0,), 0, dtype=dt, device=dev)
    else:
        y = (float(base) ** _linspace(start, end, steps, ct, dev)).to(dt)
    return y.requires_grad_(True) if requires_grad else y

"""Gradient clipping as PyTorch's `torch.nn.utils` (clip_grad_norm_, clip_grad_value_,
get_total_norm, clip_grads_with_norm_), computed on the device without a host sync.

The total norm: one reduction per gradient (|g|^p summed, or max |g| for the inf norm,
the elementwise part fused into the reduction's read), then one fused elementwise kernel
that combines the per-gradient results (a sum and the p-th root, or a max) into the 0-d
total. Clipping scales the gradients in place by min(max_norm / (total + 1e-6), 1), a 0-d
device tensor read inside the kernels: gradients of one shape and device are scaled in
one fused kernel (a few per launch on runtimes with a small storage-buffer limit), so
nothing is read back to the host (the clip is applied, as in PyTorch, even when the
coefficient is 1)."""
from __future__ import annotations

import math
import types
import warnings

from ... import dtypes, ops, shapes
from ...autograd import no_grad
from ...fusion import materialise
from ...fusion.writes import before_writes
from ...ops.common import result_type
from ...tensor import Tensor

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_",
           "get_total_norm"]

_DEFAULT_LEAVES = 64  # operands of one combining/scaling kernel on runtimes without a limit


def _listed(tensors) -> list:
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _leaves_per_kernel(device) -> int:
    """How many input buffers one fused kernel may read on the device (one slot is left
    for the output): a WebGPU runtime's storage-buffer limit, else a generous constant."""
    limits = getattr(device.rt, "limits", None) or {}
    bound = limits.get("max-storage-buffers-per-shader-stage")
    return _DEFAULT_LEAVES if bound is None else max(1, int(bound) - 1)


def _combine(parts: list[Tensor], op) -> Tensor:
    """op folded over the 0-d tensors `parts` (one device) as fused elementwise kernels of
    at most the device's operand limit each; a materialised 0-d tensor."""
    width = max(2, _leaves_per_kernel(parts[0].device))
    while True:
        nxt = []
        for i in range(0, len(parts), width):
            acc = parts[i]
            for t in parts[i + 1:i + width]:
                acc = op(acc, t)
            nxt.append(acc._materialise() if len(parts) > width else acc)
        parts = nxt
        if len(parts) == 1:
            return parts[0]


def _partial(g: Tensor, p: float) -> Tensor:
    """The per-tensor part of the p-norm: sum |g|^p (p finite) or max/min |g| (+-inf); a
    0-d tensor from one reduction kernel (the elementwise part fused into its read). An
    empty tensor counts 0 (its inf norm is refused, as PyTorch's)."""
    if g.numel() == 0:
        if math.isinf(p):
            raise RuntimeError("the infinity norm of an empty tensor is not defined (the "
                               "operation has no identity)")
        return ops.zeros((), dtype=dtypes.float32 if g.dtype.itemsize < 4 else g.dtype,
                         device=g.device)
    if p == math.inf:
        return ops.amax(ops.abs(g))
    if p == -math.inf:
        return ops.amin(ops.abs(g))
    if p == 0.0:  # PyTorch's norm of norms: the number of nonzero tensors
        return ops.amax((g != 0).to(dtypes.float32 if g.dtype.itemsize < 4 else g.dtype))
    if p == 2.0:
        return ops.sum(g * g)
    if p == 1.0:
        return ops.sum(ops.abs(g))
    return ops.sum(ops.abs(g) ** p)


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: bool | None = None) -> Tensor:
    """The p-norm of the tensors viewed as one vector (torch.nn.utils.get_total_norm): a 0-d
    tensor on the first tensor's device, computed there (no host sync unless
    `error_if_nonfinite`, which reads the norm back to check it). norm_type: any float,
    or inf / -inf. `foreach` is accepted for PyTorch compatibility (the reductions are
    one kernel per tensor either way)."""
    tensors = _listed(tensors)
    p = float(norm_type)
    if not tensors:
        return ops.tensor(0.0)
    with no_grad():
        first = tensors[0].device
        dt = result_type(*tensors)
        parts = [_partial(t, p).to(first) for t in tensors]
        if math.isinf(p):
            total = _combine(parts, ops.maximum if p > 0 else ops.minimum)
        else:
            total = _combine(parts, ops.add)
            if p == 2.0:
                total = ops.sqrt(total)
            elif p not in (0.0, 1.0):
                total = total ** (1.0 / p)
        total = total.to(dt)._materialise()
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(
            f"The total norm of order {p} for gradients from `parameters` is non-finite, so "
            f"it cannot be clipped. To disable this error and scale the gradients by the "
            f"non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def _scale_(grads: list[Tensor], fn, foreach: bool | None) -> None:
    """grads[i] = fn(grads[i]) in place (fn: elementwise), fused: one kernel per group of
    gradients of one shape and device (foreach=False: one kernel per gradient)."""
    groups: dict = {}
    for g in grads:
        g._materialise()
        key = (g.shape, g.device) if foreach is not False else id(g)
        groups.setdefault(key, []).append(g)
    before_writes([g._buf for g in grads])  # lazy reads of the old gradients go first
    for gs in groups.values():
        # one read and one written buffer per gradient, and the coefficient
        width = max(1, (_leaves_per_kernel(gs[0].device) - 1) // 2)
        for i in range(0, len(gs), width):
            chunk = gs[i:i + width]
            values = [fn(g) for g in chunk]
            values = [v if v.dtype is g.dtype else v.to(g.dtype) for v, g in zip(values, chunk)]
            materialise(values, chunk)


def _grads_of(parameters) -> tuple[list, list[Tensor]]:
    params = _listed(parameters)
    return params, [p.grad for p in params if p.grad is not None]


def _safe(params: list) -> list[Tensor]:
    """The parameters' gradients, each made writable in place: a lazy gradient is computed
    and a broadcast (overlapping) one is replaced by a contiguous copy."""
    out = []
    for p in params:
        g = p.grad
        if g is None:
            continue
        g._materialise()
        if shapes.overlapping(g.shape, g._strides):
            g = p.grad = ops.contiguous(g).clone()._materialise()
        out.append(g)
    return out


def clip_grads_with_norm_(parameters, max_norm: float, total_norm: Tensor,
                          foreach: bool | None = None) -> None:
    """Scale the parameters' gradients in place by min(max_norm / (total_norm + 1e-6), 1)
    (torch.nn.utils.clip_grads_with_norm_); total_norm is a 0-d tensor (or a number). The
    coefficient stays on the device: fused kernels read it (see the module docstring)."""
    params = _listed(parameters)
    max_norm = float(max_norm)
    with no_grad():
        grads = _safe(params)
        if not grads:
            return
        if not isinstance(total_norm, Tensor):
            total_norm = ops.tensor(float(total_norm), device=grads[0].device)
        total_norm = total_norm._materialise()
        coefs: dict = {}

        def scaled(g):  # the coefficient is computed inside each scaling kernel
            c = coefs.get(g.device)
            if c is None:
                c = coefs[g.device] = ops.clamp(max_norm / (total_norm.to(g.device) + 1e-6),
                                                max=1.0)
            return g * c.to(g.dtype)
        _scale_(grads, scaled, foreach)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Clip the gradients' total norm (torch.nn.utils.clip_grad_norm_): the p-norm of every
    `.grad` viewed as one vector is computed on the device (get_total_norm) and the
    gradients are scaled in place by min(max_norm / (norm + 1e-6), 1) (clip_grads_with_norm_).
    Returns the total norm (before clipping) as a 0-d tensor; no host sync unless
    `error_if_nonfinite`. norm_type: a float, or inf for the max norm."""
    is_generator = isinstance(parameters, types.GeneratorType)
    params = _listed(parameters)
    if is_generator and not params:
        warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.",
                      stacklevel=2)
    with no_grad():
        grads = _safe(params)
        total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
        clip_grads_with_norm_(params, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm: float, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Deprecated alias of clip_grad_norm_ (as PyTorch's)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every `.grad` into [-clip_value, clip_value] in place
    (torch.nn.utils.clip_grad_value_), fused as clip_grads_with_norm_'s scaling."""
    c = float(clip_value)
    with no_grad():
        grads = _safe(_listed(parameters))
        if grads:
            _scale_(grads, lambda g: ops.clamp(g, -c, c), foreach)

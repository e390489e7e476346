"""Creating tensors: from host data, constants, ranges, identity, random numbers.

Constants, ranges and random numbers are lazy generator nodes, so `dl.rand(n) * 2 - 1` or a
dropout mask costs no extra kernel."""
from __future__ import annotations

import math

import numpy as np

from .. import devices as _device
from .. import dtypes
from ..fusion import elementwise
from ..tensor import Tensor
from .random import default_generator
from .registry import register


def _shape(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    shape = tuple(int(s) for s in size)
    if any(s < 0 for s in shape):
        raise ValueError(f"negative dimension in shape {shape}")
    return shape


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        t._materialise()
        t.requires_grad = True
    return t


@register("tensor")
def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor holding a copy of `data` (a NumPy array, nested lists, a scalar or a Tensor).
    NumPy arrays keep their dtype; Python floats give float32, ints int64, bools bool; in
    lists, NumPy float64 scalars give float64, as PyTorch's."""
    dev = _device.get(device)
    if isinstance(data, Tensor):
        src = data.detach()
        t = src.to(dev).to(dtype or src.dtype)
        t = t.clone() if t is src else t
        return _finish(t._materialise(), requires_grad)
    if hasattr(data, "__dlpack__") and not isinstance(data, np.ndarray):
        data = np.from_dlpack(data)
    arr = np.asarray(data)
    if dtype is not None:
        dt = dtypes.get(dtype)
    elif isinstance(data, np.ndarray | np.generic):
        dt = dtypes.from_numpy(arr.dtype)
    elif arr.dtype.kind == "f":  # float64 where a NumPy float64 (or a tensor) is in the list
        dt = dtypes.float64 if arr.dtype == np.float64 and _holds_f64(data) else \
            dtypes.default_float
    else:
        dt = dtypes.from_numpy(arr.dtype if arr.size else np.float32)
    if dt is not dtypes.bfloat16:
        arr = arr.astype(dt.storage_np, copy=False)
    return _finish(Tensor._from_numpy(arr, dt, dev), requires_grad)


def _holds_f64(data) -> bool:
    """Whether nested lists hold a float64 NumPy scalar or array, or a float64 tensor: their
    floats then stay float64, as PyTorch's `tensor([np.float64(1.5), 2])` (Python floats
    alone give the default dtype)."""
    if isinstance(data, list | tuple):
        return any(_holds_f64(x) for x in data)
    if isinstance(data, np.ndarray | np.generic):
        return data.dtype == np.float64
    return isinstance(data, Tensor) and data.dtype is dtypes.float64


def from_numpy(arr: np.ndarray, device=None) -> Tensor:
    """A tensor holding a copy of the NumPy array `arr` (its dtype kept), on `device`.

    Unlike PyTorch's, it does not share memory with arr (use `dl.from_dlpack` for that)."""
    return tensor(arr, device=device)


@register("full")
def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of shape `size` (an int or a tuple) filled with fill_value.

    The dtype defaults from the value: bool, int64 or float32. Lazy (a generator node: no
    kernel of its own when used in an elementwise expression)."""
    shape = _shape(size if isinstance(size, (tuple, list)) else (size,))
    if dtype is None:
        dt = {0: dtypes.bool_, 1: dtypes.int64, 2: dtypes.default_float}[
            dtypes.scalar_kind(fill_value)]
    else:
        dt = dtypes.get(dtype)
    t = elementwise("full", [fill_value], [dt.compute], dt, device=_device.get(device),
                    shape=shape)
    return _finish(t, requires_grad)


@register("zeros")
def zeros(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros of shape `size` (as arguments or a tuple); float32 unless
    `dtype` is given. Lazy (see full)."""
    return full(_shape(size), 0, dtypes.get(dtype), device, requires_grad)


@register("ones")
def ones(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones of shape `size` (as arguments or a tuple); float32 unless
    `dtype` is given. Lazy (see full)."""
    return full(_shape(size), 1, dtypes.get(dtype), device, requires_grad)


def empty(*size, dtype=None, device=None) -> Tensor:
    """Uninitialised storage (no kernel)."""
    return Tensor._empty(_shape(size), dtypes.get(dtype), _device.get(device))


def _like(x: Tensor, dtype, device):
    return (dtypes.get(dtype) if dtype is not None else x.dtype,
            _device.get(device) if device is not None else x.device)


def zeros_like(x, dtype=None, device=None, requires_grad=False) -> Tensor:
    """zeros of x's shape, with x's dtype and device unless given."""
    dt, dev = _like(x, dtype, device)
    return full(x.shape, 0, dt, dev, requires_grad)


def ones_like(x, dtype=None, device=None, requires_grad=False) -> Tensor:
    """ones of x's shape, with x's dtype and device unless given."""
    dt, dev = _like(x, dtype, device)
    return full(x.shape, 1, dt, dev, requires_grad)


def full_like(x, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A tensor of x's shape filled with fill_value, with x's dtype and device
    unless given."""
    dt, dev = _like(x, dtype, device)
    return full(x.shape, fill_value, dt, dev, requires_grad)


def empty_like(x, dtype=None, device=None) -> Tensor:
    """Uninitialised storage of x's shape, with x's dtype and device unless
    given (no kernel)."""
    dt, dev = _like(x, dtype, device)
    return Tensor._empty(x.shape, dt, dev)


@register("arange")
def arange(start, end=None, step=1, dtype=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """Values from start (inclusive) to end (exclusive) by step, 1-D.

    `arange(n)` is 0..n-1. int64 when start, end and step are ints, else float32 (unless
    `dtype`); float ranges are computed in float64 where the device has it, as PyTorch does.
    Lazy (a generator node)."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        ints = all(dtypes.scalar_kind(v) <= 1 for v in (start, end, step))
        dt = dtypes.int64 if ints else dtypes.default_float
    else:
        dt = dtypes.get(dtype)
    if dt is dtypes.bool_:
        raise NotImplementedError("arange: not implemented for bool (PyTorch's neither)")
    if not dt.is_float:  # PyTorch truncates start, end and step to the integer type first
        start, end, step = int(start), int(end), int(step)  # (0.5..5.2 by 1.5: 0..4)
    if step == 0:
        raise ValueError("arange step must not be 0")
    n = max(0, math.ceil((end - start) / step))
    dev = _device.get(device)
    # float ranges compute in f64 (as PyTorch does) where the device has it; integer ones in
    # their own type (an int32 range runs where there is no int64)
    ct = (dtypes.float64 if dev.rt.features.f64 else dtypes.float32) if dt.is_float \
        else dt.compute
    t = elementwise("arange", [start, step], [ct, ct], dt, device=dev,
                    shape=(n,))
    return _finish(t, requires_grad)


@register("eye")
def eye(n: int, m: int | None = None, dtype=None, device=None,
        requires_grad: bool = False) -> Tensor:
    """The n x m identity matrix (m defaults to n); float32 unless `dtype`. Lazy."""
    dt = dtypes.get(dtype)
    t = elementwise("eye", [], [], dt, device=_device.get(device),
                    shape=(int(n), int(n if m is None else m)))
    return _finish(t, requires_grad)


def _random(op, size, generator, dtype, device, requires_grad):
    dt = dtypes.get(dtype)
    if not dt.is_float:
        raise TypeError(f"{op} makes floats, got dtype {dt}")
    k0, k1 = (generator or default_generator).next_key()
    t = elementwise(op, [k0, k1], [dtypes.uint32, dtypes.uint32], dt,
                    device=_device.get(device), shape=_shape(size))
    return _finish(t, requires_grad)


@register("rand")
def rand(*size, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Uniform in [0, 1) from a counter-based hash: reproducible under `dl.manual_seed`."""
    return _random("rand", size, generator, dtype, device, requires_grad)


@register("randn")
def randn(*size, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Standard normal (Box-Muller over two hashed uniforms)."""
    return _random("randn", size, generator, dtype, device, requires_grad)


def rand_like(x, generator=None, dtype=None, device=None) -> Tensor:
    """rand of x's shape, with x's dtype and device unless given."""
    dt, dev = _like(x, dtype, device)
    return rand(*x.shape, generator=generator, dtype=dt, device=dev)


def randn_like(x, generator=None, dtype=None, device=None) -> Tensor:
    """randn of x's shape, with x's dtype and device unless given."""
    dt, dev = _like(x, dtype, device)
    return randn(*x.shape, generator=generator, dtype=dt, device=dev)

"""`t.new_zeros(...)`, `t.new_ones`, `t.new_full`, `t.new_empty`, `t.new_tensor`, as torch's:
a new tensor (no history) with t's dtype and device unless `dtype`/`device` are given."""
from __future__ import annotations

from .. import devices as _device
from .. import dtypes
from ..tensor import Tensor
from .creation import _shape, empty, full, tensor
from .registry import register

__all__: list = []


def _dd(x: Tensor, dtype, device) -> tuple:
    return (dtypes.get(dtype) if dtype is not None else x.dtype,
            _device.get(device) if device is not None else x.device)


def _with_grad(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        t._materialise()
        t.requires_grad = True
    return t


@register("new_full", method=True)
def new_full(x: Tensor, size, fill_value, *, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """A tensor of shape `size` filled with fill_value, with x's dtype and device unless
    given. Also `t.new_full(size, value)`."""
    dt, dev = _dd(x, dtype, device)
    return full(_shape((size,)), fill_value, dt, dev, requires_grad)


@register("new_zeros", method=True)
def new_zeros(x: Tensor, *size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """zeros of shape `size` (as arguments or a tuple), with x's dtype and device unless
    given. Also `t.new_zeros(...)`."""
    return new_full(x, _shape(size), 0, dtype=dtype, device=device,
                    requires_grad=requires_grad)


@register("new_ones", method=True)
def new_ones(x: Tensor, *size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """ones of shape `size` (as arguments or a tuple), with x's dtype and device unless
    given. Also `t.new_ones(...)`."""
    return new_full(x, _shape(size), 1, dtype=dtype, device=device,
                    requires_grad=requires_grad)


@register("new_empty", method=True)
def new_empty(x: Tensor, *size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Uninitialised storage of shape `size` (as arguments or a tuple), with x's dtype and
    device unless given (no kernel). Also `t.new_empty(...)`."""
    dt, dev = _dd(x, dtype, device)
    return _with_grad(empty(*_shape(size), dtype=dt, device=dev), requires_grad)


@register("new_tensor", method=True)
def new_tensor(x: Tensor, data, *, dtype=None, device=None,
               requires_grad: bool = False) -> Tensor:
    """A copy of `data` (as `dl.tensor`) with x's dtype and device unless given (torch's
    rule: x's dtype even for integer data). Also `t.new_tensor(data)`."""
    dt, dev = _dd(x, dtype, device)
    return tensor(data, dtype=dt, device=dev, requires_grad=requires_grad)

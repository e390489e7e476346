"""Calling the kernel library (dl/kernels) from tensors: operands as strided views of their
storage, results wrapped as tensors, one counted launch per library op."""
from __future__ import annotations

from .. import shapes
from ..fusion import elementwise
from ..kernels import plan
from ..kernels.launch import record_launch
from ..kernels.view import strided
from ..tensor import Tensor


def operand(t: Tensor, contiguous: bool = False):
    """t as a library operand: a view of its storage with t's shape and strides. Library
    kernels index from the allocation's first element, so a view with an offset (or, with
    `contiguous`, any non-contiguous view) is copied first."""
    t._materialise()
    if t.offset or (contiguous and not t.is_contiguous()):
        t = copy(t)
    view = t.__dict__.get("_lib_view")
    if view is None or view[0] is not t._buf:  # a view's storage never changes once set
        view = (t._buf, strided(t._buf, t.shape or (1,), t._strides or (1,)))
        t._lib_view = view
    return view[1]


def copy(t: Tensor) -> Tensor:
    """A fresh contiguous copy at offset 0 (no autograd: callers record their own)."""
    return elementwise("identity", [t], [t.dtype.compute], t.dtype)._materialise()


def result(buf, dtype, device, shape=None) -> Tensor:
    """A library output buffer (contiguous, offset 0) as a tensor."""
    shape = tuple(buf.shape if shape is None else shape)
    return Tensor(buf.buffer, shape, shapes.contiguous_strides(shape), 0, dtype, device)


def counted(name: str, fn, *args, **kwargs):
    """Runs a library launcher; `dl.count_kernels` sees it as one launch named lib.<name>
    (a tuned op may run 1-3 kernels: a split reduction, a packed B panel, im2col)."""
    out = plan.call(fn, args, kwargs)
    record_launch("lib." + name)
    return out


_META: dict = {}  # a plan's tag -> its result's (shape, strides, offset, dtype)


def planned_result(tag, tensors: tuple, run):
    """run() (a tensor op without autograd, returning one tensor) through a dispatch plan
    keyed on `tag` (the op and its non-tensor arguments) and the tensors' views: a repeated
    call skips the op's Python (dims, views, checks, library calls) and replays its
    launches. tensors may hold None (an absent optional operand). None where no plan can
    serve: a lazy operand or plans turned off; the caller then runs the op itself."""
    if not plan.enabled:
        return None
    key: list = [tag]
    bufs: list = []
    device = None
    for t in tensors:
        if t is None:
            key.append(None)
            continue
        if t._node is not None:
            return None
        key.append((t.shape, t._strides, t.offset, t.dtype, t.device))
        bufs.append(t._buf)
        device = t.device
    if device is None:
        return None
    key = tuple(key)

    def traced():
        y = run()._materialise()
        if len(_META) >= plan.MAX_PLANS:  # both tables start again: no plan outlives its meta
            _META.clear()
            plan.clear()
        _META[key] = (y.shape, y._strides, y.offset, y.dtype)
        return y._buf

    buf = plan.planned_bufs(key, device.rt, tuple(bufs), traced)
    shape, strides, offset, dtype = _META[key]
    return Tensor(buf, shape, strides, offset, dtype, device)

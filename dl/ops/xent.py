"""cross_entropy over class indices on dl/kernels/xent: one launch for the per-row losses and
one for their sum or mean (through a dispatch plan), backward one launch for the logits'
gradient."""
from __future__ import annotations

from cube import recording

from .. import dtypes
from ..autograd import record
from ..kernels import plan
from ..kernels import xent as lib
from ..kernels.launch import launch_1d
from ..tensor import Tensor

_F = (dtypes.float32, dtypes.float64)


def supported(x: Tensor, target: Tensor, label_smoothing: float, weight) -> bool:
    return (x.ndim == 2 and x.dtype in _F and not label_smoothing and weight is None
            and target.ndim == 1 and target.dtype in (dtypes.int32, dtypes.int64)
            and x.shape[0] == target.shape[0] and x.shape[0] > 0 and x.shape[1] > 0
            and target.device == x.device)


def cross_entropy_rows(x: Tensor, target: Tensor, reduction: str,
                       ignore_index: int) -> Tensor:
    """Callers check `supported` (and the reduction's name) first. A target outside [0, C)
    other than ignore_index is an IndexError (the finishing kernel flags it; reading the
    flags is a host synchronisation, skipped inside a capture, where such a row's loss is
    nan). Rows whose target is ignore_index count for nothing: the mean divides by the
    others' number (nan with zero gradients when there are none, as PyTorch's)."""
    dev = x.device
    x._materialise()
    target._materialise()
    tag = ("cross_entropy", reduction, ignore_index, x.shape, x._strides, x.offset, x.dtype,
           target.shape, target._strides, target.offset, target.dtype)

    def run():
        return lib.forward(dev.rt, x._karg(), x.offset, target._karg(), target.offset,
                           ignore_index, reduction)
    # both launches through one dispatch plan: a repeated call replays them (the flags are
    # read after it, from the buffer the plan gives back)
    out, st = plan.planned_bufs(tag, dev.rt, (x._buf, target._buf), run)
    rows, dt = x.shape[0], x.dtype
    n = rows if reduction == "none" else 1
    if recording.current() is None and out.numpy()[n]:  # (the host names the target)
        t = target.numpy().reshape(-1)
        bad = t[(t != ignore_index) & ((t < 0) | (t >= x.shape[1]))]
        if bad.size:  # (none: kernels that did not run, `cube check`'s capture)
            raise IndexError(f"cross_entropy: target {int(bad[0])} is out of bounds for "
                             f"{x.shape[1]} classes")
    st = Tensor(st, (3 * rows + 1,), (1,), 0, dt, dev)
    shape = (rows,) if reduction == "none" else ()
    out = Tensor(out, shape, (1,) if shape else (), 0, dt, dev)
    rt = dev.rt

    def back(g):
        g = g.to(dt)._materialise()
        gstrides = (0,) if g.ndim == 0 else g._strides
        gx = Tensor._empty(x.shape, dt, dev)
        launch_1d(lib.xent_grad, rt, gx.numel(), x=x._karg(), x_off=x.offset,
                  t=target._karg(), t_off=target.offset, st=st._buf,
                  g=g._karg((rows,), gstrides), g_off=g.offset, gx=gx._buf)
        return (gx,)
    # beyond x, the closure reads the targets and the rows' statistics
    return record(out, "cross_entropy", (x,), back,
                  plan=(("cross_entropy",), (target, st)))

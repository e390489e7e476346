"""cross_entropy over class indices on dl/kernels/xent: one launch for the per-row losses,
the mean or sum one reduction, backward one launch for the logits' gradient."""
from __future__ import annotations

import numpy as np

from cube import recording

from .. import dtypes
from ..autograd import no_grad, record
from ..kernels import xent as lib
from ..kernels.launch import launch_1d
from ..tensor import Tensor
from . import reduce as R

_F = (dtypes.float32, dtypes.float64)


def supported(x: Tensor, target: Tensor, label_smoothing: float, weight) -> bool:
    return (x.ndim == 2 and x.dtype in _F and not label_smoothing and weight is None
            and target.ndim == 1 and target.dtype in (dtypes.int32, dtypes.int64)
            and x.shape[0] == target.shape[0] and x.shape[0] > 0 and x.shape[1] > 0
            and target.device == x.device)


def cross_entropy_rows(x: Tensor, target: Tensor, reduction: str,
                       ignore_index: int) -> Tensor:
    """Callers check `supported` (and the reduction's name) first. A target outside [0, C)
    other than ignore_index is an IndexError (the rows kernel flags it; reading the flags
    is a host synchronisation, skipped inside a capture, where such a row's loss is nan).
    Rows whose target is ignore_index count for nothing: the mean divides by the others'
    number (nan with zero gradients when there are none, as PyTorch's)."""
    rt, dev = x.device.rt, x.device
    rows = x.shape[0]
    x._materialise()
    target._materialise()
    loss = Tensor._empty((rows,), x.dtype, dev)
    lse = Tensor._empty((rows,), x.dtype, dev)
    valid = Tensor._empty((rows,), x.dtype, dev)
    flags = rt.from_numpy(np.zeros(2, np.uint32))
    bad = rt.from_numpy(np.zeros(1, target.dtype.storage_np))
    launch_1d(lib.xent_rows, rt, rows, x=x._karg(), x_off=x.offset, t=target._karg(),
              t_off=target.offset, loss=loss._buf, lse=lse._buf, valid=valid._buf,
              flags=flags, bad=bad, ignore=ignore_index, neg_inf=lib.NEG_INF)
    ignored = True
    if recording.active is None:
        out_of_range, ignored = (int(f) for f in flags.numpy().reshape(-1))
        if out_of_range:
            raise IndexError(f"cross_entropy: target {int(bad.numpy().reshape(-1)[0])} is "
                             f"out of bounds for {x.shape[1]} classes")
    count = None
    with no_grad():
        if reduction == "none":
            out = loss
        elif reduction == "sum":
            out = R.sum(loss)
        elif not ignored:  # every row counts: the mean over rows
            out = R.mean(loss)
        else:
            count = R.sum(valid)
            out = R.sum(loss) / count

    scale = 1.0 / rows if reduction == "mean" and count is None else 1.0

    def back(g):
        g = g.to(x.dtype)
        if count is not None:
            g = g / count
        g = g._materialise()
        gstrides = (0,) if g.ndim == 0 else g._strides
        gx = Tensor._empty(x.shape, x.dtype, dev)
        launch_1d(lib.xent_grad, rt, gx.numel(), x=x._karg(), x_off=x.offset,
                  t=target._karg(), t_off=target.offset, lse=lse._buf, valid=valid._buf,
                  g=g._karg((rows,), gstrides), g_off=g.offset, scale=scale, gx=gx._buf)
        return (gx,)
    # beyond x, the closure reads the targets, the rows' statistics and the scale; with
    # ignored rows it divides a lazy g by their count (fused: no plan for a lazy g)
    return record(out, "cross_entropy", (x,), back,
                  plan=(("cross_entropy", scale, count is None), (target, lse, valid, count),
                        count is not None))

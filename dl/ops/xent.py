"""cross_entropy over class indices on dl/kernels/xent: one launch for the per-row losses,
the mean or sum one reduction, backward one launch for the logits' gradient."""
from __future__ import annotations

from .. import dtypes
from ..autograd import no_grad, record
from ..kernels import xent as lib
from ..kernels.launch import launch_1d
from ..tensor import Tensor
from . import reduce as R

_F = (dtypes.float32, dtypes.float64)


def supported(x: Tensor, target: Tensor, label_smoothing: float) -> bool:
    return (x.ndim == 2 and x.dtype in _F and not label_smoothing and target.ndim == 1
            and target.dtype in (dtypes.int32, dtypes.int64) and x.shape[0] == target.shape[0]
            and x.shape[0] > 0 and x.shape[1] > 0 and target.device == x.device)


def cross_entropy_rows(x: Tensor, target: Tensor, reduction: str) -> Tensor:
    """Callers check `supported` (and the reduction's name) first."""
    rt, dev = x.device.rt, x.device
    rows = x.shape[0]
    x._materialise()
    target._materialise()
    loss = Tensor._empty((rows,), x.dtype, dev)
    lse = Tensor._empty((rows,), x.dtype, dev)
    launch_1d(lib.xent_rows, rt, rows, x=x._karg(), x_off=x.offset, t=target._karg(),
              t_off=target.offset, loss=loss._buf, lse=lse._buf, neg_inf=lib.NEG_INF)
    with no_grad():
        out = loss if reduction == "none" else \
            R.sum(loss) if reduction == "sum" else R.mean(loss)
    scale = 1.0 / rows if reduction == "mean" else 1.0

    def back(g):
        g = g.to(x.dtype)._materialise()
        gstrides = (0,) if g.ndim == 0 else g._strides
        gx = Tensor._empty(x.shape, x.dtype, dev)
        launch_1d(lib.xent_grad, rt, gx.numel(), x=x._karg(), x_off=x.offset,
                  t=target._karg(), t_off=target.offset, lse=lse._buf,
                  g=g._karg((rows,), gstrides), g_off=g.offset, gx=gx._buf, scale=scale)
        return (gx,)
    return record(out, "cross_entropy", (x,), back)

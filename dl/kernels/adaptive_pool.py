"""Adaptive average pooling of NCHW images (`F.adaptive_avg_pool2d`) and its gradient.

Output (oh, ow) averages input rows [floor(oh * IH / OH), ceil((oh + 1) * IH / OH)) and the
like for columns, as PyTorch's (windows overlap when OH does not divide IH). The gradient is
a gather: input row ih lies in the windows of output rows [floor(ih * OH / IH),
ceil((ih + 1) * OH / IH)), so each input element sums its windows' gradients divided by
their sizes, deterministically (no atomics). Geometry is compile-time."""
from __future__ import annotations

import typing

from cube import ABSOLUTE_POS, Array, Comptime, Tensor, cube

from .launch import cube_count

F = typing.TypeVar("F")


@cube
def _lo(o, NI: Comptime[int], NO: Comptime[int]):
    return (o * NI) // NO


@cube
def _hi(o, NI: Comptime[int], NO: Comptime[int]):
    return ((o + 1) * NI + NO - 1) // NO


@cube(launch=True, unchecked=True)
def adaptive_avg_pool2d_fwd(x: Tensor[F], out: Array[F], C: Comptime[int], IH: Comptime[int],
                            IW: Comptime[int], OH: Comptime[int], OW: Comptime[int]):
    """out (N, C, OH, OW) contiguous from x (N, C, IH, IW) by strides."""
    i = ABSOLUTE_POS
    if i < out.len():
        ow = i % OW
        oh = (i // OW) % OH
        c = (i // (OW * OH)) % C
        n = i // (OW * OH * C)
        h0 = _lo(oh, IH, OH)
        h1 = _hi(oh, IH, OH)
        w0 = _lo(ow, IW, OW)
        w1 = _hi(ow, IW, OW)
        base = n * x.stride(0) + c * x.stride(1)
        acc = F(0)
        for h in range(h0, h1):
            for w in range(w0, w1):
                acc += x[base + h * x.stride(2) + w * x.stride(3)]
        out[i] = acc / F((h1 - h0) * (w1 - w0))


@cube(launch=True, unchecked=True)
def adaptive_avg_pool2d_bwd(g: Array[F], out: Array[F], IH: Comptime[int], IW: Comptime[int],
                            OH: Comptime[int], OW: Comptime[int]):
    """out (N, C, IH, IW) from g (N, C, OH, OW), both contiguous."""
    i = ABSOLUTE_POS
    if i < out.len():
        iw = i % IW
        ih = (i // IW) % IH
        nc = i // (IW * IH)
        acc = F(0)
        for oh in range(_lo(ih, OH, IH), _hi(ih, OH, IH)):
            rows = _hi(oh, IH, OH) - _lo(oh, IH, OH)
            for ow in range(_lo(iw, OW, IW), _hi(iw, OW, IW)):
                cols = _hi(ow, IW, OW) - _lo(ow, IW, OW)
                acc += g[(nc * OH + oh) * OW + ow] / F(rows * cols)
        out[i] = acc


def adaptive_avg_pool2d(rt, x, out):
    """x: a strided (N, C, IH, IW) view; out: a contiguous (N, C, OH, OW) buffer."""
    n, c, ih, iw = x.shape
    _, _, oh, ow = out.shape
    if out.size:
        adaptive_avg_pool2d_fwd.launch(rt, cube_count=cube_count(out.size, 256), cube_dim=256,
                                       x=x, out=out, C=c, IH=ih, IW=iw, OH=oh, OW=ow)
    return out


def adaptive_avg_pool2d_backward(rt, g, out):
    """g: contiguous (N, C, OH, OW); out: contiguous (N, C, IH, IW)."""
    _, _, oh, ow = g.shape
    _, _, ih, iw = out.shape
    if out.size:
        adaptive_avg_pool2d_bwd.launch(rt, cube_count=cube_count(out.size, 256), cube_dim=256,
                                       g=g, out=out, IH=ih, IW=iw, OH=oh, OW=ow)
    return out

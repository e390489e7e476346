"""col2im: the gradient of conv2d's im2col (dl/kernels/conv.py), so a convolution's input
gradient is a matmul (weights^T @ output gradient, in column form) plus this pass.

Deterministic: instead of scattering each column entry into the input (overlapping windows
would need atomics), each input element gathers the KH x KW column entries that read it.
The geometry but the batch is compile-time: constant divisors for the per-element index
arithmetic."""
from __future__ import annotations

import typing

import cube as cb
from cube import ABSOLUTE_POS, Array, Comptime, cube, u32

from .tensor_pool import window_source

F = typing.TypeVar("F")


@cube(launch=True, unchecked=True)
def col2im(col: Array[F], out: Array[F], C: Comptime[int], H: Comptime[int],
           W: Comptime[int], OH: Comptime[int], OW: Comptime[int], NP: u32,
           KH: Comptime[int], KW: Comptime[int], SH: Comptime[int], SW: Comptime[int],
           PH: Comptime[int], PW: Comptime[int], DH: Comptime[int], DW: Comptime[int]):
    """col (C*KH*KW, NP = N*OH*OW) -> out (N, C, H, W) contiguous, one unit per element."""
    i = ABSOLUTE_POS
    if i < out.len():
        w = i % W
        h = (i // W) % H
        c = (i // (W * H)) % C
        n = i // (W * H * C)
        acc = F(0)
        for kh in cb.range(KH, unroll=True):
            oh = window_source(h, PH, kh, DH, SH, OH)
            if oh >= 0:
                for kw in cb.range(KW, unroll=True):
                    ow = window_source(w, PW, kw, DW, SW, OW)
                    if ow >= 0:
                        row = (c * KH + kh) * KW + kw
                        acc += col[row * NP + n * OH * OW + u32(oh) * OW + u32(ow)]
        out[i] = acc

"""Gather-style kernels: index_select and gather (their gradients scatter: dl/kernels/scatter.py).

Tensors come in as `Tensor` params (the whole storage, with the view's shape and strides) plus
the view's offset; one unit per output element decomposes its linear position into
coordinates (innermost dim last)."""
from __future__ import annotations

from typing import TypeVar

import cube as cb
from cube import ABSOLUTE_POS, Array, Comptime, Tensor, cube, u32

F = TypeVar("F")
I = TypeVar("I")  # noqa: E741 - the index type variable


@cube(launch=True)
def index_select_kernel(x: Tensor[F], x_off: u32, idx: Array[I], idx_off: u32, out: Tensor[F],
                        n: u32, dim: Comptime[int]):
    i = ABSOLUTE_POS
    if i < n:
        rem = i
        src = x_off
        for d in cb.range(out.rank() - 1, -1, -1, unroll=True):
            c = rem % out.shape(d)
            rem = rem // out.shape(d)
            if d == dim:
                c = u32(idx[idx_off + c])
            src += c * x.stride(d)
        out[i] = x[src]


@cube(launch=True)
def gather_kernel(x: Tensor[F], x_off: u32, idx: Tensor[I], idx_off: u32, out: Tensor[F],
                  n: u32, dim: Comptime[int]):
    i = ABSOLUTE_POS
    if i < n:
        rem = i
        src = x_off
        ip = idx_off
        for d in cb.range(out.rank() - 1, -1, -1, unroll=True):
            c = rem % out.shape(d)
            rem = rem // out.shape(d)
            ip += c * idx.stride(d)
            if d != dim:
                src += c * x.stride(d)
        out[i] = x[src + u32(idx[ip]) * x.stride(dim)]

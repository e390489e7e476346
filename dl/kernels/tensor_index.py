"""Gather-style kernels: index_select, gather and their gradients.

Tensors come in as `Tensor` params (the whole storage, with the view's shape and strides) plus
the view's offset; one unit per output element decomposes its linear position into
coordinates (innermost dim last). The gradients are deterministic: instead of atomically
scattering, each input position loops over the indices that select it."""
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
def index_select_backward_kernel(g: Tensor[F], idx: Array[I], idx_off: u32, k: u32,
                                 out: Tensor[F], n: u32, dim: Comptime[int]):
    """out (the input's shape, contiguous) = sum over j with idx[j] == position of g[.., j, ..]
    (g contiguous)."""
    i = ABSOLUTE_POS
    if i < n:
        rem = i
        base = u32(0)
        p = u32(0)
        for d in cb.range(out.rank() - 1, -1, -1, unroll=True):
            c = rem % out.shape(d)
            rem = rem // out.shape(d)
            if d == dim:
                p = c
            else:
                base += c * g.stride(d)
        acc = F(0)
        step = g.stride(dim)
        for j in range(0, k):
            if idx[idx_off + j] == I(p):
                acc += g[base + j * step]
        out[i] = acc


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


@cube(launch=True)
def gather_backward_kernel(g: Tensor[F], idx: Tensor[I], idx_off: u32, out: Tensor[F], n: u32,
                           dim: Comptime[int]):
    """out (the input's shape, contiguous) = scatter-add of g (contiguous, idx's shape) along
    dim: each position sums the g entries of its slice whose index selects it."""
    i = ABSOLUTE_POS
    if i < n:
        rem = i
        gbase = u32(0)
        ibase = idx_off
        p = u32(0)
        inside = True
        for d in cb.range(out.rank() - 1, -1, -1, unroll=True):
            c = rem % out.shape(d)
            rem = rem // out.shape(d)
            if d == dim:
                p = c
            else:
                if c >= g.shape(d):
                    inside = False
                gbase += c * g.stride(d)
                ibase += c * idx.stride(d)
        acc = F(0)
        if inside:
            for j in range(0, g.shape(dim)):
                if idx[ibase + j * idx.stride(dim)] == I(p):
                    acc += g[gbase + j * g.stride(dim)]
        out[i] = acc

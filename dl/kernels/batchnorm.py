"""Per-channel sums for batch norm in training, over x viewed as (N, C, S) (S: the spatial
dims). The normalisation itself is elementwise and stays a lazy, fused graph; these kernels
give it its statistics in one launch (forward) and its two gradient sums in one launch
(backward), where reductions over dims (0, 2, 3) took two library reductions each.

- `bn_stats`: mean and 1 / sqrt(biased variance + eps) (two passes over the channel: no
  cancellation), and optionally the running statistics updated in place (PyTorch's rule:
  the unbiased variance).
- `bn_grad_sums`: sum(g) and sum(g * xhat) per channel.

One cube per channel; its BLOCK units split the channel's N x S elements (BLOCK is 1 on the
CPU, where a unit reads whole rows of S as lines) and combine through shared memory."""
from __future__ import annotations

import typing

import cube as cb
from cube import CUBE_POS, UNIT_POS, Array, Comptime, Line, Tensor, cube

from .common import is_cpu, line_size
from .rowops import block_reduce, lanes_sum

F = typing.TypeVar("F")


@cube(launch=True)
def bn_stats(x: Tensor[Line[F]], mean: Array[F], invstd: Array[F], run_mean: Array[F],
             run_var: Array[F], momentum: F, eps: F, BLOCK: Comptime[int],
             RUNNING: Comptime[bool]):
    L = cb.comptime(x.line_size())
    c = CUBE_POS
    smem = cb.SharedMemory(F, BLOCK)
    count = F(x.shape(0) * x.shape(2))
    sl = x.shape(2) // L
    acc = Line[F, L](0)
    for n in range(x.shape(0)):
        base = (n * x.stride(0) + c * x.stride(1)) // L
        for s in range(UNIT_POS, sl, BLOCK):
            acc += x[base + s]
    m = block_reduce(smem, lanes_sum(acc, L), BLOCK, False) / count
    sq = Line[F, L](0)
    for n in range(x.shape(0)):
        base = (n * x.stride(0) + c * x.stride(1)) // L
        for s in range(UNIT_POS, sl, BLOCK):
            d = x[base + s] - m
            sq = cb.fma(d, d, sq)
    v = block_reduce(smem, lanes_sum(sq, L), BLOCK, False) / count
    if UNIT_POS == 0:
        mean[c] = m
        invstd[c] = cb.rsqrt(v + eps)
        if RUNNING:
            unbiased = v * count / max(count - F(1), F(1))
            run_mean[c] = run_mean[c] * (F(1) - momentum) + m * momentum
            run_var[c] = run_var[c] * (F(1) - momentum) + unbiased * momentum


@cube(launch=True)
def bn_grad_sums(x: Tensor[Line[F]], g: Tensor[Line[F]], mean: Array[F], invstd: Array[F],
                 sum_g: Array[F], sum_gx: Array[F], BLOCK: Comptime[int]):
    """sum_g[c] = sum(g), sum_gx[c] = sum(g * (x - mean) * invstd) over channel c."""
    L = cb.comptime(x.line_size())
    c = CUBE_POS
    smem = cb.SharedMemory(F, BLOCK)
    sl = x.shape(2) // L
    m = mean[c]
    sg = Line[F, L](0)
    sgx = Line[F, L](0)
    for n in range(x.shape(0)):
        bx = (n * x.stride(0) + c * x.stride(1)) // L
        bg = (n * g.stride(0) + c * g.stride(1)) // L
        for s in range(UNIT_POS, sl, BLOCK):
            gv = g[bg + s]
            sg += gv
            sgx = cb.fma(gv, x[bx + s] - m, sgx)
    tg = block_reduce(smem, lanes_sum(sg, L), BLOCK, False)
    tgx = block_reduce(smem, lanes_sum(sgx, L), BLOCK, False)
    if UNIT_POS == 0:
        sum_g[c] = tg
        sum_gx[c] = tgx * invstd[c]


def _launch_shape(rt, x3, *others):
    """(block, line size) for (N, C, S) views whose last dim is contiguous."""
    s = x3.shape[2]
    strides = [v.strides[k] for v in (x3, *others) for k in (0, 1)]
    lsz = line_size(rt, x3.elem, s, *strides)
    block = 1 if is_cpu(rt) else 128
    return block, lsz


def stats(rt, x3, eps: float, run_mean=None, run_var=None, momentum: float = 0.1):
    """(mean, invstd) buffers of shape (C,) for an (N, C, S) view with unit stride along S;
    run_mean and run_var (both or neither) contiguous buffers, updated in place (operands
    of their own: a dispatch plan keys them, where a tuple of them made every call go
    unplanned)."""
    c = x3.shape[1]
    mean, invstd = rt.empty((c,), x3.elem), rt.empty((c,), x3.elem)
    block, lsz = _launch_shape(rt, x3)
    running = run_mean is not None
    rm, rv = (run_mean, run_var) if running else (mean, invstd)
    bn_stats.launch(rt, cube_count=c, cube_dim=block, x=x3.lines(lsz), mean=mean,
                    invstd=invstd, run_mean=rm, run_var=rv, momentum=float(momentum),
                    eps=float(eps), BLOCK=block, RUNNING=running)
    return mean, invstd


def grad_sums(rt, x3, g3, mean, invstd):
    """(sum g, sum g * xhat) per channel, buffers of shape (C,)."""
    c = x3.shape[1]
    sg, sgx = rt.empty((c,), x3.elem), rt.empty((c,), x3.elem)
    block, lsz = _launch_shape(rt, x3, g3)
    bn_grad_sums.launch(rt, cube_count=c, cube_dim=block, x=x3.lines(lsz), g=g3.lines(lsz),
                        mean=mean, invstd=invstd, sum_g=sg, sum_gx=sgx, BLOCK=block)
    return sg, sgx

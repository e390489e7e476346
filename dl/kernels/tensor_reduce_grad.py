"""STOPGAP: a minimal sum over the last axis of a contiguous [rows, cols] block, one unit per
row, accumulating sequentially. Autodiff needs it to sum broadcast gradients back to an
input's shape (and mse_loss for its mean).

TODO(issue 5): switch `dl.ops.reduce_grad` to the kernel library's reduction (any axis, tree
reduction, autotuned) when it merges, and delete this file."""
from __future__ import annotations

from typing import TypeVar

from cube import ABSOLUTE_POS, Array, cube, u32

F = TypeVar("F")


@cube(launch=True)
def sum_rows_stopgap(x: Array[F], out: Array[F], rows: u32, cols: u32):
    r = ABSOLUTE_POS
    if r < rows:
        acc = F(0)
        base = r * cols
        for j in range(0, cols):
            acc += x[base + j]
        out[r] = acc

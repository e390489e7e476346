"""Launching a 1-D `@cube` kernel over n units, counted by `dl.count_kernels`."""
from __future__ import annotations

from ..fusion.materialise import CUBE_DIM, cube_count
from ..fusion.stats import record_launch


def launch_1d(kernel, rt, n: int, /, **args) -> None:
    if n <= 0:
        return
    kernel.launch(rt, cube_count=cube_count(n), cube_dim=(CUBE_DIM,), **args)
    record_launch(kernel.__name__)

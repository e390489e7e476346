"""Fill a buffer with a value (outputs of empty reductions, zero-K matmuls)."""
import typing

from cube import ABSOLUTE_POS, Array, cube

from .common import cdiv

F = typing.TypeVar("F")


@cube(launch=True)
def fill_kernel(out: Array[F], value: F):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = value


def fill(rt, out, value: float):
    n = out.buffer.size
    if n:
        fill_kernel.launch(rt, cube_count=cdiv(n, 256), cube_dim=256, out=out.buffer,
                           value=float(value))
    return out

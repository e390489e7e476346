"""Fused GELU over lines of 4: one pass over memory, erf inlined from a @cube helper."""
import math
import sys

import numpy as np

import cube as cb
from cube import ABSOLUTE_POS, Array, Line, cube, f32


@cube
def gelu(x):
    return 0.5 * x * (1.0 + cb.erf(x * 0.7071067811865476))


@cube(launch=True)
def gelu_kernel(inp: Array[Line[f32]], out: Array[Line[f32]]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = gelu(inp[i])


def reference(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    erf = np.vectorize(math.erf)(x64 / math.sqrt(2.0))
    return 0.5 * x64 * (1.0 + erf)


def run(rt, n: int = 65_536, line: int = 4) -> float:
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32) * 3
    dx = rt.from_numpy(x)
    dy = rt.empty_like(dx)
    lines = n // line
    gelu_kernel.launch(rt, cube_count=((lines + 255) // 256,), cube_dim=(256,),
                       inp=dx.lines(line), out=dy.lines(line))
    err = float(np.max(np.abs(dy.numpy() - reference(x))))
    assert err < 1e-5, err
    return err


if __name__ == "__main__":
    rt = cb.runtime(sys.argv[1] if len(sys.argv) > 1 else None)
    print(f"gelu on {rt.name}: max abs error vs float64 {run(rt):.2e}")

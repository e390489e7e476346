"""Row softmax: one cube per row, a shared-memory tree reduction for max and sum."""
import sys

import numpy as np

import cube as cb
from cube import CUBE_POS, UNIT_POS, Array, Comptime, cube, f32, u32


@cube
def block_reduce(smem, value, BLOCK: Comptime[int], is_max: Comptime[bool]):
    """Reduce `value` over the cube through shared memory; every unit gets the result."""
    t = UNIT_POS
    smem[t] = value
    cb.sync_cube()
    s = u32(BLOCK // 2)
    while s > 0:
        if t < s:
            if is_max:
                smem[t] = max(smem[t], smem[t + s])
            else:
                smem[t] = smem[t] + smem[t + s]
        cb.sync_cube()
        s = s // 2
    result = smem[0]
    cb.sync_cube()
    return result


@cube(launch=True)
def softmax_rows(x: Array[f32], out: Array[f32], cols: u32, BLOCK: Comptime[int]):
    base = CUBE_POS * cols
    smem = cb.SharedMemory(f32, BLOCK)
    m = -float("inf")
    for j in range(UNIT_POS, cols, BLOCK):
        m = max(m, x[base + j])
    row_max = block_reduce(smem, m, BLOCK, True)
    s = 0.0
    for j in range(UNIT_POS, cols, BLOCK):
        s += cb.exp(x[base + j] - row_max)
    total = block_reduce(smem, s, BLOCK, False)
    inv = 1.0 / total
    for j in range(UNIT_POS, cols, BLOCK):
        out[base + j] = cb.exp(x[base + j] - row_max) * inv


# the specialisations `cube check` builds (docs/check.md)
CUBE_CHECK = {softmax_rows: [dict(comptime={"BLOCK": 128})]}


def run(rt, rows: int = 37, cols: int = 1000, block: int = 128) -> float:
    x = np.random.default_rng(2).standard_normal((rows, cols)).astype(np.float32) * 4
    dx = rt.from_numpy(x)
    dy = rt.empty_like(dx)
    softmax_rows.launch(rt, cube_count=(rows,), cube_dim=(block,), x=dx, out=dy, cols=cols,
                        BLOCK=block)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    err = float(np.max(np.abs(dy.numpy() - ref)))
    assert err < 1e-6, err
    return err


if __name__ == "__main__":
    rt = cb.runtime(sys.argv[1] if len(sys.argv) > 1 else None)
    print(f"softmax on {rt.name}: max abs error vs float64 {run(rt):.2e}")

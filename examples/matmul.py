"""Tiled matmul: TILE x TILE cubes stage tiles of A and B in shared memory."""
import sys

import numpy as np

import cube as cb
from cube import (
    CUBE_POS_X,
    CUBE_POS_Y,
    UNIT_POS_X,
    UNIT_POS_Y,
    Array,
    Comptime,
    cube,
    f32,
    u32,
)


@cube(launch=True)
def matmul(a: Array[f32], b: Array[f32], c: Array[f32], m: u32, n: u32, k: u32,
           TILE: Comptime[int]):
    ty, tx = UNIT_POS_Y, UNIT_POS_X
    row = CUBE_POS_Y * TILE + ty
    col = CUBE_POS_X * TILE + tx
    ta = cb.SharedMemory(f32, TILE * TILE)
    tb = cb.SharedMemory(f32, TILE * TILE)
    acc = 0.0
    for t0 in range(0, k, TILE):
        ka = t0 + tx
        kb = t0 + ty
        ta[ty * TILE + tx] = a[row * k + ka] if row < m and ka < k else 0.0
        tb[ty * TILE + tx] = b[kb * n + col] if kb < k and col < n else 0.0
        cb.sync_cube()
        for kk in cb.range(TILE, unroll=True):
            acc += ta[ty * TILE + kk] * tb[kk * TILE + tx]
        cb.sync_cube()
    if row < m and col < n:
        c[row * n + col] = acc


# the specialisations `cube check` builds (docs/check.md)
CUBE_CHECK = {matmul: [dict(comptime={"TILE": 8}), dict(comptime={"TILE": 16})]}


def run(rt, m: int = 67, n: int = 45, k: int = 53, tile: int = 8) -> float:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    da, db = rt.from_numpy(a), rt.from_numpy(b)
    dc = rt.empty((m, n), np.float32)
    matmul.launch(rt, cube_count=((n + tile - 1) // tile, (m + tile - 1) // tile),
                  cube_dim=(tile, tile), a=da, b=db, c=dc, m=m, n=n, k=k, TILE=tile)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = float(np.max(np.abs(dc.numpy() - ref)))
    assert err < 1e-4, err
    return err


if __name__ == "__main__":
    rt = cb.runtime(sys.argv[1] if len(sys.argv) > 1 else None)
    print(f"matmul on {rt.name}: max abs error vs float64 {run(rt):.2e}")

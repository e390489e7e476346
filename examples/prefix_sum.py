"""Cube-wide inclusive prefix sum: plane scans, plane totals in shared memory, then offsets."""
import sys

import numpy as np

import cube as cb
from cube import ABSOLUTE_POS, PLANE_DIM, UNIT_POS, UNIT_POS_PLANE, Array, Comptime, cube, i32


@cube(launch=True)
def block_scan(x: Array[i32], out: Array[i32], BLOCK: Comptime[int]):
    i = ABSOLUTE_POS
    v = x[i] if i < x.len() else 0
    incl = cb.plane_inclusive_sum(v)
    plane = UNIT_POS // PLANE_DIM
    totals = cb.SharedMemory(i32, BLOCK)
    if UNIT_POS_PLANE == PLANE_DIM - 1 or UNIT_POS == BLOCK - 1:
        totals[plane] = incl
    cb.sync_cube()
    if UNIT_POS == 0:  # exclusive scan of the plane totals
        running = 0
        for p in range(0, (BLOCK + PLANE_DIM - 1) // PLANE_DIM):
            t = totals[p]
            totals[p] = running
            running += t
    cb.sync_cube()
    if i < out.len():
        out[i] = incl + totals[plane]


# the specialisations `cube check` builds (docs/check.md)
CUBE_CHECK = {block_scan: [dict(comptime={"BLOCK": 256})]}


def run(rt, n: int = 5000, block: int = 256) -> None:
    x = np.random.default_rng(5).integers(-50, 50, n).astype(np.int32)
    dx = rt.from_numpy(x)
    dy = rt.empty_like(dx)
    block_scan.launch(rt, cube_count=((n + block - 1) // block,), cube_dim=(block,), x=dx,
                      out=dy, BLOCK=block)
    got = dy.numpy()
    for s in range(0, n, block):
        ref = np.cumsum(x[s:s + block])
        assert np.array_equal(got[s:s + block], ref), s


if __name__ == "__main__":
    rt = cb.runtime(sys.argv[1] if len(sys.argv) > 1 else None)
    run(rt)
    print(f"prefix sum on {rt.name} (plane size {rt.plane_size}): matches NumPy")

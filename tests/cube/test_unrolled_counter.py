"""An unrolled loop's counter stays a compile-time value inside a runtime loop (it used to be
seeded as an i32 runtime variable there, so `u32_index + counter` failed to compile)."""
import numpy as np

import cube as cb
from cube import Array, cube, f32, u32


@cube(launch=True)
def _sum_pairs(a: Array[f32], c: Array[f32], n: u32):
    for i in cb.range(2, unroll=True):
        c[i] = a[i]
    for kk in range(n):
        for i in cb.range(2, unroll=True):
            c[i] += a[(kk + 1) * 2 + i]
        for j in (0, 1):
            c[j] += a[kk * 0 + j] * 0.0


def test_unrolled_counter_in_runtime_loop(rt):
    x = np.arange(8, dtype=np.float32)
    y = rt.empty(2)
    _sum_pairs.launch(rt, cube_count=1, cube_dim=1, a=rt.from_numpy(x), c=y, n=3)
    np.testing.assert_array_equal(y.numpy(), x.reshape(4, 2).sum(0))

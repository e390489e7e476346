"""Histogram with atomics: many units add into the same bins at once."""
import sys

import numpy as np

import cube as cb
from cube import ABSOLUTE_POS, Array, cube, f32, u32


@cube(launch=True)
def histogram(x: Array[f32], bins: Array[u32], nbins: u32):
    i = ABSOLUTE_POS
    if i < x.len():
        b = u32(x[i] * f32(nbins))
        cb.atomic_add(bins, min(b, nbins - 1), 1)


def run(rt, n: int = 200_000, nbins: int = 37) -> int:
    x = np.random.default_rng(4).random(n, dtype=np.float32)
    dx = rt.from_numpy(x)
    bins = rt.from_numpy(np.zeros(nbins, np.uint32))
    histogram.launch(rt, cube_count=((n + 255) // 256,), cube_dim=(256,), x=dx, bins=bins,
                     nbins=nbins)
    idx = np.minimum((x * np.float32(nbins)).astype(np.uint32), nbins - 1)
    ref = np.bincount(idx, minlength=nbins)
    got = bins.numpy()
    assert np.array_equal(got, ref), (got, ref)
    return int(got.sum())


if __name__ == "__main__":
    rt = cb.runtime(sys.argv[1] if len(sys.argv) > 1 else None)
    print(f"histogram on {rt.name}: {run(rt)} values binned, matches NumPy")

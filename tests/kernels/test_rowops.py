"""The line helpers of dl/kernels/rowops.py, on every runtime, against NumPy: the in-register
transpose of a square of lines (`transpose_lines`) for every power-of-two line size."""
import numpy as np
import pytest

import cube as cb
from cube import ABSOLUTE_POS, Array, Line, cube, f32
from dl.kernels.rowops import transpose_lines


@cube(launch=True)
def _transpose_squares(x: Array[Line[f32]], out: Array[Line[f32]]):
    L = cb.comptime(x.line_size())
    t = ABSOLUTE_POS
    if t < x.len() // L:
        rows = cb.LocalArray(Line[f32, L], L)
        for i in cb.range(L, unroll=True):
            rows[i] = x[t * L + i]
        transpose_lines(rows, L)
        for i in cb.range(L, unroll=True):
            out[t * L + i] = rows[i]


@pytest.mark.parametrize("lanes", [2, 4, 8, 16])
def test_transpose_lines(rt, lanes):
    squares = 3
    a = np.random.default_rng(lanes).standard_normal(squares * lanes * lanes).astype(np.float32)
    x, out = rt.from_numpy(a), rt.empty(a.size, np.float32)
    _transpose_squares.launch(rt, cube_count=1, cube_dim=squares, x=x.lines(lanes),
                              out=out.lines(lanes))
    want = a.reshape(squares, lanes, lanes).transpose(0, 2, 1).ravel()
    np.testing.assert_array_equal(out.numpy(), want)

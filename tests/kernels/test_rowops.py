"""The line helpers of dl/kernels/rowops.py, on every runtime, against NumPy: the in-register
transpose of a square of lines (`transpose_lines`) and the folded sums of up to L lines
(`lanes_sums`) for every power-of-two line size."""
import numpy as np
import pytest

import cube as cb
from cube import ABSOLUTE_POS, Array, Comptime, Line, cube, f32
from dl.kernels.rowops import lanes_sums, transpose_lines


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


@cube(launch=True)
def _folded_sums(x: Array[Line[f32]], out: Array[Line[f32]], G: Comptime[int]):
    L = cb.comptime(x.line_size())
    t = ABSOLUTE_POS
    if t < x.len() // G:
        acc = cb.LocalArray(Line[f32, L], G + 1)
        acc[0] = Line[f32, L](-1.0)  # a line before BASE, left alone
        for i in cb.range(G, unroll=True):
            acc[1 + i] = x[t * G + i]
        out[t] = lanes_sums(acc, 1, G, L)
        if acc[0][0] != -1.0:
            out[t] = Line[f32, L](0.0)


def _halving_tree(v: np.ndarray) -> np.ndarray:
    """lanes_tree's order in float32: lane i meets lane i + n/2, then i + n/4, ..."""
    v = v.astype(np.float32)
    while v.shape[-1] > 1:
        h = v.shape[-1] // 2
        v = v[..., :h] + v[..., h:]
    return v[..., 0]


@pytest.mark.parametrize("lanes,group", [(1, 1), (2, 1), (2, 2), (4, 2), (4, 4), (8, 1),
                                         (8, 4), (8, 8), (16, 2), (16, 8), (16, 16)])
def test_lanes_sums_fold_lines_in_the_tree_order(rt, lanes, group):
    """Lane j holds the sum of line j's lanes, with the very bits of a halving tree per line
    (the dot matmul's results did not change when its epilogue moved to the fold)."""
    n = 5
    a = np.random.default_rng(lanes * 31 + group).standard_normal(
        (n, group, lanes)).astype(np.float32) * np.float32(1e3)
    x, out = rt.from_numpy(a.ravel()), rt.empty(n * lanes, np.float32)
    _folded_sums.launch(rt, cube_count=1, cube_dim=n, x=x.lines(lanes), out=out.lines(lanes),
                        G=group)
    got = out.numpy().reshape(n, lanes)[:, :group]
    np.testing.assert_array_equal(got, _halving_tree(a))
    np.testing.assert_allclose(got, a.astype(np.float64).sum(-1), rtol=1e-5, atol=1e-2)

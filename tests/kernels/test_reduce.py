"""Reductions: every op and candidate against NumPy float64, contiguous and strided axes."""
import numpy as np
import pytest
from kutil import candidate, names, need

from dl.kernels import reduce as R
from dl.kernels.view import transpose

CASES = [((7,), 0), ((3, 37), 1), ((37, 3), 0), ((2, 5, 33), 1), ((4, 1, 6), 2),
         ((1, 1), 0), ((3, 4100), 1),
         # long strided axes (`chunked`: chunks of rows dividing r, or no candidate at 131)
         ((256, 12), 0), ((3, 200, 16), 1), ((131, 8), 0)]


@pytest.mark.parametrize("name", names(R.REDUCE))
@pytest.mark.parametrize("op", R.OPS)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_reduce_candidates(rt, name, op, case, monkeypatch):
    shape, axis = case
    if rt.name == "interp" and shape[-1] > 1000 and name != "split":
        pytest.skip("long rows are slow in the interpreter")
    x = np.random.default_rng(len(shape) + axis).standard_normal(shape).astype(np.float32)
    with candidate(R.REDUCE, name, monkeypatch):
        got = R.reduce(rt, rt.from_numpy(x), axis, op).numpy()
    ref = R.reference(x, axis, op)
    if op.startswith("arg"):
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_reduce_transposed_view_and_f64(rt):
    need(rt, np.float64)
    x = np.random.default_rng(0).standard_normal((6, 9))
    xt = transpose(rt.from_numpy(np.ascontiguousarray(x.T)))  # a (6, 9) view, strides (1, 6)
    for axis in (0, 1):
        np.testing.assert_allclose(R.reduce(rt, xt, axis, "sum").numpy(), x.sum(axis),
                                   rtol=1e-12)
        np.testing.assert_array_equal(R.reduce(rt, xt, axis, "argmin").numpy(),
                                      x.argmin(axis))


def test_argmax_ties_take_the_first(rt):
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2]], np.float32)
    np.testing.assert_array_equal(R.reduce(rt, rt.from_numpy(x), 1, "argmax").numpy(), [1, 0])


def test_reduce_rejects_ints_and_bad_axis(rt):
    with pytest.raises(ValueError):
        R.reduce(rt, rt.from_numpy(np.ones(3, np.int32)), 0)
    with pytest.raises(ValueError):
        R.reduce(rt, rt.from_numpy(np.ones(3, np.float32)), 1)

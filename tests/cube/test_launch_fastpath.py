"""The cached launch's fast path (cube/kernel.py: the generated `launch`, the bound launcher
per specialisation and, where the executable prepares launches, the repeat of the last one)
refuses exactly what the general path refuses, with the same LaunchErrors, and never runs
a launch it should not repeat: each test first makes the fast path hot with a good launch
(twice, so that the repeat is armed), then changes one thing. Every runtime that starts."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import cube as cb
from cube import ABSOLUTE_POS, Array, Line, Tensor, cube, f32, i32, u32
from cube.recording import Recording

SCALE = 2


@cube(launch=True)
def axpy(x: Array[f32], out: Array[f32], a: f32):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = a * x[i] + out[i]


@cube(launch=True)
def lines4(x: Array[Line[f32, 4]], out: Array[Line[f32, 4]]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = x[i]


@cube(launch=True)
def scaled(out: Array[i32], v: i32):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = v * SCALE


@cube(launch=True)
def rows(t: Tensor[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < t.shape(0):
        out[i] = t[i * t.stride(0)]


def _hot(rt, n=8):
    x = rt.from_numpy(np.arange(n, dtype=np.float32))
    out = rt.zeros(n, np.float32)
    for _ in range(2):
        axpy.launch(rt, cube_count=1, cube_dim=n, x=x, out=out, a=1.0)
    assert axpy.launch is not type(axpy).launch  # the generated launcher
    if rt.name == "cpu":  # which repeats the last launch (the CPU prepares launches)
        assert axpy.launch.__code__.co_filename.startswith("<cube bound launch")
    return x, out


BAD = [
    ({"cube_dim": 8.0}, "cube_dim takes ints"),
    ({"cube_dim": True}, "cube_dim takes ints"),
    ({"cube_count": True}, "cube_count takes ints"),
    ({"cube_count": 1.0}, "cube_count takes ints"),
    ({"cube_count": -1}, "cube_count .* negative"),
    ({"cube_count": (1 << 33,)}, "cube_count .*(limit|at most)"),
    ({"cube_dim": 1 << 20}, r"cube_dim .* outside the limit"),
    ({"cube_dim": 0}, "at least 1"),
    ({"cube_dim": None}, "needs cube_dim"),
    ({"a": 1e39}, "'a' is f32 .*infinity"),
    ({"a": "1"}, "'a' must be a number"),
    ({"a": None}, "'a' must be a number"),
    ({"w": 1}, "unexpected argument 'w'"),
]


@pytest.mark.parametrize("kw,match", BAD, ids=[m for _, m in BAD])
def test_bad_input_after_the_fast_path_is_hot(rt, kw, match):
    x, out = _hot(rt)
    args = {"cube_count": 1, "cube_dim": 8, "x": x, "out": out, "a": 1.0, **kw}
    with pytest.raises(cb.LaunchError, match=match):
        axpy.launch(rt, **args)
    np.testing.assert_array_equal(out.numpy(), 2 * np.arange(8))  # nothing ran


def test_wrong_buffers_after_the_fast_path_is_hot(rt):
    x, out = _hot(rt)
    with pytest.raises(cb.LaunchError, match="'out' must hold f32 elements, got i32"):
        axpy.launch(rt, cube_count=1, cube_dim=8, x=x, out=rt.zeros(8, np.int32), a=1.0)
    other = cb.runtime("cpu" if rt.name == "interp" else "interp")
    with pytest.raises(cb.LaunchError, match="'x' lives on runtime"):
        axpy.launch(rt, cube_count=1, cube_dim=8, x=other.from_numpy(np.ones(8, np.float32)),
                    out=out, a=1.0)
    with pytest.raises(cb.LaunchError, match="'x' must be a buffer"):
        axpy.launch(rt, cube_count=1, cube_dim=8, x=np.ones(8, np.float32), out=out, a=1.0)
    with pytest.raises(cb.LaunchError, match="'x' is a strided view"):
        axpy.launch(rt, cube_count=1, cube_dim=4, x=x.view((4,), (2,)), out=out, a=1.0)
    with pytest.raises(cb.LaunchError, match="needs a runtime"):
        axpy.launch("cpu", cube_count=1, cube_dim=8, x=x, out=out, a=1.0)
    with pytest.raises(cb.LaunchError, match="by name"):
        axpy.launch(rt, 1, 8, x, x=x, out=out, a=1.0)
    with pytest.raises(cb.LaunchError, match="missing the argument 'a'"):
        axpy.launch(rt, cube_count=1, cube_dim=8, x=x, out=out)
    np.testing.assert_array_equal(out.numpy(), 2 * np.arange(8))


def test_same_buffers_on_another_runtime_object_are_refused(rt):
    x, out = _hot(rt)
    other = cb.runtime("cpu" if rt.name == "interp" else "interp")
    with pytest.raises(cb.LaunchError, match="lives on runtime"):
        axpy.launch(other, cube_count=1, cube_dim=8, x=x, out=out, a=1.0)


def test_wrong_line_size_after_the_fast_path_is_hot(rt):
    x = rt.from_numpy(np.arange(16, dtype=np.float32))
    out = rt.zeros(16, np.float32)
    for _ in range(2):
        lines4.launch(rt, cube_count=1, cube_dim=4, x=x.lines(4), out=out.lines(4))
    np.testing.assert_array_equal(out.numpy(), np.arange(16))
    with pytest.raises(cb.LaunchError, match="'x' has line size 2 but the kernel expects 4"):
        lines4.launch(rt, cube_count=1, cube_dim=4, x=x.lines(2), out=out.lines(4))
    with pytest.raises(cb.LaunchError, match="'out' has line size 1"):
        lines4.launch(rt, cube_count=1, cube_dim=4, x=x.lines(4), out=out)


def test_repeats_see_new_values_and_buffers(rt):
    x, out = _hot(rt)
    axpy.launch(rt, cube_count=1, cube_dim=8, x=x, out=out, a=0.5)  # another scalar
    np.testing.assert_array_equal(out.numpy(), 2.5 * np.arange(8))
    out2 = rt.zeros(8, np.float32)  # another buffer
    axpy.launch(rt, cube_count=1, cube_dim=8, x=x, out=out2, a=0.5)
    np.testing.assert_array_equal(out2.numpy(), 0.5 * np.arange(8))
    axpy.launch(rt, cube_count=2, cube_dim=4, x=x, out=out2, a=1.0)  # another grid
    np.testing.assert_array_equal(out2.numpy(), 1.5 * np.arange(8))
    axpy.launch(rt, cube_count=1, cube_dim=4, x=x, out=out2, a=1.0)  # half of it
    np.testing.assert_array_equal(out2.numpy()[:4], 2.5 * np.arange(4))
    np.testing.assert_array_equal(out2.numpy()[4:], 1.5 * np.arange(4, 8))


def test_a_freed_buffer_is_never_the_last_one(rt):
    """The repeat holds its buffers weakly: a new buffer (perhaps at the same address, from
    the pool) is packed anew, a freed one is not written."""
    x, out = _hot(rt)
    for k in range(4):
        del out
        gc.collect()
        out = rt.zeros(8, np.float32)
        axpy.launch(rt, cube_count=1, cube_dim=8, x=x, out=out, a=float(k))
        np.testing.assert_array_equal(out.numpy(), k * np.arange(8))


def test_tensor_views_of_other_ranks_and_strides(rt):
    data = np.arange(32, dtype=np.float32).reshape(8, 4)
    t = rt.from_numpy(data)
    out = rt.zeros(8, np.float32)
    for _ in range(2):
        rows.launch(rt, cube_count=1, cube_dim=8, t=t, out=out)
    np.testing.assert_array_equal(out.numpy(), data[:, 0])
    out = rt.zeros(8, np.float32)
    rows.launch(rt, cube_count=1, cube_dim=8, t=t.view((8, 2), (4, 2)), out=out)
    np.testing.assert_array_equal(out.numpy(), data[:, 0])
    out = rt.zeros(8, np.float32)
    rows.launch(rt, cube_count=1, cube_dim=8, t=t.view((4, 4), (8, 1)), out=out)
    np.testing.assert_array_equal(out.numpy(), [0, 8, 16, 24, 0, 0, 0, 0])
    out = rt.zeros(8, np.float32)
    rows.launch(rt, cube_count=1, cube_dim=8, t=t.view((8,), (4,)), out=out)  # rank 1
    np.testing.assert_array_equal(out.numpy(), data[:, 0])


def test_rebinding_a_global_recompiles_on_a_repeat(rt, monkeypatch):
    out = rt.zeros(4, np.int32)
    for _ in range(2):
        scaled.launch(rt, cube_count=1, cube_dim=4, out=out, v=3)
    np.testing.assert_array_equal(out.numpy(), [6] * 4)
    monkeypatch.setitem(globals(), "SCALE", 5)
    scaled.launch(rt, cube_count=1, cube_dim=4, out=out, v=3)  # the same objects
    np.testing.assert_array_equal(out.numpy(), [15] * 4)
    monkeypatch.delitem(globals(), "SCALE")
    with pytest.raises(cb.CompileError, match="SCALE"):
        scaled.launch(rt, cube_count=1, cube_dim=4, out=out, v=3)


def test_scalar_range_on_repeats(rt):
    out = rt.zeros(4, np.int32)
    for _ in range(2):
        scaled.launch(rt, cube_count=1, cube_dim=4, out=out, v=3)
    with pytest.raises(cb.LaunchError, match="'v' is i32"):
        scaled.launch(rt, cube_count=1, cube_dim=4, out=out, v=1 << 40)
    with pytest.raises(cb.LaunchError, match="'v' is i32 but got the float"):
        scaled.launch(rt, cube_count=1, cube_dim=4, out=out, v=3.0)
    np.testing.assert_array_equal(out.numpy(), [6] * 4)


def test_alternating_specialisations(rt):
    @cube(launch=True)
    def put(out: Array[u32], v: u32):
        i = ABSOLUTE_POS
        if i < out.len():
            out[i] = v

    a, b = rt.zeros(4, np.uint32), rt.zeros(4, np.uint8)
    for k in range(3):
        put.launch(rt, cube_count=1, cube_dim=4, out=a, v=k)
        with pytest.raises(cb.LaunchError, match="'out' must hold u32"):
            put.launch(rt, cube_count=1, cube_dim=4, out=b, v=k)
        put.launch(rt, cube_count=1, cube_dim=4, out=a, v=np.uint32(k + 10))
        assert a.numpy().tolist() == [k + 10] * 4
    assert put.compiles == 2  # int and np.uint32 for v


def test_repeats_are_recorded(rt):
    x, out = _hot(rt)
    with Recording() as rec:
        axpy.launch(rt, cube_count=1, cube_dim=8, x=x, out=out, a=1.0)
    assert rec.launches == 1
    np.testing.assert_array_equal(out.numpy(), 3 * np.arange(8))
    rec.replay()
    np.testing.assert_array_equal(out.numpy(), 4 * np.arange(8))
    axpy.launch(rt, cube_count=1, cube_dim=8, x=x, out=out, a=1.0)  # not recorded now
    assert rec.launches == 1
    np.testing.assert_array_equal(out.numpy(), 5 * np.arange(8))


def test_closure_kernel_repeat_sees_a_changed_variable(rt):
    offset = 1

    @cube(launch=True)
    def k(out: Array[i32]):
        i = ABSOLUTE_POS
        if i < out.len():
            out[i] = offset

    out = rt.zeros(4, np.int32)
    for _ in range(2):
        k.launch(rt, cube_count=1, cube_dim=4, out=out)
    assert out.numpy().tolist() == [1] * 4
    offset = 7
    k.launch(rt, cube_count=1, cube_dim=4, out=out)
    assert out.numpy().tolist() == [7] * 4


def test_parameter_names_of_the_generated_code_take_the_general_path(rt):
    @cube(launch=True)
    def k(_cb_f: Array[i32], _cb_rest: i32):
        i = ABSOLUTE_POS
        if i < _cb_f.len():
            _cb_f[i] = _cb_rest

    out = rt.zeros(4, np.int32)
    for v in (1, 2):
        k.launch(rt, cube_count=1, cube_dim=4, _cb_f=out, _cb_rest=v)
        assert out.numpy().tolist() == [v] * 4
    assert "launch" not in vars(k)
    with pytest.raises(cb.LaunchError, match="'_cb_rest' must be a number"):
        k.launch(rt, cube_count=1, cube_dim=4, _cb_f=out, _cb_rest=None)


def test_equal_grids_of_other_types_after_a_repeat(rt):
    """A repeat takes a grid equal to the last one only when it holds ints: (1.0,), (True,)
    and 8.0 compare equal to (1,) and 8 but are refused as ever."""
    x = rt.from_numpy(np.arange(8, dtype=np.float32))
    out = rt.zeros(8, np.float32)
    for _ in range(3):  # new tuples each time, equal to the last
        axpy.launch(rt, cube_count=(int("1"),), cube_dim=(8, int("1")), x=x, out=out, a=1.0)
    np.testing.assert_array_equal(out.numpy(), 3 * np.arange(8))
    for cc, cd, match in [((1.0,), (8, 1), "cube_count takes ints"),
                          ((True,), (8, 1), "cube_count takes ints"),
                          ((1,), (8.0, 1), "cube_dim takes ints"),
                          ((1,), (8, True), "cube_dim takes ints"),
                          ((1,), 8.0, "cube_dim takes ints")]:
        with pytest.raises(cb.LaunchError, match=match):
            axpy.launch(rt, cube_count=cc, cube_dim=cd, x=x, out=out, a=1.0)
    axpy.launch(rt, cube_count=(np.int64(1),), cube_dim=(8, 1), x=x, out=out, a=1.0)
    np.testing.assert_array_equal(out.numpy(), 4 * np.arange(8))

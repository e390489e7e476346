"""A launch computes what the user wrote or refuses with a CubeError that says why: the source
is the one imported (not the file saved since), scalars are never wrapped, strided views are
never read as contiguous memory, rebinding a global the kernel read recompiles it, and bad
launch inputs never surface as raw Python exceptions. Every test runs on every runtime that
starts; results are checked against NumPy / plain Python."""
from __future__ import annotations

import importlib
import linecache
import sys
import textwrap
import uuid

import numpy as np
import pytest

import cube as cb
from cube import ABSOLUTE_POS, Array, Comptime, Tensor, cube, f16, f32, i32, u32
from cube_ir.types import from_numpy_dtype

# ---- 1. the source is captured at import -------------------------------------------------

MODULE = textwrap.dedent("""
    from cube import cube, Array, f32, ABSOLUTE_POS


    @cube(launch=True)
    def k(a: Array[f32]):
        i = ABSOLUTE_POS
        if i < a.len():
            a[i] = a[i] * 2.0


    @cube(launch=True)
    def bad(a: Array[f32]):
        a[0] = undefined_name + 1.0
""")

# the same file saved after import: a kernel inserted above (so the old line numbers now
# point into it) and both kernels edited
EDITED = MODULE.replace("@cube(launch=True)\ndef k", textwrap.dedent("""\
    @cube(launch=True)
    def decoy(a: Array[f32]):
        i = ABSOLUTE_POS
        if i < a.len():
            a[i] = a[i] * 100.0


    @cube(launch=True)
    def k""")).replace("* 2.0", "* 3.0").replace("undefined_name + 1.0", "other_name + 5.0")


def _import_then_edit(tmp_path, monkeypatch):
    name = f"launch_soundness_mod_{uuid.uuid4().hex}"
    path = tmp_path / f"{name}.py"
    path.write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module(name)
    path.write_text(EDITED)
    linecache.checkcache(str(path))  # as a traceback printed elsewhere would
    monkeypatch.delitem(sys.modules, name)
    return mod


def test_kernel_compiles_the_source_it_was_imported_with(rt, tmp_path, monkeypatch):
    mod = _import_then_edit(tmp_path, monkeypatch)
    data = np.arange(8, dtype=np.float32)
    buf = rt.from_numpy(data)
    mod.k.launch(rt, cube_count=1, cube_dim=8, a=buf)
    np.testing.assert_array_equal(buf.numpy(), data * 2)


def test_compile_error_shows_the_imported_line(rt, tmp_path, monkeypatch):
    mod = _import_then_edit(tmp_path, monkeypatch)
    buf = rt.from_numpy(np.zeros(4, np.float32))
    with pytest.raises(cb.CompileError) as e:
        mod.bad.launch(rt, cube_count=1, cube_dim=4, a=buf)
    line = MODULE.splitlines().index("    a[0] = undefined_name + 1.0") + 1
    msg = str(e.value)
    assert f":{line}:" in msg and "a[0] = undefined_name + 1.0" in msg, msg
    assert "other_name" not in msg


# ---- 2. scalars are never wrapped ------------------------------------------------------

F = __import__("typing").TypeVar("F")


@cube(launch=True)
def put(out: Array[F], v: F):
    if ABSOLUTE_POS == 0:
        out[0] = v


OUT_OF_RANGE = [
    (np.int32, 1 << 40), (np.int32, -(1 << 31) - 1), (np.int32, 2.0),
    (np.int32, np.float32(2.0)), (np.int32, np.int64(1 << 40)),
    (np.uint32, -1), (np.uint32, 1 << 32), (np.uint8, 300), (np.uint8, np.int16(-1)),
    (np.int8, -129), (np.int16, np.uint16(40000)), (np.int64, 1 << 63), (np.uint64, -1),
    (np.bool_, 2), (np.bool_, -1), (np.bool_, 0.5),
    (np.float16, 1e5), (np.float16, 65520.0), (np.float16, -70000),
    (np.float32, 1e39), (np.float32, 10 ** 40), (np.float32, np.float64(-1e300)),
    (np.float64, 10 ** 400),
    (np.int32, "3"), (np.int32, None), (np.float32, 1j), (np.float32, np.complex64(1)),
]


@pytest.mark.parametrize("dtype,value", OUT_OF_RANGE,
                         ids=[f"{np.dtype(d).name}-{v!r}" for d, v in OUT_OF_RANGE])
def test_out_of_range_scalar_is_refused(rt, dtype, value):
    out = rt.zeros(4, dtype)
    with pytest.raises(cb.LaunchError) as e:
        put.launch(rt, cube_count=1, cube_dim=1, out=out, v=value)
    msg = str(e.value)
    assert "'v'" in msg and (repr(value)[:15] in msg or type(value).__name__ in msg), msg


def test_bf16_scalar_rounding_to_infinity_is_refused(rt):
    out = rt.zeros(4, cb.bf16)
    with pytest.raises(cb.LaunchError, match="'v'.*bf16"):
        put.launch(rt, cube_count=1, cube_dim=1, out=out, v=3.4e38)  # f32-finite, bf16 inf


def test_scalar_range_is_checked_on_cache_hits(rt):
    out = rt.zeros(4, np.int32)
    put.launch(rt, cube_count=1, cube_dim=1, out=out, v=5)  # compiled and cached
    with pytest.raises(cb.LaunchError, match="'v' is i32 .*1099511627776"):
        put.launch(rt, cube_count=1, cube_dim=1, out=out, v=1 << 40)
    assert out.numpy()[0] == 5


IN_RANGE = [
    (np.int32, 2**31 - 1), (np.int32, -2**31), (np.int32, np.int64(-7)), (np.int32, True),
    (np.uint32, 2**32 - 1), (np.uint32, np.uint64(7)), (np.uint8, 255), (np.int8, -128),
    (np.bool_, 1), (np.bool_, np.bool_(True)), (np.bool_, 0),
    (np.float16, 65504.0), (np.float16, 65519.0), (np.float16, -3),
    (np.float32, 3.4028235e38), (np.float32, 10 ** 20), (np.float32, float("inf")),
    (np.float32, float("-inf")), (np.float32, float("nan")), (np.float16, float("inf")),
    (np.float64, 1e300), (np.float64, np.float32(0.1)),
]


@pytest.mark.parametrize("dtype,value", IN_RANGE,
                         ids=[f"{np.dtype(d).name}-{v!r}" for d, v in IN_RANGE])
def test_scalar_in_range_is_stored_exactly(rt, dtype, value):
    out = rt.zeros(4, dtype)
    put.launch(rt, cube_count=1, cube_dim=1, out=out, v=value)
    with np.errstate(all="ignore"):
        want = np.array([value], dtype)[0]
    got = out.numpy()[0]
    assert got == want or (np.isnan(want) and np.isnan(got)), (got, want)


# ---- 3. strided views --------------------------------------------------------------------

@cube(launch=True)
def double(a: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = a[i] * 2.0


@cube(launch=True)
def double_2d(a: Tensor[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < a.shape(0) * a.shape(1):
        r = i // a.shape(1)
        c = i % a.shape(1)
        out[i] = a[r * a.stride(0) + c * a.stride(1)] * 2.0


def test_strided_view_for_an_array_param_is_refused(rt):
    base = rt.from_numpy(np.arange(16, dtype=np.float32))
    out = rt.zeros(16, np.float32)
    double.launch(rt, cube_count=1, cube_dim=16, a=base, out=out)  # cached: the hot path
    for view in (base.view((8,), (2,)), base.view((4, 4), (1, 4)), base.view((4, 4), (0, 1))):
        with pytest.raises(cb.LaunchError, match="'a' is a strided view.*Tensor"):
            double.launch(rt, cube_count=1, cube_dim=16, a=view, out=out)
    with pytest.raises(cb.LaunchError, match="'out' is a strided view"):
        double.launch(rt, cube_count=1, cube_dim=16, a=base, out=out.view((8,), (2,)))


def test_contiguous_views_for_an_array_param_are_fine(rt):
    data = np.arange(16, dtype=np.float32)
    base = rt.from_numpy(data)
    out = rt.zeros(16, np.float32)
    for view in (base.view((4, 4), (4, 1)), base.view((16, 1), (1, 7))):
        double.launch(rt, cube_count=1, cube_dim=16, a=view, out=out)
        np.testing.assert_array_equal(out.numpy(), data * 2)


def test_strided_view_for_a_tensor_param_uses_its_strides(rt):
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    base = rt.from_numpy(data)
    out = rt.zeros(12, np.float32)
    double_2d.launch(rt, cube_count=1, cube_dim=16, a=base.view((4, 3), (1, 4)), out=out)
    np.testing.assert_array_equal(out.numpy(), (data.T * 2).reshape(-1))


# ---- 4. rebinding what a kernel read recompiles it ------------------------------------------

@cube
def _plus_one(x):
    return x + 1.0


@cube
def _times_ten(x):
    return x * 10.0


HELPER = _plus_one
FACTOR = 3


@cube(launch=True)
def uses_helper(a: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = HELPER(a[i])


@cube(launch=True)
def uses_constant(a: Array[i32], out: Array[i32]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = a[i] * FACTOR


def test_rebinding_a_helper_recompiles(rt, monkeypatch):
    data = np.arange(8, dtype=np.float32)
    a, out = rt.from_numpy(data), rt.zeros(8, np.float32)
    uses_helper.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)
    np.testing.assert_array_equal(out.numpy(), data + 1)
    monkeypatch.setitem(globals(), "HELPER", _times_ten)
    uses_helper.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)
    np.testing.assert_array_equal(out.numpy(), data * 10)


def test_changing_a_module_constant_recompiles(rt, monkeypatch):
    data = np.arange(8, dtype=np.int32)
    a, out = rt.from_numpy(data), rt.zeros(8, np.int32)
    uses_constant.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)
    np.testing.assert_array_equal(out.numpy(), data * 3)
    monkeypatch.setitem(globals(), "FACTOR", 7)
    uses_constant.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)
    np.testing.assert_array_equal(out.numpy(), data * 7)


def test_rebinding_to_an_equal_value_of_another_type_recompiles(rt, monkeypatch):
    """3.0 == 3, but i32 * 3.0 is a float literal with an integer operand: refused."""
    a, out = rt.from_numpy(np.arange(8, dtype=np.int32)), rt.zeros(8, np.int32)
    uses_constant.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)
    monkeypatch.setitem(globals(), "FACTOR", 3.0)
    with pytest.raises(cb.CompileError, match="float"):
        uses_constant.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)


def test_deleting_a_global_the_kernel_read(rt, monkeypatch):
    a, out = rt.from_numpy(np.arange(8, dtype=np.float32)), rt.zeros(8, np.float32)
    uses_helper.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)
    monkeypatch.delitem(globals(), "HELPER")
    with pytest.raises(cb.CompileError, match="HELPER"):
        uses_helper.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)


def _closure_kernel():
    offset = 1

    @cube(launch=True)
    def k(a: Array[i32], out: Array[i32]):
        i = ABSOLUTE_POS
        if i < out.len():
            out[i] = a[i] + offset

    def set_offset(v):
        nonlocal offset
        offset = v
    return k, set_offset


def test_changing_a_closure_variable_recompiles(rt):
    k, set_offset = _closure_kernel()
    data = np.arange(8, dtype=np.int32)
    a, out = rt.from_numpy(data), rt.zeros(8, np.int32)
    k.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)
    np.testing.assert_array_equal(out.numpy(), data + 1)
    set_offset(40)
    k.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)
    np.testing.assert_array_equal(out.numpy(), data + 40)


WEIGHTS = [1, 2, 3]
NESTED = ([10],)


@cube
def _weighted(x):
    return x * WEIGHTS[1] + NESTED[0][0]


@cube(launch=True)
def uses_list(a: Array[i32], out: Array[i32]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = _weighted(a[i]) + WEIGHTS[2]


def test_assigning_an_element_of_a_list_global_recompiles(rt, monkeypatch):
    """The kernel folds the elements it read; Python reads them at each call, so an element
    assigned in place (a list, a list in a tuple) must recompile it as rebinding does. It
    used to keep the old values, on the general path and the fast one (repeats)."""
    monkeypatch.setitem(globals(), "WEIGHTS", [1, 2, 3])
    monkeypatch.setitem(globals(), "NESTED", ([10],))
    data = np.arange(8, dtype=np.int32)
    a, out = rt.from_numpy(data), rt.zeros(8, np.int32)
    for _ in range(2):
        uses_list.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)
    np.testing.assert_array_equal(out.numpy(), data * 2 + 10 + 3)
    WEIGHTS[1] = 5
    for _ in range(2):
        uses_list.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)
    np.testing.assert_array_equal(out.numpy(), data * 5 + 10 + 3)
    NESTED[0][0] = -4
    WEIGHTS.append(99)  # not read: the values read are what count
    uses_list.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)
    np.testing.assert_array_equal(out.numpy(), data * 5 - 4 + 3)
    n = uses_list.compiles
    for _ in range(3):
        uses_list.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)
    assert uses_list.compiles == n


class _Tiles:
    BIAS = 100


_SETTINGS = _Tiles()
_SETTINGS.scale = 2


@cube(launch=True)
def uses_attributes(a: Array[i32], out: Array[i32]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = a[i] * _SETTINGS.scale + _Tiles.BIAS


def test_assigning_an_attribute_the_kernel_read_recompiles(rt, monkeypatch):
    """An object's or a class's attribute is checked as a module's is: `cfg.scale = 3`
    kept the old folded value before."""
    monkeypatch.setattr(_SETTINGS, "scale", 2)
    monkeypatch.setattr(_Tiles, "BIAS", 100)
    data = np.arange(8, dtype=np.int32)
    a, out = rt.from_numpy(data), rt.zeros(8, np.int32)
    for _ in range(2):
        uses_attributes.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)
    np.testing.assert_array_equal(out.numpy(), data * 2 + 100)
    _SETTINGS.scale = 3
    uses_attributes.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)
    np.testing.assert_array_equal(out.numpy(), data * 3 + 100)
    _Tiles.BIAS = -1
    for _ in range(2):
        uses_attributes.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)
    np.testing.assert_array_equal(out.numpy(), data * 3 - 1)


def test_unchanged_globals_do_not_recompile(rt):
    a, out = rt.from_numpy(np.ones(8, np.int32)), rt.zeros(8, np.int32)
    uses_constant.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)
    n = uses_constant.compiles
    for _ in range(3):
        uses_constant.launch(rt, cube_count=1, cube_dim=8, a=a, out=out)
    assert uses_constant.compiles == n


# ---- 5. bad launch inputs are CubeErrors that say what to do -------------------------------

@cube(launch=True)
def fill(out: Array[u32], v: u32):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = v


@cube
def _helper(x):
    return x


def _launch(rt, **kw):
    out = kw.pop("out", None)
    out = rt.zeros(64, np.uint32) if out is None else out
    args = {"cube_count": 1, "cube_dim": 64, "out": out, "v": 3, **kw}
    fill.launch(rt, **args)
    return out


@pytest.mark.parametrize("kw,match", [
    ({"cube_dim": 64.0}, "cube_dim takes ints.*64.0"),
    ({"cube_dim": (8, 8, 1, 1)}, "cube_dim has 1 to 3 entries"),
    ({"cube_dim": (0,)}, r"cube_dim \(0, 1, 1\).*at least 1"),
    ({"cube_dim": -4}, "cube_dim.*at least 1"),
    ({"cube_dim": (8, "8")}, "cube_dim takes ints"),
    ({"cube_dim": None}, "needs cube_dim"),
    ({"cube_dim": 1 << 20}, r"cube_dim .* outside the limit of \d+ units per cube"),
    ({"cube_count": 2.5}, "cube_count takes ints"),
    ({"cube_count": (1 << 33,)}, "cube_count .*(limit|at most)"),
    ({"cube_count": (1 << 16, 1 << 16, 2)}, "cube_count .*(limit|at most)"),
    ({"cube_count": (-1,)}, "cube_count .* negative"),
    ({"cube_count": True}, "cube_count takes ints"),
    ({"v": None}, "'v' must be a number, got NoneType"),
    ({"v": np.array(3)}, r"'v' must be a number.*item\(\)"),
    ({"out": np.zeros(64, np.uint32)}, r"'out' must be a buffer \(rt.from_numpy"),
    ({"w": 1}, "unexpected argument 'w'"),
])
def test_bad_launch_input_is_a_launch_error(rt, kw, match):
    with pytest.raises(cb.LaunchError, match=match):
        _launch(rt, **kw)


def test_numpy_ints_are_fine_as_launch_dims(rt):
    out = _launch(rt, cube_count=np.int64(2), cube_dim=(np.int32(32), 1), v=9,
                  out=rt.zeros(64, np.uint32))
    np.testing.assert_array_equal(out.numpy(), np.full(64, 9, np.uint32))
    out = _launch(rt, cube_count=[2], cube_dim=np.array([32]), v=4,
                  out=rt.zeros(64, np.uint32))
    np.testing.assert_array_equal(out.numpy(), np.full(64, 4, np.uint32))


def test_zero_cubes_is_an_empty_launch(rt):
    out = _launch(rt, cube_count=0, v=5)
    np.testing.assert_array_equal(out.numpy(), np.zeros(64, np.uint32))


def test_positional_and_missing_arguments(rt):
    out = rt.zeros(64, np.uint32)
    with pytest.raises(cb.LaunchError, match=r"by name.*fill.launch\(rt, cube_count, "
                                             r"cube_dim, out=..., v=...\)"):
        fill.launch(rt, (1,), (64,), out, 3)
    _launch(rt)  # cached now: positional extras must still be refused
    with pytest.raises(cb.LaunchError, match="by name"):
        fill.launch(rt, 1, 64, out, out=out, v=3)
    with pytest.raises(cb.LaunchError, match="missing the argument 'v'"):
        fill.launch(rt, cube_count=1, cube_dim=64, out=out)
    with pytest.raises(cb.LaunchError, match="needs cube_count"):
        fill.launch(rt, cube_dim=64, out=out, v=1)
    with pytest.raises(cb.LaunchError, match="needs a runtime"):
        fill.launch("cpu", cube_count=1, cube_dim=64, out=out, v=1)
    with pytest.raises(cb.CubeError, match="is a helper"):
        _helper.launch(rt, cube_count=1, cube_dim=1)


def test_buffer_of_another_runtime(rt):
    other = cb.runtime("cpu" if rt.name == "interp" else "interp")
    with pytest.raises(cb.LaunchError, match="'out' lives on runtime"):
        _launch(rt, out=other.zeros(64, np.uint32))


def test_buffers_of_any_element_type(rt):
    for dt in (cb.bf16, np.float16, np.uint8, np.int64, np.bool_):
        for make in (rt.zeros, rt.empty):
            b = make((2, 3), dt)
            assert b.shape == (2, 3) and b.elem == (dt if dt is cb.bf16 else
                                                    from_numpy_dtype(np.dtype(dt)))
        assert not rt.zeros(5, dt).numpy().any()
    vals = np.array([1.5, -2.0, 0.15625, 0.0], np.float32)  # exact in bf16: bits = high half
    b = rt.from_numpy(vals, cb.bf16)
    np.testing.assert_array_equal(b.numpy(), (vals.view(np.uint32) >> 16).astype(np.uint16))
    for bad in (np.array([1j]), np.array(["a"]), None, object()):
        with pytest.raises(cb.CubeError):
            rt.from_numpy(bad)
    for bad in (-1, 2.5, (2, "a"), None, (3, -1)):
        with pytest.raises(cb.CubeError, match="shape"):
            rt.empty(bad)
    with pytest.raises(cb.CubeError):
        rt.empty(4, "not a dtype")


def test_f16_param_with_a_python_float(rt):
    """The type-check side of the scalar rules: a kernel with a fixed f16 param."""
    @cube(launch=True)
    def put_f16(out: Array[f16], v: f16):
        if ABSOLUTE_POS == 0:
            out[0] = v
    out = rt.zeros(2, np.float16)
    put_f16.launch(rt, cube_count=1, cube_dim=1, out=out, v=0.1)
    assert out.numpy()[0] == np.float16(0.1)
    with pytest.raises(cb.LaunchError, match="'v' is f16 but 1000000.0"):
        put_f16.launch(rt, cube_count=1, cube_dim=1, out=out, v=1e6)


def test_int_and_i32_params(rt):
    @cube(launch=True)
    def put_i(out: Array[i32], v: int, w: i32, s: f32):
        if ABSOLUTE_POS == 0:
            out[0] = v + w + i32(s)
    out = rt.zeros(2, np.int32)
    put_i.launch(rt, cube_count=1, cube_dim=1, out=out, v=2, w=3, s=4.0)
    assert out.numpy()[0] == 9
    with pytest.raises(cb.LaunchError, match="'v' is i32"):
        put_i.launch(rt, cube_count=1, cube_dim=1, out=out, v=2**31, w=3, s=4.0)
    with pytest.raises(cb.LaunchError, match="'s' is f32"):
        put_i.launch(rt, cube_count=1, cube_dim=1, out=out, v=2, w=3, s=1e40)


def test_more_new_user_mistakes(rt):
    buf = rt.zeros(64, np.uint32)
    with pytest.raises(cb.LaunchError, match="divide with //"):
        _launch(rt, cube_count=64 / 64)
    with pytest.raises(cb.LaunchError, match=r"read it with .numpy\(\)"):
        rt.from_numpy(buf)
    with pytest.raises(cb.LaunchError, match=r"'v' must be a number.*item\(\)"):
        _launch(rt, v=np.array([3]))
    with pytest.raises(cb.LaunchError, match="'out' must hold u32 elements, got f32"):
        _launch(rt, out=rt.zeros(64, np.float32))
    with pytest.raises(cb.LaunchError, match="does not divide"):
        _launch(rt, out=buf.lines(3))

    @cube(launch=True)
    def clash(out: Array[u32], cube_dim: u32):
        out[0] = cube_dim
    with pytest.raises(cb.CubeError, match="parameter named 'cube_dim'.*rename"):
        clash.launch(rt, cube_count=1, cube_dim=1, out=buf)


def test_reloading_an_edited_module_takes_the_new_source(rt, tmp_path, monkeypatch):
    """The other side of capturing at import: importlib.reload compiles the file as saved,
    even though linecache still holds the lines read at the first import."""
    name = f"launch_soundness_mod_{uuid.uuid4().hex}"
    path = tmp_path / f"{name}.py"
    path.write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module(name)
    monkeypatch.setitem(sys.modules, name, mod)  # removed again after the test
    assert linecache.getlines(str(path)) == MODULE.splitlines(True)
    path.write_text(EDITED)
    mod = importlib.reload(mod)
    data = np.arange(8, dtype=np.float32)
    buf = rt.from_numpy(data)
    mod.k.launch(rt, cube_count=1, cube_dim=8, a=buf)
    np.testing.assert_array_equal(buf.numpy(), data * 3)


def test_changing_a_module_attribute_recompiles(rt, tmp_path, monkeypatch):
    """`cfg.SCALE` read through a module is a global like any other: changing it recompiles."""
    (tmp_path / "soundness_cfg.py").write_text("SCALE = 2.0\n")
    (tmp_path / "soundness_user.py").write_text(textwrap.dedent("""
        import soundness_cfg
        from cube import cube, Array, f32, ABSOLUTE_POS

        @cube(launch=True)
        def scaled(out: Array[f32]):
            i = ABSOLUTE_POS
            if i < out.len():
                out[i] = soundness_cfg.SCALE * f32(i)
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import soundness_cfg
    import soundness_user
    out = rt.zeros(8, np.float32)
    soundness_user.scaled.launch(rt, cube_count=1, cube_dim=8, out=out)
    np.testing.assert_array_equal(out.numpy(), np.arange(8) * 2.0)
    monkeypatch.setattr(soundness_cfg, "SCALE", 5.0)
    soundness_user.scaled.launch(rt, cube_count=1, cube_dim=8, out=out)
    np.testing.assert_array_equal(out.numpy(), np.arange(8) * 5.0)


def test_empty_like_takes_buffers_and_numpy_arrays(rt):
    a = np.zeros((3, 2), np.int16)
    for like in (a, rt.from_numpy(a)):
        b = rt.empty_like(like)
        assert b.shape == (3, 2) and b.elem == cb.i16
    with pytest.raises(cb.CubeError, match="empty_like takes"):
        rt.empty_like(3)


@cube(launch=True)
def saxpy_defaults(x: Array[f32], y: Array[f32], alpha: f32 = 2.0, BLOCK: Comptime[int] = 4):
    i = ABSOLUTE_POS
    if i < len(x):
        y[i] = alpha * x[i] + y[i] + f32(BLOCK)


def test_parameter_defaults_stand_in_for_missing_arguments(rt):
    """A kernel parameter's Python default (`alpha: f32 = 2.0`, a Comptime's too) is used
    when the launch leaves it out, as a Python call (it was "missing the argument 'alpha'",
    with no location); given arguments still win, through the cached launch as well."""
    from cube.simulate import simulate
    x = np.arange(4, dtype=np.float32)
    for kw, (alpha, block) in (({}, (2.0, 4)), ({"alpha": 3.0}, (3.0, 4)), ({}, (2.0, 4)),
                               ({"BLOCK": 1}, (2.0, 1))):
        y = rt.from_numpy(np.ones(4, np.float32))
        saxpy_defaults.launch(rt, 1, 4, x=rt.from_numpy(x), y=y, **kw)
        np.testing.assert_array_equal(y.numpy(), np.float32(alpha) * x + 1 + block)
    ys = np.ones(4, np.float32)
    simulate(saxpy_defaults, 1, 4, x=x, y=ys)
    np.testing.assert_array_equal(ys, 2 * x + 1 + 4)

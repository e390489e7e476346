"""cube.simulate, the Python-semantics oracle, on its own: hand-written kernels against NumPy
(no runtime involved), so that the oracle the Python-style fuzzer trusts is itself checked."""
import math
import typing

import numpy as np
import pytest

import cube as cb
import cube.lang as L
from cube import (
    ABSOLUTE_POS,
    ABSOLUTE_POS_X,
    ABSOLUTE_POS_Y,
    CUBE_COUNT,
    CUBE_DIM,
    CUBE_POS,
    CUBE_POS_Y,
    PLANE_DIM,
    UNIT_POS,
    UNIT_POS_PLANE,
    UNIT_POS_X,
    UNIT_POS_Y,
    Array,
    Comptime,
    Line,
    Tensor,
    cube,
    f32,
    i32,
    u32,
)
from cube.simulate import SimulationError, SimulationUnsupported, lines, simulate

F = typing.TypeVar("F")


@cube(launch=True)
def axpy(x: Array[Line[f32]], y: Array[Line[f32]], out: Array[Line[f32]], a: f32):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = a * x[i] + y[i]


@pytest.mark.parametrize("line", [1, 2, 4])
def test_axpy_lines(line):
    rng = np.random.default_rng(0)
    x, y = rng.random(64, np.float32), rng.random(64, np.float32)
    out = np.zeros(64, np.float32)
    simulate(axpy, 64 // line // 8 + 1, 8, x=lines(x, line), y=(y, line), out=lines(out, line),
             a=np.float32(1.5))
    np.testing.assert_array_equal(out, np.float32(1.5) * x + y)


@cube(launch=True)
def builtins_2d(o: Tensor[u32]):
    x = ABSOLUTE_POS_X
    y = ABSOLUTE_POS_Y
    if x < o.shape(1) // 8 and y < o.shape(0):
        base = y * o.stride(0) + x * 8
        o[base + 0] = UNIT_POS
        o[base + 1] = CUBE_POS
        o[base + 2] = ABSOLUTE_POS
        o[base + 3] = cb.UNIT_POS_Y
        o[base + 4] = L.CUBE_POS_X
        o[base + 5] = CUBE_DIM + CUBE_COUNT
        o[base + 6] = UNIT_POS_X + UNIT_POS_Y * 100
        o[base + 7] = CUBE_POS_Y


def test_builtins_2d():
    cc, cd = (3, 2), (4, 5)
    h, w = cc[1] * cd[1], cc[0] * cd[0]
    o = np.zeros((h, w * 8), np.uint32)
    simulate(builtins_2d, cc, cd, o=o)
    o = o.reshape(h, w, 8)
    yy, xx = np.mgrid[0:h, 0:w]
    ux, uy, cx, cy = xx % cd[0], yy % cd[1], xx // cd[0], yy // cd[1]
    unit = ux + uy * cd[0]
    cube_ = cx + cy * cc[0]
    np.testing.assert_array_equal(o[..., 0], unit)
    np.testing.assert_array_equal(o[..., 1], cube_)
    np.testing.assert_array_equal(o[..., 2], cube_ * 20 + unit)
    np.testing.assert_array_equal(o[..., 3], uy)
    np.testing.assert_array_equal(o[..., 4], cx)
    np.testing.assert_array_equal(o[..., 5], 20 + 6)
    np.testing.assert_array_equal(o[..., 6], ux + uy * 100)
    np.testing.assert_array_equal(o[..., 7], cy)


@cube(launch=True)
def plane_builtins(o: Array[u32]):
    i = ABSOLUTE_POS
    if i < o.len():
        o[i] = PLANE_DIM * 100 + UNIT_POS_PLANE


def test_plane_builtins():
    o = np.zeros(16, np.uint32)
    simulate(plane_builtins, 2, 8, plane_dim=4, o=o)
    np.testing.assert_array_equal(o, 400 + np.arange(16) % 4)
    simulate(plane_builtins, 2, 8, o=o)
    np.testing.assert_array_equal(o, 100)


@cube(launch=True)
def int_semantics(a: Array[i32], b: Array[i32], o: Array[i32], u: Array[u32]):
    i = ABSOLUTE_POS
    if i < o.len():
        x = a[i]
        y = b[i]
        o[4 * i] = x // y
        o[4 * i + 1] = x % y
        o[4 * i + 2] = x * 65536 * 65536 + x * 70000 * 70000
        o[4 * i + 3] = -x if UNIT_POS > -1 else x
        u[2 * i] = i - 1
        u[2 * i + 1] = u32(x)


def test_int_semantics():
    a = np.array([7, -7, 7, -7, 5, -2147483648], np.int32)
    b = np.array([2, 2, -2, -2, 0, 3], np.int32)
    n = a.size
    o, u = np.zeros(4 * n, np.int32), np.zeros(2 * n, np.uint32)
    simulate(int_semantics, 1, n, a=a, b=b, o=o, u=u)
    o = o.reshape(n, 4)
    with np.errstate(all="ignore"):
        fl = np.where(b == 0, 0, a // np.where(b == 0, 1, b))
        md = np.where(b == 0, 0, a % np.where(b == 0, 1, b))
        prod = (a.astype(np.int64) * 70000 * 70000).astype(np.int32)  # 65536^2 wraps to 0
    np.testing.assert_array_equal(o[:, 0], fl)
    np.testing.assert_array_equal(o[:, 1], md)
    np.testing.assert_array_equal(o[:, 2], prod)
    np.testing.assert_array_equal(o[:, 3], (-a.astype(np.int64)).astype(np.int32))
    u = u.reshape(n, 2)
    np.testing.assert_array_equal(u[:, 0], (np.arange(n, dtype=np.int64) - 1) % 2**32)
    np.testing.assert_array_equal(u[:, 1], a.astype(np.int64) % 2**32)


@cube(launch=True)
def checked(a: Array[f32], o: Array[f32]):
    i = ABSOLUTE_POS
    j = i32(i) - 1
    o[i] = a[j] + a[i + 1000] * 0.0 + 1.0   # a[-1] is out of bounds: 0
    o[i + 16] = 5.0  # out of bounds: dropped


def test_checked_mode():
    a = np.arange(1, 9, dtype=np.float32)
    o = np.zeros(8, np.float32)
    simulate(checked, 1, 8, a=a, o=o)
    np.testing.assert_array_equal(o, np.concatenate([[1.0], a[:-1] + 1.0]))


@cube
def fib_helper(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


@cube
def early(x):
    if x > 0.0:
        return x * 2.0
    return x - 1.0


@cube(launch=True)
def python_style(a: Array[f32], o: Array[f32], io: Array[i32], N: Comptime[int]):
    i = ABSOLUTE_POS
    if i < o.len():
        x = a[i]
        y = x * 3.0
        x, y = y, x
        acc = 0.0
        for k in cb.range(N, unroll=True):
            acc += x * k
        k = 0
        while k < 10:
            k += 1
            if k % 3 == 0:
                continue
            if k > 7:
                break
            acc = acc - y
        t = early(acc) if i % 2 == 0 else early(-acc)
        o[i] = t + (1.0 if N > 2 else 2.0)
        io[i] = fib_helper(i32(i)) + k


def _python_style_ref(a, N):
    o, io = [], []
    for i, v in enumerate(a.tolist()):
        x, y = v * 3.0, v
        acc = sum(x * k for k in range(N))
        acc = acc - 5 * y  # k = 1, 2, 4, 5, 7
        s = acc if i % 2 == 0 else -acc
        t = s * 2.0 if s > 0 else s - 1.0
        o.append(t + (1.0 if N > 2 else 2.0))
        fa, fb = 0, 1
        for _ in range(i):
            fa, fb = fb, fa + fb
        io.append(fa + 8)
    return np.array(o, np.float32), np.array(io, np.int32)


@pytest.mark.parametrize("N", [2, np.int64(4)])
def test_python_style(N):
    a = np.linspace(-3, 3, 20).astype(np.float32)
    o, io = np.zeros(20, np.float32), np.zeros(20, np.int32)
    simulate(python_style, 1, 32, a=a, o=o, io=io, N=N)
    ro, rio = _python_style_ref(a, int(N))
    np.testing.assert_allclose(o, ro, rtol=1e-5)
    np.testing.assert_array_equal(io, rio)


@cube(launch=True)
def f32_rounding(o: Array[f32]):
    acc = f32(0.0)
    for _ in range(1000):
        acc = acc + 0.1
    o[ABSOLUTE_POS] = acc


def test_f32_rounding():
    o = np.zeros(1, np.float32)
    simulate(f32_rounding, 1, 1, o=o)
    ref = np.float32(0)
    for _ in range(1000):
        ref = np.float32(ref + np.float32(0.1))
    assert o[0] == ref and o[0] != np.float32(100.0)


@cube(launch=True)
def math_kernel(x: Array[F], o: Array[F]):
    i = ABSOLUTE_POS
    if i < x.len():
        v = x[i]
        o[i] = cb.sqrt(v) + cb.erf(v) + math.exp(-v) + cb.select(v > 1.0, F(1), cb.round(v)) \
            + cb.clamp(v, 0.5, 2.0) + cb.fma(v, v, 1.0) + cb.rsqrt(v) + L.floor(v) \
            + cb.min(v, 0.5) + max(v, 1.5) + abs(-v) + float(int(v * 3.0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_math(dtype):
    x = np.linspace(0.1, 3.0, 33).astype(dtype)
    o = np.zeros_like(x)
    simulate(math_kernel, 1, 64, x=x, o=o)
    assert o.dtype == dtype
    v = x.astype(np.float64)
    erf = np.array([math.erf(t) for t in v])
    ref = np.sqrt(v) + erf + np.exp(-v) + np.where(v > 1, 1, np.rint(v)) + np.clip(v, .5, 2) \
        + (v * v + 1) + 1 / np.sqrt(v) + np.floor(v) + np.minimum(v, .5) + np.maximum(v, 1.5) \
        + v + np.trunc((x * dtype(3)).astype(np.float64))
    np.testing.assert_allclose(o, ref, rtol=1e-5 if dtype == np.float32 else 1e-12)


@cube(launch=True)
def casts(x: Array[f32], o: Array[i32], u: Array[u32], lo: Array[Line[f32]]):
    i = ABSOLUTE_POS
    if i < x.len():
        o[i] = i32(x[i])
        u[i] = u32(i32(x[i]))
        lo[i] = Line[f32, 2](x[i]) + cb.cast(i, f32)


def test_casts():
    x = np.array([2.7, -2.7, 1e10, -0.5], np.float32)
    o, u, lo = np.zeros(4, np.int32), np.zeros(4, np.uint32), np.zeros(8, np.float32)
    simulate(casts, 1, 4, x=x, o=o, u=u, lo=lines(lo, 2))
    np.testing.assert_array_equal(o, [2, -2, 2**31 - 1, 0])
    np.testing.assert_array_equal(u, np.array([2, -2, 2**31 - 1, 0], np.int64) % 2**32)
    np.testing.assert_array_equal(lo, np.repeat(x + np.arange(4, dtype=np.float32), 2))


@cube(launch=True)
def histogram(x: Array[u32], h: Array[u32]):
    i = ABSOLUTE_POS
    if i < x.len():
        cb.atomic_add(h, x[i] % 8, 1)


def test_atomics_sequential():
    x = np.random.default_rng(1).integers(0, 100, 200).astype(np.uint32)
    h = np.zeros(8, np.uint32)
    simulate(histogram, 4, 64, x=x, h=h)
    np.testing.assert_array_equal(h, np.bincount(x % 8, minlength=8))


@cube(launch=True)
def local_array(o: Array[i32]):
    i = ABSOLUTE_POS
    t = cb.LocalArray(i32, 4)
    for k in range(4):
        t[k] = i32(i) * i32(k)
    o[i] = t[0] + t[1] + t[2] + t[3] + t[7]


def test_local_array():
    o = np.zeros(5, np.int32)
    simulate(local_array, 1, 5, o=o)
    np.testing.assert_array_equal(o, np.arange(5) * 6)


@cube(launch=True)
def uses_shared(o: Array[f32]):
    s = cb.SharedMemory(f32, 32)
    s[UNIT_POS] = 1.0
    cb.sync_cube()
    o[ABSOLUTE_POS] = s[0]


@cube(launch=True)
def uses_plane(o: Array[f32]):
    o[ABSOLUTE_POS] = cb.plane_sum(1.0)


@pytest.mark.parametrize("k", [uses_shared, uses_plane])
def test_refuses_cooperative_kernels(k):
    with pytest.raises(SimulationUnsupported):
        simulate(k, 1, 4, o=np.zeros(4, np.float32))


@cube(launch=True)
def one_branch(a: Array[f32], o: Array[f32]):
    i = ABSOLUTE_POS
    if i < o.len():
        if a[i] > 0.0:
            t = 1.0
        o[i] = t


def test_unbound_name_is_an_error():
    with pytest.raises(SimulationError, match="UnboundLocalError"):
        simulate(one_branch, 1, 4, a=np.array([1, -1, 1, 1], np.float32),
                 o=np.zeros(4, np.float32))


def test_argument_checks():
    with pytest.raises(SimulationError, match="must hold f32"):
        simulate(checked, 1, 1, a=np.zeros(4, np.float64), o=np.zeros(4, np.float32))
    with pytest.raises(SimulationError, match="missing"):
        simulate(checked, 1, 1, a=np.zeros(4, np.float32))


def test_u32_literal_semantics():
    """NEP 50 gives the documented weak literals: a literal that does not fit is an error,
    a comparison with a negative literal is exact."""
    u = np.uint32(3)
    with pytest.raises(OverflowError):
        u + -1  # noqa: B018
    with np.errstate(over="ignore"):
        assert u > -1 and (u - 4) == 2**32 - 1


@cube
def pick(c, v, w):
    return v if c else w


@cube(launch=True)
def ternary_literal(a: Array[i32], o: Array[u32]):
    i = ABSOLUTE_POS
    if i < o.len():
        o[i] = u32(pick(a[i] > 0, a[i], -4))  # the kernel's select is a runtime i32


def test_ternary_literal_casts_like_a_runtime_value():
    a = np.array([3, -1], np.int32)
    o = np.zeros(2, np.uint32)
    simulate(ternary_literal, 1, 2, a=a, o=o)
    np.testing.assert_array_equal(o, [3, 2**32 - 4])


def _make_closure_kernel(scale):
    pos = cb.ABSOLUTE_POS  # a builtin held in a closure cell

    @cube
    def local_helper(v):
        return v * scale + L.UNIT_POS_X

    @cube(launch=True)
    def k(o: Array[u32]):
        i = pos
        if i < o.len():
            o[i] = local_helper(i)
    return k


def test_closures_keep_their_cells():
    o = np.zeros(12, np.uint32)
    simulate(_make_closure_kernel(3), 3, 4, o=o)
    np.testing.assert_array_equal(o, np.arange(12) * 3 + np.arange(12) % 4)


def test_scalar_arguments_are_checked_not_wrapped():
    with pytest.raises(SimulationError, match="u32 but got -1"):
        simulate(builtins_2d_scalar, 1, 1, o=np.zeros(1, np.uint32), s=-1)


@cube(launch=True)
def builtins_2d_scalar(o: Array[u32], s: u32):
    o[0] = s


@cube(launch=True)
def line_aliasing(a: Array[Line[f32]], out: Array[Line[f32]]):
    i = ABSOLUTE_POS
    if i < out.len():
        v = a[i]
        w = v
        w += v
        w *= 3.0
        u = cb.max(v, w)
        z = u
        z -= 1.0
        out[i] = v * 100.0 + u + z


@pytest.mark.parametrize("line", [1, 4])
def test_lines_are_values(line):
    """`w = v; w += v` must not change v (NumPy's += would write into the shared vector)."""
    a = np.arange(1, 1 + 4 * line, dtype=np.float32)
    out = np.zeros_like(a)
    simulate(line_aliasing, 1, 4, a=lines(a, line), out=lines(out, line))
    u = np.maximum(a, 6 * a)
    np.testing.assert_array_equal(out, a * 100 + u + (u - 1))


# ---- races: an element one unit stores and another touches ---------------------------------

@cube(launch=True)
def neighbour_sum(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i > 0 and i < out.len():
        out[i] = x[i] + out[i - 1]  # out[i - 1] is the previous unit's element


@cube(launch=True)
def own_elements(x: Array[f32], h: Array[u32]):
    i = ABSOLUTE_POS
    if i < x.len():
        x[i] = x[i] * 2.0
        cb.atomic_add(h, i % 2, 1)


@cube(launch=True)
def line_then_lane(v: Array[Line[f32]], s: Array[f32]):
    if ABSOLUTE_POS == 0:
        v[0] = Line[f32, 4](1.0)
    else:
        s[3] = 5.0  # lane 3 of v[0]: the same memory when s and v share it


def _rule_races(n: int) -> bool:
    """neighbour_sum's accesses written out: unit i stores out[i] and loads out[i - 1]."""
    stored = {i: i for i in range(1, n)}
    return any(stored.get(i - 1, i) != i for i in range(1, n))


@pytest.mark.parametrize("cubes, dim", [(1, 1), (1, 2), (2, 1), (2, 4)])
def test_a_unit_reading_another_units_store_is_a_race(cubes, dim):
    n = cubes * dim
    x, out = np.ones(n, np.float32), np.zeros(n, np.float32)
    if _rule_races(n):
        with pytest.raises(SimulationError, match=r"data race: unit \(\d, 0, 0\) of cube "
                                                   r"\(\d, 0, 0\) loads out\[\d\]"):
            simulate(neighbour_sum, cubes, dim, x=x, out=out)
    else:
        simulate(neighbour_sum, cubes, dim, x=x, out=out)


def test_own_elements_and_atomics_are_not_races():
    x = np.arange(12, dtype=np.float32)
    h = np.zeros(2, np.uint32)
    simulate(own_elements, 3, 4, x=x.copy(), h=h)
    np.testing.assert_array_equal(h, [6, 6])


def test_aliased_arguments_share_their_elements():
    buf = np.zeros(8, np.float32)
    with pytest.raises(SimulationError, match="data race"):
        simulate(line_then_lane, 2, 1, v=lines(buf, 4), s=buf)
    simulate(line_then_lane, 2, 1, v=lines(buf, 4), s=np.zeros(8, np.float32))


@cb.cube(launch=True)
def _reads_unset_local(x: L.Array[L.f32], out: L.Array[L.f32]):
    i = L.ABSOLUTE_POS
    if i < x.len():
        buf = cb.LocalArray(L.f32, 4)
        buf[0] = x[i]
        buf[1] = buf[0] * 2.0
        out[i] = buf[0] + buf[1] + buf[3]


@cb.cube(launch=True)
def _reads_set_local(x: L.Array[L.f32], out: L.Array[L.f32]):
    i = L.ABSOLUTE_POS
    if i < x.len():
        buf = cb.LocalArray(L.f32, 4)
        for k in range(4):
            buf[k] = x[i] + k
        out[i] = buf[0] + buf[3]


def test_a_local_array_read_before_any_write_is_refused():
    """cb.LocalArray is not initialised (docs): a device reads anything there (NaN on the cpu
    runtime, 0 on the interpreter), so the oracle refuses the read rather than give 0."""
    x = np.arange(3, dtype=np.float32)
    with pytest.raises(SimulationError, match="element 3 of the local array .* before any "
                                              "write"):
        simulate(_reads_unset_local, cube_count=(1,), cube_dim=(3,), x=x,
                 out=np.zeros(3, np.float32))
    out = np.zeros(3, np.float32)
    simulate(_reads_set_local, cube_count=(1,), cube_dim=(3,), x=x, out=out)
    np.testing.assert_array_equal(out, 2 * x + 3)


def test_import_time_misuse_is_a_type_error_naming_the_form():
    """`@cube(1)` and `Line[()]` were an AttributeError / ValueError from inside cube."""
    with pytest.raises(TypeError, match=r"@cube decorates a function .* got int 1"):
        cb.cube(1, launch=True)
    for bad in ((), (L.f32,), (L.f32, 4, 1), (L.f32, "a")):
        with pytest.raises(TypeError, match=r"Line\[T\] or Line\[T, n\]"):
            L.Line[bad]

"""NaN, infinities and signed zeros in kernels mean what they mean in Python, on every runtime:
comparisons (IEEE: false with a NaN, `!=` true), `math.isnan`/`isinf`/`isfinite` (and the
`cb.` forms), Python's min/max/clamp (`b if b < a else a`: a NaN or zero that comes first
is kept). WGSL and Vulkan let a compiler assume floats are finite (lavapipe folded `x != x`
to false); the shader targets spell these cases in bit tests (passes.float_compares).

The reference is plain Python on the same f32 values (every value here is exact in f32)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import cube as cb
from cube import ABSOLUTE_POS, Array, Line, cube, f32, u32

VALUES = [math.nan, 1.0, -1.5, math.inf, -math.inf, 0.0, -0.0, 0.5, 2.0 ** 127, -2.0]
PAIRS = [(x, y) for x in VALUES for y in VALUES]

# Python's predicates, in the order the kernels set their bits
PREDICATES = [
    lambda x, y: x == y, lambda x, y: x != y, lambda x, y: x < y, lambda x, y: x <= y,
    lambda x, y: x > y, lambda x, y: x >= y, lambda x, y: x != x, lambda x, y: x == x,
    lambda x, y: x < x, lambda x, y: x >= x, lambda x, y: math.isnan(x),
    lambda x, y: math.isinf(x), lambda x, y: math.isfinite(x),
    lambda x, y: x < math.inf, lambda x, y: x <= math.inf, lambda x, y: x == math.inf,
    lambda x, y: x > -math.inf, lambda x, y: x != -math.inf, lambda x, y: -math.inf >= x,
    lambda x, y: x > 0.5, lambda x, y: not (x < y),
]


def _py_bits(x: float, y: float) -> int:
    r = 0
    for k, p in enumerate(PREDICATES):
        if p(x, y):
            r |= 1 << k
    return r


@cube(launch=True)
def _compares(a: Array[f32], b: Array[f32], out: Array[u32]):
    i = ABSOLUTE_POS
    if i < out.len():
        x = a[i]
        y = b[i]
        c = (x == y, x != y, x < y, x <= y, x > y, x >= y, x != x, x == x, x < x, x >= x,
             math.isnan(x), cb.isinf(x), math.isfinite(x), x < math.inf, x <= math.inf,
             x == math.inf, x > -math.inf, x != -math.inf, -math.inf >= x, x > 0.5,
             not (x < y))
        r = u32(0)
        for k in cb.range(len(c), unroll=True):
            if c[k]:
                r |= u32(1 << k)
        out[i] = r


@cube(launch=True)
def _compares_lines(a: Array[Line[f32]], b: Array[Line[f32]], out: Array[Line[u32]]):
    L = cb.comptime(a.line_size())
    i = ABSOLUTE_POS
    if i < a.len():
        x = a[i]
        y = b[i]
        c = (x == y, x != y, x < y, x <= y, x > y, x >= y, x != x, x == x, x < x, x >= x,
             cb.isnan(x), math.isinf(x), cb.isfinite(x))
        one = Line[u32, L](1)
        zero = Line[u32, L](0)
        r = zero
        for k in cb.range(len(c), unroll=True):
            r = r | cb.select(c[k], one * u32(1 << k), zero)
        out[i] = r


def _inputs():
    a = np.array([x for x, _ in PAIRS], np.float32)
    b = np.array([y for _, y in PAIRS], np.float32)
    return a, b


def test_comparisons_and_tests_of_nan_inf_and_zeros(rt):
    a, b = _inputs()
    out = rt.empty((a.size,), np.uint32)
    _compares.launch(rt, cube_count=(a.size + 31) // 32, cube_dim=32, a=rt.from_numpy(a),
                     b=rt.from_numpy(b), out=out)
    got = out.numpy()
    bad = [(x, y, bin(int(g)), bin(_py_bits(x, y))) for (x, y), g in zip(PAIRS, got)
           if int(g) != _py_bits(x, y)]
    assert not bad, f"{rt.name}: (x, y, got, Python) {bad[:6]}"


@pytest.mark.parametrize("line", [4, 16])
def test_line_comparisons_and_tests_of_nan_inf_and_zeros(rt, line):
    a, b = _inputs()
    n = -(-a.size // line) * line
    a, b = np.resize(a, n), np.resize(b, n)
    out = rt.empty((n,), np.uint32)
    _compares_lines.launch(rt, cube_count=1, cube_dim=n // line,
                           a=rt.from_numpy(a).lines(line), b=rt.from_numpy(b).lines(line),
                           out=out.lines(line))
    want = [_py_bits(float(x), float(y)) & ((1 << 13) - 1) for x, y in zip(a, b)]
    got = out.numpy().tolist()
    bad = [(float(x), float(y), g, w) for x, y, g, w in zip(a, b, got, want) if g != w]
    assert not bad, f"{rt.name}, lines of {line}: (x, y, got, Python) {bad[:6]}"


@cube(launch=True)
def _minmax(a: Array[f32], b: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < a.len():
        x = a[i]
        y = b[i]
        k = i * 6
        out[k] = min(x, y)
        out[k + 1] = max(x, y)
        out[k + 2] = cb.min(y, x, 0.5)
        out[k + 3] = cb.max(x, -1.0, y)
        out[k + 4] = cb.clamp(x, -1.0, y)
        out[k + 5] = cb.clamp(x, -0.0, 0.0)


def _py_clamp(x, lo, hi):
    return min(max(x, lo), hi)


def test_min_max_clamp_are_pythons(rt):
    """min(nan, 1.0) is nan but min(1.0, nan) is 1.0; min(0.0, -0.0) is 0.0: Python's."""
    a, b = _inputs()
    out = rt.empty((a.size * 6,), np.float32)
    _minmax.launch(rt, cube_count=(a.size + 31) // 32, cube_dim=32, a=rt.from_numpy(a),
                   b=rt.from_numpy(b), out=out)
    got = out.numpy().reshape(-1, 6)
    for (x, y), g in zip(PAIRS, got):
        want = [min(x, y), max(x, y), min(y, x, 0.5), max(x, -1.0, y), _py_clamp(x, -1.0, y),
                _py_clamp(x, -0.0, 0.0)]
        for k, (gv, wv) in enumerate(zip(g.tolist(), want)):
            same = (math.isnan(gv) and math.isnan(wv)) or (
                gv == wv and math.copysign(1, gv) == math.copysign(1, wv))
            assert same, f"{rt.name}: output {k} of (x={x}, y={y}): {gv}, Python {wv}"


def test_simulator_agrees_with_python():
    """cube.simulate, the Python-semantics oracle of the fuzz tests, on the same kernels."""
    from cube.simulate import simulate
    a, b = _inputs()
    out = np.zeros(a.size, np.uint32)
    simulate(_compares, (a.size + 31) // 32, 32, a=a, b=b, out=out)
    assert out.tolist() == [_py_bits(x, y) for x, y in PAIRS]
    mm = np.zeros(a.size * 6, np.float32)
    simulate(_minmax, (a.size + 31) // 32, 32, a=a, b=b, out=mm)
    want = [v for x, y in PAIRS for v in (min(x, y), max(x, y), min(y, x, 0.5),
                                          max(x, -1.0, y), _py_clamp(x, -1.0, y),
                                          _py_clamp(x, -0.0, 0.0))]
    np.testing.assert_array_equal(np.signbit(mm), np.signbit(np.float32(want)))
    np.testing.assert_array_equal(mm, np.float32(want))


def test_isnan_of_ints_and_bools():
    """An int is never nan (decided at compile time, as in Python); a bool is refused."""
    @cube(launch=True)
    def k(a: Array[cb.i32], out: Array[u32]):
        i = ABSOLUTE_POS
        if i < a.len():
            out[i] = u32(1) if math.isnan(a[i]) or not cb.isfinite(a[i]) else u32(0)

    rt = cb.runtime("interp")
    out = rt.empty((4,), np.uint32)
    k.launch(rt, cube_count=1, cube_dim=4, a=rt.from_numpy(np.arange(4, dtype=np.int32)),
             out=out)
    assert out.numpy().tolist() == [0, 0, 0, 0]

    @cube(launch=True)
    def kb(a: Array[cb.i32], out: Array[u32]):
        i = ABSOLUTE_POS
        if i < a.len():
            out[i] = u32(1) if math.isnan(a[i] > 0) else u32(0)

    with pytest.raises(cb.CompileError, match=r"isnan needs a number.*\n.*math\.isnan"):
        kb.launch(rt, cube_count=1, cube_dim=4, a=rt.from_numpy(np.arange(4, dtype=np.int32)),
                  out=out)


@cube(launch=True)
def _mod(a: Array[f32], b: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < a.len():
        out[i] = a[i] % b[i]


def test_float_mod_by_infinity_is_pythons(rt):
    """x % inf is Python's (x, or inf for a negative x): WGSL's float % (a - b*trunc(a/b))
    gave NaN there."""
    a = np.array([1.0, -1.0, 2.5, -2.5, 0.0, -0.0, 1.0, np.inf, np.nan], np.float32)
    b = np.array([np.inf, np.inf, -np.inf, -np.inf, np.inf, -np.inf, 3.0, 2.0, np.inf],
                 np.float32)
    out = rt.empty((a.size,), np.float32)
    _mod.launch(rt, cube_count=1, cube_dim=a.size, a=rt.from_numpy(a), b=rt.from_numpy(b),
                out=out)
    for x, y, g in zip(a.tolist(), b.tolist(), out.numpy().tolist()):
        w = x % y
        assert (math.isnan(g) and math.isnan(w)) or g == w, f"{rt.name}: {x} % {y}: {g}, {w}"


# Plane and atomic max/min ignore NaN (IEEE maxNum, as C's fmax, SPIR-V's group FMax and
# the float atomics): NaN only when every value is NaN. A plane's reduction order is the
# hardware's, so Python's lane-order max (which keeps a leading NaN) is not what they mean.
NAN_LANES = [1.0, math.nan, -2.0, math.inf, math.nan, math.nan, math.nan, math.nan,
             math.nan, -math.inf, 0.5, 3.0, 7.0, -1.0, math.nan, 2.0]


def _fmax_of(vals, hi: bool) -> float:
    real = [v for v in vals if not math.isnan(v)]
    if not real:
        return math.nan
    return max(real) if hi else min(real)


@cube(launch=True)
def _plane_extremes(a: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    v = a[i % a.len()]
    hi = cb.plane_max(v)
    lo = cb.plane_min(v)
    if i < a.len():
        out[2 * i] = hi
        out[2 * i + 1] = lo


def test_plane_max_min_ignore_nan(rt):
    """Each plane of NAN_LANES (repeated past 16 lanes) and one plane of NaNs only."""
    p = rt.plane_size
    n = max(32, 2 * p)
    a = np.resize(np.float32(NAN_LANES), n)
    a[n - p:] = np.nan  # the last plane: every lane NaN
    out = rt.empty((2 * n,), np.float32)
    _plane_extremes.launch(rt, cube_count=1, cube_dim=n, a=rt.from_numpy(a), out=out)
    got = out.numpy().reshape(n, 2).tolist()
    for s in range(0, n, p):
        plane = a[s:s + p].tolist()
        want = [_fmax_of(plane, True), _fmax_of(plane, False)]
        for lane in range(s, s + p):
            for g, w, what in zip(got[lane], want, ("plane_max", "plane_min")):
                assert (math.isnan(g) and math.isnan(w)) or g == w, \
                    f"{rt.name}: {what} of {plane} in lane {lane}: {g}, want {w}"


@cube(launch=True)
def _atomic_extremes(a: Array[f32], acc: Array[f32]):
    i = ABSOLUTE_POS
    if i < a.len():
        cb.atomic_max(acc, 0, a[i])
        cb.atomic_min(acc, 1, a[i])
        if i % 2 == 0:  # a NaN stored first is replaced by the first number
            cb.atomic_max(acc, 2, a[i])
            cb.atomic_min(acc, 3, a[i])


@pytest.mark.parametrize("start", [0.0, math.nan])
def test_atomic_max_min_ignore_nan(rt, start):
    a = np.float32(NAN_LANES)
    acc = rt.from_numpy(np.float32([start] * 4))
    _atomic_extremes.launch(rt, cube_count=1, cube_dim=a.size, a=rt.from_numpy(a), acc=acc)
    vals, even = [start, *NAN_LANES], [start, *NAN_LANES[::2]]
    want = [_fmax_of(vals, True), _fmax_of(vals, False), _fmax_of(even, True),
            _fmax_of(even, False)]
    assert acc.numpy().tolist() == want, f"{rt.name}: {acc.numpy().tolist()}, want {want}"


def test_simulator_atomic_max_min_ignore_nan():
    """cube.simulate's atomics mean what the runtimes' do."""
    from cube.simulate import simulate
    a = np.float32(NAN_LANES)
    acc = np.float32([math.nan] * 4)
    simulate(_atomic_extremes, 1, a.size, a=a, acc=acc)
    even = NAN_LANES[::2]
    assert acc.tolist() == [_fmax_of(NAN_LANES, True), _fmax_of(NAN_LANES, False),
                            _fmax_of(even, True), _fmax_of(even, False)]


@cube(launch=True)
def _half_constants(a: Array[cb.f16], out: Array[cb.f16]):
    i = ABSOLUTE_POS
    if i < a.len():
        v = a[i]
        out[4 * i] = v + cb.f16(-math.inf)
        out[4 * i + 1] = cb.max(v, cb.f16(math.inf))
        out[4 * i + 2] = v * cb.f16(math.nan)
        out[4 * i + 3] = cb.f16(1e6)  # past the largest half: inf


def test_half_infinity_and_nan_constants(rt):
    """f16 constants without a literal (WGSL has none for inf or NaN): naga refused the
    WGSL they were spelled in before."""
    a = np.float16([1.0, -2.5])
    out = rt.empty((8,), np.float16)
    _half_constants.launch(rt, cube_count=1, cube_dim=2, a=rt.from_numpy(a), out=out)
    want = [w for x in a.tolist() for w in (-math.inf, math.inf, math.nan, math.inf)]
    got = out.numpy().tolist()
    assert [math.isnan(g) for g in got] == [math.isnan(w) for w in want], (rt.name, got)
    assert [g for g in got if not math.isnan(g)] == [w for w in want if not math.isnan(w)], \
        (rt.name, got)


@cube(launch=True)
def _half_mod(a: Array[cb.f16], b: Array[cb.f16], out: Array[cb.f16]):
    i = ABSOLUTE_POS
    if i < a.len():
        out[i] = a[i] % b[i]


def test_half_mod_with_a_quotient_past_the_half_range(rt):
    """x % y of halves is Python's (exact) also where x / y passes the largest half: the
    shader targets' a - b*trunc(a/b) gave -inf for 60000 % 0.5 in f16 arithmetic."""
    vals = [60000.0, -60000.0, 65504.0, 1000.0, -3.5, 2.0, 0.5, -0.25, 0.0078125, 7.0]
    a = np.float16([x for x in vals for _ in vals])
    b = np.float16([y for _ in vals for y in vals])
    out = rt.empty((a.size,), np.float16)
    _half_mod.launch(rt, cube_count=(a.size + 31) // 32, cube_dim=32, a=rt.from_numpy(a),
                     b=rt.from_numpy(b), out=out)
    want = np.float16([x % y for x, y in zip(a.tolist(), b.tolist())])
    bad = [(x, y, g, w) for x, y, g, w in zip(a.tolist(), b.tolist(), out.numpy().tolist(),
                                              want.tolist()) if g != w]
    assert not bad, f"{rt.name}: (x, y, got, Python) {bad[:6]}"

"""Python the frontend accepts means what Python means: valid code written the way users write
it runs correctly on every runtime, and code Python would reject (or that would read an unbound
name) is a located CompileError. References are plain Python/NumPy, never our own IR."""
from __future__ import annotations

import itertools
import math
import textwrap

import numpy as np
import pytest

import cube as cb
import cube.lang as L
from cube import ABSOLUTE_POS, Array, Comptime, Line, cube, f32, i32, u8, u32


def _run(rt, k, units, dtype=np.float32, **args):
    out = rt.from_numpy(np.zeros(units, dtype))
    k.launch(rt, cube_count=1, cube_dim=units, out=out, **args)
    return out.numpy()


# ---- definite assignment: what Python accepts still compiles ------------------------------


@cube
def sign_of(v):
    if v > 0.0:
        return 1.0
    elif v < 0.0:
        return -1.0
    return 0.0


@cube
def clamp_note(v):
    if v > 2.0:
        return 2.0
    else:
        return v


@cube
def note(out, i):
    if i > 100:
        return 1.0  # a value on one path only: fine while the result is discarded
    out[i] = 7.0


@cube(launch=True)
def assigned_on_every_path(out: Array[f32], a: Array[f32]):
    i = ABSOLUTE_POS
    if a[i] > 1.0:
        y = a[i] * 2.0
    elif a[i] > 0.0:
        y = a[i]
    else:
        y = -a[i]
    for k in range(3):  # a compile-time trip count of 3: `last` is bound after it
        last = f32(k)
    if i < out.len():
        out[i] = y + last + sign_of(a[i]) * 10.0 + clamp_note(a[i]) * 100.0


def _every_path_ref(a):
    y = np.where(a > 1, a * 2, np.where(a > 0, a, -a))
    return y + 2.0 + np.sign(a) * 10 + np.minimum(a, 2.0) * 100


def test_names_bound_on_every_path(rt):
    a = np.array([-2.0, -0.5, 0.0, 0.5, 1.5, 3.0, 0.25, -7.0], np.float32)
    got = _run(rt, assigned_on_every_path, 8, a=rt.from_numpy(a))
    np.testing.assert_allclose(got, _every_path_ref(a.astype(np.float64)), rtol=1e-6)


@cube(launch=True)
def discarded_partial_helper(out: Array[f32]):
    note(out, ABSOLUTE_POS)


def test_partial_helper_result_discarded(rt):
    np.testing.assert_array_equal(_run(rt, discarded_partial_helper, 8), np.full(8, 7.0))


@cube
def scaled(x, *, scale=2.0):
    return x * scale


@cube(launch=True)
def keyword_only(out: Array[f32], a: Array[f32]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = scaled(a[i]) + scaled(a[i], scale=10.0)


def test_keyword_only_helper_parameters(rt):
    a = np.arange(8, dtype=np.float32)
    np.testing.assert_allclose(_run(rt, keyword_only, 8, a=rt.from_numpy(a)), a * 12)


# ---- tuple assignment ---------------------------------------------------------------------


@cube(launch=True)
def swaps(out: Array[f32], a: Array[f32], n: u32):
    i = ABSOLUTE_POS
    x = a[i]
    y = x + 100.0
    p, q = 1, 2
    for _ in range(n):
        x, y = y, x  # runtime values swapped in a loop
    p, q = q, p  # compile-time values
    (u, v), w = (x, y), f32(p)
    if i < out.len():
        out[i] = u * 1000.0 + v + w * 0.5 + f32(q) * 0.25


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_tuple_assignment_reads_the_old_values(rt, n):
    a = np.arange(8, dtype=np.float32)
    x, y = a.astype(np.float64), a + 100.0
    for _ in range(n):
        x, y = y, x
    want = x * 1000 + y + 2 * 0.5 + 1 * 0.25
    np.testing.assert_allclose(_run(rt, swaps, 8, a=rt.from_numpy(a), n=n), want)


# ---- integer comparisons are exact on every target (no i64 needed) ------------------------


@cube(launch=True)
def mixed_compares(out: Array[u32], s: i32, b: u8):
    i = ABSOLUTE_POS
    r = u32(0)
    if cb.UNIT_POS > -1:
        r += u32(1)
    if i < s:
        r += u32(2)
    if s <= i:
        r += u32(4)
    if i == s:
        r += u32(8)
    if b < 300:  # a u8 is always below 300
        r += u32(16)
    if L.UNIT_POS != s:
        r += u32(32)
    if i < out.len():
        out[i] = r


@pytest.mark.parametrize("s", [-5, -1, 0, 3, 7, 2**31 - 1, -2**31])
def test_unsigned_signed_comparisons_are_exact(rt, s):
    got = _run(rt, mixed_compares, 8, np.uint32, s=np.int32(s), b=np.uint8(200))
    i = np.arange(8)
    want = 1 + 2 * (i < s) + 4 * (s <= i) + 8 * (i == s) + 16 + 32 * (i != s)
    np.testing.assert_array_equal(got, want)


# ---- builtins through every import form fold as runtime values ----------------------------


@cube(launch=True)
def builtin_forms(out: Array[u32], tile: Comptime[int]):
    i = cb.ABSOLUTE_POS
    first = u32(1) if cb.UNIT_POS_X == 0 else u32(0)
    if not cb.UNIT_POS_PLANE:  # 0 on every unit of a plane-size-1 target; lane 0 elsewhere
        first += u32(0)
    acc = u32(0)
    for k in range(L.UNIT_POS, 4):
        acc += k
    if i < out.len():
        out[i] = first * 1000 + (cb.ABSOLUTE_POS + 1) * 10 + cb.CUBE_POS_Y * tile + acc


def test_builtins_through_the_module_are_runtime_values(rt):
    got = _run(rt, builtin_forms, 8, np.uint32, tile=np.int64(5))
    i = np.arange(8)
    acc = np.array([sum(range(k, 4)) for k in range(8)])
    np.testing.assert_array_equal(got, (i == 0) * 1000 + (i + 1) * 10 + acc)


# ---- lanes written over any line size -----------------------------------------------------


@cube(launch=True)
def lane_sums(a: Array[Line[f32]], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < a.len():
        v = a[i]
        s = 0.0
        for k in range(v.size):  # a runtime counter
            s += v[k]
        w = v
        for k in cb.range(v.size, unroll=True):
            w[k] = v[k] * 2.0
        for k in range(v.size):
            w[k] = w[k] + 1.0
        t = 0.0
        for k in cb.range(v.size, unroll=True):
            t += w[k]
        out[i] = s * 1000.0 + t


@pytest.mark.parametrize("lines", [1, 2, 4])
def test_lane_indexing_for_every_line_size(rt, lines):
    x = np.arange(16, dtype=np.float32)
    out = rt.from_numpy(np.zeros(16 // lines, np.float32))
    lane_sums.launch(rt, cube_count=1, cube_dim=16, a=rt.from_numpy(x).lines(lines), out=out)
    g = x.reshape(-1, lines).astype(np.float64)
    want = g.sum(1) * 1000 + (g * 2 + 1).sum(1)
    np.testing.assert_allclose(out.numpy(), want)


@cube(launch=True)
def shared_of_numpy_size(a: Array[f32], out: Array[f32], n: Comptime[int]):
    sm = cb.SharedMemory(f32, n)
    u = cb.UNIT_POS
    if u < n:
        sm[u] = a[u]
    cb.sync_cube()
    if u < n:
        out[u] = sm[n - 1 - u]


@pytest.mark.parametrize("n", [np.int64(8), np.int32(8), np.uint16(8), 8])
def test_comptime_numpy_integers(rt, n):
    a = np.arange(8, dtype=np.float32)
    out = rt.from_numpy(np.zeros(8, np.float32))
    shared_of_numpy_size.launch(rt, cube_count=1, cube_dim=8, a=rt.from_numpy(a), out=out, n=n)
    np.testing.assert_array_equal(out.numpy(), a[::-1])


# ---- what the def line itself may not say ------------------------------------------------


def _module(tmp_path, name, text):
    import importlib.util
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, path


@pytest.mark.parametrize("params, what", [("*xs", "*xs"), ("x, **kw", "**kw")])
def test_star_helpers_are_refused_at_the_def(tmp_path, params, what):
    mod, path = _module(tmp_path, f"star_{len(params)}", f"""
        from cube import cube, Array, f32, ABSOLUTE_POS

        @cube
        def h({params}):
            return 1.0

        @cube(launch=True)
        def k(out: Array[f32]):
            out[ABSOLUTE_POS] = h(1.0)
        """)
    with pytest.raises(cb.CompileError) as info:
        mod.k.ir(out=Array[f32])
    assert what in str(info.value)
    assert info.value.loc[0] == str(path) and info.value.loc[1] == 5  # the def line


def test_async_kernels_are_refused(tmp_path):
    mod, path = _module(tmp_path, "async_kernel", """
        from cube import cube, Array, f32

        @cube(launch=True)
        async def k(out: Array[f32]):
            out[0] = 1.0
        """)
    with pytest.raises(cb.CompileError, match="async"):
        mod.k.ir(out=Array[f32])


# ---- no compile-time object but the allowed kinds reaches Python's operators ------------


class Weird:
    def __eq__(self, other):  # would fold `Weird() == x` to anything it likes
        return True

    def __bool__(self):
        return True


WEIRD = Weird()


@cube(launch=True)
def folds_weird(out: Array[f32]):
    if WEIRD == 3:
        out[0] = 1.0


@cube(launch=True)
def weird_condition(out: Array[f32]):
    if WEIRD:
        out[0] = 1.0


@pytest.mark.parametrize("k", [folds_weird, weird_condition])
def test_arbitrary_objects_do_not_fold(k):
    with pytest.raises(cb.CompileError, match="Weird object"):
        k.ir(out=Array[f32])


@pytest.mark.parametrize("a, b", itertools.product([3, 2.5, True], [2, 0.5, False]))
def test_compile_time_folding_is_pythons(a, b):
    """Compile-time arithmetic of numbers is Python's: the kernel stores the folded value."""
    @cube(launch=True)
    def k(out: Array[f32]):
        out[0] = f32(a * b + a - b)
        out[1] = f32(a // 1 + (a > b) + (a == b))

    rt = cb.runtime("interp")
    out = rt.from_numpy(np.zeros(2, np.float32))
    k.launch(rt, cube_count=1, cube_dim=1, out=out)
    np.testing.assert_allclose(out.numpy(), [a * b + a - b, a // 1 + (a > b) + (a == b)],
                               rtol=1e-6)



# ---- lazy and/or/ternary, as Python ------------------------------------------------------


@cube
def bump(out, i):
    out[i] = out[i] + 1000.0
    return 1.0


@cube(launch=True, unchecked=True)
def lazy_guards(out: Array[f32], a: Array[f32], n: u32):
    i = ABSOLUTE_POS
    if i < n and a[i] > 2.0:  # unchecked: a[i] must not be read for i >= n
        out[i] = 1.0
    v = a[i] if i < n else -1.0
    w = 0.0 if i >= n or a[i] < 5.0 else bump(out, i)  # the helper runs only when chosen
    if 0 < i < n < a.len() + 1 and a[i] > 0.0:
        w += 0.5
    out[i] += v * 10.0 + w


def test_and_or_ternary_evaluate_lazily(rt):
    n = 8
    a = np.arange(n, dtype=np.float32)
    got = _run(rt, lazy_guards, n, a=rt.from_numpy(a), n=n)
    out = np.zeros(n)
    for i in range(n):
        if i < n and a[i] > 2.0:
            out[i] = 1.0
        v = a[i] if i < n else -1.0
        w = 0.0
        if not (i >= n or a[i] < 5.0):
            out[i] += 1000.0
            w = 1.0
        if 0 < i < n < n + 1 and a[i] > 0.0:
            w += 0.5
        out[i] += v * 10.0 + w
    np.testing.assert_allclose(got, out)


@cube(launch=True)
def int_and_or(out: Array[i32], p: Array[i32], q: Array[i32]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = (p[i] or q[i]) * 100 + (p[i] and q[i]) + (p[i] or 7) * 10000


def test_and_or_give_pythons_operand_values(rt):
    p = np.array([0, 1, 0, 3, -2, 0, 5, 0], np.int32)
    q = np.array([0, 0, 7, 4, 0, -1, 6, 9], np.int32)
    got = _run(rt, int_and_or, 8, np.int32, p=rt.from_numpy(p), q=rt.from_numpy(q))
    want = [(x or y) * 100 + (x and y) + (x or 7) * 10000 for x, y in zip(p.tolist(),
                                                                        q.tolist())]
    np.testing.assert_array_equal(got, want)


@cube(launch=True)
def truth_contexts(out: Array[u32], a: Array[i32]):
    i = ABSOLUTE_POS
    r = u32(0)
    if i > 3 or cb.CUBE_POS_X:  # a bool and a u32: only their truth matters here
        r += u32(1)
    if not (a[i] and i > 1):
        r += u32(2)
    while r < 10 and (a[i] or i):
        r += u32(4)
    out[i] = r + (u32(100) if (i == 2 or a[i]) else u32(0))


def test_and_or_in_conditions_use_truth(rt):
    a = np.array([0, 3, 0, -1, 0, 2, 0, 0], np.int32)

    def py(i, ai):
        r = 0
        if i > 3 or 0:
            r += 1
        if not (ai and i > 1):
            r += 2
        while r < 10 and (ai or i):
            r += 4
        return r + (100 if (i == 2 or ai) else 0)

    got = _run(rt, truth_contexts, 8, np.uint32, a=rt.from_numpy(a))
    np.testing.assert_array_equal(got, [py(i, int(v)) for i, v in enumerate(a)])


WEIGHTS = (0.5, 2.0, -1.0)


@cube(launch=True)
def python_iteration(out: Array[f32], a: Array[f32]):
    i = ABSOLUTE_POS
    if i < out.len():
        acc = 0.0
        for k, w in enumerate(WEIGHTS):
            acc += w * f32(k + 1)
        for w, s in zip(WEIGHTS, (1.0, 10.0, 100.0)):
            acc += w * s
        out[i] = acc + max(a[i], 1.0, f32(i) * 0.5) + min(a[i], 2.0, 3.0, -f32(i))


def test_enumerate_zip_and_nary_min_max(rt):
    a = np.linspace(-3, 3, 8).astype(np.float32)
    got = _run(rt, python_iteration, 8, a=rt.from_numpy(a))
    base = sum(w * (k + 1) for k, w in enumerate(WEIGHTS)) + sum(
        w * s for w, s in zip(WEIGHTS, (1.0, 10.0, 100.0)))
    want = [base + max(float(x), 1.0, i * 0.5) + min(float(x), 2.0, 3.0, -i)
            for i, x in enumerate(a)]
    np.testing.assert_allclose(got, want, rtol=1e-6)


@cube(launch=True)
def weak_ternary(out: Array[u32]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = i
        out[i] += 5 if i > 3 else 2  # two literals take the type they meet (u32 here)


def test_ternary_of_literals_is_weak(rt):
    i = np.arange(8)
    np.testing.assert_array_equal(_run(rt, weak_ternary, 8, np.uint32),
                                  i + np.where(i > 3, 5, 2))


@cube
def pick_if(c, v, w):
    r = v if c else w
    return r


@cube(launch=True)
def mixed_bool_int_values(out: Array[i32], a: Array[i32]):
    i = ABSOLUTE_POS
    if i < out.len():
        p = a[i]
        out[i] = pick_if(cb.UNIT_POS_X and (p > 2), p, -4) + \
            i32(cb.UNIT_POS_X and (p > 2)) * 100 + (p or (i > 3)) * 1000


def test_and_or_values_mixing_bools_and_ints(rt):
    """`u and c` with u a number and c a bool is u when u == 0, else c: as 0/1 of u's type it
    keeps Python's value and truth."""
    a = np.array([0, 3, 5, -1, 0, 7, 1, 9], np.int32)
    got = _run(rt, mixed_bool_int_values, 8, np.int32, a=rt.from_numpy(a))
    want = [(p if (i and p > 2) else -4) + int(i and (p > 2)) * 100 + int(p or (i > 3)) * 1000
            for i, p in enumerate(a.tolist())]
    np.testing.assert_array_equal(got, want)


# ---- builtins over tuples of runtime values -------------------------------------------------


def _halve(pair):
    """A plain Python helper (no @cube) that only moves values around."""
    return pair[1], pair[0]


@cube(launch=True)
def tuple_builtins(out: Array[f32], a: Array[f32]):
    i = ABSOLUTE_POS
    if i < a.len():
        x = a[i]
        y = a[(i + 1) % a.len()]
        k = i * 8
        out[k] = 1.0 if any((x > 2.0, x < -2.0)) else 0.0
        out[k + 1] = 1.0 if all((x > -1.0, y > -1.0, i % 2 == 0)) else 0.0
        out[k + 2] = sum((x, y, 0.5))
        out[k + 3] = sum((x, y), 10.0)
        out[k + 4] = max((x, y, 0.0))
        out[k + 5] = min((y, x))
        acc = 0.0
        for v in reversed((x, y * 2.0)):
            acc = acc * 10.0 + v
        out[k + 6] = acc
        u, w = _halve((x, y))
        out[k + 7] = u - w


def test_any_all_sum_min_max_of_runtime_tuples_are_pythons(rt):
    """any()/all() of runtime conditions were decided by the truth of the IR objects (always
    true); sum() of runtime values failed; max((a, b)) was refused."""
    a = np.float32([3.0, -0.5, 0.25, -3.0, 1.5, -1.5, 2.5, 0.0])
    got = _run(rt, tuple_builtins, a.size * 8, a=rt.from_numpy(a)).reshape(-1, 8)
    for i, x in enumerate(a.tolist()):
        y = a.tolist()[(i + 1) % a.size]
        acc = 0.0
        for v in reversed((x, y * 2.0)):
            acc = acc * 10.0 + v
        u, w = _halve((x, y))
        want = [float(any((x > 2.0, x < -2.0))), float(all((x > -1.0, y > -1.0, i % 2 == 0))),
                sum((x, y, 0.5)), sum((x, y), 10.0), max((x, y, 0.0)), min((y, x)), acc, u - w]
        np.testing.assert_allclose(got[i], want, rtol=1e-6, err_msg=f"{rt.name}, x={x}")


@pytest.mark.parametrize("body, message", [
    ("out[i] = 1.0 if bool(a) else 0.0", "bool() cannot be applied to the array `a`"),
    ("out[i] = sorted((a[i], 1.0))[0]", "has no compile-time value"),
    ("out[i] = 1.0 if any((a[i], 1.0)) else 0.0", "any(): a condition must be bool"),
    ("out[i] = max((a[i], a))", "max takes values, got the array `a` in its tuple"),
    ("out[i] = sum(a)", "sum takes a value, got the array `a`"),
])
def test_runtime_values_are_refused_where_python_would_look_at_them(tmp_path, body, message):
    """A plain Python function may move runtime values around (zip, reversed, a helper that
    swaps them), but not compare, add or test them at compile time: that is a located error,
    never the IR objects' own truth or order."""
    src = tmp_path / "k_opaque.py"
    src.write_text(textwrap.dedent(f"""
        from cube import ABSOLUTE_POS, Array, cube, f32

        @cube(launch=True)
        def k(out: Array[f32], a: Array[f32]):
            i = ABSOLUTE_POS
            {body}
    """))
    import importlib.util
    spec = importlib.util.spec_from_file_location("k_opaque", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rt = cb.runtime("interp")
    with pytest.raises(cb.CompileError, match="k_opaque.py:7:") as e:
        _run(rt, mod.k, 4, a=rt.from_numpy(np.ones(4, np.float32)))
    assert message in str(e.value)


# ---- augmented assignment evaluates its target once -----------------------------------------


@cube
def _take(c):
    return cb.atomic_add(c, 0, 1)


@cube(launch=True)
def aug_targets(c: Array[i32], mem: Array[i32], lanes: Array[Line[i32]]):
    if ABSOLUTE_POS == 0:
        mem[_take(c)] += 10
        mem[_take(c) + 2] *= 3
        v = lanes[0]
        v[_take(c) % 4] += 100
        v[(_take(c) + 1) % 4] -= 7
        lanes[0] = v


def test_augmented_assignment_evaluates_its_index_once(rt):
    """`t[k] op= v` evaluates t and k once, as Python: a lane index with a side effect ran
    twice (the read from one lane, the write to the next)."""
    c = rt.from_numpy(np.zeros(1, np.int32))
    mem = rt.from_numpy(np.arange(8, dtype=np.int32))
    lanes = rt.from_numpy(np.zeros(4, np.int32))
    aug_targets.launch(rt, cube_count=1, cube_dim=1, c=c, mem=mem, lanes=lanes.lines(4))
    # the same statements in plain Python
    count = [0]

    def take():
        count[0] += 1
        return count[0] - 1
    pm, pl = list(range(8)), [0] * 4
    pm[take()] += 10
    pm[take() + 2] *= 3
    pl[take() % 4] += 100
    pl[(take() + 1) % 4] -= 7
    assert c.numpy().tolist() == count
    assert mem.numpy().tolist() == pm
    assert lanes.numpy().tolist() == pl


# ---- a return inside an unrolled loop ends it, as Python's ---------------------------------

TABLE = (0.5, -1.0, 2.0, -3.0)


def first_below(x, lim, n):
    """Plain Python: the reference of every helper below."""
    for k in range(n):
        if x[k] < lim:
            return k
    return -1


@cube
def first_below_unrolled(x, base, lim, N: Comptime[int]):
    for k in cb.range(N, unroll=True):
        if x[base + k] < lim:
            return k
    return -1


@cube
def first_below_enumerate(x, base, lim):
    for k, t in enumerate(TABLE):
        if x[base + k] < lim * t * t / (t * t):  # t only to use the pair
            return k
    return -1


@cube
def first_below_nested(x, base, lim):
    for a in cb.range(2, unroll=True):  # 2 x 2 unrolled: the inner return ends both
        for b in cb.range(2, unroll=True):
            if x[base + 2 * a + b] < lim:
                return 2 * a + b
    return -1


@cube
def first_below_runtime_inner(x, base, lim, n):
    for a in cb.range(2, unroll=True):
        for b in range(n):  # a runtime loop inside the unrolled one
            if x[base + 2 * a + b] < lim:
                return i32(2 * a + b)  # b is a u32 counter
    return -1


@cube
def first_below_in_runtime_loop(x, base, lim, n):
    for a in range(n):  # the unrolled loop inside a runtime one
        for b in cb.range(2, unroll=True):
            if x[base + 2 * a + b] < lim:
                return i32(2 * a + b)
    return -1


@cube(launch=True)
def first_below_all(x: Array[f32], out: Array[i32], lim: f32, n: u32):
    i = ABSOLUTE_POS
    if i * 4 < len(x):
        b = i * 4
        out[5 * i] = first_below_unrolled(x, b, lim, 4)
        out[5 * i + 1] = first_below_enumerate(x, b, lim)
        out[5 * i + 2] = first_below_nested(x, b, lim)
        out[5 * i + 3] = first_below_runtime_inner(x, b, lim, n)
        out[5 * i + 4] = first_below_in_runtime_loop(x, b, lim, n)


def test_return_inside_unrolled_loops_ends_them(rt):
    """Every helper finds the first entry below the limit, as the plain Python loop: the
    iterations unrolled after a `return` ran, and a later hit returned again (its index
    won), on every runtime."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(4 * 16).astype(np.float32)
    x[8:12] = 5.0  # a row with no hit
    out = rt.from_numpy(np.zeros(5 * 16, np.int32))
    first_below_all.launch(rt, cube_count=1, cube_dim=16, x=rt.from_numpy(x), out=out,
                           lim=-0.3, n=2)
    got = out.numpy().reshape(16, 5)
    want = [first_below(x[4 * i:4 * i + 4], np.float32(-0.3), 4) for i in range(16)]
    for j in range(5):
        assert got[:, j].tolist() == want, j


# ---- bools in builtins and casts, as Python's ----------------------------------------------


@cube(launch=True)
def bool_builtins(x: Array[f32], out: Array[i32]):
    i = ABSOLUTE_POS
    if 2 * i + 1 < len(x):
        a = x[2 * i] > 0.0
        b = x[2 * i + 1] > 0.0
        out[6 * i] = i32(max(a, b))
        out[6 * i + 1] = i32(min(a, b))
        out[6 * i + 2] = abs(a) + abs(b) * 10
        out[6 * i + 3] = i32(cb.clamp(a, False, b))
        out[6 * i + 4] = i32(u32(True) + u32(False)) + i32(f32(True) * 2.0)
        out[6 * i + 5] = i32(2.7) + i32(-2.7) * 10 + i32(L.max(a, True))


def test_bool_builtins_and_casts_are_pythons(rt):
    """max/min/abs/clamp of bools and u32/i32/f32 of bool and float literals give Python's
    values (they reached the IR verifier, or were refused: "cannot combine a bool literal")."""
    x = np.array([1.0, -1.0, -1.0, -2.0, -3.0, 4.0, 5, 6], np.float32)
    out = rt.from_numpy(np.zeros(24, np.int32))
    bool_builtins.launch(rt, cube_count=1, cube_dim=4, x=rt.from_numpy(x), out=out)
    want = []
    for p, q in x.reshape(4, 2):
        a, b = bool(p > 0), bool(q > 0)
        want += [int(max(a, b)), int(min(a, b)), abs(a) + abs(b) * 10,
                 int(min(max(a, False), b)), int(True) + int(False) + int(float(True) * 2.0),
                 int(2.7) + int(-2.7) * 10 + int(max(a, True))]
    assert out.numpy().tolist() == want


@cube(launch=True)
def read_from_the_end(a: Array[f32], out: Array[f32]):
    out[0] = a[-1]


def test_a_constant_negative_index_is_a_located_error(interp):
    """Python's a[-1] is the last element; cube's indexes are offsets, so a constant negative
    one is refused where it is written (it read 0, checked mode's out of bounds)."""
    a = interp.from_numpy(np.arange(3, dtype=np.float32))
    with pytest.raises(cb.CompileError) as e:
        read_from_the_end.launch(interp, cube_count=1, cube_dim=1, a=a, out=interp.empty(1))
    msg = str(e.value)
    assert "test_frontend_soundness.py:" in msg and "negative" in msg
    assert "out[0] = a[-1]" in msg and "len(a) - 1" in msg


# ---- reversed(range(...)) -----------------------------------------------------------------


@cube(launch=True)
def reversed_ranges(out: Array[i32], n: u32, a: i32, b: i32):
    k = 0
    for i in reversed(range(n)):  # a u32 counter down to 0: never below its type
        out[k] = i32(i)
        k += 1
    for i in reversed(range(a, b)):
        out[k] = i
        k += 1
    for i in reversed(range(b, a, -1)):
        out[k] = i
        k += 1
    for i in reversed(range(2, 9, 3)):  # compile-time bounds: any step
        out[k] = i32(i)
        k += 1
    out[31] = k


def test_reversed_range_is_pythons(rt):
    """`for i in reversed(range(...))` visits Python's values, last first, with runtime and
    compile-time bounds (it was refused: "range(...) can only be used as the iterable of a
    for loop")."""
    for n, a, b in ((4, -2, 3), (0, 3, 3), (1, 5, 2)):
        out = rt.from_numpy(np.zeros(32, np.int32))
        reversed_ranges.launch(rt, cube_count=1, cube_dim=1, out=out, n=n, a=a, b=b)
        want = [0] * 32
        vals = [*reversed(range(n)), *reversed(range(a, b)), *reversed(range(b, a, -1)),
                *reversed(range(2, 9, 3))]
        want[:len(vals)], want[31] = vals, len(vals)
        assert out.numpy().tolist() == want, (n, a, b)


@cube(launch=True)
def builtin_pow(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < len(x):
        out[i] = pow(x[i], 2.0) + pow(x[i], 3) * 0.5


def test_builtin_pow_is_the_power_operator(rt):
    """Python's builtin pow(x, y) is x ** y in a kernel (it was refused as a plain Python
    function); math.pow already was."""
    x = np.array([0.5, -2.0, 3.0, 1.5], np.float32)
    out = rt.empty(4)
    builtin_pow.launch(rt, cube_count=1, cube_dim=4, x=rt.from_numpy(x), out=out)
    want = [pow(float(v), 2.0) + pow(float(v), 3) * 0.5 for v in x]
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)


@cube(launch=True)
def math_without_kernel_form(x: Array[f32], out: Array[f32]):
    out[0] = math.gamma(x[0])


def test_a_math_function_without_kernel_form_is_named_as_such(interp):
    """math.gamma of runtime values: a located error naming math.gamma and the functions a
    kernel takes (it said "a plain Python function ... decorate it with @cube", which cannot
    be done to the standard library). math.atan2, the example here before, has a kernel
    form now."""
    x = interp.from_numpy(np.ones(2, np.float32))
    with pytest.raises(cb.CompileError) as e:
        math_without_kernel_form.launch(interp, 1, 1, x=x, out=interp.empty(1))
    msg = str(e.value)
    assert "math.gamma has no kernel form" in msg and "math.sqrt" in msg and "atan2" in msg
    assert "test_frontend_soundness.py:" in msg and "@cube" not in msg.splitlines()[0]


@cube(launch=True)
def reversed_stepped_runtime(out: Array[i32], n: u32):
    k = 0
    for i in reversed(range(0, n, 2)):
        out[k] = i32(i)
        k += 1


@cube(launch=True)
def grid_stride(out: Array[f32], n: u32):
    for i in range(ABSOLUTE_POS, n, cb.CUBE_DIM * cb.CUBE_COUNT):
        out[i] = 1.0


@pytest.mark.parametrize("kernel,text", [
    (reversed_stepped_runtime, "reversed(range(...)) with a runtime bound takes a step of 1"),
    (grid_stride, "i += stride"),
])
def test_range_forms_without_a_loop_are_located_errors(interp, kernel, text):
    """reversed(range(...)) with a runtime bound and a step of 2 or more, and a range with a
    runtime step (a grid-stride loop), are refused where they are written, the message
    showing what to write instead."""
    out = interp.from_numpy(np.zeros(4, np.float32 if kernel is grid_stride else np.int32))
    with pytest.raises(cb.CompileError) as e:
        kernel.launch(interp, cube_count=1, cube_dim=1, out=out, n=4)
    msg = str(e.value)
    assert text in msg and "test_frontend_soundness.py:" in msg and "range(" in msg


# ---- found by the mutation fuzzer (tests/cube/test_fuzz_mutations.py) ---------------------

@cube(launch=True)
def floordiv64(x: Array[cb.f64], y: Array[cb.f64], out: Array[cb.f64]):
    i = ABSOLUTE_POS
    if i < x.len():
        out[i] = x[i] // y[i]


@cube(launch=True)
def floordiv32(x: Array[f32], y: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < x.len():
        out[i] = x[i] // y[i]


_FD_VALUES = [1.0, 0.1, -0.1, 3.0, -3.0, 7.5, -7.5, 0.0, -0.0, math.inf, -math.inf, math.nan,
              1e30, 1e-30, 2.0, -2.0, 0.3, 5e-300]


def _same_floats(got, want):
    return (got == want) & (np.signbit(got) == np.signbit(want)) | \
        (np.isnan(got) & np.isnan(want))


def test_float_floordiv_is_pythons(rt):
    """`//` on floats follows Python (CPython's float_floor_div; NumPy's floor_divide, with a
    zero divisor giving x / y where Python raises): 1.0 // 0.1 is 9.0 (floor(1.0 / 0.1) is
    10.0: the division rounds up to an integer), inf // 1.0 is nan, signed zeros kept."""
    xs, ys = (a.ravel() for a in np.meshgrid(_FD_VALUES, _FD_VALUES))
    with np.errstate(all="ignore"):
        for kernel, dt in ((floordiv64, np.float64), (floordiv32, np.float32)):
            if dt is np.float64 and not getattr(rt, "supports_f64", True):
                continue
            x, y = xs.astype(dt), ys.astype(dt)
            want = np.floor_divide(x, y)
            for a, b, w in zip(x.tolist(), y.tolist(), want.tolist()):
                if b != 0 and not (math.isnan(w) and dt is np.float32):
                    # Python's own floats agree where NumPy's float64 does
                    assert dt is np.float32 or _same_floats(np.float64(a // b), np.float64(w))
            out = rt.from_numpy(np.zeros_like(x))
            try:
                kernel.launch(rt, (len(x) + 63) // 64, 64, x=rt.from_numpy(x),
                              y=rt.from_numpy(y), out=out)
            except cb.CapabilityError:
                continue  # no f64 on this runtime
            got = out.numpy()
            bad = ~_same_floats(got, want)
            if rt.name == "wgpu-spirv":  # lavapipe's OpFRem is x - y * trunc(x / y)
                bad &= ~((np.abs(got - want) == 1) & (np.abs(x / y - np.round(x / y)) < 1e-6))
            assert not bad.any(), list(zip(x[bad], y[bad], got[bad], want[bad]))[:6]

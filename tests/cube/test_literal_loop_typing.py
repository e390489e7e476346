"""A name seeded by an int literal takes the type of the typed values it meets (see
cube/frontend/weak.py and docs/language.md): the Python users port from Numba and Triton
(`total = 0; for a in range(n): total += a` with a u32 counter) compiles to what the same
function computes as plain Python, on every runtime; where no type gives Python's meaning
(a negative seed meeting a u32, one name meeting i32 and u32, a u32 name decreased, a range
counting below 0 beside a u32 bound) it is a located CompileError saying why.

Every kernel here runs on the runtime and, unchanged, as plain Python (`kernel.fn` with NumPy
arrays: Python's unbounded ints), and the two must agree."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import cube as cb
from cube import Array, Comptime, cube, f32, i32, u32


def _both(rt, kernel, **args):
    """Launch `kernel` on `rt` (one unit) and run its function as plain Python on copies
    of the arrays: returns the arrays from both, by name."""
    bufs = {k: rt.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in args.items()}
    kernel.launch(rt, cube_count=1, cube_dim=1, **bufs)
    got = {k: bufs[k].numpy() for k, v in args.items() if isinstance(v, np.ndarray)}
    py = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()}
    kernel.fn(**py)
    want = {k: py[k] for k in got}
    return got, want


def _agree(rt, kernel, **args):
    got, want = _both(rt, kernel, **args)
    for k in got:
        np.testing.assert_array_equal(got[k], want[k], err_msg=f"{kernel.__name__}: {k}")
    return got


def _line(fn, text: str) -> int:
    """The file line of the first line of `fn` (a @cube function) containing `text`."""
    fn = getattr(fn, "fn", fn)
    lines, first = inspect.getsourcelines(fn)
    for k, line in enumerate(lines):
        if text in line:
            return first + k
    raise AssertionError(text)


def _refused(kernel, rt, text: str, *fragments, **args):
    """Compiling `kernel` is a CompileError located at the line containing `text` of this
    file (file:line:col, the source line quoted), whose message has every fragment."""
    with pytest.raises(cb.CompileError) as e:
        kernel.launch(rt, cube_count=1, cube_dim=1, **args)
    msg = str(e.value)
    line = _line(kernel, text)
    assert f"{__file__}:{line}:" in msg.splitlines()[0], msg
    assert text in msg.splitlines()[1], msg
    assert "Traceback" not in msg and "internal compiler error" not in msg, msg
    for f in fragments:
        assert f in msg, (f, msg)
    return msg


# ---- the accumulator, in both import forms ------------------------------------------------


@cube(launch=True)
def accumulate(out: Array[i32], n: u32):
    total = 0
    for a in range(n):  # a is u32
        total += a  # total becomes u32
    out[0] = total  # u32 into i32 memory converts, as any int store


@cube(launch=True)
def accumulate_cb(out: Array[cb.i32], n: cb.u32):
    total = 0
    for a in range(n):
        total += a
    out[0] = total


@cube(launch=True)
def accumulate_array(out: Array[u32], x: Array[u32], n: u32):
    total = 0
    count = 0
    for i in range(n):
        total += x[i]
        count += 1
    out[0] = total
    out[1] = count


@cube(launch=True)
def accumulate_comptime_seed(out: Array[i32], n: u32, START: Comptime[int]):
    total = START
    for a in range(n):
        total += a
    out[0] = total


@pytest.mark.parametrize("n", [0, 1, 5, 100])
def test_accumulator_of_a_u32_counter(rt, n):
    for k in (accumulate, accumulate_cb):
        _agree(rt, k, out=np.zeros(1, np.int32), n=n)
    x = (np.arange(max(n, 1), dtype=np.uint32) * 7 + 3)[:max(n, 1)]
    got = _agree(rt, accumulate_array, out=np.zeros(2, np.uint32), x=x, n=n)
    assert got["out"].tolist() == [sum(int(v) for v in x[:n]), n]
    _agree(rt, accumulate_comptime_seed, out=np.zeros(1, np.int32), n=n, START=10)


@cube(launch=True)
def accumulate_float(out: Array[f32], x: Array[f32], n: u32):
    acc = 0  # an int seed meeting f32 values: f32, as Python's 0 + 0.5 is a float
    for i in range(n):
        acc += x[i] * 0.5
    out[0] = acc


def test_int_seed_meeting_floats_is_a_float(rt):
    x = np.linspace(-2.0, 3.0, 9).astype(np.float32)
    got, want = _both(rt, accumulate_float, out=np.zeros(1, np.float32), x=x, n=9)
    np.testing.assert_allclose(got["out"], want["out"], rtol=1e-6)
    got, want = _both(rt, accumulate_float, out=np.ones(1, np.float32), x=x, n=0)
    assert got["out"][0] == want["out"][0] == 0.0


# ---- swapped literal-seeded names, branches, while loops, nested loops --------------------


@cube(launch=True)
def ping_pong(out: Array[i32], n: u32):
    pout, pin = 0, 1
    for i in range(n):
        out[pout * n + i] = pin * 10 + i  # pout and pin meet the u32 n and i
        pout, pin = pin, pout


@cube(launch=True)
def toggled(out: Array[i32], n: u32):
    src = 0
    for i in range(n):
        out[src * n + i] = 1
        src = src ^ 1


def test_swapped_literal_seeded_names(rt):
    for n in (0, 1, 4, 7):
        _agree(rt, ping_pong, out=np.zeros(16, np.int32), n=n)
        _agree(rt, toggled, out=np.zeros(16, np.int32), n=n)


@cube(launch=True)
def while_counter(out: Array[i32], n: u32, stride: u32):
    i = 0
    s = 0
    steps = 0
    while i < n:
        s += i * stride  # i and then s meet u32 values
        i += stride
        steps += 1
    out[0] = s
    out[1] = i
    out[2] = steps


def test_while_loop_counters(rt):
    for n, stride in ((0, 1), (1, 1), (10, 1), (10, 3), (17, 4)):
        _agree(rt, while_counter, out=np.zeros(3, np.int32), n=n, stride=stride)


@cube(launch=True)
def set_in_branches(out: Array[i32], x: Array[i32], n: u32, lim: i32):
    count = 0
    if n > 2:
        count += 1  # a branch only
    big = 0
    small = 0
    for i in range(n):
        if x[i] > lim:
            big += 1
        elif x[i] < -lim:
            small = small + i  # small meets the u32 i
        else:
            big += 2
    out[0] = count + n  # count meets the u32 n after its branch
    out[1] = big
    out[2] = small
    out[3] = big + lim  # big met nothing typed: it is i32 and meets the i32 lim


def test_names_set_in_branches(rt):
    x = np.array([5, -9, 0, 7, -3, 12, -20, 1], np.int32)
    for n in (0, 2, 3, 8):
        _agree(rt, set_in_branches, out=np.zeros(4, np.int32), x=x, n=n, lim=2)


@cube(launch=True)
def nested(out: Array[i32], n: u32, m: u32):
    acc = 0
    for i in range(n):
        row = 0  # first assigned inside the outer loop
        for j in range(m):
            row += i * j
        acc += row
        out[1 + i] = row
    out[0] = acc


def test_nested_loops(rt):
    for n, m in ((0, 3), (3, 0), (4, 5)):
        _agree(rt, nested, out=np.zeros(8, np.int32), n=n, m=m)


@cube(launch=True)
def weak_choice_seed(out: Array[i32], n: u32):
    x = 1 if n > 3 else 2  # a runtime choice of two literals seeds x
    for i in range(n):
        x += i
    out[0] = x


def test_a_runtime_choice_of_literals_seeds_like_a_literal(rt):
    for n in (0, 3, 6):
        _agree(rt, weak_choice_seed, out=np.zeros(1, np.int32), n=n)


# ---- helpers: literal-seeded locals and early returns -------------------------------------


@cube
def find_at_least(x, n, lim):
    if n == 0:
        return 0  # the result starts as a literal ...
    for i in range(n):
        if x[i] >= lim:
            return i  # ... and meets the u32 counter
    return n


@cube
def count_below(x, n, lim):
    c = 0
    for i in range(n):
        if x[i] < lim:
            c += 1
    return c  # met nothing typed here: the caller's use decides


@cube
def last_index_below(x, n, lim):
    k = 0
    found = 0
    for i in range(n):
        if x[i] < lim:
            k = i
            found = 1
    if found == 0:
        return n
    return k


@cube(launch=True)
def helpers(out: Array[i32], x: Array[i32], n: u32, lim: i32):
    out[0] = find_at_least(x, n, lim)
    out[1] = count_below(x, n, lim) + n  # the helper's c meets a u32 in the kernel
    out[2] = count_below(x, n, lim) + lim  # another inlining: i32 here
    out[3] = last_index_below(x, n, lim)


def test_helpers_with_literal_seeded_locals_and_early_returns(rt):
    x = np.array([3, 1, 8, -2, 9, 4], np.int32)
    for n, lim in ((0, 5), (6, 5), (6, 100), (6, -100), (3, 2)):
        _agree(rt, helpers, out=np.zeros(4, np.int32), x=x, n=n, lim=lim)


# ---- ranges counting down to 0 beside a u32 bound -----------------------------------------


@cube(launch=True)
def ranges(out: Array[i32], n: u32):
    c = 0
    for i in range(n - 1, -1, -1):  # n - 1 down to 0: none for n = 0
        out[c] = i
        c += 1
    for i in range(n - 1):  # none for n = 0 or 1
        out[8 + i] = i
    for i in range(n - 1, 0, -1):
        out[16 + i] = i
    for i in reversed(range(1, n - 2)):
        out[24 + i] = i
    for i in range(n - 3, 2, -2):
        out[32 + i] = i
    out[40] = c


def test_ranges_with_a_u32_bound_minus_a_constant_are_pythons(rt):
    """`range(n - 1, -1, -1)` on a u32 n was refused ('-1 does not fit in u32'), and
    `range(n - 1)` / `range(n - 1, 0, -1)` ran 2**32 times for n = 0 (n - 1 wrapped)."""
    for n in (0, 1, 2, 3, 7):
        _agree(rt, ranges, out=np.full(41, -5, np.int32), n=n)


# ---- what compiled before keeps its meaning -----------------------------------------------


@cube(launch=True)
def compared_only(out: Array[i32], x: Array[i32], n: u32):
    best = -1  # compared with u32 values only: comparisons are exact, nothing is decided
    count = 0
    for i in range(n):
        if best < i:
            count += 1
        if x[i] > best:
            best = x[i]
    out[0] = best
    out[1] = count


def test_comparisons_decide_nothing(rt):
    x = np.array([-4, -2, 3, -9], np.int32)
    for n in (0, 1, 4):
        _agree(rt, compared_only, out=np.zeros(2, np.int32), x=x, n=n)


# ---- refusals -----------------------------------------------------------------------------


@cube(launch=True)
def negative_seed(out: Array[i32], x: Array[i32], n: u32):
    best = -1
    for i in range(n):
        if x[i] > 0:
            best = i
    out[0] = best


@cube(launch=True)
def negative_seed_arith(out: Array[i32], n: u32):
    lo = -1
    for i in range(n):
        lo = lo + i
    out[0] = lo


@cube(launch=True)
def mixes_i32_and_u32(out: Array[i32], n: u32, k: i32):
    total = 0
    for i in range(n):
        total += i
        total += k
    out[0] = total


@cube(launch=True)
def mixes_in_helper_results(out: Array[i32], x: Array[i32], n: u32, k: i32):
    c = count_below(x, n, k)
    out[0] = c + n
    out[1] = c + k


@cube(launch=True)
def decreased_unsigned(out: Array[i32], n: u32):
    x = 0
    for i in range(n):
        x -= 1
        x += i
    out[0] = x


@cube(launch=True)
def decreased_after(out: Array[i32], n: u32):
    x = 0
    for i in range(n):
        x += i
    out[0] = x - 5


@cube(launch=True)
def counts_below_zero(out: Array[i32], n: u32):
    for i in range(n - 1, -3, -1):
        out[0] = i


@cube(launch=True)
def from_n_to_minus_one(out: Array[i32], n: u32):
    for i in range(n, -1, -1):
        out[0] = i


def test_a_negative_seed_meeting_a_u32_is_refused(interp):
    x = interp.from_numpy(np.zeros(2, np.int32))
    out = interp.from_numpy(np.zeros(2, np.int32))
    _refused(negative_seed, interp, "best = i", "'best' is assigned the number -1",
             f"(line {_line(negative_seed, 'best = -1')})", "cannot hold -1", "i32(",
             out=out, x=x, n=2)
    _refused(negative_seed_arith, interp, "lo = lo + i", "'lo'", "cannot hold -1",
             out=out, n=2)


def test_one_name_meeting_i32_and_u32_is_refused(interp):
    out = interp.from_numpy(np.zeros(2, np.int32))
    msg = _refused(mixes_i32_and_u32, interp, "total += k", "cannot mix u32 and i32",
                   "'total' starts as the number 0", "is u32 because it meets a u32 value "
                   f"at line {_line(mixes_i32_and_u32, 'total += i')}", out=out, n=2, k=1)
    assert "cast one side explicitly" in msg
    x = interp.from_numpy(np.zeros(2, np.int32))
    _refused(mixes_in_helper_results, interp, "out[1] = c + k", "cannot mix u32 and i32",
             "'c' starts as the number 0", out=out, x=x, n=2, k=1)


def test_a_decreased_name_is_not_made_unsigned(interp):
    out = interp.from_numpy(np.zeros(2, np.int32))
    _refused(decreased_unsigned, interp, "x += i", "would be u32",
             f"line {_line(decreased_unsigned, 'x -= 1')} subtracts from it", "wraps",
             out=out, n=2)
    _refused(decreased_after, interp, "out[0] = x - 5", "would be u32", "subtracts from it",
             out=out, n=2)


def test_a_range_below_zero_beside_a_u32_bound_is_refused(interp):
    out = interp.from_numpy(np.zeros(2, np.int32))
    _refused(counts_below_zero, interp, "range(n - 1, -3, -1)", "counts to -3, below 0",
             "reversed(range(n))", out=out, n=2)
    _refused(from_n_to_minus_one, interp, "range(n, -1, -1)", "counts to -1, below 0",
             out=out, n=2)

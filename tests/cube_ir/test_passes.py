"""The IR passes: each checked structurally and, through the reference interpreter, by running
the kernel before and after (results must not change)."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cube_ir import ir
from cube_ir.builder import Builder
from cube_ir.errors import IRError
from cube_ir.ir import Const
from cube_ir.passes import bounds_check, clone_kernel, const_eval, run_pipeline, unroll_range
from cube_ir.passes.const_fold import const_fold
from cube_ir.passes.dce import dce
from cube_ir.passes.unroll import unroll
from cube_ir.printer import format_kernel
from cube_ir.types import (
    SCALARS,
    Vec,
    boolean,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
)
from cube_ir.verify import verify

INTS = [i8, i16, i32, i64, u8, u16, u32, u64]
FLOATS = [f16, f32, f64]
INT_OPS = ["add", "sub", "mul", "div", "rem", "min", "max", "and", "or", "xor", "shl", "shr",
           "eq", "ne", "lt", "le", "gt", "ge", "pow"]
FLOAT_OPS = ["add", "sub", "mul", "div", "rem", "min", "max", "pow", "eq", "ne", "lt", "le",
             "gt", "ge"]
# CUBE_FUZZ_EXAMPLES=N (or CUBE_SLOW=1) runs more examples than CI does
N_EXAMPLES = int(os.environ.get("CUBE_FUZZ_EXAMPLES", 1000 if os.environ.get("CUBE_SLOW")
                                else 150))
FAST = settings(max_examples=N_EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


# ---- running kernels -----------------------------------------------------------------------

def execute(kernel, args, cube_count=1, cube_dim=8, plane_size=None) -> list:
    """Run on copies of the args; return them (outputs included)."""
    interpreter = pytest.importorskip("cube_ir.interpreter")
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    interpreter.run(kernel, cube_count, cube_dim, args, plane_size)
    return args


def assert_same(xs, ys) -> None:
    for x, y in zip(xs, ys):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)


def unchanged_by(passes, kernel, args, **launch):
    """Run `kernel` before and after `passes` (which work in place); results must agree."""
    before = execute(clone_kernel(kernel), args, **launch)
    passes(kernel)
    verify(kernel)
    after = execute(kernel, args, **launch)
    assert_same(before, after)
    return after


def ops(kernel, kind=None) -> list:
    return [op for op in ir.walk(kernel.body) if kind is None or isinstance(op, kind)]


def zeros(t, n=8):
    return np.zeros(n * t.lanes, t.elem.np)


# ---- const_eval against NumPy --------------------------------------------------------------

def _int_value(t):
    lo = -(1 << (t.bits - 1)) if t.is_signed else 0
    hi = (1 << (t.bits - (1 if t.is_signed else 0))) - 1
    return st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, 1, -1 if lo else 2]))


def _np_int_reference(op, a, b, t):
    """The IR's integer semantics written with NumPy arrays (wraparound is NumPy's)."""
    dt = t.np
    x, y = np.array([a], dt), np.array([b], dt)
    with np.errstate(all="ignore"):
        if op in ("add", "sub", "mul", "and", "or", "xor"):
            fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "and": np.bitwise_and,
                  "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
            return int(fn(x, y)[0])
        if op in ("min", "max"):
            return int((np.minimum if op == "min" else np.maximum)(x, y)[0])
        if op in ("shl", "shr"):
            n = np.array([b % t.bits], dt)
            return int((np.left_shift if op == "shl" else np.right_shift)(x, n)[0])
        if op in ("div", "rem"):
            if b == 0:
                return 0
            q = np.trunc(np.float64(a) / np.float64(b)) if t.bits < 64 else None
            if q is None:  # 64-bit: exact integer reference
                q = abs(a) // abs(b) * (-1 if (a < 0) != (b < 0) else 1)
            q = np.array([int(q) % 2**64], np.uint64).astype(dt)  # INT_MIN / -1 wraps
            return int(q[0]) if op == "div" else int((x - y * q)[0])
        cmp = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
               "gt": np.greater, "ge": np.greater_equal}[op]
        return bool(cmp(x, y)[0])


@FAST
@given(data=st.data(), t=st.sampled_from(INTS),
       op=st.sampled_from([o for o in INT_OPS if o != "pow"]))
def test_const_eval_int_binary_matches_numpy(data, t, op):
    a, b = data.draw(_int_value(t)), data.draw(_int_value(t))
    got = const_eval.binary(op, a, b, t)
    assert got == _np_int_reference(op, a, b, t), (op, t, a, b)


@FAST
@given(data=st.data(), t=st.sampled_from(FLOATS), op=st.sampled_from(FLOAT_OPS))
def test_const_eval_float_binary_matches_numpy(data, t, op):
    a = data.draw(st.floats(width=t.bits))
    b = data.draw(st.floats(width=t.bits))
    got = const_eval.binary(op, a, b, t)
    x, y = t.np.type(a), t.np.type(b)
    with np.errstate(all="ignore"):
        fns = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
               "rem": np.fmod, "min": np.fmin, "max": np.fmax, "eq": np.equal,
               "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
               "ge": np.greater_equal}
        if op == "pow":
            want = t.np.type(np.power(np.float64(x), np.float64(y)))
        else:
            want = fns[op](x, y)
    if got is None:  # only where backends may disagree
        assert op in ("min", "max") and (math.isnan(a) or math.isnan(b) or 0.0 in (a, b))
        return
    if op in ("eq", "ne", "lt", "le", "gt", "ge"):
        assert got == bool(want)
    else:
        np.testing.assert_array_equal(t.np.type(got), want)
        assert float(t.np.type(got)) == got or math.isnan(got)  # representable in t


@FAST
@given(data=st.data(), src=st.sampled_from(INTS + FLOATS + [boolean]),
       dst=st.sampled_from(INTS + FLOATS + [boolean]))
def test_const_eval_cast_matches_numpy(data, src, dst):
    if src.is_bool:
        x = data.draw(st.booleans())
    elif src.is_int:
        x = data.draw(_int_value(src))
    else:
        x = data.draw(st.floats(width=src.bits))
    got = const_eval.cast(x, src, dst)
    sx = np.array([x], src.np)
    if dst.is_bool:
        assert got == bool(sx[0] != 0)
    elif src.is_float and dst.is_int:
        f = float(sx[0])
        if got is None:  # out of range or not finite: the IR promises nothing
            info = np.iinfo(dst.np)
            assert not math.isfinite(f) or not info.min <= math.trunc(f) <= info.max
        else:
            assert got == math.trunc(f)
    elif got is None:
        assert src.is_int and abs(x) > 1 << 53
    else:
        with np.errstate(all="ignore"):
            want = sx.astype(dst.np)[0]
        np.testing.assert_array_equal(np.array([got], dst.np), [want])


def test_const_eval_edge_cases():
    assert const_eval.binary("div", -(2**31), -1, i32) == -(2**31)  # wraps, no trap
    assert const_eval.binary("rem", -(2**31), -1, i32) == 0
    assert const_eval.binary("div", 7, 0, i32) == 0 and const_eval.binary("rem", 7, 0, u8) == 0
    assert const_eval.binary("div", -7, 2, i32) == -3 and const_eval.binary("rem", -7, 2, i32) == -1
    assert const_eval.binary("shl", 1, 33, i32) == 2  # counts modulo the width
    assert const_eval.binary("shr", -8, 1, i32) == -4  # arithmetic for signed
    assert const_eval.binary("shr", 2**32 - 8, 1, u32) == 2**31 - 4  # logical for unsigned
    assert const_eval.binary("add", 250, 10, u8) == 4
    assert const_eval.binary("mul", 2**62, 4, i64) == 0
    assert const_eval.unary("neg", -128, i8) == -128
    assert const_eval.unary("abs", -(2**31), i32) == -(2**31)
    assert const_eval.unary("bitnot", 0, u16) == 0xFFFF
    assert const_eval.binary("add", 0.1, 0.2, f32) == float(np.float32(0.1) + np.float32(0.2))
    assert const_eval.binary("add", 65504.0, 65504.0, f16) == math.inf
    assert const_eval.unary("round", 2.5, f32) == 2.0  # half to even
    assert const_eval.cast(-1, i32, u32) == 2**32 - 1
    assert const_eval.cast(300, i32, u8) == 44
    assert const_eval.cast(-2.7, f32, i32) == -2
    assert const_eval.cast(math.nan, f32, boolean) is True
    assert const_eval.cast(1e-10, f32, f16) == 0.0
    assert const_eval.binary("min", math.nan, 1.0, f32) is None
    assert const_eval.binary("add", 1.0, 1.0, SCALARS["bf16"]) is None  # not modelled


# ---- const_fold ----------------------------------------------------------------------------

def _binary_kernel(op, a: Const, b: Const, out_t) -> ir.Kernel:
    k = Builder("bin", checked=False)
    out = k.array("out", out_t)
    k.store(out, 0, k.binary(op, a, b))
    return k.finish()


@FAST
@given(data=st.data(), t=st.sampled_from(INTS + FLOATS), op=st.sampled_from(INT_OPS))
def test_const_fold_agrees_with_the_interpreter(data, t, op):
    if t.is_float and op not in FLOAT_OPS:
        op = "add"
    if t.is_int:
        a, b = data.draw(_int_value(t)), data.draw(_int_value(t))
    else:
        a, b = data.draw(st.floats(width=t.bits)), data.draw(st.floats(width=t.bits))
    out_t = boolean if op in ir.COMPARE_OPS else t
    kernel = _binary_kernel(op, Const(a, t), Const(b, t), out_t)
    after = unchanged_by(const_fold, kernel, [zeros(out_t)], cube_dim=1)
    store = ops(kernel, ir.Store)[0]
    folded = const_eval.binary(op, a, b, t) is not None
    assert isinstance(store.value, Const) == folded
    assert after is not None


@FAST
@given(data=st.data(), t=st.sampled_from(FLOATS + INTS),
       op=st.sampled_from(sorted(ir.UNARY_OPS - {"not"})))
def test_const_fold_unary_agrees_with_the_interpreter(data, t, op):
    if t.is_int and op in ir.FLOAT_ONLY_UNARY:
        t = f32
    elif t.is_float and op == "bitnot":
        t = i16
    x = data.draw(_int_value(t)) if t.is_int else data.draw(st.floats(width=t.bits))
    k = Builder("un", checked=False)
    out = k.array("out", t)
    v = k.var(t, "v")
    k.assign(v, Const(x, t))  # propagated into the op, which then folds
    k.store(out, 0, k.unary(op, v))
    kernel = k.finish()
    before = execute(clone_kernel(kernel), [zeros(t)], cube_dim=1)
    const_fold(kernel)
    assert isinstance(ops(kernel, ir.Store)[0].value, Const)
    after = execute(kernel, [zeros(t)], cube_dim=1)
    # both compute transcendental functions in f64 and round once; allow NumPy's scalar and
    # vector f64 code paths an ulp of disagreement
    np.testing.assert_allclose(after[0], before[0], rtol=4 * np.finfo(np.float64).eps,
                               equal_nan=True)


@FAST
@given(data=st.data(), t=st.sampled_from(FLOATS + [i32, u8, i64]),
       op=st.sampled_from(["fma", "clamp"]))
def test_const_fold_ternary_agrees_with_the_interpreter(data, t, op):
    if t.is_int:
        vals = [data.draw(_int_value(t)) for _ in range(3)]
    else:  # small integers and halves: exact products, so fused and unfused agree
        vals = [data.draw(st.integers(-64, 64)) / 2 for _ in range(3)]
    if t.is_int and op == "fma":
        op = "clamp"
    k = Builder("tern", checked=False)
    out = k.array("out", t)
    k.store(out, 0, k.ternary(op, *(Const(v, t) for v in vals)))
    kernel = k.finish()
    unchanged_by(const_fold, kernel, [zeros(t)], cube_dim=1)
    folded = const_eval.ternary(op, *vals, t) is not None  # not where rounding would differ
    assert isinstance(ops(kernel, ir.Store)[0].value, Const) == folded
    assert folded or (t == f16 and op == "fma")


def test_const_fold_propagates_single_assignments():
    k = Builder("prop", checked=False)
    out = k.array("out", i32)
    x = k.var(i32, "x")
    k.assign(x, 3)
    y = k.add(x, 4)
    z = k.binary("mul", y, y)
    k.store(out, 0, z)
    kernel = k.finish()
    unchanged_by(const_fold, kernel, [zeros(i32)])
    assert ops(kernel, ir.Store)[0].value == Const(49, i32)
    dce(kernel)
    assert [type(op) for op in kernel.body] == [ir.Store] and kernel.vars == []


def test_const_fold_leaves_multiply_written_vars():
    k = Builder("multi", checked=False)
    out = k.array("out", i32)
    x = k.var(i32, "x")
    k.assign(x, 3)
    with k.if_(k.lt(k.builtin("UNIT_POS"), 4)):
        k.assign(x, 5)
    k.store(out, k.builtin("UNIT_POS"), x)
    kernel = k.finish()
    after = unchanged_by(const_fold, kernel, [zeros(i32)])
    assert ops(kernel, ir.Store)[0].value is x
    assert list(after[0]) == [5] * 4 + [3] * 4


def test_const_fold_respects_reads_before_the_write():
    """A single write inside a loop does not dominate the reads before it in the body."""
    k = Builder("carried", checked=False)
    out = k.array("out", i32)
    v = k.var(i32, "v")
    with k.range(0, 3, t=u32) as i:
        k.store(out, i, v)  # first iteration: v is not written yet (reads 0)
        k.assign(v, 7)
        k.store(out, k.add(i, 3), v)  # dominated: becomes 7
    kernel = k.finish()
    after = unchanged_by(const_fold, kernel, [zeros(i32)])
    first, second = ops(kernel, ir.Store)
    assert first.value is v and second.value == Const(7, i32)
    assert list(after[0][:6]) == [0, 7, 7, 7, 7, 7]


def test_const_fold_simplifies_ifs_and_empty_ranges():
    k = Builder("cf", checked=False)
    out = k.array("out", i32)
    flag = k.var(boolean, "flag")
    k.assign(flag, True)
    with k.if_(flag) as h:
        k.store(out, 0, 1)
        with h.else_():
            k.store(out, 0, 2)
    with k.if_(k.binary("gt", 1, 2)):  # false, no else: disappears
        k.store(out, 1, 3)
    with k.range(5, 2):  # no iterations
        k.store(out, 2, 4)
    with k.range(0, -3, -1):  # three iterations, stays
        k.store(out, 3, 5)
    s = k.select(flag, 10, 20)
    k.store(out, 4, s)
    kernel = k.finish()
    unchanged_by(const_fold, kernel, [zeros(i32)])
    assert not ops(kernel, ir.If)
    assert len(ops(kernel, ir.Range)) == 1
    values = [op.value for op in ops(kernel, ir.Store)]
    assert values == [Const(1, i32), Const(5, i32), Const(10, i32)]


def test_const_fold_identities_and_copies():
    k = Builder("id", checked=False)
    x, out = k.array("x", i32), k.array("out", f32)
    v = k.load(x, k.builtin("UNIT_POS"))
    f = k.cast(v, f32)
    copy = k.var(i32, "copy")
    k.assign(copy, v)  # v's single write came first: reads of copy read v
    exact = [k.add(v, 0), k.binary("mul", 1, copy), k.binary("div", v, 1),
             k.binary("or", v, 0), k.binary("shl", v, 32), k.binary("and", v, -1)]
    zero = k.binary("mul", v, 0)
    flag = k.binary("or", k.lt(v, 3), True)
    kept = [k.add(f, 0.0), k.binary("sub", f, -0.0)]  # -0.0 + 0.0 is 0.0: not identities
    same = [k.binary("mul", f, 1.0), k.binary("sub", f, 0.0)]
    for n, r in enumerate([*exact, zero]):
        k.store(out, n, k.cast(r, f32))
    with k.if_(flag):
        for n, r in enumerate(kept + same):
            k.store(out, 10 + n, r)
    kernel = k.finish()
    unchanged_by(const_fold, kernel, [np.array([-3, 0, 7, 2**31 - 1], np.int32),
                                      np.zeros(16, np.float32)], cube_dim=4)
    casts = [op for op in ops(kernel, ir.Cast) if op.dst.type == f32]
    assert [c.a for c in casts[1:]] == [v] * 6  # the first cast is `f`; zero folded away
    assert ops(kernel, ir.Store)[6].value == Const(0.0, f32)
    assert not ops(kernel, ir.If)
    binaries = {op.dst for op in ops(kernel, ir.Binary)}
    assert set(kept) <= binaries and not set(same) & binaries


def test_const_fold_does_not_copy_a_var_before_its_write():
    k = Builder("late", checked=False)
    out = k.array("out", i32)
    y = k.var(i32, "y")
    x = k.var(i32, "x")
    with k.range(0, 2, t=u32) as i:
        k.assign(x, y)  # first iteration: y is not written yet
        k.assign(y, 5)
        k.store(out, i, x)
    kernel = k.finish()
    after = unchanged_by(const_fold, kernel, [zeros(i32)])
    assert ops(kernel, ir.Store)[0].value is x
    assert list(after[0][:2]) == [0, 5]


def test_const_fold_lines_and_casts():
    k = Builder("lines", checked=False)
    out = k.array("out", Vec(f32, 4))
    splat = k.cast(Const(3, i32), Vec(f32, 4))
    half = k.binary("mul", splat, Const(0.5, Vec(f32, 4)))
    k.store(out, 0, half)
    lane = k.extract(half, 2)
    k.store(out, 1, k.cast(lane, Vec(f32, 4)))
    kernel = k.finish()
    unchanged_by(const_fold, kernel, [zeros(Vec(f32, 4))])
    assert [op.value for op in ops(kernel, ir.Store)] == [Const(1.5, Vec(f32, 4))] * 2


# ---- unroll --------------------------------------------------------------------------------

def _dot_kernel(trips=4, step=1, start=0) -> ir.Kernel:
    k = Builder("dot", checked=False)
    x, out = k.array("x", f32), k.array("out", f32)
    acc = k.var(f32, "acc")
    k.assign(acc, 0.0)
    with k.range(start, start + trips * step, step) as i:
        iu = k.cast(i, u32)
        t = k.binary("mul", k.load(x, iu), k.cast(i, f32))
        k.assign(acc, k.add(acc, t))
    k.store(out, k.builtin("UNIT_POS"), acc)
    return k.finish()


def test_unroll_replaces_the_loop_by_copies():
    kernel = _dot_kernel()
    x = np.arange(1, 17, dtype=np.float32)
    after = unchanged_by(unroll, kernel, [x, zeros(f32)])
    assert not ops(kernel, ir.Range)
    loads = ops(kernel, ir.Load)
    assert len(loads) == 4
    casts = [op for op in ops(kernel, ir.Cast) if isinstance(op.a, Const)]
    assert sorted(op.a.value for op in casts if op.dst.type == u32) == [0, 1, 2, 3]
    assert after[1][0] == sum(x[i] * i for i in range(4))
    verify(kernel)


def test_unroll_renames_body_locals_so_they_fold():
    kernel = _dot_kernel()
    unroll(kernel)
    loads = ops(kernel, ir.Load)
    assert len({op.dst for op in loads}) == 4  # a fresh var per copy
    assert len({v.id for v in kernel.vars}) == len(kernel.vars)  # ids stay unique
    const_fold(kernel)
    dce(kernel)
    assert sorted(op.index.value for op in ops(kernel, ir.Load)) == [0, 1, 2, 3]
    acc = [v for v in kernel.vars if v.name == "acc"]
    assert len(acc) == 1  # the carried accumulator keeps its identity


def test_unroll_renames_vars_written_on_every_path():
    k = Builder("paths", checked=False)
    x, out = k.array("x", i32), k.array("out", i32)
    carried = k.var(i32, "carried")
    k.assign(carried, 0)
    with k.range(0, 3, t=u32) as i:
        v = k.var(i32, "v")  # written in both branches before any read: per-copy
        w = k.var(i32, "w")  # read before written on one path: shared by the copies
        with k.if_(k.lt(k.load(x, i), 0)) as h:
            k.assign(v, 1)
            k.assign(w, 1)
            with h.else_():
                k.assign(v, 2)
                k.store(out, k.add(i, 4), w)
        k.assign(carried, k.add(carried, v))
        k.store(out, i, k.add(v, w))
    k.store(out, 8, carried)
    kernel = k.finish()
    xs = np.array([-1, 5, 6], np.int32)
    after = unchanged_by(unroll, kernel, [xs, zeros(i32, 9)])
    names = [var.name for var in kernel.vars]
    assert names.count("v") == 3 and names.count("w") == 1 and names.count("carried") == 1
    np.testing.assert_array_equal(after[1][:9], [2, 3, 3, 0, 0, 1, 1, 0, 5])


def test_unroll_negative_step_and_nested():
    k = Builder("nest", checked=False)
    out = k.array("out", i32)
    with k.range(5, 0, -2) as i:
        with k.range(0, 3) as j:
            idx = k.add(k.binary("mul", i, 3), j)
            k.store(out, k.cast(idx, u32), k.add(i, j))
    kernel = k.finish()
    after = unchanged_by(unroll, kernel, [zeros(i32, 32)])
    assert not ops(kernel, ir.Range)
    assert len(ops(kernel, ir.Store)) == 9
    want = np.zeros(32, np.int32)
    for i in (5, 3, 1):
        for j in range(3):
            want[i * 3 + j] = i + j
    np.testing.assert_array_equal(after[0], want)


@pytest.mark.parametrize("reason", ["break", "continue", "return", "sync", "trips", "bounds",
                                    "read_after", "big_body"])
def test_unroll_leaves_loops_it_must_not_touch(reason):
    k = Builder("keep", checked=False)
    out = k.array("out", i32)
    n = k.scalar_param_value(k.scalar("n", i32))
    end = n if reason == "bounds" else (17 if reason == "trips" else 4)
    with k.range(0, end) as i:
        k.store(out, k.cast(i, u32), i)
        if reason in ("break", "continue", "return"):
            with k.if_(k.binary("eq", i, 2)):
                k.emit({"break": ir.Break, "continue": ir.Continue,
                        "return": ir.Return}[reason]())
        elif reason == "sync":
            k.sync_cube()
        elif reason == "big_body":
            v = i
            for _ in range(70):
                v = k.add(v, 1)
            k.store(out, 0, v)
    if reason == "read_after":
        k.store(out, 20, i)
    kernel = k.finish()
    assert not unroll(kernel)
    assert len(ops(kernel, ir.Range)) == 1


def test_unroll_allows_breaks_of_inner_loops():
    k = Builder("inner", checked=False)
    out = k.array("out", i32)
    with k.range(0, 3) as i:
        with k.loop():
            k.store(out, k.cast(i, u32), i)
            k.break_()
    kernel = k.finish()
    after = unchanged_by(unroll, kernel, [zeros(i32)])
    assert not ops(kernel, ir.Range) and len(ops(kernel, ir.Loop)) == 3
    assert list(after[0][:3]) == [0, 1, 2]


def test_unroll_range_alone():
    k = Builder("u", checked=False)
    out = k.array("out", i32)
    with k.range(0, 3) as i:
        k.store(out, k.cast(i, u32), k.add(i, 1))
    rng = k.kernel.body[0]
    copies = unroll_range(rng)
    assert len(copies) == 3 * len(rng.body)
    assert [op.a for op in copies if isinstance(op, ir.Cast)] == [Const(v, i32) for v in range(3)]
    assert all(op not in rng.body for op in copies)  # fresh ops, the loop is untouched


# ---- dce -----------------------------------------------------------------------------------

def test_dce_removes_dead_chains_and_keeps_effects():
    k = Builder("dce", plane_size=4, checked=False)
    x, out = k.array("x", i32), k.array("out", i32)
    sm = k.shared(i32, 8)
    loc = k.local(i32, 4)
    t = k.builtin("UNIT_POS")
    dead = k.add(k.binary("mul", k.load(x, t), 3), 1)  # never used
    k.plane("sum", dead)  # collective, unused
    k.store(loc, 0, 5)  # local memory nobody reads
    k.store(sm, t, 7)  # shared memory nobody reads
    old = k.atomic("add", out, 0, 1)  # effect stays, result unused
    k.store(out, k.add(t, 1), k.load(x, t))
    del old
    kernel = k.finish()
    after = unchanged_by(dce, kernel, [np.arange(8, dtype=np.int32), zeros(i32, 9)],
                         plane_size=4)
    kinds = [type(op).__name__ for op in kernel.body]
    assert kinds == ["Builtin", "Atomic", "Binary", "Load", "Store"]
    assert ops(kernel, ir.Atomic)[0].dst is None
    assert kernel.shared == [] and kernel.locals == []
    assert len(kernel.vars) == 3
    assert after[1][0] == 8


def test_dce_removes_unreachable_code_and_empty_control_flow():
    k = Builder("dce2", checked=False)
    out = k.array("out", i32)
    t = k.builtin("UNIT_POS")
    with k.range(0, 4) as i:
        with k.if_(k.binary("eq", i, 2)):
            k.break_()
            k.store(out, 0, 99)  # after break
        with k.if_(k.lt(t, 3)) as h:
            k.continue_()
            with h.else_():
                k.return_()
        k.store(out, 1, 98)  # both branches left
    with k.if_(k.lt(t, 5)):
        k.add(t, 1)  # dead: the if empties and goes
    with k.loop():
        k.break_()
    with k.range(0, t):
        k.add(t, 2)
    k.store(out, k.add(t, 2), 1)
    kernel = k.finish()
    unchanged_by(dce, kernel, [zeros(i32, 16)])
    text = format_kernel(kernel)
    assert "99" not in text and "98" not in text
    assert len(ops(kernel, ir.If)) == 2 and not ops(kernel, ir.Loop)
    assert len(ops(kernel, ir.Range)) == 1


# ---- bounds --------------------------------------------------------------------------------

def test_bounds_guards_loads_stores_and_atomics():
    k = Builder("b")
    x, out = k.array("x", f32), k.array("out", f32)
    i = k.builtin("ABSOLUTE_POS")
    k.store(out, i, k.load(x, i))
    k.atomic("add", out, i, 1.0)
    kernel = k.finish()
    assert bounds_check(kernel)
    verify(kernel)
    metas = [op for op in kernel.body if isinstance(op, ir.Meta)]
    assert [m.mem.name for m in metas] == ["x", "out"]  # hoisted to the entry, once each
    assert kernel.body[:2] == metas
    ifs = ops(kernel, ir.If)
    assert len(ifs) == 3
    for g in ifs:
        assert len(g.then) == 1
        assert isinstance(g.then[0], (ir.Load, ir.Store, ir.Atomic))
    load_if, store_if, atomic_if = ifs
    assert load_if.orelse[0].src == Const(0.0, f32)
    assert store_if.orelse == []
    assert atomic_if.orelse[0].src == Const(0.0, f32)


def test_bounds_is_idempotent():
    k = Builder("b")
    x, out = k.array("x", i32), k.array("out", i64)
    sm = k.shared(i32, 16)
    i = k.cast(k.builtin("ABSOLUTE_POS"), i32)
    j = k.cast(i, i64)
    k.store(sm, k.builtin("UNIT_POS"), k.load(x, k.sub(i, 1)))
    k.store(out, j, k.cast(k.load(sm, 3), i64))
    kernel = k.finish()
    bounds_check(kernel)
    first = format_kernel(kernel)
    assert not bounds_check(kernel)
    assert format_kernel(kernel) == first
    run_pipeline(kernel)  # folds, unrolls nothing, and still recognises every guard
    again = format_kernel(kernel)
    assert not bounds_check(kernel) and format_kernel(kernel) == again


def test_bounds_casts_signed_and_wide_indices():
    k = Builder("b")
    x, y = k.array("x", f32), k.array("y", f32)
    i = k.cast(k.builtin("UNIT_POS"), i32)
    k.store(y, k.cast(i, i64), k.load(x, k.sub(i, 2)))
    kernel = k.finish()
    bounds_check(kernel)
    casts = {(op.a.type, op.dst.type) for op in ops(kernel, ir.Cast)}
    assert (i32, u32) in casts and (i64, u64) in casts
    assert (u32, u64) in casts  # y's length, widened at the entry
    compares = ops(kernel, ir.Binary)
    assert {c.a.type for c in compares if c.op == "lt"} == {u32, u64}


def test_bounds_constant_indices_into_shared_and_local_arrays():
    k = Builder("b")
    out = k.array("out", i32)
    sm = k.shared(i32, 4)
    lo = k.local(i32, 2)
    k.store(sm, 3, 1)  # in range: no check
    k.store(sm, 4, 2)  # out of range: dropped
    k.store(lo, Const(-1, i32), 3)  # negative: dropped
    k.store(lo, 1, k.load(sm, 3))
    v = k.load(lo, 7)  # out of range: reads 0
    k.store(out, Const(0, u32), k.add(v, k.load(lo, 1)))
    kernel = k.finish()
    bounds_check(kernel)
    verify(kernel)
    assert len(ops(kernel, ir.If)) == 1  # only the param store needs a runtime check
    stores = [op for op in ops(kernel, ir.Store) if op.mem is not out]
    assert [(op.mem, op.index.value) for op in stores] == [(sm, 3), (lo, 1)]
    after = execute(kernel, [zeros(i32)], cube_dim=1)
    assert after[0][0] == 1


def _oob_kernel(t, checked=True) -> ir.Kernel:
    """Reads x[i - 3] and x[i + 5], writes out[2 i], bumps cnt[i]: many out of bounds."""
    k = Builder("oob", checked=checked)
    x, out, cnt = k.array("x", t), k.array("out", t), k.array("cnt", u32)
    i = k.cast(k.builtin("ABSOLUTE_POS"), i32)
    a = k.load(x, k.sub(i, 3))
    b = k.load(x, k.add(i, 5))
    k.store(out, k.binary("mul", i, 2), k.add(a, b))
    old = k.atomic("add", cnt, i, 1)
    k.store(cnt, k.add(i, 16), old)  # the old value (0 where skipped)
    return k.finish()


@pytest.mark.parametrize("t", [f32, i32, Vec(f32, 4), Vec(i32, 2)], ids=str)
def test_checked_kernels_read_zero_and_drop_writes(t):
    n = 8
    lanes = t.lanes
    x = (np.arange(n * lanes) + 1).astype(t.elem.np)
    out = np.full(n * lanes, -1, t.elem.np)
    cnt = np.zeros(20, np.uint32)
    kernel = _oob_kernel(t)
    run_pipeline(kernel)
    _, got, got_cnt = execute(kernel, [x, out, cnt], cube_dim=12)  # 12 units > 8 elements
    xl = x.reshape(n, lanes)
    want = out.reshape(n, lanes).copy()
    for i in range(12):
        if 2 * i < n:
            a = xl[i - 3] if 0 <= i - 3 < n else 0
            b = xl[i + 5] if i + 5 < n else 0
            want[2 * i] = a + b
    np.testing.assert_array_equal(got.reshape(n, lanes), want)
    assert list(got_cnt[:12]) == [1] * 12 and list(got_cnt[16:20]) == [0, 0, 0, 0]
    unchecked = _oob_kernel(t, checked=False)
    run_pipeline(unchecked)
    assert not ops(unchecked, ir.If)
    with pytest.raises(IRError):
        execute(unchecked, [x, out, cnt], cube_dim=12)


def test_checked_tensor_and_negative_i64_index():
    k = Builder("t")
    tt = k.tensor("t", f32, 2)
    out = k.array("out", f32)
    i = k.cast(k.builtin("UNIT_POS"), i64)
    k.store(out, k.builtin("UNIT_POS"), k.load(tt, k.sub(i, 2)))
    kernel = run_pipeline(k.finish())
    flat = np.arange(1, 7, dtype=np.float32)
    _, got = execute(kernel, [(flat, (2, 3), (3, 1)), zeros(f32, 10)], cube_dim=10)
    np.testing.assert_array_equal(got, [0, 0, 1, 2, 3, 4, 5, 6, 0, 0])


# ---- pipeline and clone --------------------------------------------------------------------

def test_pipeline_checked_follows_the_kernel_unless_told():
    for checked, override, guarded in ((True, None, True), (False, None, False),
                                       (False, True, True), (True, False, False)):
        k = Builder("p", checked=checked)
        x = k.array("x", f32)
        k.store(x, k.builtin("ABSOLUTE_POS"), 1.0)
        kernel = run_pipeline(k.finish(), checked=override)
        assert bool(ops(kernel, ir.If)) == guarded


def test_pipeline_unrolls_folds_and_marks_readonly():
    k = Builder("p", checked=False)
    x, out = k.array("x", f32), k.array("out", f32)
    with k.range(0, 4) as i:
        k.store(out, k.cast(i, u32), k.load(x, k.cast(k.binary("mul", i, 2), u32)))
    kernel = run_pipeline(k.finish())
    assert [(op.index.value) for op in ops(kernel, ir.Load)] == [0, 2, 4, 6]
    assert [(op.index.value) for op in ops(kernel, ir.Store)] == [0, 1, 2, 3]
    assert x.readonly and not out.readonly


def test_pipeline_rejects_bad_kernels_before_touching_them():
    k = Builder("bad")
    with k.if_(k.lt(k.builtin("UNIT_POS"), 2)):
        k.sync_cube()
    kernel = k.finish()
    text = format_kernel(kernel)
    with pytest.raises(IRError, match="divergent"):
        run_pipeline(kernel)
    assert format_kernel(kernel) == text


def test_clone_kernel_is_deep_and_consistent():
    kernel = _oob_kernel(Vec(f32, 4))
    kernel.shared.append(ir.SharedArray(0, f32, 4))
    copy = clone_kernel(kernel)
    assert format_kernel(copy) == format_kernel(kernel)
    originals = {id(o) for o in (*kernel.params, *kernel.vars, *kernel.shared, *ops(kernel))}
    cloned = [*copy.params, *copy.vars, *copy.shared, *ops(copy)]
    assert not any(id(o) in originals for o in cloned)
    loads = ops(copy, ir.Load)
    assert all(op.mem in copy.params for op in loads)
    assert {op.dst for op in ops(copy) if ir.writes(op)} <= set(copy.vars)
    run_pipeline(copy)
    assert not ops(kernel, ir.If)  # the original is untouched


# ---- random kernels: every pass together keeps the results ---------------------------------

_GEN_OPS = ["add", "sub", "mul", "div", "rem", "min", "max", "and", "xor", "shl", "shr"]


def _random_value(data, b: Builder, pool: list):
    if data.draw(st.booleans()):
        return data.draw(st.sampled_from(pool))
    return Const(data.draw(st.integers(-20, 20)), i32)


def _random_block(data, b: Builder, pool: list, mem: tuple, muts: list, depth: int,
                  in_loop: bool) -> None:
    """Random statements over i32 values: arithmetic, selects, in-range loads and stores,
    ifs, constant ranges (unrollable or not), while loops, break/continue/return."""
    x, out = mem
    kinds = ["bin", "bin", "assign", "store", "load", "select"]
    if depth < 2:
        kinds += ["if", "range", "while"]
    if in_loop:
        kinds += ["exit"]
    if depth == 0:
        kinds += ["return"]
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(kinds))
        v = lambda: _random_value(data, b, pool)  # noqa: E731
        if kind == "bin":
            pool.append(b.binary(data.draw(st.sampled_from(_GEN_OPS)), v(), v()))
        elif kind == "select":
            c = b.binary(data.draw(st.sampled_from(["lt", "eq", "ge"])), v(), v())
            pool.append(b.select(c, v(), v()))
        elif kind == "assign":
            b.assign(data.draw(st.sampled_from(muts)), v())
        elif kind == "load":  # x has 8 elements, 4 units: in bounds
            pool.append(b.load(x, b.add(b.builtin("UNIT_POS"), data.draw(st.integers(0, 4)))))
        elif kind == "store":
            idx = b.add(b.binary("mul", b.builtin("UNIT_POS"), 8), data.draw(st.integers(0, 7)))
            b.store(out, idx, v())
        elif kind == "if":
            with b.if_(b.binary("lt", v(), v())) as h:
                _random_block(data, b, list(pool), mem, muts, depth + 1, in_loop)
                if data.draw(st.booleans()):
                    with h.else_():
                        _random_block(data, b, list(pool), mem, muts, depth + 1, in_loop)
        elif kind == "range":
            lo, hi = data.draw(st.integers(-2, 3)), data.draw(st.integers(-2, 6))
            with b.range(lo, hi, data.draw(st.sampled_from([1, 2, -1]))) as i:
                _random_block(data, b, [*pool, i], mem, muts, depth + 1, True)
        elif kind == "while":
            n = b.var(i32, "n")
            b.assign(n, 0)
            with b.loop():
                with b.if_(b.binary("ge", n, data.draw(st.integers(0, 4)))):
                    b.break_()
                b.assign(n, b.add(n, 1))  # before the body: a `continue` cannot skip it
                _random_block(data, b, [*pool, n], mem, muts, depth + 1, True)
        elif kind == "exit" or kind == "return":
            op = ir.Return() if kind == "return" else data.draw(
                st.sampled_from([ir.Break(), ir.Continue()]))
            if data.draw(st.booleans()):
                with b.if_(b.binary("lt", v(), v())):
                    b.emit(op)
            else:
                b.emit(op)  # unconditional: what follows in this block is dead


@settings(max_examples=max(80, N_EXAMPLES // 2), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), checked=st.booleans())
def test_random_kernels_keep_their_results(data, checked):
    pytest.importorskip("cube_ir.interpreter")
    b = Builder("rand", checked=checked)
    x, out = b.array("x", i32), b.array("out", i32)
    t = b.builtin("UNIT_POS")
    xv = b.load(x, t)
    muts = [b.var(i32, "m0"), b.var(i32, "m1")]
    for m in muts:
        b.assign(m, xv)
    _random_block(data, b, [xv, *muts, b.cast(t, i32)], (x, out), muts, 0, False)
    for n, m in enumerate(muts):
        b.store(out, b.add(b.binary("mul", t, 2), 32 + n), m)
    kernel = b.finish()
    verify(kernel)
    xs = np.array([5, -7, 13, 2**31 - 1, 0, 1, -1, 99], np.int32)
    unchanged_by(run_pipeline, kernel, [xs, zeros(i32, 40)], cube_dim=4)

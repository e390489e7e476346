"""The verifier: operand types, scopes, and barriers only under uniform control flow."""
from __future__ import annotations

import pytest

from cube_ir import ir
from cube_ir.builder import Builder
from cube_ir.errors import IRError
from cube_ir.ir import Const
from cube_ir.types import Vec, boolean, f32, i32, i64, u32
from cube_ir.verify import uniform_vars, verify


def at(b: Builder, line: int, src: str = "") -> tuple:
    b.loc = ("k.py", line, 4, src)
    return b.loc


def raises(kernel, *texts: str, loc=None) -> IRError:
    with pytest.raises(IRError) as info:
        verify(kernel)
    e = info.value
    for t in texts:
        assert t in e.message, e.message
    if loc is not None:
        assert e.loc == loc, (e.loc, e.message)
    return e


def axpy() -> ir.Kernel:
    b = Builder("axpy")
    x, y, a = b.array("x", f32), b.array("y", f32), b.scalar("a", f32)
    av = b.scalar_param_value(a)
    i = b.builtin("ABSOLUTE_POS")
    with b.if_(b.lt(i, b.len(y))):
        b.store(y, i, b.fma(av, b.load(x, i), b.load(y, i)))
    return b.finish()


def tree_reduce(cond_builtin: str = "UNIT_POS") -> ir.Kernel:
    """The shared-memory reduction every GPU tutorial has: barriers in a uniform loop."""
    b = Builder("reduce")
    x, out = b.array("x", f32), b.array("out", f32)
    sm = b.shared(f32, 64)
    t = b.builtin("UNIT_POS")
    b.store(sm, t, b.load(x, b.builtin("ABSOLUTE_POS")))
    b.sync_cube()
    s = b.var(u32, "s")
    b.assign(s, b.binary("div", b.builtin("CUBE_DIM"), 2))
    with b.loop():
        with b.if_(b.unary("not", b.binary("gt", s, 0))):
            b.break_()
        with b.if_(b.lt(t, s)):
            b.store(sm, t, b.add(b.load(sm, t), b.load(sm, b.add(t, s))))
        at(b, 20, "cb.sync_cube()")
        b.sync_cube()
        b.assign(s, b.binary("div", s, 2))
    with b.if_(b.binary("eq", b.builtin(cond_builtin), 0)):
        b.store(out, b.builtin("CUBE_POS"), b.load(sm, 0))
    return b.finish()


def test_good_kernels_pass():
    verify(axpy())
    verify(tree_reduce())


# ---- types ---------------------------------------------------------------------------------

def _ill_typed(make) -> tuple[ir.Kernel, tuple]:
    b = Builder("bad")
    x = b.array("x", f32)
    n = b.array("n", i32)
    xv, nv = b.load(x, 0), b.load(n, 0)
    loc = at(b, 7, "the bad line")
    b.emit(make(b, x, n, xv, nv))
    return b.finish(), loc


BAD_OPS = {
    "mixed binary": (lambda b, x, n, xv, nv: ir.Binary(b.var(f32), "add", xv, nv),
                     "share one type"),
    "compare result": (lambda b, x, n, xv, nv: ir.Binary(b.var(f32), "lt", xv, xv),
                       "should be bool"),
    "arith result": (lambda b, x, n, xv, nv: ir.Binary(b.var(i32), "add", xv, xv),
                     "should be f32"),
    "select cond": (lambda b, x, n, xv, nv: ir.Select(b.var(f32), nv, xv, xv), "condition"),
    "store value": (lambda b, x, n, xv, nv: ir.Store(x, Const(0, u32), nv), "stores a i32"),
    "load dst": (lambda b, x, n, xv, nv: ir.Load(b.var(i32), x, Const(0, u32)), "loads f32"),
    "float index": (lambda b, x, n, xv, nv: ir.Load(b.var(f32), x, xv), "index"),
    "if cond": (lambda b, x, n, xv, nv: ir.If(nv), "scalar bool"),
    "range bounds": (lambda b, x, n, xv, nv: ir.Range(b.var(i32), xv, nv, 1), "integers"),
    "range step": (lambda b, x, n, xv, nv: ir.Range(b.var(i32), nv, nv, 0), "nonzero"),
    "extract lane": (lambda b, x, n, xv, nv: ir.Extract(b.var(f32), Const(1.0, Vec(f32, 4)), 4),
                     "lane 4"),
    "insert lane": (lambda b, x, n, xv, nv: ir.Insert(b.var(Vec(f32, 2)),
                                                      Const(1.0, Vec(f32, 2)), 2, xv), "lane 2"),
    "sqrt of int": (lambda b, x, n, xv, nv: ir.Unary(b.var(i32), "sqrt", nv), "float"),
    "shift of float": (lambda b, x, n, xv, nv: ir.Binary(b.var(f32), "shl", xv, xv),
                       "integers"),
    "xor of float": (lambda b, x, n, xv, nv: ir.Binary(b.var(f32), "xor", xv, xv), "bitwise"),
    "bool arithmetic": (lambda b, x, n, xv, nv: ir.Binary(b.var(boolean), "add",
                                                          Const(True, boolean),
                                                          Const(False, boolean)), "bool"),
    "atomic and on float": (lambda b, x, n, xv, nv: ir.Atomic(b.var(f32), "and", x,
                                                              Const(0, u32), xv), "integers"),
    "cas without cmp": (lambda b, x, n, xv, nv: ir.Atomic(b.var(i32), "cas", n, Const(0, u32),
                                                          nv), "compare value"),
    "plane all of float": (lambda b, x, n, xv, nv: ir.Plane(b.var(f32), "all", xv), "bool"),
    "plane broadcast lane": (lambda b, x, n, xv, nv: ir.Plane(b.var(f32), "broadcast", xv),
                             "lane"),
    "shape of array": (lambda b, x, n, xv, nv: ir.Meta(b.var(u32), "shape", x, Const(0, u32)),
                       "tensor"),
    "builtin type": (lambda b, x, n, xv, nv: ir.Builtin(b.var(i32), "UNIT_POS"), "u32"),
    "assign type": (lambda b, x, n, xv, nv: ir.Assign(b.var(i32), xv), "assigns a f32"),
    "const range": (lambda b, x, n, xv, nv: ir.Assign(b.var(u32), Const(-1, u32)),
                    "does not fit"),
    "cast lanes": (lambda b, x, n, xv, nv: ir.Cast(b.var(f32), Const(1.0, Vec(f32, 4))),
                   "line sizes"),
    "undeclared memory": (lambda b, x, n, xv, nv: ir.Load(b.var(f32), ir.SharedArray(9, f32, 4),
                                                          Const(0, u32)), "not declared"),
}


@pytest.mark.parametrize("case", sorted(BAD_OPS))
def test_type_errors_point_at_the_op(case):
    make, text = BAD_OPS[case]
    kernel, loc = _ill_typed(make)
    raises(kernel, text, loc=loc)


def test_store_to_scalar_param_and_atomic_on_bool_or_line():
    for mem_t, extra in ((f32, None), (boolean, "atomic"), (Vec(i32, 4), "atomic")):
        b = Builder("k")
        if extra is None:
            p = b.scalar("p", mem_t)
            loc = at(b, 3)
            b.emit(ir.Store(p, Const(0, u32), Const(1.0, f32)))
            raises(b.finish(), "read-only", loc=loc)
        else:
            p = b.array("p", mem_t)
            loc = at(b, 3)
            b.emit(ir.Atomic(None, "add", p, Const(0, u32), b.const(1, mem_t)))
            raises(b.finish(), "scalar int or float", loc=loc)


def test_bool_bitwise_and_line_select_are_fine():
    b = Builder("k")
    out = b.array("out", Vec(f32, 4))
    c = b.binary("and", b.lt(b.builtin("UNIT_POS"), 3), True)
    line = b.load(out, 0)
    mask = b.binary("gt", line, 0.5)
    b.store(out, 0, b.select(mask, line, b.select(c, line, 0.0)))
    verify(b.finish())


# ---- scopes --------------------------------------------------------------------------------

def test_break_and_continue_need_a_loop():
    for op in (ir.Break, ir.Continue):
        b = Builder("k")
        with b.if_(True):
            loc = at(b, 5, "break")
            b.emit(op())
        raises(b.finish(), "outside a loop", loc=loc)
    b = Builder("k")
    with b.range(0, 4):
        with b.if_(True):
            b.break_()
    verify(b.finish())


def test_read_of_a_var_never_assigned():
    b = Builder("k")
    out = b.array("out", f32)
    ghost = b.var(f32, "ghost")
    loc = at(b, 9, "out[0] = ghost")
    b.store(out, 0, ghost)
    e = raises(b.finish(), "uses a value never assigned", loc=loc)
    assert "ghost" in e.message


def test_range_var_is_written_only_by_its_range():
    b = Builder("k")
    with b.range(0, 4) as i:
        loc = at(b, 2)
        b.assign(i, 3)
    raises(b.finish(), "written only by", loc=loc)


# ---- barriers ------------------------------------------------------------------------------

def test_sync_under_unit_pos_condition():
    b = Builder("k")
    cond_loc = at(b, 3, "if UNIT_POS < 16:")
    with b.if_(b.lt(b.builtin("UNIT_POS"), 16)):
        sync_loc = at(b, 4, "cb.sync_cube()")
        b.sync_cube()
    e = raises(b.finish(), "sync_cube in divergent control flow", "k.py:3",
               "if UNIT_POS < 16:", "UNIT_POS", "same barriers", loc=sync_loc)
    assert cond_loc[1] == 3 and "k.py:4" not in e.message


def test_sync_deep_inside_a_divergent_if_names_that_condition():
    b = Builder("k")
    x = b.array("x", f32)
    i = b.add(b.builtin("ABSOLUTE_POS"), 1)
    j = b.binary("mul", i, 2)  # derived values stay divergent
    with b.if_(b.lt(b.builtin("CUBE_POS"), 4)):  # uniform
        at(b, 11, "if j > 3:")
        with b.if_(b.binary("gt", j, 3)):
            at(b, 12)
            with b.range(0, 4):
                with b.loop():
                    sync_loc = at(b, 14, "cb.sync_cube()")
                    b.sync_cube()
                    b.break_()
    b.store(x, 0, 1.0)
    raises(b.finish(), "k.py:11", "if j > 3:", "ABSOLUTE_POS", loc=sync_loc)


def test_sync_in_loop_left_early_by_some_units():
    b = Builder("k")
    t = b.builtin("UNIT_POS")
    at(b, 30, "while True:")
    with b.loop():
        at(b, 31, "if t > 5:")
        with b.if_(b.binary("gt", t, 5)):
            at(b, 32, "break")
            b.break_()
        sync_loc = at(b, 33, "cb.sync_cube()")
        b.sync_cube()
        b.break_()
    e = raises(b.finish(), "k.py:31", "UNIT_POS", "k.py:30", "break at k.py:32", loc=sync_loc)
    assert "leave the loop" in e.message


def test_sync_in_loop_with_divergent_continue():
    b = Builder("k")
    with b.range(0, 8) as i:
        at(b, 2, "if UNIT_POS == i:")
        with b.if_(b.binary("eq", b.builtin("UNIT_POS"), b.cast(i, u32))):
            b.continue_()
        sync_loc = at(b, 3)
        b.sync_cube()
    raises(b.finish(), "k.py:2", loc=sync_loc)


def test_sync_in_range_with_divergent_bounds():
    b = Builder("k")
    at(b, 40, "for j in range(UNIT_POS, 64, 32):")
    with b.range(b.builtin("UNIT_POS"), 64, 32):
        sync_loc = at(b, 41)
        b.sync_cube()
    raises(b.finish(), "bounds of the range at k.py:40", "UNIT_POS", loc=sync_loc)


def test_sync_in_uniform_range_is_fine():
    b = Builder("k")
    n = b.scalar_param_value(b.scalar("n", u32))
    with b.range(b.builtin("CUBE_POS"), n, 1):
        b.sync_cube()
    verify(b.finish())


@pytest.mark.parametrize("source", ["atomic", "plane_scan", "global_load", "local", "plane_div"])
def test_divergent_sources(source):
    b = Builder("k", plane_size=4)
    x = b.array("x", u32)
    if source == "atomic":
        v = b.atomic("add", x, 0, 1)
    elif source == "plane_scan":
        v = b.plane("inclusive_sum", b.builtin("CUBE_POS"))
    elif source == "global_load":
        v = b.load(x, b.builtin("UNIT_POS_X"))
    elif source == "plane_div":
        v = b.plane("sum", b.builtin("UNIT_POS_PLANE"))
    else:
        loc_arr = b.local(u32, 4)
        b.store(loc_arr, 0, b.builtin("ABSOLUTE_POS_Y"))
        v = b.load(loc_arr, 0)  # a uniform index, but per-unit contents
    with b.if_(b.binary("eq", v, 1)):
        sync_loc = at(b, 50)
        b.sync_cube()
    raises(b.finish(), "divergent control flow", loc=sync_loc)


@pytest.mark.parametrize("source", ["plane_sum", "global_load", "shared_load", "local", "meta"])
def test_uniform_sources(source):
    b = Builder("k", plane_size=4)
    x = b.array("x", u32)
    sm = b.shared(u32, 8)
    if source == "plane_sum":
        v = b.plane("sum", b.builtin("CUBE_DIM"))
    elif source == "global_load":
        v = b.load(x, b.builtin("CUBE_POS"))
    elif source == "shared_load":
        v = b.load(sm, b.add(b.builtin("PLANE_DIM"), 1))
    elif source == "meta":
        v = b.len(x)
    else:
        loc_arr = b.local(u32, 4)
        b.store(loc_arr, 1, b.builtin("CUBE_COUNT"))
        v = b.load(loc_arr, 1)
    with b.if_(b.binary("eq", v, 1)):
        b.sync_cube()
    verify(b.finish())
    assert v in uniform_vars(b.kernel)


def test_control_dependence_makes_vars_divergent():
    b = Builder("k")
    flag = b.var(boolean, "flag")
    b.assign(flag, False)
    with b.if_(b.lt(b.builtin("UNIT_POS"), 3)):
        b.assign(flag, True)  # a constant, but only some units write it
    at(b, 61, "if flag:")
    with b.if_(flag):
        sync_loc = at(b, 62)
        b.sync_cube()
    raises(b.finish(), "k.py:61", "UNIT_POS", loc=sync_loc)


def test_loop_carried_divergence_needs_the_fixpoint():
    b = Builder("k")
    x = b.var(u32, "x")
    y = b.var(u32, "y")
    b.assign(x, 0)
    b.assign(y, 0)
    with b.range(0, 4):
        at(b, 70, "if y > 2:")
        with b.if_(b.binary("gt", y, 2)):  # y only becomes divergent two statements later
            sync_loc = at(b, 71)
            b.sync_cube()
        b.assign(y, b.add(x, 1))
        b.assign(x, b.add(b.builtin("UNIT_POS"), 1))
    raises(b.finish(), "k.py:70", "UNIT_POS", loc=sync_loc)


def test_divergent_return_before_a_barrier():
    b = Builder("k")
    at(b, 80, "if UNIT_POS > 3:")
    with b.if_(b.binary("gt", b.builtin("UNIT_POS"), 3)):
        ret_loc = at(b, 81, "return")
        b.return_()
    at(b, 82)
    b.sync_cube()
    raises(b.finish(), "returning early would skip barriers", "k.py:80", "if/else",
           loc=ret_loc)


def test_divergent_return_in_a_loop_with_a_barrier():
    b = Builder("k")
    with b.range(0, 3):
        with b.if_(b.binary("gt", b.builtin("ABSOLUTE_POS"), 3)):
            ret_loc = at(b, 90)
            b.return_()
        b.sync_cube()  # the next iteration's barrier is skipped too
    raises(b.finish(), "returning early", loc=ret_loc)


def test_returns_that_skip_no_barrier_are_fine():
    b = Builder("k")
    b.sync_cube()
    with b.if_(b.binary("gt", b.builtin("UNIT_POS"), 3)):  # nothing after it syncs
        b.return_()
    verify(b.finish())
    b = Builder("k")
    with b.if_(b.binary("gt", b.builtin("CUBE_POS"), 3)):  # uniform: every unit returns
        b.return_()
    b.sync_cube()
    verify(b.finish())
    b = Builder("k")  # no barrier at all: early returns are the usual guard
    with b.if_(b.binary("gt", b.builtin("ABSOLUTE_POS"), 3)):
        b.return_()
    verify(b.finish())


def test_uniform_vars():
    k = tree_reduce()
    u = uniform_vars(k)
    names = {v.name for v in u if v.name}
    assert "s" in names and "cube_dim" in names
    # CUBE_POS is read under `if UNIT_POS == 0`: only some units write that var
    assert not names & {"unit_pos", "absolute_pos", "cube_pos"}
    b = Builder("k")
    i = b.builtin("ABSOLUTE_POS")
    j = b.add(b.builtin("CUBE_POS"), 1)
    with b.range(0, j) as r:
        pass
    with b.range(0, i) as q:
        pass
    u = uniform_vars(b.finish())
    assert j in u and r in u and i not in u and q not in u


def test_i64_range_and_mixed_sign_comparisons_via_builder():
    b = Builder("k")
    out = b.array("out", i64)
    with b.range(b.const(0, i64), b.const(5, i64)) as i:
        b.store(out, b.cast(i, u32), i)
    verify(b.finish())

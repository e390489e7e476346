"""The target lowering passes (cube_ir.passes.lowering), each run on its own: the interpreter
runs the kernel before the pass and after it, and every result must be the same; what a
target is promised not to see is checked structurally."""
from __future__ import annotations

import typing

import numpy as np
import pytest

import cube as cb
from cube import Array, Comptime, Line, Tensor, bf16, f16, f32, i32, i64, u32
from cube_ir import interpreter, ir
from cube_ir.passes import clone_kernel, legalise
from cube_ir.passes.builtins import PRIMITIVE, lower_builtins
from cube_ir.passes.cas_loops import lower_rmw_atomics
from cube_ir.passes.legalise import EXACT, promote_halves
from cube_ir.passes.lowering import PASSES, PER_AXIS, Lowering, lower
from cube_ir.passes.meta import lower_meta
from cube_ir.passes.planes import fold_unit_planes
from cube_ir.verify import verify

ALL = frozenset(ir.BUILTINS)
NATIVE_SETS = {
    "per-axis": PER_AXIS,
    "shader": PER_AXIS | {"UNIT_POS", "ABSOLUTE_POS_X", "ABSOLUTE_POS_Y", "ABSOLUTE_POS_Z"},
    "cpu": ALL - {"PLANE_DIM", "UNIT_POS_PLANE"},
}
DERIVED = sorted(ALL - PER_AXIS)


@cb.cube(launch=True)
def every_builtin(out: Array[u32]):
    # each unit writes every builtin into its row (rows by ABSOLUTE_POS)
    row = cb.ABSOLUTE_POS * 22
    out[row + 0] = cb.UNIT_POS
    out[row + 1] = cb.UNIT_POS_X
    out[row + 2] = cb.UNIT_POS_Y
    out[row + 3] = cb.UNIT_POS_Z
    out[row + 4] = cb.CUBE_POS
    out[row + 5] = cb.CUBE_POS_X
    out[row + 6] = cb.CUBE_POS_Y
    out[row + 7] = cb.CUBE_POS_Z
    out[row + 8] = cb.CUBE_DIM
    out[row + 9] = cb.CUBE_DIM_X
    out[row + 10] = cb.CUBE_DIM_Y
    out[row + 11] = cb.CUBE_DIM_Z
    out[row + 12] = cb.CUBE_COUNT
    out[row + 13] = cb.CUBE_COUNT_X
    out[row + 14] = cb.CUBE_COUNT_Y
    out[row + 15] = cb.CUBE_COUNT_Z
    out[row + 16] = cb.ABSOLUTE_POS
    out[row + 17] = cb.ABSOLUTE_POS_X
    out[row + 18] = cb.ABSOLUTE_POS_Y
    out[row + 19] = cb.ABSOLUTE_POS_Z
    out[row + 20] = cb.PLANE_DIM
    out[row + 21] = cb.UNIT_POS_PLANE


@cb.cube(launch=True)
def every_meta(t: Tensor[f32], a: Array[Line[f32, 4]], out: Array[u32], d: u32):
    sh = cb.SharedMemory(f32, 24)
    loc = cb.LocalArray(u32, 5)
    loc[0] = u32(0)
    if cb.UNIT_POS == 0:
        sh[0] = f32(0)
        out[0] = t.shape(0)
        out[1] = t.shape(1)
        out[2] = t.stride(0)
        out[3] = t.stride(1)
        out[4] = t.shape(d)  # d runtime: selects
        out[5] = t.stride(d)
        out[6] = t.shape(d + 7)  # out of the rank: 0
        out[7] = u32(len(t))
        out[8] = u32(len(a))
        out[9] = t.shape(d - u32(1))  # wraps to 2**32 - 1: outside the rank, 0
        out[10] = t.stride(i32(d) - 1)  # -1 (the last, as in Python), 0, 1
        out[11] = t.shape(i64(d) + 4294967296)  # outside (no wrap to 32 bits)
        out[12] = u32(len(sh))
        out[13] = u32(len(loc)) + loc[0]
        out[14] = u32(t.rank())
        out[15] = d


@cb.cube(launch=True)
def every_plane(x: Array[f32], out: Array[f32], flags: Array[u32], n: Comptime[int]):
    i = cb.ABSOLUTE_POS
    v = x[i]
    out[i * n + 0] = cb.plane_sum(v)
    out[i * n + 1] = cb.plane_prod(v)
    out[i * n + 2] = cb.plane_max(v)
    out[i * n + 3] = cb.plane_min(v)
    out[i * n + 4] = cb.plane_inclusive_sum(v)
    out[i * n + 5] = cb.plane_exclusive_sum(v)
    out[i * n + 6] = cb.plane_inclusive_prod(v)
    out[i * n + 7] = cb.plane_exclusive_prod(v)
    out[i * n + 8] = cb.plane_broadcast(v, 0)
    out[i * n + 9] = cb.plane_shuffle(v, 1)
    out[i * n + 10] = cb.plane_shuffle_xor(v, 1)
    flags[i * 2] = u32(cb.plane_all(v > 0.5))
    flags[i * 2 + 1] = u32(cb.plane_any(v > 0.5))


def _run(kernel, args, cc, cd, ps=None):
    args = [a.copy() if isinstance(a, np.ndarray) else
            (a[0].copy(), *a[1:]) if isinstance(a, tuple) else a for a in args]
    interpreter.run(kernel, cc, cd, args, ps)
    return [a[0] if isinstance(a, tuple) else a for a in args if not np.isscalar(a)]


def _same(before, after):
    for b, a in zip(before, after, strict=True):
        np.testing.assert_array_equal(a, b)


def _builtins_case(cube_dim=None):
    k = every_builtin.ir(plane_size=4)
    if cube_dim is not None:
        k.cube_dim = cube_dim
    return k


CC, CD = (2, 3, 2), (2, 2, 3)


@pytest.mark.parametrize("native", sorted(NATIVE_SETS))
@pytest.mark.parametrize("specialised", [False, True], ids=["dyn-dim", "comptime-dim"])
def test_builtins_pass_keeps_every_value(native, specialised):
    k = _builtins_case(CD if specialised else None)
    units = np.prod(CC) * np.prod(CD)
    args = [np.zeros(units * 22, np.uint32)]
    before = _run(k, args, CC, CD)
    # an independent check of a few formulas, in plain Python
    rows = before[0].reshape(units, 22)
    r = rows[rows[:, 16].argsort()]
    assert (r[:, 16] == np.arange(units)).all()
    assert (r[:, 16] == r[:, 4] * r[:, 8] + r[:, 0]).all()
    assert (r[:, 21] == r[:, 0] % 4).all() and (r[:, 20] == 4).all()
    lowered = clone_kernel(k)
    assert lower_builtins(lowered, NATIVE_SETS[native])
    verify(lowered)
    left = {op.name for op in ir.walk(lowered.body) if isinstance(op, ir.Builtin)}
    assert left <= NATIVE_SETS[native]
    if specialised:
        assert not any(n.startswith("CUBE_DIM") for n in left - NATIVE_SETS["cpu"])
    _same(before, _run(lowered, args, CC, CD))


def test_builtins_pass_refuses_a_target_without_the_per_axis_positions():
    k = _builtins_case()
    with pytest.raises(ValueError, match="natively"):
        lower_builtins(k, frozenset({"UNIT_POS", "CUBE_POS"}))
    assert PRIMITIVE <= PER_AXIS


def test_meta_pass_keeps_every_value():
    k = every_meta.ir(ranks={"t": 2})
    data = np.arange(20, dtype=np.float32)
    tensor = (data, (4, 5), (1, 4))  # a transposed view
    a = np.zeros(12, np.float32)
    for d in (0, 1, 2):
        args = [tensor, a, np.zeros(16, np.uint32), d]
        before = _run(k, args, 1, 4)
        out = before[2]
        expect = [4, 5, 1, 4, (4, 5, 0)[d], (1, 4, 0)[d], 0, 20, 3, (0, 4, 5)[d],
                  (4, 1, 4)[d], 0, 24, 5, 2, d]
        np.testing.assert_array_equal(out, expect)
        lowered = clone_kernel(k)
        assert lower_meta(lowered)
        verify(lowered)
        for op in ir.walk(lowered.body):
            if isinstance(op, ir.Meta):
                assert op.what == "len" or (isinstance(op.dim, ir.Const)
                                            and op.dim.value < op.mem.rank)
        _same(before, _run(lowered, args, 1, 4))


@pytest.mark.parametrize("ps", [1, 4])
def test_plane_pass_folds_plane_size_one_only(ps):
    k = every_plane.ir(plane_size=ps, n=11)
    rng = np.random.default_rng(ps)
    x = rng.random(16, dtype=np.float32) + 0.25
    args = [x, np.zeros(16 * 11, np.float32), np.zeros(32, np.uint32)]
    before = _run(k, args, 2, 8, ps)
    lowered = clone_kernel(k)
    assert fold_unit_planes(lowered) == (ps == 1)
    verify(lowered)
    planes = [op for op in ir.walk(lowered.body) if isinstance(op, ir.Plane)]
    assert (not planes) if ps == 1 else len(planes) == 13
    if ps == 1:  # plain Python: each plane is its unit alone
        out = before[1].reshape(16, 11)
        own = np.repeat(x[:, None], 11, axis=1)
        own[:, 5], own[:, 7] = 0, 1
        np.testing.assert_array_equal(out, own)
    _same(before, _run(lowered, args, 2, 8, ps))


@pytest.mark.parametrize("kernel,kwargs,args", [
    (every_builtin, {}, lambda: [np.zeros(np.prod(CC) * np.prod(CD) * 22, np.uint32)]),
    (every_plane, {"n": 11}, lambda: [np.linspace(0.1, 1, 16 * 6, dtype=np.float32),
                                      np.zeros(16 * 6 * 11, np.float32),
                                      np.zeros(16 * 6 * 2, np.uint32)]),
])
def test_the_pipeline_pass_by_pass(kernel, kwargs, args):
    """Each pass in PASSES order, the interpreter after each: the same results throughout."""
    k = kernel.ir(**kwargs)
    a = args()
    expect = _run(k, a, CC, CD)
    low = Lowering(PER_AXIS)
    step = clone_kernel(k)
    for name, run in PASSES:
        run(step, low)
        verify(step)
        _same(expect, _run(step, a, CC, CD)), name
    _same(expect, _run(lower(k, low), a, CC, CD))


# ---- half precision in f32 (passes.legalise) -------------------------------------------------

F = typing.TypeVar("F")


@cb.cube(launch=True)
def half_ops(x: Array[Line[F, 4]], y: Array[Line[F, 4]], out: Array[Line[F, 4]],
             n: Comptime[int]):
    i = cb.ABSOLUTE_POS
    a = x[i]
    b = y[i]
    o = i * n
    out[o + 0] = a + b
    out[o + 1] = a * b - b
    out[o + 2] = a / b
    out[o + 3] = cb.sqrt(cb.abs(a))
    out[o + 4] = cb.exp(a)
    out[o + 5] = cb.tanh(a)
    out[o + 6] = cb.fma(a, b, a)
    out[o + 7] = cb.max(a, b)
    out[o + 8] = -a
    out[o + 9] = cb.plane_sum(a)
    out[o + 10] = cb.sin(a) + cb.log(cb.abs(b) + 1.0)
    out[o + 11] = a % b


HALF_SETS = {"all": legalise.ALL, "transcendentals": frozenset({"exp", "tanh", "sin", "log"})}


@pytest.mark.parametrize("half", [f16, bf16], ids=str)
@pytest.mark.parametrize("which", sorted(HALF_SETS))
@pytest.mark.parametrize("ps", [1, 4])
def test_half_promotion_keeps_every_value(half, which, ps):
    k = half_ops.ir(F=half, n=12, plane_size=ps)
    rng = np.random.default_rng(7)
    store = np.uint16 if half == bf16 else np.float16

    def make(lo, hi):
        v = rng.uniform(lo, hi, 16 * 4).astype(np.float32)
        if half == bf16:
            return interpreter.f32_to_bf16_bits(v)
        return v.astype(np.float16)

    args = [make(-3, 3), make(0.5, 2), np.zeros(16 * 4 * 12, store)]
    before = _run(k, args, 2, 8, ps)
    lowered = clone_kernel(k)
    assert promote_halves(lowered, {half.name: HALF_SETS[which]})
    verify(lowered)
    for op in ir.walk(lowered.body):
        if isinstance(op, (ir.Unary, ir.Binary, ir.Ternary)) and op.dst.type.elem == half:
            assert op.op in EXACT or (which != "all" and op.op not in HALF_SETS[which]), op
    _same(before, _run(lowered, args, 2, 8, ps))


# ---- compare-and-swap loops (passes.cas_loops) -------------------------------------------------

@cb.cube(launch=True)
def rmw_atomics(x: Array[f32], acc: Array[f32], old: Array[f32], ints: Array[i32]):
    i = cb.ABSOLUTE_POS
    sh = cb.SharedMemory(f32, 4)
    if cb.UNIT_POS == 0:
        for k in range(4):
            sh[k] = f32(0)
    cb.sync_cube()
    v = x[i]
    old[i * 8 + 0] = cb.atomic_add(acc, 0, v)
    old[i * 8 + 1] = cb.atomic_min(acc, 1, v)
    old[i * 8 + 2] = cb.atomic_max(acc, 2, v)
    old[i * 8 + 3] = cb.atomic_exchange(acc, 3, v)
    old[i * 8 + 4] = cb.atomic_sub(sh, 0, v)
    old[i * 8 + 5] = cb.atomic_max(sh, 1, v)
    old[i * 8 + 6] = f32(cb.atomic_xor(ints, 0, i32(i)))
    cb.atomic_add(acc, 4, v)  # result unused
    cb.sync_cube()
    if cb.UNIT_POS == 0:
        acc[5 + cb.CUBE_POS * 2] = sh[0]
        acc[6 + cb.CUBE_POS * 2] = sh[1]


def test_cas_loops_keep_every_value():
    k = rmw_atomics.ir()
    x = np.random.default_rng(3).integers(-50, 50, 64).astype(np.float32)  # exact sums
    acc = np.array([0, 1e9, -1e9, 0, 0, 0, 0, 0, 0], np.float32)
    args = [x, acc, np.zeros(64 * 8, np.float32), np.zeros(1, np.int32)]
    before = _run(k, args, 2, 32)
    # plain Python: the order-free results
    a = before[1]
    assert a[0] == x.sum() and a[1] == x.min() and a[2] == x.max() and a[4] == x.sum()
    assert a[5] == -x[:32].sum() and a[8] == max(0, x[32:].max())  # shared starts at 0
    native_ints = lambda op, e, space: e == "i32"  # noqa: E731
    lowered = clone_kernel(k)
    assert lower_rmw_atomics(lowered, native_ints)
    verify(lowered)
    for op in ir.walk(lowered.body):
        if isinstance(op, ir.Atomic):
            assert op.op == "cas" or op.mem.type.elem == i32, op
    _same(before, _run(lowered, args, 2, 32))
    _same(before, _run(lower(k, Lowering(PER_AXIS, atomics=native_ints)), args, 2, 32))
    assert not lower_rmw_atomics(clone_kernel(k), None)  # a target with all of them


def test_bitcast_is_checked_and_keeps_bits():
    from cube_ir.builder import Builder
    from cube_ir.errors import IRError
    from cube_ir.types import f16, f64, u16, u64, vec
    for src, dst, ok in [(f32, u32, True), (f64, u64, True), (u32, f32, True),
                         (vec(f32, 4), vec(u32, 4), True), (f16, u16, False),
                         (f32, u64, False), (vec(f32, 4), u32, False)]:
        b = Builder("bc")
        x = b.scalar("x", src.elem) if src.lanes == 1 else None
        v = b.var(src, "v")
        b.assign(v, b.cast(b.scalar_param_value(x), src) if x is not None else
                 ir.Const(1.5 if src.elem.is_float else 3, src))
        d = b.var(dst, "d")
        b.emit(ir.Bitcast(d, v))
        o = b.array("o", dst)
        b.store(o, ir.Const(0, u32), d)
        if not ok:
            with pytest.raises(IRError, match="bitcast"):
                verify(b.finish())
            continue
        k = b.finish()
        verify(k)
        args = ([np.float32(-0.0) if src.elem == f32 else src.elem.np.type(3)]
                if x is not None else [])
        out = np.zeros(dst.lanes, dst.elem.np)
        interpreter.run(k, 1, 1, [*args, out] if x is not None else [out])
        want = (np.asarray([-0.0 if src.elem == f32 else 3] * src.lanes, src.elem.np)
                if x is not None else np.full(src.lanes, 1.5, src.elem.np))
        np.testing.assert_array_equal(out, want.view(dst.elem.np))


# ---- narrow ints in 32 bits (passes.legalise) ------------------------------------------------

@cb.cube(launch=True)
def narrow_ops(x: Array[Line[F, 2]], y: Array[Line[F, 2]], s: Array[Line[F, 2]],
               out: Array[Line[F, 2]], n: Comptime[int]):
    i = cb.ABSOLUTE_POS
    a = x[i]
    b = y[i]
    o = i * n
    out[o + 0] = a + b
    out[o + 1] = a - b * b
    out[o + 2] = a // b
    out[o + 3] = a % b
    out[o + 4] = a << s[i]
    out[o + 5] = a >> s[i]
    out[o + 6] = -a
    out[o + 7] = ~a
    out[o + 8] = cb.abs(a)
    out[o + 9] = cb.plane_sum(a)
    out[o + 10] = cb.plane_inclusive_sum(b)
    out[o + 11] = a * b * a


@pytest.mark.parametrize("t", [cb.i8, cb.i16, cb.u8, cb.u16], ids=str)
@pytest.mark.parametrize("ps", [1, 4])
def test_narrow_int_promotion_keeps_every_value(t, ps):
    from cube_ir.passes.legalise import LEAVE_RANGE, promote_narrow_ints
    k = narrow_ops.ir(F=t, n=12, plane_size=ps)
    info = np.iinfo(t.np)
    rng = np.random.default_rng(11)
    x = rng.integers(info.min, info.max, 32, endpoint=True).astype(t.np)
    x[:4] = [info.min, info.max, info.min, 0]
    y = rng.integers(info.min, info.max, 32, endpoint=True).astype(t.np)
    y[y == 0] = 1
    if info.min < 0:
        y[:2] = -1  # MIN // -1 wraps
    s = rng.integers(0, 40, 32).astype(t.np)  # counts past the width: modulo it
    args = [x, y, s, np.zeros(32 * 12, t.np)]
    before = _run(k, args, 2, 8, ps)
    lowered = clone_kernel(k)
    assert promote_narrow_ints(lowered, frozenset({t.name}))
    verify(lowered)
    for op in ir.walk(lowered.body):
        if isinstance(op, (ir.Unary, ir.Binary)) and op.dst.type.elem == t:
            assert op.op not in LEAVE_RANGE, op
    _same(before, _run(lowered, args, 2, 8, ps))


# ---- packed storage (passes.packing) ------------------------------------------------------------

@cb.cube(launch=True)
def packed_io(a: Array[cb.i8], b: Array[Line[cb.u16, 2]], flags: Array[cb.bool_],
              h: Array[Line[bf16, 4]], t: Tensor[cb.i8], out: Array[i32]):
    i = cb.ABSOLUTE_POS
    if i < a.len():
        a[i] = a[i] * cb.i8(3) - cb.i8(1)  # neighbours share a word: no lost bytes
        flags[i] = not flags[i]
        out[i] = i32(a[i]) + i32(flags[i]) * 1000 + i32(t[i]) * 7 + i32(t.shape(0))
    if i < b.len():
        b[i] = b[i] + cb.u16(65535)  # wraps
        h[i] = h[i] * bf16(2.5)
        out[i + 64] = i32(a.len()) + i32(b.len()) * 100


def _words(x: np.ndarray) -> np.ndarray:
    raw = np.ascontiguousarray(x).view(np.uint8).reshape(-1)
    padded = np.zeros(-(-raw.size // 4) * 4, np.uint8)
    padded[:raw.size] = raw
    return padded.view(np.uint32).copy()


def test_packed_storage_keeps_every_value():
    from cube_ir.interpreter import Packed
    from cube_ir.passes.packing import pack_storage
    k = packed_io.ir(ranks={"t": 1})
    rng = np.random.default_rng(5)
    n = 37  # not a multiple of 4: the last word is partial
    a = rng.integers(-128, 127, n).astype(np.int8)
    b = rng.integers(0, 65535, 2 * 9).astype(np.uint16)
    flags = rng.integers(0, 2, n).astype(np.bool_)
    h = interpreter.f32_to_bf16_bits(rng.uniform(-4, 4, 4 * 9).astype(np.float32))
    t = rng.integers(-128, 127, n).astype(np.int8)
    args = [a, b, flags, h, t, np.zeros(128, np.int32)]
    before = _run(k, args, 2, 32)
    # plain NumPy for what the kernel does
    np.testing.assert_array_equal(before[0], (a * 3 - 1).astype(np.int8))
    np.testing.assert_array_equal(before[2], ~flags)
    lowered = clone_kernel(k)
    assert pack_storage(lowered, lambda e: e.bits < 32 or e.is_bool)
    verify(lowered)
    assert all(p.type == u32 for p in lowered.params if p.name != "out")
    packed = [Packed(_words(x), len(x) // ln, (len(x) // ln,) if p.kind == "tensor" else None)
              for x, ln, p in zip(args[:5], (1, 2, 1, 4, 1), k.params)]
    words = [p.words for p in packed]
    out = args[5].copy()
    interpreter.run(lowered, 2, 32, [*packed, out])
    for x, w in zip(before[:5], words):  # the same bytes
        np.testing.assert_array_equal(w.view(np.uint8)[:x.nbytes], x.view(np.uint8))
    np.testing.assert_array_equal(out, before[5])


# ---- exact float compares (passes.float_compares) -------------------------------------------

def _float_ops_kernel(t):
    """Every compare (against each other, itself, a finite constant and both infinities),
    min, max and clamp of a[i] and b[i], built in IR (the frontend spells Python's min/max
    as selects; the IR's are C's fmin/fmax)."""
    import math

    from cube_ir.builder import Builder
    from cube_ir.types import with_elem
    b = Builder("floats")
    a_, b_ = b.array("a", t), b.array("b", t)
    bits, vals = b.array("bits", with_elem(t, u32)), b.array("vals", t)
    i = b.builtin("ABSOLUTE_POS")
    x, y = b.emit_load(a_, i), b.emit_load(b_, i)
    tests = [(o, p, q) for o in sorted(ir.COMPARE_OPS)
             for p, q in ((x, y), (x, x), (x, 0.5), (1.5, y), (x, math.inf),
                          (x, -math.inf), (-math.inf, y), (math.inf, y))]
    one, zero = ir.Const(1, with_elem(t, u32)), ir.Const(0, with_elem(t, u32))
    for k, (o, p, q) in enumerate(tests):
        p = p if isinstance(p, ir.Var) else ir.Const(p, t)
        q = q if isinstance(q, ir.Var) else ir.Const(q, t)
        b.store(bits, b.add(b.mul(i, len(tests)), k), b.select(b.binary(o, p, q), one, zero))
    results = [b.binary("min", x, y), b.binary("max", x, y), b.binary("min", x, 0.5),
               b.binary("max", -1.0, y), b.ternary("clamp", x, ir.Const(-1.0, t), y),
               b.ternary("clamp", x, y, ir.Const(2.0, t))]
    for k, r in enumerate(results):
        b.store(vals, b.add(b.mul(i, len(results)), k), r)
    return b.finish(), len(tests), len(results)


@pytest.mark.parametrize("t", ["f32", "f32x4", "f16", "f64"])
def test_float_compares_pass_keeps_every_value(t):
    """NaN, infinities and signed zeros through every compare, min, max and clamp: the
    interpreter gives the same results after the pass (which spells clamp as max and min,
    and tests bits)."""
    from cube_ir.passes.float_compares import exact_float_compares
    from cube_ir.types import SCALARS, vec
    elem = SCALARS[t[:3]]
    typ = vec(elem, 4) if t.endswith("x4") else elem
    k, n_tests, n_vals = _float_ops_kernel(typ)
    vals = [np.nan, 1.0, -1.5, np.inf, -np.inf, 0.0, -0.0, 0.5, 2.0, -2.0]
    a = np.array([p for p in vals for q in vals], elem.np)
    bb = np.array([q for p in vals for q in vals], elem.np)
    lanes = typ.lanes
    units = a.size // lanes
    args = [a, bb, np.zeros(a.size * n_tests, np.uint32), np.zeros(a.size * n_vals, elem.np)]
    before = _run(k, args, 1, units)
    # plain Python for the scalar compares (x OP y is the first test of each op)
    if lanes == 1:
        got = before[2].reshape(-1, n_tests)
        ops = sorted(ir.COMPARE_OPS)
        for j, (p, q) in enumerate(zip(a.tolist(), bb.tolist())):
            for n, o in enumerate(ops):
                want = {"eq": p == q, "ne": p != q, "lt": p < q, "le": p <= q, "gt": p > q,
                        "ge": p >= q}[o]
                assert got[j, n * 8] == want, (o, p, q)
    lowered = clone_kernel(k)
    assert exact_float_compares(lowered)
    verify(lowered)
    assert not [op for op in ir.walk(lowered.body) if isinstance(op, ir.Ternary)]
    assert [op for op in ir.walk(lowered.body) if isinstance(op, ir.Bitcast)]
    after = _run(lowered, args, 1, units)
    np.testing.assert_array_equal(after[2], before[2])
    np.testing.assert_array_equal(np.signbit(after[3]), np.signbit(before[3]))
    np.testing.assert_array_equal(after[3], before[3])

"""The CPU runtime: barriers and shared memory, atomics across threads, big launches, the disk
cache and the launch hot path. Kernels are built with the IR builder."""
from __future__ import annotations

import statistics
import time

import numpy as np
import pytest

from cube_ir.builder import Builder
from cube_ir.types import f16, f32, f64, i8, i32, i64, u16, u32, u64, vec

pytest.importorskip("llvmlite.binding")
from runtimes.cpu import CpuRuntime  # noqa: E402
from runtimes.errors import LaunchError  # noqa: E402

RT = CpuRuntime()
RNG = np.random.default_rng(11)


def _not(b, x):
    return b.unary("not", x)


@pytest.fixture
def parallel(monkeypatch):
    """Executables compiled under this fixture run every launch of 2K+ units on the pool."""
    import runtimes.cpu as cpu
    monkeypatch.setattr(cpu, "PARALLEL_SECONDS", 0.0)


# ---- runtime basics ----------------------------------------------------------------------

def test_runtime_identity():
    assert RT.name == "cpu" and RT.target == "llvm" and RT.plane_size == 1
    dev = RT.device_id()
    from runtimes import cpu_jit
    assert cpu_jit.host_cpu_name() in dev
    assert "sse2" in dev or "neon" in dev or "," in dev
    RT.sync()


def _add_kernel(t=f32, lanes=1):
    b = Builder("add")
    lt = vec(t, lanes)
    x, y, o = b.array("a", lt), b.array("b", lt), b.array("out", lt)
    i = b.builtin("ABSOLUTE_POS")
    with b.if_(b.lt(i, b.len(o))):
        b.store(o, i, b.add(b.load(x, i), b.load(y, i)))
    return b.finish()


def test_generate_returns_llvm_ir():
    text = RT.generate(_add_kernel())
    assert "define void @cube_add" in text


def test_large_launch_runs_on_threads_and_is_correct():
    n = 1 << 22
    a = RNG.standard_normal(n).astype(np.float32)
    c = RNG.standard_normal(n).astype(np.float32)
    exe = RT.compile(_add_kernel(lanes=4))
    ab, cb, ob = RT.from_numpy(a), RT.from_numpy(c), RT.empty(n)
    exe.launch((n // 4 // 256, 1, 1), (256, 1, 1), [ab.lines(4), cb.lines(4), ob.lines(4)])
    np.testing.assert_array_equal(ob.numpy(), a + c)
    # odd sizes: a partial last cube, units guarded by the kernel
    m = 1_000_003
    exe1 = RT.compile(_add_kernel())
    ab, cb, ob = (RT.from_numpy(v[:m]) for v in (a, c, np.zeros(n, np.float32)))
    exe1.launch(((m + 127) // 128, 1, 1), (128, 1, 1), [ab, cb, ob])
    np.testing.assert_array_equal(ob.numpy(), a[:m] + c[:m])


def test_launch_errors():
    exe = RT.compile(_add_kernel())
    x = RT.from_numpy(np.ones(4, np.float32))
    with pytest.raises(LaunchError):
        exe.launch((1, 1, 1), (4, 1, 1), [x, x])
    with pytest.raises(LaunchError):
        exe.launch((1, 1, 1), (4, 1, 1), [x, x, 3])
    with pytest.raises(LaunchError):
        exe.launch((1 << 16, 1 << 16, 2), (1, 1, 1), [x, x, x])
    exe.launch((0, 1, 1), (4, 1, 1), [x, x, x])  # nothing to do


def test_launch_overhead_is_small():
    exe = RT.compile(_add_kernel())
    x, o = RT.from_numpy(np.ones(1, np.float32)), RT.empty(1)
    args = [x, x, o]
    ts = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(500):
            exe.launch((1, 1, 1), (1, 1, 1), args)
        ts.append((time.perf_counter() - t) / 500)
    assert o.numpy()[0] == 2.0
    assert statistics.median(ts) < 50e-6  # ~2 us here; generous for loaded CI machines


# ---- barriers and shared memory ----------------------------------------------------------

def _tree_reduce_kernel():
    """Per cube: shared-memory tree reduction, the halving loop a while-like Loop."""
    b = Builder("tree_reduce")
    x, o = b.array("x", f32), b.array("o", f32)
    sh = b.shared(f32, 256)
    tid = b.builtin("UNIT_POS")
    g = b.builtin("ABSOLUTE_POS")
    b.store(sh, tid, b.load(x, g))
    b.sync_cube()
    s = b.var(u32, "s")
    b.assign(s, b.binary("shr", b.builtin("CUBE_DIM"), 1))
    with b.loop():
        with b.if_(_not(b, b.binary("gt", s, 0))):
            b.break_()
        with b.if_(b.lt(tid, s)):
            b.store(sh, tid, b.add(b.load(sh, tid), b.load(sh, b.add(tid, s))))
        b.sync_cube()
        b.assign(s, b.binary("shr", s, 1))
    with b.if_(b.binary("eq", tid, 0)):
        b.store(o, b.builtin("CUBE_POS"), b.load(sh, 0))
    return b.finish()


@pytest.mark.parametrize("cube_dim", [(256, 1, 1), (64, 4, 1), (16, 4, 4)])
def test_shared_memory_tree_reduction(cube_dim, parallel):
    exe = RT.compile(_tree_reduce_kernel())
    cubes = 300  # 76800 units: runs on the thread pool
    x = RNG.integers(-100, 100, cubes * 256).astype(np.float32)
    xb, ob = RT.from_numpy(x), RT.empty(cubes)
    exe.launch((cubes, 1, 1), cube_dim, [xb, ob])
    np.testing.assert_array_equal(ob.numpy(), x.reshape(cubes, 256).sum(1))


def test_tree_reduction_comptime_cube_dim():
    k = _tree_reduce_kernel()
    k.cube_dim = (128, 1, 1)
    exe = RT.compile(k)
    x = RNG.integers(-100, 100, 4 * 128).astype(np.float32)
    xb, ob = RT.from_numpy(x), RT.empty(4)
    exe.launch((4, 1, 1), (128, 1, 1), [xb, ob])
    np.testing.assert_array_equal(ob.numpy(), x.reshape(4, 128).sum(1))


def test_prefix_sum_cube_level_range():
    """Hillis-Steele scan: a cube-level Range whose variable the units read, a per-unit
    value living across barriers."""
    n = 128
    b = Builder("scan")
    x, o = b.array("x", i32), b.array("o", i32)
    sh = b.shared(i32, n)
    tid = b.builtin("UNIT_POS")
    g = b.builtin("ABSOLUTE_POS")
    b.store(sh, tid, b.load(x, g))
    b.sync_cube()
    with b.range(b.const(0, u32), b.const(7, u32)) as k:
        off = b.binary("shl", b.const(1, u32), k)
        v = b.var(i32, "v")
        b.assign(v, b.load(sh, tid))
        with b.if_(b.binary("ge", tid, off)):
            b.assign(v, b.add(v, b.load(sh, b.sub(tid, off))))
        b.sync_cube()
        b.store(sh, tid, v)
        b.sync_cube()
    b.store(o, g, b.load(sh, tid))
    exe = RT.compile(b.finish())
    xs = RNG.integers(-50, 50, 3 * n).astype(np.int32)
    xb, ob = RT.from_numpy(xs), RT.from_numpy(np.zeros(3 * n, np.int32))
    exe.launch((3, 1, 1), (n, 1, 1), [xb, ob])
    np.testing.assert_array_equal(ob.numpy(), np.cumsum(xs.reshape(3, n), 1).reshape(-1))


def test_barrier_kernel_local_array_across_regions():
    b = Builder("local_sync")
    x, o = b.array("x", f32), b.array("o", f32)
    sh = b.shared(f32, 64)
    loc = b.local(f32, 4)
    tid = b.builtin("UNIT_POS")
    g = b.builtin("ABSOLUTE_POS")
    xv = b.load(x, g)
    with b.range(0, 4) as j:
        b.store(loc, j, b.mul(xv, b.cast(j, f32)))
    b.store(sh, tid, xv)
    b.sync_cube()
    acc = b.var(f32, "acc")
    b.assign(acc, b.load(sh, b.binary("rem", b.add(tid, 1), 64)))  # the neighbour's value
    with b.range(0, 4) as j:
        b.assign(acc, b.add(acc, b.load(loc, j)))
    b.store(o, g, acc)
    exe = RT.compile(b.finish())
    xs = RNG.uniform(-1, 1, 128).astype(np.float32)
    xb, ob = RT.from_numpy(xs), RT.empty(128)
    exe.launch((2, 1, 1), (64, 1, 1), [xb, ob])
    r = xs.reshape(2, 64)
    ref = np.roll(r, -1, 1) + r * 0 + r * 1 + r * 2 + r * 3
    np.testing.assert_allclose(ob.numpy(), ref.reshape(-1), rtol=1e-6)


def test_barrier_kernel_returns():
    """A unit-level return skips the unit in later regions; a uniform return inside a
    cube-level loop leaves the whole cube."""
    b = Builder("returns")
    o, o2 = b.array("o", i32), b.array("o2", i32)
    sh = b.shared(i32, 32)
    tid = b.builtin("UNIT_POS")
    g = b.builtin("ABSOLUTE_POS")
    cube = b.builtin("CUBE_POS")
    i = b.var(i32, "i")
    b.assign(i, 0)
    with b.loop():
        with b.if_(_not(b, b.lt(i, 10))):
            b.break_()
        with b.if_(b.binary("and", b.binary("eq", i, 3), b.binary("eq", cube, 1))):
            b.return_()
        b.store(sh, tid, b.add(b.mul(i, 100), b.cast(tid, i32)))
        b.sync_cube()
        b.store(o, g, b.load(sh, b.binary("rem", b.add(tid, 1), 32)))
        b.sync_cube()
        b.assign(i, b.add(i, 1))
    with b.if_(b.binary("eq", b.binary("rem", tid, 2), 1)):
        b.return_()
    b.sync_cube()
    b.store(o2, g, 1)
    exe = RT.compile(b.finish())
    ob = RT.from_numpy(np.full(64, -1, np.int32))
    ob2 = RT.from_numpy(np.zeros(64, np.int32))
    exe.launch((2, 1, 1), (32, 1, 1), [ob, ob2])
    nxt = (np.arange(32) + 1) % 32
    np.testing.assert_array_equal(ob.numpy()[:32], 900 + nxt)
    np.testing.assert_array_equal(ob.numpy()[32:], 200 + nxt)
    np.testing.assert_array_equal(ob2.numpy()[:32], (np.arange(32) + 1) % 2)
    np.testing.assert_array_equal(ob2.numpy()[32:], 0)


# ---- atomics -----------------------------------------------------------------------------

def test_atomic_histogram_many_cubes():
    n, bins = 1 << 20, 64
    b = Builder("hist")
    x, h = b.array("x", u32), b.array("h", u32)
    g = b.builtin("ABSOLUTE_POS")
    with b.if_(b.lt(g, b.len(x))):
        b.atomic("add", h, b.load(x, g), 1, want_result=False)
    exe = RT.compile(b.finish())
    xs = RNG.integers(0, bins, n).astype(np.uint32)
    xb, hb = RT.from_numpy(xs), RT.from_numpy(np.zeros(bins, np.uint32))
    from runtimes import cpu_pool
    pool = cpu_pool.pool()
    runs = []
    real_run = pool.run
    pool.run = lambda *a, **k: (runs.append(a[2]), real_run(*a, **k))
    try:
        exe.launch((n // 256, 1, 1), (256, 1, 1), [xb, hb])
    finally:
        del pool.run
    assert runs == [n // 256]  # it ran on the thread pool
    np.testing.assert_array_equal(hb.numpy(), np.bincount(xs, minlength=bins))


@pytest.mark.parametrize("t", [i32, u32, i64, u64, f32, f64], ids=str)
def test_atomic_ops(t, parallel):
    n = 1 << 16  # on the thread pool
    ops = ["add", "sub", "min", "max", "exchange"] + ([] if t.is_float else ["and", "or", "xor"])
    b = Builder("atom")
    x = b.array("x", t)
    outs = [b.array(f"o_{op}", t) for op in ops]
    g = b.builtin("ABSOLUTE_POS")
    v = b.load(x, g)
    for op, o in zip(ops, outs):
        b.atomic(op, o, 0, v, want_result=op == "exchange")
    exe = RT.compile(b.finish())
    if t.is_float:
        xs = RNG.integers(-50, 50, n).astype(t.np)
    else:
        xs = RNG.integers(0, 1000, n).astype(t.np)
    init = {"add": 0, "sub": 0, "min": 10**6 if not t.is_float else 1e9, "max": 0,
            "exchange": 0, "and": -1 if t.is_signed else np.iinfo(t.np).max if t.is_int else 0,
            "or": 0, "xor": 0}
    bufs = [RT.from_numpy(np.array([init[op]]).astype(t.np)) for op in ops]
    exe.launch((n // 128, 1, 1), (128, 1, 1), [RT.from_numpy(xs), *bufs])
    got = {op: bb.numpy()[0] for op, bb in zip(ops, bufs)}
    with np.errstate(over="ignore"):
        assert got["add"] == xs.sum(dtype=t.np)
        assert got["sub"] == (np.array(0, t.np) - xs.sum(dtype=t.np)).astype(t.np)
    assert got["min"] == min(xs.min(), init["min"])
    assert got["max"] == max(xs.max(), 0)
    assert got["exchange"] in set(xs.tolist())
    if not t.is_float:
        assert got["and"] == np.bitwise_and.reduce(xs)
        assert got["or"] == np.bitwise_or.reduce(xs)
        assert got["xor"] == np.bitwise_xor.reduce(xs)


def test_atomic_cas_counter_and_shared_atomics(parallel):
    """Every unit increments a counter with a CAS retry loop (threads contend), and counts
    into shared memory with atomic adds."""
    n = 1 << 16
    b = Builder("cas")
    c, fc, per = b.array("c", i32), b.array("fc", f32), b.array("per", i32)
    sh = b.shared(i32, 1)
    tid = b.builtin("UNIT_POS")
    with b.if_(b.binary("eq", tid, 0)):
        b.store(sh, 0, 0)
    b.sync_cube()
    with b.loop():
        old = b.atomic("add", c, 0, 0)
        got = b.atomic("cas", c, 0, b.add(old, 1), cmp=old)
        with b.if_(b.binary("eq", got, old)):
            b.break_()
    with b.loop():
        oldf = b.load(fc, 0)
        gotf = b.atomic("cas", fc, 0, b.add(oldf, 1.0), cmp=oldf)
        with b.if_(b.binary("eq", gotf, oldf)):
            b.break_()
    b.atomic("add", sh, 0, 1, want_result=False)
    b.sync_cube()
    with b.if_(b.binary("eq", tid, 0)):
        b.store(per, b.builtin("CUBE_POS"), b.load(sh, 0))
    exe = RT.compile(b.finish())
    cb_, fb = RT.from_numpy(np.zeros(1, np.int32)), RT.from_numpy(np.zeros(1, np.float32))
    pb = RT.from_numpy(np.zeros(n // 64, np.int32))
    exe.launch((n // 64, 1, 1), (64, 1, 1), [cb_, fb, pb])
    assert cb_.numpy()[0] == n and fb.numpy()[0] == n
    assert (pb.numpy() == 64).all()


# ---- the disk cache ----------------------------------------------------------------------

def _cached_entry_files(root):
    return sorted(root.glob("kernels/*/*/object.o"))


def test_disk_cache_reload_and_corruption(tmp_path, monkeypatch):
    monkeypatch.setenv("CUBE_CACHE_DIR", str(tmp_path))
    k = _add_kernel()
    x = RT.from_numpy(np.arange(8, dtype=np.float32))

    def check(rt):
        exe = rt.compile(k, cache_key="test-add-key")
        o = rt.empty(8)
        exe.launch((1, 1, 1), (8, 1, 1), [x, x, o])
        np.testing.assert_array_equal(o.numpy(), 2 * x.numpy())
        return exe

    rt1 = CpuRuntime()
    exe1 = check(rt1)
    assert rt1.stats == {"codegen": 1, "cache_loads": 0, "cache_stores": 1}
    (obj,) = _cached_entry_files(tmp_path)
    assert (obj.parent / "source.ll").read_text() == exe1.source

    rt2 = CpuRuntime()  # a fresh runtime (as in a new process): no code generation
    exe2 = check(rt2)
    assert rt2.stats["codegen"] == 0 and rt2.stats["cache_loads"] == 1
    assert exe2.source == exe1.source

    data = bytearray(obj.read_bytes())  # corrupt the object: the checksum catches it
    data[len(data) // 2:] = b"\xcc" * (len(data) - len(data) // 2)
    obj.write_bytes(bytes(data))
    rt3 = CpuRuntime()
    check(rt3)
    assert rt3.stats["codegen"] == 1 and rt3.stats["cache_loads"] == 0

    rt4 = CpuRuntime()  # the rebuilt entry is good again
    check(rt4)
    assert rt4.stats["cache_loads"] == 1


def test_disk_cache_foreign_entry_is_rebuilt(tmp_path, monkeypatch):
    """An entry whose checksums match but whose object is garbage is never loaded."""
    import hashlib
    import json

    from runtimes.cpu import CACHE_FORMAT
    from runtimes.disk_cache import default_cache, make_key
    monkeypatch.setenv("CUBE_CACHE_DIR", str(tmp_path))
    k = _add_kernel()
    rt = CpuRuntime()
    key = make_key(CACHE_FORMAT, "foreign", rt.device_id())
    junk = b"\x7fELF" + bytes(range(256)) * 4
    meta = {"entry": "cube_add", "stack_fixed": 0, "stack_per_unit": 0, "nslots": 12,
            "object_sha256": hashlib.sha256(junk).hexdigest()}
    default_cache().put(key, {"object.o": junk, "source.ll": b"",
                              "meta.json": json.dumps(meta).encode()})
    exe = rt.compile(k, cache_key="foreign")
    assert rt.stats["codegen"] == 1
    x, o = RT.from_numpy(np.ones(4, np.float32)), RT.empty(4)
    exe.launch((1, 1, 1), (4, 1, 1), [x, x, o])
    assert (o.numpy() == 2).all()


@pytest.mark.parametrize("t", [i8, u16, f16], ids=str)
def test_small_type_atomics(t):
    b = Builder("atom_small")
    x, o = b.array("x", t), b.array("o", t)
    g = b.builtin("ABSOLUTE_POS")
    v = b.load(x, g)
    b.atomic("add", o, 0, v, want_result=False)
    b.atomic("max", o, 1, v, want_result=False)
    b.atomic("min", o, 2, v, want_result=False)
    exe = RT.compile(b.finish())
    xs = RNG.integers(0, 3, 60).astype(t.np)
    ob = RT.from_numpy(np.array([0, 0, 100], t.np))
    exe.launch((2, 1, 1), (30, 1, 1), [RT.from_numpy(xs), ob])
    assert ob.numpy().tolist() == [xs.sum(), xs.max(), xs.min()]


# ---- more barrier shapes and launch paths ------------------------------------------------

def test_cube_level_continue_and_uniform_vars():
    """A sync loop with a uniform `continue`, a hoisted length read in several regions."""
    b = Builder("sync_continue")
    x, o = b.array("x", i32), b.array("o", i32)
    sh = b.shared(i32, 64)
    tid = b.builtin("UNIT_POS")
    n = b.len(x)  # one write of a uniform value: one scalar for all units
    b.store(sh, tid, 0)
    b.sync_cube()
    with b.range(b.const(0, i32), b.const(6, i32)) as k:
        with b.if_(b.binary("eq", b.binary("rem", k, 2), 1)):
            b.continue_()
        with b.if_(b.lt(tid, n)):
            b.store(sh, tid, b.add(b.load(sh, tid), b.add(b.load(x, tid), k)))
        b.sync_cube()
    b.store(o, tid, b.load(sh, b.binary("rem", b.add(tid, 1), 64)))
    exe = RT.compile(b.finish())
    xs = RNG.integers(0, 9, 64).astype(np.int32)
    ob = RT.from_numpy(np.zeros(64, np.int32))
    exe.launch((1, 1, 1), (64, 1, 1), [RT.from_numpy(xs), ob])
    np.testing.assert_array_equal(ob.numpy(), np.roll(3 * xs + 0 + 2 + 4, -1))


def test_no_params_and_tensor_lines():
    b = Builder("noparams")
    b.builtin("ABSOLUTE_POS")
    RT.compile(b.finish()).launch((3, 1, 1), (5, 1, 1), [])

    b = Builder("tensor_lines")
    t = b.tensor("t", vec(f32, 4), 2)
    o = b.array("o", vec(f32, 4))
    i = b.builtin("ABSOLUTE_POS")
    with b.if_(b.lt(i, b.len(t))):
        row = b.binary("div", b.mul(i, 4), b.stride(t, 0))
        b.store(o, i, b.add(b.load(t, i), b.cast(row, f32)))
    exe = RT.compile(b.finish())
    tv = RNG.uniform(0, 1, (3, 8)).astype(np.float32)
    tb, ob = RT.from_numpy(tv), RT.empty(24)
    exe.launch((1, 1, 1), (8, 1, 1), [tb.lines(4), ob.lines(4)])
    np.testing.assert_allclose(ob.numpy(), (tv + np.arange(3)[:, None]).reshape(-1))


def test_concurrent_launches_from_threads():
    import threading
    exe = RT.compile(_add_kernel())
    bufs = [(RT.from_numpy(np.full(4096, k, np.float32)), RT.empty(4096)) for k in range(4)]
    errors = []

    def work(x, o):
        try:
            for _ in range(200):
                exe.launch((16, 1, 1), (256, 1, 1), [x, x, o])
                assert (o.numpy() == 2 * x.numpy()).all()
        except Exception as e:  # surfaced below
            errors.append(e)

    ts = [threading.Thread(target=work, args=p) for p in bufs]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_comptime_cube_dim_mismatch_is_a_launch_error():
    k = _tree_reduce_kernel()
    k.cube_dim = (64, 1, 1)
    exe = RT.compile(k)
    x, o = RT.from_numpy(np.ones(256, np.float32)), RT.empty(4)
    with pytest.raises(LaunchError, match="cube_dim"):
        exe.launch((4, 1, 1), (32, 1, 1), [x, o])
    exe.launch((4, 1, 1), (64, 1, 1), [x, o])
    assert (o.numpy() == 64).all()

"""Whatever the frontend accepts for a target either runs correctly or is a located
CompileError naming the missing capability, and which of the two is decided by the declared
table (`runtimes.base.capabilities`), never by a backend compiler failing.

A matrix of small kernels (each atomic op x type x memory space, negative indices, i64
arithmetic and indices, f64, f16) runs on every runtime that starts (checked against NumPy)
and is compiled for the codegen-only targets (cuda, hip, msl) by their real compilers. The
test asserts against the table itself, not through conftest's skip of refused kernels."""
from __future__ import annotations

import re
import typing

import numpy as np
import pytest

import cube as cb
from codegen.cfamily import emit_source
from cube import UNIT_POS, Array, Comptime, cube, f16, f32, f64, i32, i64
from cube.capabilities import check, table_for
from cube.check import tools
from cube.errors import CompileError, CubeError
from cube.frontend.translator import Target
from cube.targets import TARGETS
from runtimes.base import ATOMIC_OPS, BIT_OPS, CAS_NO_RESULT, Capabilities, capabilities

T = typing.TypeVar("T")
N = 8  # units in the one cube; unit u works on slot u % 2

# ---- kernels ---------------------------------------------------------------------------


@cube
def _apply(op: Comptime[str], m, i, x, c):
    if op == "add":
        r = cb.atomic_add(m, i, x)
    elif op == "sub":
        r = cb.atomic_sub(m, i, x)
    elif op == "min":
        r = cb.atomic_min(m, i, x)
    elif op == "max":
        r = cb.atomic_max(m, i, x)
    elif op == "and":
        r = cb.atomic_and(m, i, x)
    elif op == "or":
        r = cb.atomic_or(m, i, x)
    elif op == "xor":
        r = cb.atomic_xor(m, i, x)
    elif op == "exchange":
        r = cb.atomic_exchange(m, i, x)
    elif op == "cas":
        r = cb.atomic_cas(m, i, c, x)
    else:  # cas whose old value is never read
        cb.atomic_cas(m, i, c, x)
        r = x
    return r


@cube(launch=True)
def atomic_global(a: Array[T], v: Array[T], old: Array[T], op: Comptime[str]):
    u = UNIT_POS
    old[u] = _apply(op, a, u % 2, v[u], a[2])


@cube(launch=True)
def atomic_shared(a: Array[T], v: Array[T], old: Array[T], op: Comptime[str]):
    s = cb.SharedMemory(T, 2)
    u = UNIT_POS
    if u < 2:
        s[u] = a[u]
    cb.sync_cube()
    old[u] = _apply(op, s, u % 2, v[u], a[2])
    cb.sync_cube()
    if u < 2:
        a[u] = s[u]


@cube(launch=True)
def atomic_local(a: Array[T], v: Array[T], old: Array[T], op: Comptime[str]):
    m = cb.LocalArray(T, 2)
    u = UNIT_POS
    m[0] = a[0]
    m[1] = a[1]
    old[u] = _apply(op, m, u % 2, v[u], a[2])
    v[u] = m[u % 2]


KERNELS = {"global": atomic_global, "shared": atomic_shared, "local": atomic_local}
TYPES = {"i32": np.int32, "u32": np.uint32, "f32": np.float32, "i64": np.int64,
         "u64": np.uint64, "f64": np.float64,
         # narrow types: the CPU has atomics on them, the others refuse them by table
         "i8": np.int8, "u16": np.uint16, "f16": np.float16}
OPS = [*ATOMIC_OPS, CAS_NO_RESULT]
CASES = [(s, t, op) for s in KERNELS for t in TYPES for op in OPS
         if not (op in BIT_OPS and t.startswith("f"))]


@cube(launch=True)
def neg_index(a: Array[f32], out: Array[f32], cnt: Array[i32], k: i32):
    s = cb.SharedMemory(f32, 4)
    m = cb.LocalArray(f32, 4)
    u = UNIT_POS
    s[u] = a[u]
    m[0] = a[0]
    m[1] = a[1]
    m[2] = a[2]
    m[3] = a[3]
    cb.sync_cube()
    if u == 0:  # (a constant negative index is a CompileError: test_frontend_soundness)
        out[0] = a[k - 1]
        out[1] = a[k]
        out[2] = s[k - 1]
        out[3] = s[k]
        out[4] = m[k - 1]
        out[5] = m[k]
        out[k - 1] = 5.0
        out[k] = 6.0
        a[k - 1] = 7.0
        a[k] = 7.0
        m[k - 1] = 8.0
        m[k] = 8.0
        out[6] = m[3]
        out[7] = f32(cb.atomic_add(cnt, k - 1, 1) + cb.atomic_add(cnt, k, 1))
    cb.sync_cube()
    s[k - 1] = 9.0
    s[k] = 9.0
    cb.sync_cube()
    if u == 0:
        out[8] = s[3]


@cube(launch=True, unchecked=True)
def neg_index_unchecked(a: Array[f32], out: Array[f32], k: i32):
    out[0] = a[k]  # k < 0: undefined in unchecked mode, but the generated code must be valid
    out[k - 1] = 1.0


@cube(launch=True)
def int64_math(a: Array[i64], out: Array[i64]):
    u = UNIT_POS
    out[u] = a[u] * i64(3) - (a[u] >> i64(1)) + i64(1 << 40)


@cube(launch=True)
def int64_index(a: Array[f32], out: Array[f32]):
    out[i64(1)] = a[i64(2)]  # only the (constant) indices are i64


@cube(launch=True)
def float64_math(a: Array[f64], out: Array[f64]):
    u = UNIT_POS
    out[u] = a[u] * 0.1 + cb.sqrt(a[u])


@cube(launch=True)
def float16_math(a: Array[f16], out: Array[f16]):
    u = UNIT_POS
    out[u] = a[u] * f16(2.0) + f16(0.5)


# ---- expectations ----------------------------------------------------------------------


def _supported(caps: Capabilities, space: str, t: str, op: str) -> bool:
    return caps.has_type(t) and caps.atomic(op, t, space) is not None


def _atomic_inputs(t: str):
    dt = TYPES[t]
    signed = not t.startswith("u")
    vals = [3, -5, 7, 1, -2, 6, 9, -4] if signed else [3, 5, 7, 1, 2, 6, 9, 4]
    return np.array([10, 20, 10], dt), np.array(vals, dt)


def _rmw(op: str, old, x, cmp):
    match op:
        case "add":
            return old + x
        case "sub":
            return old - x
        case "min":
            return min(old, x)
        case "max":
            return max(old, x)
        case "and":
            return old & x
        case "or":
            return old | x
        case "xor":
            return old ^ x
        case "exchange":
            return x
    return x if old == cmp else old  # cas


def _check_atomic_result(space: str, op: str, a0, v0, a, v, old) -> None:
    cmp = a0[2]
    if space == "local":  # every unit on its own copy
        want_old = np.array([a0[u % 2] for u in range(N)])
        want_new = np.array([_rmw("cas" if op == CAS_NO_RESULT else op, a0[u % 2], v0[u], cmp)
                             for u in range(N)], a0.dtype)
        np.testing.assert_array_equal(v, want_new)
        if op != CAS_NO_RESULT:
            np.testing.assert_array_equal(old, want_old.astype(a0.dtype))
        return
    with np.errstate(over="ignore"):
        for j in (0, 1):
            units = [u for u in range(N) if u % 2 == j]
            xs = [v0[u] for u in units]
            if op in ("exchange", "cas", CAS_NO_RESULT):
                if op == "exchange":  # the old values and the final one: init + every x
                    got = sorted([*(old[u] for u in units), a[j]])
                    assert got == sorted([a0[j], *xs]), (j, got)
                elif a0[j] != cmp:
                    assert a[j] == a0[j]
                else:  # exactly one unit swapped
                    assert a[j] in xs
                    if op == "cas":
                        assert sum(old[u] == a0[j] for u in units) == 1, old
                continue
            want = a0[j]
            for x in xs:
                want = _rmw(op, want, x, cmp)
            assert a[j] == want, (j, a[j], want)


def _must_run(what: str, fn, *args, **kwargs) -> None:
    """The table says yes: any error is a failure (not conftest's skip of 'not supported by
    the <target> target', nor a backend compiler's refusal)."""
    try:
        fn(*args, **kwargs)
    except CubeError as e:
        pytest.fail(f"the table supports {what}, but: {type(e).__name__}: {e}")


def _must_refuse(what: str, fn, *args, **kwargs) -> CompileError:
    """The table says no: the frontend or the capability check refuses with a CompileError
    (never a backend compiler, a code generator's UnsupportedFeature or success)."""
    try:
        fn(*args, **kwargs)
    except CompileError as e:
        return e
    except CubeError as e:
        pytest.fail(f"the table refuses {what}: want a CompileError, got "
                    f"{type(e).__name__}: {e}")
    pytest.fail(f"the table refuses {what}, but it ran")


def _refused(e: CompileError, caps: Capabilities, capability: str) -> None:
    msg = str(e)
    assert f"not supported by the {caps.target} target" in msg, msg
    assert capability in msg, msg
    assert e.loc, f"no source location: {msg}"


# ---- runtimes --------------------------------------------------------------------------


@pytest.mark.parametrize("space,t,op", CASES, ids=["-".join(c) for c in CASES])
def test_atomic_matrix(rt, space, t, op):
    caps = capabilities(rt.target, rt.features)
    a0, v0 = _atomic_inputs(t)
    a, v = rt.from_numpy(a0), rt.from_numpy(v0)
    old = rt.from_numpy(np.zeros(N, a0.dtype))
    kernel = KERNELS[space]
    what = f"atomic {op}/{t}/{space} on {rt.name}"
    launch = (kernel.launch, rt)
    kw = dict(cube_count=(1,), cube_dim=(N,), a=a, v=v, old=old, op=op)
    if not _supported(caps, space, t, op):
        e = _must_refuse(what, *launch, **kw)
        # the frontend names an atomic type it refuses; the table the op and memory space
        cap = t if not caps.has_type(t) or t not in rt.features.atomic_types \
            else f"atomic {op.split('-')[0]}/{t}/{space}"
        _refused(e, caps, cap)
        return
    _must_run(what, *launch, **kw)
    _check_atomic_result(space, op, a0, v0, a.numpy(), v.numpy(), old.numpy())


def test_negative_indices_are_out_of_bounds(rt):
    """Checked mode: negative runtime indices read 0 and write nothing, in global, shared
    and local memory, atomics included."""
    a0 = np.arange(1, 5, dtype=np.float32)
    a, out = rt.from_numpy(a0), rt.from_numpy(np.full(10, -1.0, np.float32))
    cnt = rt.from_numpy(np.zeros(2, np.int32))
    _must_run("negative indices", neg_index.launch, rt, cube_count=(1,), cube_dim=(4,), a=a,
              out=out, cnt=cnt, k=-1)
    np.testing.assert_array_equal(out.numpy(), [0, 0, 0, 0, 0, 0, 4, 0, 4, -1])
    np.testing.assert_array_equal(a.numpy(), a0)
    np.testing.assert_array_equal(cnt.numpy(), [0, 0])


def test_negative_indices_unchecked_generate_valid_code(rt):
    k = neg_index_unchecked
    kernel = k.build_ir(k.signature_from_types(), Target(rt.target, rt.plane_size,
                                                         rt.features))
    # the backend compiler accepts it (running it is undefined)
    _must_run("negative indices (unchecked)", rt.compile, kernel)


@pytest.mark.parametrize("kernel,dtype,t", [
    (int64_math, np.int64, "i64"), (int64_index, np.float32, "i64"),
    (float64_math, np.float64, "f64"), (float16_math, np.float16, "f16")],
    ids=["i64-math", "i64-index", "f64", "f16"])
def test_types(rt, kernel, dtype, t):
    caps = capabilities(rt.target, rt.features)
    x = np.array([4, 9, 16, 25], dtype)
    a, out = rt.from_numpy(x), rt.from_numpy(np.zeros(4, dtype))
    if not caps.has_type(t):
        e = _must_refuse(kernel.__name__, kernel.launch, rt, cube_count=(1,), cube_dim=(4,),
                         a=a, out=out)
        _refused(e, caps, f"{t} is not supported")
        return
    _must_run(kernel.__name__, kernel.launch, rt, cube_count=(1,), cube_dim=(4,), a=a,
              out=out)
    got = out.numpy()
    if kernel is int64_math:
        want = x * 3 - (x >> 1) + (1 << 40)
    elif kernel is int64_index:
        want = np.array([0, x[2], 0, 0], dtype)
    elif kernel is float64_math:
        want = x * 0.1 + np.sqrt(x)
    else:
        want = (x.astype(np.float32) * 2 + 0.5).astype(np.float16)
    np.testing.assert_allclose(got, want, rtol=1e-12 if dtype == np.float64 else 0)


def test_i64_index_error_points_at_the_access():
    """On a target without i64 an index of that type is refused at its own line."""
    with pytest.raises(CompileError) as ei:
        int64_index.source(target="wgsl")
    assert "out[i64(1)] = a[i64(2)]" in str(ei.value) and "index" in ei.value.message


@cube(launch=True)
def _i64_param(out: Array[f32], n: i64):
    out[UNIT_POS] = f32(n * n)


@cube(launch=True)
def _i64_loop(out: Array[f32], n: i64):
    for j in range(n):
        out[0] += f32(j)


@cube(launch=True)
def _i64_select(out: Array[i32], a: Array[i32]):
    x = i64(a[0]) if a[1] > 0 else i64(a[2])
    out[0] = i32(x)


@cube(launch=True)
def _i64_folded(out: Array[f32]):
    x = i64(3)
    y = x * i64(5)
    out[0] = f32(y)


@cube(launch=True)
def _f64_plane(out: Array[f32], a: Array[f32]):
    out[UNIT_POS] = f32(cb.plane_sum(f64(a[UNIT_POS])))


@pytest.mark.parametrize("kernel", [_i64_param, _i64_loop, _i64_select, _f64_plane,
                                    int64_math, int64_index, float64_math])
@pytest.mark.parametrize("target", ["wgsl", "spirv"])
def test_every_refusal_is_located(kernel, target):
    """Whatever op kind first needs the missing type (a scalar argument, a loop bound, a
    select, a folded constant, a plane op, a load, an index), the error has a location."""
    with pytest.raises(CompileError) as ei:
        kernel.source(target=target)
    assert f"not supported by the {target} target" in str(ei.value)
    assert ei.value.loc and ei.value.loc[0] == __file__, str(ei.value)


def test_i64_constants_that_fold_away_are_accepted():
    """The table is about the values a kernel computes at run time: i64 arithmetic on
    constants folds to one f32 constant, which every target has."""
    assert "15.0f" in _i64_folded.source(target="wgsl")


# ---- codegen-only targets: the real compilers ------------------------------------------

def _tool(name: str) -> None:
    if tools.find_tool(name) is None:
        pytest.skip(f"{name} is not installed")


def _matrix_sources(target: str) -> list[tuple[str, str]]:
    """(label, source) of every matrix kernel for `target`; asserts each kernel the table
    supports is generated and each it refuses is a CompileError."""
    info = TARGETS[target]
    tgt = Target(target, info.features.plane_size, info.features)
    caps = table_for(tgt)
    jobs = [(f"{s}_{t}_{op.replace('-', '_')}", KERNELS[s],
             {"T": getattr(cb, t)}, {"op": op}, _supported(caps, s, t, op)) for s, t, op in CASES]
    for k, t in ((int64_math, "i64"), (int64_index, "i64"), (float64_math, "f64"),
                 (float16_math, "f16"), (neg_index, None), (neg_index_unchecked, None)):
        jobs.append((k.__name__, k, {}, {}, t is None or caps.has_type(t)))
    out = []
    for i, (label, k, tv, ct, ok) in enumerate(jobs):
        sig = k.signature_from_types(type_vars=tv, comptime=ct)
        try:
            kern = k.build_ir(sig, tgt)
        except CompileError as e:
            assert not ok, f"{target}: the table supports {label}, but: {e}"
            assert f"not supported by the {target} target" in str(e) and e.loc, str(e)
            continue
        assert ok, f"{target}: the table refuses {label}, but it compiled"
        kern.name = f"{label}_{i}"
        out.append((label, emit_source(kern, target).text))
    return out


@pytest.mark.parametrize("target,tool,arch", [("cuda", "nvcc", "sm_80"),
                                              ("hip", "hipcc", "gfx90a"),
                                              ("msl", "clang++", "")])
def test_matrix_compiles_with_the_real_tool(target, tool, arch, tmp_path):
    """nvcc (CUDA), hipcc (HIP), clang++ against the Metal shim (MSL): cube check's runners."""
    _tool(tool)
    run = getattr(tools, target)(_matrix_sources(target), arch, tmp_path)
    assert run.ok, f"{target}: {run.error}\n" + "\n".join(
        f"{label}: {err}" for label, err in run.failed.items())


@pytest.mark.parametrize("target", ["wgsl", "spirv", "opencl", "llvm"])
def test_matrix_decisions_for_generated_targets(target):
    """Without a device the generators' own tables decide; refused kernels never reach the
    generator and accepted ones generate."""
    info = TARGETS[target]
    tgt = Target(target, info.features.plane_size, info.features)
    caps = table_for(tgt)
    for s, t, op in CASES:
        k = KERNELS[s]
        sig = k.signature_from_types(type_vars={"T": getattr(cb, t)}, comptime={"op": op})
        try:
            info.generate(k.build_ir(sig, tgt))
        except CompileError as e:
            assert not _supported(caps, s, t, op), f"{target} {s}/{t}/{op}: {e}"
            assert f"not supported by the {target} target" in str(e) and e.loc, str(e)
        else:
            assert _supported(caps, s, t, op), f"{target} {s}/{t}/{op} generated"


@cube(launch=True)
def _plane(x: Array[f32]):
    x[UNIT_POS] = cb.plane_sum(x[UNIT_POS])


def test_plane_ops_and_limits_come_from_the_table():
    from runtimes.base import Features
    no_planes = Features(plane_ops=False)
    assert not capabilities("opencl", no_planes).plane_ops
    # the frontend refuses it first (in its own words); the table's check says the same
    with pytest.raises(CompileError, match="plane_sum"):
        _plane.build_ir(_plane.signature_from_types(), Target("opencl", 1, no_planes))
    kernel = _plane.build_ir(_plane.signature_from_types(), Target("opencl", 1, Features()))
    with pytest.raises(CompileError, match="plane_sum .*capability plane_ops.* not supported "
                                           "by the opencl target") as ei:
        check(kernel, capabilities("opencl", no_planes))
    assert ei.value.loc
    caps = capabilities("cuda", TARGETS["cuda"].features)
    assert caps.max_shared_bytes == 48 << 10 and caps.max_cube_dim == 1024


def test_table_is_declared_per_target():
    spirv = capabilities("spirv", TARGETS["spirv"].features)
    assert spirv.atomic("add", "f32", "global") and not spirv.atomic("add", "f32", "shared")
    assert spirv.atomic(CAS_NO_RESULT, "i32", "global") and not spirv.atomic("cas", "i32",
                                                                               "global")
    wgsl = capabilities("wgsl", TARGETS["wgsl"].features)
    assert wgsl.atomic("max", "f32", "shared") == "cas-loop"
    assert not wgsl.has_type("i64") and not wgsl.has_type("f64")
    for target in ("wgsl", "spirv", "cuda", "llvm"):
        caps = capabilities(target, TARGETS[target].features)
        assert caps.atomic("add", "i32", "local") == "rmw"
    assert re.search("i64", str(sorted(capabilities("cuda", TARGETS["cuda"].features).types)))


@cb.cube(launch=True)
def _wide_math(out: cb.Array[cb.f32]):
    out[0] = cb.f32(cb.f64(out[1]) * 2.0)


@cb.cube(launch=True)
def _shared_f32_add(out: cb.Array[cb.f32]):
    s = cb.SharedMemory(cb.f32, 4)
    cb.atomic_add(s, 0, out[0])


@pytest.mark.parametrize("kernel, target, capability", [
    (_wide_math, "wgsl", "f64"),
    (_shared_f32_add, "spirv", "atomic add/f32/shared"),
])
def test_refusals_name_their_capability(kernel, target, capability):
    """Test skips read `CapabilityError.capability` (tests/conftest.py), never a message: the
    refusal carries the table's entry and the target."""
    with pytest.raises(cb.CapabilityError) as info:
        kernel.source(target=target, out=cb.Array[cb.f32])
    assert info.value.capability == capability and info.value.target == target
    assert info.value.loc is not None

"""Every language feature, on every runtime, against NumPy."""
import math
import typing

import numpy as np
import pytest

import cube as cb
from cube import (
    ABSOLUTE_POS,
    ABSOLUTE_POS_X,
    ABSOLUTE_POS_Y,
    CUBE_COUNT,
    CUBE_COUNT_X,
    CUBE_DIM,
    CUBE_DIM_X,
    CUBE_POS,
    CUBE_POS_X,
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
    bf16,
    cube,
    f16,
    f32,
    f64,
    i8,
    i32,
    i64,
    u8,
    u32,
    u64,
)

F = typing.TypeVar("F")


def launch1d(k, rt, n, block=64, **args):
    k.launch(rt, cube_count=((n + block - 1) // block,), cube_dim=(block,), **args)


# ---- elementwise, types, generics --------------------------------------------------------

@cube(launch=True)
def axpby(x: Array[Line[F]], y: Array[Line[F]], out: Array[Line[F]], a: F, b: F):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = a * x[i] + b * y[i]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int64,
                                   np.uint8])
@pytest.mark.parametrize("line", [1, 4])
def test_generic_axpby(rt, dtype, line):
    n = 1000
    rng = np.random.default_rng(0)
    x = (rng.random(n) * 10).astype(dtype)
    y = (rng.random(n) * 10).astype(dtype)
    a, b = dtype(2), dtype(3)
    dx, dy = rt.from_numpy(x), rt.from_numpy(y)
    out = rt.empty_like(dx)
    launch1d(axpby, rt, n // line, x=dx.lines(line), y=dy.lines(line), out=out.lines(line),
             a=a, b=b)
    ref = (a * x + b * y).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        np.testing.assert_allclose(out.numpy(), ref, rtol=2e-3 if dtype == np.float16 else 1e-6)
    else:
        np.testing.assert_array_equal(out.numpy(), ref)


@cube(launch=True)
def math_ops(x: Array[F], out: Array[F], OP: Comptime[str]):
    i = ABSOLUTE_POS
    if i < x.len():
        v = x[i]
        if OP == "sqrt":
            r = cb.sqrt(v)
        elif OP == "rsqrt":
            r = cb.rsqrt(v)
        elif OP == "exp":
            r = cb.exp(v)
        elif OP == "log":
            r = cb.log(v)
        elif OP == "log1p":
            r = cb.log1p(v)
        elif OP == "sin":
            r = cb.sin(v)
        elif OP == "cos":
            r = cb.cos(v)
        elif OP == "tanh":
            r = cb.tanh(v)
        elif OP == "erf":
            r = cb.erf(v)
        elif OP == "floor":
            r = cb.floor(v)
        elif OP == "ceil":
            r = cb.ceil(v)
        elif OP == "round":
            r = cb.round(v)
        elif OP == "abs":
            r = abs(v)
        elif OP == "neg":
            r = -v
        elif OP == "pow":
            r = v ** 1.5
        elif OP == "fma":
            r = cb.fma(v, v, 1.0)
        elif OP == "clamp":
            r = cb.clamp(v, 0.5, 2.0)
        else:
            r = cb.min(v, 1.0) + cb.max(v, 1.0)
        out[i] = r


_erf = np.vectorize(math.erf)
MATH = {
    "sqrt": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v), "exp": np.exp, "log": np.log,
    "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "erf": _erf,
    "floor": np.floor, "ceil": np.ceil, "round": np.rint, "abs": np.abs, "neg": np.negative,
    "pow": lambda v: v ** 1.5, "fma": lambda v: v * v + 1, "clamp": lambda v: np.clip(v, .5, 2),
    "minmax": lambda v: np.minimum(v, 1) + np.maximum(v, 1),
}


@pytest.mark.parametrize("op", sorted(MATH))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_math(rt, op, dtype):
    x = np.linspace(0.05, 6.0, 517).astype(dtype)
    if op in ("round", "floor", "ceil"):
        x = np.concatenate([x, np.array([0.5, 1.5, 2.5, -0.5, -1.5], dtype)])
    dx = rt.from_numpy(x)
    out = rt.empty_like(dx)
    launch1d(math_ops, rt, x.size, x=dx, out=out, OP=op)
    ref = MATH[op](x.astype(np.float64))
    tol = 2e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out.numpy(), ref, rtol=tol, atol=tol)


@cube(launch=True)
def int_ops(a: Array[F], b: Array[F], out: Tensor[F]):
    i = ABSOLUTE_POS
    n = a.len()
    if i < n:
        x, y = a[i], b[i]
        out[i] = x // y
        out[n + i] = x % y
        out[2 * n + i] = x & y
        out[3 * n + i] = x | y
        out[4 * n + i] = x ^ y
        out[5 * n + i] = x << 3
        out[6 * n + i] = x >> 2
        out[7 * n + i] = x * y + x - y


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.int8])
def test_int_semantics(rt, dtype):
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    lo = max(info.min, -100)
    a = rng.integers(lo, 100, 300).astype(dtype)
    b = rng.integers(lo, 100, 300).astype(dtype)
    b[b == 0] = 7
    da, db = rt.from_numpy(a), rt.from_numpy(b)
    out = rt.from_numpy(np.zeros((8, 300), dtype))
    launch1d(int_ops, rt, 300, a=da, b=db, out=out)
    with np.errstate(over="ignore"):
        ref = np.stack([a // b, a % b, a & b, a | b, a ^ b, (a << 3).astype(dtype), a >> 2,
                        (a * b + a - b).astype(dtype)])
    np.testing.assert_array_equal(out.numpy(), ref)


@cube(launch=True)
def casts(x: Array[f32], to_i: Array[i32], to_u8: Array[u8], to_h: Array[f16],
          to_b: Array[bf16], to_d: Array[f64], to_bool: Array[i32]):
    i = ABSOLUTE_POS
    if i < x.len():
        v = x[i]
        to_i[i] = i32(v)
        to_u8[i] = u8(abs(v))
        to_h[i] = f16(v)
        to_b[i] = bf16(v)
        to_d[i] = f64(v) * 2.0
        to_bool[i] = i32(cb.cast(v, cb.bool_))


def _bf16_round(x: np.ndarray) -> np.ndarray:
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def test_casts(rt):
    x = np.array([0.0, -0.0, 1.5, -1.5, 2.7, -2.7, 100.25, 3.14159, 1e-3, -77.9], np.float32)
    d = {k: rt.from_numpy(np.zeros(x.size, t)) for k, t in [
        ("to_i", np.int32), ("to_u8", np.uint8), ("to_h", np.float16), ("to_b", np.uint16),
        ("to_d", np.float64), ("to_bool", np.int32)]}
    d["to_b"] = rt.empty(x.size, cb.bf16)
    launch1d(casts, rt, x.size, x=rt.from_numpy(x), **d)
    np.testing.assert_array_equal(d["to_i"].numpy(), x.astype(np.int32))
    np.testing.assert_array_equal(d["to_u8"].numpy(), np.abs(x).astype(np.uint8))
    np.testing.assert_array_equal(d["to_h"].numpy(), x.astype(np.float16))
    np.testing.assert_array_equal(d["to_b"].numpy(), _bf16_round(x))
    np.testing.assert_array_equal(d["to_d"].numpy(), x.astype(np.float64) * 2)
    np.testing.assert_array_equal(d["to_bool"].numpy(), (x != 0).astype(np.int32))


# ---- control flow ------------------------------------------------------------------------

@cube
def collatz_steps(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


@cube(launch=True)
def control(x: Array[i32], out: Array[i32]):
    i = ABSOLUTE_POS
    if i >= x.len():
        return
    v = x[i]
    acc = 0
    for j in range(10, 0, -3):  # negative step
        if j == 4:
            continue
        acc += j * v
    k = 0
    while True:
        k += 1
        if k * k > v:
            break
    sign = 1 if v % 3 == 0 else -1
    if v > 50:
        out[i] = acc + k * sign
    elif v > 20:
        out[i] = collatz_steps(v)
    else:
        out[i] = -acc


def _control_ref(v):
    acc = sum(j * v for j in range(10, 0, -3) if j != 4)
    k = 0
    while True:
        k += 1
        if k * k > v:
            break
    sign = 1 if v % 3 == 0 else -1
    if v > 50:
        return acc + k * sign
    if v > 20:
        n, s = v, 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            s += 1
        return s
    return -acc


def test_control_flow(rt):
    x = np.arange(1, 130, dtype=np.int32)
    dx = rt.from_numpy(x)
    out = rt.from_numpy(np.zeros_like(x))
    launch1d(control, rt, x.size, block=32, x=dx, out=out)
    np.testing.assert_array_equal(out.numpy(), [_control_ref(int(v)) for v in x])


@cube
def relu_or_scale(v, SCALE: Comptime[float]):
    if v > 0.0:
        return v * SCALE
    return 0.0


@cube(launch=True)
def helper_returns(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < x.len():
        out[i] = relu_or_scale(x[i], 3.0) + relu_or_scale(-x[i], SCALE=0.5)


def test_helper_early_return(rt):
    x = np.linspace(-3, 3, 101).astype(np.float32)
    out = rt.empty(x.size)
    launch1d(helper_returns, rt, x.size, x=rt.from_numpy(x), out=out)
    ref = np.where(x > 0, x * 3, 0) + np.where(-x > 0, -x * 0.5, 0)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)


@cube(launch=True)
def comptime_branches(x: Array[f32], out: Array[f32], MODE: Comptime[int], N: Comptime[int]):
    i = ABSOLUTE_POS
    if i < x.len():
        acc = x[i]
        for k in cb.range(N, unroll=True):
            if MODE == 0:
                acc = acc + f32(k)
            else:
                acc = acc * 2.0
        K = cb.comptime(N * 10)
        out[i] = acc + K


@pytest.mark.parametrize("mode", [0, 1])
def test_comptime_and_unroll(rt, mode):
    x = np.arange(10, dtype=np.float32)
    out = rt.empty(10)
    comptime_branches.launch(rt, cube_count=1, cube_dim=16, x=rt.from_numpy(x), out=out,
                             MODE=mode, N=4)
    ref = (x + 6 if mode == 0 else x * 16) + 40
    np.testing.assert_allclose(out.numpy(), ref)


@cube(launch=True)
def select_lines(x: Array[Line[f32]], out: Array[Line[f32]]):
    i = ABSOLUTE_POS
    if i < x.len():
        v = x[i]
        w = cb.select(v > 0.0, v, v * 0.1)
        w[0] = w[0] + 100.0
        out[i] = w + f32(v.size)


def test_line_select_and_lane_insert(rt):
    x = np.linspace(-4, 4, 64).astype(np.float32)
    out = rt.empty(64)
    select_lines.launch(rt, cube_count=1, cube_dim=16, x=rt.from_numpy(x).lines(4),
                        out=out.lines(4))
    ref = np.where(x > 0, x, x * np.float32(0.1)) + 4
    ref[::4] += 100
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)


# ---- builtins, 2-D/3-D launches, tensors ------------------------------------------------

@cube(launch=True)
def builtins_2d(out: Tensor[u32]):
    x = ABSOLUTE_POS_X
    y = ABSOLUTE_POS_Y
    if x < out.shape(1) and y < out.shape(0):
        o = y * out.stride(0) + x * out.stride(1)
        out[o] = (CUBE_POS_X * 1000 + CUBE_POS_Y * 100 + UNIT_POS_X * 10 + UNIT_POS_Y
                  + CUBE_DIM_X * 100000 + CUBE_COUNT_X * 1000000)


def test_builtins_2d(rt):
    h, w = 13, 21
    out = rt.from_numpy(np.zeros((h, w), np.uint32))
    builtins_2d.launch(rt, cube_count=(6, 4), cube_dim=(4, 4), out=out)
    ys, xs = np.mgrid[0:h, 0:w]
    ref = (xs // 4) * 1000 + (ys // 4) * 100 + (xs % 4) * 10 + ys % 4 + 4 * 100000 + 6e6
    np.testing.assert_array_equal(out.numpy(), ref.astype(np.uint32))


@cube(launch=True)
def linear_builtins(out: Array[u32]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = (UNIT_POS + CUBE_POS * CUBE_DIM) * 10 + (CUBE_COUNT - CUBE_COUNT) \
            + (UNIT_POS_PLANE - UNIT_POS_PLANE) + (PLANE_DIM - PLANE_DIM)


def test_linear_builtins_3d(rt):
    out = rt.from_numpy(np.zeros(2 * 3 * 2 * 4 * 2 * 2, np.uint32))
    linear_builtins.launch(rt, cube_count=(2, 3, 2), cube_dim=(4, 2, 2), out=out)
    np.testing.assert_array_equal(out.numpy(), np.arange(out.size) * 10)


@cube(launch=True)
def transpose(x: Tensor[f32], out: Tensor[f32]):
    i = ABSOLUTE_POS
    rows = x.shape(0)
    cols = x.shape(1)
    if i < rows * cols and x.rank() == 2:
        r = i // cols
        c = i % cols
        out[c * out.stride(0) + r * out.stride(1)] = x[r * x.stride(0) + c * x.stride(1)]


def test_tensor_meta(rt):
    x = np.arange(35, dtype=np.float32).reshape(5, 7)
    out = rt.from_numpy(np.zeros((7, 5), np.float32))
    launch1d(transpose, rt, 35, x=rt.from_numpy(x), out=out)
    np.testing.assert_array_equal(out.numpy(), x.T)


@cube(launch=True)
def runtime_dims(t: Tensor[f32], ds: Array[i32], out: Array[u32]):
    i = ABSOLUTE_POS
    if i < ds.len():
        d = ds[i]  # a runtime dimension, as Python indexes a shape: negative from the end
        if d < 5:
            s = t.shape(d)
        else:
            s = cb.u32(0)
        out[i * 2] = s
        out[i * 2 + 1] = t.stride(d)


@cube(launch=True)
def runtime_dims64(t: Tensor[f32], ds: Array[cb.i64], out: Array[u32]):
    i = ABSOLUTE_POS
    if i < ds.len():
        out[i] = t.shape(ds[i])  # compared as i64: no wrap to 32 bits


def _py_dim(seq, d):  # plain Python: a tuple index, else 0
    return seq[d] if -len(seq) <= d < len(seq) else 0


def _transposed(rt):
    x = np.arange(24, dtype=np.float32)  # a (6, 4) view with strides (1, 6)
    return rt.from_numpy(x).view((6, 4), (1, 6)), (6, 4), (1, 6)


def test_runtime_dims_read_as_python(rt):
    """t.shape(d) / t.stride(d) with d a runtime value: Python's reading of a negative index
    (from the end), 0 outside the rank."""
    t, shape, strides = _transposed(rt)
    ds = np.array([0, 1, -1, -2, -3, 2, 7, 4], np.int32)
    want = [[_py_dim(shape, d) if d < 5 else 0, _py_dim(strides, d)] for d in ds.tolist()]
    out = rt.zeros(len(ds) * 2, np.uint32)
    launch1d(runtime_dims, rt, len(ds), t=t, ds=rt.from_numpy(ds), out=out)
    np.testing.assert_array_equal(out.numpy().reshape(-1, 2), want)


def test_runtime_i64_dims_do_not_wrap(rt):
    t, shape, _ = _transposed(rt)
    ds = np.array([0, 1, 2**32, 2**32 + 1, -1, -2, 5, -(2**32)], np.int64)
    out = rt.zeros(len(ds), np.uint32)
    launch1d(runtime_dims64, rt, len(ds), t=t, ds=rt.from_numpy(ds), out=out)
    np.testing.assert_array_equal(out.numpy(), [_py_dim(shape, d) for d in ds.tolist()])


# ---- memory: shared, local, atomics -------------------------------------------------------

@cube(launch=True)
def tree_sum(x: Array[f32], out: Array[f32], BLOCK: Comptime[int]):
    s = cb.SharedMemory(f32, BLOCK)
    t = UNIT_POS
    s[t] = x[ABSOLUTE_POS]
    cb.sync_cube()
    stride = BLOCK // 2
    for _ in cb.range(int(math.log2(BLOCK)), unroll=True):
        if t < stride:
            s[t] = s[t] + s[t + stride]
        cb.sync_cube()
        stride = stride // 2
    if t == 0:
        out[CUBE_POS] = s[0]


@pytest.mark.parametrize("block", [2, 64, 256])
def test_shared_tree_reduction(rt, block):
    n = block * 9
    x = np.random.default_rng(3).random(n).astype(np.float32)
    out = rt.empty(9)
    tree_sum.launch(rt, cube_count=9, cube_dim=block, x=rt.from_numpy(x), out=out,
                    BLOCK=block)
    np.testing.assert_allclose(out.numpy(), x.reshape(9, block).astype(np.float64).sum(1),
                               rtol=1e-5)


@cube(launch=True)
def reverse_in_cube(x: Array[i32], out: Array[i32], BLOCK: Comptime[int]):
    s = cb.SharedMemory(i32, BLOCK)
    s[UNIT_POS] = x[ABSOLUTE_POS]
    cb.sync_cube()
    out[ABSOLUTE_POS] = s[BLOCK - 1 - UNIT_POS]


@pytest.mark.parametrize("block", [3, 100, 256])
def test_barrier_any_cube_dim(rt, block):
    x = np.arange(block * 5, dtype=np.int32)
    out = rt.from_numpy(np.zeros_like(x))
    reverse_in_cube.launch(rt, cube_count=5, cube_dim=block, x=rt.from_numpy(x), out=out,
                           BLOCK=block)
    np.testing.assert_array_equal(out.numpy(), x.reshape(5, block)[:, ::-1].ravel())


@cube(launch=True)
def local_sort(x: Array[i32], out: Array[i32]):
    i = ABSOLUTE_POS
    if i * 4 + 3 < x.len():
        a = cb.LocalArray(i32, 4)
        for k in range(4):
            a[k] = x[i * 4 + k]
        for p in range(4):
            for q in range(3 - p):
                if a[q] > a[q + 1]:
                    tmp = a[q]
                    a[q] = a[q + 1]
                    a[q + 1] = tmp
        for k in range(4):
            out[i * 4 + k] = a[k]


def test_local_array(rt):
    x = np.random.default_rng(4).integers(-99, 99, 400).astype(np.int32)
    out = rt.from_numpy(np.zeros_like(x))
    launch1d(local_sort, rt, 100, x=rt.from_numpy(x), out=out)
    np.testing.assert_array_equal(out.numpy(), np.sort(x.reshape(100, 4), axis=1).ravel())


@cube(launch=True)
def atomics(counter: Array[u32], tickets: Array[u32], mx: Array[i32], mn: Array[i32],
            fsum: Array[f32], xs: Array[i32]):
    i = ABSOLUTE_POS
    if i < tickets.len():
        tickets[i] = cb.atomic_add(counter, 0, 1)
        v = xs[i]
        cb.atomic_max(mx, 0, v)
        cb.atomic_min(mn, 0, v)
        cb.atomic_add(fsum, 0, 0.5)
        cb.atomic_or(mx, 1, i32(1) << i32(i % 31))
        cb.atomic_cas(mn, 1, 0, 7)
        cb.atomic_exchange(mn, 2, 5)


def test_atomics(rt):
    n = 3000
    xs = np.random.default_rng(5).integers(-10000, 10000, n).astype(np.int32)
    counter = rt.from_numpy(np.zeros(1, np.uint32))
    tickets = rt.from_numpy(np.zeros(n, np.uint32))
    mx = rt.from_numpy(np.array([-(2**31), 0], np.int32))
    mn = rt.from_numpy(np.array([2**31 - 1, 0, 0], np.int32))
    fsum = rt.from_numpy(np.zeros(1, np.float32))
    launch1d(atomics, rt, n, block=128, counter=counter, tickets=tickets, mx=mx, mn=mn,
             fsum=fsum, xs=rt.from_numpy(xs))
    assert counter.numpy()[0] == n
    np.testing.assert_array_equal(np.sort(tickets.numpy()), np.arange(n))
    assert mx.numpy()[0] == xs.max() and mn.numpy()[0] == xs.min()
    assert mx.numpy()[1] == 2**31 - 1  # bits 0..30 or-ed in by the units
    assert mn.numpy()[1] == 7 and mn.numpy()[2] == 5
    assert fsum.numpy()[0] == n * 0.5


@cube(launch=True)
def cas_bits(x: Array[F], cmp: Array[F], out: Array[F], lx: Array[F], lout: Array[F]):
    i = ABSOLUTE_POS
    if i < x.len():
        out[i] = cb.atomic_cas(x, i, cmp[i], F(7.0))
        loc = cb.LocalArray(F, 1)  # unit-private: lowered to a read-modify-write
        loc[0] = lx[i]
        lout[i] = cb.atomic_cas(loc, 0, cmp[i], F(7.0))
        lx[i] = loc[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_atomic_cas_compares_bits(rt, dtype):
    """A compare-and-swap compares bits, as every target's hardware does: -0.0 does not
    match 0.0, and a NaN matches a NaN of the same bits (plain float == says otherwise)."""
    mem = np.array([0.0, np.nan, 1.0, -0.0, np.inf, 2.0], dtype)
    cmp = np.array([-0.0, np.nan, 1.0, 0.0, np.inf, 3.0], dtype)
    same = mem.view(f"u{mem.itemsize}") == cmp.view(f"u{mem.itemsize}")
    want = np.where(same, dtype(7.0), mem)
    x, lx = rt.from_numpy(mem), rt.from_numpy(mem)
    out, lout = rt.empty(6, dtype), rt.empty(6, dtype)
    cas_bits.launch(rt, 1, 8, x=x, cmp=rt.from_numpy(cmp), out=out, lx=lx, lout=lout)
    for got in (x, lx):
        np.testing.assert_array_equal(got.numpy().view(f"u{mem.itemsize}"),
                                      want.view(f"u{mem.itemsize}"))
    for old in (out, lout):  # the old value, bit for bit
        np.testing.assert_array_equal(old.numpy().view(f"u{mem.itemsize}"),
                                      mem.view(f"u{mem.itemsize}"))


# ---- plane ops -----------------------------------------------------------------------------

@cube(launch=True)
def plane_ops(x: Array[i32], out: Tensor[i32]):
    i = ABSOLUTE_POS
    n = x.len()
    v = x[i]
    lane = UNIT_POS_PLANE
    r0 = cb.plane_sum(v)
    r1 = cb.plane_max(v)
    r2 = cb.plane_min(v)
    r3 = cb.plane_inclusive_sum(v)
    r4 = cb.plane_exclusive_sum(v)
    r5 = cb.plane_broadcast(v, 0)
    r6 = cb.plane_shuffle_xor(v, 1)
    r7 = i32(cb.plane_all(v > -1000)) + i32(cb.plane_any(v > 40)) * 2
    r8 = cb.plane_shuffle(v, (lane + 1) % PLANE_DIM)
    if i < n:
        for k, r in ((0, r0), (1, r1), (2, r2), (3, r3), (4, r4), (5, r5), (6, r6), (7, r7),
                     (8, r8)):
            out[k * n + i] = r


def _plane_ref(x, p):
    n = x.size
    out = np.zeros((9, n), np.int64)
    for s in range(0, n, p):
        g = x[s:s + p].astype(np.int64)
        m = g.size
        lanes = np.arange(m)
        out[0, s:s + m] = g.sum()
        out[1, s:s + m] = g.max()
        out[2, s:s + m] = g.min()
        out[3, s:s + m] = np.cumsum(g)
        out[4, s:s + m] = np.cumsum(g) - g
        out[5, s:s + m] = g[0]
        x1 = lanes ^ 1
        out[6, s:s + m] = np.where(x1 < m, g[np.minimum(x1, m - 1)], g)
        out[7, s:s + m] = int(np.all(g > -1000)) + 2 * int(np.any(g > 40))
        src = (lanes + 1) % p
        out[8, s:s + m] = np.where(src < m, g[np.minimum(src, m - 1)], g)
    return out.astype(np.int32)


def test_plane_ops(rt):
    n = 64
    x = np.random.default_rng(6).integers(-50, 50, n).astype(np.int32)
    out = rt.from_numpy(np.zeros((9, n), np.int32))
    plane_ops.launch(rt, cube_count=1, cube_dim=n, x=rt.from_numpy(x), out=out)
    np.testing.assert_array_equal(out.numpy(), _plane_ref(x, rt.plane_size))


# ---- checked / unchecked ------------------------------------------------------------------

@cube(launch=True)
def oob(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    out[i] = x[i + 5] + 1.0  # no guard: reads past x and writes past out


@cube(launch=True, unchecked=True)
def unchecked_add(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = x[i] + 1.0


def test_checked_mode_drops_oob(rt):
    x = np.arange(10, dtype=np.float32)
    big = rt.from_numpy(np.full(16, -1.0, np.float32))
    out = rt.from_numpy(np.full(10, -1.0, np.float32))
    oob.launch(rt, cube_count=1, cube_dim=16, x=rt.from_numpy(x), out=out)
    ref = np.concatenate([x[5:] + 1, np.ones(5, np.float32)])  # reads past x give 0
    np.testing.assert_array_equal(out.numpy(), ref)
    np.testing.assert_array_equal(big.numpy(), np.full(16, -1.0))  # untouched neighbour


def test_unchecked(rt):
    x = np.arange(100, dtype=np.float32)
    out = rt.empty(100)
    launch1d(unchecked_add, rt, 100, x=rt.from_numpy(x), out=out)
    np.testing.assert_array_equal(out.numpy(), x + 1)
    src = unchecked_add.source("ir")
    assert "len @x" not in src  # no bounds check on x in unchecked mode


def test_signed_negative_index_is_dropped(rt):
    @cube(launch=True)
    def neg(out: Array[i32]):
        i = i32(UNIT_POS) - 2
        out[i] = i

    out = rt.from_numpy(np.full(6, 99, np.int32))
    neg.launch(rt, cube_count=1, cube_dim=8, out=out)
    np.testing.assert_array_equal(out.numpy(), [0, 1, 2, 3, 4, 5])


# ---- launch API errors --------------------------------------------------------------------

def test_launch_errors(rt):
    x = rt.from_numpy(np.zeros(8, np.float32))
    with pytest.raises(cb.LaunchError, match="missing the argument 'out'"):
        unchecked_add.launch(rt, cube_count=1, cube_dim=8, x=x)
    with pytest.raises(cb.LaunchError, match="unexpected argument 'y'"):
        unchecked_add.launch(rt, cube_count=1, cube_dim=8, x=x, out=x, y=x)
    with pytest.raises(cb.LaunchError, match="must hold f32 elements, got i32"):
        unchecked_add.launch(rt, cube_count=1, cube_dim=8, x=x,
                             out=rt.from_numpy(np.zeros(8, np.int32)))
    with pytest.raises(cb.LaunchError, match="must be a buffer"):
        unchecked_add.launch(rt, cube_count=1, cube_dim=8, x=x, out=np.zeros(8, np.float32))
    with pytest.raises(cb.LaunchError, match="line size 3 does not divide"):
        x.lines(3)
    with pytest.raises(cb.LaunchError, match="has line size 4 but the kernel expects 1"):
        unchecked_add.launch(rt, cube_count=1, cube_dim=8, x=x.lines(4), out=x)
    with pytest.raises(cb.LaunchError, match="F is already f32"):
        axpby.launch(rt, cube_count=1, cube_dim=8, x=x, y=rt.from_numpy(np.zeros(8)),
                      out=x, a=1.0, b=1.0)
    with pytest.raises(cb.LaunchError, match="is i32 but got the float"):
        _scalar_kernel.launch(rt, cube_count=1, cube_dim=1,
                              out=rt.from_numpy(np.zeros(1, np.int32)), v=1.5)
    with pytest.raises(cb.LaunchError, match="outside the limit"):
        unchecked_add.launch(rt, cube_count=1, cube_dim=(1 << 20,), x=x, out=x)


@cube(launch=True)
def _scalar_kernel(out: Array[i32], v: i32):
    out[0] = v


def test_scalar_params(rt):
    out = rt.from_numpy(np.zeros(1, np.int32))
    _scalar_kernel.launch(rt, cube_count=1, cube_dim=1, out=out, v=-42)
    assert out.numpy()[0] == -42


def test_mixed_sign_compare_is_exact(rt):
    @cube(launch=True)
    def cmp(out: Array[i32], v: i32):
        out[0] = i32(UNIT_POS > v)

    out = rt.from_numpy(np.zeros(1, np.int32))
    cmp.launch(rt, cube_count=1, cube_dim=1, out=out, v=-1)
    assert out.numpy()[0] == 1  # 0u > -1 is true mathematically (C would say false)


def test_i64_u64_i8_types(rt):
    @cube(launch=True)
    def widen(a: Array[i8], b: Array[i64], c: Array[u64]):
        i = ABSOLUTE_POS
        if i < a.len():
            b[i] = i64(a[i]) * 1000000000000
            c[i] = u64(i) << u64(40)

    a = np.array([-128, -1, 0, 1, 127], np.int8)
    b = rt.from_numpy(np.zeros(5, np.int64))
    c = rt.from_numpy(np.zeros(5, np.uint64))
    widen.launch(rt, cube_count=1, cube_dim=8, a=rt.from_numpy(a), b=b, c=c)
    np.testing.assert_array_equal(b.numpy(), a.astype(np.int64) * 10**12)
    np.testing.assert_array_equal(c.numpy(), np.arange(5, dtype=np.uint64) << np.uint64(40))


def test_u32_cube_builtins_are_u32():
    @cube(launch=True)
    def k(out: Array[u32]):
        out[0] = CUBE_DIM + CUBE_COUNT + u32(UNIT_POS_Y) + CUBE_POS_Y

    assert "u32" in k.source("ir")


# ---- compile-time names that a runtime loop later carries --------------------------------

@cube(launch=True)
def carried(x: Array[f32], out: Array[f32], n: u32):
    s = 2  # compile-time here ...
    y = x[0] * f32(s)
    for _ in range(n):
        s = s * 2  # ... a runtime i32 from here on, seeded with 2
    t = 1.0
    if x[1] > 0.0:
        t = t + 1.0
    out[0] = f32(s) + y + t


@pytest.mark.parametrize("n", [0, 3])
def test_name_carried_by_runtime_loop(rt, n):
    x = np.array([1.5, 1.0], np.float32)
    out = rt.from_numpy(np.zeros(1, np.float32))
    carried.launch(rt, cube_count=1, cube_dim=1, x=rt.from_numpy(x), out=out, n=n)
    assert out.numpy()[0] == np.float32(2 * 2**n + 1.5 * 2 + 2.0)


@cube(launch=True)
def _bool_order(a: Array[cb.u32], b: Array[cb.u32], out: Array[cb.u32]):
    i = ABSOLUTE_POS
    if i < a.len():
        x, y = a[i] != 0, b[i] != 0  # bools, as a user's masks are
        r = cb.u32(0)
        if x < y:
            r += 1
        if x <= y:
            r += 2
        if x > y:
            r += 4
        if x >= y:
            r += 8
        out[i] = r


@cube(launch=True)
def _bool_order_lines(a: Array[Line[cb.u32]], b: Array[Line[cb.u32]],
                      out: Array[Line[cb.u32]]):
    L = cb.comptime(a.line_size())
    i = ABSOLUTE_POS
    if i < a.len():
        zero = Line[cb.u32, L](0)
        x = a[i] != zero
        y = b[i] != zero
        one = Line[cb.u32, L](1)
        out[i] = cb.select(x < y, one, zero) + cb.select(x <= y, one, zero) * 2 + \
            cb.select(x > y, one, zero) * 4 + cb.select(x >= y, one, zero) * 8


@pytest.mark.parametrize("line", [1, 4])
def test_ordered_compares_of_bools(rt, line):
    """Bools order False < True as in Python, on every target (SPIR-V has no ordered bool
    compare: its emitter refused `<` on bools, an error on wgpu-spirv only)."""
    a = np.array([0, 0, 1, 1, 1, 0, 0, 1], np.uint32)
    b = np.array([0, 1, 0, 1, 1, 1, 0, 0], np.uint32)
    want = [sum(w for w, c in ((1, x < y), (2, x <= y), (4, x > y), (8, x >= y)) if c)
            for x, y in zip(a.astype(bool).tolist(), b.astype(bool).tolist())]
    out = rt.empty((8,), np.uint32)
    da, db = rt.from_numpy(a), rt.from_numpy(b)
    if line == 1:
        _bool_order.launch(rt, cube_count=1, cube_dim=8, a=da, b=db, out=out)
    else:
        _bool_order_lines.launch(rt, cube_count=1, cube_dim=2, a=da.lines(4), b=db.lines(4),
                                 out=out.lines(4))
    assert out.numpy().tolist() == want

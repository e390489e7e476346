"""Tutorial and example kernels of other GPU kernel systems (Triton, Numba CUDA, NVIDIA Warp,
Taichi, CubeCL), ported to @cube the way a user coming from each would write them, run on
every runtime that starts, and compared with independent references: NumPy (float64 where
precision matters) and plain Python (unbounded ints masked to the kernel's width, where the
language promises wrapping).

Both import styles a user writes appear: `import cube as cb` with `@cb.cube`, and
`from cube import cube, ...`. Sizes are small: compiles are what this file spends its time on.
"""
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
    CUBE_POS,
    PLANE_DIM,
    UNIT_POS,
    UNIT_POS_PLANE,
    UNIT_POS_X,
    UNIT_POS_Y,
    Array,
    Comptime,
    Line,
    SharedMemory,
    Tensor,
    cube,
    f32,
    i32,
    u8,
    u32,
)

M32 = 0xFFFFFFFF
F = typing.TypeVar("F")


def cdiv(a, b):
    return (a + b - 1) // b


# =========================================================================================
# Triton tutorials
# =========================================================================================

# ---- 01 vector add: one program (cube) per BLOCK_SIZE elements, masked ------------------

@cb.cube(launch=True)
def add_kernel(x_ptr: cb.Array[cb.f32], y_ptr: cb.Array[cb.f32], output_ptr: cb.Array[cb.f32],
               n_elements: cb.i32, BLOCK_SIZE: cb.Comptime[int], UNITS: cb.Comptime[int]):
    pid = cb.CUBE_POS
    block_start = pid * BLOCK_SIZE
    # tl.arange(0, BLOCK_SIZE), spread over the cube's UNITS units
    for k in cb.range(BLOCK_SIZE // UNITS, unroll=True):
        offsets = block_start + k * UNITS + cb.UNIT_POS
        mask = offsets < n_elements  # u32 against i32: an exact comparison
        if mask:
            output_ptr[offsets] = x_ptr[offsets] + y_ptr[offsets]


def test_triton_vector_add(rt):
    n, block, units = 1000, 64, 16
    rng = np.random.default_rng(0)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    out = rt.from_numpy(np.full(n + 8, -1.0, np.float32))  # a tail the mask must not touch
    add_kernel.launch(rt, cube_count=cdiv(n, block), cube_dim=units, x_ptr=rt.from_numpy(x),
                      y_ptr=rt.from_numpy(y), output_ptr=out, n_elements=n, BLOCK_SIZE=block,
                      UNITS=units)
    got = out.numpy()
    np.testing.assert_array_equal(got[:n], x + y)
    np.testing.assert_array_equal(got[n:], -1.0)


# ---- 02 fused softmax: one row per cube, persistent over rows ------------------------------

@cube
def block_reduce(smem, value, BLOCK: Comptime[int], OP: Comptime[str]):
    """tl.max / tl.sum over the cube: a shared-memory tree; every unit gets the result."""
    t = UNIT_POS
    smem[t] = value
    cb.sync_cube()
    offset = u32(BLOCK // 2)  # a plain `BLOCK // 2` makes the loop's counter an i32
    while offset > 0:
        if t < offset:
            if OP == "max":
                smem[t] = max(smem[t], smem[t + offset])
            else:
                smem[t] += smem[t + offset]
        cb.sync_cube()
        offset //= 2
    r = smem[0]
    cb.sync_cube()
    return r


@cube(launch=True)
def softmax_kernel(output_ptr: Array[f32], input_ptr: Array[f32], input_row_stride: u32,
                   output_row_stride: u32, n_rows: u32, n_cols: u32, BLOCK_SIZE: Comptime[int]):
    smem = SharedMemory(f32, BLOCK_SIZE)
    # `for row_idx in tl.range(row_start, n_rows, row_step)`: the step is a runtime value, so
    # the persistent loop is a while loop
    row_idx = CUBE_POS
    while row_idx < n_rows:
        row_start_ptr = row_idx * input_row_stride
        row_max = -math.inf
        for col in range(UNIT_POS, n_cols, BLOCK_SIZE):
            row_max = max(row_max, input_ptr[row_start_ptr + col])
        row_max = block_reduce(smem, row_max, BLOCK_SIZE, "max")
        denominator = 0.0
        for col in range(UNIT_POS, n_cols, BLOCK_SIZE):
            denominator += cb.exp(input_ptr[row_start_ptr + col] - row_max)
        denominator = block_reduce(smem, denominator, BLOCK_SIZE, "sum")
        out_row = row_idx * output_row_stride
        for col in range(UNIT_POS, n_cols, BLOCK_SIZE):
            numerator = cb.exp(input_ptr[row_start_ptr + col] - row_max)
            output_ptr[out_row + col] = numerator / denominator
        row_idx += CUBE_COUNT


def test_triton_fused_softmax(rt):
    n_rows, n_cols, stride, block = 7, 50, 56, 16
    x = np.random.default_rng(1).standard_normal((n_rows, stride)).astype(np.float32) * 5
    x[3, :n_cols] = -1e4  # a flat row
    out = rt.from_numpy(np.full((n_rows, n_cols), np.nan, np.float32))
    softmax_kernel.launch(rt, cube_count=3, cube_dim=block, output_ptr=out,
                          input_ptr=rt.from_numpy(x), input_row_stride=stride,
                          output_row_stride=n_cols, n_rows=n_rows, n_cols=n_cols,
                          BLOCK_SIZE=block)
    x64 = x[:, :n_cols].astype(np.float64)
    e = np.exp(x64 - x64.max(1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


# ---- 03 matmul: tiles, grouped program ordering, leaky_relu epilogue -----------------------

@cube
def leaky_relu(x):
    return x if x >= 0.0 else 0.01 * x  # tl.where(x >= 0, x, 0.01 * x)


@cube
def grouped_pid(pid, M, N, BLOCK_M: Comptime[int], BLOCK_N: Comptime[int],
                GROUP_M: Comptime[int]):
    num_pid_m = (M + BLOCK_M - 1) // BLOCK_M  # tl.cdiv
    num_pid_n = (N + BLOCK_N - 1) // BLOCK_N
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@cube(launch=True)
def matmul_kernel(a: Array[F], b: Array[F], c: Array[F], M: i32, N: i32, K: i32,
                  BLOCK_M: Comptime[int], BLOCK_N: Comptime[int], BLOCK_K: Comptime[int],
                  GROUP_M: Comptime[int], ACTIVATION: Comptime[str]):
    pid = i32(CUBE_POS)
    pid_m, pid_n = grouped_pid(pid, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    ty, tx = i32(UNIT_POS_Y), i32(UNIT_POS_X)
    row = pid_m * BLOCK_M + ty
    col = pid_n * BLOCK_N + tx
    a_tile = SharedMemory(F, BLOCK_M * BLOCK_K)  # tiles in the inputs' type (fp16 in SRAM)
    b_tile = SharedMemory(F, BLOCK_K * BLOCK_N)
    accumulator = 0.0
    for k0 in range(0, K, BLOCK_K):
        # each unit loads its share of the two tiles (masked: other=0.0)
        for j in range(tx, BLOCK_K, BLOCK_N):
            kk = k0 + j
            a_tile[ty * BLOCK_K + j] = a[row * K + kk] if row < M and kk < K else 0.0
        for j in range(ty, BLOCK_K, BLOCK_M):
            kk = k0 + j
            b_tile[j * BLOCK_N + tx] = b[kk * N + col] if kk < K and col < N else 0.0
        cb.sync_cube()
        for j in cb.range(BLOCK_K, unroll=True):
            accumulator += f32(a_tile[ty * BLOCK_K + j]) * f32(b_tile[j * BLOCK_N + tx])
        cb.sync_cube()
    if ACTIVATION == "leaky_relu":
        accumulator = leaky_relu(accumulator)
    if row < M and col < N:
        c[row * N + col] = accumulator  # f32 stored into F memory: rounded, as .to(fp16)


def _grouped_ref(pid, M, N, bm, bn, gm):
    num_pid_m, num_pid_n = cdiv(M, bm), cdiv(N, bn)
    in_group = gm * num_pid_n
    first = pid // in_group * gm
    size = min(num_pid_m - first, gm)
    return first + (pid % in_group) % size, (pid % in_group) // size


@pytest.mark.parametrize("activation, dtype", [("leaky_relu", np.float32), ("", np.float32),
                                               ("leaky_relu", np.float16)])
def test_triton_matmul_grouped_leaky_relu(rt, activation, dtype):
    M, N, K, bm, bn, bk, gm = 37, 29, 45, 8, 8, 16, 3
    rng = np.random.default_rng(2)
    a = rng.standard_normal((M, K)).astype(dtype)
    b = rng.standard_normal((K, N)).astype(dtype)
    c = rt.from_numpy(np.full((M, N), np.nan, dtype))
    grid = cdiv(M, bm) * cdiv(N, bn)
    # the grouped ordering visits every tile once (plain Python)
    assert sorted(_grouped_ref(p, M, N, bm, bn, gm) for p in range(grid)) == [
        (m, n) for m in range(cdiv(M, bm)) for n in range(cdiv(N, bn))]
    matmul_kernel.launch(rt, cube_count=grid, cube_dim=(bn, bm), a=rt.from_numpy(a),
                         b=rt.from_numpy(b), c=c, M=M, N=N, K=K, BLOCK_M=bm, BLOCK_N=bn,
                         BLOCK_K=bk, GROUP_M=gm, ACTIVATION=activation)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if activation:
        ref = np.where(ref >= 0, ref, 0.01 * ref)
    tol = 1e-4 if dtype == np.float32 else 2e-3  # fp16: the final rounding
    np.testing.assert_allclose(c.numpy().astype(np.float64), ref, rtol=tol, atol=tol)


# ---- 04 low-memory dropout: a seeded hash of the offsets keeps or drops -----------------

@cube
def hash_u32(x):
    """lowbias32 (C. Wellons): a u32 avalanche; multiplies wrap mod 2**32."""
    x ^= x >> 16
    x *= 0x7FEB352D
    x ^= x >> 15
    x *= 0x846CA68B
    x ^= x >> 16
    return x


@cube
def rand_uniform(seed, offset):
    """tl.rand(seed, offsets): a float in [0, 1) from the top 24 bits of the hash."""
    h = hash_u32(offset ^ hash_u32(seed))
    return f32(h >> 8) * (1.0 / 16777216.0)


@cube(launch=True)
def seeded_dropout(x_ptr: Array[f32], output_ptr: Array[f32], n_elements: u32, p: f32,
                   scale: f32, seed: u32):
    offsets = ABSOLUTE_POS
    mask = offsets < n_elements
    if mask:
        x = x_ptr[offsets]
        random = rand_uniform(seed, offsets)
        x_keep = random > p
        output_ptr[offsets] = x * scale if x_keep else 0.0


def _hash_py(x):
    x &= M32
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    x ^= x >> 16
    return x


def _dropout_ref(x, p, scale, seed):
    out = np.zeros_like(x)
    hs = _hash_py(seed)
    for i, v in enumerate(x.tolist()):
        r = (_hash_py(i ^ hs) >> 8) / 16777216.0  # exact: 24 bits
        if r > p:
            out[i] = np.float32(v) * np.float32(scale)
    return out


def test_triton_low_memory_dropout(rt):
    n, p = 777, np.float32(0.4)
    scale = np.float32(1.0) / (np.float32(1.0) - p)
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32) + 3.0  # never 0
    dx = rt.from_numpy(x)
    outs = []
    for seed in (123, 0xDEADBEEF, 123):
        out = rt.from_numpy(np.full(n, np.nan, np.float32))
        seeded_dropout.launch(rt, cube_count=cdiv(n, 64), cube_dim=64, x_ptr=dx,
                              output_ptr=out, n_elements=n, p=p, scale=scale, seed=seed)
        np.testing.assert_array_equal(out.numpy(), _dropout_ref(x, float(p), scale, seed))
        outs.append(out.numpy())
    np.testing.assert_array_equal(outs[0], outs[2])  # the same seed, the same mask
    assert not np.array_equal(outs[0] != 0, outs[1] != 0)
    assert 0.5 < np.mean(outs[0] != 0) < 0.7


# ---- 05 layer norm forward: mean, variance, rstd, affine; Mean and Rstd saved ------------

@cube(launch=True)
def layer_norm_fwd(X: Array[f32], Y: Array[f32], W: Array[f32], B: Array[f32],
                   Mean: Array[f32], Rstd: Array[f32], stride: u32, N: u32, eps: f32,
                   BLOCK_SIZE: Comptime[int]):
    row = CUBE_POS
    smem = SharedMemory(f32, BLOCK_SIZE)
    base = row * stride
    _mean = 0.0
    for off in range(0, N, BLOCK_SIZE):
        cols = off + UNIT_POS
        a = X[base + cols] if cols < N else 0.0
        _mean += a
    mean = block_reduce(smem, _mean, BLOCK_SIZE, "sum") / f32(N)
    _var = 0.0
    for off in range(0, N, BLOCK_SIZE):
        cols = off + UNIT_POS
        if cols < N:
            x = X[base + cols] - mean
            _var += x * x
    var = block_reduce(smem, _var, BLOCK_SIZE, "sum") / f32(N)
    rstd = 1.0 / cb.sqrt(var + eps)
    if UNIT_POS == 0:
        Mean[row] = mean
        Rstd[row] = rstd
    for off in range(0, N, BLOCK_SIZE):
        cols = off + UNIT_POS
        if cols < N:
            x_hat = (X[base + cols] - mean) * rstd
            Y[base + cols] = x_hat * W[cols] + B[cols]


def test_triton_layer_norm(rt):
    rows, n, block, eps = 6, 45, 16, 1e-5
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((rows, n)) * 2 + 0.5).astype(np.float32)
    w, b = rng.random(n, dtype=np.float32), rng.standard_normal(n).astype(np.float32)
    y, mean, rstd = rt.empty((rows, n)), rt.empty(rows), rt.empty(rows)
    layer_norm_fwd.launch(rt, cube_count=rows, cube_dim=block, X=rt.from_numpy(x), Y=y,
                          W=rt.from_numpy(w), B=rt.from_numpy(b), Mean=mean, Rstd=rstd,
                          stride=n, N=n, eps=eps, BLOCK_SIZE=block)
    x64 = x.astype(np.float64)
    mu = x64.mean(1)
    rs = 1 / np.sqrt(x64.var(1) + eps)
    np.testing.assert_allclose(mean.numpy(), mu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd.numpy(), rs, rtol=1e-5)
    ref = (x64 - mu[:, None]) * rs[:, None] * w + b
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5, atol=1e-5)


# =========================================================================================
# Numba CUDA examples
# =========================================================================================

# ---- increment_by_one, 1-D and 2-D (cuda.grid) --------------------------------------------

@cube(launch=True)
def increment_by_one(an_array: Array[i32]):
    pos = ABSOLUTE_POS  # cuda.grid(1)
    if pos < len(an_array):  # an_array.size
        an_array[pos] += 1


@cube(launch=True)
def increment_a_2d_array(an_array: Tensor[f32]):
    x, y = ABSOLUTE_POS_X, ABSOLUTE_POS_Y  # cuda.grid(2)
    if x < an_array.shape(0) and y < an_array.shape(1):
        an_array[x * an_array.stride(0) + y * an_array.stride(1)] += 1.0


def test_numba_increment(rt):
    a = np.arange(-50, 50, dtype=np.int32)
    da = rt.from_numpy(a)
    increment_by_one.launch(rt, cube_count=4, cube_dim=32, an_array=da)
    increment_by_one.launch(rt, cube_count=4, cube_dim=32, an_array=da)
    np.testing.assert_array_equal(da.numpy(), a + 2)
    m = np.arange(13 * 7, dtype=np.float32).reshape(13, 7)
    dm = rt.from_numpy(m)
    increment_a_2d_array.launch(rt, cube_count=(4, 2), cube_dim=(4, 4), an_array=dm)
    np.testing.assert_array_equal(dm.numpy(), m + 1)


# ---- fast_matmul: shared-memory tiles with syncthreads ------------------------------------

@cube(launch=True)
def fast_matmul(A: Tensor[f32], B: Tensor[f32], C: Tensor[f32], TPB: Comptime[int]):
    sA = cb.SharedMemory(f32, TPB * TPB)  # cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    sB = cb.SharedMemory(f32, TPB * TPB)
    x, y = ABSOLUTE_POS_X, ABSOLUTE_POS_Y
    tx = UNIT_POS_X
    ty = UNIT_POS_Y
    k = A.shape(1)
    tmp = f32(0.0)
    for i in range((k + TPB - 1) // TPB):
        sA[ty * TPB + tx] = 0.0
        sB[ty * TPB + tx] = 0.0
        if y < A.shape(0) and tx + i * TPB < k:
            sA[ty * TPB + tx] = A[y * A.stride(0) + (tx + i * TPB) * A.stride(1)]
        if x < B.shape(1) and ty + i * TPB < k:
            sB[ty * TPB + tx] = B[(ty + i * TPB) * B.stride(0) + x * B.stride(1)]
        cb.sync_cube()
        for j in range(TPB):
            tmp += sA[ty * TPB + j] * sB[j * TPB + tx]
        cb.sync_cube()
    if y < C.shape(0) and x < C.shape(1):
        C[y * C.stride(0) + x * C.stride(1)] = tmp


def test_numba_fast_matmul(rt):
    m, k, n, tpb = 19, 23, 13, 8
    rng = np.random.default_rng(5)
    a = rng.standard_normal((m, k)).astype(np.float32)
    bt = rng.standard_normal((n, k)).astype(np.float32)
    db = rt.from_numpy(bt).view((k, n), (1, k))  # B as a transposed (strided) view
    c = rt.from_numpy(np.full((m, n), np.nan, np.float32))
    fast_matmul.launch(rt, cube_count=(cdiv(n, tpb), cdiv(m, tpb)), cube_dim=(tpb, tpb),
                       A=rt.from_numpy(a), B=db, C=c, TPB=tpb)
    ref = a.astype(np.float64) @ bt.T.astype(np.float64)
    np.testing.assert_allclose(c.numpy(), ref, rtol=1e-4, atol=1e-4)


def test_numba_early_return_before_syncthreads_is_refused():
    """The first version of Numba's fast_matmul returned early (`if x >= C.shape[0] ...:
    return`) before its syncthreads: a unit that leaves skips the barrier."""
    @cube(launch=True)
    def fast_matmul_early_return(A: Tensor[f32], C: Tensor[f32], TPB: Comptime[int]):
        sA = cb.SharedMemory(f32, TPB * TPB)
        x, y = ABSOLUTE_POS_X, ABSOLUTE_POS_Y
        if x >= C.shape(0) and y >= C.shape(1):
            return
        sA[UNIT_POS] = A[x]
        cb.sync_cube()
        C[y] = sA[0]

    with pytest.raises(cb.CompileError, match="returning early would skip barriers") as e:
        fast_matmul_early_return.source("ir", TPB=4, ranks={"A": 2, "C": 2})
    assert "test_tutorial_kernels.py:" in str(e.value) and "return" in str(e.value)


# ---- sum reduction: shared memory, interleaved halving loop -------------------------------

@cube(launch=True)
def array_sum(data: Array[i32], partial: Array[i32], total: Array[i32], NELEM: Comptime[int]):
    tid = UNIT_POS
    i = ABSOLUTE_POS
    shr = cb.SharedMemory(i32, NELEM)
    shr[tid] = data[i] if i < len(data) else 0
    cb.sync_cube()
    s = u32(1)
    while s < CUBE_DIM:
        if tid % (2 * s) == 0:
            shr[tid] += shr[tid + s]
        s *= 2
        cb.sync_cube()
    if tid == 0:
        partial[CUBE_POS] = shr[tid]
        cb.atomic_add(total, 0, shr[tid])


def test_numba_shared_reduction(rt):
    n, block = 1000, 64
    data = np.random.default_rng(6).integers(-1000, 1000, n).astype(np.int32)
    blocks = cdiv(n, block)
    partial = rt.from_numpy(np.zeros(blocks, np.int32))
    total = rt.from_numpy(np.zeros(1, np.int32))
    array_sum.launch(rt, cube_count=blocks, cube_dim=block, data=rt.from_numpy(data),
                     partial=partial, total=total, NELEM=block)
    padded = np.concatenate([data, np.zeros(blocks * block - n, np.int32)])
    np.testing.assert_array_equal(partial.numpy(), padded.reshape(blocks, block).sum(1))
    assert int(total.numpy()[0]) == int(data.sum())


def test_numba_syncthreads_under_thread_condition_is_refused():
    """Numba's doc reduction puts the whole body, syncthreads included, under
    `if tid < size:`: a barrier some units may not reach."""
    @cube(launch=True)
    def array_sum_divergent(data: Array[i32], NELEM: Comptime[int]):
        tid = UNIT_POS
        size = len(data)
        if tid < size:
            shr = cb.SharedMemory(i32, NELEM)
            shr[tid] = data[ABSOLUTE_POS]
            cb.sync_cube()
            if tid == 0:
                data[tid] = shr[tid]

    with pytest.raises(cb.CompileError, match="sync_cube in divergent control flow") as e:
        array_sum_divergent.source("ir", NELEM=8)
    assert "test_tutorial_kernels.py:" in str(e.value)


# ---- 1-D stencil / convolution with a shared halo ------------------------------------------

@cube(launch=True)
def stencil_1d(inp: Array[f32], weights: Array[f32], out: Array[f32], RADIUS: Comptime[int],
               BLOCK: Comptime[int]):
    temp = cb.SharedMemory(f32, BLOCK + 2 * RADIUS)
    gindex = i32(ABSOLUTE_POS)
    lindex = i32(UNIT_POS) + RADIUS
    n = i32(len(inp))
    temp[lindex] = inp[gindex] if gindex < n else 0.0
    if UNIT_POS < RADIUS:
        left = gindex - RADIUS
        temp[lindex - RADIUS] = inp[left] if left >= 0 else 0.0
        right = gindex + BLOCK
        temp[lindex + BLOCK] = inp[right] if right < n else 0.0
    cb.sync_cube()
    result = 0.0
    for offset in cb.range(-RADIUS, RADIUS + 1, unroll=True):
        result += weights[offset + RADIUS] * temp[lindex + offset]
    if gindex < n:
        out[gindex] = result


def test_numba_stencil_1d(rt):
    n, radius, block = 300, 3, 32
    rng = np.random.default_rng(7)
    x = rng.standard_normal(n).astype(np.float32)
    w = rng.standard_normal(2 * radius + 1).astype(np.float32)
    out = rt.empty(n)
    stencil_1d.launch(rt, cube_count=cdiv(n, block), cube_dim=block, inp=rt.from_numpy(x),
                      weights=rt.from_numpy(w), out=out, RADIUS=radius, BLOCK=block)
    xp = np.pad(x.astype(np.float64), radius)
    ref = sum(w[j] * xp[j:j + n] for j in range(2 * radius + 1))
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)


# ---- histogram with atomics, grid-stride -------------------------------------------------

@cube(launch=True)
def histogram_kernel(x: Array[f32], xmin: f32, xmax: f32, histogram_out: Array[u32]):
    nbins = len(histogram_out)
    bin_width = (xmax - xmin) / f32(nbins)
    # for i in range(start, x.shape[0], stride): a runtime step, so a while loop
    i = ABSOLUTE_POS
    stride = CUBE_DIM * CUBE_COUNT  # cuda.gridsize(1)
    while i < len(x):
        v = x[i]
        i += stride
        if math.isnan(v):
            continue
        bin_number = i32((v - xmin) / bin_width)
        if bin_number >= 0 and bin_number < nbins:
            cb.atomic_add(histogram_out, bin_number, 1)


def test_numba_histogram(rt):
    n, nbins = 3000, 20
    x = np.random.default_rng(8).normal(0, 1.5, n).astype(np.float32)
    x[::97] = np.nan
    xmin, xmax = np.float32(-3.0), np.float32(3.0)
    hist = rt.from_numpy(np.zeros(nbins, np.uint32))
    histogram_kernel.launch(rt, cube_count=3, cube_dim=64, x=rt.from_numpy(x), xmin=xmin,
                            xmax=xmax, histogram_out=hist)
    bw = (xmax - xmin) / np.float32(nbins)
    ok = ~np.isnan(x)
    with np.errstate(invalid="ignore"):
        b = np.trunc((x[ok] - xmin) / bw).astype(np.int64)  # np.int32(...) truncates too
    ref = np.bincount(b[(b >= 0) & (b < nbins)], minlength=nbins)
    np.testing.assert_array_equal(hist.numpy(), ref)


# ---- integer histogram and particle binning: Python's % and // on negatives -------------

@cube(launch=True)
def bin_particles(px: Array[i32], py: Array[i32], counts: Array[u32], CELL: Comptime[int],
                  G: Comptime[int]):
    i = ABSOLUTE_POS
    if i < len(px):
        cx = px[i] // CELL  # floor, also below 0
        cy = py[i] // CELL
        cell = cx % G + (cy % G) * G  # periodic: in [0, G*G) for negatives too
        cb.atomic_add(counts, cell, 1)


def test_particle_binning_floor_and_mod(rt):
    n, cell, g = 500, 7, 5
    rng = np.random.default_rng(9)
    px = rng.integers(-100, 100, n).astype(np.int32)
    py = rng.integers(-100, 100, n).astype(np.int32)
    counts = rt.from_numpy(np.zeros(g * g, np.uint32))
    bin_particles.launch(rt, cube_count=cdiv(n, 64), cube_dim=64, px=rt.from_numpy(px),
                         py=rt.from_numpy(py), counts=counts, CELL=cell, G=g)
    ref = [0] * (g * g)
    for a, b in zip(px.tolist(), py.tolist()):  # plain Python
        ref[(a // cell) % g + ((b // cell) % g) * g] += 1
    assert counts.numpy().tolist() == ref


# ---- Monte Carlo pi with xorshift32 (uint32 wraparound) ----------------------------------

@cube
def xorshift32(state):
    state ^= state << 13
    state ^= state >> 17
    state ^= state << 5
    return state


@cube(launch=True)
def monte_carlo_pi(hits: Array[u32], fhits: Array[u32], seed: u32, SAMPLES: Comptime[int]):
    tid = ABSOLUTE_POS
    if tid >= len(hits):
        return
    s = (seed ^ (tid * 2654435761)) | 1  # Knuth's multiplicative hash, never 0
    inside = u32(0)
    finside = 0
    for _ in range(SAMPLES):
        s = xorshift32(s)
        x = s >> 17
        s = xorshift32(s)
        y = s >> 17
        if x * x + y * y < 32768 * 32768:  # exact in u32: at most 2 * 32767**2
            inside += 1
        fx = f32(x) / 32768.0
        fy = f32(y) / 32768.0
        if fx * fx + fy * fy < 1.0:
            finside += 1
    hits[tid] = inside
    fhits[tid] = u32(finside)


def _xorshift_py(s):
    s ^= (s << 13) & M32
    s ^= s >> 17
    s ^= (s << 5) & M32
    return s


def _monte_carlo_ref(units, seed, samples):
    hits, fhits = [], []
    for t in range(units):
        s = (seed ^ ((t * 2654435761) & M32)) | 1
        c = fc = 0
        for _ in range(samples):
            s = _xorshift_py(s)
            x = s >> 17
            s = _xorshift_py(s)
            y = s >> 17
            c += x * x + y * y < 32768 * 32768
            fx, fy = np.float32(x / 32768.0), np.float32(y / 32768.0)
            fc += bool(fx * fx + fy * fy < np.float32(1.0))
        hits.append(c)
        fhits.append(fc)
    return hits, fhits


def test_numba_monte_carlo_xorshift(rt):
    units, samples, seed = 96, 40, 0x1234ABCD
    hits = rt.from_numpy(np.zeros(units, np.uint32))
    fhits = rt.from_numpy(np.zeros(units, np.uint32))
    monte_carlo_pi.launch(rt, cube_count=2, cube_dim=64, hits=hits, fhits=fhits, seed=seed,
                          SAMPLES=samples)
    ref, fref = _monte_carlo_ref(units, seed, samples)
    assert hits.numpy().tolist() == ref
    # fx*fx + fy*fy: exact products of 15-bit values, one rounding in the sum
    assert fhits.numpy().tolist() == fref
    assert abs(4 * sum(ref) / (units * samples) - math.pi) < 0.1


# ---- numba.cuda.random: xoroshiro128+ states in u64, uniform doubles -------------------

@cube
def rotl64(x, k: Comptime[int]):
    return (x << k) | (x >> (64 - k))


@cube
def xoroshiro128p_next(states, i):
    s0 = states[2 * i]
    s1 = states[2 * i + 1]
    result = s0 + s1
    s1 ^= s0
    states[2 * i] = rotl64(s0, 55) ^ s1 ^ (s1 << 14)
    states[2 * i + 1] = rotl64(s1, 36)
    return result


@cube(launch=True)
def xoroshiro_uniform(states: Array[cb.u64], out: Array[cb.f64], SAMPLES: Comptime[int]):
    i = ABSOLUTE_POS
    if 2 * i + 1 < len(states):
        for k in range(SAMPLES):
            r = xoroshiro128p_next(states, i)
            out[i * SAMPLES + k] = cb.f64(r >> 11) * (1.0 / 9007199254740992.0)  # 2**-53


M64 = (1 << 64) - 1


def _splitmix64(seed, n):
    z, out = seed, []
    for _ in range(n):
        z = (z + 0x9E3779B97F4A7C15) & M64
        x = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
        out.append(x ^ (x >> 31))
    return out


def _xoroshiro_ref(states, samples):
    def rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & M64

    st, out = list(states), []
    for i in range(len(st) // 2):
        for _ in range(samples):
            s0, s1 = st[2 * i], st[2 * i + 1]
            r = (s0 + s1) & M64
            s1 ^= s0
            st[2 * i] = rotl(s0, 55) ^ s1 ^ ((s1 << 14) & M64)
            st[2 * i + 1] = rotl(s1, 36)
            out.append((r >> 11) / 9007199254740992.0)
    return st, out


def test_numba_xoroshiro128p(rt):
    units, samples = 8, 5
    seeds = _splitmix64(1234, 2 * units)
    states = rt.from_numpy(np.array(seeds, np.uint64))
    out = rt.from_numpy(np.zeros(units * samples, np.float64))
    xoroshiro_uniform.launch(rt, cube_count=1, cube_dim=units, states=states, out=out,
                             SAMPLES=samples)
    st_ref, out_ref = _xoroshiro_ref(seeds, samples)
    assert states.numpy().tolist() == st_ref
    np.testing.assert_array_equal(out.numpy(), out_ref)


# ---- prefix sums: Hillis-Steele (double buffer) and Blelloch (work-efficient) -------------

@cube(launch=True)
def scan_hillis_steele(x: Array[i32], out: Array[i32], N: Comptime[int]):
    temp = SharedMemory(i32, 2 * N)
    thid = UNIT_POS
    pout, pin = u32(0), u32(1)  # plain 0, 1 become i32 once the loop swaps them
    temp[pout * N + thid] = x[thid - 1] if thid > 0 else 0  # exclusive: shift right by one
    cb.sync_cube()
    offset = u32(1)
    while offset < N:
        pout, pin = 1 - pout, 1 - pin  # swap the double buffer
        if thid >= offset:
            temp[pout * N + thid] = temp[pin * N + thid] + temp[pin * N + thid - offset]
        else:
            temp[pout * N + thid] = temp[pin * N + thid]
        cb.sync_cube()
        offset *= 2
    out[thid] = temp[pout * N + thid]


@cube(launch=True)
def scan_blelloch(g_idata: Array[i32], g_odata: Array[i32], N: Comptime[int]):
    temp = SharedMemory(i32, N)
    thid = UNIT_POS
    temp[2 * thid] = g_idata[2 * thid]
    temp[2 * thid + 1] = g_idata[2 * thid + 1]
    offset = u32(1)
    d = u32(N >> 1)
    while d > 0:  # up-sweep (reduce)
        cb.sync_cube()
        if thid < d:
            ai = offset * (2 * thid + 1) - 1
            bi = offset * (2 * thid + 2) - 1
            temp[bi] += temp[ai]
        offset *= 2
        d >>= 1
    if thid == 0:
        temp[N - 1] = 0  # clear the last element
    d = u32(1)
    while d < N:  # down-sweep
        offset >>= 1
        cb.sync_cube()
        if thid < d:
            ai = offset * (2 * thid + 1) - 1
            bi = offset * (2 * thid + 2) - 1
            t = temp[ai]
            temp[ai] = temp[bi]
            temp[bi] += t
        d *= 2
    cb.sync_cube()
    g_odata[2 * thid] = temp[2 * thid]
    g_odata[2 * thid + 1] = temp[2 * thid + 1]


def test_numba_prefix_sums(rt):
    n = 64
    x = np.random.default_rng(10).integers(-100, 100, n).astype(np.int32)
    excl = np.concatenate([[0], np.cumsum(x)[:-1]]).astype(np.int32)
    dx = rt.from_numpy(x)
    out = rt.from_numpy(np.full(n, 7, np.int32))
    scan_hillis_steele.launch(rt, cube_count=1, cube_dim=n, x=dx, out=out, N=n)
    np.testing.assert_array_equal(out.numpy(), excl)
    out2 = rt.from_numpy(np.full(n, 7, np.int32))
    scan_blelloch.launch(rt, cube_count=1, cube_dim=n // 2, g_idata=dx, g_odata=out2, N=n)
    np.testing.assert_array_equal(out2.numpy(), excl)


# =========================================================================================
# NVIDIA Warp / Taichi examples
# =========================================================================================

# ---- n-body step (float3 math written with scalars), a tuple-returning helper -----------

@cube
def body_accel(xi, yi, zi, xj, yj, zj, mj, eps2):
    dx = xj - xi
    dy = yj - yi
    dz = zj - zi
    r2 = dx * dx + dy * dy + dz * dz + eps2
    inv_r = cb.rsqrt(r2)
    s = mj * inv_r * inv_r * inv_r
    return dx * s, dy * s, dz * s


@cube(launch=True)
def integrate_bodies(pos: Array[f32], vel: Array[f32], mass: Array[f32], new_pos: Array[f32],
                     new_vel: Array[f32], dt: f32, eps2: f32):
    tid = ABSOLUTE_POS
    n = len(mass)
    if tid < n:
        xi, yi, zi = pos[3 * tid], pos[3 * tid + 1], pos[3 * tid + 2]
        ax = ay = az = 0.0
        for j in range(n):
            fx, fy, fz = body_accel(xi, yi, zi, pos[3 * j], pos[3 * j + 1], pos[3 * j + 2],
                                    mass[j], eps2)
            ax, ay, az = ax + fx, ay + fy, az + fz
        vx = vel[3 * tid] + ax * dt
        vy = vel[3 * tid + 1] + ay * dt
        vz = vel[3 * tid + 2] + az * dt
        new_vel[3 * tid], new_vel[3 * tid + 1], new_vel[3 * tid + 2] = vx, vy, vz
        new_pos[3 * tid] = xi + vx * dt
        new_pos[3 * tid + 1] = yi + vy * dt
        new_pos[3 * tid + 2] = zi + vz * dt


def test_warp_nbody_step(rt):
    n, dt, eps2 = 50, 0.01, 0.01
    rng = np.random.default_rng(11)
    p = rng.standard_normal((n, 3)).astype(np.float32)
    v = rng.standard_normal((n, 3)).astype(np.float32) * 0.1
    m = rng.random(n, dtype=np.float32) + 0.5
    np_, nv = rt.empty(3 * n), rt.empty(3 * n)
    integrate_bodies.launch(rt, cube_count=cdiv(n, 32), cube_dim=32, pos=rt.from_numpy(p),
                            vel=rt.from_numpy(v), mass=rt.from_numpy(m), new_pos=np_,
                            new_vel=nv, dt=dt, eps2=eps2)
    p64 = p.astype(np.float64)
    d = p64[None, :, :] - p64[:, None, :]
    r2 = (d * d).sum(-1) + eps2
    acc = (d * (m[None, :, None] / r2[:, :, None] ** 1.5)).sum(1)
    v_ref = v + acc * dt
    np.testing.assert_allclose(nv.numpy().reshape(n, 3), v_ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np_.numpy().reshape(n, 3), p64 + v_ref * dt, rtol=1e-5,
                               atol=1e-5)


# ---- 2-D heat equation (Jacobi) with fixed boundaries -------------------------------------

@cube(launch=True)
def jacobi_step(u: Tensor[f32], u_new: Tensor[f32], alpha: f32):
    i, j = ABSOLUTE_POS_Y, ABSOLUTE_POS_X
    h, w = u.shape(0), u.shape(1)
    if i < h and j < w:
        idx = i * w + j
        if i == 0 or j == 0 or i == h - 1 or j == w - 1:
            val = u[idx]  # Dirichlet boundary: kept
        else:
            lap = u[idx - w] + u[idx + w] + u[idx - 1] + u[idx + 1] - 4.0 * u[idx]
            val = u[idx] + alpha * lap
        u_new[idx] = val


def test_taichi_heat_jacobi(rt):
    h, w, steps, alpha = 12, 17, 6, 0.2
    u0 = np.zeros((h, w), np.float32)
    u0[0, :] = 1.0
    u0[:, -1] = np.linspace(0, 2, h)
    u0[5:7, 6:9] = 3.0
    bufs = [rt.from_numpy(u0), rt.from_numpy(np.zeros_like(u0))]
    for s in range(steps):
        jacobi_step.launch(rt, cube_count=(cdiv(w, 8), cdiv(h, 8)), cube_dim=(8, 8),
                           u=bufs[s % 2], u_new=bufs[(s + 1) % 2], alpha=alpha)
    ref = u0.astype(np.float64)
    for _ in range(steps):
        nxt = ref.copy()
        c = ref[1:-1, 1:-1]
        nxt[1:-1, 1:-1] = c + alpha * (ref[:-2, 1:-1] + ref[2:, 1:-1] + ref[1:-1, :-2]
                                       + ref[1:-1, 2:] - 4 * c)
        ref = nxt
    np.testing.assert_allclose(bufs[steps % 2].numpy(), ref, rtol=1e-5, atol=1e-6)


# ---- Mandelbrot (while True + break) and Taichi's Julia set (while ... and ...) ----------

@cube
def mandelbrot_escape(cr, ci, MAX_ITER: Comptime[int]):
    zr = 0.0
    zi = 0.0
    n = 0
    while True:
        if n >= MAX_ITER:
            break
        zr2 = zr * zr
        zi2 = zi * zi
        if zr2 + zi2 > 4.0:
            break
        zi = 2.0 * zr * zi
        zi += ci
        zr = zr2 - zi2
        zr += cr
        n += 1
    return n


@cube
def complex_sqr(zr, zi):
    return zr * zr - zi * zi, zr * zi * 2.0


@cube(launch=True)
def fractal(mandel: Tensor[i32], julia: Tensor[f32], cjr: f32, cji: f32,
            MAX_ITER: Comptime[int]):
    i, j = ABSOLUTE_POS_X, ABSOLUTE_POS_Y
    w, h = mandel.shape(1), mandel.shape(0)
    if i < w and j < h:
        cr = f32(i) / f32(w) * 3.0 - 2.0
        ci = f32(j) / f32(h) * 2.4 - 1.2
        mandel[j * w + i] = mandelbrot_escape(cr, ci, MAX_ITER)
        zr = f32(i) / f32(h) - 1.0  # Taichi: z = ti.Vector([i / n - 1, j / n - 0.5]) * 2
        zi = f32(j) / f32(h) - 0.5
        zr, zi = zr * 2.0, zi * 2.0
        iterations = 0
        while cb.sqrt(zr * zr + zi * zi) < 20.0 and iterations < 50:
            zr, zi = complex_sqr(zr, zi)
            zr, zi = zr + cjr, zi + cji
            iterations += 1
        julia[j * w + i] = 1.0 - f32(iterations) * 0.02


def _fractal_ref(w, h, cjr, cji, max_iter):
    f = np.float32
    js, is_ = np.mgrid[0:h, 0:w]
    cr = (is_.astype(f) / f(w)) * f(3.0) - f(2.0)
    ci = (js.astype(f) / f(h)) * f(2.4) - f(1.2)
    zr, zi = np.zeros_like(cr), np.zeros_like(ci)
    n = np.zeros(cr.shape, np.int32)
    live = np.ones(cr.shape, bool)
    for _ in range(max_iter):
        zr2, zi2 = zr * zr, zi * zi
        live &= ~(zr2 + zi2 > f(4.0))
        zi = np.where(live, f(2.0) * zr * zi + ci, zi)
        zr = np.where(live, zr2 - zi2 + cr, zr)
        n += live
    zr = (is_.astype(f) / f(h) - f(1.0)) * f(2.0)
    zi = (js.astype(f) / f(h) - f(0.5)) * f(2.0)
    it = np.zeros(cr.shape, np.int32)
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(50):
            live = (np.sqrt(zr * zr + zi * zi) < f(20.0)) & (it < 50)
            nzr = zr * zr - zi * zi + f(cjr)
            nzi = zr * zi * f(2.0) + f(cji)
            zr, zi = np.where(live, nzr, zr), np.where(live, nzi, zi)
            it += live
    return n, f(1.0) - it.astype(f) * f(0.02)


def test_mandelbrot_and_julia(rt):
    w, h, max_iter = 40, 24, 60
    cjr, cji = np.float32(-0.8), np.float32(0.156)
    mandel = rt.from_numpy(np.full((h, w), -1, np.int32))
    julia = rt.from_numpy(np.full((h, w), np.nan, np.float32))
    fractal.launch(rt, cube_count=(cdiv(w, 8), cdiv(h, 8)), cube_dim=(8, 8), mandel=mandel,
                   julia=julia, cjr=cjr, cji=cji, MAX_ITER=max_iter)
    n_ref, j_ref = _fractal_ref(w, h, cjr, cji, max_iter)
    np.testing.assert_array_equal(mandel.numpy(), n_ref)
    np.testing.assert_array_equal(julia.numpy(), j_ref)


# ---- SAXPY with a grid-stride loop ---------------------------------------------------------

@cube(launch=True)
def saxpy(n: u32, a: f32, x: Array[f32], y: Array[f32]):
    i = ABSOLUTE_POS
    while i < n:
        y[i] = a * x[i] + y[i]
        i += CUBE_DIM * CUBE_COUNT_X


def test_warp_saxpy_grid_stride(rt):
    n, a = 1000, np.float32(2.5)
    rng = np.random.default_rng(12)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    dy = rt.from_numpy(y)
    saxpy.launch(rt, cube_count=3, cube_dim=32, n=n, a=a, x=rt.from_numpy(x), y=dy)
    np.testing.assert_allclose(dy.numpy(), a.astype(np.float64) * x + y, rtol=1e-6,
                               atol=1e-6)


def test_grid_stride_range_with_runtime_step_is_refused():
    @cube(launch=True)
    def saxpy_range(n: u32, a: f32, x: Array[f32], y: Array[f32]):
        for i in range(ABSOLUTE_POS, n, CUBE_DIM * CUBE_COUNT):
            y[i] = a * x[i] + y[i]

    with pytest.raises(cb.CompileError, match="step of a range must be known at compile"):
        saxpy_range.source("ir")


# =========================================================================================
# CubeCL-style: lines and plane ops
# =========================================================================================

@cube(launch=True)
def sum_lines_plane(inp: Array[Line[i32]], out: Array[i32]):
    i = ABSOLUTE_POS
    v = inp[i]  # out of bounds: a zero line
    acc = 0
    for k in cb.range(v.size, unroll=True):
        acc += v[k]
    total = cb.plane_sum(acc)
    if UNIT_POS_PLANE == 0:
        cb.atomic_add(out, CUBE_POS, total)


@pytest.mark.parametrize("line", [1, 4])
def test_cubecl_plane_sum_of_lines(rt, line):
    n, block = 1000, 32
    x = np.random.default_rng(13).integers(-500, 500, n).astype(np.int32)
    units = n // line
    cubes = cdiv(units, block)
    out = rt.from_numpy(np.zeros(cubes, np.int32))
    sum_lines_plane.launch(rt, cube_count=cubes, cube_dim=block,
                           inp=rt.from_numpy(x).lines(line), out=out)
    per_cube = block * line
    ref = [int(x[c * per_cube:(c + 1) * per_cube].sum()) for c in range(cubes)]
    assert out.numpy().tolist() == ref


@cube(launch=True)
def leaky_relu_lines(x: Array[Line[f32]], out: Array[Line[f32]], slope: f32):
    i = ABSOLUTE_POS
    if i < out.len():
        v = x[i]
        out[i] = cb.select(v >= 0.0, v, v * slope)


def test_lines_leaky_relu(rt):
    x = np.linspace(-3, 3, 64).astype(np.float32)
    out = rt.empty(64)
    leaky_relu_lines.launch(rt, cube_count=1, cube_dim=16, x=rt.from_numpy(x).lines(4),
                            out=out.lines(4), slope=0.01)
    np.testing.assert_array_equal(out.numpy(), np.where(x >= 0, x, x * np.float32(0.01)))


# =========================================================================================
# Plain-Python integer semantics a user relies on
# =========================================================================================

@cube
def sign_class(v):
    if v < 0:
        return -1
    if v == 0:
        return 0
    return 1


@cube
def gcd(a, b):
    while b:
        a, b = b, a % b  # Python's %: the result takes b's sign
    return a


@cube(launch=True)
def int_semantics(x: Array[i32], y: Array[i32], out: Tensor[i32], fib: Array[u32],
                  N_FIB: Comptime[int]):
    i = ABSOLUTE_POS
    n = len(x)
    if i < n:
        a, b = x[i], y[i]
        out[i] = gcd(a, b)
        out[n + i] = a // b if b != 0 else 0
        out[2 * n + i] = a % b if b != 0 else 0
        out[3 * n + i] = sign_class(a) * 10 + sign_class(b)
        if a > b:
            big = a
        elif a < b:
            big = b
        else:
            big = 0
        out[4 * n + i] = big
        # first k with k*k > |a|, skipping multiples of 3
        k = 0
        found = -1
        while k < 100:
            k += 1
            if k % 3 == 0:
                continue
            if k * k > abs(a):
                found = k
                break
        out[5 * n + i] = found
        out[6 * n + i] = (a >> 2) + (b << 3)  # arithmetic shift right on negatives
        p, q = u32(0), u32(1)
        for _ in range(N_FIB + i % 7):
            p, q = q, p + q  # wraps mod 2**32
        fib[i] = p


def _wrap_i32(v):
    v &= M32
    return v - (1 << 32) if v >= 1 << 31 else v


def _int_semantics_ref(x, y, n_fib):
    def gcd_py(a, b):
        while b:
            a, b = b, a % b
        return a

    def sign(v):
        return -1 if v < 0 else (0 if v == 0 else 1)

    rows, fib = [[] for _ in range(7)], []
    for i, (a, b) in enumerate(zip(x.tolist(), y.tolist())):
        rows[0].append(gcd_py(a, b))
        rows[1].append(a // b if b else 0)
        rows[2].append(a % b if b else 0)
        rows[3].append(sign(a) * 10 + sign(b))
        rows[4].append(a if a > b else (b if a < b else 0))
        found = -1
        for k in range(1, 101):
            if k % 3 and k * k > abs(a):
                found = k
                break
        rows[5].append(found)
        rows[6].append(_wrap_i32((a >> 2) + (b << 3)))
        p, q = 0, 1
        for _ in range(n_fib + i % 7):
            p, q = q, (p + q) & M32
        fib.append(p)
    return np.array(rows, np.int64), fib


def test_plain_python_int_semantics(rt):
    rng = np.random.default_rng(14)
    x = rng.integers(-2000, 2000, 90).astype(np.int32)
    y = rng.integers(-60, 60, 90).astype(np.int32)
    x[:4], y[:4] = [0, -12, 12, 7], [0, 18, -18, 7]
    out = rt.from_numpy(np.zeros((7, 90), np.int32))
    fib = rt.from_numpy(np.zeros(90, np.uint32))
    int_semantics.launch(rt, cube_count=3, cube_dim=32, x=rt.from_numpy(x),
                         y=rt.from_numpy(y), out=out, fib=fib, N_FIB=45)
    ref, fib_ref = _int_semantics_ref(x, y, 45)
    np.testing.assert_array_equal(out.numpy(), ref)
    assert fib.numpy().tolist() == fib_ref


# ---- a periodic stencil written with Python's negative modulo ---------------------------

@cube(launch=True)
def periodic_diff(u: Array[f32], out: Array[f32]):
    n = i32(len(u))
    i = i32(ABSOLUTE_POS)
    if i < n:
        left = u[(i - 1) % n]  # Taichi/NumPy style wrap: (-1) % n == n - 1
        right = u[(i + 1) % n]
        out[i] = right - left


def test_periodic_stencil_negative_mod(rt):
    u = np.random.default_rng(15).standard_normal(37).astype(np.float32)
    out = rt.empty(37)
    periodic_diff.launch(rt, cube_count=2, cube_dim=32, u=rt.from_numpy(u), out=out)
    np.testing.assert_array_equal(out.numpy(), np.roll(u, -1) - np.roll(u, 1))


# =========================================================================================
# More ports: CubeCL plane softmax, CUDA samples, Numba compaction, Python-style helpers
# =========================================================================================

# ---- CubeCL-style softmax with plane reductions, partials per plane in shared memory ----

@cube
def cube_max_sum(partial, v, OP: Comptime[str], BLOCK: Comptime[int]):
    """plane_max/plane_sum within each plane, then over the planes' partials."""
    r = cb.plane_max(v) if OP == "max" else cb.plane_sum(v)
    plane = UNIT_POS // PLANE_DIM
    if UNIT_POS_PLANE == 0:
        partial[plane] = r
    cb.sync_cube()
    acc = partial[0]
    for p in range(1, (BLOCK + PLANE_DIM - 1) // PLANE_DIM):
        if OP == "max":
            acc = max(acc, partial[p])
        else:
            acc += partial[p]
    cb.sync_cube()
    return acc


@cube(launch=True)
def plane_softmax(x: Array[f32], out: Array[f32], cols: u32, BLOCK: Comptime[int]):
    base = CUBE_POS * cols
    partial = SharedMemory(f32, BLOCK)
    m = -math.inf
    for c in range(UNIT_POS, cols, BLOCK):
        m = max(m, x[base + c])
    m = cube_max_sum(partial, m, "max", BLOCK)
    s = 0.0
    for c in range(UNIT_POS, cols, BLOCK):
        s += math.exp(x[base + c] - m)
    s = cube_max_sum(partial, s, "sum", BLOCK)
    for c in range(UNIT_POS, cols, BLOCK):
        out[base + c] = math.exp(x[base + c] - m) / s


def test_cubecl_plane_softmax(rt):
    rows, cols, block = 5, 70, 32
    x = np.random.default_rng(16).standard_normal((rows, cols)).astype(np.float32) * 3
    out = rt.empty((rows, cols))
    plane_softmax.launch(rt, cube_count=rows, cube_dim=block, x=rt.from_numpy(x), out=out,
                         cols=cols, BLOCK=block)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


# ---- CUDA samples: bitonic sort in shared memory, swaps by tuple assignment --------------

@cube(launch=True)
def bitonic_sort(keys: Array[i32], N: Comptime[int]):
    sh = SharedMemory(i32, N)
    tid = UNIT_POS
    sh[tid] = keys[CUBE_POS * N + tid]
    cb.sync_cube()
    k = 2
    while k <= N:
        j = k // 2
        while j > 0:
            ixj = tid ^ u32(j)
            if ixj > tid:
                ascending = (tid & u32(k)) == 0
                if (sh[tid] > sh[ixj]) == ascending:
                    sh[tid], sh[ixj] = sh[ixj], sh[tid]
            cb.sync_cube()
            j //= 2
        k *= 2
    keys[CUBE_POS * N + tid] = sh[tid]


def test_cuda_bitonic_sort(rt):
    n, cubes = 32, 3
    x = np.random.default_rng(17).integers(-99, 99, n * cubes).astype(np.int32)
    dx = rt.from_numpy(x)
    bitonic_sort.launch(rt, cube_count=cubes, cube_dim=n, keys=dx, N=n)
    np.testing.assert_array_equal(dx.numpy(), np.sort(x.reshape(cubes, n), 1).ravel())


# ---- Numba: stream compaction with atomic tickets ----------------------------------------

@cube(launch=True)
def compact_positive(x: Array[f32], out: Array[f32], count: Array[u32]):
    i = ABSOLUTE_POS
    if i < len(x) and x[i] > 0.0:
        slot = cb.atomic_add(count, 0, 1)  # returns the old value
        out[slot] = x[i]


def test_numba_stream_compaction(rt):
    x = np.random.default_rng(18).standard_normal(300).astype(np.float32)
    out = rt.from_numpy(np.full(300, np.nan, np.float32))
    count = rt.from_numpy(np.zeros(1, np.uint32))
    compact_positive.launch(rt, cube_count=5, cube_dim=64, x=rt.from_numpy(x), out=out,
                            count=count)
    k = int(count.numpy()[0])
    assert k == int((x > 0).sum())
    np.testing.assert_array_equal(np.sort(out.numpy()[:k]), np.sort(x[x > 0]))
    assert np.isnan(out.numpy()[k:]).all()


# ---- helpers as a Python user writes them: defaults, keywords, returns inside loops -----

@cube
def leaky(x, slope=0.01):
    return x if x >= 0.0 else slope * x


@cube
def find_first(a, v):
    for k in range(len(a)):
        if a[k] == v:
            return i32(k)
    return -1


@cube
def clamp_index(i, n, *, lo=0):
    if i < lo:
        return lo
    if i >= n:
        return n - 1
    return i


@cube
def first_divisor(v):
    d = 2
    while d * d <= v:
        for r in range(3):
            if r == 1:
                continue
            e = d + i32(r)
            if v % e == 0 and e < v:
                return e
        d += 3
    return v


STENCIL = ((-1, 0.25), (0, 0.5), (1, 0.25))


@cube(launch=True)
def python_helpers(x: Array[f32], keys: Array[i32], fout: Array[f32], iout: Array[i32]):
    i = i32(ABSOLUTE_POS)
    n = i32(len(x))
    if i < n:
        v = x[i]
        fout[3 * i] = leaky(v) + leaky(v, slope=0.5) + leaky(slope=2.0, x=v)
        acc = 0.0
        for dx, w in STENCIL:  # a module-level tuple, unrolled
            acc += w * x[(i + dx) % n]
        fout[3 * i + 1] = acc
        lo, hi = min(v, x[(i + 1) % n]), max(v, x[(i + 1) % n])
        fout[3 * i + 2] = hi - lo
        iout[2 * i] = find_first(keys, i) * 100 + clamp_index(i - 3, 5) \
            + clamp_index(i, 4, lo=2) * 1000
        iout[2 * i + 1] = first_divisor(keys[i]) if keys[i] > 1 else 0


def _python_helpers_ref(x, keys):
    def leaky_py(v, slope=0.01):
        return v if v >= 0 else np.float32(slope) * v

    def first_py(v):
        return next((k for k, a in enumerate(keys) if a == v), -1)

    def clamp_py(i, n, lo=0):
        return lo if i < lo else (n - 1 if i >= n else i)

    def divisor_py(v):
        d = 2
        while d * d <= v:
            for r in (0, 2):
                if v % (d + r) == 0 and d + r < v:
                    return d + r
            d += 3
        return v

    n = len(x)
    fout, iout = [], []
    for i in range(n):
        v = x[i]
        fout.append(leaky_py(v) + leaky_py(v, 0.5) + leaky_py(v, 2.0))
        fout.append(sum(np.float32(w) * x[(i + d) % n] for d, w in STENCIL))
        fout.append(abs(v - x[(i + 1) % n]))
        iout.append(first_py(i) * 100 + clamp_py(i - 3, 5) + clamp_py(i, 4, lo=2) * 1000)
        iout.append(divisor_py(int(keys[i])) if keys[i] > 1 else 0)
    return np.array(fout, np.float64), iout


def test_python_style_helpers(rt):
    n = 40
    x = np.random.default_rng(19).standard_normal(n).astype(np.float32)
    keys = np.random.default_rng(20).integers(-3, 90, n).astype(np.int32)
    keys[5] = 7
    fout, iout = rt.empty(3 * n), rt.from_numpy(np.zeros(2 * n, np.int32))
    python_helpers.launch(rt, cube_count=2, cube_dim=32, x=rt.from_numpy(x),
                          keys=rt.from_numpy(keys), fout=fout, iout=iout)
    f_ref, i_ref = _python_helpers_ref(x, keys)
    np.testing.assert_allclose(fout.numpy(), f_ref, rtol=1e-6, atol=1e-7)
    assert iout.numpy().tolist() == i_ref


# =========================================================================================
# Where the compiled kernels differ from Python (xfail: see the reasons)
# =========================================================================================

@cube(launch=True)
def stepped_ranges(out: Array[i32], n: u32, lo: u32, hi: u32, slo: i32, shi: i32):
    loops = 0
    for _k in range(n, 0, -2):  # odd positions from the end: 5, 3, 1
        loops += 1
        if loops > 8:  # a guard: a wrapped counter would loop ~forever
            break
    out[0] = loops
    loops = 0
    for _k in range(lo, hi, 4):
        loops += 1
        if loops > 8:
            break
    out[1] = loops
    loops = 0
    for _k in range(slo, shi, -4):
        loops += 1
        if loops > 8:
            break
    out[2] = loops


@pytest.mark.parametrize("case", ["odd_countdown", "near_limits"])
def test_stepped_range_stops_as_python(rt, case):
    """A runtime range with |step| > 1 stops as Python's: the compiled targets stepped the
    counter past the type's limit, where it wrapped and the loop went on."""
    out = rt.from_numpy(np.zeros(3, np.int32))
    if case == "odd_countdown":
        args = dict(n=5, lo=0, hi=0, slo=0, shi=0)
    else:
        args = dict(n=0, lo=2**32 - 6, hi=2**32 - 1, slo=-(2**31) + 2, shi=-(2**31))
    stepped_ranges.launch(rt, cube_count=1, cube_dim=1, out=out, **args)
    want = [len(range(args["n"], 0, -2)), len(range(args["lo"], args["hi"], 4)),
            len(range(args["slo"], args["shi"], -4))]
    assert out.numpy().tolist() == want


@cube(launch=True)
def chunks_of_u8_count(counts: Array[u8], out: Array[i32]):
    i = ABSOLUTE_POS
    if i < len(counts):
        loops = 0
        for _k in range(0, counts[i], 64):  # a u8 bound: the counter is u8
            loops += 1
            if loops > 8:
                break
        out[i] = loops


def test_stepped_range_over_u8_count(rt):
    """A small count read from u8 memory: 200 in steps of 64 passes 255 after 192 (the u8
    counter wrapped to 0 and the loop did not end on cpu, opencl and wgpu)."""
    counts = np.array([200, 0, 64, 255, 192, 1], np.uint8)
    out = rt.from_numpy(np.zeros(counts.size, np.int32))
    chunks_of_u8_count.launch(rt, cube_count=1, cube_dim=8, counts=rt.from_numpy(counts),
                              out=out)
    assert out.numpy().tolist() == [len(range(0, int(c), 64)) for c in counts]


@cube(launch=True)
def relax_steps(src: Array[f32], dst: Array[f32], steps: u32):
    i = ABSOLUTE_POS
    if i < len(dst):
        for _ in range(steps):
            dst[i] = 0.5 * (src[i] + 1.0)


def test_same_buffer_twice_in_place(rt, request):
    """Numba users call `kernel[grid, block](a, a)` to work in place; each unit touches only
    its own element, so this is no race, and cube.simulate models aliased arguments."""
    x = np.arange(16, dtype=np.float32)
    buf = rt.from_numpy(x)
    relax_steps.launch(rt, cube_count=1, cube_dim=16, src=buf, dst=buf, steps=3)
    want = x.copy()
    for _ in range(3):
        want = np.float32(0.5) * (want + np.float32(1.0))
    np.testing.assert_array_equal(buf.numpy(), want)


@cube(launch=True)
def last_element(a: Array[f32], out: Array[f32]):
    out[0] = a[-1]  # Numba, NumPy and Python: the last element


def test_constant_negative_index(interp):
    """`a[-1]` reads the last element in Python and Numba; cube indexes are offsets, so a
    constant negative index is a located error (it was accepted and read 0, checked mode's
    out of bounds)."""
    a = np.arange(1, 6, dtype=np.float32)
    out = interp.from_numpy(np.zeros(1, np.float32))
    try:
        last_element.launch(interp, cube_count=1, cube_dim=1, a=interp.from_numpy(a), out=out)
    except cb.CompileError as e:
        assert "test_tutorial_kernels.py:" in str(e)
        return
    assert out.numpy()[0] == a[-1]


STOPS = (0.0, 0.25, 0.5, 0.75, 1.0)
COLORS = (0.0, 0.1, 0.5, 0.8, 1.0)


@cube
def colormap(v):
    """A piecewise-linear lookup in a static table (Taichi's ti.static loop, Warp constants):
    the first segment that holds v returns."""
    if v <= STOPS[0]:
        return COLORS[0]
    for k in cb.range(len(STOPS) - 1, unroll=True):
        if v < STOPS[k + 1]:
            t = (v - STOPS[k]) / (STOPS[k + 1] - STOPS[k])
            return COLORS[k] + t * (COLORS[k + 1] - COLORS[k])
    return COLORS[-1]


@cube
def first_negative(x, base, N: Comptime[int]):
    for k in cb.range(N, unroll=True):
        if x[base + k] < 0.0:
            return k
    return -1


@cube(launch=True)
def shade(x: Array[f32], color: Array[f32], first: Array[i32]):
    i = ABSOLUTE_POS
    if i < len(color):
        color[i] = colormap(x[i])
    if i * 4 < len(x):
        first[i] = first_negative(x, i * 4, 4)


def _colormap_py(v):
    if v <= STOPS[0]:
        return COLORS[0]
    for k in range(len(STOPS) - 1):
        if v < STOPS[k + 1]:
            t = (v - STOPS[k]) / (STOPS[k + 1] - STOPS[k])
            return COLORS[k] + t * (COLORS[k + 1] - COLORS[k])
    return COLORS[-1]


def test_helper_return_inside_unrolled_loop(rt):
    """A `return` inside an unrolled loop (cb.range(..., unroll=True), a for over a tuple) of
    a @cube helper ends the loop, as Python's: the later iterations ran, and one whose
    condition held returned again and its value won."""
    x = np.array([-0.5, 0.1, 0.3, 0.6, 0.9, 1.2, -0.1, 0.2, 0.8, -0.3, 0.5, -0.7], np.float32)
    color = rt.empty(x.size)
    first = rt.from_numpy(np.zeros(x.size // 4, np.int32))
    shade.launch(rt, cube_count=1, cube_dim=16, x=rt.from_numpy(x), color=color, first=first)
    np.testing.assert_allclose(color.numpy(), [_colormap_py(float(v)) for v in x], rtol=1e-6,
                               atol=1e-7)
    want = [next((k for k in range(4) if x[4 * i + k] < 0), -1) for i in range(x.size // 4)]
    assert first.numpy().tolist() == want


@cube(launch=True)
def triangle_same_name(out: Array[i32], n: u32):
    acc = 0
    for j in range(1, n):
        for j in range(j):  # noqa: B007, B020 - range(j) is built once, from the outer j
            acc += 1
    out[0] = acc


def test_nested_loop_reusing_the_counter_name(rt):
    """The C family read the bound of `for j in range(j)` again each iteration (`for (j4 = 0;
    j4 < j3; ...) { j3 = j4; ... }`); the IR's range reads it once, as Python's."""
    out = rt.from_numpy(np.zeros(1, np.int32))
    triangle_same_name.launch(rt, cube_count=1, cube_dim=1, out=out, n=5)
    acc = 0
    for j in range(1, 5):
        for j in range(j):  # noqa: B007, B020 - the point of the test
            acc += 1
    assert int(out.numpy()[0]) == acc


@cube(launch=True)
def count_nan(x: Array[F], count: Array[u32]):
    i = ABSOLUTE_POS
    if i < len(x):
        cb.atomic_add(count, 0, u32(math.isnan(x[i])))  # an int is never NaN


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_generic_nan_count(interp, dtype):
    """math.isnan of an int folds to False, and u32(False) is 0 as in Python (a bool literal
    was refused by u32(), i32(), f32()), so the kernel generic over F compiles for ints."""
    x = np.array([1, 2, 3, 4, 5], dtype)
    if dtype == np.float32:
        x[[1, 3]] = np.nan
    count = interp.from_numpy(np.zeros(1, np.uint32))
    count_nan.launch(interp, cube_count=1, cube_dim=8, x=interp.from_numpy(x), count=count)
    assert int(count.numpy()[0]) == sum(math.isnan(v) for v in x.tolist())


@cube(launch=True)
def either_positive(x: Array[f32], out: Array[i32]):
    i = ABSOLUTE_POS
    if 2 * i + 1 < len(x):
        out[i] = i32(max(x[2 * i] > 0.0, x[2 * i + 1] > 0.0))  # Python: max(False, True)


def test_max_of_bools(interp):
    """max/min of bools are Python's (False < True: or / and, a bool); they reached the IR
    verifier, whose message showed IR (`%4: bool = max %2, %3`)."""
    x = np.array([1.0, -1.0, -1.0, -2.0, -3.0, 4.0], np.float32)
    out = interp.from_numpy(np.zeros(3, np.int32))
    try:
        either_positive.launch(interp, cube_count=1, cube_dim=4, x=interp.from_numpy(x),
                               out=out)
    except cb.CompileError as e:
        assert "%" not in str(e).splitlines()[0], str(e)
        return
    assert out.numpy().tolist() == [int(max(a > 0, b > 0)) for a, b in x.reshape(3, 2)]


# =========================================================================================
# cube.simulate (the plain-Python runner) agrees with the independent references
# =========================================================================================

def test_simulate_agrees_with_plain_python():
    from cube.simulate import simulate

    n, p = 100, np.float32(0.4)
    scale = np.float32(1.0) / (np.float32(1.0) - p)
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32) + 3.0
    out = np.zeros(n, np.float32)
    simulate(seeded_dropout, 2, 64, x_ptr=x, output_ptr=out, n_elements=n, p=p, scale=scale,
             seed=99)
    np.testing.assert_array_equal(out, _dropout_ref(x, float(p), scale, 99))

    hits, fhits = np.zeros(8, np.uint32), np.zeros(8, np.uint32)
    simulate(monte_carlo_pi, 1, 8, hits=hits, fhits=fhits, seed=7, SAMPLES=10)
    assert (hits.tolist(), fhits.tolist()) == _monte_carlo_ref(8, 7, 10)

    rng = np.random.default_rng(14)
    xi = rng.integers(-2000, 2000, 20).astype(np.int32)
    yi = rng.integers(-60, 60, 20).astype(np.int32)
    res, fib = np.zeros((7, 20), np.int32), np.zeros(20, np.uint32)
    simulate(int_semantics, 1, 32, x=xi, y=yi, out=res, fib=fib, N_FIB=45)
    ref, fib_ref = _int_semantics_ref(xi, yi, 45)
    np.testing.assert_array_equal(res, ref)
    assert fib.tolist() == fib_ref

    loops = np.zeros(3, np.int32)
    simulate(stepped_ranges, 1, 1, out=loops, n=5, lo=2**32 - 6, hi=2**32 - 1,
             slo=-(2**31) + 2, shi=-(2**31))
    assert loops.tolist() == [3, 2, 1]

    buf = np.arange(16, dtype=np.float32)
    simulate(relax_steps, 1, 16, src=buf, dst=buf, steps=3)  # one array, twice
    want = np.arange(16, dtype=np.float32)
    for _ in range(3):
        want = np.float32(0.5) * (want + np.float32(1.0))
    np.testing.assert_array_equal(buf, want)


# =========================================================================================
# What users of those systems write that cube refuses: a located CompileError (or, once
# supported, a kernel that compiles), never an internal traceback
# =========================================================================================

@cube(launch=True)
def r_shape_subscript(a: Tensor[f32]):
    if ABSOLUTE_POS < a.shape[0]:  # Numba/NumPy: a.shape[0]
        a[ABSOLUTE_POS] += 1.0


@cube(launch=True)
def r_reverse_range(out: Array[i32], n: u32):
    acc = 0
    for k in range(n - 1, -1, -1):  # n - 1 down to 0
        acc = acc * 10 + i32(k)
    out[0] = acc


@cube(launch=True)
def r_sum_of_counters(out: Array[i32]):
    total = 0
    for a in range(5):
        total += a  # the counter is u32, the literal-seeded total i32
    out[0] = total


@cube(launch=True)
def r_fnv1a(data: Array[u32], out: Array[u32], n: u32):
    h = 2166136261  # FNV offset basis
    for k in range(n):
        h = (h ^ data[k]) * 16777619
    out[0] = h


@cube
def r_sorted_pair(a, b):
    if a < b:
        return a, b
    return b, a


@cube(launch=True)
def r_tuple_returns(x: Array[f32], out: Array[f32]):
    lo, hi = r_sorted_pair(x[0], x[1])
    out[0] = hi - lo


@cube(launch=True)
def r_math_atan2(x: Array[f32], out: Array[f32]):
    out[0] = math.atan2(x[0], x[1])  # wp.atan2 / ti.atan2


def test_warp_atan2_is_ported(rt):
    """math.atan2 (wp.atan2 / ti.atan2) was refused as having no kernel form; it is
    Python's atan2 now, quadrants included (tests/cube/test_math_functions_more.py has the
    rest)."""
    for y, x in ((1.0, -1.0), (-0.5, -2.0), (3.0, 0.0)):
        out = rt.empty(1)
        r_math_atan2.launch(rt, cube_count=1, cube_dim=1,
                            x=rt.from_numpy(np.array([y, x], np.float32)), out=out)
        tol = 5e-4 if rt.target == "spirv" else 1e-6  # lavapipe's GLSL Atan2
        np.testing.assert_allclose(out.numpy()[0], math.atan2(y, x), rtol=tol)


@cube(launch=True)
def r_builtin_pow(x: Array[f32], out: Array[f32]):
    out[0] = pow(x[0], 2)


@cube(launch=True)
def r_shared_2d(a: Array[f32], TPB: Comptime[int]):
    sA = cb.SharedMemory(f32, (TPB, TPB))  # cuda.shared.array(shape=(TPB, TPB), ...)
    sA[UNIT_POS_Y, UNIT_POS_X] = a[ABSOLUTE_POS]
    cb.sync_cube()
    a[ABSOLUTE_POS] = sA[0, 0]


@cube(launch=True)
def r_int_true_div(x: Array[i32], out: Array[f32]):
    out[0] = x[0] / 2


@cube(launch=True)
def r_const_table(x: Array[i32], out: Array[f32]):
    out[0] = STENCIL[x[0]][1]  # cuda.const.array_like(...) indexed at run time


@cube(launch=True)
def r_literal_in_branches(x: Array[f32], out: Array[f32]):
    if x[0] > 0.0:
        s = 2
    else:
        s = 3
    out[0] = x[0] * s


@cube(launch=True)
def r_for_else(x: Array[i32], out: Array[i32]):
    found = 0
    for k in range(4):
        if x[k] == 3:
            break
    else:
        found = 1
    out[0] = found


REFUSED = {
    r_shape_subscript: (dict(ranks={"a": 1}), "a method (call it"),
    r_reverse_range: ({}, "the literal -1 does not fit in u32"),
    r_sum_of_counters: ({}, "cannot mix i32 and u32"),
    r_fnv1a: ({}, "the literal 2166136261 does not fit in i32"),
    r_tuple_returns: ({}, "got a tuple"),
    r_builtin_pow: ({}, "plain Python function"),
    r_shared_2d: (dict(TPB=4), "SharedMemory takes a value"),
    r_int_true_div: ({}, "'/' on i32 is not defined"),
    r_const_table: ({}, "cannot be indexed by a runtime value"),
    r_literal_in_branches: ({}, "cannot mix f32 and i32"),
    r_for_else: ({}, "for/else is not supported"),
}


@pytest.mark.parametrize("kernel", list(REFUSED), ids=lambda k: k.__name__)
def test_natural_constructs_refused_with_location(kernel):
    """Refused today with the text in REFUSED, at the user's line; a construct that becomes
    supported simply compiles."""
    kwargs, text = REFUSED[kernel]
    try:
        kernel.source("ir", **kwargs)
    except cb.CompileError as e:
        msg = str(e)
        assert "test_tutorial_kernels.py:" in msg and "error:" in msg and "^" in msg, msg
        assert text in msg, msg


def test_kernel_parameter_defaults(interp):
    """Triton users give parameters defaults (`BLOCK: tl.constexpr = 128`): Python's meaning
    is the default; today the launch asks for the argument (a LaunchError naming it)."""
    @cube(launch=True)
    def scaled(x: Array[f32], alpha: f32 = 2.0):
        i = ABSOLUTE_POS
        if i < len(x):
            x[i] = x[i] * alpha

    x = interp.from_numpy(np.ones(4, np.float32))
    try:
        scaled.launch(interp, cube_count=1, cube_dim=4, x=x)
    except cb.LaunchError as e:
        assert "missing the argument 'alpha'" in str(e)
        return
    np.testing.assert_array_equal(x.numpy(), np.full(4, 2.0, np.float32))

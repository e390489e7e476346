"""NumPy-style tuple indices, as users of Numba CUDA and Warp write them: `t[i, j]` on a tensor
parameter, `t.shape[d]`, and shared/local memory allocated with a tuple of sizes
(`cb.SharedMemory(f32, (TPB, TPB))`, `sA[ty, tx]`). Every runtime that starts, against NumPy
and against cube.simulate (the kernel's Python run per unit, which never sees the IR).

The element named is NumPy's: sum of index x stride, the tensor's launch strides (so a
transposed view reads transposed) or row-major for an allocation. An index outside its own
dimension is out of bounds in checked mode (a read gives 0, a write is dropped): it never
reaches a neighbouring row."""
import numpy as np
import pytest

import cube as cb
from cube import (
    CUBE_POS_X,
    CUBE_POS_Y,
    UNIT_POS_X,
    UNIT_POS_Y,
    Array,
    Comptime,
    SharedMemory,
    Tensor,
    cube,
    f32,
    i32,
    u32,
)
from cube.simulate import simulate

# ---- Numba's shared-memory matmul (the CUDA docs' "fast_matmul"), 2-D shared arrays -------

@cube(launch=True)
def fast_matmul(A: Tensor[f32], B: Tensor[f32], C: Tensor[f32], TPB: Comptime[int]):
    sA = SharedMemory(f32, (TPB, TPB))
    sB = cb.SharedMemory(f32, (TPB, TPB))
    tx = UNIT_POS_X
    ty = UNIT_POS_Y
    x = CUBE_POS_X * TPB + tx
    y = CUBE_POS_Y * TPB + ty
    tmp = f32(0.0)
    for i in range((A.shape[1] + TPB - 1) // TPB):
        sA[ty, tx] = 0.0
        sB[ty, tx] = 0.0
        if y < A.shape[0] and tx + i * TPB < A.shape[1]:
            sA[ty, tx] = A[y, tx + i * TPB]
        if x < B.shape[1] and ty + i * TPB < B.shape[0]:
            sB[ty, tx] = B[ty + i * TPB, x]
        cb.sync_cube()
        for j in range(TPB):
            tmp += sA[ty, j] * sB[j, tx]
        cb.sync_cube()
    if y < C.shape[0] and x < C.shape[1]:
        C[y, x] = tmp


def test_numba_shared_matmul(rt):
    rng = np.random.default_rng(0)
    m, k, n, tpb = 13, 11, 9, 4
    an = rng.standard_normal((m, k)).astype(np.float32)
    bn = rng.standard_normal((k, n)).astype(np.float32)
    a, b = rt.from_numpy(an), rt.from_numpy(bn)
    c = rt.from_numpy(np.full((m, n), np.nan, np.float32))
    fast_matmul.launch(rt, ((n + tpb - 1) // tpb, (m + tpb - 1) // tpb), (tpb, tpb), A=a, B=b,
                       C=c, TPB=tpb)
    np.testing.assert_allclose(c.numpy(), an.astype(np.float64) @ bn, rtol=1e-5, atol=1e-5)


# ---- a tensor's launch strides: a transposed view reads transposed ------------------------

@cb.cube(launch=True)
def scaled_copy(a: cb.Tensor[cb.f32], out: cb.Tensor[cb.f32]):
    i = cb.CUBE_POS_X
    j = cb.UNIT_POS_X
    if i < a.shape[0] and j < a.shape(1):
        out[i, j] = a[i, j] * 2.0


def test_tensor_indices_follow_strides(rt):
    an = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = rt.from_numpy(an)
    at = a.view((4, 3), (1, 4))  # the transpose, by strides
    o = rt.from_numpy(np.zeros((4, 3), np.float32))
    scaled_copy.launch(rt, 4, 3, a=at, out=o)
    np.testing.assert_array_equal(o.numpy(), an.T * 2)
    # the oracle: the kernel's Python, on NumPy's own transposed view
    ref = np.zeros((4, 3), np.float32)
    simulate(scaled_copy, cube_count=(4,), cube_dim=(3,), a=an.T.copy(), out=ref)
    np.testing.assert_array_equal(o.numpy(), ref)


# ---- an index outside its dimension never reaches a neighbouring row ---------------------

@cube(launch=True)
def reads_at(a: Tensor[f32], out: Array[f32], i: i32, j: i32):
    out[0] = a[i, j]
    a[i, j] = 100.0


@pytest.mark.parametrize("i,j", [(0, -1), (1, 4), (1, -4), (3, 0), (-1, 2), (0, 7)])
def test_out_of_dimension_is_out_of_bounds(rt, i, j):
    an = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = rt.from_numpy(an)
    out = rt.from_numpy(np.full(1, 7, np.float32))
    reads_at.launch(rt, 1, 1, a=a, out=out, i=i, j=j)
    assert out.numpy()[0] == 0.0  # a checked read out of bounds, not a[i*4 + j]
    np.testing.assert_array_equal(a.numpy(), an)  # the write was dropped
    ref_out, ref_a = np.full(1, 7, np.float32), an.copy()
    simulate(reads_at, cube_count=(1,), cube_dim=(1,), a=ref_a, out=ref_out, i=np.int32(i),
             j=np.int32(j))
    np.testing.assert_array_equal(out.numpy(), ref_out)
    np.testing.assert_array_equal(a.numpy(), ref_a)


def test_inside_dimension_reads_and_writes(rt):
    an = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = rt.from_numpy(an)
    out = rt.from_numpy(np.zeros(1, np.float32))
    reads_at.launch(rt, 1, 1, a=a, out=out, i=2, j=3)
    assert out.numpy()[0] == an[2, 3]
    want = an.copy()
    want[2, 3] = 100.0
    np.testing.assert_array_equal(a.numpy(), want)


# ---- local arrays of several sizes, against the simulator ----------------------------------

@cube(launch=True)
def local_table(out: Tensor[u32], R: Comptime[int], C: Comptime[int]):
    t = cb.LocalArray(u32, (R, C))
    for r in range(R):
        for c in range(C):
            t[r, c] = r * 10 + c + CUBE_POS_X
    acc = u32(0)
    for c in range(t.shape(1)):
        for r in range(t.shape[0]):
            acc = acc * 3 + t[r, c]
    out[CUBE_POS_X, 0] = acc
    out[CUBE_POS_X, 1] = t.rank() * 100 + t.shape(0) * 10 + t.shape(1)


def test_local_array_of_two_sizes(rt):
    n, r, c = 3, 2, 3
    out = rt.from_numpy(np.zeros((n, 2), np.uint32))
    local_table.launch(rt, n, 1, out=out, R=r, C=c)
    ref = np.zeros((n, 2), np.uint32)
    simulate(local_table, cube_count=(n,), cube_dim=(1,), out=ref, R=r, C=c)
    np.testing.assert_array_equal(out.numpy(), ref)
    want = []  # plain Python, masked to 32 bits
    for p in range(n):
        acc = 0
        for cc in range(c):
            for rr in range(r):
                acc = (acc * 3 + rr * 10 + cc + p) & 0xFFFFFFFF
        want.append([acc, 2 * 100 + r * 10 + c])
    np.testing.assert_array_equal(out.numpy(), np.array(want, np.uint32))

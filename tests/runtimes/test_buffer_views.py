"""A view of a buffer (a copy of the Buffer object with its own shape/strides, as the kernel
library makes them) shares the allocation: dropping either must not hand the memory back to a
runtime's pool while the other still uses it."""
import copy
import gc

import numpy as np
import pytest

import cube as cb


def test_dropping_a_view_keeps_the_memory(rt):
    data = np.arange(1024, dtype=np.float32)
    base = rt.from_numpy(data)
    view = copy.copy(base.buffer if hasattr(base, "buffer") else base)
    view.shape, view.strides = (32, 32), (1, 32)  # a transpose
    del view
    gc.collect()
    other = rt.from_numpy(np.full(1024, -1.0, np.float32))  # would reuse a freed block
    np.testing.assert_array_equal(base.numpy(), data)
    assert other.numpy()[0] == -1.0


def test_dropping_the_base_keeps_the_view(rt):
    data = np.arange(1024, dtype=np.float32)
    base = rt.from_numpy(data)
    view = copy.copy(base.buffer if hasattr(base, "buffer") else base)
    del base
    gc.collect()
    other = rt.from_numpy(np.full(1024, -1.0, np.float32))
    np.testing.assert_array_equal(view.numpy(), data)
    assert other.numpy()[0] == -1.0


def _fill(rt, n, value):
    """An `empty` buffer (pooled when big) written with value."""
    b = rt.empty((n,), np.float32)
    b.array[:] = value if hasattr(b, "array") else None
    return b


def test_host_pool_reuses_freed_memory_and_respects_views():
    """cpu/interp: big `empty` buffers come from a pool; a freed one is reused, a view keeps
    its memory out of the pool, and pinned (exported) memory never returns to it."""
    import cube as cb
    from runtimes.host import POOL_MIN_BYTES
    rt = cb.runtime("cpu")
    n = POOL_MIN_BYTES  # floats: 4x the pooling threshold
    a = _fill(rt, n, 1.0)
    ptr = a.ptr
    del a
    gc.collect()
    b = _fill(rt, n, 2.0)
    assert b.ptr == ptr  # reused
    view = b.view((n // 2, 2), (2, 1))
    del b
    gc.collect()
    c = _fill(rt, n, 3.0)
    assert c.ptr != ptr and view.array[0] == 2.0  # the view kept it
    del view, c
    gc.collect()
    d = _fill(rt, n, 4.0)
    d.pin()
    exported = d.array
    ptr_d = d.ptr
    del d
    gc.collect()
    e = _fill(rt, n, 5.0)
    assert e.ptr != ptr_d and exported[0] == 4.0


def test_dlpack_export_pins_pooled_memory():
    import dl
    t = dl.arange(70000, dtype=dl.float32, device="cpu")._materialise()
    arr = np.from_dlpack(t)
    want = np.arange(70000, dtype=np.float32)
    del t
    gc.collect()
    for _ in range(3):  # allocations that would take the freed block
        dl.full((70000,), -1.0, device="cpu")._materialise()
    np.testing.assert_array_equal(arr, want)


def test_a_full_pool_makes_room_for_a_new_size():
    """Past the cap, a freed block displaces free blocks of other sizes (largest first), so
    a later phase's sizes are pooled too; a block bigger than the cap is never kept."""
    from runtimes.pool import Pool
    made = []
    pool = Pool(lambda n: made.append(n) or bytearray(n), cap_bytes=4096)
    big = [pool.take(2048) for _ in range(2)]
    for blk, cls in big:
        pool.give(blk, cls)
    assert pool._held == 4096
    small, cls = pool.take(1000)  # a new size class: fresh memory
    assert made[-1] == 1024
    pool.give(small, cls)  # the pool is full: one 2 KiB block makes room
    assert pool._held == 2048 + 1024
    again, _ = pool.take(1000)
    assert again is small and pool.stats["reuses"] == 1
    huge, hcls = pool.take(10000)
    pool.give(huge, hcls)
    assert pool._held == 2048


# ---- numpy() of a view reads what its shape and strides select -----------------------------

VIEWS = [  # (shape, strides) over a 4x6 array of 24 elements, with the NumPy equivalent
    ((6, 4), (1, 6), lambda a: a.T),
    ((4, 3), (6, 2), lambda a: a[:, ::2]),
    ((12,), (2,), lambda a: a.reshape(-1)[::2]),
    ((3, 6), (0, 1), lambda a: np.broadcast_to(a[0], (3, 6))),
    ((2, 2, 6), (12, 6, 1), lambda a: a.reshape(2, 2, 6)),
    ((4,), (1,), lambda a: a.reshape(-1)[:4]),
    ((0, 5), (1, 1), lambda a: np.zeros((0, 5), a.dtype)),
]


@pytest.mark.parametrize("shape,strides,ref", VIEWS, ids=[str(v[:2]) for v in VIEWS])
def test_view_numpy_honours_shape_and_strides(rt, shape, strides, ref):
    data = np.arange(24, dtype=np.float32).reshape(4, 6)
    base = rt.from_numpy(data)
    got = base.view(shape, strides).numpy()
    np.testing.assert_array_equal(got, ref(data))
    assert got.shape == shape and got.flags.writeable
    np.testing.assert_array_equal(base.numpy(), data)  # the base is untouched
    got[...] = -1  # a copy: writing it leaves the buffer alone
    np.testing.assert_array_equal(base.numpy(), data)


def test_view_of_a_view_and_its_lines(rt):
    data = np.arange(16, dtype=np.int32)
    base = rt.from_numpy(data)
    v = base.view((4, 4), (4, 1)).view((4, 4), (1, 4))
    np.testing.assert_array_equal(v.numpy(), data.reshape(4, 4).T)
    lines = base.view((2, 8), (8, 1)).lines(4)
    np.testing.assert_array_equal(lines.numpy(), data.reshape(2, 8))


def test_view_outside_the_allocation_is_refused(rt):
    base = rt.from_numpy(np.arange(8, dtype=np.float32))
    for shape, strides in (((4,), (3,)), ((3, 3), (3, 1)), ((2,), (-1,))):
        with pytest.raises(cb.LaunchError, match="reaches element"):
            base.view(shape, strides).numpy()
    with pytest.raises(cb.LaunchError, match="differ in rank"):
        base.view((2, 4), (4,))


def test_view_contiguity():
    """The flag launches use for Array params: worked out on first use, per view."""
    from runtimes.buffer import contiguous
    rt = cb.runtime("interp")
    base = rt.from_numpy(np.zeros((4, 6), np.float32))
    cases = [((4, 6), (6, 1), True), ((6, 4), (1, 6), False), ((24, 1), (1, 99), True),
             ((1, 24), (5, 1), True), ((4, 3), (6, 2), False), ((3, 6), (0, 1), False),
             ((12,), (2,), False), ((1,), (7,), True)]
    for shape, strides, want in cases:
        v = base.view(shape, strides)
        assert v.contiguous is None and contiguous(v) is want and v.contiguous is want
        assert contiguous(base.view(shape, strides).lines(1)) is want

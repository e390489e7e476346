"""Every host buffer starts on a 64-byte cache line: small (malloc'd) and pooled ones, fresh
and reused pool blocks, `from_numpy` copies of any layout, and dl tensors' storage."""
from __future__ import annotations

import numpy as np
import pytest

import cube as cb
import dl
from runtimes.host import ALIGN, POOL_MIN_BYTES

HOST = ["cpu", "interp"]
SIZES = [0, 1, 3, 17, 1000, POOL_MIN_BYTES // 4 - 1, POOL_MIN_BYTES // 4, 3 * POOL_MIN_BYTES + 5]


def _rt(name):
    try:
        return cb.runtime(name)
    except cb.RuntimeUnavailable as e:  # pragma: no cover - a host runtime always starts
        pytest.skip(str(e))


def _aligned(buf) -> bool:
    """The address kernels get, and the array's own (NumPy reports any address for an
    empty array), on a cache line."""
    return buf.ptr % ALIGN == 0 and (buf.size == 0
                                     or buf.array.__array_interface__["data"][0] == buf.ptr)


@pytest.mark.parametrize("name", HOST)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint16])
def test_empty_is_aligned(name, n, dtype):
    rt = _rt(name)
    bufs = [rt.empty((n,), dtype) for _ in range(3)]
    assert all(_aligned(b) for b in bufs)
    ptrs = {b.ptr for b in bufs}
    del bufs  # pooled sizes go back to the pool: the reused blocks stay aligned
    again = rt.empty((n,), dtype)
    assert _aligned(again)
    if n * np.dtype(dtype).itemsize >= POOL_MIN_BYTES:
        assert again.ptr in ptrs  # it is a reused block


@pytest.mark.parametrize("name", HOST)
@pytest.mark.parametrize("n", SIZES)
def test_from_numpy_copies_aligned(name, n):
    rt = _rt(name)
    rng = np.random.default_rng(n)
    # a source at an odd offset, and a transposed (non-contiguous) one
    src = rng.standard_normal(n + 1).astype(np.float32)[1:]
    buf = rt.from_numpy(src)
    assert _aligned(buf)
    np.testing.assert_array_equal(buf.numpy(), src)
    m = rng.standard_normal((max(n // 7, 1), 7)).astype(np.float32).T
    buf = rt.from_numpy(m)
    assert _aligned(buf) and buf.shape == m.shape
    np.testing.assert_array_equal(buf.numpy(), m)
    src[:] = 0  # a copy: later writes to the source are not seen
    assert n < 2 or buf.numpy().any()


@pytest.mark.parametrize("name", HOST)
@pytest.mark.parametrize("n", [5, POOL_MIN_BYTES])
def test_dl_tensor_storage_is_aligned(name, n):
    _rt(name)
    dev = dl.device(name)
    made = [dl.zeros(n, device=dev), dl.tensor(np.arange(n, dtype=np.float32)[1:], device=dev),
            dl.from_numpy(np.ones((n, 3), np.float32)[:, 1]).to(dev),
            dl.ones(n, device=dev) * 2.0]
    for t in made:
        t = t._materialise()
        assert t._buf.ptr % ALIGN == 0

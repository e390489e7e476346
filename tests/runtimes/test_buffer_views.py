"""A view of a buffer (a copy of the Buffer object with its own shape/strides, as the kernel
library makes them) shares the allocation: dropping either must not hand the memory back to a
runtime's pool while the other still uses it."""
import copy
import gc

import numpy as np


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

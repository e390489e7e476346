"""The CUDA/HIP launch's parameter block, without a GPU: `DeviceExecutable.launch` writes each
buffer's device address and the argument block into the kernel's own block and hands
cuLaunchKernel a fixed kernelParams array. A stand-in for the driver reads, through those
pointers, what the GPU would receive, and compares it with the addresses given and the
packer's block (the packing itself: test_args.py). On a GPU the CUDA suite runs the same
path end to end."""
from __future__ import annotations

import ctypes
import types

import numpy as np
import pytest

import cube as cb
from codegen.cfamily import emit_source
from cube_ir import types as T
from cube_ir.builder import Builder
from runtimes import cuda
from runtimes.buffer import as_elem
from runtimes.errors import LaunchError


def _kernel():
    b = Builder("params")
    b.array("a", T.Vec(T.f32, 4))
    b.scalar("k", T.u32)
    b.tensor("t", T.f32, 2)
    b.scalar("x", T.f32)
    return b.finish()


class _Rt:
    name = "cuda"
    stream = types.SimpleNamespace(ptr=0x5EED)


def _buffer(rt, shape, ptr):
    """A DeviceBuffer at a made-up device address (no memory behind it: never read)."""
    b = object.__new__(cuda.DeviceBuffer)
    elem = as_elem(np.float32)
    b.rt, b.shape, b.elem, b.dtype = rt, shape, elem, elem.np
    b.size = int(np.prod(shape))
    b.strides = tuple(int(s) for s in np.cumprod((1,) + shape[:0:-1])[::-1])
    b._alloc, b.mem, b.ptr = b.size * 4, None, ptr
    return b


@pytest.fixture
def launched(monkeypatch):
    """(executable, calls): each driver call as the GPU would see it."""
    calls = []

    def launch_kernel(f, cx, cy, cz, dx, dy, dz, shared, stream, params, extra):
        exe = state["exe"]
        nbuf, nslots = exe.layout.nbuf, exe.layout.nslots
        ptrs = (ctypes.c_uint64 * (nbuf + 1)).from_address(params)
        addrs = [ctypes.c_uint64.from_address(ptrs[i]).value for i in range(nbuf)]
        words = ctypes.string_at(ptrs[nbuf], 8 * nslots)
        calls.append(dict(f=f, grid=(cx, cy, cz), block=(dx, dy, dz), shared=shared,
                          stream=stream, addrs=addrs, words=words, extra=extra))

    monkeypatch.setattr(cuda, "driver", types.SimpleNamespace(launchKernel=launch_kernel))
    src = emit_source(_kernel(), "cuda")
    module = types.SimpleNamespace(get_function=lambda name: types.SimpleNamespace(ptr=0xF00D))
    state = {"exe": cuda.DeviceExecutable(_Rt(), _kernel(), src, module)}
    return state["exe"], calls


def test_params_carry_addresses_and_block(launched):
    exe, calls = launched
    rt = exe.rt
    for a_ptr, t_ptr, k, x in ((0x10000, 0x20000, 7, 0.5), (0x30040, 0x40080, 9, -2.0)):
        a = _buffer(rt, (12,), a_ptr).lines(4)
        t = _buffer(rt, (3, 5), t_ptr)
        args = [a, k, t, x]
        exe.launch((4, 2, 1), (32, 1, 1), args)
        blob, _ = exe.packer.pack(args)
        c = calls[-1]
        assert c["addrs"] == [a_ptr, t_ptr]  # buffer order: a, then t
        assert c["words"] == blob
        assert (c["f"], c["grid"], c["block"], c["shared"], c["stream"], c["extra"]) == \
            (0xF00D, (4, 2, 1), (32, 1, 1), 0, 0x5EED, 0)
    assert len(calls) == 2


def test_short_dims_are_padded(launched):
    exe, calls = launched
    rt = exe.rt
    exe.launch((5,), (64,), [_buffer(rt, (4,), 0x100).lines(4), 1,
                             _buffer(rt, (2, 2), 0x200), 1.0])
    assert calls[-1]["grid"] == (5, 1, 1) and calls[-1]["block"] == (64, 1, 1)


def test_wrong_buffer_and_driver_errors(launched, monkeypatch):
    exe, _ = launched
    rt = exe.rt
    host = cb.runtime("cpu").empty((2, 2), np.float32)
    with pytest.raises(LaunchError, match="argument 't' must be a buffer of this cuda runtime, "
                                          "got HostBuffer of cpu"):
        exe.launch((1, 1, 1), (1, 1, 1), [_buffer(rt, (4,), 0x100).lines(4), 1, host, 1.0])

    def fails(*a):
        raise RuntimeError("CUDA_ERROR_INVALID_VALUE")
    monkeypatch.setattr(cuda, "driver", types.SimpleNamespace(launchKernel=fails))
    with pytest.raises(LaunchError, match="launch of params failed on cuda: RuntimeError: "
                                          "CUDA_ERROR_INVALID_VALUE"):
        exe.launch((1, 1, 1), (1, 1, 1), [_buffer(rt, (4,), 0x100).lines(4), 1,
                                          _buffer(rt, (2, 2), 0x200), 1.0])

"""The wgpu runtimes (WGSL and SPIR-V) on whatever adapter wgpu finds (lavapipe in CI):
limits become LaunchErrors naming the limit, Features come from the adapter, buffers pool."""
from __future__ import annotations

import numpy as np
import pytest

import cube as cb
from cube import ABSOLUTE_POS, Array, cube, f32
from cube.cli import main as cli
from cube_ir.builder import Builder


@pytest.fixture(params=["wgpu", "wgpu-spirv"])
def wrt(request):
    try:
        return cb.runtime(request.param)
    except cb.RuntimeUnavailable as e:
        pytest.skip(f"{request.param} unavailable: {str(e).splitlines()[0]}")


@cube(launch=True)
def add_one(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = x[i] + 1.0


def test_features_come_from_the_adapter(wrt):
    f, lim = wrt.features, wrt.limits
    assert f.max_cube_dim == lim["max-compute-invocations-per-workgroup"]
    assert f.max_shared_bytes == lim["max-compute-workgroup-storage-size"]
    assert not f.f64 and not f.int64 and f.plane_size == 1
    assert f.f16 == ("shader-f16" in wrt.adapter.features)


def test_too_many_workgroups_is_a_launch_error(wrt):
    x = wrt.zeros(4)
    n = wrt.limits["max-compute-workgroups-per-dimension"]
    with pytest.raises(cb.LaunchError, match="max-compute-workgroups-per-dimension"):
        add_one.launch(wrt, cube_count=(n + 1,), cube_dim=(1,), x=x, out=x)


def test_workgroup_size_limits(wrt):
    x = wrt.zeros(4)
    z = wrt.limits["max-compute-workgroup-size-z"]
    inv = wrt.limits["max-compute-invocations-per-workgroup"]
    exe = wrt.compile(add_one.ir(x=Array[f32], out=Array[f32]))
    if z < inv:
        with pytest.raises(cb.LaunchError, match="max-compute-workgroup-size-z"):
            exe.launch((1, 1, 1), (1, 1, z + 1), [x, x])
    with pytest.raises(cb.LaunchError, match="max-compute-invocations-per-workgroup"):
        exe.launch((1, 1, 1), (inv, 2, 1), [x, x])


def test_too_many_storage_buffers_is_a_launch_error(wrt):
    n = wrt.limits["max-storage-buffers-per-shader-stage"] + 1
    b = Builder("many")
    arrays = [b.array(f"a{i}", cb.f32) for i in range(n)]
    b.store(arrays[0], b.const(0, cb.u32), b.const(1.0, cb.f32))
    with pytest.raises(cb.LaunchError, match="max-storage-buffers-per-shader-stage"):
        wrt.compile(b.kernel)


def test_buffer_beyond_max_buffer_size(wrt):
    n = wrt.limits["max-buffer-size"] // 4 + 1
    with pytest.raises(cb.LaunchError, match="max-buffer-size"):
        wrt.empty(n, np.float32)


def test_freed_buffers_are_reused(wrt):
    a = wrt.empty(1000)
    g = a.gbuf
    del a
    b = wrt.empty(1000)
    assert b.gbuf is g
    b2 = wrt.from_numpy(np.arange(1000, dtype=np.float32))
    out = wrt.empty_like(b2)
    add_one.launch(wrt, cube_count=(4,), cube_dim=(256,), x=b2, out=out)
    wrt.sync()
    np.testing.assert_array_equal(out.numpy(), np.arange(1000) + 1)


def test_odd_sized_packed_buffer_roundtrip():
    try:
        rt = cb.runtime("wgpu")
    except cb.RuntimeUnavailable as e:
        pytest.skip(f"wgpu unavailable: {str(e).splitlines()[0]}")
    x = np.arange(7, dtype=np.uint8)  # 7 bytes: padded to whole words on the device
    np.testing.assert_array_equal(rt.from_numpy(x).numpy(), x)


def test_cli_lists_the_wgpu_runtimes(capsys):
    assert cli(["targets"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "wgsl" in rows["wgpu"] and "spirv" in rows["wgpu-spirv"]


@pytest.mark.parametrize("target", ["wgsl", "spirv"])
def test_cli_dump(target, capsys, tmp_path):
    from pathlib import Path
    ex = Path(__file__).resolve().parents[2] / "examples" / "vector_add.py"
    assert cli(["dump", f"{ex}:vector_add", "--target", target]) == 0
    out = capsys.readouterr().out
    assert ("@compute" in out) if target == "wgsl" else ("OpEntryPoint" in out)

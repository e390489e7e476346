"""The wgpu runtimes (WGSL and SPIR-V) on whatever adapter wgpu finds (lavapipe in CI):
limits become LaunchErrors naming the limit, Features come from the adapter, buffers pool."""
from __future__ import annotations

from typing import TypeVar

import numpy as np
import pytest

import cube as cb
from cube import ABSOLUTE_POS, PLANE_DIM, UNIT_POS, UNIT_POS_PLANE, Array, Line, cube, f32, u32
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
    assert not f.f64 and not f.int64
    assert f.plane_size == (wrt.subgroup_size if "subgroup" in wrt.adapter.features else 1)
    assert f.f16 == ("shader-f16" in wrt.adapter.features)


F = TypeVar("F")


@cube(launch=True)
def plane_mix(x: Array[Line[F]], out: Array[Line[F]]):
    i = ABSOLUTE_POS
    n = x.len()
    v = x[i]
    lane = UNIT_POS_PLANE
    out[i] = cb.plane_sum(v)
    out[n + i] = cb.plane_max(v)
    out[2 * n + i] = cb.plane_inclusive_sum(v)
    out[3 * n + i] = cb.plane_shuffle(v, (lane + 3) % PLANE_DIM)
    out[4 * n + i] = cb.plane_broadcast(v, 2)
    out[5 * n + i] = F(cb.plane_any(v > F(5)))
    if UNIT_POS % 3 != 1:  # planes with inactive units
        out[6 * n + i] = cb.plane_sum(v)
        out[7 * n + i] = cb.plane_exclusive_sum(v)
        out[8 * n + i] = cb.plane_shuffle_xor(v, u32(1))
        out[9 * n + i] = cb.plane_min(v)
        out[10 * n + i] = F(cb.plane_all(v < F(9)))


@pytest.mark.parametrize("dtype,line", [(np.float32, 1), (np.int32, 4), (np.float16, 1),
                                        (np.uint8, 8), (np.int16, 3)])
@pytest.mark.parametrize("cube_dim", [(100,), (16, 4)])
def test_plane_ops_match_the_interpreter(wrt, dtype, line, cube_dim):
    """Planes of the device's subgroup size, partial (100 units = 12 planes of 8 and one of
    4) and with inactive units, on every type path (native, f16, packed narrow ints, wide and
    3-lane lines), against the interpreter with the same plane size."""
    if dtype == np.float16 and not wrt.features.f16:
        pytest.skip("no f16")
    units = int(np.prod(cube_dim))
    n = 2 * units  # two cubes, one line per unit
    x = np.random.default_rng(3).integers(0, 10, n * line).astype(dtype)
    interp = cb.runtime("interp", plane_size=wrt.plane_size)
    outs = []
    for r in (wrt, interp):
        out = r.from_numpy(np.zeros(11 * n * line, dtype))
        plane_mix.launch(r, cube_count=2, cube_dim=cube_dim, x=r.from_numpy(x).lines(line),
                         out=out.lines(line))
        outs.append(out.numpy())
    np.testing.assert_array_equal(outs[0], outs[1])


def test_plane_ops_need_whole_rows_of_planes(wrt):
    if wrt.plane_size == 1:
        pytest.skip("no subgroups")
    x = wrt.zeros(64)
    with pytest.raises(cb.LaunchError, match="multiple of the plane size"):
        plane_mix.launch(wrt, cube_count=1, cube_dim=(4, 4), x=x, out=wrt.zeros(11 * 64))


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

"""The CPU runtime's instruction-set models: the host's, and an AVX2-only one (CUBE_CPU_ISA=
avx2 or `cb.runtime("cpu", isa="avx2")`) that compiles for a haswell-class CPU with AVX-512
off. Its kernels run correctly, use no 512-bit registers, and its cache identity differs."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cube as cb
from cube import ABSOLUTE_POS, Array, Line, f32
from runtimes import cpu_jit

ROOT = Path(__file__).resolve().parents[2]


def _avx2():
    try:
        return cb.runtime("cpu", isa="avx2")
    except cb.RuntimeUnavailable as e:
        pytest.skip(f"no AVX2 model on this host: {e}")


@cb.cube(launch=True)
def axpy(x: Array[Line[f32]], y: Array[Line[f32]], out: Array[Line[f32]]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = cb.fma(x[i], Line[f32, x.line_size()](2.5), y[i])


def test_features_describe_the_register_file():
    rt = cb.runtime("cpu")
    f = rt.features
    assert f.vector_bits in (128, 256, 512) and f.vector_registers in (8, 16, 32)
    if rt.isa.has("avx512f"):
        assert (f.vector_bits, f.vector_registers) == (512, 32)
    elif rt.isa.has("avx2"):
        assert (f.vector_bits, f.vector_registers) == (256, 16)


def test_avx2_model_features():
    rt = _avx2()
    assert (rt.features.vector_bits, rt.features.vector_registers) == (256, 16)
    assert rt.isa.cpu == "haswell"
    on = {f[1:] for f in rt.isa.features.split(",") if f.startswith("+")}
    assert {"avx2", "fma"} <= on
    assert not any(f.startswith(("avx512", "avx10", "amx")) for f in on)
    assert "avx512f" not in rt.device_id()
    assert rt.device_id() != cb.runtime("cpu").device_id()


@pytest.mark.parametrize("lines", [1, 8, 16])
def test_avx2_kernel_runs_and_matches_host(lines):
    rt, host = _avx2(), cb.runtime("cpu")
    rng = np.random.default_rng(lines)
    x, y = rng.standard_normal((2, 1008)).astype(np.float32)
    want = 2.5 * x.astype(np.float64) + y
    for r in (rt, host):
        dx, dy = r.from_numpy(x), r.from_numpy(y)
        out = r.empty_like(dx)
        axpy.launch(r, cube_count=(1008 // lines + 63) // 64, cube_dim=64, x=dx.lines(lines),
                    y=dy.lines(lines), out=out.lines(lines))
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6, atol=1e-6)


def test_avx2_code_has_no_512_bit_registers():
    _avx2()
    text = axpy.source(target="llvm", x=Array[Line[f32, 16]], y=Array[Line[f32, 16]],
                       out=Array[Line[f32, 16]])
    assert "zmm" not in cpu_jit.assembly(text, "avx2")
    assert "ymm" in cpu_jit.assembly(text, "avx2")
    if cb.runtime("cpu").isa.has("avx512f"):
        assert "zmm" in cpu_jit.assembly(text, "host")


def test_cache_keys_differ_by_isa(tmp_path, monkeypatch):
    """The same kernel compiled for both models makes two disk-cache entries (neither loads
    the other's object), and a second avx2 process loads its own."""
    rt = _avx2()
    monkeypatch.setenv("CUBE_CACHE_DIR", str(tmp_path))
    script = """
import numpy as np, cube as cb, sys
sys.path.insert(0, "tests/runtimes")
from test_cpu_isa import axpy
rt = cb.runtime("cpu")
x = rt.from_numpy(np.ones(64, np.float32))
out = rt.empty_like(x)
axpy.launch(rt, cube_count=1, cube_dim=8, x=x.lines(8), y=x.lines(8), out=out.lines(8))
assert (out.numpy() == 3.5).all()
print(rt.isa.name, rt.stats["codegen"], rt.stats["cache_loads"])
"""
    def run(isa):
        env = {**os.environ, "CUBE_CPU_ISA": isa, "CUBE_CACHE_DIR": str(tmp_path)}
        r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        return r.stdout.split()
    assert run("avx2") == ["avx2", "1", "0"]
    assert run("host") == ["host", "1", "0"]  # not the avx2 object
    assert run("avx2") == ["avx2", "0", "1"]
    assert rt.isa.name == "avx2"


def test_bad_isa_is_refused(monkeypatch):
    with pytest.raises(ValueError, match="CUBE_CPU_ISA"):
        cpu_jit.isa("avx9000")

"""WGSL and SPIR-V for every kernel of the examples and the language tests: WGSL must pass
wgpu's compiler (naga), SPIR-V must pass `spirv-val --target-env vulkan1.1`; types a target
lacks fail with an error naming the type and the target."""
from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
from shader_corpus import kernels

import cube as cb
from codegen.spirv import Unsupported as SpvUnsupported
from codegen.spirv import disassemble
from codegen.spirv import emit_module as emit_spirv
from codegen.wgsl import Unsupported as WgslUnsupported
from codegen.wgsl import emit_module as emit_wgsl
from cube import Array, cube, f32, f64

WGSL_LACKS = {"f64", "i64", "u64"}
SPIRV_LACKS = WGSL_LACKS | {"f16", "bf16", "i8", "u8", "i16", "u16"}


def _types(k) -> set[str]:
    from cube_ir import ir
    out = {p.type.elem.name for p in k.params}
    for op in ir.walk(k.body):
        w = ir.writes(op)
        if w is not None:
            out.add(w.type.elem.name)
    return out


@pytest.fixture(scope="module")
def corpus():
    ks = kernels()
    assert len(ks) > 40  # the examples and the language tests, deduplicated
    return ks


def test_every_kernel_compiles_as_wgsl(corpus):
    try:
        rt = cb.runtime("wgpu")
    except cb.RuntimeUnavailable as e:
        pytest.skip(f"wgpu unavailable: {str(e).splitlines()[0]}")
    checked = 0
    for k in corpus:
        lacking = _types(k) & WGSL_LACKS
        if lacking:
            with pytest.raises(WgslUnsupported, match="not supported by the wgsl target"):
                emit_wgsl(k)
            continue
        text = emit_wgsl(k, f16=rt.has_f16).text
        try:
            rt.device.create_shader_module(code=text)
        except Exception as e:
            pytest.fail(f"{k.name}: naga rejected the WGSL:\n{e}\n{text}")
        checked += 1
    assert checked > 30


def test_every_kernel_passes_spirv_val(corpus, tmp_path):
    tool = shutil.which("spirv-val")
    if tool is None:
        pytest.skip("spirv-val (Debian spirv-tools) is not installed")
    files = {}
    for i, k in enumerate(corpus):
        try:
            blob = emit_spirv(k, (64, 1, 1)).binary
        except SpvUnsupported as e:
            assert "not supported by the spirv target" in str(e)
            assert _types(k) & SPIRV_LACKS or "lines of" in str(e) or "bool" in str(e), \
                f"{k.name}: {e}"
            continue
        f = tmp_path / f"{i}_{k.name}.spv"
        f.write_bytes(blob)
        files[f] = blob
    assert len(files) > 25

    def val(f):
        return f, subprocess.run([tool, "--target-env", "vulkan1.1", str(f)],
                                 capture_output=True, text=True)
    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        for f, r in pool.map(val, files):
            assert r.returncode == 0, f"{f.name}: {r.stderr}{r.stdout}\n" \
                                      f"{disassemble(files[f])}"


@cube(launch=True)
def _double(x: Array[f64], out: Array[f64]):
    out[0] = x[0] * 2.0


@cube(launch=True)
def _scale(x: Array[f32], out: Array[f32]):
    out[0] = x[0] * 2.0


@pytest.mark.parametrize("target", ["wgsl", "spirv"])
def test_missing_type_is_a_compile_error_naming_type_and_target(target):
    with pytest.raises(cb.CompileError, match=f"f64 is not supported by the {target} target"):
        _double.source(target=target)


def test_sources_are_readable():
    assert "@compute" in _scale.source(target="wgsl")
    text = _scale.source(target="spirv")
    assert "OpEntryPoint" in text and "GLCompute" in text

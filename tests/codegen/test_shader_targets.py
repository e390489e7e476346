"""WGSL and SPIR-V for every kernel of the examples and the language tests: WGSL must pass
wgpu's compiler (naga), SPIR-V must pass `spirv-val --target-env vulkan1.1`; types a target
lacks fail with an error naming the type and the target."""
from __future__ import annotations

import pytest
from shader_corpus import kernels

import cube as cb
from codegen.spirv import Unsupported as SpvUnsupported
from codegen.spirv import disassemble
from codegen.spirv import emit_module as emit_spirv
from codegen.wgsl import Unsupported as WgslUnsupported
from codegen.wgsl import emit_module as emit_wgsl
from cube import Array, cube, f32, f64, i32
from cube.check import tools

WGSL_LACKS = {"f64", "i64", "u64"}
SPIRV_LACKS = WGSL_LACKS


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
        if k.plane_size > 1 and rt.plane_size == 1:
            continue  # the device has no subgroups
        text = emit_wgsl(k).text
        try:
            rt.device.create_shader_module(code=text)
        except Exception as e:
            pytest.fail(f"{k.name}: naga rejected the WGSL:\n{e}\n{text}")
        checked += 1
    assert checked > 30


def test_every_kernel_passes_spirv_val(corpus, tmp_path):
    if tools.find_tool("spirv-val") is None:
        pytest.skip("spirv-val (Debian spirv-tools) is not installed")
    blobs = {}
    for i, k in enumerate(corpus):
        try:
            blobs[f"{i}_{k.name}"] = emit_spirv(k, (64, 1, 1)).binary
        except SpvUnsupported as e:
            assert "not supported by the spirv target" in str(e)
            # (naga loses a compare-exchange's result: a used atomic_cas is refused too)
            assert _types(k) & SPIRV_LACKS or "OpAtomicCompareExchange" in str(e), \
                f"{k.name}: {e}"
    assert len(blobs) > 25
    run = tools.spirv(list(blobs.items()), "", tmp_path)  # cube check's runner
    assert run.ok, "\n".join(f"{label}: {err}\n{disassemble(blobs[label])}"
                             for label, err in run.failed.items())


def test_every_kernel_builds_on_wgpu_spirv(corpus):
    """naga (wgpu's SPIR-V front end) takes what spirv-val takes only in part: every module
    must parse, validate and build a pipeline (naga's own SPIR-V writer runs there)."""
    try:
        rt = cb.runtime("wgpu-spirv")
    except cb.RuntimeUnavailable as e:
        pytest.skip(f"wgpu-spirv unavailable: {str(e).splitlines()[0]}")
    built = 0
    for k in corpus:
        if k.plane_size > 1 and rt.plane_size == 1:
            continue  # the device has no subgroups
        try:
            blob = emit_spirv(k, (64, 1, 1)).binary
        except SpvUnsupported:
            continue
        try:
            mod = rt.device.create_shader_module(code=blob)
            rt.device.create_compute_pipeline(layout="auto",
                                              compute={"module": mod, "entry_point": "main"})
        except Exception as e:
            pytest.fail(f"{k.name}: wgpu-spirv rejected the SPIR-V:\n{e}\n"
                        f"{disassemble(blob)}")
        built += 1
    assert built > 30


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


@cube(launch=True)
def _fmax(x: Array[f32], out: Array[f32]):
    cb.atomic_max(out, 0, x[0])


@cube(launch=True)
def _cas_result(x: Array[i32], out: Array[i32]):
    out[1] = cb.atomic_cas(out, 0, 0, x[0])


@pytest.mark.parametrize("kernel", [_fmax, _cas_result])
def test_atomics_naga_cannot_take_are_compile_errors(kernel):
    """naga drops compare-exchange results (see codegen.spirv.ops._atomic): the SPIR-V
    target refuses what would need them, naming itself; WGSL has them."""
    types = {"x": Array[f32], "out": Array[f32]} if kernel is _fmax else {}
    with pytest.raises(cb.CompileError, match="not supported by the spirv target"):
        kernel.source(target="spirv", **types)
    assert "atomicCompareExchangeWeak" in kernel.source(target="wgsl", **types)


def test_sources_are_readable():
    assert "@compute" in _scale.source(target="wgsl")
    text = _scale.source(target="spirv")
    assert "OpEntryPoint" in text and "GLCompute" in text

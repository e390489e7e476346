"""The C-family emitter: every kernel of the tests and examples, in every dialect, through the
real tool (nvcc + ptxas for CUDA, hipcc for HIP, clang with the Metal shim for MSL), by the
tool runners of `cube check` (cube/check/tools.py). OpenCL C is built and run by PoCL through
the whole runtime suite (the `rt` fixture), so only its subgroup spelling is checked here.

The kernels of one dialect go into one translation unit (each in its own namespace, entry
points renamed apart), so each tool runs once per architecture."""
from __future__ import annotations

import re
from functools import cache

import cfamily_kernels as K  # noqa: E402  (tests/codegen is on sys.path under pytest)
import pytest

import cube as cb
from codegen.cfamily import emit_source
from cube import ABSOLUTE_POS, UNIT_POS, Array, cube, f32, f64, u64
from cube.check import tools
from cube.errors import CapabilityError, CompileError
from cube.frontend.translator import Target
from cube.targets import TARGETS
from runtimes.base import Features


@cache
def _sources(target: str, plane_size: int | None = None):
    """([(label, source)], kernels the frontend rejected) for a dialect."""
    sources, rejected = [], []
    for label, k in K.build_all(target, plane_size):
        if isinstance(k, Exception):
            rejected.append((label, k))
        else:
            sources.append((label, emit_source(k, target).text))
    return sources, rejected


def _tool(*names: str) -> None:
    for name in names:
        if tools.find_tool(name) is None:
            pytest.skip(f"{name} is not installed")


def _passes(run: tools.Run) -> None:
    assert run.ok, run.error or "\n".join(f"{k}:\n{v}" for k, v in run.failed.items())


def test_every_kernel_has_a_specialisation():
    """Kernels with comptime parameters or type variables need an entry in VARIANTS."""
    missing = [n for n, k in K.collect().items() if K.needs_variants(k) and n not in K.VARIANTS]
    assert not missing, f"add specialisations for {missing} to cfamily_kernels.VARIANTS"
    assert len(K.collect()) >= 20


@pytest.mark.parametrize("target", ["cuda", "hip", "msl", "opencl"])
def test_frontend_accepts_the_kernels(target):
    """Kernels are rejected only by a target's declared capabilities (f64 on Metal, f64
    compare-exchange in OpenCL's global memory...), as `cube check` shows them (n/a)."""
    sources, rejected = _sources(target)
    assert len(sources) > 80
    for label, e in rejected:
        if isinstance(e, CapabilityError) and e.target == target:
            continue
        if isinstance(e, CompileError) and "cannot mix u32 and i32" in str(e):
            continue  # known frontend issue in two test kernels (tree_sum, local_sort)
        raise AssertionError(f"{target}: {label} was rejected: {e}")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cuda_compiles(tmp_path, arch):
    _tool("nvcc", "ptxas")
    sources, _ = _sources("cuda")
    run = tools.cuda(sources, arch, tmp_path)
    _passes(run)
    assert run.ptx.count(".entry") == len(sources)
    assert "shfl.sync" in run.ptx  # plane ops became warp shuffles


def test_hip_compiles(tmp_path):
    _tool("hipcc")
    archs, _ = tools.hip_archs()
    for arch, plane in archs:
        sources, _ = _sources("hip", plane)
        _passes(tools.hip(sources, arch, tmp_path))
        assert (tmp_path / f"{arch}.co").stat().st_size > 0


def test_msl_passes_clang_with_the_metal_shim(tmp_path):
    _tool("clang++")
    sources, _ = _sources("msl")
    _passes(tools.msl(sources, "metal-shim", tmp_path))


def test_opencl_subgroup_code_passes_clang(tmp_path):
    """PoCL has no subgroups, so the sub_group_* spelling is checked by clang's OpenCL C."""
    _tool("clang")
    k = K.collect()["plane_ops"]
    info = TARGETS["opencl"]
    kern = k.build_ir(k.signature_from_types(), Target("opencl", 32, info.features))
    text = emit_source(kern, "opencl").text
    _passes(tools.opencl([("plane_ops", text)], "CL3.0", tmp_path))
    assert "sub_group_reduce_add" in text


def test_sources_differ_only_where_dialects_do():
    """One emitter: the same scalar kernel in four dialects has the same statements."""
    k = K.collect()["gelu_kernel"]
    outs = {}
    for t in ("cuda", "hip", "msl", "opencl"):
        kern = k.build_ir(k.signature_from_types(line_sizes={"inp": 1, "out": 1}),
                          Target(t, 1, TARGETS[t].features))
        body = emit_source(kern, t).text.split("{", 2)[-1]
        lines = re.findall(r"^\s+v\d+ = .*;$", body, re.M)
        # the table's spellings: CUDA's erff and long long are OpenCL's erf and long
        outs[t] = [ln.replace("erff(", "erf(").replace("cube_erf_float(", "erf(")
                   .replace("long long", "long").replace("unsigned int", "uint") for ln in lines]
    assert len(outs["cuda"]) >= 5
    assert outs["cuda"] == outs["hip"] == outs["opencl"] == outs["msl"]


def test_lines_are_vectors(tmp_path):
    """Lines are native vectors in OpenCL C and MSL, and move through memory as 16-byte
    accesses in CUDA (checked in the PTX); sizes and types without a vector stay lanes."""
    k = K.collect()["gelu_kernel"]

    def src(t, n):
        kern = k.build_ir(k.signature_from_types(line_sizes={"inp": n, "out": n}),
                          Target(t, 1, TARGETS[t].features))
        return emit_source(kern, t).text

    assert "vload8(" in src("opencl", 8) and "cube_erf_float8(" in src("opencl", 8)
    assert "float3" in src("msl", 3) and "packed_float3" in src("msl", 3)
    assert "_7 = " in src("msl", 8)  # no float8 in MSL: lanes
    _tool("nvcc", "ptxas")
    run = tools.cuda([("gelu", src("cuda", 8))], "sm_80", tmp_path)
    _passes(run)
    ptx = run.ptx
    assert re.search(r"ld\.global(\.nc)?\.v4\.f32", ptx) and "st.global.v4.f32" in ptx


# ---- capabilities: a kernel needing what the target lacks fails before any compiler ---------

@cube(launch=True)
def _f64_kernel(x: Array[f64]):
    x[ABSOLUTE_POS] = x[ABSOLUTE_POS] * 2.0


@cube(launch=True)
def _plane_kernel(x: Array[f32]):
    x[ABSOLUTE_POS] = cb.plane_sum(x[ABSOLUTE_POS])


@cube(launch=True)
def _big_shared(x: Array[f32]):
    s = cb.SharedMemory(f32, 20000)
    s[UNIT_POS] = x[ABSOLUTE_POS]


@cube(launch=True)
def _atomic_u64(x: Array[u64]):
    cb.atomic_max(x, 0, u64(ABSOLUTE_POS))


def test_missing_features_are_compile_errors():
    with pytest.raises(CompileError, match="f64 is not supported by the msl target"):
        _f64_kernel.source(target="msl")
    with pytest.raises(CompileError, match="shared memory of 80000 bytes exceeds the cuda"):
        _big_shared.source(target="cuda")
    with pytest.raises(CompileError,
                       match="atomic_max on u64 in global memory is not supported by the msl"):
        _atomic_u64.source(target="msl")
    no_plane = Features(plane_size=1, plane_ops=False)
    with pytest.raises(CompileError, match="plane_sum .*not support"):
        _plane_kernel.build_ir(_plane_kernel.signature_from_types(),
                               Target("opencl", 1, no_plane))
    assert "atomicMax" in _atomic_u64.source(target="cuda")

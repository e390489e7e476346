"""The C-family emitter: every kernel of the tests and examples, in every dialect, through the
real tool (nvcc for CUDA, hipcc for HIP, clang with a Metal shim for MSL). OpenCL C is built
and run by PoCL through the whole runtime suite (the `rt` fixture), so it is not repeated here.

The kernels of one dialect go into one translation unit (each in its own namespace, entry
points renamed apart), so each tool runs once per architecture."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import cfamily_kernels as K  # noqa: E402  (tests/codegen is on sys.path under pytest)
import pytest

import cube as cb
from codegen.cfamily import emit_source
from cube import ABSOLUTE_POS, UNIT_POS, Array, cube, f32, f64, u64
from cube.errors import CompileError
from cube.frontend.translator import Target
from cube.targets import TARGETS
from runtimes.base import Features

SHIM = Path(__file__).with_name("metal_shim")


@cache
def _sources(target: str, plane_size: int | None = None):
    """(labels, one translation unit, kernels the frontend rejected) for a dialect."""
    labels, parts, includes, rejected = [], [], [], []
    for i, (label, k) in enumerate(K.build_all(target, plane_size)):
        if isinstance(k, Exception):
            rejected.append((label, k))
            continue
        text = emit_source(k, target).text
        inc = [ln for ln in text.splitlines() if ln.startswith("#include")]
        body = "\n".join(ln for ln in text.splitlines() if not ln.startswith(("#include",
                                                                               "using namespace")))
        includes += [x for x in inc if x not in includes]
        using = "using namespace metal;\n" if target == "msl" else ""
        parts.append(f"namespace cube_k{i} {{\n{using}{body}\n}}  // {label}")
        labels.append(label)
    return labels, "\n".join(includes + parts) + "\n", rejected


def _run(cmds: list[list[str]], env=None) -> list[subprocess.CompletedProcess]:
    with ThreadPoolExecutor(2) as ex:  # two cores on CI
        return list(ex.map(lambda c: subprocess.run(c, capture_output=True, text=True,
                                                    env={**os.environ, **(env or {})},
                                                    timeout=600), cmds))


def _check(r: subprocess.CompletedProcess, src: Path) -> None:
    assert r.returncode == 0, f"{' '.join(r.args)} failed on {src}:\n{r.stderr[-6000:]}"


def _tool(name: str) -> str:
    path = shutil.which(name) or (f"/usr/local/bin/{name}" if
                                  os.path.exists(f"/usr/local/bin/{name}") else None)
    if path is None:
        pytest.skip(f"{name} is not installed")
    return path


def test_every_kernel_has_a_specialisation():
    """Kernels with comptime parameters or type variables need an entry in VARIANTS."""
    missing = [n for n, k in K.collect().items() if K.needs_variants(k) and n not in K.VARIANTS]
    assert not missing, f"add specialisations for {missing} to cfamily_kernels.VARIANTS"
    assert len(K.collect()) >= 20


@pytest.mark.parametrize("target", ["cuda", "hip", "msl", "opencl"])
def test_frontend_accepts_the_kernels(target):
    """Only the MSL target may reject kernels, and only for f64, which Metal lacks."""
    labels, _, rejected = _sources(target)
    assert len(labels) > 80
    for label, e in rejected:
        if target == "msl" and isinstance(e, CompileError) and "f64" in str(e):
            continue
        if isinstance(e, CompileError) and "cannot mix u32 and i32" in str(e):
            continue  # known frontend issue in two test kernels (tree_sum, local_sort)
        raise AssertionError(f"{target}: {label} was rejected: {e}")


def test_cuda_compiles(tmp_path):
    nvcc = _tool("nvcc")
    _, tu, _ = _sources("cuda")
    src = tmp_path / "kernels.cu"
    src.write_text(tu)
    rs = _run([[nvcc, "-ptx", f"-arch={a}", str(src), "-o", str(tmp_path / f"{a}.ptx")]
               for a in ("sm_80", "sm_90")])
    for r in rs:
        _check(r, src)
    ptx = (tmp_path / "sm_80.ptx").read_text()
    assert ptx.count(".entry") == len(_sources("cuda")[0])
    assert "shfl.sync" in ptx  # plane ops became warp shuffles


def test_hip_compiles(tmp_path):
    hipcc = _tool("hipcc")
    cmds = []
    for arch, plane in (("gfx90a", 64), ("gfx1030", 32)):
        _, tu, _ = _sources("hip", plane)
        src = tmp_path / f"kernels_{arch}.hip"
        src.write_text(tu)
        cmds.append([hipcc, "--genco", f"--offload-arch={arch}", "-x", "hip", str(src), "-o",
                     str(tmp_path / f"{arch}.co")])
    for r, c in zip(_run(cmds, {"HIP_PLATFORM": "amd"}), cmds):
        _check(r, Path(c[-3]))
        assert Path(c[-1]).stat().st_size > 0


def test_msl_passes_clang_with_the_metal_shim(tmp_path):
    clang = _tool("clang++")
    _, tu, _ = _sources("msl")
    src = tmp_path / "kernels.metal.cpp"
    src.write_text(tu)
    r = _run([[clang, "-std=c++17", "-fsyntax-only", "-Wno-unknown-attributes",
               "-Werror=return-type", "-I", str(SHIM), str(src)]])[0]
    _check(r, src)


def test_opencl_subgroup_code_passes_clang(tmp_path):
    """PoCL has no subgroups, so the sub_group_* spelling is checked by clang's OpenCL C."""
    clang = _tool("clang")
    k = K.collect()["plane_ops"]
    info = TARGETS["opencl"]
    kern = k.build_ir(k.signature_from_types(), Target("opencl", 32, info.features))
    src = tmp_path / "plane.cl"
    # clang 14's OpenCL header predates cl_khr_subgroup_shuffle / non_uniform_arithmetic
    decls = "".join(
        f"__attribute__((overloadable)) {t} {f}({t} x, uint l);\n"
        for f in ("sub_group_shuffle", "sub_group_shuffle_xor") for t in ("int", "uint", "float"))
    decls += "".join(
        f"__attribute__((overloadable)) {t} sub_group_non_uniform_{k}_mul({t} x);\n"
        for k in ("reduce", "scan_inclusive", "scan_exclusive") for t in ("int", "uint", "float"))
    text = emit_source(kern, "opencl").text
    src.write_text(text.replace("typedef struct", decls + "typedef struct", 1))
    r = _run([[clang, "-x", "cl", "-cl-std=CL3.0", "-fsyntax-only", "-Xclang",
               "-finclude-default-header", "-Xclang", "-cl-ext=+cl_khr_subgroups,"
               "+cl_khr_subgroup_shuffle,+cl_khr_subgroup_non_uniform_arithmetic,"
               "+__opencl_c_subgroups", str(src)]])[0]
    _check(r, src)
    assert "sub_group_reduce_add" in src.read_text()


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
    nvcc = _tool("nvcc")
    cu = tmp_path / "gelu.cu"
    cu.write_text(src("cuda", 8))
    _check(_run([[nvcc, "-ptx", "-arch=sm_80", str(cu), "-o", str(tmp_path / "g.ptx")]])[0], cu)
    ptx = (tmp_path / "g.ptx").read_text()
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

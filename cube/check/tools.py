"""The real tools that validate generated source, one function per target, batched.

Every C-family dialect but OpenCL C goes through its tool as one translation unit (each
kernel in its own namespace, entry points renamed apart), so a tool runs once per
architecture; SPIR-V modules go through `spirv-val` one file each, WGSL through naga inside
wgpu-native (`create_shader_module` parses and validates; no GPU needed: Mesa's lavapipe is
an adapter). A batch that fails is split: errors that name a line are pinned on the kernel
holding that line and the rest run again without it; an error without a line halves the
batch, so every kernel's verdict comes from a run of the tool that held it.

`tests/codegen/test_cfamily.py` runs its corpus through these same functions."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

SHIM = Path(__file__).with_name("metal_shim")  # <metal_stdlib> for clang (no Metal here)
JOBS = max(1, min(4, os.cpu_count() or 2))
TIMEOUT_S = 600

# where a tool is looked for besides PATH
_EXTRA_DIRS = ("/usr/local/bin", "/usr/local/cuda/bin", "/opt/rocm/bin", "/opt/rocm/llvm/bin")


@cache
def find_tool(name: str) -> str | None:
    path = shutil.which(name)
    if path:
        return path
    for d in _EXTRA_DIRS:
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return None


def run_all(cmds: list[list[str]], env: dict | None = None,
            cwd: str | None = None) -> list[subprocess.CompletedProcess]:
    """Run commands in parallel (JOBS at a time), output captured."""
    full_env = {**os.environ, **(env or {})}

    def one(c):
        try:
            return subprocess.run(c, capture_output=True, text=True, env=full_env, cwd=cwd,
                                  timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            return subprocess.CompletedProcess(c, 124, e.stdout or "",
                                               f"timed out after {TIMEOUT_S} s")
    if len(cmds) == 1:
        return [one(cmds[0])]
    with ThreadPoolExecutor(JOBS) as ex:
        return list(ex.map(one, cmds))


def output(r: subprocess.CompletedProcess, limit: int = 6000) -> str:
    text = ((r.stderr or "") + (r.stdout or "")).strip()
    return text if len(text) <= limit else "...\n" + text[-limit:]


# ---- translation units ---------------------------------------------------------------------

@dataclass
class Unit:
    """Generated sources joined into one file, with the line span of each."""

    text: str
    spans: list[tuple[int, int, str]] = field(default_factory=list)  # (first, last, label)

    def label_at(self, line: int) -> str | None:
        for first, last, label in self.spans:
            if first <= line <= last:
                return label
        return None


def translation_unit(target: str, sources: list[tuple[str, str]]) -> Unit:
    """One CUDA/HIP/MSL file from (label, source) pairs: the includes once, each kernel's
    body in `namespace cube_k<i>`. Entry points must already have distinct names (CUDA's
    are extern "C")."""
    includes: list[str] = []
    for _, text in sources:
        for ln in text.splitlines():
            if ln.startswith("#include") and ln not in includes:
                includes.append(ln)
    lines = list(includes)
    spans = []
    using = "using namespace metal;" if target == "msl" else None
    for i, (label, text) in enumerate(sources):
        first = len(lines) + 1
        lines.append(f"namespace cube_k{i} {{  // {label}")
        if using:
            lines.append(using)
        lines += [ln for ln in text.splitlines()
                  if not ln.startswith(("#include", "using namespace"))]
        lines.append(f"}}  // {label}")
        spans.append((first, len(lines), label))
    return Unit("\n".join(lines) + "\n", spans)


# ---- the tools -----------------------------------------------------------------------------

@dataclass
class Run:
    """One validation of a batch: ok, or the failures pinned on labels, or `error` for a
    failure that names no kernel."""

    ok: bool
    failed: dict[str, str] = field(default_factory=dict)
    error: str = ""
    ptx: str = ""  # cuda: the PTX nvcc wrote (tests read it)
    skipped: dict[str, str] = field(default_factory=dict)  # label -> why not validated


def _pin(unit: Unit, path: Path, text: str) -> dict[str, str]:
    """Each error of `path:LINE[:COL]: error` (clang, hipcc) or `path(LINE): error` (nvcc),
    with the lines after it up to the next diagnostic, pinned on the kernel holding LINE."""
    out: dict[str, list[str]] = {}
    name = re.escape(path.name)
    diag = re.compile(rf"{name}(?::(\d+):\d*:?|\((\d+)\):)\s*(\w+ )?(error|warning|note)")
    current: list[str] | None = None
    for ln in text.splitlines():
        m = diag.search(ln)
        if m:
            current = None
            if m.group(4) == "error":
                label = unit.label_at(int(m.group(1) or m.group(2)))
                if label is not None:
                    current = out.setdefault(label, [])
        if current is not None:
            current.append(ln)
    return {k: "\n".join(v) for k, v in out.items()}


def nvcc_ptx(path: Path, arch: str, out: Path) -> list[str]:
    return [find_tool("nvcc"), "-ptx", f"-arch={arch}", str(path), "-o", str(out)]


def cuda(sources: list[tuple[str, str]], arch: str, workdir: Path) -> Run:
    """nvcc -ptx for `arch` (sm_80, sm_90), then ptxas on the PTX."""
    unit = translation_unit("cuda", sources)
    src = workdir / f"kernels_{arch}.cu"
    src.write_text(unit.text)
    ptx = workdir / f"kernels_{arch}.ptx"
    r = run_all([nvcc_ptx(src, arch, ptx)])[0]
    if r.returncode != 0:
        return Run(False, _pin(unit, src, output(r)), f"nvcc -arch={arch}:\n{output(r)}")
    text = ptx.read_text()
    r = run_all([[find_tool("ptxas"), f"-arch={arch}", str(ptx), "-o",
                  str(workdir / f"kernels_{arch}.cubin")]])[0]
    if r.returncode != 0:
        return Run(False, _pin_ptx(text, sources, output(r)), f"ptxas -arch={arch}:\n"
                   f"{output(r)}", text)
    return Run(True, ptx=text)


def _pin_ptx(ptx: str, sources: list[tuple[str, str]], err: str) -> dict[str, str]:
    """ptxas names PTX lines (`file.ptx, line N;`): the .entry holding the line."""
    entries = [(i + 1, m.group(1)) for i, ln in enumerate(ptx.splitlines())
               if (m := re.search(r"\.entry\s+(\w+)", ln))]
    out: dict[str, str] = {}
    for m in re.finditer(r"line (\d+); error", err):
        line = int(m.group(1))
        before = [name for first, name in entries if first <= line]
        if before:
            for label, text in sources:
                if re.search(rf"\b{re.escape(before[-1])}\b", text):
                    out[label] = err
    return out


def hip(sources: list[tuple[str, str]], arch: str, workdir: Path) -> Run:
    unit = translation_unit("hip", sources)
    src = workdir / f"kernels_{arch}.hip"
    src.write_text(unit.text)
    r = run_all([[find_tool("hipcc"), "--genco", f"--offload-arch={arch}", "-x", "hip",
                  str(src), "-o", str(workdir / f"{arch}.co")]],
                {"HIP_PLATFORM": "amd", "TMPDIR": str(workdir)})[0]  # hipcc leaves dirs there
    if r.returncode != 0:
        return Run(False, _pin(unit, src, output(r)), f"hipcc {arch}:\n{output(r)}")
    return Run(True)


def msl_cmd(path: Path) -> list[str]:
    return [find_tool("clang++"), "-std=c++17", "-fsyntax-only", "-Wno-unknown-attributes",
            "-Werror=return-type", "-I", str(SHIM), str(path)]


def msl(sources: list[tuple[str, str]], arch: str, workdir: Path) -> Run:
    """clang++ -fsyntax-only against the Metal shim (C++17 stand-ins for <metal_stdlib>)."""
    unit = translation_unit("msl", sources)
    src = workdir / "kernels.metal.cpp"
    src.write_text(unit.text)
    r = run_all([msl_cmd(src)])[0]
    if r.returncode != 0:
        return Run(False, _pin(unit, src, output(r)), f"clang++ (Metal shim):\n{output(r)}")
    return Run(True)


# clang 14's OpenCL header predates cl_khr_subgroup_shuffle / non_uniform_arithmetic
OPENCL_DECLS = "".join(
    f"__attribute__((overloadable)) {t} {f}({t} x, uint l);\n"
    for f in ("sub_group_shuffle", "sub_group_shuffle_xor") for t in ("int", "uint", "float")) \
    + "".join(f"__attribute__((overloadable)) {t} sub_group_non_uniform_{k}_mul({t} x);\n"
              for k in ("reduce", "scan_inclusive", "scan_exclusive")
              for t in ("int", "uint", "float"))
OPENCL_EXTENSIONS = ("+cl_khr_subgroups,+cl_khr_subgroup_shuffle,"
                     "+cl_khr_subgroup_non_uniform_arithmetic,+__opencl_c_subgroups,"
                     "+cl_khr_fp64,+cl_khr_fp16,+cl_khr_int64_base_atomics,"
                     "+cl_khr_int64_extended_atomics")


def opencl_cmd(path: Path) -> list[str]:
    # spir64: the host target (x86) has no _Float16 in OpenCL C
    return [find_tool("clang"), "--target=spir64", "-x", "cl", "-cl-std=CL3.0",
            "-fsyntax-only", "-Xclang",
            "-finclude-default-header", "-Xclang", f"-cl-ext={OPENCL_EXTENSIONS}", str(path)]


def opencl_source(text: str) -> str:
    """The source with declarations clang's header lacks (subgroup shuffles) added."""
    if "typedef struct" in text:
        return text.replace("typedef struct", OPENCL_DECLS + "typedef struct", 1)
    return OPENCL_DECLS + text


def opencl(sources: list[tuple[str, str]], arch: str, workdir: Path) -> Run:
    """clang's OpenCL C front end, one file per kernel (OpenCL C has no namespaces)."""
    paths = []
    for i, (_, text) in enumerate(sources):
        p = workdir / f"k{i}.cl"
        p.write_text(opencl_source(text))
        paths.append(p)
    rs = run_all([opencl_cmd(p) for p in paths])
    failed = {label: output(r) for (label, _), r in zip(sources, rs) if r.returncode != 0}
    return Run(not failed, failed)


def spirv(sources: list[tuple[str, bytes]], arch: str, workdir: Path) -> Run:
    """spirv-val --target-env vulkan1.1 (what codegen.spirv writes: SPIR-V 1.3, shader
    capabilities of Vulkan 1.1), one module a file."""
    paths = []
    for i, (_, blob) in enumerate(sources):
        p = workdir / f"k{i}.spv"
        p.write_bytes(blob)
        paths.append(p)
    tool = find_tool("spirv-val")
    rs = run_all([[tool, "--target-env", "vulkan1.1", str(p)] for p in paths])
    failed = {label: output(r) for (label, _), r in zip(sources, rs) if r.returncode != 0}
    return Run(not failed, failed)


@cache
def wgpu_device():
    """(device, has_f16, None) of wgpu-native's first adapter, or (None, False, reason)."""
    try:
        import wgpu
    except ImportError as e:
        return None, False, f"wgpu not importable: {e}"
    try:
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    except Exception as e:
        return None, False, f"no wgpu adapter: {type(e).__name__}: {str(e).splitlines()[0]}"
    if adapter is None:
        return None, False, "no wgpu adapter"
    feats = set(adapter.features)
    wanted = [f for f in ("shader-f16", "subgroup", "float32-atomic") if f in feats]
    return adapter.request_device_sync(required_features=wanted), "shader-f16" in feats, None


def wgsl(sources: list[tuple[str, str]], arch: str, workdir: Path) -> Run:
    """naga, inside wgpu-native: create_shader_module parses and validates the WGSL
    (a GPUValidationError carries naga's message)."""
    device, has_f16, why = wgpu_device()
    if device is None:
        return Run(False, error=why)
    failed, skipped = {}, {}
    for label, text in sources:
        if not has_f16 and re.search(r"^enable f16;", text, re.M):
            skipped[label] = "the wgpu adapter lacks shader-f16"
            continue
        try:
            device.create_shader_module(code=text)
        except Exception as e:
            failed[label] = str(e)
    return Run(not failed, failed, skipped=skipped)


# ---- targets --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tool:
    """How one target is validated: which programs it needs, the architectures it runs for
    (with the plane size the kernels are built with for each), and the batch function."""

    target: str
    needs: tuple[str, ...]
    archs: tuple[tuple[str, int | None], ...]  # (arch, plane size; None: the target's)
    validate: Callable[[list, str, Path], Run]
    note: str = ""
    binary: bool = False  # sources are bytes (SPIR-V)

    def missing(self) -> str | None:
        """Why this target cannot be validated here, or None."""
        for n in self.needs:
            if find_tool(n) is None:
                return f"{n} not found"
        if self.target == "wgsl":
            return wgpu_device()[2]
        return None


def hip_archs() -> tuple[tuple[tuple[str, int], ...], str]:
    """gfx90a (CDNA2, wave64) and gfx1100 (RDNA3, wave32); gfx1030 (RDNA2, wave32) where
    this ROCm has no gfx1100 device library."""
    if _rocm_has("1100"):
        return (("gfx90a", 64), ("gfx1100", 32)), ""
    return (("gfx90a", 64), ("gfx1030", 32)), \
        "gfx1030 stands in for gfx1100 (this ROCm has no gfx1100 device library)"


def _rocm_has(isa: str) -> bool:
    dirs = ["/opt/rocm/amdgcn/bitcode", "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
            "/usr/lib/amdgcn/bitcode"]
    return any(os.path.exists(os.path.join(d, f"oclc_isa_version_{isa}.bc")) for d in dirs)


@cache
def tools() -> dict[str, Tool]:
    archs, hip_note = hip_archs()
    return {
        "cuda": Tool("cuda", ("nvcc", "ptxas"), (("sm_80", None), ("sm_90", None)), cuda),
        "hip": Tool("hip", ("hipcc",), archs, hip, hip_note),
        "msl": Tool("msl", ("clang++",), (("metal-shim", None),), msl),
        "spirv": Tool("spirv", ("spirv-val",), (("vulkan1.1", None),), spirv, binary=True),
        "wgsl": Tool("wgsl", (), (("naga", None),), wgsl),
        "opencl": Tool("opencl", ("clang",), (("CL3.0", None),), opencl),
    }


def workdir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="cube-check-")

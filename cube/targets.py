"""Runtimes and code generators by name; `cube targets` prints this table."""
from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass

from cube_ir import ir
from runtimes.base import Features, Runtime
from runtimes.errors import RuntimeUnavailable


@dataclass(frozen=True)
class TargetInfo:
    name: str
    generate: Callable[[ir.Kernel], str]
    features: Features  # what the generator assumes when no device is at hand


def _gen_ir(k: ir.Kernel) -> str:
    from cube_ir.printer import format_kernel
    return format_kernel(k)


def _gen_llvm(k: ir.Kernel) -> str:
    from codegen.llvm import emit_module
    return emit_module(k).text


def _gen_c(dialect: str) -> Callable[[ir.Kernel], str]:
    def gen(k: ir.Kernel) -> str:
        from codegen.cfamily import emit_source
        return emit_source(k, dialect).text
    return gen


# what the C-family targets assume without a device (a runtime reports the device's own)
_GPU_ATOMICS = frozenset({"i32", "u32", "i64", "u64", "f32", "f64"})
C_TARGETS = {
    "cuda": Features(plane_size=32, atomic_types=_GPU_ATOMICS, max_shared_bytes=48 << 10),
    "hip": Features(plane_size=64, atomic_types=_GPU_ATOMICS, max_shared_bytes=64 << 10),
    "msl": Features(plane_size=32, f64=False, atomic_types=frozenset({"i32", "u32", "f32"}),
                    max_shared_bytes=32 << 10),
    "opencl": Features(plane_size=1, atomic_types=frozenset({"i32", "u32", "f32"}),
                       max_shared_bytes=32 << 10, max_cube_dim=256),
}


def _gen_wgsl(k: ir.Kernel) -> str:
    from codegen.wgsl import emit_module
    return emit_module(k).text


def _gen_spirv(k: ir.Kernel) -> str:
    from codegen.spirv import Unsupported, disassemble, emit_module
    from cube.errors import CompileError
    try:
        return disassemble(emit_module(k, k.cube_dim or (1, 1, 1)).binary)
    except Unsupported as e:
        raise CompileError(str(e)) from None


# what WGSL itself offers (no f64/i64; atomics on 32-bit ints, f32 through a CAS loop)
WGSL_FEATURES = Features(plane_size=1, f64=False, int64=False,
                         atomic_types=frozenset({"i32", "u32", "f32"}),
                         max_shared_bytes=16384, max_cube_dim=256)

TARGETS: dict[str, TargetInfo] = {
    "ir": TargetInfo("ir", _gen_ir, Features(plane_size=1)),
    "llvm": TargetInfo("llvm", _gen_llvm, Features(plane_size=1)),
    **{n: TargetInfo(n, _gen_c(n), f) for n, f in C_TARGETS.items()},
    "wgsl": TargetInfo("wgsl", _gen_wgsl, WGSL_FEATURES),
    "spirv": TargetInfo("spirv", _gen_spirv, WGSL_FEATURES),
}

# runtime name -> (module:class, target, what it needs)
RUNTIMES: dict[str, tuple[str, str]] = {
    "cpu": ("runtimes.cpu:CpuRuntime", "llvm"),
    "interp": ("runtimes.interp:InterpRuntime", "ir"),
    "opencl": ("runtimes.opencl:OpenCLRuntime", "opencl"),
    "cuda": ("runtimes.cuda:CudaRuntime", "cuda"),
    "hip": ("runtimes.hip:HipRuntime", "hip"),
    "metal": ("runtimes.metal:MetalRuntime", "msl"),
    "wgpu": ("runtimes.wgpu:WgpuRuntime", "wgsl"),
    "wgpu-spirv": ("runtimes.wgpu:WgpuSpirvRuntime", "spirv"),
}
# runtimes not built yet, listed so `cube targets` is honest about them (none today)
PLANNED: dict[str, tuple[str, str]] = {}
PREFERENCE = ("cuda", "hip", "metal", "cpu")

_instances: dict[str, Runtime] = {}
_lock = threading.Lock()


def runtime(name: str | None = None, **options) -> Runtime:
    """The runtime called `name` (one instance per name), or the best one that starts."""
    if name is None:
        for candidate in PREFERENCE:
            try:
                return runtime(candidate)
            except RuntimeUnavailable:
                continue
        raise RuntimeUnavailable("no runtime could start")
    key = name if not options else f"{name}{sorted(options.items())}"
    rt = _instances.get(key)
    if rt is not None:
        return rt
    if name in PLANNED:
        raise RuntimeUnavailable(f"{name}: {PLANNED[name][1]}")
    if name not in RUNTIMES:
        raise RuntimeUnavailable(
            f"unknown runtime '{name}' (known: {', '.join(sorted(RUNTIMES) + sorted(PLANNED))})")
    with _lock:
        rt = _instances.get(key)
        if rt is None:
            path, _ = RUNTIMES[name]
            module, cls = path.split(":")
            try:
                rt = getattr(importlib.import_module(module), cls)(**options)
            except RuntimeUnavailable:
                raise
            except Exception as e:  # a missing driver/library: report, don't crash
                raise RuntimeUnavailable(f"{name}: {type(e).__name__}: {e}") from None
            _instances[key] = rt
    return rt


def available_runtimes() -> list[str]:
    """The names of the runtimes that start on this machine, in `RUNTIMES` order.

    Tries to start each known runtime (`cb.runtime(name)`; started ones are kept, so a later
    `cb.runtime(name)` returns the same instance) and lists those that did not raise
    `RuntimeUnavailable`. `cb.targets_table()` gives the reason for the others."""
    out = []
    for name in RUNTIMES:
        try:
            runtime(name)
            out.append(name)
        except RuntimeUnavailable:
            pass
    return out


def targets_table() -> list[tuple[str, str, bool, str]]:
    """(runtime, target, available, reason or device) for every runtime we know."""
    rows = []
    for name, (_, target) in RUNTIMES.items():
        try:
            rt = runtime(name)
            rows.append((name, target, True, rt.describe()))
        except RuntimeUnavailable as e:
            rows.append((name, target, False, str(e)))
    for name, (target, reason) in PLANNED.items():
        rows.append((name, target, False, reason))
    return rows


# cube_count per dimension where a runtime's device allows fewer than the u32 positions every
# launch is held to (its own limit, read from the device when it reports one)
_GRID_LIMITS = {"cuda": (2**31 - 1, 65535, 65535, "maxGridSize"),
                "hip": (2**31 - 1, 65535, 65535, "maxGridSize")}


def max_cube_count(rt: Runtime) -> tuple[int, int, int, str] | None:
    """(x, y, z, the limit's name): the most cubes per dimension a launch on rt may have,
    or None where only the total (at most 2^32 - 1 units: positions are u32) limits it."""
    limits = getattr(rt, "limits", None)  # wgpu: the adapter's limits
    name = "max-compute-workgroups-per-dimension"
    if isinstance(limits, dict) and name in limits:
        g = int(limits[name])
        return (g, g, g, name)
    props = getattr(rt, "props", None)  # cuda/hip: the device properties
    if isinstance(props, dict) and len(props.get("maxGridSize", ())) == 3:
        return (*(int(g) for g in props["maxGridSize"]), "maxGridSize")
    return _GRID_LIMITS.get(rt.name)


def target_info(name: str) -> TargetInfo:
    """The code generator and features of the target called `name` ("ir", "llvm", "wgsl",
    ...); an unknown name raises `RuntimeUnavailable` listing the known ones."""
    try:
        return TARGETS[name]
    except KeyError:
        raise RuntimeUnavailable(
            f"unknown target '{name}' (known: {', '.join(TARGETS)})") from None

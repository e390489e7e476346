"""The CPU runtime: LLVM IR from codegen.llvm, JIT-compiled with llvmlite for the host CPU.

`compile` generates IR, optimises it at -O3 for the host (AVX2/AVX-512 when present) and
emits an object file, which goes to the disk cache (with the IR as `source.ll`); a later
process with the same key loads the object without code generation or optimisation.

The launch hot path is one generated Python function per executable that packs the argument
block (cube_ir.layout's spec LLVM, with the statements of runtimes.args' packing plan: one
`struct.pack`) and calls the kernel through cffi's ABI mode (~0.3 us a call where ctypes
takes twice that; both release the GIL). `prepare` returns a launch to repeat (cube.kernel
keeps the last one per specialisation and reruns it when a call passes the same objects).
Small launches run on the calling thread; big ones are split into chunks of cubes over a
persistent thread pool (see SERIAL_UNITS for the policy).
"""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import hashlib
import json
import os
import time

from codegen.llvm import LlvmModule, emit_module
from codegen.llvm.emit import entry_name
from cube_ir import ir
from cube_ir.layout import GRID, LLVM, Layout, layout

from . import cpu_jit, cpu_pool
from .args import ERRORS, Packer
from .base import Executable, Features, Runtime
from .disk_cache import default_cache, make_key
from .errors import BackendCompileError, LaunchError
from .host import HostMemoryMixin

# Where a launch runs: one cube on the calling thread; from PARALLEL_UNITS on the thread pool;
# in between by the kernel's measured cost per unit (the last launch's), on the pool when one
# thread would need more than PARALLEL_SECONDS. The native pool's publish and close cost
# ~4 us (`Pool.overhead`), so a 15 us job already gains from a second core; at 100 us (the
# Python pool's threshold) a layer_norm of 1024x256 ran serial at 82 us, flipped to the pool
# whenever one run measured slow, and took 121 us a call against 58 us always pooled. Below
# SERIAL_UNITS a launch whose cost is not yet known (or known to be small) skips the clock.
# The cost is a running mean in which one sample counts at most 4x the mean so far: a run
# descheduled by another process (100 us for a 3 us softmax of 8 rows) does not move a small
# launch onto the pool (under load, 17% of such launches went there).
SERIAL_UNITS = 1 << 11
PARALLEL_UNITS = 1 << 20
PARALLEL_SECONDS = 15e-6
CALLER_STACK = 256 << 10  # launches needing more stack than this run on the pool's threads
MAX_UNITS = 0xFFFFFFFF  # builtins are u32
CACHE_FORMAT = f"cpu-obj-3-scev{cpu_jit.SCEV_CHECKS}"

_FUNC = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64)
_PAR_FUNC = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int64,
                             ctypes.c_int64)
try:  # cffi's ABI mode calls the serial entry in ~0.3 us where ctypes takes ~0.6 us
    import cffi
    _ffi = cffi.FFI()
except ImportError:  # pragma: no cover - cffi is a dependency; ctypes does the same job
    _ffi = None


def _serial_entry(address: int, cfunc):
    """The kernel's serial entry (blob, first cube, cubes) as the cheapest callable: cffi
    (the GIL released, as ctypes does), or the ctypes function without cffi."""
    if _ffi is None:
        return cfunc
    return _ffi.cast("void(*)(char *, int64_t, int64_t)", address)


class CpuRuntime(HostMemoryMixin, Runtime):
    name = "cpu"
    target = "llvm"
    features = Features(plane_size=1, atomic_types=frozenset(
        {"i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f16", "f32", "f64"}))

    def __init__(self, isa: str | None = None) -> None:
        """isa: "host" or "avx2" (an AVX2-only CPU model); default $CUBE_CPU_ISA, else host.
        `cb.runtime("cpu", isa="avx2")` gives a second runtime beside the host's."""
        self._device_id: str | None = None
        self.isa = cpu_jit.isa(isa)
        # the register file kernels tile for (matmul reads it as comptime tile shapes)
        self.features = dataclasses.replace(CpuRuntime.features,
                                            vector_bits=self.isa.vector_bits,
                                            vector_registers=self.isa.vector_registers)
        # what compile() did, for tests and `cube cache info`: codegen runs vs cache loads
        self.stats = {"codegen": 0, "cache_loads": 0, "cache_stores": 0}

    def device_id(self) -> str:
        """The CPU model kernels compile for (its name, LLVM's version, its features): part
        of every cache and tuning key, so the host's and the AVX2 model's objects differ."""
        if self._device_id is None:
            fs = self.isa.features.split(",")
            feats = [f[1:] for f in fs if f.startswith("+")]
            # tuning switches that change code but not what the CPU has
            tune = [f for f in fs if "prefer" in f]
            import llvmlite.binding as llvm
            ver = ".".join(map(str, llvm.llvm_version_info))
            self._device_id = (f"{self.isa.cpu} llvm-{ver} [{','.join(feats)}]"
                               + (f" {','.join(tune)}" if tune else ""))
        return self._device_id

    def describe(self) -> str:
        feats = [f[1:] for f in self.isa.features.split(",") if f.startswith("+")]
        simd = [f for f in ("avx512f", "avx2", "fma", "f16c", "neon", "sve") if f in feats]
        head = self.device_id().split(" [")[0]
        isa = "" if self.isa.name == "host" else f" ({self.isa.name} model)"
        return (f"{head}{isa}, {len(feats)} CPU features ({', '.join(simd)}), "
                f"{self.isa.vector_registers} x {self.isa.vector_bits}-bit vector registers, "
                f"{os.cpu_count()} cores")

    def generate(self, kernel: ir.Kernel) -> str:
        return emit_module(kernel).text

    def compile(self, kernel: ir.Kernel, cache_key: str | None = None) -> Executable:
        key = make_key(CACHE_FORMAT, cache_key, self.device_id()) if cache_key else None
        if key is not None:
            exe = self._load_cached(kernel, key)
            if exe is not None:
                return exe
        mod = emit_module(kernel)
        self.stats["codegen"] += 1
        try:
            obj = cpu_jit.compile_object(mod.text, self.isa.name)
        except RuntimeError as e:  # LLVM rejected our IR: a codegen bug, with evidence
            raise BackendCompileError(f"LLVM could not compile kernel {kernel.name}",
                                      str(e), mod.text) from None
        if key is not None:
            meta = {"entry": mod.entry, "stack_fixed": mod.stack_fixed,
                    "stack_per_unit": mod.stack_per_unit, "nslots": mod.nslots,
                    "object_sha256": hashlib.sha256(obj).hexdigest()}
            default_cache().put(key, {"object.o": obj, "source.ll": mod.text.encode(),
                                      "meta.json": json.dumps(meta).encode()})
            self.stats["cache_stores"] += 1
        return CpuExecutable(kernel, mod.text, cpu_jit.Loaded(obj, mod.entry, self.isa.name),
                             mod.layout, mod.stack_fixed, mod.stack_per_unit)

    def _load_cached(self, kernel: ir.Kernel, key: str):
        files = default_cache().get(key)
        if not files or not {"object.o", "meta.json", "source.ll"} <= files.keys():
            return None
        try:
            meta = json.loads(files["meta.json"])
            obj = files["object.o"]
            lay = layout(kernel.params, LLVM)
            if (meta["entry"] != entry_name(kernel) or meta["nslots"] != lay.nslots
                    or meta["object_sha256"] != hashlib.sha256(obj).hexdigest()):
                return None
            loaded = cpu_jit.Loaded(obj, meta["entry"], self.isa.name)
        except Exception:  # a foreign or broken entry: rebuild it, never run it
            return None
        self.stats["cache_loads"] += 1
        return CpuExecutable(kernel, files["source.ll"].decode(), loaded, lay,
                             int(meta["stack_fixed"]), int(meta["stack_per_unit"]))

    def sync(self) -> None:
        pass  # launches are synchronous


class CpuExecutable(Executable):
    def __init__(self, kernel: ir.Kernel, source: str, loaded: cpu_jit.Loaded,
                 lay: Layout, stack_fixed: int, stack_per_unit: int):
        self.kernel = kernel
        self.source = source
        self._loaded = loaded  # keeps the machine code alive
        self.cfunc = _FUNC(loaded.address)
        self.cfunc_par = _PAR_FUNC(loaded.par_address)
        self.serial = _serial_entry(loaded.address, self.cfunc)
        self.layout, self.nslots = lay, lay.nslots
        self.stack_fixed, self.stack_per_unit = stack_fixed, stack_per_unit
        self.launch, self.prepare = _make_launcher(self, kernel, Packer(lay, kernel.name))

    def launch(self, cube_count, cube_dim, args) -> None:  # replaced per instance
        raise NotImplementedError

    def prepare(self, cube_count, cube_dim, args):  # replaced per instance
        """The checks and argument block of launch(cube_count, cube_dim, args), and that
        launch as a callable of no arguments, to run it now and again while every buffer in
        args is alive (None for an empty grid). One cube is a direct call of the kernel;
        more go through the same thread/pool policy as `launch`, decided at each call."""
        raise NotImplementedError


def _caller_max_units(fixed: int, per_unit: int) -> int:
    if fixed > CALLER_STACK:
        return 0
    return MAX_UNITS if per_unit == 0 else (CALLER_STACK - fixed) // per_unit


_HEADER = dict(zip(GRID, ("cx", "cy", "cz", "dx", "dy", "dz")))


def _make_launcher(exe: CpuExecutable, kernel: ir.Kernel, packer: Packer):
    """The launch and prepare functions specialised on the kernel's parameters (built once,
    by exec).

    The argument block is one `struct.pack` of all slots (the packing plan's statements)
    into a fresh bytes object, passed by pointer: no per-launch C objects, no lock, and
    concurrent launches of one executable cannot interfere. `prepare` packs and checks the
    same and returns the launch as a callable (`partial(call, blob, 0, 1)` for one cube on
    this thread, else `run` with the block), for a caller that repeats it."""
    env = {**packer.env, "call": exe.serial, "call_par": exe.cfunc_par,
           "machine_code": exe._loaded,  # alive while the launch function is
           "errors": ERRORS, "bad": _bad_launch(kernel, packer), "LaunchError": LaunchError,
           "pool": cpu_pool.pool, "MAXU": MAX_UNITS, "SMALL": SERIAL_UNITS,
           "BIG": PARALLEL_UNITS, "PAR_SECONDS": PARALLEL_SECONDS, "clock": time.perf_counter,
           "cost": [-1.0], "partial": functools.partial,
           "CALLER_UNITS": _caller_max_units(exe.stack_fixed, exe.stack_per_unit)}
    header = tuple(_HEADER[h] for h in packer.layout.spec.header)
    body = "\n".join("        " + ln for ln in packer.statements(header=header))
    check = f"""(cube_count, cube_dim, args):
    try:
        cx, cy, cz = cube_count
        dx, dy, dz = cube_dim
{body}
    except errors as e:
        raise bad(cube_count, cube_dim, args, e) from None
    ncubes = cx * cy * cz
    units = dx * dy * dz
    if ncubes <= 0 or units <= 0:
        return{{dim_check}}
    total = ncubes * units
    if total > MAXU:
        raise LaunchError(f"launch of {kernel.name}: {{total}} units exceed the u32 "
                          f"positions (at most {{MAXU}})")
"""
    policy = """    if units > CALLER_UNITS:
        pool().run(call_par, blob, ncubes, False)
    elif ncubes == 1 or (total < SMALL and 0.0 <= total * cost[0] < 0.1 * PAR_SECONDS):
        call(blob, 0, ncubes)
    elif total < BIG and total * cost[0] < PAR_SECONDS:  # a negative cost: not yet measured
        t = clock()
        call(blob, 0, ncubes)
        c = (clock() - t) / total
        cost[0] = c if cost[0] < 0 else 0.5 * (cost[0] + min(c, 4.0 * cost[0] + 1e-9))
    else:
        p = pool()
        t = clock()
        p.run(call_par, blob, ncubes)
        c = max(clock() - t - p.overhead, 0.0) * p.size / total
        cost[0] = c if cost[0] < 0 else 0.5 * (cost[0] + min(c, 4.0 * cost[0] + 1e-9))
"""
    src = (f"def launch{check}{policy}\n"
           f"def run(blob, ncubes, units, total):\n{policy}\n"
           f"def prepare{check}"
           """    if ncubes == 1 and units <= CALLER_UNITS:
        return partial(call, blob, 0, 1)
    return partial(run, blob, ncubes, units, total)
""")
    if kernel.cube_dim is not None:  # specialised on it: the loops were built for this size
        env["CUBE_DIM"] = tuple(kernel.cube_dim)
        src = src.replace("{dim_check}", f"""
    if (dx, dy, dz) != CUBE_DIM:
        raise LaunchError(f"launch of {kernel.name}: cube_dim {{(dx, dy, dz)}} differs from "
                          f"the {{CUBE_DIM}} the kernel was compiled for")""")
    src = src.replace("{dim_check}", "")
    exec(compile(src, f"<cpu launch {kernel.name}>", "exec"), env)
    return env["launch"], env["prepare"]


def _bad_launch(kernel: ir.Kernel, packer: Packer):
    def bad(cube_count, cube_dim, args, e: Exception) -> LaunchError:
        try:
            cx, cy, cz = cube_count
            dx, dy, dz = cube_dim
        except ERRORS:
            return LaunchError(f"launch of {kernel.name}: cube_count and cube_dim must be "
                               f"3-tuples, got {cube_count!r} and {cube_dim!r}")
        return packer.error(args, e)
    return bad


__all__ = ["CpuRuntime", "CpuExecutable", "LlvmModule"]

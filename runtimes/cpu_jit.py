"""llvmlite glue for the CPU runtime: host target, -O3 to an object file, object loading.

LLVM is initialised once, lazily, under a lock (llvmlite's global context is not
thread-safe). Every kernel is an object file loaded into its own MCJIT engine; compiling and
loading a cached object take the same path, so a cache hit skips parsing and optimisation.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
import sys
import threading
from dataclasses import dataclass

import llvmlite.binding as llvm

LOCK = threading.RLock()
SCEV_CHECKS = 64  # part of the CPU cache format: objects built with another value differ
ISA_ENV = "CUBE_CPU_ISA"  # host (default) or avx2: the instruction set kernels compile for
ISAS = ("host", "avx2")
_ready = False
_tms: dict = {}  # isa name -> its target machine
_isas: dict = {}  # isa name -> Isa


@dataclass(frozen=True)
class Isa:
    """The CPU model kernels are compiled for: the host's, or an AVX2-only one (a
    haswell-class model on this machine, to prove the kernels on both register files)."""

    name: str
    cpu: str
    features: str  # LLVM's feature string (+f,-g,...)
    vector_bits: int  # the widest vector register
    vector_registers: int  # how many of them

    def has(self, feature: str) -> bool:
        return f"+{feature}" in self.features.split(",")


# x86 families that an AVX2-only model turns off (AVX-512 and what is built on it)
_WIDE = ("avx512", "avx10", "amx", "evex512")
# prefer-vector-width: LLVM's models of AVX-512 Intel cores (this host is detected as
# rocketlake) prefer 256-bit vectors for the loops LLVM vectorises itself (scalar-written
# kernels, vectorised across units); our line kernels choose 512-bit lines explicitly either
# way. Measured on a 2-core Sapphire Rapids, the two settings paired in one process
# (runtimes for both, alternated): 512-bit preference was no faster anywhere and slower on
# some (a scalar sqrt/div kernel 0.91x, layer_norm 0.76x, max_pool2d 0.91x, conv2d and sum
# equal), so the host keeps LLVM's preference. True turns it off (-prefer-256-bit).
PREFER_512 = False


def isa_name(name: str | None = None) -> str:
    name = (name or os.environ.get(ISA_ENV) or "host").strip().lower()
    if name not in ISAS:
        raise ValueError(f"{ISA_ENV} must be one of {', '.join(ISAS)}, got {name!r}")
    return name


def isa(name: str | None = None) -> Isa:
    """The Isa called `name` (default: $CUBE_CPU_ISA, else host)."""
    name = isa_name(name)
    hit = _isas.get(name)
    if hit is None:
        _init_llvm()
        hit = _isas[name] = _make_isa(name)
    return hit


def _make_isa(name: str) -> Isa:
    feats = llvm.get_host_cpu_features().flatten()
    cpu = llvm.get_host_cpu_name()
    on = {f[1:] for f in feats.split(",") if f.startswith("+")}
    if name == "avx2":
        if "avx2" not in on or "fma" not in on:
            raise ValueError(f"{ISA_ENV}=avx2 needs a host with AVX2 and FMA")
        feats = ",".join(("-" + f[1:]) if f[1:].startswith(_WIDE) else f
                         for f in feats.split(","))
        return Isa(name, "haswell", feats, 256, 16)
    if "avx512f" in on:
        if PREFER_512:
            feats += ",-prefer-256-bit"
        return Isa(name, cpu, feats, 512, 32)
    if "avx" in on:
        return Isa(name, cpu, feats, 256, 16)
    if "neon" in on or "sve" in on:
        return Isa(name, cpu, feats, 128, 32)
    return Isa(name, cpu, feats, 128, 16 if "64bit" in on else 8)


def _init_llvm() -> None:
    global _ready
    with LOCK:
        if not _ready:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            # libm for erf/tanh/..., libgcc for half conversions; the usual sonames first
            # (find_library runs ldconfig: milliseconds on every cold start)
            for lib, soname in (("m", "libm.so.6"), ("gcc_s", "libgcc_s.so.1")):
                for path in (soname, lambda lib=lib: ctypes.util.find_library(lib)):
                    path = path() if callable(path) else path
                    try:
                        if path:
                            llvm.load_library_permanently(path)
                            break
                    except RuntimeError:
                        continue
            # A u32 index (i + k) is zext'ed to i64, so each distinct access of a loop over i
            # needs its own runtime no-wrap check before LLVM can vectorise the loop; the
            # default budget (4) rejects stencils such as a 5x5 pooling window (25 taps).
            llvm.set_option("", f"-vectorize-scev-check-threshold={SCEV_CHECKS}")
            _ready = True


def _init(name: str | None = None):
    """The (shared) target machine of an isa, LLVM initialised first."""
    name = isa_name(name)
    tm = _tms.get(name)
    if tm is None:
        the = isa(name)
        with LOCK:
            tm = _tms.get(name)
            if tm is None:
                tm = _tms[name] = _target_machine(the)
    return tm


def _target_machine(the: Isa):
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=the.cpu, features=the.features, opt=3,
                                        codemodel="jitdefault")


def host_features(name: str | None = None) -> str:
    """The features kernels compile with (the host's, or the AVX2 model's)."""
    return isa(name).features


def host_cpu_name(name: str | None = None) -> str:
    return isa(name).cpu


def _optimise(tm, text: str):
    """The module of LLVM IR `text`, verified and run through the -O3 pipeline for the host
    CPU (vectorisers and unrolling on); the caller holds LOCK."""
    mod = llvm.parse_assembly(text)
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod


def compile_object(text: str, isa_: str | None = None) -> bytes:
    """LLVM IR text -> optimised (-O3, for the isa's CPU) object code."""
    tm = _init(isa_)
    with LOCK:
        return tm.emit_object(_optimise(tm, text))


def assembly(text: str, isa_: str | None = None) -> str:
    """The machine code compile_object makes of `text`, as assembly (for tests)."""
    tm = _init(isa_)
    with LOCK:
        return tm.emit_assembly(_optimise(tm, text))


def optimised_ir(text: str, isa_: str | None = None) -> str:
    """The optimised IR of a module, as compile_object optimises it (for inspection and
    tests)."""
    tm = _init(isa_)
    with LOCK:
        return str(_optimise(tm, text))


def looks_like_object(obj: bytes) -> bool:
    """A cheap structural check before LLVM sees the bytes (MCJIT crashes on garbage): an
    ELF relocatable for this machine's class and byte order with its sections in range."""
    if not sys.platform.startswith("linux"):
        return len(obj) > 0
    if len(obj) < 64 or obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        return False
    e_type, = struct.unpack_from("<H", obj, 16)
    shoff, = struct.unpack_from("<Q", obj, 40)
    shentsize, shnum = struct.unpack_from("<HH", obj, 58)
    return e_type == 1 and shentsize == 64 and 0 < shoff and shoff + shnum * 64 <= len(obj)


class Loaded:
    """An object file linked into memory; keeps the engine alive as long as it is used."""

    def __init__(self, obj: bytes, entry: str, isa_: str | None = None):
        if not looks_like_object(obj):
            raise ValueError("not an object file for this machine")
        _init(isa_)
        with LOCK:  # an engine owns its target machine: give it one of its own
            self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""),
                                                     _target_machine(isa(isa_)))
            self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            self.engine.finalize_object()
            self.address = self.engine.get_function_address(entry)
            self.par_address = self.engine.get_function_address(entry + "_par")
        if not self.address or not self.par_address:
            raise RuntimeError(f"symbol {entry} not found in the object file")

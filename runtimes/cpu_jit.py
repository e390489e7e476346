"""llvmlite glue for the CPU runtime: host target, -O3 to an object file, object loading.

LLVM is initialised once, lazily, under a lock (llvmlite's global context is not
thread-safe). Every kernel is an object file loaded into its own MCJIT engine; compiling and
loading a cached object take the same path, so a cache hit skips parsing and optimisation.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import struct
import sys
import threading

import llvmlite.binding as llvm

LOCK = threading.RLock()
SCEV_CHECKS = 64  # part of the CPU cache format: objects built with another value differ
_tm = None


def _init():
    global _tm
    with LOCK:
        if _tm is None:
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
            _tm = _target_machine()
    return _tm


def _target_machine():
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=host_features(),
                                        opt=3, codemodel="jitdefault")


def host_features() -> str:
    return llvm.get_host_cpu_features().flatten()


def host_cpu_name() -> str:
    return llvm.get_host_cpu_name()


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


def compile_object(text: str) -> bytes:
    """LLVM IR text -> optimised (-O3, host CPU) object code."""
    tm = _init()
    with LOCK:
        return tm.emit_object(_optimise(tm, text))


def optimised_ir(text: str) -> str:
    """The optimised IR of a module, as compile_object optimises it (for inspection and
    tests)."""
    tm = _init()
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

    def __init__(self, obj: bytes, entry: str):
        if not looks_like_object(obj):
            raise ValueError("not an object file for this machine")
        _init()
        with LOCK:  # an engine owns its target machine: give it one of its own
            self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _target_machine())
            self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            self.engine.finalize_object()
            self.address = self.engine.get_function_address(entry)
            self.par_address = self.engine.get_function_address(entry + "_par")
        if not self.address or not self.par_address:
            raise RuntimeError(f"symbol {entry} not found in the object file")

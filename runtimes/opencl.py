"""The OpenCL runtime (pyopencl): C source from codegen.cfamily's OpenCL dialect.

One device (the first GPU, else the first device; CUBE_OPENCL_DEVICE=i picks another), one
in-order queue. Launches are asynchronous; `buf.numpy()` and `sync()` wait. Program binaries
go to the disk cache, so a later process skips the OpenCL C compiler. Plane size is 1: the
subgroup code in the dialect is only enabled where it can be made exact (not on PoCL, which
has no subgroups).
"""
from __future__ import annotations

import math
import os

import numpy as np

from codegen.cfamily import CSource, emit_source
from cube_ir import ir

from . import aliasing
from .args import Packer
from .base import Executable, Features, Runtime
from .buffer import Buffer, as_elem, as_shape, storage_array
from .disk_cache import default_cache, make_key
from .errors import BackendCompileError, LaunchError, RuntimeUnavailable
from .pool import Block, Pool

CACHE_FORMAT = "opencl-bin-1"

try:
    import pyopencl as cl
except Exception as e:  # pragma: no cover - depends on the machine
    cl = None
    _IMPORT_ERROR = f"pyopencl is not importable ({type(e).__name__}: {e})"


def _pick_device():
    try:
        platforms = cl.get_platforms()
    except cl.Error as e:
        raise RuntimeUnavailable(f"opencl: no OpenCL platform ({e})") from None
    devices = [d for p in platforms for d in p.get_devices()]
    if not devices:
        raise RuntimeUnavailable("opencl: no OpenCL device")
    want = os.environ.get("CUBE_OPENCL_DEVICE")
    if want is not None:
        return devices[int(want)]
    gpus = [d for d in devices if d.type & cl.device_type.GPU]
    return (gpus or devices)[0]


class ClBuffer(Buffer):
    def __init__(self, rt: OpenCLRuntime, shape, elem):
        super().__init__(rt, shape, elem)
        self._block = Block(rt.pool, self.nbytes)
        # the cl_mem handle names the memory (see DeviceBuffer.ptr in cuda.py)
        self.ptr = self._block.mem.int_ptr

    @property
    def mem(self):
        return self._block.mem

    def _host_flat(self) -> tuple[np.ndarray, bool]:
        out = np.empty(self.size, self.dtype)
        if self.nbytes:
            cl.enqueue_copy(self.rt.queue, out, self.mem, is_blocking=True)
        return out, True


class OpenCLRuntime(Runtime):
    name = "opencl"
    target = "opencl"

    def __init__(self):
        if cl is None:
            raise RuntimeUnavailable(f"opencl: {_IMPORT_ERROR}")
        self.device = dev = _pick_device()
        self.ctx = cl.Context([dev])
        self.queue = cl.CommandQueue(self.ctx)
        ext = set(dev.extensions.split())
        atomics = {"i32", "u32", "f32"}
        int64_atomics = {"cl_khr_int64_base_atomics", "cl_khr_int64_extended_atomics"} <= ext
        if int64_atomics:
            atomics |= {"i64", "u64"} | ({"f64"} if "cl_khr_fp64" in ext else set())
        self.features = Features(
            plane_size=1, plane_ops=True,
            f16=True,  # f16 is stored as bits and computed in float: no cl_khr_fp16 needed
            bf16=True, f64="cl_khr_fp64" in ext or dev.double_fp_config != 0, int64=True,
            atomic_types=frozenset(atomics), max_shared_bytes=int(dev.local_mem_size),
            max_cube_dim=int(dev.max_work_group_size))
        self.pool = Pool(lambda n: cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, n))
        self.stats = {"codegen": 0, "cache_loads": 0, "cache_stores": 0}

    def device_id(self) -> str:
        d = self.device
        return f"{d.platform.name} | {d.name} | {d.version} | driver {d.driver_version}"

    # ---- memory ------------------------------------------------------------------------
    def from_numpy(self, arr, dtype=None) -> ClBuffer:
        elem = as_elem(dtype) if dtype is not None else None
        a = np.ascontiguousarray(storage_array(arr, elem))
        buf = ClBuffer(self, a.shape, elem or as_elem(a.dtype))
        if a.nbytes:
            cl.enqueue_copy(self.queue, buf.mem, a, is_blocking=True)
        return buf


    def empty(self, shape, dtype=np.float32) -> ClBuffer:
        shape = as_shape(shape)
        return ClBuffer(self, shape, as_elem(dtype))

    # ---- kernels -----------------------------------------------------------------------
    def generate(self, kernel: ir.Kernel) -> str:
        return emit_source(kernel, "opencl").text

    def compile(self, kernel: ir.Kernel, cache_key: str | None = None,
                aliased: frozenset = frozenset()) -> Executable:
        """aliased: buffer positions declared without `restrict` (a variant for launches
        passing them one memory: runtimes/aliasing.py)."""
        src = emit_source(kernel, "opencl", aliased)
        self.stats["codegen"] += 1
        key = make_key(CACHE_FORMAT, cache_key, self.device_id(),
                       *(("aliased", *sorted(aliased)) if aliased else ())) \
            if cache_key else None
        prog = self._load_cached(key, src) if key else None
        if prog is None:
            prog = self._build(cl.Program(self.ctx, src.text), src, kernel)
            if key is not None:
                default_cache().put(key, {"program.bin": prog.binaries[0],
                                          "source.cl": src.text.encode()})
                self.stats["cache_stores"] += 1
        exe = ClExecutable(self, kernel, src, prog)
        aliasing.setup(exe, src, None if aliased else
                       lambda s: self.compile(kernel, cache_key, s))
        return exe

    def _build(self, prog, src: CSource, kernel: ir.Kernel):
        try:
            return prog.build(options=["-cl-std=CL1.2"])
        except cl.Error as e:
            try:
                log = prog.get_build_info(self.device, cl.program_build_info.LOG)
            except cl.Error:
                log = str(e)
            raise BackendCompileError(
                f"the OpenCL compiler ({self.device.name}) rejected kernel {kernel.name}",
                log.strip() or str(e), src.text) from None

    def _load_cached(self, key: str, src: CSource):
        files = default_cache().get(key)
        if not files or files.get("source.cl") != src.text.encode():
            return None
        try:
            prog = cl.Program(self.ctx, [self.device], [files["program.bin"]])
            prog.build()
        except (cl.Error, KeyError):  # a foreign or broken binary: rebuild from source
            return None
        self.stats["cache_loads"] += 1
        return prog

    def sync(self) -> None:
        self.queue.finish()


class ClExecutable(Executable):
    _aliased = _variants = None  # see aliasing.setup

    def __init__(self, rt: OpenCLRuntime, kernel: ir.Kernel, src: CSource, prog):
        self.rt, self.kernel, self.source = rt, kernel, src.text
        self.knl = cl.Kernel(prog, src.entry)
        self.layout = src.layout
        self.packer = Packer(src.layout, kernel.name)

    def launch(self, cube_count, cube_dim, args) -> None:
        k, knl = self.kernel, self.knl
        blob, bufs = self.packer.pack(args)
        self.packer.check_buffers(bufs, ClBuffer, self.rt)
        if self._aliased is not None and self._aliased(bufs):  # one memory, two params
            return self._variants.get(bufs).launch(cube_count, cube_dim, args)
        for i, b in enumerate(bufs):
            knl.set_arg(i, b.mem)
        knl.set_arg(len(bufs), blob)
        glob = tuple(int(c) * int(d) for c, d in zip(cube_count, cube_dim))
        if max(glob) > 0xFFFFFFFF or math.prod(glob) > 0xFFFFFFFF:
            raise LaunchError(f"launch of {k.name}: {glob} units exceed the u32 positions")
        try:
            cl.enqueue_nd_range_kernel(self.rt.queue, knl, glob, tuple(int(d) for d in cube_dim))
        except cl.Error as e:
            raise LaunchError(f"launch of {k.name} failed on {self.rt.device.name}: {e}") \
                from None

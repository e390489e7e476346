"""The CUDA runtime: C from codegen.cfamily's CUDA dialect, compiled by NVRTC through CuPy.

Buffers are CuPy allocations (CuPy's memory pool reuses them), launches go to one
non-blocking stream, `sync()` and `buf.numpy()` wait for it. Compiled cubins go to the disk
cache under the kernel's key and the device's compute capability, so a later process skips
NVRTC. A compile error carries the NVRTC log and the generated source. Without CuPy or a GPU
the runtime reports why in one line (RuntimeUnavailable, naming the pip extra that installs
CuPy: `pip install 'cube-lang[cuda]'`, or `[hip]`) and never fails an import.
"""
from __future__ import annotations

import struct
import threading

import numpy as np

from codegen.cfamily import CSource, emit_source
from cube_ir import ir

from . import aliasing
from .args import Packer
from .base import Executable, Features, Runtime
from .buffer import Buffer, as_elem, as_shape, row_major_strides, storage_array
from .disk_cache import default_cache, make_key
from .errors import BackendCompileError, LaunchError, RuntimeUnavailable

try:
    import cupy as cp
    from cupy.cuda import driver
    from cupy_backends.cuda.libs import nvrtc
except Exception as e:  # pragma: no cover - depends on the machine
    cp = nvrtc = driver = None
    _IMPORT_ERROR = f"CuPy is not installed ({type(e).__name__}: {e})"

GPU_ATOMICS = frozenset({"i32", "u32", "i64", "u64", "f32", "f64"})


class DeviceBuffer(Buffer):
    """Device memory from CuPy's pool, viewed with the buffer's element type. `data`, a CuPy
    byte array over the allocation, is made when first read (copies, DLPack): an eager op's
    output needs only the memory and its address, and making the array cost several us."""

    def __init__(self, rt, shape, elem, data=None):
        super().__init__(rt, shape, elem)
        if data is None:
            self._allocate(self.nbytes)
        else:
            self.__dict__["data"] = data
            self._alloc, self.mem, self.ptr = data.nbytes, data.data, data.data.ptr

    def _allocate(self, nbytes: int) -> None:
        self._alloc = max(nbytes, 1)
        self.mem = cp.cuda.alloc(self._alloc)
        # the device address names the memory: dl's dispatch plans tell operands and
        # allocations apart by it (views copy it with the rest of the buffer)
        self.ptr = self.mem.ptr

    @classmethod
    def _exact(cls, rt, shape: tuple, n: int, elem) -> DeviceBuffer:
        """A new contiguous buffer of n elements (shape a tuple of ints): what __init__
        makes, without its conversions (a dispatch plan's replay allocates here)."""
        self = object.__new__(cls)
        dt = elem.np
        self.rt, self.shape, self.elem, self.dtype, self.size = rt, shape, elem, dt, n
        self.strides = row_major_strides(shape)
        self._allocate(n * dt.itemsize)
        return self

    def __getattr__(self, name: str):
        if name != "data":
            raise AttributeError(name)
        data = cp.ndarray((self._alloc,), np.uint8, memptr=self.mem)
        self.__dict__["data"] = data  # views made later share it
        return data

    def _host_flat(self) -> tuple[np.ndarray, bool]:
        self.rt.stream.synchronize()
        raw = cp.asnumpy(self.data[:self.nbytes], stream=self.rt.stream)
        return raw.view(self.dtype), True


class CudaRuntime(Runtime):
    name = "cuda"
    target = "cuda"
    cache_format = "cuda-cubin-1"

    def __init__(self, device: int = 0):
        if cp is None:
            raise self.unavailable(_IMPORT_ERROR)
        self._check_backend()
        try:
            if cp.cuda.runtime.getDeviceCount() <= device:
                raise self.unavailable(f"no GPU device {device}")
            self.props = cp.cuda.runtime.getDeviceProperties(device)
        except cp.cuda.runtime.CUDARuntimeError as e:
            raise self.unavailable(f"no usable GPU ({e})") from None
        self.device = cp.cuda.Device(device)
        self.device.use()
        self.stream = cp.cuda.Stream(non_blocking=True)
        p = self.props
        self.features = Features(
            plane_size=int(p["warpSize"]), f16=True, bf16=True, f64=True, int64=True,
            atomic_types=GPU_ATOMICS, max_shared_bytes=int(p["sharedMemPerBlock"]),
            max_cube_dim=int(p["maxThreadsPerBlock"]))
        self.stats = {"codegen": 0, "cache_loads": 0, "cache_stores": 0}

    @classmethod
    def unavailable(cls, why: str) -> RuntimeUnavailable:
        """Why the runtime cannot start, and the pip extra that installs its CuPy."""
        return RuntimeUnavailable(f"{cls.name}: {why}; the {cls.name} runtime needs a GPU and "
                                  f"CuPy (pip install 'cube-lang[{cls.name}]')")

    def _check_backend(self) -> None:
        if cp.cuda.runtime.is_hip:
            raise self.unavailable("CuPy is built for ROCm (use the hip runtime)")

    def arch(self) -> str:
        return f"sm_{self.props['major']}{self.props['minor']}"

    def device_id(self) -> str:
        name = self.props["name"]
        name = name.decode() if isinstance(name, bytes) else name
        return f"{name} {self.arch()} nvrtc-{nvrtc.getVersion()}"

    def compile_options(self) -> tuple[str, ...]:
        # --fmad=false: NVRTC contracts a * b + c into one fma by default, rounding once
        # where Python (and the interpreter, the CPU, dl's unfused kernels) round twice, so
        # a fused kernel's bits differed from the same ops unfused
        return (f"--gpu-architecture={self.arch()}", "-std=c++17", "--fmad=false")

    # ---- memory ------------------------------------------------------------------------
    def from_numpy(self, arr, dtype=None) -> DeviceBuffer:
        elem = as_elem(dtype) if dtype is not None else None
        a = np.ascontiguousarray(storage_array(arr, elem))
        buf = DeviceBuffer(self, a.shape, elem or as_elem(a.dtype))
        if a.nbytes:
            buf.data[:a.nbytes].set(a.reshape(-1).view(np.uint8), stream=self.stream)
        return buf


    def empty(self, shape, dtype=np.float32) -> DeviceBuffer:
        shape = as_shape(shape)
        return DeviceBuffer(self, shape, as_elem(dtype))

    def empty_exact(self, shape: tuple, n: int, elem) -> DeviceBuffer:
        return DeviceBuffer._exact(self, shape, n, elem)

    # ---- kernels -----------------------------------------------------------------------
    def generate(self, kernel: ir.Kernel) -> str:
        return emit_source(kernel, self.target).text

    def compile(self, kernel: ir.Kernel, cache_key: str | None = None,
                aliased: frozenset = frozenset()) -> Executable:
        """aliased: buffer positions declared without `__restrict__` (a variant for
        launches passing them one memory: runtimes/aliasing.py)."""
        src = emit_source(kernel, self.target, aliased)
        self.stats["codegen"] += 1
        key = make_key(self.cache_format, cache_key, self.device_id(),
                       *self.compile_options(),
                       *(("aliased", *sorted(aliased)) if aliased else ())) \
            if cache_key else None
        files = default_cache().get(key) if key else None
        binary = files.get("kernel.bin") if files and files.get("source.cu") == \
            src.text.encode() else None
        if binary is None:
            binary = self._nvrtc(src, kernel)
            if key is not None:
                default_cache().put(key, {"kernel.bin": binary, "source.cu": src.text.encode()})
                self.stats["cache_stores"] += 1
        else:
            self.stats["cache_loads"] += 1
        module = cp.cuda.function.Module()
        module.load(binary)
        exe = DeviceExecutable(self, kernel, src, module)
        aliasing.setup(exe, src, None if aliased else
                       lambda s: self.compile(kernel, cache_key, s))
        return exe

    def _nvrtc(self, src: CSource, kernel: ir.Kernel) -> bytes:
        prog = nvrtc.createProgram(src.text, f"{src.entry}.cu", [], [])
        try:
            nvrtc.compileProgram(prog, list(self.compile_options()))
            return nvrtc.getCUBIN(prog)
        except nvrtc.NVRTCError as e:
            try:
                log = nvrtc.getProgramLog(prog)
            except nvrtc.NVRTCError:
                log = str(e)
            raise BackendCompileError(f"{self.name} compiler rejected kernel {kernel.name}",
                                      log, src.text) from None
        finally:
            nvrtc.destroyProgram(prog)

    def sync(self) -> None:
        self.stream.synchronize()


class DeviceExecutable(Executable):
    """A compiled kernel. `launch` writes the buffers' addresses and the argument block into
    this kernel's own parameter block, whose kernelParams array (the address of each
    parameter) is fixed, and calls the driver's cuLaunchKernel (hipModuleLaunchKernel),
    which copies the values. CuPy's `Function.__call__` inspected every argument's type
    on each launch, and a fresh NumPy block per launch cost as much: together the larger
    part of an eager op's launch time."""

    _aliased = _variants = None  # see aliasing.setup

    def __init__(self, rt: CudaRuntime, kernel: ir.Kernel, src: CSource, module):
        self.rt, self.kernel, self.source = rt, kernel, src.text
        self._module = module  # keeps the function alive
        self.fn = module.get_function(src.entry)
        self._fptr = self.fn.ptr
        self.layout = src.layout
        self.packer = Packer(src.layout, kernel.name)
        nbuf, nslots = src.layout.nbuf, src.layout.nslots
        end = nbuf + nslots
        # [buffer addresses][cube_args words][kernelParams: address of each of them]
        self._block = block = np.zeros(end + nbuf + 1, np.uint64)
        base = block.__array_interface__["data"][0]
        block[end:] = [base + 8 * i for i in range(nbuf + 1)]
        self._params = base + 8 * end
        self._mem = memoryview(block).cast("B")
        self._put_ptrs = struct.Struct(f"<{nbuf}Q").pack_into
        self._args_at = slice(8 * nbuf, 8 * end)
        self._lock = threading.Lock()  # one block: launches from two threads take turns

    def launch(self, cube_count, cube_dim, args) -> None:
        blob, bufs = self.packer.pack(args)
        self.packer.check_buffers(bufs, DeviceBuffer, self.rt)
        if self._aliased is not None and self._aliased(bufs):  # one memory, two params
            return self._variants.get(bufs).launch(cube_count, cube_dim, args)
        try:
            cx, cy, cz = cube_count if len(cube_count) == 3 else (*cube_count, 1, 1)[:3]
            dx, dy, dz = cube_dim if len(cube_dim) == 3 else (*cube_dim, 1, 1)[:3]
            with self._lock:
                self._put_ptrs(self._mem, 0, *[b.ptr for b in bufs])
                self._mem[self._args_at] = blob
                driver.launchKernel(self._fptr, cx, cy, cz, dx, dy, dz, 0, self.rt.stream.ptr,
                                    self._params, 0)
        except Exception as e:
            raise LaunchError(f"launch of {self.kernel.name} failed on {self.rt.name}: "
                              f"{type(e).__name__}: {e}") from None

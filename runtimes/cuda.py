"""The CUDA runtime: C from codegen.cfamily's CUDA dialect, compiled by NVRTC through CuPy.

Buffers are CuPy allocations (CuPy's memory pool reuses them), launches go to one
non-blocking stream, `sync()` and `buf.numpy()` wait for it. Compiled cubins go to the disk
cache under the kernel's key and the device's compute capability, so a later process skips
NVRTC. A compile error carries the NVRTC log and the generated source. Without CuPy or a GPU
the runtime reports why in one line (RuntimeUnavailable, naming the pip extra that installs
CuPy: `pip install 'cube-lang[cuda]'`, or `[hip]`) and never fails an import.
"""
from __future__ import annotations

import numpy as np

from codegen.cfamily import CSource, emit_source
from cube_ir import ir

from .args import Packer
from .base import Executable, Features, Runtime
from .buffer import Buffer, as_elem, as_shape, storage_array
from .disk_cache import default_cache, make_key
from .errors import BackendCompileError, LaunchError, RuntimeUnavailable

try:
    import cupy as cp
    from cupy_backends.cuda.libs import nvrtc
except Exception as e:  # pragma: no cover - depends on the machine
    cp = nvrtc = None
    _IMPORT_ERROR = f"CuPy is not installed ({type(e).__name__}: {e})"

GPU_ATOMICS = frozenset({"i32", "u32", "i64", "u64", "f32", "f64"})


class DeviceBuffer(Buffer):
    """A CuPy byte array viewed with the buffer's element type."""

    def __init__(self, rt, shape, elem, data=None):
        super().__init__(rt, shape, elem)
        self.data = data if data is not None else cp.empty(max(self.nbytes, 1), np.uint8)
        # the device address names the memory: dl's dispatch plans tell operands and
        # allocations apart by it (views copy it with the rest of the buffer)
        self.ptr = self.data.data.ptr

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

    # ---- kernels -----------------------------------------------------------------------
    def generate(self, kernel: ir.Kernel) -> str:
        return emit_source(kernel, self.target).text

    def compile(self, kernel: ir.Kernel, cache_key: str | None = None) -> Executable:
        src = emit_source(kernel, self.target)
        self.stats["codegen"] += 1
        key = make_key(self.cache_format, cache_key, self.device_id(),
                       *self.compile_options()) if cache_key else None
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
        return DeviceExecutable(self, kernel, src, module)

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
    def __init__(self, rt: CudaRuntime, kernel: ir.Kernel, src: CSource, module):
        self.rt, self.kernel, self.source = rt, kernel, src.text
        self._module = module  # keeps the function alive
        self.fn = module.get_function(src.entry)
        self.layout = src.layout
        self.packer = Packer(src.layout, kernel.name)
        # cube_args by value: a NumPy structured scalar of the block's bytes
        self._args_t = np.dtype([("s", np.uint64, (src.layout.nslots,))])

    def launch(self, cube_count, cube_dim, args) -> None:
        blob, bufs = self.packer.pack(args)
        self.packer.check_buffers(bufs, DeviceBuffer, self.rt)
        packed = np.frombuffer(blob, self._args_t)[0]
        try:
            self.fn(tuple(cube_count), tuple(cube_dim), (*(b.data for b in bufs), packed),
                    stream=self.rt.stream)
        except Exception as e:
            raise LaunchError(f"launch of {self.kernel.name} failed on {self.rt.name}: "
                              f"{type(e).__name__}: {e}") from None

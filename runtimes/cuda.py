"""The CUDA runtime: C from codegen.cfamily's CUDA dialect, compiled by NVRTC through CuPy.

Buffers are CuPy allocations (CuPy's memory pool reuses them), launches go to one
non-blocking stream, `sync()` and `buf.numpy()` wait for it. Compiled cubins go to the disk
cache under the kernel's key and the device's compute capability, so a later process skips
NVRTC. A compile error carries the NVRTC log and the generated source. Without CuPy or a GPU
the runtime reports why in one line (RuntimeUnavailable) and never fails an import.
"""
from __future__ import annotations

import struct

import numpy as np

from codegen.cfamily import CSource, emit_source
from cube_ir import ir

from .base import Executable, Features, Runtime
from .buffer import Buffer, as_elem, as_shape, storage_array
from .disk_cache import default_cache, make_key
from .errors import BackendCompileError, LaunchError, RuntimeUnavailable
from .scalar_bits import slot_bits

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
            raise RuntimeUnavailable(f"{self.name}: {_IMPORT_ERROR}")
        self._check_backend()
        try:
            if cp.cuda.runtime.getDeviceCount() <= device:
                raise RuntimeUnavailable(f"{self.name}: no GPU device {device}")
            self.props = cp.cuda.runtime.getDeviceProperties(device)
        except cp.cuda.runtime.CUDARuntimeError as e:
            raise RuntimeUnavailable(f"{self.name}: no usable GPU ({e})") from None
        self.device = cp.cuda.Device(device)
        self.device.use()
        self.stream = cp.cuda.Stream(non_blocking=True)
        p = self.props
        self.features = Features(
            plane_size=int(p["warpSize"]), f16=True, bf16=True, f64=True, int64=True,
            atomic_types=GPU_ATOMICS, max_shared_bytes=int(p["sharedMemPerBlock"]),
            max_cube_dim=int(p["maxThreadsPerBlock"]))
        self.stats = {"codegen": 0, "cache_loads": 0, "cache_stores": 0}

    def _check_backend(self) -> None:
        if cp.cuda.runtime.is_hip:
            raise RuntimeUnavailable("cuda: CuPy is built for ROCm (use the hip runtime)")

    def arch(self) -> str:
        return f"sm_{self.props['major']}{self.props['minor']}"

    def device_id(self) -> str:
        name = self.props["name"]
        name = name.decode() if isinstance(name, bytes) else name
        return f"{name} {self.arch()} nvrtc-{nvrtc.getVersion()}"

    def compile_options(self) -> tuple[str, ...]:
        return (f"--gpu-architecture={self.arch()}", "-std=c++17")

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
        key = make_key(self.cache_format, cache_key, self.device_id()) if cache_key else None
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
        self._pack = struct.Struct(f"<{src.nslots}Q").pack
        self._args_t = np.dtype([("s", np.uint64, (src.nslots,))])
        self._nslots, self._nbuf = src.nslots, src.nbuf
        self._plan = [(p.kind, p.type.elem, s) for p, s in zip(kernel.params, src.slots)]

    def launch(self, cube_count, cube_dim, args) -> None:
        slots, bufs = [0] * self._nslots, [None] * self._nbuf
        for (kind, elem, s), a in zip(self._plan, args):
            if kind == "scalar":
                slots[s.offset] = slot_bits(a, elem)
                continue
            b = a.buffer
            if not isinstance(b, DeviceBuffer) or b.rt is not self.rt:
                raise LaunchError(f"argument '{s.name}' is not a {self.rt.name} buffer")
            bufs[s.buffer] = b.data
            slots[s.len] = b.size // a.line_size
            for d in range(s.rank):
                slots[s.shape(d)] = b.shape[d]
                slots[s.stride(d)] = b.strides[d]
        packed = np.frombuffer(self._pack(*slots), self._args_t)[0]
        try:
            self.fn(tuple(cube_count), tuple(cube_dim), (*bufs, packed), stream=self.rt.stream)
        except Exception as e:
            raise LaunchError(f"launch of {self.kernel.name} failed on {self.rt.name}: "
                              f"{type(e).__name__}: {e}") from None

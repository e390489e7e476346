"""The Metal runtime (macOS): codegen.cfamily's MSL dialect through PyObjC's Metal bindings.

Buffers are shared-storage MTLBuffers (the CPU reads them after the GPU finishes); each
launch is one command buffer with one compute encoder; `sync()` waits for the last one.
Metal keeps its own cache of compiled pipelines, so the disk cache holds only the source.
"""
from __future__ import annotations

import numpy as np

from codegen.cfamily import CSource, emit_source
from cube_ir import ir

from .args import Packer
from .base import Executable, Features, Runtime
from .buffer import Buffer, as_elem, as_shape, storage_array
from .errors import BackendCompileError, RuntimeUnavailable

try:
    import Metal
except Exception as e:  # pragma: no cover - only macOS has it
    Metal = None
    _IMPORT_ERROR = f"PyObjC's Metal bindings are not importable ({type(e).__name__}: {e})"


class MetalBuffer(Buffer):
    def __init__(self, rt, shape, elem):
        super().__init__(rt, shape, elem)
        self.mtl = rt.device.newBufferWithLength_options_(max(self.nbytes, 4),
                                                          Metal.MTLResourceStorageModeShared)

    def mapped(self) -> np.ndarray:
        """The shared memory as a flat array (not `view`: that is Buffer.view(shape,
        strides), which the kernel library calls on every runtime's buffers)."""
        raw = self.mtl.contents().as_buffer(max(self.nbytes, 4))
        return np.frombuffer(raw, np.uint8)[:self.nbytes].view(self.dtype)

    def _host_flat(self) -> tuple[np.ndarray, bool]:
        self.rt.sync()
        return self.mapped(), False


class MetalRuntime(Runtime):
    name = "metal"
    target = "msl"

    def __init__(self):
        if Metal is None:
            raise RuntimeUnavailable(f"metal: {_IMPORT_ERROR}")
        self.device = Metal.MTLCreateSystemDefaultDevice()
        if self.device is None:
            raise RuntimeUnavailable("metal: no Metal device")
        self.queue = self.device.newCommandQueue()
        self._last = None
        self.features = Features(
            plane_size=32, f64=False, int64=True,
            atomic_types=frozenset({"i32", "u32", "f32"}),
            max_shared_bytes=int(self.device.maxThreadgroupMemoryLength()),
            max_cube_dim=int(self.device.maxThreadsPerThreadgroup().width))

    def device_id(self) -> str:
        return f"metal {self.device.name()}"

    def from_numpy(self, arr, dtype=None) -> MetalBuffer:
        elem = as_elem(dtype) if dtype is not None else None
        a = np.ascontiguousarray(storage_array(arr, elem))
        buf = MetalBuffer(self, a.shape, elem or as_elem(a.dtype))
        self.sync()
        buf.mapped()[:] = a.reshape(-1)
        return buf


    def empty(self, shape, dtype=np.float32) -> MetalBuffer:
        shape = as_shape(shape)
        return MetalBuffer(self, shape, as_elem(dtype))

    def generate(self, kernel: ir.Kernel) -> str:
        return emit_source(kernel, "msl").text

    def compile(self, kernel: ir.Kernel, cache_key: str | None = None) -> Executable:
        src = emit_source(kernel, "msl")
        # fast math off: Metal's default reassociates and contracts a * b + c into one fma,
        # so results would differ from Python's (and the other runtimes') op-by-op rounding
        opts = Metal.MTLCompileOptions.new()
        opts.setFastMathEnabled_(False)
        lib, err = self.device.newLibraryWithSource_options_error_(src.text, opts, None)
        if lib is None:
            raise BackendCompileError(f"the Metal compiler rejected kernel {kernel.name}",
                                      str(err), src.text)
        fn = lib.newFunctionWithName_(src.entry)
        pipe, err = self.device.newComputePipelineStateWithFunction_error_(fn, None)
        if pipe is None:
            raise BackendCompileError(f"Metal could not build a pipeline for {kernel.name}",
                                      str(err), src.text)
        return MetalExecutable(self, kernel, src, pipe)

    def sync(self) -> None:
        if self._last is not None:
            self._last.waitUntilCompleted()
            self._last = None


class MetalExecutable(Executable):
    def __init__(self, rt: MetalRuntime, kernel: ir.Kernel, src: CSource, pipe):
        self.rt, self.kernel, self.source, self.pipe = rt, kernel, src.text, pipe
        self.layout = src.layout
        self.packer = Packer(src.layout, kernel.name)

    def launch(self, cube_count, cube_dim, args) -> None:
        rt = self.rt
        blob, bufs = self.packer.pack(args)
        self.packer.check_buffers(bufs, MetalBuffer, rt)
        cmd = rt.queue.commandBuffer()
        enc = cmd.computeCommandEncoder()
        enc.setComputePipelineState_(self.pipe)
        for i, b in enumerate(bufs):
            enc.setBuffer_offset_atIndex_(b.mtl, 0, i)
        enc.setBytes_length_atIndex_(blob, len(blob), len(bufs))
        enc.dispatchThreadgroups_threadsPerThreadgroup_(Metal.MTLSizeMake(*cube_count),
                                                         Metal.MTLSizeMake(*cube_dim))
        enc.endEncoding()
        cmd.commit()
        rt._last = cmd

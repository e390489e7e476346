"""The wgpu runtime (wgpu-py over wgpu-native): WGSL from codegen.wgsl, or SPIR-V from
codegen.spirv (runtime "wgpu-spirv"), run as compute shaders on whatever adapter wgpu finds
(in CI, Mesa's lavapipe Vulkan driver on the CPU).

Launch: the arguments' metadata (lengths, shapes, strides, scalars: cube_ir.layout's spec
SHADER, packed by runtimes.args; codegen.shader_abi) is written to the executable's uniform
buffer, a bind group for the argument buffers is taken
from a small cache, and one compute pass dispatches cube_count workgroups of cube_dim
(override constants, one pipeline per cube_dim). Queue order makes the reuse of the uniform
buffer safe: a later write lands after the earlier dispatch. Launches are asynchronous;
reading a buffer (or `sync`) waits.

Limits (workgroup size, workgroups per dimension, storage buffers per stage, storage binding
size, buffer size) are the adapter's; a launch beyond one raises a LaunchError naming it.
"""
from __future__ import annotations

import json
import os
import threading
import weakref
from collections import OrderedDict
from dataclasses import replace

import numpy as np

from codegen.shader_abi import binding
from cube_ir import ir
from cube_ir.layout import SHADER, Layout, layout

from .args import Packer
from .base import Executable, Features, Runtime
from .buffer import Buffer, as_elem, as_shape, storage_array
from .disk_cache import default_cache, make_key
from .errors import BackendCompileError, LaunchError, RuntimeUnavailable, UnsupportedFeature

CACHE_FORMAT = "wgpu-2"  # bumped when generated code changes for the same IR
WANTED_FEATURES = ("shader-f16", "shader-float32-atomic", "subgroup")
LIMITS = ("max-storage-buffers-per-shader-stage", "max-storage-buffer-binding-size",
          "max-buffer-size", "max-compute-workgroup-storage-size",
          "max-compute-invocations-per-workgroup", "max-compute-workgroup-size-x",
          "max-compute-workgroup-size-y", "max-compute-workgroup-size-z",
          "max-compute-workgroups-per-dimension", "max-uniform-buffer-binding-size",
          "max-bindings-per-bind-group")
POOL_BYTES = 256 << 20  # freed buffers kept for reuse, at most this much in all


def _import_wgpu():
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")  # lavapipe warns without one
    try:
        import wgpu
    except ImportError as e:
        raise RuntimeUnavailable(f"wgpu-py is not installed ({e})") from None
    return wgpu


class _Pool:
    """Freed device buffers by size, handed out again by `take` (contents undefined)."""

    def __init__(self) -> None:
        self.free: dict[int, list] = {}
        self.bytes = 0
        self.lock = threading.Lock()

    def take(self, size: int):
        with self.lock:
            lst = self.free.get(size)
            if lst:
                self.bytes -= size
                return lst.pop()
        return None

    def give(self, size: int, gbuf) -> None:
        with self.lock:
            if self.bytes + size <= POOL_BYTES:
                self.free.setdefault(size, []).append(gbuf)
                self.bytes += size
                return
        gbuf.destroy()


class _Owner:
    __slots__ = ("__weakref__",)


class WgpuBuffer(Buffer):
    def __init__(self, rt, gbuf, alloc: int, shape, elem):
        super().__init__(rt, shape, elem)
        self.gbuf, self.alloc = gbuf, alloc
        # a number naming the memory while it lives (see DeviceBuffer.ptr in cuda.py): no
        # address is to be had from wgpu
        self.ptr = id(gbuf)
        # the allocation is owned by a token that views (copies of this buffer) share, so it
        # returns to the pool only when the last of them is gone
        self._owner = _Owner()
        weakref.finalize(self._owner, rt._pool.give, alloc, gbuf)

    def _host_flat(self) -> tuple[np.ndarray, bool]:
        raw = self.rt.device.queue.read_buffer(self.gbuf, 0, self.alloc)
        return np.frombuffer(raw, dtype=self.dtype, count=self.size), False


class WgpuRuntime(Runtime):
    name = "wgpu"
    target = "wgsl"

    def __init__(self) -> None:
        wgpu = _import_wgpu()
        self.wgpu = wgpu
        try:
            adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        except Exception as e:
            raise RuntimeUnavailable(f"{self.name}: no adapter ({type(e).__name__}: {e})") \
                from None
        if adapter is None:
            raise RuntimeUnavailable(f"{self.name}: wgpu found no adapter")
        self.adapter = adapter
        feats = set(adapter.features)
        self.limits = {k: int(adapter.limits[k]) for k in LIMITS if k in adapter.limits}
        self.device = adapter.request_device_sync(
            required_features=[f for f in WANTED_FEATURES if f in feats],
            required_limits=dict(self.limits))
        self.has_f16 = "shader-f16" in feats
        self.subgroup_size = self._probe_subgroups() if "subgroup" in feats else 1
        info = adapter.info
        self._device_id = (f"{info.get('device', '?')} ({info.get('description', '')}, "
                           f"{info.get('backend_type', '')}) wgpu-py {wgpu.__version__} "
                           f"f16={int(self.has_f16)} plane={self.subgroup_size}")
        self.features = Features(
            plane_size=self.subgroup_size, f16=self.has_f16, f64=False, int64=False,
            atomic_types=frozenset({"i32", "u32", "f32"}),
            max_shared_bytes=self.limits.get("max-compute-workgroup-storage-size", 16384),
            max_cube_dim=self.limits.get("max-compute-invocations-per-workgroup", 256))
        self._pool = _Pool()
        self._sync_buf = None
        self.stats = {"codegen": 0, "cache_loads": 0, "cache_stores": 0}
        usage = wgpu.BufferUsage
        self._usage = usage.STORAGE | usage.COPY_SRC | usage.COPY_DST

    def device_id(self) -> str:
        return self._device_id

    def _probe_subgroups(self) -> int:
        """The plane size: the subgroup size if subgroups are fixed-size runs of consecutive
        local_invocation_index values (what the interpreter's planes are), else 1.

        WebGPU promises neither: the size may lie anywhere in the adapter's min..max and
        the layout is the driver's. So a probe runs 1-D workgroups of several sizes and
        checks that every invocation reports the same subgroup_size s and
        subgroup_invocation_id = index % s. (lavapipe: s = 8, its SIMD width; in a 2-D
        workgroup its subgroups are runs along x that never span rows, hence the cube_dim
        check at launch.)"""
        wgpu = self.wgpu
        src = ("@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"
               "override N: u32 = 1u;\n"
               "@compute @workgroup_size(N)\n"
               "fn main(@builtin(local_invocation_index) i: u32,\n"
               "        @builtin(workgroup_id) w: vec3<u32>,\n"
               "        @builtin(subgroup_invocation_id) sid: u32,\n"
               "        @builtin(subgroup_size) ss: u32) {\n"
               "    let g = 2u * (w.x * N + i);\n"
               "    out[g] = sid;\n"
               "    out[g + 1u] = ss;\n}\n")
        try:
            dev = self.device
            mod = dev.create_shader_module(code=src)
            sizes = set()
            for n in (1, 24, 64, 100):
                buf = dev.create_buffer(size=2 * 4 * 2 * n, usage=wgpu.BufferUsage.STORAGE
                                        | wgpu.BufferUsage.COPY_SRC)
                pipe = dev.create_compute_pipeline(layout="auto", compute={
                    "module": mod, "entry_point": "main", "constants": {"N": n}})
                group = dev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
                    {"binding": 0, "resource": {"buffer": buf}}])
                enc = dev.create_command_encoder()
                cp = enc.begin_compute_pass()
                cp.set_pipeline(pipe)
                cp.set_bind_group(0, group)
                cp.dispatch_workgroups(2)
                cp.end()
                dev.queue.submit([enc.finish()])
                r = np.frombuffer(dev.queue.read_buffer(buf), np.uint32).reshape(-1, 2)
                buf.destroy()
                ss = set(r[:, 1].tolist())
                if len(ss) != 1:
                    return 1
                s = ss.pop()
                if s < 1 or (r[:, 0] != np.arange(2 * n) % n % s).any():
                    return 1
                sizes.add(s)
        except Exception:
            return 1
        return sizes.pop() if len(sizes) == 1 else 1

    # ---- memory ------------------------------------------------------------------------
    def _alloc(self, nbytes: int):
        size = max(16, -(-nbytes // 4) * 4)
        limit = self.limits.get("max-buffer-size")
        if limit is not None and size > limit:
            raise LaunchError(f"{self.name}: a buffer of {nbytes} bytes exceeds the device's "
                              f"max-buffer-size of {limit} bytes")
        g = self._pool.take(size)
        if g is None:
            g = self.device.create_buffer(size=size, usage=self._usage)
        return g, size

    def from_numpy(self, arr, dtype=None) -> WgpuBuffer:
        elem = as_elem(dtype) if dtype is not None else None
        arr = np.ascontiguousarray(storage_array(arr, elem))
        buf = self.empty(arr.shape, elem or arr.dtype)
        data = arr.tobytes()
        if data:
            pad = (-len(data)) % 4
            self.device.queue.write_buffer(buf.gbuf, 0, data + b"\0" * pad)
        return buf


    def empty(self, shape, dtype=np.float32) -> WgpuBuffer:
        shape = as_shape(shape)
        elem = as_elem(dtype)
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        g, size = self._alloc(n * elem.np.itemsize)
        return WgpuBuffer(self, g, size, shape, elem)

    def sync(self) -> None:
        # reading a buffer waits for all submitted work (on_submitted_work_done_sync fails
        # with wgpu-py 0.32's bundled wgpu-native)
        if self._sync_buf is None:
            self._sync_buf, _ = self._alloc(16)
        self.device.queue.read_buffer(self._sync_buf, 0, 16)

    # ---- kernels -----------------------------------------------------------------------
    def generate(self, kernel: ir.Kernel) -> str:
        from codegen.wgsl import emit_module
        return emit_module(kernel).text

    def _shader(self, kernel: ir.Kernel, key: str | None):
        """(shader code for create_shader_module, readable source) via the disk cache."""
        cache = default_cache()
        if key is not None:
            files = cache.get(key)
            if files and "source.wgsl" in files:
                self.stats["cache_loads"] += 1
                text = files["source.wgsl"].decode()
                return text, text
        text = self.generate(kernel)
        self.stats["codegen"] += 1
        if key is not None:
            cache.put(key, {"source.wgsl": text.encode(),
                            "meta.json": json.dumps({"format": CACHE_FORMAT}).encode()})
            self.stats["cache_stores"] += 1
        return text, text

    def _check_bindings(self, kernel: ir.Kernel, abi: Layout) -> None:
        limit = self.limits.get("max-storage-buffers-per-shader-stage")
        if limit is not None and abi.nbuf > limit:
            raise LaunchError(f"{kernel.name} binds {abi.nbuf} storage buffers; "
                              f"{self.name} allows max-storage-buffers-per-shader-stage = "
                              f"{limit}")

    def compile(self, kernel: ir.Kernel, cache_key: str | None = None) -> Executable:
        abi = layout(kernel.params, SHADER)
        self._check_bindings(kernel, abi)
        key = make_key(CACHE_FORMAT, self.target, cache_key, self.device_id()) \
            if cache_key else None
        code, source = self._shader(kernel, key)
        try:
            module = self.device.create_shader_module(code=code)
        except Exception as e:
            raise BackendCompileError(f"{self.name} rejected the {self.target} of kernel "
                                      f"{kernel.name}", str(e), source) from None
        return WgpuExecutable(self, kernel, source, abi, lambda cd: module)


class WgpuSpirvRuntime(WgpuRuntime):
    """The same device, fed SPIR-V from codegen.spirv (wgpu-native translates it through
    naga's SPIR-V front end and validates it; there is no raw passthrough on lavapipe).
    SPIR-V fixes the workgroup size in the module, so there is one module per cube_dim."""

    name = "wgpu-spirv"
    target = "spirv"

    def __init__(self) -> None:
        super().__init__()
        # f32 atomics are OpAtomicFAddEXT (no compare-exchange loop: see codegen.spirv.ops)
        if "shader-float32-atomic" not in self.adapter.features:
            self.features = replace(self.features, atomic_types=frozenset({"i32", "u32"}))

    def generate(self, kernel: ir.Kernel, cube_dim: tuple = (1, 1, 1)) -> str:
        from codegen.spirv import disassemble
        return disassemble(self._spirv(kernel, cube_dim))

    def _spirv(self, kernel: ir.Kernel, cube_dim: tuple) -> bytes:
        from codegen.spirv import Unsupported, emit_module
        try:
            return emit_module(kernel, cube_dim).binary
        except Unsupported as e:
            raise UnsupportedFeature(str(e)) from None

    def compile(self, kernel: ir.Kernel, cache_key: str | None = None) -> Executable:
        abi = layout(kernel.params, SHADER)
        self._check_bindings(kernel, abi)
        self._spirv(kernel, tuple(kernel.cube_dim or (1, 1, 1)))  # unsupported: fail now
        modules: dict = {}

        def module_for(cd: tuple):
            mod = modules.get(cd)
            if mod is None:
                key = make_key(CACHE_FORMAT, self.target, cache_key, self.device_id(), cd) \
                    if cache_key else None
                files = default_cache().get(key) if key else None
                if files and "kernel.spv" in files:
                    blob = files["kernel.spv"]
                    self.stats["cache_loads"] += 1
                else:
                    blob = self._spirv(kernel, cd)
                    self.stats["codegen"] += 1
                    if key:
                        default_cache().put(key, {"kernel.spv": blob})
                        self.stats["cache_stores"] += 1
                try:
                    mod = self.device.create_shader_module(code=blob)
                except Exception as e:
                    from codegen.spirv import disassemble
                    raise BackendCompileError(f"{self.name} rejected the SPIR-V of kernel "
                                              f"{kernel.name}", str(e),
                                              disassemble(blob)) from None
                modules[cd] = mod
            return mod
        return WgpuExecutable(self, kernel, "<SPIR-V, one module per cube_dim: "
                              "rt.generate(kernel, cube_dim)>", abi, module_for)


class WgpuExecutable(Executable):
    def __init__(self, rt: WgpuRuntime, kernel: ir.Kernel, source, abi: Layout, module_for):
        self.rt, self.kernel, self.source, self.abi = rt, kernel, source, abi
        self.packer = Packer(abi, kernel.name)
        self.module_for = module_for  # cube_dim -> shader module
        self.uses_planes = any(isinstance(op, ir.Plane) for op in ir.walk(kernel.body))
        wgpu = rt.wgpu
        dev = rt.device
        entries = [{"binding": 0, "visibility": wgpu.ShaderStage.COMPUTE,
                    "buffer": {"type": wgpu.BufferBindingType.uniform}}]
        for s in abi.buffers:  # all read-write: see the shader generators (aliases)
            entries.append({"binding": binding(s), "visibility": wgpu.ShaderStage.COMPUTE,
                            "buffer": {"type": wgpu.BufferBindingType.storage}})
        self.bgl = dev.create_bind_group_layout(entries=entries)
        self.playout = dev.create_pipeline_layout(bind_group_layouts=[self.bgl])
        self.meta = dev.create_buffer(size=abi.nslots * 4,
                                      usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)
        self.pipelines: dict = {}
        self.groups: OrderedDict = OrderedDict()
        self.lock = threading.Lock()
        lim = rt.limits
        self.max_wg = (lim.get("max-compute-workgroup-size-x", 1 << 30),
                       lim.get("max-compute-workgroup-size-y", 1 << 30),
                       lim.get("max-compute-workgroup-size-z", 1 << 30))
        self.max_inv = lim.get("max-compute-invocations-per-workgroup", 1 << 30)
        self.max_groups = lim.get("max-compute-workgroups-per-dimension", 1 << 30)
        self.max_binding = lim.get("max-storage-buffer-binding-size", 1 << 62)

    def _pipeline(self, cd: tuple):
        p = self.pipelines.get(cd)
        if p is None:
            consts = {} if self.kernel.cube_dim is not None or self.rt.target != "wgsl" \
                else {"WG_X": cd[0], "WG_Y": cd[1], "WG_Z": cd[2]}
            module = self.module_for(cd)
            try:
                p = self.rt.device.create_compute_pipeline(
                    layout=self.playout, compute={"module": module, "entry_point": "main",
                                                  "constants": consts})
            except Exception as e:
                raise BackendCompileError(f"{self.rt.name} could not build a pipeline for "
                                          f"{self.kernel.name}", str(e), self.source) from None
            self.pipelines[cd] = p
        return p

    def launch(self, cube_count: tuple, cube_dim: tuple, args: list) -> None:
        k = self.kernel
        blob, bufs = self.packer.pack(args)
        self.packer.check_buffers(bufs, WgpuBuffer, self.rt)
        for s, b in zip(self.abi.buffers, bufs):
            if b.alloc > self.max_binding:
                raise LaunchError(f"argument '{s.name}' ({b.alloc} bytes) exceeds the device's "
                                  f"max-storage-buffer-binding-size of {self.max_binding}")
        cd, cc = tuple(cube_dim), tuple(cube_count)
        if k.cube_dim is not None and cd != tuple(k.cube_dim):
            raise LaunchError(f"launch of {k.name}: cube_dim {cd} differs from the "
                              f"{tuple(k.cube_dim)} the kernel was compiled for")
        for i, a in enumerate("xyz"):
            if cd[i] > self.max_wg[i]:
                raise LaunchError(f"launch of {k.name}: cube_dim {cd} exceeds the device's "
                                  f"max-compute-workgroup-size-{a} of {self.max_wg[i]}")
            if cc[i] > self.max_groups:
                raise LaunchError(f"launch of {k.name}: cube_count {cc} exceeds the device's "
                                  f"max-compute-workgroups-per-dimension of "
                                  f"{self.max_groups}")
        ps = k.plane_size
        if ps > 1 and self.uses_planes and cd[1] * cd[2] > 1 and cd[0] % ps:
            raise LaunchError(f"launch of {k.name}: plane operations in a cube_dim of "
                              f"{cd} need cube_dim x to be a multiple of the plane size "
                              f"{ps} (this device's subgroups do not span rows), or a 1-D "
                              f"cube_dim")
        if cd[0] * cd[1] * cd[2] > self.max_inv:
            raise LaunchError(f"launch of {k.name}: {cd[0] * cd[1] * cd[2]} units per cube "
                              f"exceed the device's max-compute-invocations-per-workgroup "
                              f"of {self.max_inv}")
        dev = self.rt.device
        with self.lock:
            pipe = self._pipeline(cd)
            group = self._group(tuple(b.gbuf for b in bufs))
            dev.queue.write_buffer(self.meta, 0, blob)
            enc = dev.create_command_encoder()
            cp = enc.begin_compute_pass()
            cp.set_pipeline(pipe)
            cp.set_bind_group(0, group)
            cp.dispatch_workgroups(*cc)
            cp.end()
            try:
                dev.queue.submit([enc.finish()])
            except Exception as e:
                raise LaunchError(f"launch of {k.name} failed: {e}") from None

    def _group(self, bufs: tuple):
        g = self.groups.get(bufs)
        if g is not None:
            self.groups.move_to_end(bufs)
            return g
        entries = [{"binding": 0, "resource": {"buffer": self.meta}}]
        entries += [{"binding": binding(s), "resource": {"buffer": b}}
                    for s, b in zip(self.abi.buffers, bufs)]
        g = self.rt.device.create_bind_group(layout=self.bgl, entries=entries)
        self.groups[bufs] = g
        if len(self.groups) > 64:
            self.groups.popitem(last=False)
        return g

"""The HIP runtime: codegen.cfamily's HIP dialect through CuPy built for ROCm (hiprtc).

Everything but the dialect, the architecture flag and the device check is the CUDA runtime:
CuPy on ROCm maps its `cuda` namespace and the NVRTC bindings onto HIP and hiprtc.
"""
from __future__ import annotations

from .cuda import CudaRuntime


class HipRuntime(CudaRuntime):
    name = "hip"
    target = "hip"
    cache_format = "hip-codeobj-1"

    def _check_backend(self) -> None:
        import cupy as cp
        if not cp.cuda.runtime.is_hip:
            raise self.unavailable("CuPy is built for CUDA, not ROCm")

    def arch(self) -> str:
        arch = self.props.get("gcnArchName", b"gfx90a")
        arch = arch.decode() if isinstance(arch, bytes) else arch
        return arch.split(":")[0]

    def compile_options(self) -> tuple[str, ...]:
        # no a * b + c contracted into an fma: each op rounds, as in Python (see cuda.py)
        return (f"--offload-arch={self.arch()}", "-std=c++17", "-ffp-contract=off")

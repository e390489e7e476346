"""What every runtime offers. A runtime knows no frontend: it takes IR kernels."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cube_ir import ir

from .buffer import Buffer


@dataclass(frozen=True)
class Features:
    """What a runtime's device can do; kernels needing more get a CompileError."""

    plane_size: int = 1
    plane_ops: bool = True
    f16: bool = True
    bf16: bool = True
    f64: bool = True
    int64: bool = True
    atomic_types: frozenset = field(default_factory=lambda: frozenset(
        {"i32", "u32", "i64", "u64", "f32", "f64"}))
    max_shared_bytes: int = 1 << 20
    max_cube_dim: int = 1024


class Executable:
    """A compiled kernel ready to launch. `args` follow kernel.params in order: a Buffer or
    LineView for array/tensor params, a Python number for scalars."""

    kernel: ir.Kernel
    source: str  # generated source (for `cube dump` and error messages)

    def launch(self, cube_count: tuple, cube_dim: tuple, args: list) -> None:
        raise NotImplementedError


class Runtime:
    name: str = "?"
    target: str = "?"
    features: Features = Features()

    @property
    def plane_size(self) -> int:
        return self.features.plane_size

    def device_id(self) -> str:
        """Identifies the device for cache keys (model, driver, CPU features...)."""
        return self.name

    def describe(self) -> str:
        """One line for `cube targets`."""
        return self.device_id()

    # ---- memory --------------------------------------------------------------------------
    def from_numpy(self, arr, dtype=None) -> Buffer:
        """A device copy of arr; dtype (NumPy or cube type, e.g. bf16 over uint16 bits)
        overrides the element type."""
        raise NotImplementedError

    def empty(self, shape, dtype=np.float32) -> Buffer:
        raise NotImplementedError

    def zeros(self, shape, dtype=np.float32) -> Buffer:
        return self.from_numpy(np.zeros(shape, dtype))

    def empty_like(self, buf) -> Buffer:
        buf = buf.buffer if hasattr(buf, "buffer") else buf
        return self.empty(buf.shape, buf.elem)

    # ---- kernels -------------------------------------------------------------------------
    def compile(self, kernel: ir.Kernel, cache_key: str | None = None) -> Executable:
        """Generate, compile (or load from the disk cache under cache_key) and return."""
        raise NotImplementedError

    def generate(self, kernel: ir.Kernel) -> str:
        """The target source for a kernel (what `cube dump` prints)."""
        raise NotImplementedError

    def sync(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"<runtime {self.name}>"

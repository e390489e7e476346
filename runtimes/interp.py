"""The interpreter runtime: runs IR kernels with the NumPy reference interpreter.

It needs no device and no compiler, so it always starts; every other runtime is checked
against it. Its plane size is configurable (default 4, so plane ops are exercised with more
than one unit per plane even where the compiled CPU runtime uses 1)."""
from __future__ import annotations

from cube_ir import ir
from cube_ir.errors import IRError
from cube_ir.interpreter import run
from cube_ir.printer import format_kernel

from .base import Executable, Features, Runtime
from .errors import LaunchError
from .host import HostMemoryMixin


class InterpExecutable(Executable):
    def __init__(self, kernel: ir.Kernel, source: str):
        self.kernel = kernel
        self.source = source

    def launch(self, cube_count: tuple, cube_dim: tuple, args: list) -> None:
        kernel = self.kernel
        if len(args) != len(kernel.params):
            raise LaunchError(f"{kernel.name} takes {len(kernel.params)} arguments, "
                              f"got {len(args)}")
        conv = []
        for p, a in zip(kernel.params, args, strict=True):
            if p.kind == "scalar":
                conv.append(a)
                continue
            arr = getattr(getattr(a, "buffer", None), "array", None)
            if arr is None:
                raise LaunchError(f"argument '{p.name}' must be a host buffer, got "
                                  f"{type(a).__name__}")
            conv.append((arr, a.shape, a.strides) if p.kind == "tensor" else arr)
        try:
            run(kernel, cube_count, cube_dim, conv, plane_size=kernel.plane_size)
        except IRError as e:  # e.g. an out-of-bounds access in an unchecked kernel
            err = LaunchError(_located(e.message, e.loc))
            err.loc = e.loc
            raise err from None
        except (TypeError, ValueError) as e:
            raise LaunchError(f"{kernel.name}: {e}") from None


def _located(message: str, loc) -> str:
    """`file:line:col: error: message` and the source line, like the frontend's errors."""
    if not loc:
        return f"error: {message}"
    filename, line, col, src = loc
    out = f"{filename}:{line}:{col + 1}: error: {message}"
    if src:
        out += f"\n    {src.rstrip()}\n    {' ' * col}^"
    return out


class InterpRuntime(HostMemoryMixin, Runtime):
    name = "interp"
    target = "ir"

    def __init__(self, plane_size: int = 4):
        if int(plane_size) < 1:
            raise ValueError(f"plane_size must be >= 1, got {plane_size}")
        self.features = Features(plane_size=int(plane_size))

    def device_id(self) -> str:
        return f"interp (NumPy reference, plane size {self.features.plane_size})"

    def generate(self, kernel: ir.Kernel) -> str:
        return format_kernel(kernel)

    def compile(self, kernel: ir.Kernel, cache_key: str | None = None) -> InterpExecutable:
        return InterpExecutable(kernel, self.generate(kernel))

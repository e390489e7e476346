"""cube_ir: the typed, target-free IR of cube kernels (knows no target, no runtime)."""
from . import ir, types
from .builder import Builder
from .ir import Kernel
from .printer import format_kernel

__all__ = ["Builder", "Kernel", "format_kernel", "ir", "types"]

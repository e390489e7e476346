"""SPIR-V 1.3 for Vulkan compute, written directly as a binary (no external compiler).

`emit_module(kernel, cube_dim)` gives the module for one workgroup size (SPIR-V's LocalSize
is part of the module); `disassemble` gives readable text (spirv-dis when installed, else a
minimal listing of opcode names and operand words)."""
from __future__ import annotations

import dataclasses
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from cube_ir import ir
from cube_ir.layout import Layout
from cube_ir.passes.lowering import lower

from ..shader_abi import LOWERING
from .emit import Unsupported, emit
from .module import disassemble as raw_listing


@dataclass(frozen=True)
class SpirvModule:
    binary: bytes
    abi: Layout
    entry: str = "main"


def emit_module(kernel: ir.Kernel, cube_dim: tuple = (1, 1, 1)) -> SpirvModule:
    # the module's workgroup size is fixed: the lowering folds CUBE_DIM* to constants
    kernel = lower(dataclasses.replace(kernel, cube_dim=tuple(cube_dim)), LOWERING)
    blob, abi = emit(kernel, cube_dim)
    return SpirvModule(blob, abi)


def disassemble(blob: bytes) -> str:
    tool = shutil.which("spirv-dis")
    if tool:
        with tempfile.NamedTemporaryFile(suffix=".spv") as f:
            f.write(blob)
            f.flush()
            r = subprocess.run([tool, f.name], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout
    return raw_listing(blob)


__all__ = ["SpirvModule", "Unsupported", "disassemble", "emit_module"]

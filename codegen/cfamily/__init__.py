"""C-family source for CUDA, HIP, Metal (MSL) and OpenCL C from one emitter.

`emit_source(kernel, dialect)` returns a `CSource`: the text, the entry point's name and the
argument layout (see `abi.py`); a runtime compiles the text with its vendor compiler. The
dialects differ only in the table and overrides in `dialects.py`.
"""
from __future__ import annotations

from dataclasses import dataclass

from cube_ir import ir

from .abi import Slots, layout
from .dialects import DIALECTS, Dialect
from .emit import Emitter, entry_name


@dataclass(frozen=True)
class CSource:
    text: str
    entry: str
    slots: tuple[Slots, ...]  # per kernel param: buffer position / cube_args slots
    nbuf: int  # buffer arguments before cube_args
    nslots: int  # 64-bit slots in cube_args


def emit_source(kernel: ir.Kernel, dialect: str | Dialect) -> CSource:
    d = DIALECTS[dialect] if isinstance(dialect, str) else dialect
    text = Emitter(kernel, d).run()
    slots, nbuf, nslots = layout(kernel.params)
    return CSource(text, entry_name(kernel), slots, nbuf, nslots)


__all__ = ["CSource", "DIALECTS", "Dialect", "Slots", "emit_source", "entry_name", "layout"]

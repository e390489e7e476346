"""Elementwise fusion: lazy graphs compiled into one kernel each through the cube_ir builder.

The package is callable: `dl.fusion(False)` turns fusion off (also as a context manager)."""
import sys
import types

from ..kernels.launch import count_kernels
from .lazy import elementwise, realise
from .materialise import cached_kernels, materialise
from .settings import enabled, fusion


class _CallableModule(types.ModuleType):
    def __call__(self, on: bool = True):
        return fusion(on)


sys.modules[__name__].__class__ = _CallableModule

"""Every kernel the examples, tests/cube/test_language.py and tests/cube/test_lines.py build,
as IR: their test functions run once on an interpreter runtime (plane size 1; plane tests
also with 8) that records what it compiles."""
from __future__ import annotations

import functools
import importlib
import inspect
import itertools
import sys
from pathlib import Path

import pytest

from runtimes.interp import InterpRuntime

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ["vector_add", "gelu", "softmax", "matmul", "histogram", "prefix_sum"]


class _Recorder(InterpRuntime):
    def __init__(self, plane_size: int = 1) -> None:
        super().__init__(plane_size=plane_size)
        self.kernels: dict[str, object] = {}

    def compile(self, kernel, cache_key=None):
        from cube_ir.printer import format_kernel
        self.kernels.setdefault(format_kernel(kernel), kernel)
        return super().compile(kernel, cache_key)


def _param_sets(fn) -> list[dict]:
    marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize"]
    names, values = [], []
    for m in marks:
        names.append(m.args[0])
        values.append(m.args[1])
    return [dict(zip(names, combo)) for combo in itertools.product(*values)]


@functools.cache
def kernels() -> list:
    rt, planes = _Recorder(), _Recorder(plane_size=8)
    sys.path.insert(0, str(ROOT / "examples"))
    for name in EXAMPLES:
        importlib.import_module(name).run(rt)
    sys.path.insert(0, str(ROOT / "tests" / "cube"))
    for module in ("test_language", "test_lines"):
        mod = importlib.import_module(module)
        for name, fn in vars(mod).items():
            if not name.startswith("test_") or "rt" not in inspect.signature(fn).parameters:
                continue
            for params in _param_sets(fn):
                # plane tests also with planes of 8 (subgroup code paths)
                for r in (rt, planes) if "plane" in name else (rt,):
                    try:
                        fn(rt=r, **params)
                    except (Exception, pytest.skip.Exception):  # expects an error, skips
                        pass
    return list(rt.kernels.values()) + list(planes.kernels.values())

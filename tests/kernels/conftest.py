"""The kernel tests' runtimes: every runtime, plus the interpreter shaped as this machine's
CPU (`interp-cpu`): the launchers take their CPU paths there (register tiles, lines of the
CPU's width, one unit a cube, K and row blocks), so every CPU launch configuration the tests
reach runs on the IR oracle under its race check (cubes storing or reading each other's
elements), which the CPU itself shows only in some runs."""
from __future__ import annotations

from dataclasses import replace

import pytest
from runtime_params import RUNTIME_NAMES, get_runtime

from runtimes.interp import InterpRuntime


class CpuShapedInterp(InterpRuntime):
    """The IR interpreter with the CPU runtime's target and features: dl's launchers cannot
    tell it from the CPU (`is_cpu`, `simd_bytes`, the register file), and each launch
    executes on the interpreter. Named interp: tests size their cases for the interpreter."""

    target = "llvm"

    def __init__(self, cpu):
        super().__init__(plane_size=1)
        self.cpu = cpu
        self.features = replace(cpu.features)

    def device_id(self) -> str:
        return f"interp shaped as {self.cpu.device_id()}"


_shaped: list = []


@pytest.fixture(params=RUNTIME_NAMES + ["interp-cpu"])
def rt(request):
    """Every runtime, and the interpreter shaped as the CPU."""
    if request.param != "interp-cpu":
        return get_runtime(request.param)
    if request.path.name == "test_matmul.py":  # test_matmul_isa covers its tiles and blocks
        pytest.skip("interp-cpu: test_matmul_isa.py runs the CPU's matmul tiles")
    if not _shaped:
        _shaped.append(CpuShapedInterp(get_runtime("cpu")))
    return _shaped[0]

"""The runtimes the suite is parametrised over, and how a test gets one (a runtime that
cannot start on this machine skips the test with its one-line reason)."""
from __future__ import annotations

import pytest

import cube as cb
from cube.targets import PLANNED, RUNTIMES

RUNTIME_NAMES = list(RUNTIMES) + list(PLANNED)


def get_runtime(name: str):
    try:
        return cb.runtime(name)
    except cb.RuntimeUnavailable as e:
        pytest.skip(f"runtime {name} unavailable: {str(e).splitlines()[0]}")

"""One suite, every runtime: `rt` is parametrised over every runtime we know; those that
cannot start on this machine skip with their one-line reason."""
from __future__ import annotations

import os

import pytest

import cube as cb
from cube.targets import PLANNED, RUNTIMES

RUNTIME_NAMES = list(RUNTIMES) + list(PLANNED)


def _get(name: str):
    try:
        return cb.runtime(name)
    except cb.RuntimeUnavailable as e:
        pytest.skip(f"runtime {name} unavailable: {str(e).splitlines()[0]}")


@pytest.fixture(params=RUNTIME_NAMES)
def rt(request):
    """Every runtime (the interpreter included: it is the oracle)."""
    return _get(request.param)


@pytest.fixture(params=[n for n in RUNTIME_NAMES if n != "interp"])
def device_rt(request):
    """Every compiled runtime (cross-checked against the interpreter)."""
    return _get(request.param)


@pytest.fixture
def interp():
    return _get("interp")


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Tests never touch the user's kernel cache."""
    if "CUBE_CACHE_DIR" not in os.environ or os.environ.get("CI"):
        os.environ["CUBE_CACHE_DIR"] = str(tmp_path_factory.mktemp("cube-cache"))
    yield

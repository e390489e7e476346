"""One suite, every runtime: `rt` is parametrised over every runtime we know; those that
cannot start on this machine skip with their one-line reason."""
from __future__ import annotations

import os

import pytest
from runtime_params import RUNTIME_NAMES
from runtime_params import get_runtime as _get

import cube as cb


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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A kernel needing what a runtime's target lacks (f64 on WGSL, say) is refused with a
    CapabilityError from the target's declared capability table, before any device compiler:
    on that runtime the test is skipped naming the capability, not failed. Any other error
    fails the test, whatever its message says."""
    try:
        return (yield)
    except cb.CapabilityError as e:
        rt = item.funcargs.get("rt") or item.funcargs.get("device_rt")
        if rt is not None and e.target == rt.target and rt.target not in ("ir", "llvm"):
            pytest.skip(f"{rt.name} lacks the capability {e.capability}: {e.message}")
        raise


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Tests never touch the user's kernel cache."""
    if "CUBE_CACHE_DIR" not in os.environ or os.environ.get("CI"):
        os.environ["CUBE_CACHE_DIR"] = str(tmp_path_factory.mktemp("cube-cache"))
    yield

"""The dl suite runs on every runtime that starts (the `rt` fixture of tests/conftest.py)."""
from __future__ import annotations

import pytest


@pytest.fixture
def dev(rt):
    """A device name for dl tensors: one per runtime that starts on this machine."""
    return rt.name


@pytest.fixture(autouse=True)
def _interp_by_default():
    """Op-by-op coverage runs on the interpreter (the oracle: no compile per structure, so
    the suite stays fast); tests taking `dev` run on every runtime, the CPU included."""
    import dl
    from dl import devices
    prev = devices.default_device
    dl.set_default_device("interp")
    yield
    devices.default_device = prev


@pytest.fixture(autouse=True)
def _no_autotune(monkeypatch):
    """Library ops take their highest-priority candidate untimed: tuning would time several
    candidates per shape (tests/kernels runs every candidate)."""
    monkeypatch.setenv("CUBE_AUTOTUNE", "off")

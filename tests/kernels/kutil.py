"""Shared by the kernel tests: run one autotune candidate, skip where it cannot run."""
from contextlib import contextmanager

import numpy as np
import pytest

from autotune import NoCandidate


@contextmanager
def candidate(tunable, name, monkeypatch):
    monkeypatch.setenv("CUBE_AUTOTUNE", "off")
    with tunable.only(name):
        try:
            yield
        except NoCandidate:
            pytest.skip(f"{tunable.op} candidate {name} cannot run this case")


def need(rt, dtype):
    if np.dtype(dtype) == np.float64 and not rt.features.f64:
        pytest.skip(f"{rt.name} has no f64")


def names(tunable):
    return [c.name for c in tunable.candidates]

"""Shared by the Python-style tests: kernels from source text in real temporary modules (so the
frontend reads real files), launching on a runtime, and comparing with the oracle."""
from __future__ import annotations

import atexit
import importlib.util
import itertools
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

import cube as cb
from cube.simulate import Lines, simulate

_DIR = Path(tempfile.mkdtemp(prefix="cube-pystyle-"))
atexit.register(shutil.rmtree, _DIR, True)
_COUNTER = itertools.count()

HEADER = """\
import cube as cb
import cube.lang as L
from cube import (cube, Array, Tensor, Line, Comptime, f32, f64, i32, i64, u32, u8,
                  ABSOLUTE_POS, UNIT_POS, UNIT_POS_X, UNIT_POS_PLANE, CUBE_POS_X, CUBE_POS_Y)
"""


def load_module(src: str, tag: str = "k"):
    """`src` written to a fresh .py file and imported (registered in sys.modules)."""
    name = f"cube_pystyle_{tag}_{next(_COUNTER)}"
    path = _DIR / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def launch(rt, kernel, cube_count, cube_dim, **args) -> dict:
    """Launch on `rt` with NumPy inputs (Lines for line arguments); returns the arrays after
    the launch (only the array arguments)."""
    bufs, out = {}, {}
    for k, v in args.items():
        if isinstance(v, Lines):
            bufs[k] = rt.from_numpy(v.array).lines(v.n)
        elif isinstance(v, np.ndarray):
            bufs[k] = rt.from_numpy(v)
        else:
            bufs[k] = v
    kernel.launch(rt, cube_count=cube_count, cube_dim=cube_dim, **bufs)
    for k, v in args.items():
        if isinstance(v, (Lines, np.ndarray)):
            shape = (v.array if isinstance(v, Lines) else v).shape
            out[k] = bufs[k].numpy().reshape(shape)
    return out


def copy_args(args: dict) -> dict:
    """Launch arguments with their arrays (and Lines) copied, scalars as they are."""
    out = {}
    for k, v in args.items():
        if isinstance(v, Lines):
            out[k] = Lines(v.array.copy(), v.n)
        elif isinstance(v, np.ndarray):
            out[k] = v.copy()
        else:
            out[k] = v
    return out


def oracle(kernel, cube_count, cube_dim, plane_dim=1, **args) -> dict:
    """The same launch under cube.simulate, on copies of the arrays."""
    copies = copy_args(args)
    simulate(kernel, cube_count, cube_dim, plane_dim=plane_dim, **copies)
    return {k: (v.array if isinstance(v, Lines) else v) for k, v in copies.items()
            if isinstance(v, (Lines, np.ndarray))}


def differences(got, want, rtol: float = 1e-4, show: int = 6) -> str | None:
    """None where got matches want: ints exactly, floats to `rtol` relative to the magnitude
    (at least 1), NaN == NaN; else what differs, with a sample."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    if want.dtype.kind == "f":
        g, w = got.astype(np.float64), want.astype(np.float64)
        same = (g == w) | (np.isnan(g) & np.isnan(w))
        close = np.abs(g - w) <= rtol * np.maximum(1.0, np.abs(w))
        bad = ~(same | close)
    else:
        bad = got != want
    if not bad.any():
        return None
    idx = np.flatnonzero(bad.reshape(-1))
    g, w = got.reshape(-1), want.reshape(-1)
    sample = ", ".join(f"[{j}] got {g[j]!r} want {w[j]!r}" for j in idx[:show])
    return f"{idx.size} of {bad.size} elements differ: {sample}"


def assert_close(got: np.ndarray, want: np.ndarray, what: str, rtol: float = 1e-4) -> None:
    """`differences` as an assertion."""
    msg = differences(got, want, rtol)
    if msg is not None:
        raise AssertionError(f"{what}: {msg}")


def check_against_oracle(rt, kernel, cube_count, cube_dim, src: str = "", rtol=1e-4, **args):
    want = oracle(kernel, cube_count, cube_dim, plane_dim=rt.plane_size, **args)
    got = launch(rt, kernel, cube_count, cube_dim, **args)
    for k in want:
        assert_close(got[k], want[k], f"{rt.name}: '{k}' differs from the oracle\n{src}",
                     rtol=rtol)
    return got, want


__all__ = ["HEADER", "assert_close", "check_against_oracle", "cb", "launch", "load_module",
           "oracle"]

"""The `cube` command: dump, targets, cache; CUBE_DUMP writes every stage."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def cube_cmd(*args, env=None):
    return subprocess.run([sys.executable, "-m", "cube.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, **(env or {})}, timeout=120)


def test_dump_ir_and_llvm():
    r = cube_cmd("dump", "examples/gelu.py:gelu_kernel", "--target", "ir", "--line-size",
                 "inp=4", "--line-size", "out=4")
    assert r.returncode == 0, r.stderr
    assert "kernel gelu_kernel(inp: array<Line[f32, 4]>" in r.stdout and "erf" in r.stdout
    r = cube_cmd("dump", "examples/gelu.py:gelu_kernel", "--target", "llvm", "--line-size",
                 "inp=4", "--line-size", "out=4")
    assert r.returncode == 0, r.stderr
    assert "<4 x float>" in r.stdout and "define" in r.stdout


def test_dump_comptime_and_types(tmp_path):
    src = tmp_path / "k.py"
    src.write_text(
        "import typing\nfrom cube import cube, Array, Comptime, ABSOLUTE_POS\n"
        "F = typing.TypeVar('F')\n"
        "@cube(launch=True)\n"
        "def scale(x: Array[F], out: Array[F], K: Comptime[int]):\n"
        "    i = ABSOLUTE_POS\n"
        "    if i < out.len():\n"
        "        out[i] = x[i] * K\n")
    r = cube_cmd("dump", f"{src}:scale", "--type", "F=f16", "--comptime", "K=3")
    assert r.returncode == 0, r.stderr
    assert "array<f16>" in r.stdout and "3.0:f16" in r.stdout


def test_dump_errors_are_located(tmp_path):
    src = tmp_path / "bad.py"
    src.write_text("from cube import cube, Array, f32\n@cube(launch=True)\n"
                   "def k(x: Array[f32]):\n    x[0] = nope\n")
    r = cube_cmd("dump", f"{src}:k")
    assert r.returncode == 1
    assert f"{src}:4:12: error: unknown name 'nope'" in r.stderr
    assert "Traceback" not in r.stderr
    r = cube_cmd("dump", f"{src}:missing")
    assert r.returncode == 1 and "has no @cube function 'missing'" in r.stderr


def test_dump_option_mistakes_are_errors_not_tracebacks(tmp_path):
    """A misspelt comptime or line-size name was ignored (the dump showed another
    specialisation than the one asked for); `--cube-dim abc` was a ValueError traceback."""
    src = tmp_path / "k.py"
    src.write_text(
        "from cube import cube, Array, Comptime, ABSOLUTE_POS, f32\n"
        "@cube(launch=True)\n"
        "def scale(x: Array[f32], out: Array[f32], K: Comptime[int]):\n"
        "    i = ABSOLUTE_POS\n"
        "    if i < out.len():\n"
        "        out[i] = x[i] * K\n")
    for args, msg in [
        (["--comptime", "K=2", "--comptime", "k=3"], "scale has no comptime parameter 'k'"),
        (["--comptime", "K=2", "--line-size", "outt=4"], "no array/tensor parameter 'outt'"),
        (["--comptime", "K=2", "--cube-dim", "abc"], "--cube-dim takes positive integers"),
        (["--comptime", "K=2", "--cube-dim", "0,4"], "--cube-dim takes positive integers"),
        (["--comptime", "K=2", "--plane-size", "3"], "--plane-size must be a power of two"),
        (["--comptime", "K=2", "--line-size", "x=four"], "--line-size takes positive"),
        (["--comptime", "K=2", "--rank", "x=3"], "scale has no tensor parameter 'x'"),
    ]:
        r = cube_cmd("dump", f"{src}:scale", *args)
        assert r.returncode == 1 and msg in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr
    r = cube_cmd("dump", f"{src}:scale", "--comptime", "K=2", "--cube-dim", "64")
    assert r.returncode == 0, r.stderr


def test_dump_a_module_of_a_package(tmp_path):
    """A kernel in a package file (relative imports, as the library's own) dumps by path."""
    r = cube_cmd("dump", "dl/kernels/softmax.py:softmax_row", "--comptime", "LOG=False",
                 "--type", "F=f32", "--line-size", "x=8", "--line-size", "out=8",
                 "--cube-dim", "1")
    assert r.returncode == 0, r.stderr
    assert "kernel softmax_row(" in r.stdout
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text("SCALE = 3\n")
    (pkg / "k.py").write_text(
        "from cube import cube, Array, f32, ABSOLUTE_POS\nfrom .helpers import SCALE\n"
        "@cube(launch=True)\ndef k(x: Array[f32]):\n    x[ABSOLUTE_POS] = x[0] * SCALE\n")
    r = cube_cmd("dump", f"{pkg / 'k.py'}:k")
    assert r.returncode == 0, r.stderr
    assert "3.0:f32" in r.stdout or "3:f32" in r.stdout, r.stdout


def test_dump_of_a_module_that_fails_to_import(tmp_path):
    src = tmp_path / "broken.py"
    src.write_text("import os\nraise ValueError('boom')\n")
    r = cube_cmd("dump", f"{src}:k")
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert "ValueError: boom" in r.stderr and f"{src}:2" in r.stderr, r.stderr


def test_targets_lists_every_runtime():
    r = cube_cmd("targets")
    assert r.returncode == 0, r.stderr
    for name in ("cpu", "interp", "cuda", "hip", "metal", "opencl", "wgpu"):
        assert any(line.startswith(name) for line in r.stdout.splitlines()), r.stdout
    assert "available" in r.stdout


def test_cache_info_and_clear(tmp_path):
    env = {"CUBE_CACHE_DIR": str(tmp_path / "c")}
    code = ("import numpy as np, cube as cb, sys; sys.path.insert(0, 'examples');"
            "import vector_add; vector_add.run(cb.runtime('cpu'), 1024)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, **env},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    info = cube_cmd("cache", "info", env=env)
    assert "entries: 1" in info.stdout, info.stdout
    clear = cube_cmd("cache", "clear", env=env)
    assert "removed 1" in clear.stdout
    assert "entries: 0" in cube_cmd("cache", "info", env=env).stdout


def test_cube_dump_env_writes_stages(tmp_path):
    code = ("import sys; sys.path.insert(0, 'examples'); import cube as cb, vector_add;"
            "vector_add.run(cb.runtime('cpu'), 512)")
    env = {**os.environ, "CUBE_DUMP": str(tmp_path / "d"), "CUBE_CACHE_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    d = next((tmp_path / "d").iterdir())
    names = sorted(p.name for p in d.iterdir())
    assert names == ["0-frontend.ir", "1-optimised.ir", "2-target.txt"], names
    assert "define" in (d / "2-target.txt").read_text()
    assert np is not None

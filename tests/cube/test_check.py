"""`cube check`: the library through every installed tool; a broken kernel is a failure named
with the tool's error; a missing tool is `skipped`; a capability refusal is `n/a`."""
from __future__ import annotations

import dataclasses
import os
import textwrap

import pytest

from cube import cli
from cube.check import DEFAULT_TARGETS, tools
from cube.check.library import library_kernels
from cube.targets import TARGETS

USER_FILE = textwrap.dedent('''
    from typing import TypeVar

    import cube as cb
    from cube import ABSOLUTE_POS, Array, Comptime, cube, f16, f32, f64

    F = TypeVar("F")


    @cube(launch=True)
    def scale(x: Array[F], out: Array[F], k: F):
        out[ABSOLUTE_POS] = x[ABSOLUTE_POS] * k


    @cube(launch=True)
    def block_sum(x: Array[f32], out: Array[f32], BLOCK: Comptime[int]):
        s = cb.SharedMemory(f32, BLOCK)
        s[cb.UNIT_POS] = x[ABSOLUTE_POS]
        cb.sync_cube()
        if cb.UNIT_POS == 0:
            acc = f32(0)
            for i in range(BLOCK):
                acc += s[i]
            out[cb.CUBE_POS] = acc


    @cube(launch=True)
    def double(x: Array[f64]):
        x[ABSOLUTE_POS] = x[ABSOLUTE_POS] * 2.0


    CUBE_CHECK = {
        scale: [dict(type={"F": f32}), dict(type={"F": f16}, line_size={"x": 4, "out": 4})],
        "block_sum": [dict(comptime={"BLOCK": 256})],
    }
''')


@pytest.fixture
def user_file(tmp_path):
    p = tmp_path / "user_kernels.py"
    p.write_text(USER_FILE)
    return str(p)


def _installed(target: str) -> bool:
    return tools.tools()[target].missing() is None


def _row(out: str, label: str) -> str:
    rows = [ln for ln in out.splitlines() if ln.startswith(label + " ")]
    assert rows, f"no row for {label} in:\n{out}"
    return rows[0]


def _cells(out: str, label: str, targets: list[str]) -> dict[str, str]:
    """The table's cells of one row, by target (split at the header's column starts)."""
    header = out.splitlines()[0]
    starts = [header.index(f"  {t}") + 2 for t in targets]
    row = _row(out, label).ljust(len(header) + 40)
    ends = starts[1:] + [len(row)]
    return {t: row[s:e].strip() for t, s, e in zip(targets, starts, ends)}


# CI's scripts/test.sh runs `cube check --library` for every target (nvcc and hipcc take
# most of its minute); here the quick validators check what the library run lists, and
# CUBE_CHECK_ALL=1 asks for every target again
LIBRARY_TARGETS = list(DEFAULT_TARGETS) if os.environ.get("CUBE_CHECK_ALL") else \
    ["msl", "spirv", "wgsl"]


def test_library_passes_every_installed_tool(capsys):
    rc = cli.main(["check", "--library", "--targets", ",".join(LIBRARY_TARGETS)])
    out = capsys.readouterr().out
    assert rc == 0, out[-8000:]
    for name in library_kernels():  # every kernel of dl/kernels, specialised
        assert f"\n{name.rsplit('.', 1)[1]}(" in out or f"\n{name.rsplit('.', 1)[1]}[" in out, \
            name
    assert "dl_fused[" in out and "dl_fused_reduce[" in out  # what the fusion engine built
    summary = next(ln for ln in out.splitlines() if " kernels; " in ln)
    for t in LIBRARY_TARGETS:
        if _installed(t):
            assert f"{t}: " in summary and " ok" in summary.split(f"{t}: ")[1].split(";")[0]
        else:
            assert f"{t}: " in summary and "skipped" in summary.split(f"{t}: ")[1]
    assert "did not launch" not in out


def _break(monkeypatch, target: str, kernel: str, junk: str) -> None:
    """The target's generator writes `junk` into the body of `kernel` (the others stay
    intact: they share the batch and must still pass)."""
    info = TARGETS[target]

    def generate(k):
        text = info.generate(k)
        if kernel in k.name:
            head, sep, tail = text.rpartition("}")
            text = head + junk + "\n" + sep + tail
        return text
    monkeypatch.setitem(TARGETS, target, dataclasses.replace(info, generate=generate))


@pytest.mark.parametrize("target", ["msl", "cuda", "wgsl"])
def test_a_broken_kernel_fails_with_the_tools_error(monkeypatch, capsys, user_file, target):
    if not _installed(target):
        pytest.skip(f"{target}: {tools.tools()[target].missing()}")
    junk = "let v: f32 = 1u;" if target == "wgsl" else "int cube_broken = undeclared_x;"
    _break(monkeypatch, target, "block_sum", junk)
    rc = cli.main(["check", user_file, "--targets", target])
    out = capsys.readouterr().out
    assert rc == 1, out
    assert _cells(out, "block_sum[BLOCK=256]", [target])[target].startswith("FAIL")
    assert _cells(out, "scale[F=f32]", [target])[target] == "ok"  # same batch, not blamed
    detail = out.split(f"{target}: block_sum[BLOCK=256]: FAIL", 1)[1]
    assert ("undeclared_x" if target != "wgsl" else "f32") in detail  # the tool's message


def test_validators_reject_invalid_source(tmp_path):
    """Straight through the tool runners: invalid input fails, pinned on its label."""
    if _installed("spirv"):
        run = tools.spirv([("junk", b"\x03\x02\x23\x07" + b"\0" * 16)], "vulkan1.1", tmp_path)
        assert not run.ok and "junk" in run.failed
    if _installed("wgsl"):
        run = tools.wgsl([("bad", "@compute @workgroup_size(1) fn main() { let x: f32 = 1u; }"),
                          ("good", "@compute @workgroup_size(1) fn main() { }")], "naga",
                         tmp_path)
        assert not run.ok and list(run.failed) == ["bad"]
    if _installed("opencl"):
        run = tools.opencl([("bad", "__kernel void k(__global float* x) { x[0] = nope; }")],
                           "CL3.0", tmp_path)
        assert not run.ok and "nope" in run.failed["bad"]


def test_a_missing_tool_is_skipped(monkeypatch, capsys, user_file):
    real = tools.find_tool
    monkeypatch.setattr(tools, "find_tool", lambda n: None if n == "nvcc" else real(n))
    rc = cli.main(["check", user_file, "--targets", "cuda"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert _cells(out, "scale[F=f32]", ["cuda"])["cuda"] == "skipped (nvcc not found)"


def test_a_capability_refusal_is_not_applicable(capsys, user_file):
    targets = [t for t in ("msl", "wgsl", "spirv") if _installed(t)]
    if not targets:
        pytest.skip("no tool for msl, wgsl or spirv")
    rc = cli.main(["check", user_file, "--targets", ",".join(targets), "--verbose"])
    out = capsys.readouterr().out
    assert rc == 0, out
    cells = _cells(out, "double", targets)
    assert all(c == "n/a: f64" for c in cells.values()), cells
    assert all(c == "ok" for c in _cells(out, "block_sum[BLOCK=256]", targets).values())
    assert "f64 is not supported by the" in out  # --verbose says why


def test_a_kernel_that_cannot_be_specialised_is_an_error(capsys, tmp_path):
    if not _installed("wgsl"):
        pytest.skip(f"wgsl: {tools.tools()['wgsl'].missing()}")
    p = tmp_path / "needs_spec.py"
    p.write_text(textwrap.dedent('''
        from cube import ABSOLUTE_POS, Array, Comptime, cube, f32

        @cube(launch=True)
        def rep(x: Array[f32], N: Comptime[int]):
            x[ABSOLUTE_POS] = x[ABSOLUTE_POS] * N
    '''))
    rc = cli.main(["check", str(p), "--targets", "wgsl"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "comptime parameter 'N'" in out and "CUBE_CHECK" in out


def test_unknown_target_and_no_source(capsys, user_file):
    assert cli.main(["check", user_file, "--targets", "vulkan"]) == 1
    assert "unknown target 'vulkan'" in capsys.readouterr().err
    assert cli.main(["check"]) == 1
    assert "--library" in capsys.readouterr().err


def test_a_device_without_f16_skips_f16_wgsl(monkeypatch, capsys, user_file):
    """WGSL's f16 needs the adapter's shader-f16: without it those kernels are skipped (not
    validated), the others still go through naga."""
    if not _installed("wgsl"):
        pytest.skip(f"wgsl: {tools.tools()['wgsl'].missing()}")
    device, _, _ = tools.wgpu_device()
    monkeypatch.setattr(tools, "wgpu_device", lambda: (device, False, None))
    rc = cli.main(["check", user_file, "--targets", "wgsl"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert _cells(out, "scale[F=f16,x:4,out:4]", ["wgsl"])["wgsl"] == \
        "skipped (the wgpu adapter lacks shader-f16)"
    assert _cells(out, "scale[F=f32]", ["wgsl"])["wgsl"] == "ok"


def test_a_tool_that_fails_on_everything_is_one_verdict(monkeypatch, capsys, user_file):
    """A tool failing whatever it is given (here: clang++ without the shim's directory)
    fails every kernel once, without running per kernel; the exit status is 1."""
    if not _installed("msl"):
        pytest.skip(f"msl: {tools.tools()['msl'].missing()}")
    monkeypatch.setattr(tools, "SHIM", tools.SHIM.parent / "no_such_dir")
    calls = []
    real = tools.run_all
    monkeypatch.setattr(tools, "run_all", lambda cmds, *a, **k: calls.append(cmds) or
                        real(cmds, *a, **k))
    rc = cli.main(["check", user_file, "--targets", "msl"])
    out = capsys.readouterr().out
    assert rc == 1
    assert _cells(out, "scale[F=f32]", ["msl"])["msl"] == "FAIL"
    assert "metal_stdlib" in out  # clang's error: the header is not found
    assert len(calls) == 3  # the batch, then the first and the last kernel alone

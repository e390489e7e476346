"""Kernel caches: the memory hit path, the disk cache across processes, corrupt entries,
concurrent processes sharing one directory."""
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import cube as cb
from cube import ABSOLUTE_POS, Array, Comptime, cube, f32
from runtimes.disk_cache import DiskCache, make_key


@cube(launch=True)
def add_one(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = x[i] + 1.0


def test_memory_hit_does_no_work(rt, monkeypatch):
    x = rt.from_numpy(np.arange(8, dtype=np.float32))
    out = rt.empty_like(x)
    add_one.launch(rt, cube_count=1, cube_dim=8, x=x, out=out)
    before = add_one.compiles
    import cube.frontend.translator as tr_mod
    import cube_ir.printer as printer

    def boom(*a, **k):
        raise AssertionError("a cache hit must not parse, print or hash")
    monkeypatch.setattr(tr_mod.Translator, "translate", boom)
    monkeypatch.setattr(printer, "format_kernel", boom)
    monkeypatch.setattr(add_one, "source_info", boom)
    for _ in range(3):
        add_one.launch(rt, cube_count=1, cube_dim=8, x=x, out=out)
    assert add_one.compiles == before
    np.testing.assert_array_equal(out.numpy(), np.arange(8) + 1)


def test_new_signature_compiles_again(rt):
    x32 = rt.from_numpy(np.zeros(4, np.float32))
    add_one.launch(rt, cube_count=1, cube_dim=4, x=x32, out=rt.empty_like(x32))
    n = add_one.compiles
    add_one.launch(rt, cube_count=1, cube_dim=4, x=x32, out=rt.empty_like(x32))
    assert add_one.compiles == n
    with pytest.raises(cb.LaunchError):
        add_one.launch(rt, cube_count=1, cube_dim=4, x=rt.from_numpy(np.zeros(4)), out=x32)


@cube(launch=True)
def add_k(x: Array[f32], out: Array[f32], K: Comptime[int]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = x[i] + f32(K)


def test_specialisations_kept_in_memory_are_bounded(rt, monkeypatch):
    """A kernel launched with ever new comptime values (a pool's output size per image
    size) keeps at most MAX_SPECIALISATIONS of them in memory, each launch still right,
    and a dropped one is rebuilt when launched again (before: every one kept for good)."""
    import cube.kernel as kernel_mod
    monkeypatch.setattr(kernel_mod, "MAX_SPECIALISATIONS", 4)
    x = rt.from_numpy(np.arange(8, dtype=np.float32))
    out = rt.empty_like(x)
    for k in [*range(11), 0, 3]:
        add_k.launch(rt, cube_count=1, cube_dim=8, x=x, out=out, K=k)
        np.testing.assert_array_equal(out.numpy(), np.arange(8) + k)
        assert len(add_k._hot) <= 4 and len(add_k._fast) <= 4


def test_disk_cache_roundtrip_and_corruption(tmp_path):
    c = DiskCache(tmp_path / "c")
    key = make_key("kernel", "device")
    assert c.get(key) is None
    c.put(key, {"obj": b"\x7fELF...", "source.ll": b"define void"})
    assert c.get(key) == {"obj": b"\x7fELF...", "source.ll": b"define void"}
    mode = stat.S_IMODE(os.stat(tmp_path / "c").st_mode)
    assert mode == 0o700
    # truncate a file: the entry is ignored, then replaced by the next put
    (c.path(key) / "obj").write_bytes(b"\x7f")
    assert c.get(key) is None
    c.put(key, {"obj": b"good"})
    assert c.get(key) == {"obj": b"good"}
    # a foreign manifest (another version) is ignored
    m = c.path(key) / "manifest.json"
    m.write_text(m.read_text().replace('"version": "', '"version": "x'))
    assert c.get(key) is None
    assert c.info()["entries"] == 1
    assert c.clear() == 1 and c.info()["entries"] == 0


SCRIPT = textwrap.dedent("""
    import sys, time, numpy as np
    sys.path.insert(0, {examples!r})
    import cube as cb
    from gelu import gelu_kernel, reference
    rt = cb.runtime({rt!r})
    x = np.linspace(-3, 3, 4096).astype(np.float32)
    dx = rt.from_numpy(x); dy = rt.empty_like(dx)
    t = time.perf_counter()
    gelu_kernel.launch(rt, cube_count=4, cube_dim=256, inp=dx.lines(4), out=dy.lines(4))
    dt = time.perf_counter() - t
    assert np.max(np.abs(dy.numpy() - reference(x))) < 1e-5
    print(dt)
""")


def _run(rt_name: str, cache: Path) -> float:
    examples = str(Path(__file__).resolve().parents[2] / "examples")
    env = {**os.environ, "CUBE_CACHE_DIR": str(cache)}
    r = subprocess.run([sys.executable, "-c", SCRIPT.format(examples=examples, rt=rt_name)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return float(r.stdout.strip())


def test_reload_from_disk_in_fresh_process(device_rt, tmp_path):
    cache = tmp_path / "cache"
    _run(device_rt.name, cache)
    entries = DiskCache(cache).info()["entries"]
    assert entries >= 1
    _run(device_rt.name, cache)  # loads, does not add entries
    assert DiskCache(cache).info()["entries"] == entries
    # corrupt every artefact: the next process rebuilds and still gets the right answer
    for f in (cache / "kernels").glob("*/*/*"):
        if f.name != "manifest.json":
            f.write_bytes(f.read_bytes()[: len(f.read_bytes()) // 2])
    _run(device_rt.name, cache)
    assert DiskCache(cache).info()["entries"] == entries


def test_concurrent_processes_share_cache(device_rt, tmp_path):
    cache = tmp_path / "shared"
    examples = str(Path(__file__).resolve().parents[2] / "examples")
    env = {**os.environ, "CUBE_CACHE_DIR": str(cache)}
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT.format(examples=examples,
                                                                   rt=device_rt.name)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    assert DiskCache(cache).info()["entries"] >= 1
    assert not list((cache / "kernels").glob("*/.tmp-*"))


def test_key_covers_the_code_generators(monkeypatch):
    """An edited generator (another size/mtime of one of its modules) never reuses the
    artefacts the old one wrote."""
    from runtimes import disk_cache
    before = disk_cache.make_key("kernel text", "cpu", "dev")
    assert disk_cache.make_key("kernel text", "cpu", "dev") == before
    monkeypatch.setattr(disk_cache, "_fingerprint", "another generator")
    assert disk_cache.make_key("kernel text", "cpu", "dev") != before

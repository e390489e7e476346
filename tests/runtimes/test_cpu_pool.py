"""The CPU runtime's thread pool: native workers (x86-64 Linux) publish-and-acknowledge
protocol under concurrent launches, workers asleep past their spin, and the Python queue
fallback (CUBE_CPU_POOL=python, other platforms)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llvmlite.binding")
import runtimes.cpu as cpu  # noqa: E402
from cube_ir.builder import Builder  # noqa: E402
from cube_ir.types import f32  # noqa: E402
from runtimes import cpu_pool  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RT = cpu.CpuRuntime()


def _scale_kernel():
    """out[i] = x[i] * 3 + i: every cube must run exactly once for the result to hold."""
    b = Builder("pool_scale")
    x, out = b.array("x", f32), b.array("out", f32)
    i = b.builtin("ABSOLUTE_POS")
    with b.if_(b.lt(i, b.len(out))):
        b.store(out, i, b.add(b.mul(b.emit_load(x, i), 3.0), b.cast(i, f32)))
    return b.finish()


def _check(exe, n: int, value: float) -> None:
    x = RT.from_numpy(np.full(n, value, np.float32))
    out = RT.empty(n)
    exe.launch(((n + 255) // 256, 1, 1), (256, 1, 1), [x, out])
    want = np.float32(value) * 3 + np.arange(n, dtype=np.float32)
    np.testing.assert_array_equal(out.numpy(), want)


@pytest.fixture
def exe(monkeypatch):
    monkeypatch.setattr(cpu, "PARALLEL_SECONDS", 0.0)  # every launch of 2K+ units is pooled
    return RT.compile(_scale_kernel())


def test_pooled_launches_from_several_threads(exe):
    errors = []

    def work(k):
        try:
            for j in range(30):
                _check(exe, 50_000 + 997 * k + j, float(k))
        except Exception as e:  # surfaced below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in ts), "a pooled launch never finished"
    assert not errors, errors[0]


def test_workers_asleep_past_their_spin_wake_for_the_next_job(exe):
    _check(exe, 100_000, 1.0)
    time.sleep(20 * cpu_pool.SPIN_SECONDS)  # every worker has gone to sleep
    t = time.perf_counter()
    _check(exe, 100_000, 2.0)
    assert time.perf_counter() - t < 5.0


def test_native_workers_where_they_can_run():
    p = cpu_pool.pool()
    _check(RT.compile(_scale_kernel()), 1 << 21, 0.5)  # big enough to start the pool
    assert p._started and p.ready(timeout=60)
    if sys.platform.startswith("linux") and os.uname().machine == "x86_64" \
            and os.environ.get("CUBE_CPU_POOL", "native") != "python" and p.size > 1:
        assert p._native is not None and len(p._native_threads) == p.size - 1


def test_python_queue_fallback():
    code = textwrap.dedent("""
        import numpy as np, runtimes.cpu as cpu
        from runtimes import cpu_pool
        cpu.PARALLEL_SECONDS = 0.0
        import sys; sys.path.insert(0, {here!r})
        from test_cpu_pool import RT, _scale_kernel, _check
        exe = RT.compile(_scale_kernel())
        for k in range(20):
            _check(exe, 60_000 + k, float(k))
        p = cpu_pool.pool()
        assert p.ready(timeout=60)
        _check(exe, 60_000, 1.0)
        assert p._native is None and p._threads
        print("ok")
    """).format(here=str(Path(__file__).parent))
    env = {**os.environ, "CUBE_CPU_POOL": "python", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr

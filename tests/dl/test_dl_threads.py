"""dl from several threads at once: each thread's ops, dispatch plans, tuning and captures
are its own. With one process-wide recording, four threads of eager ops raised
CaptureErrors ("reading a tensor on the host during capture": another thread's plan trace
was active) and left a dead trace recording every later launch of the process; and a trace's
patched allocator outlived it when traces of two threads interleaved."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import cube as cb
import dl
import dl.nn.functional as F
from cube import Array, f32, recording
from dl.kernels import plan


def _softmax64(z):
    z = np.exp(z - z.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


def _in_threads(work, n=4):
    """work(i) in n threads at once; the exceptions they raised."""
    errors: list = []
    start = threading.Barrier(n)

    def run(i):
        try:
            start.wait()
            work(i)
        except Exception as e:  # surfaced by the caller
            errors.append(e)
    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return errors


def _assert_nothing_left(rt):
    assert recording.active is None and recording.current() is None
    assert "empty" not in rt.__dict__  # no tracing call's allocator left on the runtime


@pytest.mark.parametrize("tuning", ["off", "fast"])
def test_eager_ops_in_four_threads_match_numpy(tuning, monkeypatch):
    """Shapes change every few calls, so plans are traced and (with tuning) candidates
    timed in every thread while the others run."""
    monkeypatch.setenv("CUBE_AUTOTUNE", tuning)
    wrong: list = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for i in range(60):
            n = int(rng.integers(2, 12))
            a = rng.standard_normal((n, 7)).astype(np.float32)
            b = rng.standard_normal((7, 5)).astype(np.float32)
            x, w = dl.tensor(a, device="cpu"), dl.tensor(b, device="cpu")
            got = F.softmax(F.relu(x @ w) * 2 + 1, -1).numpy()
            want = _softmax64(np.maximum(a.astype(np.float64) @ b, 0) * 2 + 1)
            if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
                wrong.append((seed, i))
            s = (x[1:] * 3).sum(0).numpy()
            if not np.allclose(s, (a[1:].astype(np.float64) * 3).sum(0), rtol=1e-4,
                               atol=1e-4):
                wrong.append((seed, i, "sum"))
    assert _in_threads(work) == []
    assert wrong == []
    _assert_nothing_left(cb.runtime("cpu"))


def test_training_and_a_capture_beside_eager_threads():
    """One thread replays a captured training step, the others train eagerly: each model
    ends where a single-threaded run of its own steps ends, and the capture holds only its
    own launches."""
    def model_and_data(seed):
        rng = np.random.default_rng(seed)
        m = dl.nn.Sequential(dl.nn.Linear(6, 8), dl.nn.ReLU(), dl.nn.Linear(8, 3)).to("cpu")
        for p in m.parameters():
            p.data = dl.tensor(rng.standard_normal(p.shape).astype(np.float32) * 0.3,
                               device="cpu")
        x = dl.tensor(rng.standard_normal((16, 6)).astype(np.float32), device="cpu")
        y = dl.tensor(rng.integers(0, 3, 16), device="cpu")
        return m, x, y

    def train(seed, steps, capture):
        m, x, y = model_and_data(seed)
        opt = dl.optim.SGD(m.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss
        fn = dl.capture(step) if capture else step
        for _ in range(steps):
            fn(x, y)
        return [p.numpy().copy() for p in m.parameters()], fn

    alone = {s: train(s, 12, False)[0] for s in range(4)}
    results: dict = {}

    def work(i):
        results[i] = train(i, 12, capture=i == 0)
    assert _in_threads(work) == []
    for s in range(4):
        for got, want in zip(results[s][0], alone[s], strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    _, captured_alone = train(0, 4, True)
    assert results[0][1].launches == captured_alone.launches
    _assert_nothing_left(cb.runtime("cpu"))


def test_a_trace_holds_only_its_own_threads_launches():
    """While one thread traces, another thread's raw launches run unrecorded (a tuning
    timed by replaying its trace would otherwise have run them again)."""
    @cb.cube(launch=True)
    def bump(x: Array[f32]):
        x[0] += f32(1)

    rt = cb.runtime("cpu")
    mine, theirs = rt.from_numpy(np.zeros(1, np.float32)), rt.from_numpy(np.zeros(1, np.float32))
    inside, done = threading.Event(), threading.Event()

    def other():
        inside.wait()
        for _ in range(5):
            bump.launch(rt, cube_count=1, cube_dim=1, x=theirs)
        done.set()
    t = threading.Thread(target=other)
    t.start()
    with recording.trace() as tr:
        bump.launch(rt, cube_count=1, cube_dim=1, x=mine)
        inside.set()
        done.wait()
    t.join()
    assert len(tr.entries) == 1 and tr.entries[0][3][0] is mine
    tr.replay()
    assert mine.numpy()[0] == 2 and theirs.numpy()[0] == 5
    _assert_nothing_left(rt)


def test_plan_allocations_stay_with_their_thread():
    """Two threads trace plans on one runtime at once, finishing in either order: the
    runtime's allocator is its own again after both, and each plan replays correctly."""
    rt = cb.runtime("cpu")
    prev = plan.WARMUP
    plan.WARMUP = 0  # every first call of a key is traced

    def work(i):
        rng = np.random.default_rng(i)
        for k in range(30):
            a = rng.standard_normal((3 + i, 4 + k % 5)).astype(np.float32)
            x = dl.tensor(a, device="cpu")
            np.testing.assert_allclose(F.softmax(x, -1).numpy(), _softmax64(a.astype(
                np.float64)), rtol=1e-5, atol=1e-6)
    try:
        assert _in_threads(work) == []
    finally:
        plan.WARMUP = prev
    _assert_nothing_left(rt)


def test_count_kernels_counts_its_own_threads_launches():
    """`dl.count_kernels` in one thread while other threads run ops: the count is what this
    thread's block launched, the same as with no other thread running."""
    x = dl.tensor(np.ones((6, 5), np.float32), device="cpu")

    def block():
        with dl.count_kernels() as c:
            for _ in range(30):
                F.softmax(x * 2, -1).numpy()
                time.sleep(0.001)  # the other threads run meanwhile
        return c.launches, c.names

    alone = block()
    stop = threading.Event()
    running = threading.Barrier(3)

    def busy(i):
        y = dl.tensor(np.ones((3 + i, 4), np.float32), device="cpu")
        (y + 1).sum().numpy()
        running.wait()
        while not stop.is_set():
            (y + 1).sum().numpy()
    others = [threading.Thread(target=busy, args=(i,)) for i in range(2)]
    for t in others:
        t.start()
    running.wait()
    try:
        beside = block()
    finally:
        stop.set()
        for t in others:
            t.join()
    assert beside == alone

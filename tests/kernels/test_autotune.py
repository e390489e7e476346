"""autotune: keys, modes, the persistent per-device store, corrupt files, other processes."""
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import autotune
from autotune import Candidate, Tunable, TuneStore, bucket, tune_key

ROOT = Path(__file__).resolve().parents[2]


class FakeRt:
    name = "fake"

    def __init__(self, device="fake-device"):
        self.device = device

    def device_id(self):
        return self.device

    def sync(self):
        pass


def _op(store, calls, fast_name="quick"):
    """Three candidates: `slow` has the highest priority, `quick` is fastest, `never` is
    invalid; calls records what ran."""
    def make(name, seconds):
        def run(rt, x):
            calls.append(name)
            time.sleep(seconds)
        return run
    return Tunable("toy", [
        Candidate("slow", make("slow", 0.004), 30),
        Candidate("never", make("never", 0.0), 40, lambda rt, x: False),
        Candidate("medium", make("medium", 0.002), 20),
        Candidate(fast_name, make(fast_name, 0.0), 10),
    ], store=store, repeats=3)


def test_bucket_and_key():
    assert [bucket(n) for n in (0, 1, 2, 3, 5, 64, 65)] == [0, 1, 2, 4, 8, 64, 128]
    assert tune_key("mm", "f32", [(100, 120)]) == tune_key("mm", "f32", [(128, 97)])
    assert tune_key("mm", "f32", [(100, 120)]) != tune_key("mm", "f32", [(100, 129)])
    assert tune_key("mm", "f32", [(4,)]) != tune_key("mm", "f64", [(4,)])


def test_modes(tmp_path, monkeypatch):
    calls = []
    op = _op(TuneStore(tmp_path), calls)
    rt = FakeRt()
    monkeypatch.setenv("CUBE_AUTOTUNE", "off")
    assert op.choose(rt, "k", 1).name == "slow" and calls == []  # top valid priority, untimed
    monkeypatch.setenv("CUBE_AUTOTUNE", "fast")
    autotune.tunable.FAST_TOP, old = 2, autotune.tunable.FAST_TOP
    try:
        assert op.choose(rt, "k", 1).name == "medium"  # only the top two were timed
        assert "quick" not in calls and "never" not in calls
        calls.clear()
        assert op.choose(rt, "k", 1).name == "medium" and calls == []  # remembered
    finally:
        autotune.tunable.FAST_TOP = old
    monkeypatch.setenv("CUBE_AUTOTUNE", "full")
    assert op.choose(rt, "k", 1).name == "quick"  # full re-tunes a fast result, times all
    assert set(calls) == {"slow", "medium", "quick"}
    monkeypatch.setenv("CUBE_AUTOTUNE", "bogus")
    with pytest.raises(ValueError):
        op.choose(rt, "k", 1)


def test_store_persists_per_device(tmp_path, monkeypatch):
    monkeypatch.setenv("CUBE_AUTOTUNE", "full")
    calls = []
    _op(TuneStore(tmp_path), calls).choose(FakeRt(), "k", 1)
    files = list(tmp_path.glob("*.json"))
    assert len(files) == 1
    data = json.loads(files[0].read_text())
    assert data["device"] == "fake-device"
    assert data["entries"]["toy|k"]["winner"] == "quick"
    calls.clear()  # a fresh store (another process) reads the winner back
    assert _op(TuneStore(tmp_path), calls).choose(FakeRt(), "k", 1).name == "quick"
    assert calls == []
    _op(TuneStore(tmp_path), calls).choose(FakeRt("other"), "k", 1)  # another device tunes
    assert calls and len(list(tmp_path.glob("*.json"))) == 2


def test_corrupt_file_is_ignored_and_rewritten(tmp_path, monkeypatch):
    monkeypatch.setenv("CUBE_AUTOTUNE", "fast")
    store = TuneStore(tmp_path)
    path = store.path("fake-device")
    path.write_text("{not json")
    calls = []
    assert _op(store, calls).choose(FakeRt(), "k", 1).name in ("slow", "medium", "quick")
    assert calls  # it tuned
    data = json.loads(path.read_text())
    assert "toy|k" in data["entries"]


def test_progress_on_stderr_when_slow(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CUBE_AUTOTUNE", "full")
    monkeypatch.setattr(autotune.tunable, "PROGRESS_AFTER_S", 0.0)
    _op(TuneStore(tmp_path), []).choose(FakeRt(), "k", 1)
    assert "cube autotune toy|k" in capsys.readouterr().err


def test_failing_candidate_is_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv("CUBE_AUTOTUNE", "full")

    def boom(rt, x):
        raise RuntimeError("cannot build here")
    op = Tunable("toy2", [Candidate("boom", boom, 10), Candidate("ok", lambda rt, x: None, 1)],
                 store=TuneStore(tmp_path))
    assert op.choose(FakeRt(), "k", 1).name == "ok"


SCRIPT = textwrap.dedent("""
    import numpy as np, cube as cb
    from dl.kernels import reduce as R
    rt = cb.runtime("cpu")
    x = rt.from_numpy(np.arange(3000, dtype=np.float32).reshape(3, 1000))
    got = R.reduce(rt, x, 1, "sum").numpy()
    assert np.allclose(got, np.arange(3000.).reshape(3, 1000).sum(1))
    print(R.REDUCE.tunings)
""")


def test_winner_reused_by_a_later_process(tmp_path):
    env = {**os.environ, "CUBE_CACHE_DIR": str(tmp_path), "CUBE_AUTOTUNE": "fast",
           "PYTHONPATH": str(ROOT)}

    def run():
        r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return int(r.stdout.split()[-1])
    assert run() == 1  # the first process times the candidates
    files = list((tmp_path / "autotune").glob("*.json"))
    assert len(files) == 1 and "reduce|" in files[0].read_text()
    assert run() == 0  # the second reads the winner from disk
    files[0].write_text("garbage")
    assert run() == 1  # a corrupt file: tuned again and rewritten
    assert json.loads(files[0].read_text())["entries"]


def test_preferred_candidate_ranks_first_for_its_arguments(tmp_path, monkeypatch):
    """A candidate made for one operand layout ranks first where `prefer` says so (so `off`
    takes it and `fast` times it), and keeps its priority elsewhere."""
    calls = []
    op = _op(TuneStore(tmp_path), calls)
    op.candidates.append(Candidate("layout", lambda rt, x: calls.append("layout"), 0,
                                   prefer=lambda rt, x: x == "transposed"))
    rt = FakeRt()
    monkeypatch.setenv("CUBE_AUTOTUNE", "off")
    assert op.choose(rt, "k1", "transposed").name == "layout"
    assert op.choose(rt, "k2", "plain").name == "slow"
    assert [c.name for c in op.valid_candidates(rt, "plain")][-1] == "layout"


def test_winner_is_stale_when_a_new_candidate_would_be_timed(tmp_path, monkeypatch):
    """A winner stored before a candidate was added (or raised in rank) did not race it: the
    key is tuned again, so an upgrade is not stuck with an old choice."""
    monkeypatch.setenv("CUBE_AUTOTUNE", "fast")
    calls = []
    store = TuneStore(tmp_path)
    assert _op(store, calls).choose(FakeRt(), "k", 1).name == "quick"
    calls.clear()
    assert _op(TuneStore(tmp_path), calls).choose(FakeRt(), "k", 1).name == "quick"
    assert calls == []  # same candidates: the stored winner stands
    op = _op(TuneStore(tmp_path), calls)
    op.candidates.insert(0, Candidate("newer", lambda rt, x: calls.append("newer"), 50))
    assert op.choose(FakeRt(), "k", 1).name in ("newer", "quick")
    assert "newer" in calls  # timed this time
    calls.clear()
    assert _op(TuneStore(tmp_path), calls).choose(FakeRt(), "k", 1).name == "quick"


def test_winner_is_stale_when_the_kernel_code_changed(tmp_path, monkeypatch):
    """A winner stored while the candidates' code (their package's source) was another is
    timed again: an edited kernel is not stuck with the choice made for the old one (before,
    only a new version string or a new candidate did that)."""
    monkeypatch.setenv("CUBE_AUTOTUNE", "fast")
    calls = []
    assert _op(TuneStore(tmp_path), calls).choose(FakeRt(), "k", 1).name == "quick"
    calls.clear()
    op = _op(TuneStore(tmp_path), calls)
    here = op.code()
    assert len(here) == 16 and op.choose(FakeRt(), "k", 1).name == "quick" and calls == []
    op = _op(TuneStore(tmp_path), calls)
    op._code = "edited-kernels"
    assert op.choose(FakeRt(), "k", 1).name == "quick" and "slow" in calls  # timed again
    calls.clear()
    op = _op(TuneStore(tmp_path), calls)
    op._code = "edited-kernels"
    assert op.choose(FakeRt(), "k", 1).name == "quick" and calls == []  # and stored
    from dl.kernels.matmul import MATMUL
    from dl.kernels.pool import POOL
    assert MATMUL.code() == POOL.code()  # one digest for the whole kernel library


@pytest.mark.parametrize("m, first3", [(32, ["tpacked_f0", "tpacked_f1", "tpacked_r0"]),
                                       (4, ["swapped_r0", "dot_r0", "dot_r1"])])
@pytest.mark.parametrize("isa", ["host", "avx2"])
def test_matmul_prefers_the_dot_kernel_for_a_transposed_b(monkeypatch, m, first3, isa):
    """nn.Linear's x @ W^T: B is K-contiguous, where the tiled kernels read it a scalar at a
    time; on the CPU the dot and B-packing kernels must rank first: with few rows of A
    the swapped kernel before the two dot tiles (B packed lost every few-row tuning), with
    many B packed into the shape's fitted tiles before the register file's first (the dot
    kernels lost every many-row tuning). A fitted tile that is the file's first is not
    offered twice. All give the same result, tested elsewhere."""
    import numpy as np

    import cube as cb
    from dl.kernels import matmul as mm
    from dl.kernels.view import transpose
    try:
        rt = cb.runtime("cpu", isa=isa)
    except cb.RuntimeUnavailable as e:
        pytest.skip(f"no {isa} model here: {e}")
    a = rt.from_numpy(np.ones((m, 32), np.float32))
    b = transpose(rt.from_numpy(np.ones((8, 32), np.float32)))
    a3, b3, c3, bias, act, _ = mm.prepare(rt, a, b, None, None, "none")
    fit = [mm.fitted_tile(rt, a3, b3, c3, r, "strided") for r in range(2)]
    assert mm.tiles_for(rt)[0] not in fit
    want = [n for n in first3 if not n.startswith("tpacked_f") or fit[int(n[-1])]]
    first = [c.name for c in mm.MATMUL.valid_candidates(rt, a3, b3, c3, bias, act)]
    assert first[:len(want)] == want


def test_matmul_ignores_the_stride_of_a_batch_of_one():
    """dl's views of 2-D tensors carry a batch stride of 1: it must not force lines of 1 (and
    rule out the dot kernel) when the batch has one entry."""
    import numpy as np

    import cube as cb
    from dl.kernels import matmul as mm
    from dl.kernels.view import strided
    rt = cb.runtime("cpu")
    a = rt.from_numpy(np.ones((64, 32), np.float32))
    w = rt.from_numpy(np.ones((8, 32), np.float32))
    a1 = strided(a, (1, 64, 32), (1, 32, 1))
    wt1 = strided(w, (1, 32, 8), (1, 1, 32))
    a3, b3, c3, bias, act, _ = mm.prepare(rt, a1, wt1, None, None, "none")
    assert a3.strides[0] == 0 and b3.strides[0] == 0
    assert mm._dot_line(rt, a3, b3, c3) > 1
    assert "dot_r0" in [c.name for c in mm.MATMUL.valid_candidates(rt, a3, b3, c3, bias, act)]


def test_candidates_are_timed_in_turns_so_a_slow_phase_hits_them_alike(tmp_path, monkeypatch):
    """A shared machine's slow phase (here: the first 8 runs take 5x as long) must not pick
    the slower kernel: timed one after the other, `fast`'s runs all fell in the phase and
    `steady` won; in turns, each candidate's fastest run is outside it."""
    monkeypatch.setenv("CUBE_AUTOTUNE", "full")
    clock, runs = [0.0], [0]

    def make(cost):
        def run(rt, x):
            runs[0] += 1
            clock[0] += cost * (5 if runs[0] <= 8 else 1)
        return run

    class FakeTime:
        @staticmethod
        def perf_counter():
            return clock[0]

    monkeypatch.setattr(autotune.tunable, "time", FakeTime)
    op = Tunable("phase", [Candidate("fast", make(1.0e-3), 20),
                           Candidate("steady", make(1.5e-3), 10)],
                 store=TuneStore(tmp_path), repeats=5)
    assert op.choose(FakeRt(), "k", 1).name == "fast"
    assert runs[0] == 2 + 2 * 5  # a warm-up each, then five rounds of both


@pytest.fixture
def spin_kernel():
    """A kernel whose one unit runs n dependent multiply-adds (n = 1: nothing to speak of)."""
    import cube as cb
    from cube import Array, f32, u32

    @cb.cube(launch=True)
    def spin(out: Array[f32], n: u32):
        acc = f32(1)
        for _ in range(n):
            acc = acc * f32(0.9999999) + f32(1)
        out[0] = acc
    return spin


def _spin_op(tmp_path, spin, slow_python, hook=False):
    """`python`: 30 ms of Python (and a hook, if asked) before a trivial launch; `kernel`:
    no Python to speak of, a launch of ~4M dependent multiply-adds (milliseconds)."""
    from cube import recording

    def python(rt, out):
        time.sleep(slow_python)
        if hook:
            recording.hook(lambda: None)
        spin.launch(rt, cube_count=1, cube_dim=1, out=out, n=1)

    def kernel(rt, out):
        spin.launch(rt, cube_count=1, cube_dim=1, out=out, n=1 << 22)
    return Tunable("spin", [Candidate("python", python, 20), Candidate("kernel", kernel, 10)],
                   store=TuneStore(tmp_path), repeats=3)


def test_candidates_are_timed_by_their_launches_not_their_python(tmp_path, monkeypatch,
                                                                 spin_kernel):
    """A plan replays an op's launches without the Python that chose them, so tuning times
    the launches: the candidate with 30 ms of Python before a trivial kernel wins over one
    whose kernel takes milliseconds (timed whole, the Python lost: an 8x8 softmax kept a
    kernel 6x slower, whose launcher was cheaper)."""
    import cube as cb
    monkeypatch.setenv("CUBE_AUTOTUNE", "full")
    rt = cb.runtime("cpu")
    out = rt.empty((1,), np.float32)
    op = _spin_op(tmp_path, spin_kernel, 0.03)
    assert op.choose(rt, "k", out).name == "python"
    times = op.store.get(rt.device_id(), "spin|k")["times_ms"]
    assert times["python"] < 10 and times["python"] < times["kernel"], times


def test_a_candidate_a_replay_cannot_repeat_is_timed_whole(tmp_path, monkeypatch, spin_kernel):
    """A hook (host state a replay would skip) makes the launches unrepeatable: the candidate
    is timed whole, its Python included, and the kernel-heavy candidate wins."""
    import cube as cb
    monkeypatch.setenv("CUBE_AUTOTUNE", "full")
    rt = cb.runtime("cpu")
    out = rt.empty((1,), np.float32)
    op = _spin_op(tmp_path, spin_kernel, 0.03, hook=True)
    assert op.choose(rt, "k", out).name == "kernel"
    assert op.store.get(rt.device_id(), "spin|k")["times_ms"]["python"] >= 30

"""dl.distributed and DistributedDataParallel across processes: each test is one `mpirun` launch
of tests/distributed/worker.py, which runs many checks and reports them as JSON per rank
(mpirun costs about a second a start). Skipped without mpirun or mpi4py."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("worker.py")
ROOT = Path(__file__).resolve().parents[2]


def needs_mpi(fn):
    fn = pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not found "
                            "(apt-get install openmpi-bin libopenmpi-dev)")(fn)
    return pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None,
                              reason="mpi4py not installed (pip install 'cube-lang[mpi]')")(fn)


def gpus() -> int:
    """CUDA GPUs CuPy sees (0 without CuPy or a GPU)."""
    if importlib.util.find_spec("cupy") is None:
        return 0
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no driver, no GPU
        return 0


def mpirun(n: int, suite: str, tmp_path, *args, timeout: float = 120,
           expect_ok: bool = True):
    """(per-rank results, completed process) of `mpirun -n n worker.py suite`."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", CUBE_AUTOTUNE="off",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", str(n),
           "-x", "PYTHONPATH", "-x", "CUBE_AUTOTUNE", sys.executable, str(WORKER), suite,
           str(tmp_path), *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if expect_ok:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = []
    for r in range(n):
        f = tmp_path / f"rank{r}.json"
        results.append(json.loads(f.read_text()) if f.exists() else None)
    return results, proc


def assert_all_ok(results):
    for r, res in enumerate(results):
        assert res is not None, f"rank {r} wrote no results"
        bad = {k: v for k, v in res["checks"].items() if v != "ok"}
        assert not bad, f"rank {r}: {len(bad)} of {len(res['checks'])} checks failed:\n" + \
            "\n".join(f"--- {k}\n{v}" for k, v in list(bad.items())[:5])


def _opencl() -> bool:
    try:
        import dl
        dl.device("opencl").rt  # noqa: B018 - starts the runtime or raises
        return True
    except Exception:  # noqa: BLE001 - any failure: leave opencl out
        return False


@needs_mpi
def test_collectives_two_ranks(tmp_path):
    """Every collective x float dtype (bf16/f16 included) x op, async, strided, on cpu and
    interp (and opencl where it starts), against NumPy; errors before init and in checked
    mode; the sampler."""
    devices = "cpu,interp" + (",opencl" if _opencl() else "")
    results, _ = mpirun(2, "collectives", tmp_path, devices)
    assert_all_ok(results)
    assert len(results[0]["checks"]) > 100


@needs_mpi
def test_collectives_and_ddp_three_ranks(tmp_path):
    """An odd world: uneven sampler splits, the collectives, DDP on thirds of the batch."""
    results, _ = mpirun(3, "collectives", tmp_path, "cpu", "float32,bfloat16")
    assert_all_ok(results)
    assert "ddp_world_n" in results[0]["checks"]


@needs_mpi
def test_ddp(tmp_path):
    """DDP over 2 ranks gives one process's Adam parameters on the whole batch (1e-5), with
    one bucket or several (their all-reduces start during backward), through dl.capture
    replays, with no_sync accumulation and unused parameters."""
    results, _ = mpirun(2, "ddp", tmp_path)
    assert_all_ok(results)
    ev = results[0]["events"]
    assert ev.index(["start", 0]) < max(i for i, e in enumerate(ev) if e[0] == "grad")


@needs_mpi
def test_hung_rank_times_out(tmp_path):
    """A rank that never joins: the other gives up after its timeout (2 s) and aborts the job
    instead of hanging."""
    t0 = time.monotonic()
    results, proc = mpirun(2, "timeout", tmp_path, timeout=60, expect_ok=False)
    assert proc.returncode != 0
    assert "timed out after 2 s" in proc.stderr, proc.stderr[-2000:]
    assert time.monotonic() - t0 < 40
    assert results[0] is None  # the all-reduce never returned


@needs_mpi
def test_dead_rank_ends_the_job(tmp_path):
    t0 = time.monotonic()
    _, proc = mpirun(2, "die", tmp_path, timeout=60, expect_ok=False)
    assert proc.returncode != 0
    assert time.monotonic() - t0 < 40


@needs_mpi
@pytest.mark.skipif(gpus() == 0, reason="no CUDA GPU (or CuPy) here")
def test_nccl(tmp_path):
    """The nccl backend under mpirun: one rank per GPU (a world of 1 on one GPU)."""
    results, _ = mpirun(min(gpus(), 2), "nccl", tmp_path, timeout=300)
    assert_all_ok(results)


@pytest.mark.skipif(gpus() == 0, reason="no CUDA GPU (or CuPy) here")
def test_nccl_one_process(tmp_path):
    """The nccl backend in a world of one started without mpirun (no MPI needed)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT),
                                                       os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(WORKER), "nccl", str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert_all_ok([json.loads((tmp_path / "rank0.json").read_text())])


def test_nccl_backend_imports_without_cupy():
    """The NCCL path compiles and imports where CuPy is absent; asking for it says why."""
    import dl.distributed as dist
    from dl.distributed import nccl_backend
    assert callable(nccl_backend.all_reduce)
    if importlib.util.find_spec("cupy") is None:
        assert not dist.is_nccl_available()
        with pytest.raises(RuntimeError, match="CuPy"):
            nccl_backend.nccl()


def test_collective_before_init_raises():
    import dl
    import dl.distributed as dist
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.all_reduce(dl.zeros(2))
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.get_rank()


# torch.utils.data.distributed.DistributedSampler(range(n), reps, r, shuffle=False,
# drop_last=drop) for r in range(reps), from torch 2.13 (importing torch here costs seconds)
TORCH_SHARES = {
    (10, 3, False): [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]],
    (10, 3, True): [[0, 3, 6], [1, 4, 7], [2, 5, 8]],
    (2, 3, False): [[0], [1], [0]],
    (12, 4, False): [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]],
}


def test_sampler_matches_torch():
    """Without shuffling, the shares are torch's (padding, drop_last, interleaving)."""
    from dl.distributed import DistributedSampler
    for (n, reps, drop), shares in TORCH_SHARES.items():
        ours = [list(DistributedSampler(range(n), reps, r, shuffle=False, drop_last=drop))
                for r in range(reps)]
        assert ours == shares, (n, reps, drop)
        s = DistributedSampler(range(n), reps, 0, drop_last=drop)
        assert len(s) == len(shares[0])

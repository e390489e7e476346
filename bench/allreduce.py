"""All-reduce bandwidth and data-parallel step time: dl.distributed (MPI) beside
torch.distributed (gloo), on this machine's processes.

    python bench/allreduce.py [--nproc 2] [--quick] [--write]

1. all_reduce (SUM, in place) of float32 tensors from 1 KB to 64 MB between `nproc`
   processes: ours under `mpirun -n nproc` on dl tensors (cpu runtime: MPI reads and writes
   the tensor's own memory), torch's started by torch.multiprocessing with the gloo backend
   (env:// on 127.0.0.1). Time per call is the mean of a timed loop (after warm-up calls and a
   barrier), best of 3 loops, on rank 0; bandwidth is size / time ("algbw" in nccl-tests'
   terms; their "busbw" is 2 (n - 1) / n times it).
2. A training step of bench/dl_layer.py's MLP (784-512-512-10, batch 64 per process, Adam;
   zero_grad, forward, loss, backward, step) on 1 process without a wrapper and on `nproc`
   processes under DistributedDataParallel; ours eager and replayed through dl.capture, torch
   eager. Median step time on rank 0.

Threads: each of k processes computes with cores / k threads (torch.set_num_threads; ours:
the cpu runtime's worker pool, sized from os.cpu_count, which the bench's worker sets before
dl starts), so the processes do not oversubscribe the cores (torch's default, every core in
every process, made its 2-process DDP step 40x slower on a 16-core machine);
`mpirun --bind-to none` as torch's spawned processes are unbound. `--write` puts the table in
bench/results/<cpu>-<cores>c-allreduce.md."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
SIZES = [1 << k for k in range(10, 27, 2)]  # 1 KB .. 64 MB
QUICK_SIZES = [1 << 10, 1 << 16, 1 << 20, 1 << 24]


def iters_for(nbytes: int, quick: bool) -> int:
    n = int(64e6 / max(nbytes, 1))
    return max(3, min(100 if quick else 300, n))


def time_loop(call, barrier, iters: int, warmup: int = 3, loops: int = 3) -> float:
    for _ in range(warmup):
        call()
    best = float("inf")
    for _ in range(loops):
        barrier()
        t = time.perf_counter()
        for _ in range(iters):
            call()
        best = min(best, (time.perf_counter() - t) / iters)
    return best


# ---- ours (run under mpirun) -------------------------------------------------------------

def mlp_ours(nn):
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def step_times(step, barrier, steps: int) -> float:
    for _ in range(5):
        step()
    barrier()
    ts = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def threads_per_process(world: int) -> int:
    return max(1, (os.cpu_count() or 1) // world)


def ours_worker(what: str, out: str, quick: bool) -> None:
    sys.path.insert(0, str(ROOT))
    share = threads_per_process(int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1")))
    os.cpu_count = lambda: share  # the cpu runtime's pool size (read when dl starts it)
    import dl
    import dl.distributed as dist
    from dl import nn
    from dl.nn.parallel import DistributedDataParallel
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    res: dict = {}
    if what == "allreduce":
        for nbytes in (QUICK_SIZES if quick else SIZES):
            t = dl.zeros(nbytes // 4)
            res[nbytes] = time_loop(lambda t=t: dist.all_reduce(t), dist.barrier,
                                    iters_for(nbytes, quick))
    else:
        dl.manual_seed(0)
        model = mlp_ours(nn)
        if world > 1:
            model = DistributedDataParallel(model)
        rng = np.random.default_rng(rank)
        x = dl.tensor(rng.standard_normal((64, 784)).astype(np.float32))
        y = dl.tensor(rng.integers(0, 10, 64))
        opt = dl.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = nn.CrossEntropyLoss()

        def step():
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss
        steps = 10 if quick else 40
        res["eager"] = step_times(lambda: step().item(), dist.barrier, steps)
        captured = dl.capture(step)
        res["captured"] = step_times(lambda: captured().item(), dist.barrier, steps)
    if rank == 0:
        Path(out).write_text(json.dumps(res))
    dist.destroy_process_group()


def run_ours(what: str, nproc: int, quick: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-n", str(nproc),
               "-x", "PYTHONPATH", sys.executable, str(HERE), "--role", f"ours-{what}",
               "--out", out] + (["--quick"] if quick else [])
        subprocess.run(cmd, env=env, check=True, timeout=1800)
        return {k: v for k, v in json.loads(Path(out).read_text()).items()}


# ---- torch (gloo, spawned processes) -------------------------------------------------------

def _torch_proc(rank: int, world: int, port: int, what: str, out: str, quick: bool) -> None:
    import torch
    import torch.distributed as tdist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(threads_per_process(world))
    tdist.init_process_group("gloo", rank=rank, world_size=world)
    res: dict = {}
    if what == "allreduce":
        for nbytes in (QUICK_SIZES if quick else SIZES):
            t = torch.zeros(nbytes // 4)
            res[nbytes] = time_loop(lambda t=t: tdist.all_reduce(t), tdist.barrier,
                                    iters_for(nbytes, quick))
    else:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 10))
        if world > 1:
            model = torch.nn.parallel.DistributedDataParallel(model)
        g = torch.Generator().manual_seed(rank)
        x, y = torch.randn(64, 784, generator=g), torch.randint(0, 10, (64,), generator=g)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = torch.nn.CrossEntropyLoss()

        def step():
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss.item()
        res["eager"] = step_times(step, tdist.barrier, 10 if quick else 40)
    if rank == 0:
        Path(out).write_text(json.dumps(res))
    tdist.destroy_process_group()


def run_torch(what: str, nproc: int, quick: bool) -> dict:
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        mp.spawn(_torch_proc, args=(nproc, port, what, out, quick), nprocs=nproc, join=True)
        return json.loads(Path(out).read_text())


# ---- the driver ----------------------------------------------------------------------------

def fmt_size(n: int) -> str:
    return f"{n >> 20} MB" if n >= 1 << 20 else f"{n >> 10} KB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="fewer sizes and iterations")
    ap.add_argument("--write", action="store_true", help="write bench/results/<machine>-"
                    "allreduce.md")
    ap.add_argument("--role", default="driver", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.role.startswith("ours-"):
        return ours_worker(args.role[5:], args.out, args.quick)
    if shutil.which("mpirun") is None:
        raise SystemExit("mpirun not found: apt-get install openmpi-bin libopenmpi-dev")
    from run import machine  # bench/run.py's (imported here: the workers start lighter)
    m = machine()
    n = args.nproc
    lines = ["# All-reduce and DDP: dl.distributed (MPI) vs torch.distributed (gloo)", "",
             f"Machine: {m['cpu']}, {m['cores']} cores; {n} processes, "
             f"{threads_per_process(n)} threads each; "
             f"`python bench/allreduce.py{' --quick' if args.quick else ''}`", ""]
    ours = {int(k): v for k, v in run_ours("allreduce", n, args.quick).items()}
    theirs = {int(k): v for k, v in run_torch("allreduce", n, args.quick).items()}
    lines += ["## all_reduce, float32 SUM in place", "",
              "| size | ours µs | gloo µs | ours GB/s | gloo GB/s | ours / gloo bandwidth |",
              "|---|---|---|---|---|---|"]
    for size in sorted(ours):
        a, b = ours[size], theirs[size]
        lines.append(f"| {fmt_size(size)} | {a * 1e6:.1f} | {b * 1e6:.1f} | "
                     f"{size / a / 1e9:.2f} | {size / b / 1e9:.2f} | {b / a:.2f}x |")
    print("\n".join(lines), flush=True)
    rows = ["", "## DDP training step: MLP 784-512-512-10, batch 64 per process, Adam", "",
            "| processes | ours eager ms | ours dl.capture ms | torch eager ms | "
            "torch / ours eager | torch / ours captured |", "|---|---|---|---|---|---|"]
    for k in sorted({1, n}):
        o = run_ours("ddp", k, args.quick)
        t = run_torch("ddp", k, args.quick)
        rows.append(f"| {k}{' (no DDP)' if k == 1 else ' (DDP)'} | {o['eager'] * 1e3:.2f} | "
                    f"{o['captured'] * 1e3:.2f} | {t['eager'] * 1e3:.2f} | "
                    f"{t['eager'] / o['eager']:.2f}x | {t['eager'] / o['captured']:.2f}x |")
    print("\n".join(rows), flush=True)
    lines += rows
    if args.write:
        out = ROOT / "bench" / "results" / f"{m['slug']}-allreduce.md"
        out.write_text("\n".join(lines) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()

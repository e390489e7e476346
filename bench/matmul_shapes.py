"""Per-core matmul ratios against the peers on issue 16's shapes: F.linear (torch), batched
attention matmuls (torch) and sgemm (NumPy). Our pool and the peers run one thread each and
both sides are timed by thread CPU time (`time.thread_time`), alternated, medians of many
runs: the machine is shared, so wall clock is noisy and per-core ratios are what compare.

    python bench/matmul_shapes.py [--isa host|avx2] [--only NAME...] [--cand NAME...]

--isa avx2 re-runs itself with our AVX2 model and the peers' AVX2 kernels (`isa_env`).
--cand times each named matmul candidate (MATMUL.only) instead of the tuned choice.
--threads N runs our pool and the peers on N threads each, timed by wall clock (the per-core
ratios hide what splitting a product between cores costs)."""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _parse():
    p = argparse.ArgumentParser()
    p.add_argument("--isa", default=None)
    p.add_argument("--only", nargs="*", default=None)
    p.add_argument("--cand", nargs="*", default=None)
    p.add_argument("--runs", type=int, default=41)
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args()


def main():
    args = _parse()
    if args.isa and os.environ.get("_MM_SHAPES_CHILD") != "1":
        sys.path.insert(0, str(ROOT / "bench"))
        from run import isa_env
        nth = str(args.threads)
        env = {**isa_env(args.isa), "_MM_SHAPES_CHILD": "1", "OPENBLAS_NUM_THREADS": nth,
               "OMP_NUM_THREADS": nth, "MKL_NUM_THREADS": nth}
        argv = [a for i, a in enumerate(sys.argv[1:])
                if a != "--isa" and (i == 0 or sys.argv[i] != "--isa")]
        sys.exit(subprocess.call([sys.executable, __file__, *argv], env=env))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    sys.path.insert(0, str(ROOT))
    from runtimes import cpu_pool
    cpu_pool._pool = cpu_pool.Pool(args.threads)
    import numpy as np
    import torch
    torch.set_num_threads(args.threads)
    import dl
    import dl.nn.functional as F
    from dl.kernels import matmul as lib

    rng = np.random.default_rng(0)

    def t(x):
        return dl.tensor(x)

    def linear(m, k, n):
        x, w, b = (rng.random(s, np.float32) for s in ((m, k), (n, k), (n,)))
        dx, dw, db = t(x), t(w), t(b)
        tx, tw, tb = map(torch.from_numpy, (x, w, b))
        return (lambda: F.linear(dx, dw, db), lambda: torch.nn.functional.linear(tx, tw, tb),
                2 * m * k * n)

    def grad_weight(m, k, n):
        """F.linear's weight gradient g^T @ x (g: the (m, n) output gradient)."""
        g, x = rng.random((m, n), np.float32), rng.random((m, k), np.float32)
        dg, dx = t(g), t(x)
        tg, tx = torch.from_numpy(g), torch.from_numpy(x)
        return (lambda: dl.matmul(dg.transpose(0, 1), dx), lambda: tg.t() @ tx,
                2 * m * k * n)

    def grad_input(m, k, n):
        """F.linear's input gradient g @ W (W: the (n, k) weight)."""
        g, w = rng.random((m, n), np.float32), rng.random((n, k), np.float32)
        dg, dw = t(g), t(w)
        tg, tw = torch.from_numpy(g), torch.from_numpy(w)
        return lambda: dl.matmul(dg, dw), lambda: tg @ tw, 2 * m * k * n

    def qk():
        q, k = (rng.random((32, 128, 64), np.float32) for _ in range(2))
        dq, dk = t(q), t(k)
        tq, tk = torch.from_numpy(q), torch.from_numpy(k)
        return (lambda: dq @ dk.transpose(1, 2), lambda: tq @ tk.transpose(1, 2),
                2 * 32 * 128 * 128 * 64)

    def pv():
        p, v = rng.random((32, 128, 128), np.float32), rng.random((32, 128, 64), np.float32)
        dp, dv = t(p), t(v)
        tp, tv = torch.from_numpy(p), torch.from_numpy(v)
        return lambda: dp @ dv, lambda: tp @ tv, 2 * 32 * 128 * 128 * 64

    def sgemm(n):
        a, b = rng.random((n, n), np.float32), rng.random((n, n), np.float32)
        da, db = t(a), t(b)
        return lambda: dl.matmul(da, db), lambda: np.matmul(a, b), 2 * n ** 3

    shapes = {
        "linear64x784x512": lambda: linear(64, 784, 512),
        "linear64x512x512": lambda: linear(64, 512, 512),
        "linear1024x256x2048": lambda: linear(1024, 256, 2048),
        # the digits CNN's and the MLP's small layers
        "linear64x128x64": lambda: linear(64, 128, 64),
        "linear64x64x10": lambda: linear(64, 64, 10),
        "linear64x512x10": lambda: linear(64, 512, 10),
        "linear1024x256x768": lambda: linear(1024, 256, 768),
        "linear1024x2048x256": lambda: linear(1024, 2048, 256),
        # the Transformer encoder layer's backward (b8 s128 d256, feed-forward 2048)
        "gradw1024x256x2048": lambda: grad_weight(1024, 256, 2048),
        "gradw1024x2048x256": lambda: grad_weight(1024, 2048, 256),
        "gradw1024x256x768": lambda: grad_weight(1024, 256, 768),
        "gradx1024x256x2048": lambda: grad_input(1024, 256, 2048),
        "gradx1024x2048x256": lambda: grad_input(1024, 2048, 256),
        "gradx1024x256x768": lambda: grad_input(1024, 256, 768),
        "bmm_qkT": qk,
        "bmm_pv": pv,
        "mm512": lambda: sgemm(512),
        "mm1024": lambda: sgemm(1024),
        "mm2048": lambda: sgemm(2048),
        "mm4096": lambda: sgemm(4096),
    }

    clock = time.thread_time if args.threads == 1 else time.perf_counter

    def pause(fn):
        """Before a sample on several threads: a pause, then one untimed call."""
        if args.threads > 1:
            time.sleep(0.2)
            fn()

    def cpu_time(fn, reps):
        t0 = clock()
        for _ in range(reps):
            fn()
        return (clock() - t0) / reps

    def paired(ours, peer, work):
        for _ in range(3):
            ours(), peer()
        once = cpu_time(ours, 1)
        reps = max(1, int(0.02 / max(once, 1e-6)))  # ~20 ms a sample
        to, tp = [], []
        for _ in range(args.runs):
            # the peers' idle threads spin ~100 ms after a call and would take a core
            pause(ours)
            to.append(cpu_time(ours, reps))
            pause(peer)
            tp.append(cpu_time(peer, reps))
        return statistics.median(to), statistics.median(tp)

    print(f"isa={os.environ.get('CUBE_CPU_ISA', 'host')} threads={args.threads} "
          f"torch={torch.backends.cpu.get_cpu_capability()}", flush=True)
    with dl.no_grad():
        for name, make in shapes.items():
            if args.only and name not in args.only:
                continue
            ours, peer, work = make()
            for cand in (args.cand or [None]):
                label = name if cand is None else f"{name}:{cand}"
                try:
                    if cand is None:
                        o, p = paired(ours, peer, work)
                    else:
                        with lib.MATMUL.only(cand):
                            o, p = paired(ours, peer, work)
                except Exception as e:  # an invalid candidate for this layout
                    print(f"{label:40s} {type(e).__name__}: {str(e)[:60]}", flush=True)
                    continue
                print(f"{label:40s} ours {o * 1e3:8.3f} ms  peer {p * 1e3:8.3f} ms  "
                      f"ratio {p / o:5.2f}  ({work / o / 1e9:5.1f} GFLOP/s)", flush=True)


if __name__ == "__main__":
    main()

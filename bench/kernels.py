"""Kernel-library benchmarks beside their peers (torch CPU, NumPy), in one run: medians after
warm-up (autotuning happens in the warm-up), ratio to the peer, % of a roofline and the
issue's goal with its status (met / not met) per row.

Ours is timed first in each row, after a pause: OpenBLAS and OpenMP worker threads keep
spinning for tens of milliseconds after a call returns, and on a 2-core machine that spin
takes a core away from whatever runs next (it halved sgemm 512 when timed right after
NumPy).

    python bench/kernels.py [--quick] [--runtime cpu] [--only NAME ...]

Writes bench/results/<machine>-kernels.json and .md unless --quick."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from run import machine, median_time  # noqa: E402

import cube as cb  # noqa: E402
from dl.kernels import conv, matmul, norm, pool, reduce, softmax  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _copy_bw(n=16 << 20) -> float:
    a = np.ones(n, np.float32)
    b = np.empty_like(a)
    return 2 * 4 * n / median_time(lambda: np.copyto(b, a), repeat=7, warmup=2)


SETTLE_S = 0.5  # pause before timing ours: lets a peer's spinning worker threads go to sleep


def _settle() -> None:
    time.sleep(SETTLE_S)


def _row(name, ours, peer_name, peer, work, unit, roof=None, goal=None):
    """goal: the minimum ratio (peer time / ours) the issue asks for, or None."""
    r = {"name": name, "ours_ms": ours * 1e3, "peer": peer_name,
         "peer_ms": None if peer is None else peer * 1e3,
         "goal": None if goal is None else f">= {goal:g}x {peer_name}"}
    r["ratio"] = None if peer is None else peer / ours  # > 1: we are faster
    r["goal_met"] = None if goal is None or peer is None else r["ratio"] >= goal
    r[f"ours_{unit}"] = work / ours / 1e9
    if roof:
        r["pct_of_roofline"] = 100 * work / ours / roof
    print(json.dumps(r), flush=True)
    return r


def bench_matmul(rt, n, batch=None, repeat=7):
    rng = np.random.default_rng(0)
    shape = (n, n) if batch is None else (batch, n, n)
    a, b = rng.random(shape, np.float32), rng.random(shape, np.float32)
    da, db = rt.from_numpy(a), rt.from_numpy(b)
    _settle()
    out = matmul.matmul(rt, da, db)
    t = median_time(lambda: matmul.matmul(rt, da, db, out=out), repeat=repeat, warmup=2)
    tp = median_time(lambda: np.matmul(a, b), repeat=repeat, warmup=2)
    flops = 2 * n ** 3 * (batch or 1)
    name = f"sgemm {n}^3" if batch is None else f"batched sgemm ({batch}, {n}^3)"
    return _row(name, t, "numpy", tp, flops, "GFLOPs", goal=0.8)


def bench_max_pool(rt, shape, k, s, p, d, bw):
    x = np.random.default_rng(1).random(shape, np.float32)
    dx = rt.from_numpy(x)
    _settle()
    t = median_time(lambda: pool.max_pool2d(rt, dx, k, s, p, d), repeat=5, warmup=2)
    tp = None
    if torch is not None:
        tx = torch.from_numpy(x)
        tp = median_time(lambda: torch.nn.functional.max_pool2d(tx, k, s, p, d), repeat=3,
                         warmup=1)
    oh = pool.out_size(shape[2], k, s, p, d)
    ow = pool.out_size(shape[3], k, s, p, d)
    nbytes = 4 * (x.size + shape[0] * shape[1] * oh * ow)
    return _row(f"max_pool2d {shape} k{k} s{s} p{p} d{d}", t, "torch", tp, nbytes, "GBps",
                bw, 10)


def bench_sum(rt, n, bw):
    x = np.random.default_rng(2).random(n, np.float32)
    dx = rt.from_numpy(x)
    _settle()
    t = median_time(lambda: reduce.reduce(rt, dx, 0, "sum"), repeat=9, warmup=2)
    tp = None
    if torch is not None:
        tx = torch.from_numpy(x)
        tp = median_time(lambda: torch.sum(tx), repeat=9, warmup=2)
    return _row(f"sum {n >> 20}M f32", t, "torch", tp, 4 * n, "GBps", bw, 0.9)


def bench_softmax(rt, rows, cols, bw):
    x = np.random.default_rng(3).random((rows, cols), np.float32)
    dx = rt.from_numpy(x)
    out = rt.empty_like(dx)
    _settle()
    t = median_time(lambda: softmax.softmax(rt, dx, out), repeat=9, warmup=2)
    tp = None
    if torch is not None:
        tx = torch.from_numpy(x)
        tp = median_time(lambda: torch.softmax(tx, -1), repeat=9, warmup=2)
    return _row(f"softmax ({rows}, {cols})", t, "torch", tp, 8 * x.size, "GBps", bw, 1.0)


def bench_layer_norm(rt, rows, cols, bw):
    x = np.random.default_rng(4).random((rows, cols), np.float32)
    w, b = np.ones(cols, np.float32), np.zeros(cols, np.float32)
    dx, dw, db = rt.from_numpy(x), rt.from_numpy(w), rt.from_numpy(b)
    _settle()
    t = median_time(lambda: norm.layer_norm(rt, dx, dw, db), repeat=9, warmup=2)
    tp = None
    if torch is not None:
        tx, tw, tb = map(torch.from_numpy, (x, w, b))
        tp = median_time(lambda: torch.nn.functional.layer_norm(tx, (cols,), tw, tb),
                         repeat=9, warmup=2)
    return _row(f"layer_norm ({rows}, {cols})", t, "torch", tp, 8 * x.size, "GBps", bw)


def bench_conv(rt, peak_gflops):
    rng = np.random.default_rng(5)
    x = rng.random((2, 64, 56, 56), np.float32)
    w = rng.random((64, 64, 3, 3), np.float32)
    dx, dw = rt.from_numpy(x), rt.from_numpy(w)
    _settle()
    t = median_time(lambda: conv.conv2d(rt, dx, dw, padding=1), repeat=7, warmup=2)
    tp = None
    if torch is not None:
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        tp = median_time(lambda: torch.nn.functional.conv2d(tx, tw, padding=1), repeat=7,
                         warmup=2)
    flops = 2 * 2 * 64 * 56 * 56 * 64 * 9
    return _row("conv2d (2,64,56,56) 64x3x3 p1", t, "torch", tp, flops, "GFLOPs",
                peak_gflops * 1e9, 0.5)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runtime", default="cpu")
    p.add_argument("--quick", action="store_true", help="smaller sizes, no result files")
    p.add_argument("--only", nargs="*", default=None)
    a = p.parse_args()
    rt = cb.runtime(a.runtime)
    q = a.quick
    bw = _copy_bw()
    res = {"machine": machine(), "runtime": rt.name, "date": time.strftime("%Y-%m-%d"),
           "copy_GBps": bw / 1e9, "torch_threads": torch.get_num_threads() if torch else None,
           "rows": []}
    benches = {
        "pool1": lambda: bench_max_pool(rt, (2, 8 if q else 32, 512, 512), 5, 1, 2, 1, bw),
        "pool2": lambda: bench_max_pool(rt, (2, 16 if q else 128, 512, 512), 5, 2, 2, 2, bw),
        "sum": lambda: bench_sum(rt, (8 if q else 64) << 20, bw),
        "softmax": lambda: bench_softmax(rt, 1024 if q else 4096, 4096, bw),
        "layer_norm": lambda: bench_layer_norm(rt, 1024 if q else 4096, 4096, bw),
        "mm512": lambda: bench_matmul(rt, 512),
        "mm2048": lambda: bench_matmul(rt, 1024 if q else 2048),
        "mm4096": lambda: None if q else bench_matmul(rt, 4096, repeat=3),
        "bmm": lambda: bench_matmul(rt, 512, batch=4 if q else 16),
    }
    peak = None
    for name, fn in benches.items():
        if a.only and name not in a.only:
            continue
        r = fn()
        if r is not None:
            res["rows"].append(r)
            if "GFLOPs" in str(r):
                peak = max(peak or 0, r.get("ours_GFLOPs", 0),
                           (r.get("ours_GFLOPs", 0) * (r["ratio"] or 0)))
    if not a.only or "conv" in a.only:
        res["rows"].append(bench_conv(rt, peak or 100.0))
    m = res["machine"]
    md = [f"# Kernel library on {m['cpu']} ({m['cores']} cores)", "",
          f"Runtime `{rt.name}`; Python {m['python']}, NumPy {m['numpy']}, torch "
          f"{torch.__version__ if torch else '-'} ({res['torch_threads']} threads); "
          f"{res['date']}. Medians after warm-up (autotuning in the warm-up); measured copy "
          f"bandwidth {res['copy_GBps']:.1f} GB/s is the memory roofline. Command: "
          "`python bench/kernels.py`.", "",
          "| benchmark | ours ms | peer ms | ours / peer speed | rate | % roofline | goal | "
          "status |", "|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        rate = next(f"{v:.1f} {k[5:]}" for k, v in r.items() if k.startswith("ours_")
                    and k != "ours_ms")
        peer = "" if r["peer_ms"] is None else f"{r['peer']} {r['peer_ms']:.2f}"
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        pct = f"{r['pct_of_roofline']:.0f}%" if "pct_of_roofline" in r else ""
        status = {True: "met", False: "NOT met", None: ""}[r["goal_met"]]
        md.append(f"| {r['name']} | {r['ours_ms']:.2f} | {peer} | {ratio} | {rate} | {pct} | "
                  f"{r['goal'] or ''} | {status} |")
    text = "\n".join(md) + "\n"
    print(text)
    if not q and not a.only:
        out = ROOT / "bench" / "results" / (res["machine"]["slug"] + "-kernels")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(res, indent=2))
        out.with_suffix(".md").write_text(text)


if __name__ == "__main__":
    main()

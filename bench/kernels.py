"""Kernel-library benchmarks beside their peers (torch CPU, NumPy), in one run: medians after
warm-up (autotuning happens in the warm-up), ratio to the peer, % of a roofline and the
issue's goal with its status (met / not met) per row.

Ours is timed first in each row, after a pause: OpenBLAS and OpenMP worker threads keep
spinning for tens of milliseconds after a call returns, and on a 2-core machine that spin
takes a core away from whatever runs next (it halved sgemm 512 when timed right after
NumPy).

    python bench/kernels.py [--quick] [--runtime cpu] [--only NAME ...] [--isa host avx2]
                            [--name MACHINE]

On the CPU the library runs once per instruction-set model (`--isa`, default both: the
host's, and CUBE_CPU_ISA=avx2, a haswell-class model with AVX-512 off), each in its own
process, so a regression on either register file shows in one run; GFLOP rows give % of
that model's measured FMA peak. The matmul rows (sgemm vs NumPy, F.linear vs torch) time
ours and the peer alternated (bench/run.py `paired_medians`).

Writes bench/results/<machine>-kernels.json and .md unless --quick."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from run import isa_env, machine, median_time, paired_medians, peer_isa  # noqa: E402

import cube as cb  # noqa: E402
import dl  # noqa: E402
from cube import ABSOLUTE_POS, Array, Comptime, Line, f32, u32  # noqa: E402
from dl.kernels import matmul, norm, pool, reduce, softmax  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _copy_bw(n=16 << 20) -> float:
    a = np.ones(n, np.float32)
    b = np.empty_like(a)
    return 2 * 4 * n / median_time(lambda: np.copyto(b, a), repeat=7, warmup=2)


@cb.cube(launch=True, unchecked=True)
def fma_chains(x: Array[Line[f32]], out: Array[Line[f32]], steps: u32, C: Comptime[int]):
    """C independent FMA chains of lines held in registers, `steps` times: the peak."""
    L = cb.comptime(x.line_size())
    acc = cb.LocalArray(Line[f32, L], C)
    a = x[0]
    b = x[1]
    for t in cb.range(C, unroll=True):
        acc[t] = x[2] + Line[f32, L](t)
    for _ in range(steps):
        for t in cb.range(C, unroll=True):
            acc[t] = cb.fma(acc[t], a, b)
    s = acc[0]
    for t in cb.range(1, C, unroll=True):
        s += acc[t]
    out[ABSOLUTE_POS] = s


def fma_peak(rt) -> float:
    """FLOP/s of FMAs on every core, at the runtime's vector width: the best over a few
    chain counts (one count can miss: with 16 registers 12 chains reached 228 GFLOP/s where
    10 reached 254, and 8 cannot cover two units' 4-cycle latency)."""
    lanes = max(1, rt.features.vector_bits // 32) if rt.features.vector_bits else 8
    regs = rt.features.vector_registers or 16
    # ~3 ms a launch: at 1 << 16 steps (0.4 ms) a worker still waking after the pause
    # before each run lost a share of the cubes' time, and the AVX2 model's peak (two chain
    # counts to try) read 116 GFLOP/s in one run, 230 in another
    units, steps = 4 * (os.cpu_count() or 1), 1 << 19
    x = rt.from_numpy(np.full(3 * lanes, 0.5, np.float32))
    out = rt.empty((units * lanes,), np.float32)
    best = 0.0
    for chains in range(10, max(11, regs - 2), 2):
        def run(chains=chains):
            fma_chains.launch(rt, cube_count=units, cube_dim=1, x=x.lines(lanes),
                              out=out.lines(lanes), steps=steps, C=chains)
        run()
        t = min(median_time(run, repeat=3, warmup=1) for _ in range(3))
        best = max(best, 2 * lanes * chains * steps * units / t)
    return best


SETTLE_S = 0.5  # pause before timing ours: lets a peer's spinning worker threads go to sleep
# between paired turns: OpenBLAS's and torch's OpenMP workers spin about 100 ms after a call,
# holding one of our cores (a 1 ms sgemm then timed at half speed, 0.5x NumPy, where the
# autotuner, timing alone, saw parity)
TURN_PAUSE_S = 0.2
# timed runs per turn, after the turn's untimed one: the first runs after an idle pause are
# slow for every contender by an amount that moves from run to run (conv2d's second run after
# 0.2 s idle: ours 2.1-3.7 ms, torch 2.7-3.0, steady 1.8 and 1.7-2.4), so a turn times five
# back-to-back runs, as a layer runs inside a model
TURN_BLOCK = 5


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


def bench_sgemm(dev, n, peak, repeat=7):
    """sgemm through the public API (`dl.matmul`), alternated with NumPy's."""
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n), np.float32), rng.random((n, n), np.float32)
    da, db = dl.tensor(a, device=dev), dl.tensor(b, device=dev)
    ours, peer = paired_medians([lambda: dl.matmul(da, db), lambda: np.matmul(a, b)],
                                repeat=repeat, warmup=2, block=TURN_BLOCK,
                                pause=TURN_PAUSE_S)
    return _row(f"sgemm {n}^3 (dl.matmul)", ours, "numpy", peer, 2 * n ** 3, "GFLOPs", peak,
                0.95)


def bench_linear(dev, m, k, n, peak, repeat=9):
    """nn.Linear's x @ W^T + b (`dl.nn.functional.linear`) against torch's F.linear."""
    rng = np.random.default_rng(1)
    x = rng.random((m, k), np.float32)
    w = rng.random((n, k), np.float32)
    bias = rng.random(n, np.float32)
    dx, dw, dbias = (dl.tensor(v, device=dev) for v in (x, w, bias))
    fns = [lambda: dl.nn.functional.linear(dx, dw, dbias)]
    if torch is not None:
        tx, tw, tb = map(torch.from_numpy, (x, w, bias))
        fns.append(lambda: torch.nn.functional.linear(tx, tw, tb))
    with dl.no_grad():
        ts = paired_medians(fns, repeat=repeat, warmup=2, block=TURN_BLOCK,
                            pause=TURN_PAUSE_S)
    return _row(f"F.linear {m}x{k}x{n}", ts[0], "torch", ts[1] if len(ts) > 1 else None,
                2 * m * k * n, "GFLOPs", peak, 1.0)


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


def bench_gelu(rt, n, line=None, repeat=9):
    """A raw @cube GELU (erf form, lines of `line`: by default one vector register of the
    runtime's CPU model, 16 floats on AVX-512 and 8 on AVX2, as a user tunes it from the
    declared features) over n f32 beside torch's F.gelu and a copy kernel of the same line
    size, timed in turns; % roofline is of that copy kernel (the issue's >= 85% of copy
    bandwidth)."""
    import transcendentals as tx
    line = line or max(4, (rt.features.vector_bits or 128) // 32)
    x = np.random.default_rng(4).standard_normal(n).astype(np.float32) * 3
    dx, dy = rt.from_numpy(x), rt.empty((n,), np.float32)
    fns = [tx.launcher(rt, tx.make_kernels()["gelu_erf"], dx, dy, n, line),
           tx.launcher(rt, tx.copy_k, dx, dy, n, line)]
    if torch is not None:
        t, o = torch.from_numpy(x), torch.empty(n)
        fns.append(tx.torch_fns(t, o)["gelu_erf"])
    ts = paired_medians(fns, repeat=repeat, warmup=2, block=3, pause=TURN_PAUSE_S)
    return _row(f"GELU (erf) {n >> 20}M f32, @cube lines of {line}", ts[0], "torch",
                ts[2] if len(ts) > 2 else None, 8 * n, "GBps", 8 * n / ts[1], 1.0)


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


def bench_conv(dev, peak, repeat=9):
    """`dl.nn.functional.conv2d` against torch's (oneDNN), alternated; the issue's goal shape."""
    rng = np.random.default_rng(5)
    x = rng.random((2, 64, 56, 56), np.float32)
    w = rng.random((64, 64, 3, 3), np.float32)
    dx, dw = dl.tensor(x, device=dev), dl.tensor(w, device=dev)
    fns = [lambda: dl.nn.functional.conv2d(dx, dw, padding=1).numpy()]
    if torch is not None:
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        fns.append(lambda: torch.nn.functional.conv2d(tx, tw, padding=1))
        for _ in range(20):  # oneDNN's first calls pick and build its kernel
            fns[1]()
    with dl.no_grad():
        ts = paired_medians(fns, repeat=repeat, warmup=2, block=TURN_BLOCK,
                            pause=TURN_PAUSE_S)
    flops = 2 * 2 * 64 * 56 * 56 * 64 * 9
    return _row("conv2d (2,64,56,56) 64x3x3 p1", ts[0], "torch", ts[1] if len(ts) > 1 else None,
                flops, "GFLOPs", peak, 1.0)


def bench_attention(dev, shape, peak, causal=False, repeat=9):
    """`dl.nn.functional.scaled_dot_product_attention` (the fused `attention_rows` kernel,
    tiled from the register file) against torch's, alternated; q, k, v (batch, heads, seq,
    head dim) f32. Work: the two products' FLOPs (4 * b * h * s^2 * d, half of it causal), %
    of the FMA peak. The issue states no goal for it (a row to watch, not a target)."""
    b, h, s, d = shape
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    dq, dk, dv = (dl.tensor(x, device=dev) for x in (q, k, v))
    sdpa = dl.nn.functional.scaled_dot_product_attention
    fns = [lambda: sdpa(dq, dk, dv, is_causal=causal).numpy()]
    if torch is not None:
        tq, tk, tv = map(torch.from_numpy, (q, k, v))
        fns.append(lambda: torch.nn.functional.scaled_dot_product_attention(
            tq, tk, tv, is_causal=causal))
    with dl.no_grad():
        ts = paired_medians(fns, repeat=repeat, warmup=2, block=TURN_BLOCK,
                            pause=TURN_PAUSE_S)
    name = f"sdpa {shape}{' causal' if causal else ''}"
    return _row(name, ts[0], "torch", ts[1] if len(ts) > 1 else None,
                4 * b * h * s * s * d / (2 if causal else 1), "GFLOPs", peak)


def run_one(a) -> dict:
    """Every selected row on one runtime (one instruction-set model on the CPU)."""
    rt = cb.runtime(a.runtime)
    dev = dl.device(a.runtime)
    q = a.quick
    bw = _copy_bw()
    peak = fma_peak(rt)
    isa = getattr(rt, "isa", None)
    res = {"machine": machine(), "runtime": rt.name, "date": time.strftime("%Y-%m-%d"),
           "isa": isa.name if isa else None, "device": rt.describe(),
           "peers": peer_isa(), "copy_GBps": bw / 1e9, "fma_peak_GFLOPs": peak / 1e9,
           "loadavg_start": os.getloadavg()[0],
           "torch_threads": torch.get_num_threads() if torch else None, "rows": []}
    print(f"# {rt.describe()}: FMA peak {peak / 1e9:.0f} GFLOP/s, copy {bw / 1e9:.1f} GB/s",
          flush=True)
    benches = {
        "pool1": lambda: bench_max_pool(rt, (2, 8 if q else 32, 512, 512), 5, 1, 2, 1, bw),
        "pool2": lambda: bench_max_pool(rt, (2, 16 if q else 128, 512, 512), 5, 2, 2, 2, bw),
        "sum": lambda: bench_sum(rt, (8 if q else 64) << 20, bw),
        "gelu": lambda: bench_gelu(rt, (8 if q else 64) << 20),
        "softmax": lambda: bench_softmax(rt, 1024 if q else 4096, 4096, bw),
        "layer_norm": lambda: bench_layer_norm(rt, 1024 if q else 4096, 4096, bw),
        **{f"mm{n}": (lambda n=n: bench_sgemm(dev, n, peak, 5 if n >= 4096 else 9))
           for n in ((512, 1024) if q else (512, 1024, 2048, 4096))},
        "bmm": lambda: bench_matmul(rt, 512, batch=4 if q else 16),
        **{f"linear{m}x{k}x{n}": (lambda m=m, k=k, n=n: bench_linear(dev, m, k, n, peak))
           for m, k, n in ((64, 784, 512), (64, 512, 512), (1024, 256, 2048))},
        "conv": lambda: bench_conv(dev, peak),
        # the Transformer encoder layer's attention (b8 s128 d256 h4), and a longer sequence
        # whose scores outgrow the register file on every ISA (the blocked score path)
        "sdpa": lambda: bench_attention(dev, (8, 4, 128, 64), peak),
        "sdpa_long": lambda: bench_attention(dev, (1, 4, 256 if q else 1024, 64), peak,
                                             causal=True),
    }
    if torch is not None:
        # torch's convolutions ran at about half speed (4.4 ms for 200 calls of the conv row,
        # 2.5 ms after) until its thread count was set explicitly: give the peer its best
        torch.set_num_threads(torch.get_num_threads())
    for name, fn in benches.items():
        if a.only and name not in a.only:
            continue
        try:
            r = fn()
        except Exception as e:  # a row that cannot run here (a kernel another change broke)
            print(f"{name}: failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            res.setdefault("failed", []).append(f"{name}: {type(e).__name__}: {e}")
            continue
        if r is not None:
            res["rows"].append(r)
    res["loadavg_end"] = os.getloadavg()[0]
    return res


def _children(a, argv: list[str]) -> list[dict]:
    """One process per instruction-set model (CUBE_CPU_ISA), each writing its rows."""
    out = []
    for isa in a.isa or ["host", "avx2"]:
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            env = isa_env(isa)
            print(f"## CUBE_CPU_ISA={isa}", flush=True)
            subprocess.run([sys.executable, __file__, *argv, "--child", f.name], env=env,
                           check=True)
            out.append(json.loads(Path(f.name).read_text()))
    return out


def _markdown(results: list[dict], command: str) -> str:
    m = results[0]["machine"]
    md = [f"# Kernel library on {m['cpu']} ({m['cores']} cores)", "",
          f"Python {m['python']}, NumPy {m['numpy']}, torch "
          f"{torch.__version__ if torch else '-'} ({results[0]['torch_threads']} threads); "
          f"{results[0]['date']}. Medians after warm-up (autotuning in the warm-up); sgemm, "
          "F.linear, conv2d and GELU rows alternate ours and the peer in turns (a 0.2 s pause, "
          "one untimed run, then 5 timed; GELU 3). % roofline: "
          "of the measured copy bandwidth for GB/s rows (for GELU: of a copy kernel of the same "
          "line size timed beside it), of the ISA's measured FMA peak (every core) for GFLOP/s "
          "rows. Under CUBE_CPU_ISA=avx2 the peers run their AVX2 kernels too. Command: "
          f"`{command}`.", ""]
    for res in results:
        md += [f"## {res['runtime']}" + (f", CUBE_CPU_ISA={res['isa']}" if res["isa"] else ""),
               "", f"{res['device']}; peers on {res.get('peers', '?')}; FMA peak "
               f"{res['fma_peak_GFLOPs']:.0f} GFLOP/s, copy "
               f"{res['copy_GBps']:.1f} GB/s; 1-minute load average {res['loadavg_start']:.1f} "
               f"at the start, {res['loadavg_end']:.1f} at the end (the machine's other "
               "users: above the core count, every number here is the shared machine's).", "",
               "| benchmark | ours ms | peer ms | ours / peer speed | rate | % roofline | "
               "goal | status |", "|---|---|---|---|---|---|---|---|"]
        for r in res["rows"]:
            rate = next(f"{v:.1f} {k[5:]}" for k, v in r.items() if k.startswith("ours_")
                        and k != "ours_ms")
            peer = "" if r["peer_ms"] is None else f"{r['peer']} {r['peer_ms']:.2f}"
            ratio = "" if r["ratio"] is None else f"{r['ratio']:.2f}x"
            pct = f"{r['pct_of_roofline']:.0f}%" if "pct_of_roofline" in r else ""
            status = {True: "met", False: "NOT met", None: ""}[r["goal_met"]]
            md.append(f"| {r['name']} | {r['ours_ms']:.2f} | {peer} | {ratio} | {rate} | "
                      f"{pct} | {r['goal'] or ''} | {status} |")
        md += [f"\nFailed: {f}" for f in res.get("failed", [])]
        md.append("")
    return "\n".join(md)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runtime", default="cpu")
    p.add_argument("--quick", action="store_true", help="smaller sizes, no result files")
    p.add_argument("--only", nargs="*", default=None)
    p.add_argument("--isa", nargs="*", default=None, choices=["host", "avx2"],
                   help="CPU instruction-set models to run (default: both)")
    p.add_argument("--name", default=None, help="result file prefix (default: the CPU's)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    a = p.parse_args()
    if a.child:
        Path(a.child).write_text(json.dumps(run_one(a)))
        return
    results = _children(a, argv) if a.runtime == "cpu" else [run_one(a)]
    text = _markdown(results, "python bench/kernels.py " + " ".join(argv))
    print(text)
    if not a.quick and not a.only:
        name = a.name or results[0]["machine"]["slug"]
        out = ROOT / "bench" / "results" / (name + "-kernels")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(results, indent=2))
        out.with_suffix(".md").write_text(text)


if __name__ == "__main__":
    main()

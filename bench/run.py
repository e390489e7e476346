"""Benchmarks beside their peers, in one run: medians of repeated runs after warm-up.

    python bench/run.py [--quick] [--runtime cpu]

Writes bench/results/<machine>.json and .md (the machine named by its CPU model and cores)."""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import cube as cb  # noqa: E402
from cube import ABSOLUTE_POS, Array, Line, cube, f32  # noqa: E402
from runtimes.errors import CubeError  # noqa: E402

# The peers' own switches to their AVX2 kernels, set with CUBE_CPU_ISA=avx2 so both sides of a
# row run on the same register file (OpenBLAS otherwise picks its SkylakeX kernels and torch
# its AVX-512 ones on an AVX-512 machine, whatever our model is). They take effect only in a
# process that has not loaded NumPy or torch yet.
PEER_ISA_ENV = {"avx2": {"OPENBLAS_CORETYPE": "Haswell", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                         "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}}


def isa_env(isa: str) -> dict[str, str]:
    """The environment of a child process that runs our CPU model `isa` and its peers on the
    same instruction set."""
    return {**os.environ, "CUBE_CPU_ISA": isa, **PEER_ISA_ENV.get(isa, {})}


def peer_isa() -> str:
    """What the peers in this process run on, as they report it."""
    parts = []
    try:
        import threadpoolctl
        parts += [f"{i['internal_api']} {i.get('architecture', '?')}"
                  for i in threadpoolctl.threadpool_info() if i.get("architecture")]
    except ImportError:
        pass
    try:
        import torch
        parts.append(f"torch {torch.backends.cpu.get_cpu_capability()}")
    except ImportError:
        pass
    return ", ".join(parts) or "unknown"


def machine() -> dict:
    model = platform.processor() or "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "slug": f"{slug}-{os.cpu_count()}c"}


def median_time(fn, repeat: int = 15, warmup: int = 3, inner: int = 1) -> float:
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        ts.append((time.perf_counter() - t) / inner)
    return statistics.median(ts)


def paired_medians(fns, repeat: int = 15, warmup: int = 3, block: int = 5,
                   pause: float = 0.2, clock=time.perf_counter) -> list[float]:
    """Median seconds of each of fns, timed in turns of `block` runs, each turn after a
    pause and one untimed run: drift in a shared machine's speed then falls on every
    contender alike (one long block after the other gave ratios that moved by 2x between
    runs), and neither starts cold or behind the other's still-spinning worker threads
    (torch's OpenMP and OpenBLAS workers spin for ~100-200 ms after a call and hold a core:
    with a 10 ms pause, our CNN step right after torch's took 12.8 ms, alone 7.4 ms)."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    ts: list[list[float]] = [[] for _ in fns]
    while len(ts[0]) < repeat:
        for k, fn in enumerate(fns):
            time.sleep(pause)
            fn()
            for _ in range(min(block, repeat - len(ts[k]))):
                t = clock()
                fn()
                ts[k].append(clock() - t)
    return [statistics.median(t) for t in ts]


def train_step(model, opt, loss_fn, x, y):
    """One training step as a torch user writes it: zero_grad, forward, loss, backward,
    step (the same code drives torch's modules and ours)."""
    def run():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return run


@cube(launch=True)
def add3(a: Array[Line[f32]], b: Array[Line[f32]], out: Array[Line[f32]]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = a[i] + b[i]


@cube(launch=True)
def copy(a: Array[Line[f32]], out: Array[Line[f32]]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = a[i]


def bench_launch_overhead(rt) -> dict:
    """A cached 3-argument launch beside a numba @njit call on the same arrays (the issue's
    goal: at most 3x numba), timed in turns (`paired_medians`), and np.add for scale."""
    x = rt.from_numpy(np.ones(1, np.float32))
    y = rt.from_numpy(np.ones(1, np.float32))
    o = rt.empty_like(x)
    inner = 2000

    def loop(fn):
        def run():
            for _ in range(inner):
                fn()
        return run

    call = lambda: add3.launch(rt, cube_count=1, cube_dim=1, a=x, b=y, out=o)  # noqa: E731
    # numba gets the very arrays the launch reads and writes (host runtimes); else copies
    xa, ya, oa = (getattr(b, "array", None) for b in (x, y, o))
    if xa is None:
        xa, ya, oa = np.ones(1, np.float32), np.ones(1, np.float32), np.empty(1, np.float32)
    fns = {"ours": call, "numpy_add": lambda: np.add(xa, ya, out=oa)}
    out: dict = {"goal": "at most 3x numba"}
    try:
        import numba

        @numba.njit
        def nb_add(a, b, c):
            for i in range(c.size):
                c[i] = a[i] + b[i]
        nb_add(xa, ya, oa)
        fns["numba"] = lambda: nb_add(xa, ya, oa)
    except ImportError:
        out["numba"] = "numba not installed"
    med = paired_medians([loop(f) for f in fns.values()], repeat=21, warmup=3, block=3)
    for name, t in zip(fns, med):
        out[f"{name}_us"] = t / inner * 1e6
    out.setdefault("numba_us", None)
    if out["numba_us"]:
        out["ratio_vs_numba"] = out["ours_us"] / out["numba_us"]
    return out


COLD = textwrap.dedent("""
    import time, numpy as np
    t0 = time.perf_counter()
    import cube as cb
    from cube import cube, Array, f32, ABSOLUTE_POS
    t1 = time.perf_counter()
    @cube(launch=True)
    def k(a: Array[f32], b: Array[f32], out: Array[f32]):
        i = ABSOLUTE_POS
        if i < out.len():
            out[i] = a[i] * 2.0 + b[i]
    rt = cb.runtime({rt!r})
    x = rt.from_numpy(np.ones(16, np.float32)); o = rt.empty_like(x)
    t2 = time.perf_counter()
    k.launch(rt, cube_count=1, cube_dim=16, a=x, b=x, out=o)
    r = o.numpy()
    t3 = time.perf_counter()
    assert r[0] == 3.0
    print(t3 - t2, t1 - t0)
""")

COLD_NUMBA = textwrap.dedent("""
    import time, numpy as np
    import numba
    @numba.njit(cache={cache})
    def k(a, b, out):
        for i in range(out.size):
            out[i] = a[i] * 2.0 + b[i]
    x = np.ones(16, np.float32); o = np.empty_like(x)
    t = time.perf_counter()
    k(x, x, o)
    print(time.perf_counter() - t)
""")


def _py(code: str, env: dict, cwd: str | None = None) -> list[float]:
    """Run code in a fresh process (from a file: kernels need their source) and return the
    numbers it prints."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    try:
        # as a user's install: bytecode caches written and used (CI shells often disable them)
        full_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        r = subprocess.run([sys.executable, f.name], env={**full_env, **env},
                           capture_output=True, text=True, cwd=cwd, timeout=300)
    finally:
        os.unlink(f.name)
    if r.returncode:
        raise RuntimeError(r.stderr)
    return [float(v) for v in r.stdout.split()]


def bench_cold_compile(rt_name: str, runs: int = 5) -> dict:
    cold, warm, imp, nb_cold, nb_cache = [], [], [], [], []
    with tempfile.TemporaryDirectory() as d:  # one throw-away run writes the bytecode caches
        _py(COLD.format(rt=rt_name), {"CUBE_CACHE_DIR": d})
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as d:
            env = {"CUBE_CACHE_DIR": d}
            c, i = _py(COLD.format(rt=rt_name), env)
            cold.append(c)
            imp.append(i)
            warm.append(_py(COLD.format(rt=rt_name), env)[0])
        with tempfile.TemporaryDirectory() as d:
            try:
                path = Path(d) / "nb.py"
                path.write_text(COLD_NUMBA.format(cache=True))
                env = {"NUMBA_CACHE_DIR": d}
                nb_cold.append(_py(path.read_text(), env, cwd=d)[0])
                code = f"import runpy; runpy.run_path({str(path)!r})"
                nb_cache.append(_py(code, env, cwd=d)[0])
            except RuntimeError:
                pass
    med = statistics.median
    out = {"ours_cold_ms": med(cold) * 1e3, "ours_disk_cache_ms": med(warm) * 1e3,
           "import_cube_ms": med(imp) * 1e3,
           "goal_cold_ms": 50.0, "goal_disk_ms": 5.0}
    if nb_cold:
        out["numba_cold_ms"] = med(nb_cold) * 1e3
        out["ratio_cold_vs_numba"] = out["ours_cold_ms"] / out["numba_cold_ms"]
    return out


def bench_add_bandwidth(rt, n: int) -> dict:
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    b = np.random.default_rng(1).random(n, dtype=np.float32)
    c = np.empty_like(a)
    da, db = rt.from_numpy(a), rt.from_numpy(b)
    dc = rt.empty_like(da)
    lines = n // 4
    grid = ((lines + 255) // 256,)
    t_ours = median_time(lambda: add3.launch(rt, cube_count=grid, cube_dim=(256,),
                                             a=da.lines(4), b=db.lines(4), out=dc.lines(4)),
                         repeat=9, warmup=2)
    assert np.array_equal(dc.numpy(), a + b)
    t_np = median_time(lambda: np.add(a, b, out=c), repeat=9, warmup=2)
    t_copy_np = median_time(lambda: np.copyto(c, a), repeat=9, warmup=2)
    t_copy_ours = median_time(lambda: copy.launch(rt, cube_count=grid, cube_dim=(256,),
                                                  a=da.lines(4), out=dc.lines(4)),
                              repeat=9, warmup=2)
    nbytes_add, nbytes_copy = 3 * 4 * n, 2 * 4 * n
    copy_bw = max(nbytes_copy / t_copy_np, nbytes_copy / t_copy_ours)
    ours_bw, np_bw = nbytes_add / t_ours, nbytes_add / t_np
    return {"n": n, "ours_GBps": ours_bw / 1e9, "numpy_GBps": np_bw / 1e9,
            "ratio_vs_numpy": ours_bw / np_bw, "copy_GBps": copy_bw / 1e9,
            "ours_pct_of_copy": 100 * ours_bw / copy_bw, "goal_ratio": 0.9}


def bench_gelu(rt, n: int, copy_GBps: float) -> dict:
    import gelu as g
    x = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    dx = rt.from_numpy(x)
    dy = rt.empty_like(dx)

    def run(line):
        lines = n // line
        return lambda: g.gelu_kernel.launch(
            rt, cube_count=((lines + 255) // 256,), cube_dim=(256,), inp=dx.lines(line),
            out=dy.lines(line))
    # the line size is a launch-time choice: report the best of the usual SIMD widths
    by_line = {line: median_time(run(line), repeat=9, warmup=2) for line in (4, 8, 16)}
    best = min(by_line, key=by_line.get)
    t_ours = by_line[best]
    err = float(np.max(np.abs(dy.numpy()[:1 << 16] - g.reference(x[:1 << 16]))))
    roofline_ms = 8 * n / (copy_GBps * 1e9) * 1e3
    out = {"n": n, "line_size": best, "ours_ms": t_ours * 1e3,
           "ms_by_line": {k: v * 1e3 for k, v in by_line.items()},
           "ours_GBps": 8 * n / t_ours / 1e9, "roofline_ms": roofline_ms,
           "pct_of_copy": 100 * roofline_ms / (t_ours * 1e3),
           "max_abs_err": err, "goal_ratio_vs_torch": 4.0}
    try:
        import torch
        tx = torch.from_numpy(x)
        ty = torch.empty_like(tx)
        t_torch = median_time(lambda: torch.ops.aten.gelu.out(tx, out=ty), repeat=9, warmup=2)
        out.update(torch_ms=t_torch * 1e3, torch_threads=torch.get_num_threads(),
                   speedup_vs_torch=t_torch / t_ours)
    except ImportError:
        out["torch_ms"] = None
    return out


def bench_beside(name: str, n: int) -> dict:
    """add and GELU on another runtime (OpenCL on PoCL, wgpu on lavapipe here), each launch
    followed by a sync so the median is the kernel's time; launch overhead on a cache hit
    without and with a sync."""
    try:
        rt = cb.runtime(name)
    except cb.RuntimeUnavailable as e:
        return {"runtime": name, "unavailable": str(e).splitlines()[0]}
    import gelu as g
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    b = np.random.default_rng(1).random(n, dtype=np.float32)
    da, db = rt.from_numpy(a), rt.from_numpy(b)
    dc = rt.empty_like(da)
    grid = ((n // 4 + 255) // 256,)

    def add():
        add3.launch(rt, cube_count=grid, cube_dim=(256,), a=da.lines(4), b=db.lines(4),
                    out=dc.lines(4))
        rt.sync()

    t_add = median_time(add, repeat=9, warmup=2)
    assert np.array_equal(dc.numpy(), a + b)

    def gelu(line):
        def run():
            g.gelu_kernel.launch(rt, cube_count=((n // line + 255) // 256,), cube_dim=(256,),
                                 inp=da.lines(line), out=dc.lines(line))
            rt.sync()
        return run

    # the line size is a launch-time choice: report the best of the usual widths
    by_line = {}
    for line in (4, 8, 16):
        try:
            by_line[line] = median_time(gelu(line), repeat=9, warmup=2)
        except CubeError as e:  # a line size the target lacks
            print(f"{rt.name}: lines of {line}: {str(e).splitlines()[0]}", flush=True)
    best = min(by_line, key=by_line.get)
    t_gelu = by_line[best]
    gelu(best)()
    err = float(np.max(np.abs(dc.numpy()[:1 << 16] - g.reference(a[:1 << 16]))))
    x = rt.from_numpy(np.ones(1, np.float32))
    o = rt.empty_like(x)
    one = lambda: add3.launch(rt, cube_count=1, cube_dim=1, a=x, b=x, out=o)  # noqa: E731
    t_launch = median_time(one, repeat=11, warmup=20, inner=200)
    rt.sync()

    def one_sync():
        one()
        rt.sync()
    t_launch_sync = median_time(one_sync, repeat=11, warmup=20, inner=50)
    return {"runtime": rt.name, "device": rt.describe(), "n": n,
            "add_ms": t_add * 1e3, "add_GBps": 12 * n / t_add / 1e9,
            "gelu_ms": t_gelu * 1e3, "gelu_GBps": 8 * n / t_gelu / 1e9, "gelu_max_abs_err": err,
            "gelu_line_size": best, "launch_us": t_launch * 1e6,
            "launch_sync_us": t_launch_sync * 1e6}


def bench_eager_python(device: str) -> dict:
    """The Python an eager dl op costs: ops on 8x8 tensors (their kernels take well under a
    microsecond), best of several timed loops, ours and torch's (single-threaded) in the
    same run; and a tiny MLP's training step divided by its launches. The issue's goal is
    at most 8 µs of Python per eager op."""
    import torch

    import dl
    import dl.nn.functional as F
    rng = np.random.default_rng(0)
    an, bn = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2))
    a, b = dl.tensor(an, device=device), dl.tensor(bn, device=device)
    ta, tb = torch.tensor(an), torch.tensor(bn)
    w = dl.tensor(bn, device=device, requires_grad=True)
    tw = torch.tensor(bn, requires_grad=True)

    def best(fn, n=300, trials=7):
        for _ in range(50):
            fn()
        out = float("inf")
        for _ in range(trials):
            t = time.perf_counter()
            for _ in range(n):
                fn()
            out = min(out, (time.perf_counter() - t) / n)
        return out * 1e6

    ops = {
        "a + b": (lambda: (a + b)._materialise(), lambda: ta + tb),
        "relu": (lambda: F.relu(a)._materialise(), lambda: torch.relu(ta)),
        "a @ b": (lambda: a @ b, lambda: ta @ tb),
        "F.linear": (lambda: F.linear(a, b), lambda: torch.nn.functional.linear(ta, tb)),
        "sum(dim=1)": (lambda: a.sum(1), lambda: ta.sum(1)),
        "softmax": (lambda: F.softmax(a, -1), lambda: torch.softmax(ta, -1)),
        "(a @ w).sum().backward()": (lambda: (a @ w).sum().backward(),
                                     lambda: (ta @ tw).sum().backward()),
    }
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows = {name: {"ours_us": best(o), "torch_us": best(t)} for name, (o, t) in ops.items()}
    finally:
        torch.set_num_threads(threads)
    return {"device": device, "ops": rows}


def eager_markdown(res: dict) -> str:
    out = ["", f"Eager `dl` op on 8x8 tensors (`{res['device']}`): Python per op "
           "(goal ≤ 8 µs), torch single-threaded beside it", "",
           "| op | ours µs | torch µs |", "|---|---|---|"]
    out += [f"| {k} | {v['ours_us']:.1f} | {v['torch_us']:.1f} |" for k, v in res["ops"].items()]
    return "\n".join(out) + "\n"


def beside_markdown(rows: list) -> str:
    out = ["", "| runtime | add, f32 lines of 4 | GELU (best line size) | launch (cache hit) | "
           "launch + sync |", "|---|---|---|---|---|"]
    for r in rows:
        if "unavailable" in r:
            out.append(f"| `{r['runtime']}`: {r['unavailable']} | | | | |")
            continue
        device = r["device"].replace("|", "/")[:48]
        out.append(f"| `{r['runtime']}` on {device}, {r['n'] >> 20}M | "
                   f"{r['add_ms']:.2f} ms ({r['add_GBps']:.1f} GB/s) | {r['gelu_ms']:.2f} ms "
                   f"({r['gelu_GBps']:.1f} GB/s, lines of {r['gelu_line_size']}) | "
                   f"{r['launch_us']:.1f} µs | "
                   f"{r['launch_sync_us']:.1f} µs |")
    return "\n".join(out) + "\n"


def to_markdown(res: dict) -> str:
    m = res["machine"]
    lo, cc, add, ge = res["launch"], res["cold"], res["add"], res["gelu"]
    rows = [
        f"# Benchmarks on {m['cpu']} ({m['cores']} cores)", "",
        f"Runtime `{res['runtime']}`; Python {m['python']}, NumPy {m['numpy']}; "
        f"{res['date']}. Medians after warm-up. Command: `python bench/run.py`.", "",
        "| benchmark | ours | peer | ratio | goal |", "|---|---|---|---|---|",
        f"| launch overhead, cache hit, 3 args | {lo['ours_us']:.2f} µs | "
        + (f"numba {lo['numba_us']:.2f} µs" if lo.get("numba_us") else "numba not installed")
        + f" / np.add {lo['numpy_add_us']:.2f} µs | "
        + (f"{lo['ratio_vs_numba']:.2f}x numba" if "ratio_vs_numba" in lo else "–")
        + " | ≤ 3x numba |",
        f"| cold compile to first result | {cc['ours_cold_ms']:.1f} ms | numba "
        f"{cc.get('numba_cold_ms', float('nan')):.1f} ms | "
        f"{cc.get('ratio_cold_vs_numba', float('nan')):.2f}x | ≤ 50 ms |",
        f"| first result from the disk cache | {cc['ours_disk_cache_ms']:.1f} ms | | | ≤ 5 ms |",
        f"| `import cube` (not in the two rows above) | {cc['import_cube_ms']:.1f} ms | | | |",
        f"| add, {add['n'] >> 20}M f32 | {add['ours_GBps']:.1f} GB/s "
        f"({add['ours_pct_of_copy']:.0f}% of copy {add['copy_GBps']:.1f} GB/s) | "
        f"np.add {add['numpy_GBps']:.1f} GB/s | {add['ratio_vs_numpy']:.2f}x | ≥ 0.9x |",
        f"| fused GELU, {ge['n'] >> 20}M f32, lines of {ge['line_size']} | {ge['ours_ms']:.2f} ms "
        f"({ge['ours_GBps']:.1f} GB/s, {ge['pct_of_copy']:.0f}% of copy; the memory roofline "
        f"is {ge['roofline_ms']:.2f} ms) | torch {ge.get('torch_ms') or float('nan'):.2f} ms | "
        f"{ge.get('speedup_vs_torch', float('nan')):.2f}x faster | ≥ 4x |",
    ]
    return "\n".join(rows) + "\n"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runtime", default="cpu")
    p.add_argument("--quick", action="store_true", help="smaller sizes, no result files")
    p.add_argument("--beside", default="opencl,wgpu,wgpu-spirv",
                   help="comma-separated runtimes timed for add/GELU beside the main one")
    a = p.parse_args()
    rt = cb.runtime(a.runtime)
    n = (1 << 22) if a.quick else (64 << 20)
    res = {"machine": machine(), "runtime": rt.name, "date": time.strftime("%Y-%m-%d")}
    res["launch"] = bench_launch_overhead(rt)
    print("launch", res["launch"], flush=True)
    res["cold"] = bench_cold_compile(rt.name, runs=2 if a.quick else 5)
    print("cold", res["cold"], flush=True)
    res["add"] = bench_add_bandwidth(rt, n)
    print("add", res["add"], flush=True)
    res["gelu"] = bench_gelu(rt, n, res["add"]["copy_GBps"])
    print("gelu", res["gelu"], flush=True)
    beside_n = (1 << 20) if a.quick else (16 << 20)
    res["beside"] = [bench_beside(name, beside_n) for name in filter(None, a.beside.split(","))]
    print("beside", res["beside"], flush=True)
    res["eager"] = bench_eager_python(rt.name)
    print("eager", res["eager"], flush=True)
    md = to_markdown(res) + beside_markdown(res["beside"]) + eager_markdown(res["eager"])
    print(md)
    if not a.quick:
        out = ROOT / "bench" / "results" / res["machine"]["slug"]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(res, indent=2))
        out.with_suffix(".md").write_text(md)


if __name__ == "__main__":
    main()

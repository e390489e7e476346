"""GELU time and first-launch time per runtime, for comparing two trees in turn:

    PYTHONPATH=TREE python bench/paired_lowering.py TREE

prints JSON (median ms of 9 runs after 2 warm-ups; the first launch includes the frontend,
passes, lowering, code generation and the vendor compile, with an empty kernel cache).
bench/results/amd-epyc-2c-stop20-lowering.md has the numbers of stop 20."""
from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

os.environ["CUBE_CACHE_DIR"] = tempfile.mkdtemp()
sys.path.insert(0, os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "examples"))

import gelu  # noqa: E402

import cube as cb  # noqa: E402


def median_ms(fn, repeat: int = 9, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


def gelu_run(rt, n: int, line: int):
    x = rt.from_numpy(np.random.default_rng(0).standard_normal(n).astype(np.float32))
    y = rt.empty(n)

    def run():
        gelu.gelu_kernel.launch(rt, (n // line + 255) // 256, 256, inp=x.lines(line),
                                out=y.lines(line))
        rt.sync()
    return run


def main() -> None:
    out = {}
    for name in ("cpu", "opencl", "wgpu"):
        try:
            rt = cb.runtime(name)
        except cb.RuntimeUnavailable:
            continue
        run = gelu_run(rt, 1 << 22, 16 if name == "opencl" else 4)
        t = time.perf_counter()
        run()
        first = (time.perf_counter() - t) * 1e3
        out[name] = {"gelu_ms": median_ms(run), "first_launch_ms": first}
    print(json.dumps(out))


if __name__ == "__main__":
    main()

"""Where an eager dl op's Python goes on one device: each op of `bench/run.py`'s eager table
(8x8 tensors, so the kernels take well under a microsecond) run `--calls` times after a
warm-up, timed, then profiled (cProfile, functions by own time).

    python bench/eager_profile.py [--device cpu] [--calls 3000] [--top 18]

Prints per op: microseconds a call (unprofiled) and the profile's top functions. Writes no
files."""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dl  # noqa: E402
import dl.nn.functional as F  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--top", type=int, default=18)
    a = p.parse_args()
    rng = np.random.default_rng(0)
    an, bn = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2))
    x, y = dl.tensor(an, device=a.device), dl.tensor(bn, device=a.device)
    w = dl.tensor(bn, device=a.device, requires_grad=True)
    ops = {
        "a + b": lambda: (x + y)._materialise(),
        "a @ b": lambda: x @ y,
        "F.linear": lambda: F.linear(x, y),
        "softmax": lambda: F.softmax(x, -1),
        "(a @ w).sum().backward()": lambda: (x @ w).sum().backward(),
    }
    for name, fn in ops.items():
        for _ in range(200):
            fn()
        dl.devices.get(a.device).rt.sync()
        t = time.perf_counter()
        for _ in range(a.calls):
            fn()
        us = (time.perf_counter() - t) / a.calls * 1e6
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(a.calls):
            fn()
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(a.top)
        body = out.getvalue()
        body = body[body.index("ncalls"):] if "ncalls" in body else body
        print(f"## {name} on {a.device}: {us:.1f} us a call\n{body}", flush=True)


if __name__ == "__main__":
    main()

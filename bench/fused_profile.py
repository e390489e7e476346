"""Where a Transformer encoder layer's fused elementwise time goes: every fused kernel of a
fwd+bwd step (b8 s128 d256 h4, dropout 0) with its graph, output shape and strides, kernel
kind (L: lines, s: one element a unit) and milliseconds a step. Dispatch plans are off so
each launch goes through the fusion launchers, which are timed (Python included).

    python bench/fused_profile.py [--steps N]

Prints a table; writes no files."""
from __future__ import annotations

import argparse
import collections
import importlib
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dl  # noqa: E402
import dl.kernels.plan as plan  # noqa: E402
from dl import nn  # noqa: E402

M = importlib.import_module("dl.fusion.materialise")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10)
    steps = p.parse_args().steps
    x = np.random.default_rng(0).standard_normal((8, 128, 256), np.float32)
    layer = nn.TransformerEncoderLayer(256, 4, dropout=0.0, batch_first=True)
    xx = dl.tensor(x, requires_grad=True)

    def step():
        for q in layer.parameters():
            q.grad = None
        layer(xx).sum().backward()

    plan.enabled = False
    for _ in range(5):
        step()
    stats: dict = collections.defaultdict(list)

    def timed(fn, kind):
        def run(g, *a, **k):
            t = time.perf_counter()
            r = fn(g, *a, **k)
            out = (a[2] if kind == "s" else a[1])[0]
            key = (kind, ",".join(d[0] for d in g.nodes_desc)[:48], tuple(out.shape),
                   tuple(out._strides), len(g.leaves))
            stats[key].append(time.perf_counter() - t)
            return r
        return run

    M._launch, M._launch_lines = timed(M._launch, "s"), timed(M._launch_lines, "L")
    for _ in range(steps):
        step()
    total = 0.0
    print(f"{'':2}{'graph':48} {'output':18} {'strides':24} leaves  calls   ms/step")
    for k, v in sorted(stats.items(), key=lambda kv: -sum(kv[1])):
        ms = sum(v) / steps * 1e3
        total += ms
        print(f"{k[0]:2}{k[1]:48} {str(k[2]):18} {str(k[3]):24} {k[4]:6} "
              f"{len(v) / steps:6.1f} {ms:9.3f}")
    print(f"fused elementwise: {total:.2f} ms a step")


if __name__ == "__main__":
    main()

"""add and fused GELU on the OpenCL runtime for several line sizes (medians, GB/s).

    python bench/opencl_lines.py [--n 16777216] [--lines 1,4,8,16] [--cube-dim 256]

Each launch is followed by a sync (launches are asynchronous); results are checked."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

import gelu as g  # noqa: E402
from run import add3, median_time  # noqa: E402

import cube as cb  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runtime", default="opencl")
    p.add_argument("--n", type=int, default=1 << 24)
    p.add_argument("--lines", default="1,4,8,16")
    p.add_argument("--cube-dim", type=int, default=256)
    p.add_argument("--repeat", type=int, default=9)
    a = p.parse_args()
    rt = cb.runtime(a.runtime)
    n, cd = a.n, a.cube_dim
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32) * 3
    y = np.random.default_rng(1).random(n, dtype=np.float32)
    dx, dy = rt.from_numpy(x), rt.from_numpy(y)
    out = rt.empty_like(dx)
    ref = g.reference(x[:1 << 16])
    print(f"{rt.device_id()}  n={n} cube_dim={cd}")
    for line in map(int, a.lines.split(",")):
        grid = ((n // line + cd - 1) // cd,)

        def add(grid=grid, line=line):
            add3.launch(rt, cube_count=grid, cube_dim=(cd,), a=dx.lines(line),
                        b=dy.lines(line), out=out.lines(line))
            rt.sync()

        def gelu(grid=grid, line=line):
            g.gelu_kernel.launch(rt, cube_count=grid, cube_dim=(cd,), inp=dx.lines(line),
                                 out=out.lines(line))
            rt.sync()

        t_add = median_time(add, repeat=a.repeat, warmup=2)
        assert np.array_equal(out.numpy(), x + y)
        t_gelu = median_time(gelu, repeat=a.repeat, warmup=2)
        err = float(np.max(np.abs(out.numpy()[:1 << 16] - ref)))
        print(f"line {line:2d}: add {t_add * 1e3:7.2f} ms {12 * n / t_add / 1e9:6.1f} GB/s | "
              f"gelu {t_gelu * 1e3:7.2f} ms {8 * n / t_gelu / 1e9:6.1f} GB/s "
              f"(max abs err {err:.1e})", flush=True)


if __name__ == "__main__":
    main()

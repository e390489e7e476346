"""Where a dl workload's time goes, kernel by kernel: the workload run eagerly with dispatch
plans off (each launch then goes through its executable), every launch timed by the kernel's
name, after a warm-up (tuning and compiles happen there). CPU launches return when their work
is done, so a launch's wall time is its kernel's time; on CUDA each timed launch synchronises
the stream before and after (so the time includes one launch's overhead, ~5-9 us).

    python bench/kernel_profile.py [--workload transformer|digits|cnn] [--device cpu|cuda]
                                   [--steps 5] [--top 20]

Prints the step's time, the sum over launches and the kernels by total time. Writes no
files. Roofline sums (FLOPs) are the caller's: the names say which kernels are matmuls."""
from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "examples")]

import cube  # noqa: E402
import dl  # noqa: E402
import dl.kernels.plan as plan  # noqa: E402
from dl import nn  # noqa: E402
from runtimes.cpu import CpuExecutable  # noqa: E402

TOTAL: collections.Counter = collections.Counter()
COUNT: collections.Counter = collections.Counter()
TIMING = [False]


def _timed(name: str, fn, sync=None):
    def run(*args):
        if not TIMING[0]:
            return fn(*args)
        if sync is not None:
            sync()
        t = time.perf_counter()
        out = fn(*args)
        if sync is not None:
            sync()
        TOTAL[name] += time.perf_counter() - t
        COUNT[name] += 1
        return out
    return run


def _instrument() -> None:
    """Every CPU executable made from now on times its launches (`launch`, and the prepared
    calls of `prepare`, which a bound launcher re-runs)."""
    init = CpuExecutable.__init__

    def timed_init(self, kernel, *args, **kw):
        init(self, kernel, *args, **kw)
        prepare = self.prepare
        self.launch = _timed(kernel.name, self.launch)

        def timed_prepare(cc, cd, largs):
            call = prepare(cc, cd, largs)
            return None if call is None else _timed(kernel.name, call)
        self.prepare = timed_prepare
    CpuExecutable.__init__ = timed_init


def _instrument_device() -> None:
    """Every CUDA launch is timed between two stream synchronisations."""
    from runtimes.cuda import DeviceExecutable
    launch = DeviceExecutable.launch

    def timed_launch(self, cube_count, cube_dim, args):
        return _timed(self.kernel.name, lambda: launch(self, cube_count, cube_dim, args),
                      self.rt.stream.synchronize)()
    DeviceExecutable.launch = timed_launch


def transformer(device):
    layer = nn.TransformerEncoderLayer(256, 4, dropout=0.0, batch_first=True).to(device)
    x = dl.tensor(np.random.default_rng(0).standard_normal((8, 128, 256), np.float32),
                  requires_grad=True, device=device)

    def step():
        for p in layer.parameters():
            p.grad = None
        layer(x).sum().backward()
    return "TransformerEncoderLayer b8 s128 d256 h4, fwd+bwd", step


def _training(model, x, y, device):
    model.to(device)
    opt = dl.optim.Adam(model.parameters(), lr=1e-3)
    x, y = dl.tensor(x, device=device), dl.tensor(y, device=device)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    return step


def digits(device):
    import train_digits
    xtr, ytr, _, _ = train_digits.load_data()
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))
    return ("digits CNN training step (batch 64, Adam)",
            _training(model, xtr[:64], ytr[:64], device))


def cnn(device):
    """bench/dl_layer.py's CNN (issue 15's): conv16-relu-pool-conv32-relu-pool-linear."""
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((64, 1, 28, 28), np.float32), rng.integers(0, 10, 64)
    return "CNN conv16-relu-pool-conv32-relu-pool-linear, batch 64", _training(model, x, y, device)


WORKLOADS = {"transformer": transformer, "digits": digits, "cnn": cnn}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--workload", choices=sorted(WORKLOADS), default="transformer")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--top", type=int, default=20)
    a = p.parse_args()
    if a.device == "cpu":
        _instrument()
    else:
        _instrument_device()
    plan.enabled = False  # a replayed plan calls its launches' entry points directly
    name, step = WORKLOADS[a.workload](a.device)
    sync = (lambda: None) if a.device == "cpu" else cube.runtime(a.device).sync
    for _ in range(3):
        step()
    sync()
    t = time.perf_counter()
    for _ in range(a.steps):
        step()
    sync()
    plain = (time.perf_counter() - t) / a.steps
    TIMING[0] = True
    t = time.perf_counter()
    for _ in range(a.steps):
        step()
    sync()
    timed = (time.perf_counter() - t) / a.steps
    launched = sum(TOTAL.values()) / a.steps
    print(f"{name}: {plain * 1e3:.2f} ms a step (plans off), {timed * 1e3:.2f} ms timed, "
          f"{launched * 1e3:.2f} ms in {sum(COUNT.values()) // a.steps} launches")
    print("| kernel | ms a step | launches | share of launched |\n|---|---|---|---|")
    for k, v in TOTAL.most_common(a.top):
        print(f"| {k} | {v / a.steps * 1e3:.3f} | {COUNT[k] // a.steps} | "
              f"{v / a.steps / launched:.1%} |")


if __name__ == "__main__":
    main()

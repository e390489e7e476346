"""The dl layer beside PyTorch on the CPU, in one process: medians after warm-up (autotuning
and compiles happen in the warm-up), ours and torch timed in turns (`paired_medians`), ratio =
torch time / our time (> 1: we are faster).

    python bench/dl_layer.py [--quick] [--device cpu] [--only NAME ...]

Prints a table; writes no files."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "examples")]

from run import machine, paired_medians, train_step  # noqa: E402

import dl  # noqa: E402
from dl import nn  # noqa: E402


def _copy_weights(ours: nn.Module, ref: torch.nn.Module, device) -> None:
    ours.load_state_dict({k: dl.tensor(v.detach().numpy(), device=device)
                          for k, v in ref.state_dict().items()})


def _row(name, ours_s, torch_s, note=""):
    r = {"name": name, "ours_ms": ours_s * 1e3, "torch_ms": torch_s * 1e3,
         "ratio": torch_s / ours_s, "note": note}
    print(json.dumps(r), flush=True)
    return r


def _captured_note(captured) -> str:
    return f"replay of {captured.launches} launches vs torch eager"


def _paired_training(name, ours, ref, x, y, device, repeat):
    """Eager and captured training steps of `ours` (two copies: the capture's replays must
    not share parameters with the eager run) beside torch's, Adam in both."""
    ox, oy = dl.tensor(x, device=device), dl.tensor(y, device=device)
    tx, ty = torch.tensor(x), torch.tensor(y)
    run = train_step(ours, dl.optim.Adam(ours.parameters(), lr=1e-3), nn.CrossEntropyLoss(),
                      ox, oy)
    twin = _clone_model(ours, ref, device)
    captured = dl.capture(train_step(twin, dl.optim.Adam(twin.parameters(), lr=1e-3),
                                      nn.CrossEntropyLoss(), ox, oy))
    tstep = train_step(ref, torch.optim.Adam(ref.parameters(), lr=1e-3),
                        torch.nn.CrossEntropyLoss(), tx, ty)
    # three times the turns: a step of a few ms, 5 to a turn, and a shared machine's slow
    # phases last seconds (the digits row read 0.73x and 1.05x in two runs of one hour)
    t_ours, t_cap, t_torch = paired_medians(
        [lambda: run().item(), lambda: captured().item(), lambda: tstep().item()],
        repeat=3 * repeat, warmup=5)
    return [_row(name, t_ours, t_torch),
            _row(name + ", dl.capture", t_cap, t_torch, _captured_note(captured))]


def _clone_model(ours, ref, device):
    import copy
    twin = copy.deepcopy(ours)
    _copy_weights(twin, ref, device)
    return twin


def bench_mlp(device, repeat):
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                              torch.nn.Linear(512, 512), torch.nn.ReLU(),
                              torch.nn.Linear(512, 10))
    # written as a torch user writes it: nn.ReLU() modules, no act= hints (issue 15)
    ours = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))
    ours.to(device)
    _copy_weights(ours, ref, device)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((64, 784), np.float32), rng.integers(0, 10, 64)
    return _paired_training("MLP 784-512-512-10, batch 64, fwd+bwd+Adam", ours, ref, x, y,
                            device, repeat)


def bench_cnn(device, repeat):
    """The issue's CNN: conv16-relu-pool-conv32-relu-pool-linear on 1x28x28, batch 64."""
    torch.manual_seed(0)

    def make(m):
        return m.Sequential(m.Conv2d(1, 16, 3, padding=1), m.ReLU(), m.MaxPool2d(2),
                            m.Conv2d(16, 32, 3, padding=1), m.ReLU(), m.MaxPool2d(2),
                            m.Flatten(), m.Linear(32 * 7 * 7, 10))
    ref, ours = make(torch.nn), make(nn).to(device)
    _copy_weights(ours, ref, device)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((64, 1, 28, 28), np.float32), rng.integers(0, 10, 64)
    return _paired_training("CNN conv16-relu-pool-conv32-relu-pool-linear, 1x28x28, batch 64, "
                            "fwd+bwd+Adam", ours, ref, x, y, device, repeat)


def bench_transformer(device, repeat, quick):
    torch.manual_seed(0)
    b, s, d = (2 if quick else 8), 128, 256
    kw = dict(dropout=0.0, batch_first=True)
    ref = torch.nn.TransformerEncoderLayer(d, 4, **kw)
    ours = nn.TransformerEncoderLayer(d, 4, **kw).to(device)
    _copy_weights(ours, ref, device)
    x = np.random.default_rng(0).standard_normal((b, s, d), np.float32)
    ox, tx = dl.tensor(x, device=device), torch.tensor(x)

    def ours_fwd():
        with dl.no_grad():
            ours(ox).numpy()

    def torch_fwd():
        with torch.no_grad():
            ref(tx)
    @dl.capture
    def ours_fwd_graph():
        with dl.no_grad():
            return ours(ox)

    ref.eval()  # torch's inference fast path in eval, as a user would run it
    t_ours, t_cap, t_torch = paired_medians(
        [ours_fwd, lambda: ours_fwd_graph().numpy(), torch_fwd], repeat=repeat, warmup=3)
    name = f"TransformerEncoderLayer b{b} s{s} d{d} h4, forward"
    rows = [_row(name, t_ours, t_torch, "torch in eval mode"),
            _row(name + ", dl.capture", t_cap, t_torch,
                 _captured_note(ours_fwd_graph) + " (eval mode)")]
    ref.train()
    oxg = dl.tensor(x, device=device, requires_grad=True)
    txg = torch.tensor(x, requires_grad=True)

    def ours_fb():
        for p in ours.parameters():
            p.grad = None
        ours(oxg).sum().backward()

    def torch_fb():
        for p in ref.parameters():
            p.grad = None
        ref(txg).sum().backward()

    @dl.capture
    def ours_fb_graph():
        for p in ours.parameters():
            p.grad = None
        loss = ours(oxg).sum()
        loss.backward()
        return loss
    t_ours, t_cap, t_torch = paired_medians([ours_fb, ours_fb_graph, torch_fb],
                                            repeat=repeat, warmup=3)
    name = f"TransformerEncoderLayer b{b} s{s} d{d} h4, fwd+bwd"
    rows += [_row(name, t_ours, t_torch),
             _row(name + ", dl.capture", t_cap, t_torch, _captured_note(ours_fb_graph))]
    return rows


def bench_digits_step(device, repeat):
    """The digits example's CNN (8x8 images) as a torch user writes it: nn.ReLU() modules
    (the example itself fuses the first Linear's ReLU with act="relu")."""
    import train_digits
    xtr, ytr, _, _ = train_digits.load_data()
    torch.manual_seed(0)

    def make(m):
        return m.Sequential(
            m.Conv2d(1, 16, 3, padding=1), m.BatchNorm2d(16), m.ReLU(), m.MaxPool2d(2),
            m.Conv2d(16, 32, 3, padding=1), m.ReLU(), m.MaxPool2d(2), m.Flatten(),
            m.Linear(128, 64), m.ReLU(), m.Linear(64, 10))
    ref, ours = make(torch.nn), make(nn).to(device)
    _copy_weights(ours, ref, device)
    return _paired_training("digits CNN training step (batch 64, Adam)", ours, ref,
                            xtr[:64], ytr[:64], device, repeat)


def bench_batchnorm(device, repeat, quick):
    """nn.BatchNorm2d then nn.ReLU in training, forward and backward, at a ResNet stage's
    shape, as a torch user writes it (the statistics, the normalisation fused with the ReLU,
    the gradient sums and the input's gradient)."""
    shape = (8 if quick else 32, 64, 56, 56)
    rng = np.random.default_rng(0)
    x, g = rng.standard_normal(shape, np.float32), rng.standard_normal(shape, np.float32)
    ref = torch.nn.Sequential(torch.nn.BatchNorm2d(64), torch.nn.ReLU())
    ours = nn.Sequential(nn.BatchNorm2d(64), nn.ReLU()).to(device)
    ox, og = dl.tensor(x, device=device, requires_grad=True), dl.tensor(g, device=device)
    tx, tg = torch.tensor(x, requires_grad=True), torch.tensor(g)

    def ours_fb():
        ox.grad = None
        ours(ox).backward(og)
        ox.grad.numpy()

    def torch_fb():
        tx.grad = None
        ref(tx).backward(tg)
    t_ours, t_torch = paired_medians([ours_fb, torch_fb], repeat=repeat, warmup=3)
    return [_row(f"BatchNorm2d(64) + ReLU {shape}, fwd+bwd", t_ours, t_torch)]


def bench_fusion(device, repeat, quick):
    n, d = (1024 if quick else 4096), 1024
    rng = np.random.default_rng(0)
    x, b, r = (rng.standard_normal(s, np.float32) for s in ((n, d), (d,), (n, d)))
    ox, ob, orr = (dl.tensor(a, device=device) for a in (x, b, r))
    tx, tb, tr = torch.tensor(x), torch.tensor(b), torch.tensor(r)

    def chain():
        return ((ox + ob).gelu() + orr) * 0.5

    def ours_fused():
        chain()._materialise()

    def ours_unfused():
        with dl.fusion(False):
            chain()._materialise()
    t_f, t_u, t_t = paired_medians(
        [ours_fused, ours_unfused, lambda: (torch.nn.functional.gelu(tx + tb) + tr) * 0.5],
        repeat=repeat, warmup=3)
    with dl.count_kernels() as cf:
        ours_fused()
    with dl.count_kernels() as cu:
        ours_unfused()
    return [_row(f"gelu(x + bias) + residual, x0.5 ({n}x{d}), fused", t_f, t_t,
                 f"{cf.launches} kernel; {t_u / t_f:.2f}x faster than unfused"),
            _row(f"gelu(x + bias) + residual, x0.5 ({n}x{d}), unfused", t_u, t_t,
                 f"{cu.launches} kernels")]


from gelu import gelu  # noqa: E402  # examples/gelu.py's @cube helper: 0.5 x (1 + erf(x/√2))

import cube as cb  # noqa: E402
from cube import ABSOLUTE_POS, Array, Line, f32  # noqa: E402


@cb.cube(launch=True)
def gelu_checked(inp: Array[Line[f32]], out: Array[Line[f32]]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = gelu(inp[i])


@cb.cube(launch=True, unchecked=True)
def gelu_unchecked(inp: Array[Line[f32]], out: Array[Line[f32]]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = gelu(inp[i])


def bench_gelu_16m(device, repeat, quick):
    """F.gelu of 16M f32 as a dl user writes it (the fused kernel, timed with its output
    allocation and materialisation), beside the same math as a hand-written @cube kernel
    over lines (as examples/gelu.py; checked, and unchecked as a user tuning it writes it;
    the best of line sizes 1..16, its output allocated per call too) and torch."""
    n = 1 << (20 if quick else 24)
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    ox, tx = dl.tensor(x, device=device), torch.tensor(x)
    rt = ox.device.rt
    dx = rt.from_numpy(x)

    def hand(kernel, line):
        def run():
            dy = rt.empty_like(dx)
            kernel.launch(rt, cube_count=(-(-n // line // 256),), cube_dim=(256,),
                          inp=dx.lines(line), out=dy.lines(line))
            rt.sync()
        return run
    hands = {(k.fn.__name__, line): hand(k, line) for k in (gelu_checked, gelu_unchecked)
             for line in (1, 4, 8, 16)}
    ts = paired_medians([lambda: dl.nn.functional.gelu(ox)._materialise(),
                         *hands.values(),
                         lambda: torch.nn.functional.gelu(tx)], repeat=repeat, warmup=3)
    t_ours, t_torch = ts[0], ts[-1]
    (kind, line), t_hand = min(zip(hands, ts[1:-1]), key=lambda kv: kv[1])
    got = dl.nn.functional.gelu(ox).numpy()
    ref = torch.nn.functional.gelu(tx.double()).numpy()
    err = float(np.max(np.abs(got - ref)))
    return [_row(f"F.gelu {n >> 20}M f32: dl fused vs hand-written @cube (best line size) "
                 f"vs torch", t_ours, t_torch,
                 f"hand-written {kind} lines of {line}: {t_hand * 1e3:.2f} ms, dl at "
                 f"{t_hand / t_ours:.2f}x of it; max abs err vs f64 {err:.1e}")]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    p.add_argument("--only", nargs="*", default=None,
                   help="mlp cnn transformer digits bn fusion gelu16m")
    a = p.parse_args()
    repeat = 5 if a.quick else 15
    m = machine()
    print(f"# {m['cpu']} ({m['cores']} cores), torch {torch.__version__} with "
          f"{torch.get_num_threads()} threads, dl on {a.device}", flush=True)
    benches = {"mlp": lambda: bench_mlp(a.device, repeat),
               "cnn": lambda: bench_cnn(a.device, repeat),
               "transformer": lambda: bench_transformer(a.device, repeat, a.quick),
               "digits": lambda: bench_digits_step(a.device, repeat),
               "bn": lambda: bench_batchnorm(a.device, repeat, a.quick),
               "fusion": lambda: bench_fusion(a.device, repeat, a.quick),
               "gelu16m": lambda: bench_gelu_16m(a.device, repeat, a.quick)}
    rows = []
    for name, fn in benches.items():
        if not a.only or name in a.only:
            rows += fn()
    md = ["| benchmark | ours ms | torch ms | torch / ours | note |", "|---|---|---|---|---|"]
    md += [f"| {r['name']} | {r['ours_ms']:.2f} | {r['torch_ms']:.2f} | {r['ratio']:.2f}x | "
           f"{r['note']} |" for r in rows]
    print("\n".join(md))


if __name__ == "__main__":
    main()

"""The optimiser step alone, ours beside torch.optim, in one process: the multi-tensor step
(foreach, the default) and the per-parameter kernels (foreach=False, what every step launched
before), torch's foreach=True and fused=True, timed in turns (`paired_medians`), medians
after warm-up. Gradients are set once (the step reads them; nothing else runs).

    python bench/optim_step.py [--quick] [--device cpu] [--out FILE.md]

Models: the MLP 784-512-512-10 (6 parameters) and 15 Linear(128, 128) layers (30). The
`gather` row times what a flat-parameter design (torch's flat params) would add to each
step: copying every gradient into one flat buffer (dl.cat of the flattened gradients). The
last row is a whole eager training step of the MLP with each optimiser."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from run import machine, paired_medians, train_step  # noqa: E402

import dl  # noqa: E402

MODELS = {
    "mlp": [(512, 784), (512,), (512, 512), (512,), (10, 512), (10,)],
    "deep30": [s for _ in range(15) for s in [(128, 128), (128,)]],
}
RULES = {
    "Adam": (lambda ps, fe: dl.optim.Adam(ps, lr=1e-3, foreach=fe),
             lambda ps, **k: torch.optim.Adam(ps, lr=1e-3, **k)),
    "SGD momentum": (lambda ps, fe: dl.optim.SGD(ps, lr=1e-2, momentum=0.9, foreach=fe),
                     lambda ps, **k: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, **k)),
}


def _ours(shapes, make, foreach, device):
    rng = np.random.default_rng(0)
    ps = []
    for s in shapes:
        p = dl.nn.Parameter(dl.tensor(rng.standard_normal(s).astype(np.float32), device=device))
        p.grad = dl.tensor(rng.standard_normal(s).astype(np.float32) * 1e-2, device=device)
        ps.append(p)
    opt = make(ps, foreach)
    return opt.step, ps


def _theirs(shapes, make, **kw):
    rng = np.random.default_rng(0)
    ps = []
    for s in shapes:
        p = torch.nn.Parameter(torch.from_numpy(rng.standard_normal(s).astype(np.float32)))
        p.grad = torch.from_numpy(rng.standard_normal(s).astype(np.float32) * 1e-2)
        ps.append(p)
    return make(ps, **kw).step


def _training(foreach, device):
    """One eager fwd+bwd+Adam step of the MLP (batch 64), as bench/dl_layer.py's row."""
    rng = np.random.default_rng(0)
    model = dl.nn.Sequential(dl.nn.Linear(784, 512), dl.nn.ReLU(), dl.nn.Linear(512, 512),
                             dl.nn.ReLU(), dl.nn.Linear(512, 10))
    model.to(device)
    opt = dl.optim.Adam(model.parameters(), lr=1e-3, foreach=foreach)
    x = dl.tensor(rng.standard_normal((64, 784)).astype(np.float32), device=device)
    y = dl.tensor(rng.integers(0, 10, 64), device=device)
    step = train_step(model, opt, dl.nn.CrossEntropyLoss(), x, y)
    return lambda: step().item()


def _torch_training(**kw):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, **kw)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((64, 784)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 10, 64))
    step = train_step(model, opt, torch.nn.CrossEntropyLoss(), x, y)
    return lambda: step().item()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=None)
    ap.add_argument("--append", action="store_true", help="add to --out's file")
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="torch.set_num_threads (default: torch's own choice)")
    a = ap.parse_args()
    if a.torch_threads:
        torch.set_num_threads(a.torch_threads)
    repeat = 15 if a.quick else 40
    rows = []
    for model, shapes in MODELS.items():
        for rule, (make, tmake) in RULES.items():
            multi, ps = _ours(shapes, make, None, a.device)
            single, _ = _ours(shapes, make, False, a.device)
            fns = [multi, single, _theirs(shapes, tmake, foreach=True)]
            try:
                fns.append(_theirs(shapes, tmake, fused=True))
            except (RuntimeError, TypeError):  # no fused kernel on this device
                pass
            t = paired_medians(fns, repeat=repeat)
            t += [float("nan")] * (4 - len(t))
            rows.append((f"{rule}, {model} ({len(shapes)} params, "
                         f"{sum(int(np.prod(s)) for s in shapes)} floats)", *t))
            print(rows[-1], flush=True)
        gather, = paired_medians([lambda ps=ps: dl.cat([p.grad.reshape(-1) for p in ps])
                                  ._materialise()], repeat=repeat)
        rows.append((f"gather, {model}", gather, *[float("nan")] * 3))
    t = paired_medians([_training(None, a.device), _training(False, a.device),
                        _torch_training(foreach=True), _torch_training(fused=True)],
                       repeat=repeat, warmup=5)
    rows.append(("MLP training step (fwd+bwd+Adam, batch 64, eager)", *t))
    print(rows[-1], flush=True)
    m = machine()
    lines = [f"# Optimiser step alone: {m['cpu']}, {m['cores']} cores, torch "
             f"{torch.__version__} ({torch.get_num_threads()} threads)", "",
             "`python bench/optim_step.py" + (" --quick" if a.quick else "") +
             (f" --torch-threads {a.torch_threads}" if a.torch_threads else "") + "`: medians "
             "in µs, timed in turns in one process; ratio = torch / ours (> 1: ours "
             "faster). *multi*: one launch per 8 parameters (foreach, the default); "
             "*per-param*: one launch each (foreach=False, the step before).", "",
             "| step | ours multi | ours per-param | torch foreach | torch fused | "
             "per-param / multi | torch foreach / multi | torch fused / multi |",
             "|---|---|---|---|---|---|---|---|"]
    def us(x: float) -> str:
        return "" if x != x else f"{x * 1e6:.1f}"

    def ratio(x: float, mu: float) -> str:
        return "" if x != x else f"{x / mu:.2f}x"
    for name, mu, pp, tf, tu in rows:
        lines.append(f"| {name} | {us(mu)} | {us(pp)} | {us(tf)} | {us(tu)} | "
                     f"{ratio(pp, mu)} | {ratio(tf, mu)} | {ratio(tu, mu)} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        out = Path(a.out)
        out.write_text((out.read_text() + "\n" if out.exists() and a.append else "") + text)


if __name__ == "__main__":
    main()

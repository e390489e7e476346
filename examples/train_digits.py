"""Train a small CNN on scikit-learn's bundled handwritten digits (8x8, no download) with the
`dl` layer, save the weights as safetensors, reload them and check the accuracy again.

    python examples/train_digits.py [--epochs 15] [--device cpu] [--out digits.safetensors]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import dl
from dl import nn


def build_model(device="cpu") -> nn.Module:
    dl.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.MaxPool2d(2),                                    # 16 x 4 x 4
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2),                                    # 32 x 2 x 2
        nn.Flatten(),
        nn.Linear(128, 64, act="relu"),                     # ReLU in the matmul's epilogue
        nn.Linear(64, 10),
    ).to(device)


def load_data(seed: int = 0):
    """(train_x, train_y, test_x, test_y) as NumPy: images scaled to [0, 1], 20% held out."""
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]  # (N, 1, 8, 8)
    y = d.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    cut = int(len(x) * 0.8)
    tr, te = order[:cut], order[cut:]
    return x[tr], y[tr], x[te], y[te]


def progress(epoch: int, epochs: int, step: int, steps: int, loss: float, t0: float) -> None:
    """A one-line progress bar on stderr (plain text: no tqdm)."""
    width = 24
    done = int(width * step / steps)
    sys.stderr.write(f"\repoch {epoch + 1:>2}/{epochs} [{'#' * done}{'.' * (width - done)}] "
                     f"{step:>3}/{steps} loss {loss:.4f} {time.perf_counter() - t0:5.1f}s")
    if step == steps:
        sys.stderr.write("\n")
    sys.stderr.flush()


def loss_step(model, opt, loss_fn, xb, yb) -> dl.Tensor:
    """One training step; returns the loss as a tensor (what dl.capture can replay)."""
    opt.zero_grad()
    loss = loss_fn(model(xb), yb)
    loss.backward()
    opt.step()
    return loss


def train_step(model, opt, loss_fn, xb, yb) -> float:
    return loss_step(model, opt, loss_fn, xb, yb).item()


@dl.no_grad()
def accuracy(model, x: np.ndarray, y: np.ndarray, device="cpu", batch: int = 512) -> float:
    model.eval()
    correct = 0
    for i in range(0, len(x), batch):
        pred = model(dl.tensor(x[i:i + batch], device=device)).argmax(1)
        correct += int((pred == dl.tensor(y[i:i + batch], device=device)).sum().item())
    model.train()
    return correct / len(x)


def train(epochs: int = 15, device: str = "cpu", batch: int = 64, lr: float = 3e-3,
          max_steps: int | None = None, quiet: bool = False, capture: bool = True):
    """Returns (model, losses, test accuracy, seconds). With `capture`, the step's launches
    are recorded once (dl.capture) and replayed for every later batch."""
    xtr, ytr, xte, yte = load_data()
    model = build_model(device)
    opt = dl.optim.Adam(model.parameters(), lr=lr)
    sched = dl.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    loss_fn = nn.CrossEntropyLoss()
    rng = np.random.default_rng(1)
    steps = len(xtr) // batch
    losses, t0 = [], time.perf_counter()

    def step(xb, yb):
        return loss_step(model, opt, loss_fn, xb, yb)
    if capture:
        step = dl.capture(step)
    for epoch in range(epochs):
        order = rng.permutation(len(xtr))
        for s in range(steps):
            idx = order[s * batch:(s + 1) * batch]
            losses.append(step(dl.tensor(xtr[idx], device=device),
                               dl.tensor(ytr[idx], device=device)).item())
            if not quiet and (s % 4 == 3 or s + 1 == steps):
                progress(epoch, epochs, s + 1, steps, losses[-1], t0)
            if max_steps is not None and len(losses) >= max_steps:
                return model, losses, None, time.perf_counter() - t0
        sched.step()
    seconds = time.perf_counter() - t0
    return model, losses, accuracy(model, xte, yte, device), seconds


def main(argv=None) -> float:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=None, help="where to save the weights (.safetensors)")
    ap.add_argument("--no-capture", action="store_true",
                    help="run every step eagerly (no dl.capture replay)")
    args = ap.parse_args(argv)
    model, losses, acc, seconds = train(args.epochs, args.device, capture=not args.no_capture)
    how = "eager steps" if args.no_capture else "captured steps"
    print(f"trained {args.epochs} epochs ({len(losses)} steps) in {seconds:.1f} s on "
          f"{args.device} ({how}): loss {losses[0]:.3f} -> {losses[-1]:.3f}, "
          f"test accuracy {acc * 100:.1f}%")
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp()) / "digits.safetensors"
    dl.save_file(model.state_dict(), str(out))
    again = build_model(args.device)
    again.load_state_dict(dl.load_file(str(out), device=args.device))
    _, _, xte, yte = load_data()
    acc2 = accuracy(again, xte, yte, args.device)
    print(f"saved {out} ({out.stat().st_size // 1024} KiB), reloaded: test accuracy "
          f"{acc2 * 100:.1f}%")
    if acc2 != acc:
        raise SystemExit("the reloaded model does not give the same accuracy")
    return acc


if __name__ == "__main__":
    main()

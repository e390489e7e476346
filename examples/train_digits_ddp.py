"""Data-parallel training of train_digits.py's CNN over several processes with MPI:

    mpirun -n 2 python examples/train_digits_ddp.py [--epochs 15] [--device cpu]
    (as root: mpirun --allow-run-as-root --oversubscribe -n 2 ...)

Each rank trains on its own share of every batch (dl.distributed.DistributedSampler), the
gradients are averaged across the ranks during backward (DistributedDataParallel), so every
rank holds the same model: the global batch (64) and the schedule are the single-process
example's, and so is the accuracy (98%). The steps are replayed through dl.capture, the
all-reduces included. Rank 0 prints and saves.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import dl
import dl.distributed as dist
from dl import nn
from dl.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_digits import accuracy, build_model, load_data, loss_step  # noqa: E402


def train(epochs: int = 15, device: str = "cpu", batch: int = 64, lr: float = 3e-3,
          capture: bool = True):
    """Returns (model, losses, test accuracy, seconds) on every rank (the same model)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    xtr, ytr, xte, yte = load_data()
    model = DistributedDataParallel(build_model(device))
    opt = dl.optim.Adam(model.parameters(), lr=lr)
    sched = dl.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    loss_fn = nn.CrossEntropyLoss()
    sampler = dist.DistributedSampler(range(len(xtr)), seed=1)
    local = batch // world  # each rank's share of the global batch
    steps = len(sampler) // local
    losses, t0 = [], time.perf_counter()

    def step(xb, yb):
        return loss_step(model, opt, loss_fn, xb, yb)
    if capture:
        step = dl.capture(step)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        order = np.fromiter(sampler, np.int64)
        for s in range(steps):
            idx = order[s * local:(s + 1) * local]
            loss = step(dl.tensor(xtr[idx], device=device), dl.tensor(ytr[idx], device=device))
            losses.append(loss.item())
        sched.step()
        if rank == 0:
            print(f"epoch {epoch + 1:>2}/{epochs}: loss {np.mean(losses[-steps:]):.4f} "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)
    seconds = time.perf_counter() - t0
    return model.module, losses, accuracy(model.module, xte, yte, device), seconds


def main(argv=None) -> float:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--backend", default="mpi", help="mpi, or nccl for --device cuda")
    ap.add_argument("--out", default=None, help="where rank 0 saves the weights")
    ap.add_argument("--no-capture", action="store_true")
    args = ap.parse_args(argv)
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    model, losses, acc, seconds = train(args.epochs, args.device,
                                        capture=not args.no_capture)
    # every rank must hold the same weights
    flat = dl.tensor(np.concatenate([p.numpy().ravel() for p in model.parameters()]))
    mx = dl.tensor(flat.numpy().copy())
    dist.all_reduce(mx, op=dist.ReduceOp.MAX)
    same = bool(np.array_equal(mx.numpy(), flat.numpy()))
    if rank == 0:
        print(f"trained {args.epochs} epochs ({len(losses)} steps of {64 // world} samples "
              f"per rank) on {world} ranks in {seconds:.1f} s: loss {losses[0]:.3f} -> "
              f"{losses[-1]:.3f}, test accuracy {acc * 100:.1f}%, ranks "
              f"{'identical' if same else 'DIFFER'}")
        if args.out:
            dl.save_file(model.state_dict(), args.out)
    dist.destroy_process_group()
    if not same:
        raise SystemExit("the ranks' models differ")
    return acc


if __name__ == "__main__":
    main()

"""Random programs of lazy values, views, `detach()` and in-place writes, run on dl and on
torch (the reference: eager, so every value is computed where it is written), compared
after every step that reads and at the end. dl computes elementwise values lazily and
fuses them; these programs check that no ordering of computing, viewing and overwriting
gives a different value from torch's: a lazy value keeps the values it was made from, a view
or a detached alias sees writes to its storage, and one value is one storage.

Budget: CUBE_FUZZ_PROGRAMS programs of 16 steps per runtime (default 60, fixed seeds, so CI
is stable; 1000 with CUBE_SLOW=1)."""
from __future__ import annotations

import os
import random

import numpy as np
import pytest
import torch

import dl

SLOW = bool(os.environ.get("CUBE_SLOW"))
PROGRAMS = int(os.environ.get("CUBE_FUZZ_PROGRAMS", 1000 if SLOW else 60))
STEPS = 16
KINDS = ("ew", "ew2", "detach", "slice", "cols", "T", "clone", "add_", "mul_", "copy_",
         "setitem", "fill_", "read", "sum")
SCALARS = (2.0, -1.0, 0.5, 3.0)


def _program(seed: int) -> list:
    rng = random.Random(seed)
    prog = []
    for _ in range(STEPS):
        kind = rng.choice(KINDS)
        arg = rng.randrange(100) if kind in ("ew2", "copy_") else rng.choice(SCALARS)
        prog.append((kind, rng.randrange(100), arg))
    return prog


def _run(m, prog: list, a0: np.ndarray, dev, skips: set) -> list:
    """Runs prog with module m (dl or torch) over a list of live tensors; returns what it
    read. skips: the steps torch found undefined (a copy between overlapping views),
    which the other run leaves out too."""
    env = [dl.tensor(a0, device=dev) if m is dl else torch.tensor(a0.astype(np.float64))]
    reads = []
    for step, (kind, i, arg) in enumerate(prog):
        t = env[i % len(env)]
        if kind == "ew":
            env.append(t * arg + 1.0)
        elif kind == "ew2":
            u = env[arg % len(env)]
            if u.shape == t.shape:
                env.append(t + u)
        elif kind == "detach":
            env.append(t.detach())
        elif kind == "slice" and t.ndim == 2 and t.shape[0] > 1:
            env.append(t[1:])
        elif kind == "cols" and t.ndim == 2 and t.shape[1] > 2:
            env.append(t[:, 1:3])
        elif kind == "T" and t.ndim == 2:
            env.append(t.T)
        elif kind == "clone":
            env.append(t.clone())
        elif kind == "add_":
            t.add_(arg)
        elif kind == "mul_":
            t.mul_(arg)
        elif kind == "copy_":
            u = env[arg % len(env)]
            if u.shape == t.shape and u is not t:
                if m is torch and \
                        t.untyped_storage().data_ptr() == u.untyped_storage().data_ptr():
                    skips.add(step)
                if step not in skips:
                    t.copy_(u)
        elif kind == "setitem":
            t[0] = arg
        elif kind == "fill_":
            t.fill_(arg)
        elif kind == "read":
            reads.append(np.asarray(t.tolist(), np.float64))
        elif kind == "sum":  # a reduction of a lazy value fuses the graph into its loop
            reads.append(np.asarray(t.sum(0).tolist(), np.float64))
    return reads + [np.asarray(t.tolist(), np.float64) for t in env]


@pytest.mark.parametrize("chunk", range(4))
def test_lazy_values_views_and_writes_match_torch(dev, chunk):
    a0 = (np.arange(12, dtype=np.float32).reshape(3, 4) / 4 + 1)
    for seed in range(chunk, PROGRAMS, 4):
        prog = _program(seed)
        skips: set = set()
        want = _run(torch, prog, a0, None, skips)
        got = _run(dl, prog, a0, dev, skips)
        assert len(got) == len(want), (seed, prog)
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            assert g.shape == w.shape, (seed, k, prog)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5,
                                       err_msg=f"program {seed}, value {k}: {prog}")

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


# ---- the same under autograd -------------------------------------------------------------
GRAD_KINDS = ("ew", "ew2", "mul2", "detach", "slice", "T", "view", "flat", "unsq", "exp",
              "relu", "sum0", "matmul",
              "gather", "index_select", "masked_fill", "cat", "add_", "mul_", "relu_",
              "setitem", "index_set", "index_add_", "copy_", "fill_")


def _grad_program(seed: int) -> list:
    rng = random.Random(10_000 + seed)
    prog = []
    for _ in range(12):
        kind = rng.choice(GRAD_KINDS)
        arg = rng.randrange(100) if kind in ("ew2", "mul2", "matmul", "copy_") else \
            rng.choice(SCALARS)
        prog.append((kind, rng.randrange(100), arg))
    return prog


def _grad_run(m, prog: list, a0, b0, dev):
    """prog over two leaves that require grad, then backward of a weighted sum of every
    value that requires grad: ("ok", values, leaf gradients) or ("raise", message). An
    in-place write to a leaf that requires grad is left out (both refuse it)."""
    def leaf(a):
        if m is dl:
            return dl.tensor(a, device=dev, requires_grad=True)
        return torch.tensor(a.astype(np.float64), requires_grad=True)
    def ints(a):
        # (int32 on dl: every runtime has it; torch takes int64 indices)
        return dl.tensor(np.asarray(a, np.int32), device=dev) if m is dl else \
            torch.tensor(np.asarray(a, np.int64))
    leaves = [leaf(a0), leaf(b0)]
    env = list(leaves)
    # whether each value is contiguous in both libraries by construction: a reshape views
    # only those (torch's elementwise results follow their operands' strides, dl's are
    # contiguous, and a reshape of a layout torch left strided copies where dl's views)
    dense = [True, True]
    try:
        for kind, i, arg in prog:
            t = env[i % len(env)]
            u = env[arg % len(env)] if isinstance(arg, int) else None
            td = dense[i % len(env)]
            ud = dense[arg % len(env)] if isinstance(arg, int) else True
            n_before = len(env)
            if kind in ("add_", "mul_", "relu_", "setitem", "index_set", "index_add_", "copy_",
                        "fill_") and t.requires_grad and t.grad_fn is None:
                continue
            if kind == "ew":
                env.append(t * arg + 1.0)
            elif kind == "ew2" and u.shape == t.shape:
                env.append(t + u)
            elif kind == "mul2" and u.shape == t.shape:
                env.append(t * u)
            elif kind == "detach":
                env.append(t.detach())
            elif kind == "slice" and t.ndim == 2 and t.shape[0] > 1:
                env.append(t[1:])
            elif kind == "T" and t.ndim == 2:
                env.append(t.T)
            elif kind == "view" and t.ndim == 2 and td:
                env.append(t.view(t.shape[1], t.shape[0]))
            elif kind == "flat" and t.ndim == 2 and td:
                env.append(t.reshape(-1))
            elif kind == "unsq" and t.ndim == 2:
                env.append(t.unsqueeze(0).squeeze(0).permute(1, 0))
            elif kind == "exp":
                env.append((t * 0.1).exp())
            elif kind == "relu":
                env.append(t.relu())
            elif kind == "sum0" and t.ndim == 2:
                env.append(t.sum(0))
            elif kind == "matmul" and t.ndim == 2 and u.ndim == 2:
                if t.shape[1] == u.shape[0]:
                    env.append(t @ u)
                elif t.shape[1] == u.shape[1]:
                    env.append(t @ u.T)
            elif kind == "gather" and t.ndim == 2:
                env.append(t.gather(1, ints(np.zeros((t.shape[0], 2), np.int64))))
            elif kind == "index_select" and t.ndim == 2:
                env.append(t.index_select(0, ints([t.shape[0] - 1, 0, 0])))
            elif kind == "masked_fill":
                env.append(t.masked_fill(t > 0.2, arg))
            elif kind == "cat" and t.ndim == 2:
                env.append(m.cat([t, t * 2.0], 0))
            elif kind == "index_set" and t.shape[0] > 1:
                t[ints([1, 0])] = arg
            elif kind == "index_add_" and t.ndim == 2 and t.shape[0] > 1:
                t.index_add_(0, ints([1, 1]), (t[:1] * 0.5).expand(2, t.shape[1]))
            elif kind == "add_":
                t.add_(arg)
            elif kind == "mul_":
                t.mul_(arg)
            elif kind == "relu_":
                t.relu_()
            elif kind == "setitem":
                t[0] = arg
            elif kind == "copy_" and u.shape == t.shape and u is not t:
                t.copy_(u * 1.0)
            elif kind == "fill_":
                t.fill_(arg)
            if len(env) > n_before:
                dense.append(kind in ("sum0", "matmul", "gather", "index_select") or (
                    kind not in ("T", "unsq") and td and ud))
        loss = None
        for k, e in enumerate(env):
            if e.requires_grad:
                s = (e * float(k + 1)).sum()
                loss = s if loss is None else loss + s
        loss.backward()
        return ("ok", [np.asarray(e.detach().tolist(), np.float64) for e in env],
                [None if x.grad is None else np.asarray(x.grad.tolist(), np.float64)
                 for x in leaves])
    except RuntimeError as e:
        return ("raise", str(e))


def test_gradients_through_views_and_writes_match_torch(dev):
    """Under autograd: the same values and leaf gradients as torch, or torch's refusal.
    Views made by indexing and by shape ops (`T`, `view`, `flat`, `unsq`) are rebased and
    regenerated as torch's; an alias made by detach() rebases nothing in either. Allowed
    difference: dl gives a gradient
    where torch refuses because a value it saved was overwritten (dl's op kept its own
    copy; the gradient is then the mathematical one)."""
    a0 = (np.sin(np.arange(12) * 1.7 + 0.3) * 0.9).astype(np.float32).reshape(3, 4)
    b0 = (np.cos(np.arange(12) * 2.3 + 0.1) * 0.8).astype(np.float32).reshape(4, 3)
    compared = 0
    for seed in range(PROGRAMS):
        prog = _grad_program(seed)
        want = _grad_run(torch, prog, a0, b0, None)
        got = _grad_run(dl, prog, a0, b0, dev)
        if want[0] == "raise" and got[0] == "ok":
            continue
        assert got[0] == want[0], (seed, prog, got[1] if got[0] == "raise" else want[1])
        if got[0] == "raise":
            continue
        compared += 1
        for k, (g, w) in enumerate(zip(got[1], want[1], strict=True)):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4,
                                       err_msg=f"program {seed}, value {k}: {prog}")
        for k, (g, w) in enumerate(zip(got[2], want[2], strict=True)):
            assert (g is None) == (w is None), (seed, k, prog)
            if g is not None:
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-3,
                                           err_msg=f"program {seed}, leaf {k}: {prog}")
    # (about a third of the programs end in a backward both run; most others are refused
    # by both, a value a backward needs having been overwritten)
    assert compared >= PROGRAMS // 6, compared

"""Comparisons with PyTorch for the dl tests."""
from __future__ import annotations

import numpy as np
import torch

import dl

TOL = {dl.float32: (1e-5, 1e-6), dl.float64: (1e-12, 1e-12), dl.float16: (2e-3, 1e-3),
       dl.bfloat16: (1.6e-2, 1e-2)}


def to_torch(t: dl.Tensor, requires_grad: bool = False) -> torch.Tensor:
    out = torch.from_numpy(np.array(t.numpy()))
    if t.dtype is dl.bfloat16:
        out = out.to(torch.bfloat16)
    return out.requires_grad_(requires_grad)


def close(got, want, dtype=dl.float32, rtol=None, atol=None) -> None:
    r, a = TOL.get(dtype, (0, 0))
    g = got.numpy() if isinstance(got, dl.Tensor) else np.asarray(got)
    w = want.detach().float().numpy() if want.dtype == torch.bfloat16 else \
        want.detach().numpy()
    assert g.shape == w.shape, (g.shape, w.shape)
    np.testing.assert_allclose(g.astype(np.float64) if g.dtype != bool else g,
                               w.astype(np.float64) if w.dtype != bool else w,
                               rtol=rtol if rtol is not None else r,
                               atol=atol if atol is not None else a)


def rand_np(shape, seed=0, dtype=np.float32, low=-2.0, high=2.0):
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, shape).astype(dtype)

"""Entries for the functional losses of dl.nn.functional_losses (issue 17): BCE (with logits),
l1, smooth l1, huber, kl_div and the cosine embedding loss, per reduction and option."""
from __future__ import annotations

import warnings

import numpy as np
import torch
import torch.nn.functional as TF  # noqa: N812

import dl.nn.functional as F  # noqa: N812

from .core import OpInfo, Sample, arr

REDUCTIONS = ("mean", "sum", "none")


def _prob(shape, seed: int = 0) -> np.ndarray:
    return arr(shape, seed, 0.05, 0.95)


def _edge_probs() -> np.ndarray:
    """Probabilities of exactly 0 and 1 (the log clamps at -100) and near them."""
    return np.array([[0.0, 1.0, 1e-7, 1 - 1e-7, 0.5, 0.3]])


def _quiet(fn):
    """The call without PyTorch's (and dl's) warnings: kl_div's 'mean' and the size ones."""
    def run(*a, **k):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*a, **k)
    return run


def _bce(reduction):
    def samples():
        return [
            Sample(_prob((4, 5)), _prob((4, 5), 1), reduction=reduction, grad=(0, 1)),
            Sample(_edge_probs(), np.array([[0.0, 1.0, 1.0, 0.0, 0.5, 1.0]]),
                   reduction=reduction, grad=(0,), desc="probabilities 0 and 1"),
            Sample(_prob((5, 4), 2), _prob((5, 4), 3), reduction=reduction, noncontig=True,
                   grad=(0, 1)),
            Sample(_prob((1, 6, 1), 4), _prob((1, 6, 1), 5), reduction=reduction,
                   desc="size-1 dims", grad=(0, 1)),
            Sample(_prob((3, 4), 6), _prob((3, 4), 7), reduction=reduction,
                   weight=arr((4,), 8, 0.5, 2.0), grad=(0, 1), desc="weight (broadcast)"),
        ]
    return OpInfo(f"binary_cross_entropy_{reduction}",
                  op=lambda x, y, **k: F.binary_cross_entropy(x, y, **k),
                  ref=lambda x, y, **k: TF.binary_cross_entropy(x, y, **k), samples=samples,
                  note="inputs outside [0, 1] are not checked (they give nan; PyTorch raises)")


def _bce_logits(reduction):
    def samples():
        big = np.array([[100.0, -100.0, 30.0, -30.0, 0.0, 1e-3, 17.0, -17.0]])
        tbig = np.array([[0.0, 1.0, 1.0, 0.0, 0.5, 1.0, 0.2, 0.7]])
        return [
            Sample(arr((4, 5), 0, -4, 4), _prob((4, 5), 1), reduction=reduction,
                   pos_weight=arr((5,), 2, 0.5, 3.0), weight=arr((4, 5), 3, 0.5, 2.0),
                   grad=(0, 1), desc="weight, pos_weight"),
            Sample(big, tbig, reduction=reduction, desc="large logits", grad=(0, 1)),
            Sample(arr((4, 5), 4, -4, 4), _prob((4, 5), 5), reduction=reduction,
                   grad=(0, 1)),
            Sample(big, tbig, reduction=reduction, pos_weight=np.full(8, 2.5),
                   desc="large logits, pos_weight", grad=(0, 1)),
            Sample(arr((5, 3), 6, -4, 4), _prob((5, 3), 7), reduction=reduction,
                   noncontig=True, grad=(0, 1)),
            Sample(arr((1, 7, 1), 8), _prob((1, 7, 1), 9), reduction=reduction,
                   desc="size-1 dims", grad=(0, 1)),
        ]
    return OpInfo(f"binary_cross_entropy_with_logits_{reduction}",
                  op=lambda x, y, **k: F.binary_cross_entropy_with_logits(x, y, **k),
                  ref=lambda x, y, **k: TF.binary_cross_entropy_with_logits(x, y, **k),
                  samples=samples)


def _ties() -> tuple:
    """Differences exactly at +-1, +-2 and 0: the branch points of beta / delta 1 and 2."""
    a = np.array([[0.0, 1.0, -1.0, 0.5, 3.0, -2.5, 2.0, -2.0]])
    return a + 0.25, np.full_like(a, 0.25)


def _regression(name, fn, tfn, first: dict, more: list[dict], with_weight=False):
    """Entries of l1 / smooth l1 / huber, one per reduction; option sets (beta, delta) are
    samples: `first` in the two compiled ones, each of `more` in one of the rest."""
    out = []
    for reduction in REDUCTIONS:
        def samples(reduction=reduction):
            k = dict(first, reduction=reduction)
            ss = [
                Sample(arr((4, 5), 0, -3, 3), arr((4, 5), 1, -3, 3), **k),
                Sample(*_ties(), desc="ties at the branch", **k),
                Sample(arr((5, 4), 2, -3, 3), arr((5, 4), 3, -3, 3), noncontig=True, **k),
                Sample(arr((1, 6, 1), 4), arr((1, 6, 1), 5), desc="size-1 dims", **k),
                Sample(arr((3, 4), 6), arr((4,), 7), desc="target broadcast", **k),
            ]
            for j, opts in enumerate(more):  # ties at even positions, else random values
                ko = dict(opts, reduction=reduction)
                ss.append(Sample(*_ties(), desc=f"ties, {opts}", **ko) if j % 2 == 0 else
                          Sample(arr((4, 5), 20 + j, -3, 3), arr((4, 5), 30 + j, -3, 3),
                                 desc=str(opts), **ko))
            if with_weight:
                ss.append(Sample(arr((3, 4), 8), arr((3, 4), 9), weight=arr((3, 4), 10,
                                 0.5, 2.0), desc="weight", grad=(0, 1), **k))
            return ss
        out.append(OpInfo(f"{name}_{reduction}", op=_quiet(fn), ref=_quiet(tfn),
                          samples=samples))
    return out


def _kl(reduction):
    def samples():
        k = dict(reduction=reduction)
        edge_t = np.array([[0.0, 0.0, 0.3, 1.0, 0.5, 0.2]])
        return [
            Sample(np.log(_prob((4, 5), 0)), _prob((4, 5), 1), grad=(0, 1), **k),
            Sample(np.log(_prob((4, 5), 2)), np.log(_prob((4, 5), 3)), log_target=True,
                   grad=(0, 1), desc="log_target", **k),
            Sample(np.log(_prob((5, 4), 4)), _prob((5, 4), 5), noncontig=True, grad=(0, 1),
                   **k),
            Sample(np.log(_prob((1, 6), 8)), edge_t, grad=(0,), desc="target 0 (xlogy)", **k),
            Sample(np.log(_prob((3, 1, 4), 9)), _prob((3, 1, 4), 10), desc="size-1 dims",
                   grad=(0, 1), **k),
        ]
    return OpInfo(f"kl_div_{reduction}",
                  op=_quiet(lambda x, y, **kw: F.kl_div(x, y, **kw)),
                  ref=_quiet(lambda x, y, **kw: TF.kl_div(x, y, **kw)), samples=samples)


def _cosine(reduction):
    def samples():
        k = dict(reduction=reduction)
        tgt = np.array([1.0, -1.0, 1.0, -1.0, -1.0, 1.0])
        a = arr((6, 5), 0)
        # rows 3 and 4: x2 = x1 and x2 = -x1 (cos 1 and -1: the margin's clamp both sides)
        b = arr((6, 5), 1)
        b[3], b[4] = a[3], -a[4]
        itgt = np.array([1, -1, 1, -1, 1], dtype=np.int64)  # no int64 on WGSL: not first
        return [
            Sample(a, b, tgt, margin=0.5, grad=(0, 1), **k),
            Sample(arr((5,), 4), arr((5,), 5), np.array(-1.0), desc="0-d target", grad=(0, 1),
                   **k),
            Sample(a, b, tgt, margin=0.0, grad=(0, 1), desc="margin 0", **k),
            Sample(arr((5, 6), 2), arr((5, 6), 3), itgt, noncontig=True, margin=0.2, **k),
            Sample(arr((1, 1), 6), arr((1, 1), 7), np.array([1], dtype=np.int64),
                   desc="size-1 dims", **k),
        ]
    return OpInfo(f"cosine_embedding_loss_{reduction}",
                  op=lambda a, b, t, **kw: F.cosine_embedding_loss(a, b, t, **kw),
                  ref=lambda a, b, t, **kw: TF.cosine_embedding_loss(a, b, t, **kw),
                  samples=samples)


OPS = [
    *[_bce(r) for r in REDUCTIONS],
    *[_bce_logits(r) for r in REDUCTIONS],
    *_regression("l1_loss", F.l1_loss, TF.l1_loss, {}, [], with_weight=True),
    *_regression("smooth_l1_loss", F.smooth_l1_loss, TF.smooth_l1_loss, {},
                 [{"beta": 0.5}, {"beta": 0.0}, {"beta": 2.0}]),
    *_regression("huber_loss", F.huber_loss, TF.huber_loss, {}, [{"delta": 2.0},
                 {"delta": 0.5}], with_weight=True),
    *[_kl(r) for r in ("batchmean", "mean", "sum", "none")],
    *[_cosine(r) for r in REDUCTIONS],
]

_ = torch  # the references above use torch.nn.functional

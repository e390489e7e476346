"""Entries for the ops dl had before the op table: elementwise, reductions, rows, linalg."""
from __future__ import annotations

import torch

import dl

from .core import OpInfo, Sample, arr

OPS = [
    OpInfo("exp", op=lambda x: dl.exp(x), ref=lambda x: torch.exp(x),
           samples=lambda: [Sample(arr((3, 5))), Sample(arr((4, 6), 1), noncontig=True),
                            Sample(arr((0, 3)), desc="size 0")]),
    OpInfo("sum_dim", op=lambda x, d: dl.sum(x, d), ref=lambda x, d: torch.sum(x, d),
           samples=lambda: [Sample(arr((3, 5)), 1), Sample(arr((4, 6), 1), 0, noncontig=True),
                            Sample(arr((1, 7)), 0, desc="size 1")]),
    OpInfo("softmax", op=lambda x, d: dl.softmax(x, d), ref=lambda x, d: torch.softmax(x, d),
           samples=lambda: [Sample(arr((3, 5)), 1), Sample(arr((4, 6), 1), 0, noncontig=True)]),
]

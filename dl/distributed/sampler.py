"""`DistributedSampler`: each rank's share of a data set's indices, as torch's
`torch.utils.data.distributed.DistributedSampler` (the same padding, drop_last and rank
interleaving; the shuffle is NumPy's permutation seeded with `seed + epoch`, the same on every
rank, so the shares are disjoint, but not torch's order). Call `set_epoch(e)` at the start of
each epoch for a new shuffle."""
from __future__ import annotations

import math

import numpy as np

from . import process_group


class DistributedSampler:
    """Rank `rank`'s indices of `dataset` among `num_replicas` ranks (the process group's by
    default): every rank gets `len(self)` of them; padded by repeating the first indices
    unless `drop_last` drops the tail (see the module)."""

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        if num_replicas is None or rank is None:
            if num_replicas is None:
                num_replicas = process_group.get_world_size()
            if rank is None:
                rank = process_group.get_rank()
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas, self.rank = int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last = shuffle, int(seed), drop_last
        self.epoch = 0
        n = len(dataset)
        if drop_last and n % self.num_replicas:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            indices = np.random.default_rng(self.seed + self.epoch).permutation(n).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            else:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch seeds the shuffle: call it before each epoch's iteration."""
        self.epoch = int(epoch)

"""Datasets, samplers and the DataLoader (torch.utils.data names), and `progress`, a small
tqdm-like progress bar.

    from dl.utils.data import DataLoader, TensorDataset
    ds = TensorDataset(x, y)                                  # dl tensors or NumPy arrays
    for xb, yb in DataLoader(ds, batch_size=32, shuffle=True,
                             generator=dl.Generator().manual_seed(0)):
        ...

Batches are collated into dl tensors: dl tensors are stacked (on a host device through
NumPy, one upload per field), NumPy arrays and numbers become tensors, tuples, lists, dicts
and named tuples are collated field by field (`default_collate`, as PyTorch's).

Shuffling draws its permutation on the host from the sampler's `generator` (a
`dl.Generator`; the default generator, `dl.manual_seed`, without one): each epoch takes a
fresh key from it, so a seed gives the same sequence of epochs (not PyTorch's orders: the
numbers come from NumPy's PCG64 seeded with the generator's key). A `numpy.random.Generator`
is taken as well.

Differences from PyTorch: loading always runs in the calling process (`num_workers`,
`pin_memory`, `prefetch_factor`, `persistent_workers`, `worker_init_fn`, `timeout` are
accepted and ignored); DataLoader's extra `progress` argument wraps each epoch's batches
in `progress()`."""
from __future__ import annotations

import collections.abc as cabc
import math
import os
import sys
import time
import warnings

import numpy as np

from .. import dtypes, ops
from ..ops import random as _random
from ..tensor import Tensor

__all__ = ["BatchSampler", "ConcatDataset", "DataLoader", "Dataset", "IterableDataset",
           "RandomSampler", "Sampler", "SequentialSampler", "Subset", "SubsetRandomSampler",
           "TensorDataset", "default_collate", "default_convert", "progress", "random_split"]


# ---- random orders ------------------------------------------------------------------------
def _rng(generator) -> np.random.Generator:
    """A NumPy generator for one draw (one epoch's order): seeded by a fresh key of the
    dl.Generator (the default one when None), or the NumPy generator itself."""
    if isinstance(generator, np.random.Generator):
        return generator
    gen = _random.default_generator if generator is None else generator
    if not hasattr(gen, "next_key"):
        raise TypeError(f"generator must be a dl.Generator or a numpy.random.Generator, got "
                        f"{type(generator).__name__}")
    return np.random.default_rng(list(gen.next_key()))


def _randperm(n: int, generator) -> list[int]:
    return _rng(generator).permutation(n).tolist()


# ---- datasets -----------------------------------------------------------------------------
class Dataset:
    """A map-style dataset: subclasses define `__getitem__(index)` and usually
    `__len__()`. `a + b` concatenates two datasets."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} does not define __getitem__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is an iterable of samples (subclasses define `__iter__`); the
    DataLoader batches it in order (no sampler or shuffle)."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} does not define __iter__")

    def __add__(self, other):
        raise TypeError("IterableDataset does not support concatenation with +")


class TensorDataset(Dataset):
    """Samples are tuples of the given tensors (dl tensors or NumPy arrays) indexed along
    their first dim, which must have one size."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        n = len(tensors[0])
        if any(len(t) != n for t in tensors):
            raise ValueError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return len(self.tensors[0])


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list:
        """The samples at several indices (the DataLoader fetches a batch through it)."""
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems is not None:
            return getitems([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Several map-style datasets one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = np.cumsum([len(d) for d in self.datasets]).tolist()

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx += len(self)
        k = int(np.searchsorted(self.cumulative_sizes, idx, side="right"))
        start = 0 if k == 0 else self.cumulative_sizes[k - 1]
        return self.datasets[k][idx - start]


def random_split(dataset, lengths, generator=None) -> list[Subset]:
    """Split the dataset into non-overlapping random Subsets of the given lengths (counts
    summing to len(dataset), or fractions summing to 1, the remainder spread round-robin
    as PyTorch does). The order comes from `generator` (see the module docstring)."""
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        for i, c in enumerate(counts):
            if c == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an "
                              f"empty dataset.", stacklevel=2)
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input "
                         "dataset!")
    order = _randperm(n, generator)
    out, pos = [], 0
    for k in lengths:
        out.append(Subset(dataset, order[pos:pos + k]))
        pos += k
    return out


# ---- samplers -----------------------------------------------------------------------------
class Sampler:
    """An iterable of dataset indices (or, for a batch sampler, of lists of indices)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation of the indices each epoch (without replacement), or
    `num_samples` indices drawn with replacement. Orders come from `generator`."""

    def __init__(self, data_source, replacement: bool = False, num_samples: int | None = None,
                 generator=None):
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        """How many indices an epoch yields (the dataset's length unless given)."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, rng = len(self.data_source), _rng(self.generator)
        if self.replacement:
            yield from rng.integers(0, n, self.num_samples).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from rng.permutation(n).tolist()
        yield from rng.permutation(n)[:self.num_samples % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order each epoch."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = list(indices), generator

    def __iter__(self):
        for i in _rng(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class BatchSampler(Sampler):
    """Lists of `batch_size` indices from `sampler`; the last, shorter one is dropped with
    drop_last."""

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


# ---- collation ----------------------------------------------------------------------------
_COLLATE_ERROR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                  "or lists; found {}")


def _stack_tensors(batch: list[Tensor]) -> Tensor:
    t0 = batch[0]
    if any(t.shape != t0.shape for t in batch):
        raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                           f"{[tuple(t.shape) for t in batch]}")
    same = all(t.device == t0.device and t.dtype is t0.dtype for t in batch)
    if same and t0.device.is_host and t0.dtype is not dtypes.bfloat16:
        # one host copy and one upload instead of a copy kernel per sample
        return ops.tensor(np.stack([t.numpy() for t in batch]), dtype=t0.dtype,
                          device=t0.device)
    return ops.stack(batch)


def default_collate(batch):
    """Collate a list of samples into a batch, as PyTorch's default_collate: dl tensors are
    stacked along a new first dim, NumPy arrays and scalars become tensors of their dtype,
    Python floats float64, ints int64 and bools bool tensors; strings stay a list;
    mappings, named tuples and sequences are collated field by field (sequences give a
    list, as PyTorch's)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return _stack_tensors(batch)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "SUO":
            raise TypeError(_COLLATE_ERROR.format(elem.dtype))
        return ops.tensor(np.stack(batch))
    if isinstance(elem, np.generic):
        if elem.dtype.kind in "SUO":
            raise TypeError(_COLLATE_ERROR.format(elem.dtype))
        return ops.tensor(np.array(batch))
    if isinstance(elem, bool):
        return ops.tensor(batch, dtype=dtypes.bool_)
    if isinstance(elem, int):
        return ops.tensor(batch, dtype=dtypes.int64)
    if isinstance(elem, float):
        return ops.tensor(batch, dtype=dtypes.float64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, cabc.Mapping):
        out = {k: default_collate([d[k] for d in batch]) for k in elem}
        try:
            return type(elem)(out)
        except TypeError:
            return out
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a named tuple
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, cabc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(list(s)) for s in zip(*batch)]
    raise TypeError(_COLLATE_ERROR.format(type(elem)))


def default_convert(data):
    """Without batching (batch_size=None): NumPy arrays become tensors, containers are
    converted field by field, anything else is left as is."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "SUO":
        return ops.tensor(data)
    if isinstance(data, np.generic) and data.dtype.kind not in "SUO":
        return ops.tensor(np.asarray(data))
    if isinstance(data, cabc.Mapping):
        out = {k: default_convert(v) for k, v in data.items()}
        try:
            return type(data)(out)
        except TypeError:
            return out
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, cabc.Sequence) and not isinstance(data, (str, bytes)):
        return [default_convert(d) for d in data]
    return data


# ---- the loader ---------------------------------------------------------------------------
class DataLoader:
    """Batches of a dataset (PyTorch's arguments): batch_size (None: no batching), shuffle
    (a RandomSampler with `generator`), sampler, batch_sampler, collate_fn
    (default_collate), drop_last. Map-style datasets go through the sampler; an
    IterableDataset is batched in its own order; a dataset with `__getitems__(indices)`
    fetches each batch's samples in one call (as PyTorch's). `len()` is the number of
    batches.

    `progress`: False (default), True or a description string wraps each epoch in
    `progress()` (a bar on stderr). The worker and memory-pinning arguments are accepted
    and ignored: loading runs in the calling process."""

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler=None, batch_sampler=None, num_workers: int = 0, collate_fn=None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers: bool = False,
                 pin_memory_device: str = "", progress: bool | str = False):
        self.dataset, self.num_workers, self.pin_memory = dataset, num_workers, pin_memory
        self.timeout, self.worker_init_fn, self.generator = timeout, worker_init_fn, generator
        self.progress = progress
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"shuffle option, but got shuffle={shuffle}")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 "sampler and batch_sampler options")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with "
                                 "batch_size, shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle \
                else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.drop_last = batch_size, drop_last
        self.sampler, self.batch_sampler = sampler, batch_sampler
        auto = batch_size is not None or batch_sampler is not None
        self.collate_fn = collate_fn if collate_fn is not None else \
            default_collate if auto else default_convert
        self._auto = auto

    def _batches(self):
        ds, collate = self.dataset, self.collate_fn
        if self._iterable:
            if not self._auto:
                for item in ds:
                    yield collate(item)
                return
            batch = []
            for item in ds:
                batch.append(item)
                if len(batch) == self.batch_size:
                    yield collate(batch)
                    batch = []
            if batch and not self.drop_last:
                yield collate(batch)
            return
        if self.batch_sampler is not None:
            getitems = getattr(ds, "__getitems__", None)  # a dataset's batched fetch
            for idx in self.batch_sampler:
                yield collate(getitems(idx) if getitems else [ds[i] for i in idx])
        else:
            for i in self.sampler:
                yield collate(ds[i])

    def __iter__(self):
        it = self._batches()
        if self.progress:
            desc = self.progress if isinstance(self.progress, str) else None
            try:
                total = len(self)
            except TypeError:
                total = None
            return iter(progress(it, desc=desc, total=total))
        return it

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)  # TypeError when the dataset has no length, as PyTorch's
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)


# ---- progress -----------------------------------------------------------------------------
def _fmt_time(s: float) -> str:
    s = int(s)
    m, s = divmod(s, 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class progress:  # noqa: N801  (used as a function, like tqdm)
    """Iterate over `iterable` while drawing a progress bar on stderr, tqdm-style:

        for xb, yb in progress(loader, desc="epoch 1"):
            ...
            bar.set_postfix(loss=...)   # with `bar = progress(...)`: extra text on the bar

    On a terminal the line is redrawn in place at most every `mininterval` seconds; on
    anything else (a pipe, a log file) only the final line is written, once. `disable=True`
    writes nothing (the environment variable DL_PROGRESS=0 disables every bar). total
    defaults to len(iterable) when it has one. No dependency."""

    def __init__(self, iterable=None, desc: str | None = None, total: int | None = None,
                 file=None, disable: bool = False, mininterval: float = 0.1,
                 unit: str = "it", leave: bool = True, width: int = 24):
        self.iterable, self.desc, self.unit, self.leave = iterable, desc, unit, leave
        if total is None and iterable is not None:
            try:
                total = len(iterable)
            except TypeError:
                total = None
        self.total, self.n, self.width, self.mininterval = total, 0, width, mininterval
        self.file = sys.stderr if file is None else file
        self.disable = disable or os.environ.get("DL_PROGRESS") == "0"
        isatty = getattr(self.file, "isatty", None)
        self.tty = bool(isatty and isatty())
        self.postfix = ""
        self.start = self._last = time.perf_counter()
        self._closed = False

    def __len__(self) -> int:
        return self.total if self.total is not None else len(self.iterable)

    def __iter__(self):
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def update(self, n: int = 1) -> None:
        """Advance the bar by n items."""
        self.n += n
        now = time.perf_counter()
        if self.tty and not self.disable and now - self._last >= self.mininterval:
            self._last = now
            self._draw(now)

    def set_postfix(self, **kwargs) -> None:
        """Text after the bar: `key=value` pairs (floats with 4 significant digits)."""
        self.postfix = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                 for k, v in kwargs.items())

    def set_description(self, desc: str) -> None:
        """Replace the text before the bar."""
        self.desc = desc

    def line(self, now: float | None = None) -> str:
        """The bar's current text."""
        now = time.perf_counter() if now is None else now
        dt = now - self.start
        rate = self.n / dt if dt > 0 else 0.0
        head = f"{self.desc}: " if self.desc else ""
        if self.total:
            frac = min(1.0, self.n / self.total)
            done = int(self.width * frac)
            eta = (self.total - self.n) / rate if rate > 0 else 0.0
            body = (f"{int(frac * 100):3d}%|{'#' * done}{'.' * (self.width - done)}| "
                    f"{self.n}/{self.total} [{_fmt_time(dt)}<{_fmt_time(eta)}, "
                    f"{rate:.2f}{self.unit}/s]")
        else:
            body = f"{self.n}{self.unit} [{_fmt_time(dt)}, {rate:.2f}{self.unit}/s]"
        return head + body + (f" {self.postfix}" if self.postfix else "")

    def _draw(self, now=None) -> None:
        self.file.write("\r" + self.line(now) + "\x1b[K")
        self.file.flush()

    def close(self) -> None:
        """Draw the final line (a terminal: in place; otherwise written once)."""
        if self._closed:
            return
        self._closed = True
        if self.disable:
            return
        if self.tty:
            self._draw()
            self.file.write("\n" if self.leave else "\r\x1b[K")
        elif self.leave:
            self.file.write(self.line() + "\n")
        self.file.flush()

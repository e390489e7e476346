"""dl.utils.data: batching, shuffling (each item once per epoch, reproducible from a seed),
drop_last, samplers, collation (compared with torch's default_collate), random_split and
the progress bar."""
from __future__ import annotations

import collections
import io

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import dl
from dl.utils import data as D


def _ds(n=10, dev=None):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    y = np.arange(n, dtype=np.int64)
    return D.TensorDataset(dl.tensor(x, device=dev), dl.tensor(y, device=dev)), x, y


def _ids(loader):
    return [yb.tolist() for _, yb in loader]


def test_batches_in_order(dev):
    ds, x, y = _ds(10, dev)
    loader = D.DataLoader(ds, batch_size=4)
    assert len(loader) == 3
    batches = list(loader)
    assert [tuple(b[0].shape) for b in batches] == [(4, 3), (4, 3), (2, 3)]
    for k, (xb, yb) in enumerate(batches):
        assert isinstance(xb, dl.Tensor) and xb.device == ds.tensors[0].device
        assert xb.dtype is dl.float32 and yb.dtype is dl.int64
        np.testing.assert_array_equal(xb.numpy(), x[4 * k:4 * k + 4])
        np.testing.assert_array_equal(yb.numpy(), y[4 * k:4 * k + 4])


def test_drop_last():
    ds, _, _ = _ds(10)
    loader = D.DataLoader(ds, batch_size=4, drop_last=True)
    assert len(loader) == 2 == len(list(loader))
    assert _ids(loader) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(D.DataLoader(ds, batch_size=5, drop_last=True)) == 2
    assert len(tud.DataLoader(range(10), batch_size=4, drop_last=True)) == 2


def test_shuffle_is_a_permutation_each_epoch():
    ds, _, _ = _ds(37)
    loader = D.DataLoader(ds, batch_size=5, shuffle=True,
                          generator=dl.Generator().manual_seed(3))
    epochs = []
    for _ in range(3):
        order = [i for b in _ids(loader) for i in b]
        assert sorted(order) == list(range(37))  # every item once
        epochs.append(order)
    assert epochs[0] != epochs[1] != epochs[2]
    assert epochs[0] != list(range(37))


def test_shuffle_reproducible_from_a_seed():
    ds, _, _ = _ds(25)

    def run(seed):
        loader = D.DataLoader(ds, batch_size=4, shuffle=True,
                              generator=dl.Generator().manual_seed(seed))
        return [_ids(loader) for _ in range(2)]
    assert run(0) == run(0)
    assert run(0) != run(1)
    # without a generator: the default one, seeded by dl.manual_seed
    dl.manual_seed(5)
    a = _ids(D.DataLoader(ds, batch_size=4, shuffle=True))
    dl.manual_seed(5)
    b = _ids(D.DataLoader(ds, batch_size=4, shuffle=True))
    assert a == b
    # a NumPy generator is taken as well
    c = _ids(D.DataLoader(ds, batch_size=4, shuffle=True,
                          generator=np.random.default_rng(0)))
    assert sorted(i for bt in c for i in bt) == list(range(25))


def test_random_sampler_replacement_and_num_samples():
    ds = list(range(6))
    s = D.RandomSampler(ds, num_samples=14, generator=dl.Generator().manual_seed(0))
    got = list(s)
    assert len(got) == len(s) == 14
    assert sorted(got[:6]) == list(range(6)) and sorted(got[6:12]) == list(range(6))
    r = list(D.RandomSampler(ds, replacement=True, num_samples=50,
                             generator=dl.Generator().manual_seed(0)))
    assert len(r) == 50 and set(r) <= set(range(6))
    with pytest.raises(ValueError):
        D.RandomSampler([], generator=None)


def test_sampler_and_batch_sampler():
    ds, _, _ = _ds(8)
    loader = D.DataLoader(ds, batch_size=3, sampler=[7, 6, 5, 4, 3])
    assert _ids(loader) == [[7, 6, 5], [4, 3]]
    bs = D.BatchSampler(D.SequentialSampler(range(8)), 3, drop_last=False)
    assert list(bs) == list(tud.BatchSampler(tud.SequentialSampler(range(8)), 3, False))
    assert len(bs) == 3
    loader = D.DataLoader(ds, batch_sampler=[[1, 2], [0], [5, 6, 7]])
    assert _ids(loader) == [[1, 2], [0], [5, 6, 7]] and len(loader) == 3
    with pytest.raises(ValueError):
        D.DataLoader(ds, batch_sampler=[[0]], batch_size=2)
    with pytest.raises(ValueError):
        D.DataLoader(ds, sampler=[0], shuffle=True)
    sub = D.SubsetRandomSampler([2, 4, 6], generator=dl.Generator().manual_seed(0))
    assert sorted(sub) == [2, 4, 6]


def test_no_batching():
    loader = D.DataLoader([np.ones(2, np.float32), np.zeros(2, np.float32)], batch_size=None)
    items = list(loader)
    assert len(loader) == 2 and all(isinstance(t, dl.Tensor) and t.shape == (2,)
                                    for t in items)


def _same_as_torch(got, want):
    """A dl collation equals torch's: same structure, tensors of the same dtype and values."""
    if isinstance(want, torch.Tensor):
        assert isinstance(got, dl.Tensor)
        assert got.dtype.name == str(want.dtype).removeprefix("torch."), (got.dtype, want.dtype)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    elif isinstance(want, dict):
        assert type(got) is type(want) and list(got) == list(want)
        for k in want:
            _same_as_torch(got[k], want[k])
    elif isinstance(want, (list, tuple)) and not isinstance(want, str):
        assert type(got) is type(want) and len(got) == len(want)
        for a, b in zip(got, want):
            _same_as_torch(a, b)
    else:
        assert got == want


Point = collections.namedtuple("Point", "x y")

SAMPLES = {
    "numpy": [np.full((2, 3), i, np.float32) for i in range(4)],
    "numpy_f64_i32": [(np.arange(3.0) * i, np.int32(i)) for i in range(3)],
    "python_numbers": [(1.5 * i, i, i % 2 == 0) for i in range(5)],
    "dicts": [{"img": np.ones(2, np.float32) * i, "label": i, "name": f"n{i}"}
              for i in range(3)],
    "nested": [((i, float(i)), [np.int64(i), np.float64(i)]) for i in range(3)],
    "namedtuple": [Point(np.float32(i), i) for i in range(3)],
    "strings": ["a", "bb", "c"],
}


@pytest.mark.parametrize("name", list(SAMPLES))
def test_collate_matches_torch(name):
    batch = SAMPLES[name]
    _same_as_torch(D.default_collate(batch), tud.default_collate(batch))


def test_collate_dl_tensors(dev):
    ts = [dl.tensor(np.full((2,), i, np.float32), device=dev) for i in range(3)]
    got = D.default_collate([(t, i) for i, t in enumerate(ts)])
    assert got[0].device == ts[0].device and got[0].shape == (3, 2)
    np.testing.assert_array_equal(got[0].numpy(), np.repeat(np.arange(3.0), 2).reshape(3, 2))
    assert got[1].tolist() == [0, 1, 2]
    with pytest.raises(RuntimeError):
        D.default_collate([dl.zeros(2), dl.zeros(3)])
    with pytest.raises(RuntimeError):
        D.default_collate([(1, 2), (1,)])
    with pytest.raises(TypeError):
        D.default_collate([object(), object()])


def test_custom_collate_fn():
    ds, _, _ = _ds(6)
    loader = D.DataLoader(ds, batch_size=4, collate_fn=lambda b: len(b))
    assert list(loader) == [4, 2]


class _Stream(D.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


def test_iterable_dataset():
    loader = D.DataLoader(_Stream(7), batch_size=3)
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5], [6]] and len(loader) == 3
    loader = D.DataLoader(_Stream(7), batch_size=3, drop_last=True)
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5]] and len(loader) == 2
    with pytest.raises(ValueError):
        D.DataLoader(_Stream(3), shuffle=True)


def test_random_split_subset_concat():
    ds = list(range(10))
    parts = D.random_split(ds, [3, 7], generator=dl.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(parts[0].indices + parts[1].indices) == ds
    again = D.random_split(ds, [3, 7], generator=dl.Generator().manual_seed(0))
    assert again[0].indices == parts[0].indices
    fr = D.random_split(range(11), [0.5, 0.3, 0.2], generator=dl.Generator().manual_seed(0))
    want = tud.random_split(range(11), [0.5, 0.3, 0.2])
    assert [len(p) for p in fr] == [len(p) for p in want]
    with pytest.raises(ValueError):
        D.random_split(ds, [3, 3])
    assert [parts[0][i] for i in range(3)] == parts[0].indices
    cat = D.ConcatDataset([[0, 1, 2], [10, 11]])
    assert len(cat) == 5 and [cat[i] for i in range(5)] == [0, 1, 2, 10, 11] and cat[-1] == 11
    both = D.TensorDataset(np.arange(3)) + D.TensorDataset(np.arange(2))
    assert len(both) == 5


def test_tensor_dataset_checks():
    with pytest.raises(ValueError):
        D.TensorDataset(np.zeros(3), np.zeros(4))
    ds = D.TensorDataset(np.arange(4), np.arange(4) * 2)
    assert ds[2] == (2, 4) and len(ds) == 4


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_non_tty_writes_one_line():
    out = io.StringIO()
    items = list(D.progress(range(5), desc="train", file=out))
    assert items == list(range(5))
    text = out.getvalue()
    assert "\r" not in text and text.count("\n") == 1
    assert text.startswith("train: 100%|") and "5/5" in text


def test_progress_tty_redraws_in_place():
    out = _Tty()
    bar = D.progress(range(4), desc="e", file=out, mininterval=0.0)
    for _ in bar:
        bar.set_postfix(loss=0.123456)
    text = out.getvalue()
    assert text.count("\r") >= 4 and text.endswith("\n") and "loss=0.1235" in text
    assert "4/4" in text
    out = io.StringIO()
    list(D.progress(iter(range(3)), file=out))  # no len: a count, no bar
    assert "3it" in out.getvalue()
    out = _Tty()
    list(D.progress(range(3), file=out, disable=True))
    assert out.getvalue() == ""


def test_dataloader_progress_flag(capsys):
    ds, _, _ = _ds(6)
    batches = list(D.DataLoader(ds, batch_size=2, progress="epoch 1"))
    assert len(batches) == 3
    err = capsys.readouterr().err
    assert err.startswith("epoch 1: 100%|") and "3/3" in err


class _Batched(D.Dataset):
    def __init__(self):
        self.calls = []

    def __getitem__(self, i):
        raise AssertionError("fetched one by one")

    def __getitems__(self, idx):
        self.calls.append(list(idx))
        return [(i, float(i)) for i in idx]

    def __len__(self):
        return 5


def test_getitems_batched_fetch():
    ds = _Batched()
    batches = list(D.DataLoader(ds, batch_size=2))
    assert ds.calls == [[0, 1], [2, 3], [4]]
    assert [b[0].tolist() for b in batches] == [[0, 1], [2, 3], [4]]
    sub = D.Subset(ds, [4, 3, 2])
    assert [b[0].tolist() for b in D.DataLoader(sub, batch_size=3)] == [[4, 3, 2]]
    assert ds.calls[-1] == [4, 3, 2]

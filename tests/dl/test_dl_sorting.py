"""Scans, sorting and selection (dl/ops/sorting.py, dl/kernels/scan.py, sort.py, hist.py) on
every runtime: row lengths 1..5000 (not powers of two, one tile, just over one, several:
the multi-block scan and the multi-pass sort) against NumPy in float64, both scan
candidates, nan ordering, errors. The op table (tests/dl/op_table/ops_sorting.py) compares
with torch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import cube as cb
import dl
from dl.kernels import scan as lib_scan
from dl.kernels import sort as lib_sort

LENGTHS = (1, 2, 7, 100, 1023, 1024, 1025, 2500, 5000)


def _f(dev):
    """The widest float the device holds."""
    return np.float64 if cb.runtime(dev).features.f64 else np.float32


def _tol(dt):
    return 1e-4 if dt == np.float32 else 1e-10


@pytest.mark.parametrize("op", lib_scan.OPS)
def test_scan_kernel_lengths(rt, op):
    """Both candidates (one unit per row; the block scan, multi-block past one tile),
    forwards and reversed, against NumPy float64."""
    dt = np.float64 if rt.features.f64 else np.float32
    rng = np.random.default_rng(1)
    for n in LENGTHS:
        x = rng.uniform(-1, 1, (2, n)).astype(dt)
        if op == "prod":
            x = (1 + 0.002 * x).astype(dt)
        for cand, rev in (("block", n % 2 == 1), ("unit", n % 2 == 0)):
            if cand == "unit" and n > 1100 and rt.name == "interp":
                continue
            out = lib_scan.scan_rows(rt, rt.from_numpy(x), op, rev, candidate=cand).numpy()
            ref = lib_scan.reference(x, op, rev)
            scale = np.abs(ref).max()
            err = np.abs(out - ref).max() / scale
            assert err < _tol(dt) * (10 if op != "sum" else 1) * max(1, n / 1000), \
                (op, cand, n, rev, err)


@pytest.mark.parametrize("merge", [None, "other"])
def test_sort_kernel_lengths(rt, merge):
    """Stable, nan largest (first when descending), padding never leaks; exact indices.
    merge None: the runtime's own algorithm (the CPU's merge sort, the bitonic network
    elsewhere); "other": the other one."""
    dt = np.float64 if rt.features.f64 else np.float32
    idt = cb.i64 if rt.features.int64 else cb.i32
    use = None if merge is None else rt.target != "llvm"
    rng = np.random.default_rng(2)
    lengths = LENGTHS if merge is None else LENGTHS[:4] if rt.name == "interp" else LENGTHS[:-2]
    for n in lengths:  # the interpreter runs a unit's loops one step at a time
        x = rng.integers(-40, 40, (2, n)).astype(dt)  # ties everywhere
        if n > 3:
            x[0, rng.integers(0, n, 3)] = np.nan
        for desc in (False, True):
            vals, inds = rt.empty((2, n), x.dtype), rt.empty((2, n), idt)
            lib_sort.sort_rows(rt, rt.from_numpy(x), vals, inds, desc, merge=use)
            rv, ri = lib_sort.reference(x, desc)
            np.testing.assert_array_equal(vals.numpy(), rv, err_msg=f"n={n} desc={desc}")
            np.testing.assert_array_equal(inds.numpy(), ri, err_msg=f"n={n} desc={desc}")


def test_sort_kernel_window(rt):
    """Writing a window lo..hi of the sorted rows (topk, kthvalue) of a long row."""
    rng = np.random.default_rng(3)
    x = rng.permutation(3000).reshape(1, 3000).astype(np.float32)
    idt = cb.i64 if rt.features.int64 else cb.i32
    vals, inds = rt.empty((1, 5), np.float32), rt.empty((1, 5), idt)
    lib_sort.sort_rows(rt, rt.from_numpy(x), vals, inds, True, 10, 15)
    np.testing.assert_array_equal(vals.numpy()[0], [2989, 2988, 2987, 2986, 2985])
    np.testing.assert_array_equal(x[0, inds.numpy()[0]], vals.numpy()[0])


def test_cumsum_ops_against_numpy(dev):
    dt = _f(dev)
    rng = np.random.default_rng(4)
    a = rng.uniform(-1, 1, (3, 1700, 2)).astype(dt)
    x = dl.tensor(a, device=dev)
    for d in (0, 1, 2):
        got = dl.cumsum(x, d).numpy()
        np.testing.assert_allclose(got, np.cumsum(a.astype(np.float64), d), rtol=_tol(dt),
                                   atol=_tol(dt))
    got = x.logcumsumexp(1).numpy()
    ref = np.logaddexp.accumulate(a.astype(np.float64), 1)
    np.testing.assert_allclose(got, ref, rtol=_tol(dt), atol=_tol(dt))


def test_cumsum_int_promotes(dev):
    rt = cb.runtime(dev)
    want = dl.int64 if rt.features.int64 else dl.int32
    a = np.arange(-5, 2000, dtype=np.int32) % 7
    y = dl.cumsum(dl.tensor(a, device=dev), 0)
    assert y.dtype is want
    np.testing.assert_array_equal(y.numpy(), np.cumsum(a.astype(np.int64)))
    b = dl.tensor(a > 3, device=dev).cumsum(0)
    assert b.dtype is want
    np.testing.assert_array_equal(b.numpy(), np.cumsum(a > 3))


def test_sort_topk_median_long_rows(dev):
    dt = _f(dev)
    rng = np.random.default_rng(5)
    a = np.stack([rng.permutation(4099) for _ in range(2)]).astype(dt) - 2000
    a[1, 17] = np.nan
    x = dl.tensor(a, device=dev)
    s = x.sort(1, descending=True)
    rv, ri = lib_sort.reference(a, True)
    np.testing.assert_array_equal(s.values.numpy(), rv)
    np.testing.assert_array_equal(s.indices.numpy(), ri)
    t = dl.topk(x, 4, largest=False)
    np.testing.assert_array_equal(t.values.numpy(), np.sort(a, 1)[:, :4])
    k = dl.kthvalue(x, 2049, 1)
    np.testing.assert_array_equal(k.values.numpy(), np.sort(a, 1)[:, 2048])
    m = dl.median(x, 1)
    assert m.values.numpy()[0] == np.sort(a[0])[2049] and np.isnan(m.values.numpy()[1])
    assert m.indices.numpy()[1] == 17
    assert float(dl.median(x[0])) == np.sort(a[0])[2049]


def test_grads_against_torch():
    """cumprod with zeros, logcumsumexp, sort, topk, kthvalue (interp)."""
    rng = np.random.default_rng(6)
    a = rng.uniform(0.5, 1.5, (3, 40))
    a[0, 5] = a[0, 30] = 0.0
    a[1, 0] = 0.0
    cases = [(lambda t: t.cumprod(1), lambda t: t.cumprod(1)),
             (lambda t: t.logcumsumexp(0), lambda t: t.logcumsumexp(0)),
             (lambda t: dl.sort(t, 1).values, lambda t: torch.sort(t, 1).values),
             (lambda t: dl.topk(t, 2, 0).values, lambda t: torch.topk(t, 2, 0).values),
             (lambda t: dl.kthvalue(t, 3, 1).values, lambda t: torch.kthvalue(t, 3, 1).values)]
    b = rng.uniform(-1, 1, (3, 40))  # no ties: torch's sort is unstable
    for k, (f, tf) in enumerate(cases):
        c = a if k < 2 else b
        x = dl.tensor(c, requires_grad=True)
        tx = torch.tensor(c, requires_grad=True)
        w = rng.uniform(0.5, 1.5, tuple(tf(tx).shape))
        (f(x) * dl.tensor(w)).sum().backward()
        (tf(tx) * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_search_and_count(dev):
    dt = _f(dev)
    rt = cb.runtime(dev)
    rng = np.random.default_rng(7)
    seq = np.sort(rng.uniform(-1, 1, 3001)).astype(dt)
    q = rng.uniform(-1.2, 1.2, 2000).astype(dt)
    q[:10] = seq[rng.integers(0, 3001, 10)]
    s, v = dl.tensor(seq, device=dev), dl.tensor(q, device=dev)
    for side in ("left", "right"):
        got = dl.searchsorted(s, v, side=side).numpy()
        np.testing.assert_array_equal(got, np.searchsorted(seq, q, side=side))
    x = rng.uniform(-3, 3, 20000).astype(dt)
    h = dl.histc(dl.tensor(x, device=dev), 17, -2, 2).numpy()
    ref = torch.histc(torch.tensor(x), 17, -2, 2).numpy()
    np.testing.assert_array_equal(h, ref)
    if rt.features.int64:
        b = rng.integers(0, 50, 30000)
        got = dl.bincount(dl.tensor(b, device=dev), minlength=60).numpy()
        np.testing.assert_array_equal(got, np.bincount(b, minlength=60))


def test_unique_host_side(dev):
    rt = cb.runtime(dev)
    a = np.random.default_rng(8).integers(-3, 4, (40, 31)).astype(np.float32)
    u, inv, cnt = dl.unique(dl.tensor(a, device=dev), return_inverse=True, return_counts=True)
    ru, rinv, rcnt = np.unique(a, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(u.numpy(), ru)
    np.testing.assert_array_equal(inv.numpy(), rinv.reshape(a.shape))
    np.testing.assert_array_equal(cnt.numpy(), rcnt)
    assert inv.dtype is (dl.int64 if rt.features.int64 else dl.int32)


def test_errors_name_shapes():
    x = dl.tensor(np.zeros((3, 4), np.float32))
    with pytest.raises(RuntimeError, match=r"\(3, 4\)"):
        dl.topk(x, 5)
    with pytest.raises(RuntimeError, match=r"\(3, 4\)"):
        dl.kthvalue(x, 0)
    with pytest.raises(RuntimeError, match=r"\(2,\).*\(3,\)"):
        dl.bincount(dl.tensor(np.array([1, 2, 3])), dl.tensor(np.ones(2, np.float32)))
    with pytest.raises(RuntimeError, match="leading dims"):
        dl.searchsorted(dl.tensor(np.zeros((2, 5))), dl.tensor(np.zeros((3, 2))))
    with pytest.raises(RuntimeError, match="contradict"):
        dl.searchsorted(dl.tensor(np.zeros(5)), dl.tensor(np.zeros(2)), right=True, side="left")
    with pytest.raises(NotImplementedError):
        dl.unique(x, dim=0)
    with pytest.raises(TypeError):
        dl.logcumsumexp(dl.tensor(np.arange(4)), 0)
    with pytest.raises(RuntimeError, match="non-negative"):
        dl.bincount(dl.tensor(np.array([1, -2])))


def test_methods_and_named_results():
    x = dl.tensor(np.array([[3.0, 1.0, 2.0]]))
    s = x.sort()
    assert s.values.tolist() == [[1.0, 2.0, 3.0]] and s.indices.tolist() == [[1, 2, 0]]
    v, i = x.topk(1)
    assert v.tolist() == [[3.0]] and i.tolist() == [[0]]
    assert x.argsort(descending=True).tolist() == [[0, 2, 1]]
    assert x.median(1, keepdim=True).values.shape == (1, 1)
    assert x.cumsum(1).tolist() == [[3.0, 4.0, 6.0]]
    assert x.kthvalue(2).values.tolist() == [2.0]
    assert "values" in repr(s)


@pytest.mark.parametrize("op", ["argmax", "argmin", "topk", "kthvalue", "median"])
def test_ops_torch_refuses_on_bools_are_refused(op):
    """argmax / argmin / topk / kthvalue / median of a bool tensor raise, as torch's (they
    returned indices and values); max, sort and argsort of bools still work, as torch's."""
    a = np.array([[True, False, True], [False, False, True]])
    call = {"topk": lambda m, t: m.topk(t, 2), "kthvalue": lambda m, t: m.kthvalue(t, 1)}.get(
        op, lambda m, t: getattr(m, op)(t))
    with pytest.raises((RuntimeError, NotImplementedError)):
        call(torch, torch.tensor(a))
    with pytest.raises(RuntimeError, match=op):
        call(dl, dl.tensor(a))
    for f in (lambda m, t: m.max(t, 1)[1], lambda m, t: m.sort(t, 1)[0],
              lambda m, t: m.argsort(t, dim=1, stable=True)):
        np.testing.assert_array_equal(f(dl, dl.tensor(a)).numpy(), f(torch, torch.tensor(a)))

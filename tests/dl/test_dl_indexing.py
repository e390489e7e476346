"""Indexing and data movement beyond the op table: setitem semantics, in-place history, int32
indices on every runtime (WGSL has no int64), errors, determinism of accumulation."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from dl_helpers import close

import dl


def _pair(a, requires_grad=False, dev="interp"):
    return (dl.tensor(a, device=dev, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


def test_int32_indices_on_every_runtime(dev):
    """The index kernels take int32 indices (the only integers WGSL has) everywhere."""
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    i = np.array([3, 0, 3], np.int32)
    xd = dl.tensor(x, device=dev)
    idx = dl.tensor(i, device=dev)
    close(xd[idx], torch.tensor(x)[torch.tensor(i).long()])
    close(xd[idx, 1:3], torch.tensor(x)[torch.tensor(i).long(), 1:3])
    acc = dl.index_put(xd, (idx,), dl.ones(3, 5, device=dev), accumulate=True)
    close(acc, torch.tensor(x).index_put((torch.tensor(i).long(),), torch.ones(3, 5),
                                         accumulate=True))
    si = np.array([[1, 1, 0, 2, 3]], np.int32)
    src = np.ones((1, 5), np.float32)
    close(dl.scatter_add(xd, 0, dl.tensor(si, device=dev), dl.tensor(src, device=dev)),
          torch.scatter_add(torch.tensor(x), 0, torch.tensor(si).long(), torch.tensor(src)))
    close(xd.index_add(0, idx, dl.ones(3, 5, device=dev)),
          torch.tensor(x).index_add(0, torch.tensor(i).long(), torch.ones(3, 5)))
    m = x % 3 == 0
    close(xd[dl.tensor(m, device=dev)], torch.tensor(x)[torch.tensor(m)])
    nz = dl.nonzero(dl.tensor(m, device=dev))
    assert nz.dtype in (dl.int64, dl.int32)
    np.testing.assert_array_equal(nz.numpy(), np.argwhere(m))
    y = dl.tensor(x, device=dev)
    y[dl.tensor(m, device=dev)] = -1.0
    close(y, torch.tensor(np.where(m, -1.0, x).astype(np.float32)))


def test_nonzero_many_chunks(dev):
    m = np.random.default_rng(0).uniform(size=(97, 61)) < 0.3
    got = dl.nonzero(dl.tensor(m, device=dev)).numpy()
    np.testing.assert_array_equal(got, np.argwhere(m))
    rows, cols = dl.nonzero(dl.tensor(m, device=dev), as_tuple=True)
    np.testing.assert_array_equal(rows.numpy(), np.nonzero(m)[0])
    np.testing.assert_array_equal(cols.numpy(), np.nonzero(m)[1])


def test_setitem_writes_through_views():
    x = dl.zeros(4, 5)
    v = x[1:]  # a view: writes reach x
    v[dl.tensor([0, 2]), dl.tensor([4, 0])] = 7.0
    t = torch.zeros(4, 5)
    t[1:][torch.tensor([0, 2]), torch.tensor([4, 0])] = 7.0
    close(x, t)
    x[:, dl.tensor([True, False, True, False, False])] = dl.tensor([1.0, 2.0])
    t[:, torch.tensor([True, False, True, False, False])] = torch.tensor([1.0, 2.0])
    close(x, t)
    x[dl.tensor([[0], [3]]), dl.tensor([1, 2])] = dl.arange(4.0).reshape(2, 2)
    t[torch.tensor([[0], [3]]), torch.tensor([1, 2])] = torch.arange(4.0).reshape(2, 2)
    close(x, t)


def test_setitem_records_history():
    """x[idx] = v on a non-leaf is differentiable in x and v, as PyTorch's."""
    a = np.random.default_rng(1).normal(size=(4, 3))
    v = np.random.default_rng(2).normal(size=(2, 3))
    (xd, xt), (vd, vt) = _pair(a, True), _pair(v, True)
    yd, yt = xd * 2, xt * 2
    yd[dl.tensor([3, 0])] = vd
    yt[torch.tensor([3, 0])] = vt
    yd[1:2, dl.tensor([True, False, True])] = 5.0
    yt[1:2, torch.tensor([True, False, True])] = 5.0
    (yd * yd).sum().backward()
    (yt * yt).sum().backward()
    close(yd, yt)
    close(xd.grad, xt.grad)
    close(vd.grad, vt.grad)


def test_inplace_ops_keep_history_and_refuse_leaves():
    a = np.random.default_rng(3).normal(size=(3, 4))
    s = np.random.default_rng(4).normal(size=(2, 4))
    (xd, xt), (sd, st) = _pair(a, True), _pair(s, True)
    i = np.array([[0, 2, 1, 0], [2, 2, 0, 1]])
    yd = (xd + 0).scatter_add_(0, dl.tensor(i), sd).masked_fill_(dl.tensor(a > 0), 0.5)
    yt = (xt + 0).scatter_add_(0, torch.tensor(i), st).masked_fill_(torch.tensor(a > 0), 0.5)
    yd.tril_().index_add_(1, dl.tensor([3, 3]), dl.ones(3, 2, dtype=dl.float64))
    yt.tril_().index_add_(1, torch.tensor([3, 3]), torch.ones(3, 2, dtype=torch.float64))
    close(yd, yt)
    (yd * yd).sum().backward()
    (yt * yt).sum().backward()
    close(xd.grad, xt.grad)
    close(sd.grad, st.grad)
    leaf = dl.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        leaf.scatter_(0, dl.tensor([0]), 2.0)
    with pytest.raises(RuntimeError, match="leaf"):
        leaf[dl.tensor([0])] = 2.0
    with dl.no_grad():
        leaf.index_put_((dl.tensor([1]),), dl.tensor(3.0))
    np.testing.assert_array_equal(leaf.numpy(), [1.0, 3.0, 1.0])


def test_accumulation_is_deterministic_and_ordered():
    """Repeated indices sum in index order: bit-equal to a sequential loop (torch's CPU)."""
    rng = np.random.default_rng(5)
    src = rng.normal(size=(200, 3)).astype(np.float32) * 1e4
    i = rng.integers(0, 4, 200)
    got = dl.zeros(4, 3).index_add(0, dl.tensor(i), dl.tensor(src)).numpy()
    want = np.zeros((4, 3), np.float32)
    for k in range(200):
        want[i[k]] += src[k]
    np.testing.assert_array_equal(got, want)
    got2 = dl.zeros(4, 3).index_put((dl.tensor(i),), dl.tensor(src), accumulate=True).numpy()
    np.testing.assert_array_equal(got2, want)
    si = np.repeat(i[:, None], 3, 1)
    got3 = dl.zeros(4, 3).scatter_add(0, dl.tensor(si), dl.tensor(src)).numpy()
    np.testing.assert_array_equal(got3, want)


def test_advanced_index_layouts():
    """Index tensors side by side keep their place; apart (or split by a slice) they go
    first; ints are basic indices, applied first (PyTorch's rules, not NumPy's)."""
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    xd, xt = _pair(a)
    i, j = np.array([[0, 1], [1, 1]]), np.array([3, 0])
    for idx in [(slice(None), i, j), (i, slice(None), j), (1, slice(None), j),
                (slice(None), 1, slice(None), j), (Ellipsis, j), (None, 0, i, None, j),
                (slice(None), np.array([True, False, True]), 2)]:
        d = tuple(dl.tensor(e) if isinstance(e, np.ndarray) else e for e in idx)
        t = tuple(torch.tensor(e) if isinstance(e, np.ndarray) else e for e in idx)
        close(xd[d], xt[t])
    close(xd[[1, 0]], xt[[1, 0]])  # a list is an index tensor


def test_pad_is_functional_pad_and_modes_grad():
    assert dl.nn.functional.pad is dl.pad
    a = np.random.default_rng(6).normal(size=(2, 3, 4))
    for mode, p in [("reflect", (2, 3)), ("replicate", (3, 1, 2, 0)), ("circular", (1, 2)),
                    ("constant", (1, -1, 2, 2))]:
        xd, xt = _pair(a, True)
        yd = dl.pad(xd, p, mode=mode)
        yt = torch.nn.functional.pad(xt, p, mode=mode)
        close(yd, yt)
        w = np.random.default_rng(7).normal(size=yt.shape)
        (yd * dl.tensor(w)).sum().backward()
        (yt * torch.tensor(w)).sum().backward()
        close(xd.grad, xt.grad)


def test_errors_name_the_shapes():
    x = dl.zeros(3, 4)
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 3"):
        x[dl.tensor([0, 5])]
    with pytest.raises(IndexError, match="out of bounds"):
        x.scatter(0, dl.tensor([[3, 0, 0, 0]]), 1.0)
    with pytest.raises(IndexError, match="out of bounds"):
        x.scatter(0, dl.tensor([[-1, 0, 0, 0]]), 1.0)  # negative: refused, as torch
    with pytest.raises(RuntimeError, match=r"index of shape \(4,\) must have the rank"):
        x.scatter(0, dl.tensor([0, 1, 2, 0]), 1.0)
    with pytest.raises(RuntimeError, match=r"exceeds the input's shape \(3, 4\)"):
        x.scatter_add(0, dl.tensor(np.zeros((2, 5), np.int64)), dl.zeros(2, 5))
    with pytest.raises(IndexError, match=r"shape of the mask \[3\] at index 0 does not match"):
        dl.zeros(4, 3)[dl.tensor([True, False, True])]
    with pytest.raises(IndexError, match="tensors used as indices must be long"):
        x[dl.tensor([0.0])]
    with pytest.raises(RuntimeError, match=r"value tensor of shape \[3\] cannot be broadcast"):
        x[dl.tensor([0, 1])] = dl.zeros(3)
    with pytest.raises(RuntimeError, match=r"source of shape \(2, 3\)"):
        x.index_add(0, dl.tensor([0, 1]), dl.zeros(2, 3))
    with pytest.raises(RuntimeError, match=r"expected self.dtype to be equal to src.dtype"):
        x.scatter(0, dl.tensor([[0]]), dl.zeros(1, 1, dtype=dl.float64))
    with pytest.raises(RuntimeError, match="should be less than the dimension"):
        dl.pad(dl.zeros(1, 2, 3), (3, 0), mode="reflect")
    with pytest.raises(RuntimeError, match="split_sizes to sum exactly to 3"):
        x.split([1, 1], 0)
    with pytest.raises(RuntimeError, match="chunk expects"):
        x.chunk(0)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        dl.zeros(3).tril()
    with pytest.raises(RuntimeError, match="0-dimensional value tensor"):
        x.masked_fill(dl.tensor([True] * 4), dl.zeros(1))
    with pytest.raises(RuntimeError, match=r"start \(2\) \+ length \(3\) exceeds"):
        x.narrow(0, 2, 3)


def test_views_share_storage():
    x = dl.arange(12.0).reshape(3, 4)
    parts = x.chunk(2, 1) + x.split([1, 2], 0) + x.unbind(1) + (x.narrow(1, 1, 2),)
    for p in parts:
        assert p._buf is x._buf


def _kernel_sources(target: str):
    """The scatter kernels' sources for a C-family target: each type and comptime variant the
    dl ops launch (f32/f64 data, int32/int64 indices, bool masks, ranks 1-3)."""
    from codegen.cfamily import emit_source
    from cube import bool_, f32, f64, i32, i64
    from cube.frontend.translator import Target
    from cube.targets import TARGETS
    from dl.kernels import scatter as K

    info = TARGETS[target]
    floats = (f32,) if target == "msl" else (f32, f64)
    variants = []
    for f in floats:
        for it in (i32, i64):
            for mode in (0, 1, 2):
                variants.append(("scatter_kernel", {"F": f, "I": it}, {"dim": 1, "mode": mode},
                                 {"x": 2, "idx": 2, "src": 2}))
                variants.append(("put_kernel", {"F": f, "I": it}, {"dim": 0, "mode": mode},
                                 {"x": 3, "v": 3}))
            variants.append(("take_kernel", {"F": f, "I": it}, {"dim": 1},
                             {"x": 3, "out": 3}))
        variants.append(("remap_kernel", {"F": f}, {"flips": 5}, {"x": 3, "out": 3}))
        variants.append(("tri_kernel", {"F": f}, {"lower": True}, {"x": 3, "out": 3}))
    variants.append(("tri_kernel", {"F": bool_}, {"lower": False}, {"x": 2, "out": 2}))
    for mode in (0, 3, 4):  # bools: write, or, and
        variants.append(("scatter_kernel", {"F": bool_, "I": i64}, {"dim": 0, "mode": mode},
                         {"x": 2, "idx": 2, "src": 2}))
    for mode in (0, 3):
        variants.append(("put_kernel", {"F": bool_, "I": i32}, {"dim": 1, "mode": mode},
                         {"x": 2, "v": 2}))
    for it in (i32, i64):
        variants.append(("bounds_kernel", {"I": it}, {}, {"idx": 1}))
        variants.append(("nonzero_kernel", {"B": bool_, "I": it}, {}, {"m": 2}))
    for f in floats:
        for it in (i32, i64):
            variants.append(("sorted_put_kernel", {"F": f, "I": it, "P": it}, {"dim": 1},
                             {"x": 3, "v": 3}))
            for mode in (1, 2):
                variants.append(("scatter_sorted_kernel", {"F": f, "I": it, "P": i64},
                                 {"dim": 0, "mode": mode},
                                 {"x": 2, "sidx": 2, "perm": 2, "src": 2}))
    variants.append(("count_kernel", {"B": bool_}, {}, {"m": 3}))
    variants.append(("scan_kernel", {}, {}, {}))
    out = []
    for i, (name, tv, ct, ranks) in enumerate(variants):
        k = getattr(K, name)
        sig = k.signature_from_types(type_vars=tv, comptime=ct, ranks=ranks)
        kern = k.build_ir(sig, Target(target, info.features.plane_size, info.features))
        kern.name = f"{name}_v{i}"
        out.append((f"{name}#{i}", emit_source(kern, target).text))
    return out


@pytest.mark.parametrize("target", ["cuda", "hip", "msl"])
def test_kernels_compile_for_gpu_targets(target, tmp_path):
    """The index kernels compile with each vendor's real tool (nvcc + ptxas, hipcc, clang++
    with the Metal shim), as tests/codegen does for the language's own kernels."""
    from cube.check import tools
    tool = {"cuda": "nvcc", "hip": "hipcc", "msl": "clang++"}[target]
    if tools.find_tool(tool) is None:
        pytest.skip(f"{tool} is not installed")
    sources = _kernel_sources(target)
    if target == "cuda":
        run = tools.cuda(sources, "sm_80", tmp_path)
    elif target == "hip":
        run = tools.hip(sources, tools.hip_archs()[0][0][0], tmp_path)
    else:
        run = tools.msl(sources, "metal-shim", tmp_path)
    assert run.ok, run.error or "\n".join(f"{k}:\n{v}" for k, v in run.failed.items())


@pytest.mark.parametrize("sort_above", [0, 64])
def test_sorted_accumulation(dev, sort_above, monkeypatch):
    """Long index rows accumulate through a stable sort (each run of equal targets summed by
    its first unit): the same bits as the short-row path and a sequential loop."""
    from dl.ops import indexing
    monkeypatch.setattr(indexing, "SORT_ABOVE", sort_above)
    rng = np.random.default_rng(8)
    n = 300
    src = (rng.normal(size=(n, 3)) * 1e3).astype(np.float32)
    i = rng.integers(0, 7, n)
    want = np.zeros((7, 3), np.float32)
    for k in range(n):
        want[i[k]] += src[k]
    it = np.int64 if dl.tensor([1], device=dev).device.rt.features.int64 else np.int32
    idx, s = dl.tensor(i.astype(it), device=dev), dl.tensor(src, device=dev)
    z = dl.zeros(7, 3, device=dev)
    np.testing.assert_array_equal(z.index_add(0, idx, s).numpy(), want)
    np.testing.assert_array_equal(z.index_put((idx,), s, accumulate=True).numpy(), want)
    si = dl.tensor(np.repeat(i[:, None], 3, 1).astype(it), device=dev)
    np.testing.assert_array_equal(z.scatter_add(0, si, s).numpy(), want)
    # along dim 1, in a transposed view, with multiply
    p = rng.uniform(0.9, 1.1, (3, n)).astype(np.float32)
    got = dl.ones(3, 7, device=dev).scatter(1, si.t(), dl.tensor(p, device=dev),
                                            reduce="multiply").numpy()
    ref = torch.ones(3, 7).scatter(1, torch.tensor(np.repeat(i[:, None], 3, 1).T.copy()),
                                   torch.tensor(p), reduce="multiply").numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    # the gradient of x[idx] sums repeated rows
    x = dl.tensor(rng.normal(size=(7, 3)).astype(np.float32), device=dev, requires_grad=True)
    g = rng.normal(size=(n, 3)).astype(np.float32)
    x[idx].backward(dl.tensor(g, device=dev))
    want_g = np.zeros((7, 3), np.float32)
    for k in range(n):
        want_g[i[k]] += g[k]
    np.testing.assert_array_equal(x.grad.numpy(), want_g)


@pytest.mark.parametrize("case", ["qkv", "overlapping", "with_dense_use", "steps_and_ints"])
def test_gradients_of_several_views_sum_as_torchs(dev, case):
    """Gradients reaching one tensor through several basic-indexing views are summed in
    pieces (one zero tensor, each view's gradient written or added in): the same values as
    torch's, whether the views tile the tensor, overlap, or meet a gradient from a plain use
    of the tensor; accumulated into .grad across two backward passes."""
    a = np.random.default_rng(7).standard_normal((4, 6, 12)).astype(np.float32)
    x, tx = _pair(a, True, dev)

    def f(t):
        if case == "qkv":
            q, k, v = t[..., :4], t[..., 4:8], t[..., 8:]
            return ((q * k).sum(-1) + v.exp().sum(-1)).sum()
        if case == "overlapping":
            return (t[:3] * 2).sum() + (t[1:] * t[1:]).sum() + t[2, 1:5, ::2].sum()
        if case == "with_dense_use":
            return (t[..., :6] * 3).sum() + (t * t).sum() + (t[:, 2:] + 1).exp().sum()
        return t[1].sum() + (t[::2, 1::3] * 5).sum() + t[-1, -1, -1] * 7

    for _ in range(2):
        f(x).backward()
        f(tx).backward()
        close(x.grad, tx.grad)


def test_pad_modes_crop_and_refuse_as_torch():
    """reflect / replicate with negative amounts crop after padding the original dim, as
    torch's (they were refused); padding lengths torch refuses for an input's rank are
    refused (they were applied), and so is a crop that leaves no element in any padded dim.
    Values and gradients against torch over every amount in [-3, 3]."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 2, 4, 3))
    cases = [(m, p) for m in ("reflect", "replicate")
             for p in itertools.product(range(-3, 4), repeat=4)]
    cases += [(m, p) for m in ("reflect", "replicate", "circular")
              for p in ((-1, 1), (1, 1, 1, 1, 1, 1), (1, 1, 1, 1, 1, 1, 1, 1))]
    for mode, p in cases[::23] + cases[-9:]:
        tx = torch.tensor(a, requires_grad=True)
        x = dl.tensor(a, requires_grad=True)
        try:
            want = torch.nn.functional.pad(tx, p, mode=mode)
        except (RuntimeError, NotImplementedError):
            with pytest.raises((RuntimeError, NotImplementedError)):
                dl.nn.functional.pad(x, p, mode=mode)
            continue
        got = dl.nn.functional.pad(x, p, mode=mode)
        assert got.shape == tuple(want.shape), (mode, p)
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), err_msg=str((mode, p)))
        if want.numel():
            g = rng.standard_normal(want.shape)
            want.backward(torch.tensor(g))
            got.backward(dl.tensor(g))
            np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), err_msg=str((mode, p)))


def test_masked_fill_broadcasts_input_and_mask_as_torch(dev):
    """A mask of more dims than the input widens the result (torch's out-of-place rule; it
    raised here); the input's gradient sums back over the broadcast; in place, the input's
    shape must hold the mask, as torch."""
    rng = np.random.default_rng(5)
    xn, mn = rng.standard_normal((1, 4)).astype(np.float32), rng.random((3, 2, 4)) > 0.5
    x = dl.tensor(xn, device=dev, requires_grad=True)
    tx = torch.tensor(xn, dtype=torch.float64, requires_grad=True)
    y = x.masked_fill(dl.tensor(mn, device=dev), -2.0)
    ty = tx.masked_fill(torch.tensor(mn), -2.0)
    assert tuple(y.shape) == tuple(ty.shape) == (3, 2, 4)
    close(y, ty)
    gn = rng.standard_normal((3, 2, 4)).astype(np.float32)
    (y * dl.tensor(gn, device=dev)).sum().backward()
    (ty * torch.tensor(gn, dtype=torch.float64)).sum().backward()
    close(x.grad, tx.grad, rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match=r"mask of shape \(3, 2, 4\) cannot be broadcast"):
        dl.tensor(xn, device=dev).masked_fill_(dl.tensor(mn, device=dev), 0.0)

"""Fusion: one kernel per elementwise chain, cached by structure, identical to unfused."""
from __future__ import annotations

import sys

import numpy as np
import pytest
from dl_helpers import rand_np

import dl
from dl.fusion import settings


def chain(x, y):
    return ((x * y + 1.0).exp() - y).sigmoid()  # 5 ops: mul add exp sub sigmoid


def test_chain_is_one_kernel_fused_and_five_unfused(dev):
    x, y = dl.tensor(rand_np((4, 8), 1), device=dev), dl.tensor(rand_np((8,), 2), device=dev)
    with dl.count_kernels() as fused:
        a = chain(x, y).numpy()
    with dl.fusion(False), dl.count_kernels() as unfused:
        b = chain(x, y).numpy()
    assert fused.launches == 1
    assert unfused.launches == 5
    np.testing.assert_array_equal(a, b)  # bit for bit


@pytest.mark.parametrize("dt", [dl.float16, dl.bfloat16])
def test_half_types_round_after_every_op(dt):
    x, y = dl.tensor(rand_np((64,), 3), dtype=dt), dl.tensor(rand_np((64,), 4), dtype=dt)
    a = chain(x, y).numpy()
    with dl.fusion(False):
        b = chain(x, y).numpy()
    np.testing.assert_array_equal(a, b)


def test_second_call_with_same_structure_does_no_codegen(dev):
    def f(x, y):
        return (x - y).tanh() * 3.0 + x.abs()
    x, y = dl.tensor(rand_np((3, 4), 5), device=dev), dl.tensor(rand_np((4,), 6), device=dev)
    f(x, y).numpy()
    # other values, other shapes of the same rank and broadcast pattern, other scalar: no codegen
    x2, y2 = dl.tensor(rand_np((7, 2), 7), device=dev), dl.tensor(rand_np((2,), 8), device=dev)
    with dl.count_kernels() as c:
        out = f(x2, y2).numpy()
    assert c.launches == 1 and c.compiles == 0
    np.testing.assert_allclose(out, np.tanh(x2.numpy() - y2.numpy()) * 3 + np.abs(x2.numpy()),
                               rtol=1e-6)
    if dev == "cpu":
        rt = dl.device(dev).rt
        before = rt.stats["codegen"]
        f(x2, y2).numpy()
        assert rt.stats["codegen"] == before


def test_structure_change_compiles_again():
    x = dl.tensor(rand_np((3, 4), 9))
    (x.abs().log1p() - 2.0).erf().numpy()
    with dl.count_kernels() as c:
        (x.abs().log1p() - 2.0).sin().numpy()  # one op differs: a new kernel
    assert c.compiles == 1


def test_strided_and_broadcast_inputs_fuse(dev):
    a = rand_np((4, 6), 10)
    x = dl.tensor(a, device=dev)
    v = x.t()[1:, ::2]  # a permuted, sliced view: read by index arithmetic, not copied
    with dl.count_kernels() as c:
        out = (v * 2 + x[:2, :1].t()).exp().numpy()
    assert c.launches == 1
    np.testing.assert_allclose(out, np.exp(a.T[1:, ::2] * 2 + a[:2, :1].T), rtol=1e-6)


def test_materialisation_points():
    x = dl.tensor(rand_np((3, 4), 11))
    y = x * 2 + 1
    assert y.is_lazy
    with dl.count_kernels() as c:
        z = y.t()  # a view needs storage: the chain runs first
    assert c.launches == 1 and not y.is_lazy and not z.is_lazy
    w = x.exp()
    for _ in range(settings.MAX_NODES + 5):
        w = w + 1.0
    assert not w.is_lazy or w._node.size <= settings.MAX_NODES  # the graph-size limit


def test_shared_subexpression_and_multiple_outputs():
    x = dl.tensor(rand_np((5,), 12))
    s = x.sigmoid()
    a, b = s * 2, s + 1  # s is computed once inside the kernel
    with dl.count_kernels() as c:
        dl.fusion.realise([a, b])
    assert c.launches == 1
    sig = 1 / (1 + np.exp(-x.numpy()))
    np.testing.assert_allclose(a.numpy(), sig * 2, rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), sig + 1, rtol=1e-6)


def test_fusion_setter_and_context():
    assert dl.fusion.enabled()
    with dl.fusion(False):
        assert not dl.fusion.enabled()
        assert not (dl.ones(3) + 1).is_lazy
    assert dl.fusion.enabled()


def test_backward_chain_fuses():
    x = dl.tensor(rand_np((4, 4), 13), requires_grad=True)
    y = ((x * 3).tanh() * x).sigmoid()
    with dl.count_kernels() as c:
        y.backward(dl.ones_like(y))
    with dl.fusion(False), dl.count_kernels() as u:
        x.grad = None
        y2 = ((x * 3).tanh() * x).sigmoid()
        y2.backward(dl.ones_like(y2))
    assert c.launches == 1 < u.launches


def test_coalesce_merges_dims_every_operand_steps_through_as_one():
    from dl.shapes import coalesce
    assert coalesce((64, 16, 8, 8), [(1024, 64, 8, 1), (0, 1, 0, 0)]) == \
        ((64, 16, 64), [(1024, 64, 1), (0, 1, 0)])
    assert coalesce((4, 1, 5), [(5, 7, 1)]) == ((20,), [(1,)])
    assert coalesce((3, 4), [(1, 3)]) == ((3, 4), [(1, 3)])  # a transpose stays 2-D
    assert coalesce((1, 1), [(9, 9)]) == ((1,), [(0,)])


@pytest.mark.parametrize("case", ["channel", "permuted", "sliced_out"])
def test_broadcast_graphs_with_merged_dims_match_numpy(dev, case):
    """(N, C, H, W) graphs read with per-channel, permuted and sliced operands: the kernel
    runs over merged dims, and every element must land where NumPy puts it."""
    x = rand_np((3, 5, 4, 6), 11)
    s, t = rand_np((1, 5, 1, 1), 12), rand_np((5, 1, 1), 13)
    dx = dl.tensor(x, device=dev)
    ds, dt = dl.tensor(s, device=dev), dl.tensor(t, device=dev)
    if case == "permuted":
        xp = x.transpose(0, 2, 3, 1)  # (3, 4, 6, 5): channel last
        got = ((dx.permute(0, 2, 3, 1) - ds.reshape(5)) * dt.reshape(5)).numpy()
        np.testing.assert_allclose(got, (xp - s.reshape(5)) * t.reshape(5), rtol=1e-6)
        return
    want = (x - s) * t + x
    if case == "channel":
        got = ((dx - ds) * dt + dx).numpy()
    else:  # the result written into a sliced view of a bigger tensor
        big = dl.zeros((3, 5, 4, 8), device=dev)
        big[:, :, :, 1:7] = (dx - ds) * dt + dx
        got_big = big.numpy()
        assert not got_big[..., 0].any() and not got_big[..., 7].any()
        got = got_big[..., 1:7]
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("xs, ss", [
    ((2, 3, 5, 80), (1, 3, 1, 1)),  # merged to (2, 3, 400): rows over cube y and z
    ((2, 3, 4, 70), (2, 1, 4, 1)),  # rank 4, a leaf constant along each row
    ((300, 65), (300, 1)),  # rows longer than a power of two: the last cube is partial
    ((3, 70), (70,)),
])
def test_row_launches_cover_every_element(dev, xs, ss):
    x, s = rand_np(xs, 21), rand_np(ss, 22)
    got = ((dl.tensor(x, device=dev) - dl.tensor(s, device=dev)) * 2.0).numpy()
    np.testing.assert_allclose(got, (x - s) * 2.0, rtol=1e-6)


@pytest.mark.parametrize("xs, ss, exact", [
    ((4, 256), (4, 256), True),  # 1-D launch, n a multiple of the cube size
    ((4, 256 + 1), (4, 257), False),  # one element past a whole cube
    ((16, 64), (1, 64), True),  # rows: 4 rows of 64 a cube, 4 cubes
    ((18, 64), (1, 64), False),  # rows: the last cube half full
    ((2, 5, 64), (2, 5, 1), False),  # merged to 10 rows of 64: the last cube half full
    ((2, 8, 64), (1, 8, 1), True),  # rank-3 rows (dim 1 on y, dim 0 on z)
    ((2, 6, 64), (1, 6, 1), False),
    ((3, 48), (1, 48), False),  # rows shorter than the cube's x
])
def test_launches_that_tile_the_shape_skip_the_bounds_test(dev, xs, ss, exact):
    mat = sys.modules["dl.fusion.materialise"]
    x, s = dl.tensor(rand_np(xs, 31), device=dev), dl.tensor(rand_np(ss, 32), device=dev)
    mat._hot.clear()  # the in-memory memo of compiled structures (refilled from _cache)
    got = ((x - s) * 3.0).numpy()
    np.testing.assert_allclose(got, (x.numpy() - s.numpy()) * 3.0, rtol=1e-6)
    [key] = mat._hot
    assert key[1][-1] is exact  # the structure's last field


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("shape, dim, launches", [
    ((1000, 9), 0, 2),  # a column reduction: chunks of rows, then the chunks
    ((3, 700, 5), 1, 2),  # kept dims on both sides of the reduced one, a short chunk
    ((6, 600), 1, 1),  # a contiguous reduced axis: one launch
])
def test_strided_reductions_of_graphs_reduce_in_chunks(dev, op, shape, dim, launches):
    """A fused reduction over a strided axis of 512 or more runs in two launches (partials
    over chunks of rows, then the partials) and matches NumPy float64."""
    scale = 0.02 if op == "prod" else 1.0
    a, b = rand_np(shape, 41) * scale, rand_np(shape, 42)
    x, y = dl.tensor(a, device=dev), dl.tensor(b, device=dev)
    with dl.count_kernels() as c:
        got = getattr(x * y + 1.0, op)(dim)
        got = (got[0] if isinstance(got, tuple) else got).numpy()
    want = getattr(np, op)(a.astype(np.float64) * b + 1.0, axis=dim)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)
    if op in ("sum", "mean", "prod"):  # (max and min also find their indices)
        assert c.launches == launches


def test_fused_kernels_kept_in_memory_are_bounded(dev, monkeypatch):
    """A program building ever new expressions keeps at most MAX_FUSED fused kernels in
    memory; every result stays NumPy's and a dropped kernel is rebuilt when needed again."""
    materialise = sys.modules["dl.fusion.materialise"]  # (the package exports a function)
    monkeypatch.setattr(materialise, "MAX_FUSED", 3)
    a = rand_np((5, 7), 3)
    x = dl.tensor(a, device=dev)
    exprs = [lambda m, t: (t + 1.5) * t, lambda m, t: m.abs(t - 2.0) + t,
             lambda m, t: m.exp(t) * 2.0, lambda m, t: m.sqrt(t * t) - 1.0,
             lambda m, t: -t + t * t, lambda m, t: m.maximum(t, 0.25) / (t * t + 1.0)]
    for f in [*exprs, exprs[0]]:
        np.testing.assert_allclose(f(dl, x).numpy(), f(np, a), rtol=1e-6, atol=1e-6)
        assert len(materialise._cache) <= 3

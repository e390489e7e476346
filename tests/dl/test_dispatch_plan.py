"""Dispatch plans (dl/kernels/plan.py): a library op called again with the same shapes, strides
and dtypes replays the launches traced at an earlier call, over the new operands' memory.
Each op here runs several times with fresh values at one key (so the later calls are
replays) and every result is checked against torch in float64; aliasing, views, capture and
`Tunable.only` must not be fooled by a plan."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from dl_helpers import close

import dl
import dl.nn.functional as F
from autotune.tunable import NoCandidate
from dl.kernels import matmul as lib_matmul
from dl.kernels import plan

CALLS = 5  # > WARMUP + 1: the last calls replay


@pytest.fixture(autouse=True)
def _fresh_plans():
    plan.clear()
    yield
    plan.clear()


def _pair(shape, rng, dev, dtype=np.float32):
    a = rng.standard_normal(shape).astype(dtype)
    return dl.tensor(a, device=dev), torch.tensor(a.astype(np.float64))


OPS = {
    "matmul": (((16, 24), (24, 8)), lambda a, b: a @ b, lambda a, b: a @ b),
    "matmul_t": (((24, 16), (8, 24)), lambda a, b: a.T @ b.T, lambda a, b: a.T @ b.T),
    "bmm": (((3, 5, 7), (3, 7, 4)), lambda a, b: a @ b, lambda a, b: a @ b),
    "linear": (((6, 10), (7, 10), (7,)), F.linear, torch.nn.functional.linear),
    "sum_axis": (((9, 13),), lambda x: x.sum(1), lambda x: x.sum(1)),
    "mean_axis0": (((9, 13),), lambda x: x.mean(0), lambda x: x.mean(0)),
    "max_axis": (((9, 13),), lambda x: x.amax(1), lambda x: x.amax(1)),
    "softmax": (((5, 33),), lambda x: F.softmax(x, -1), lambda x: torch.softmax(x, -1)),
    "log_softmax": (((5, 33),), lambda x: F.log_softmax(x, -1),
                    lambda x: torch.log_softmax(x, -1)),
    "layer_norm": (((4, 6, 16),), lambda x: F.layer_norm(x, (16,)),
                   lambda x: torch.nn.functional.layer_norm(x, (16,))),
    "conv2d": (((2, 3, 9, 9), (4, 3, 3, 3)), lambda x, w: F.conv2d(x, w, padding=1),
               lambda x, w: torch.nn.functional.conv2d(x, w, padding=1)),
    "max_pool2d": (((2, 3, 8, 8),), lambda x: F.max_pool2d(x, 2),
                   lambda x: torch.nn.functional.max_pool2d(x, 2)),
    "avg_pool2d": (((2, 3, 8, 8),), lambda x: F.avg_pool2d(x, 2),
                   lambda x: torch.nn.functional.avg_pool2d(x, 2)),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_repeated_op_matches_torch(dev, name):
    shapes, ours, ref = OPS[name]
    rng = np.random.default_rng(7)
    for _ in range(CALLS):
        pairs = [_pair(s, rng, dev) for s in shapes]
        close(ours(*(p[0] for p in pairs)), ref(*(p[1] for p in pairs)), rtol=1e-4,
              atol=1e-5)
    if name not in ("sum_axis", "mean_axis0", "max_axis"):
        assert plan.stats()["plans"] >= 1, plan.stats()


@pytest.mark.parametrize("name", ["matmul", "linear", "layer_norm", "conv2d", "softmax",
                                  "max_pool2d"])
def test_repeated_backward_matches_torch(dev, name):
    shapes, ours, ref = OPS[name]
    rng = np.random.default_rng(11)
    for _ in range(CALLS):
        pairs = [_pair(s, rng, dev) for s in shapes]
        xs = [p[0].requires_grad_() for p in pairs]
        ts = [p[1].requires_grad_() for p in pairs]
        g = rng.standard_normal(tuple(ref(*ts).shape))
        (ours(*xs) * dl.tensor(g.astype(np.float32), device=dev)).sum().backward()
        (ref(*ts) * torch.tensor(g)).sum().backward()
        for x, t in zip(xs, ts, strict=True):
            close(x.grad, t.grad, rtol=1e-4, atol=1e-4)


def test_aliased_operands_do_not_share_a_plan(dev):
    """x @ x and x @ y have one shape key; the plan of one must not serve the other."""
    rng = np.random.default_rng(3)
    for order in (("same", "diff"), ("diff", "same")):
        plan.clear()
        for kind in order:
            for _ in range(CALLS):
                x, tx = _pair((8, 8), rng, dev)
                y, ty = _pair((8, 8), rng, dev)
                if kind == "same":
                    close(x @ x, tx @ tx, rtol=1e-5, atol=1e-5)
                else:
                    close(x @ y, tx @ ty, rtol=1e-5, atol=1e-5)


def test_views_and_offsets(dev):
    """Operands that are views (a slice's copy, a transpose) of memory other than the traced
    call's: the replay reads the new memory with the traced strides."""
    rng = np.random.default_rng(5)
    for _ in range(CALLS):
        big, tbig = _pair((12, 20), rng, dev)
        w, tw = _pair((20, 6), rng, dev)
        close(big[2:10] @ w, tbig[2:10] @ tw, rtol=1e-5, atol=1e-5)
        close(big.T[:, :8].T @ w, tbig.T[:, :8].T @ tw, rtol=1e-5, atol=1e-5)


def test_capture_records_planned_launches(dev):
    """A planned op inside dl.capture: the replays of the capture see every launch."""
    rng = np.random.default_rng(9)
    w, tw = _pair((10, 4), rng, dev)

    def f(x):
        return F.softmax(x @ w, -1)

    for _ in range(CALLS):  # plans exist before the capture begins
        x, tx = _pair((3, 10), rng, dev)
        close(f(x), torch.softmax(tx @ tw, -1), rtol=1e-5, atol=1e-6)
    step = dl.capture(f)
    for _ in range(CALLS):
        x, tx = _pair((3, 10), rng, dev)
        close(step(x), torch.softmax(tx @ tw, -1), rtol=1e-5, atol=1e-6)


def test_only_changes_the_plan(dev):
    """`Tunable.only` restricts the candidates: a plan traced before must not keep running
    the old choice (the candidate's kernels are what the counters see)."""
    rng = np.random.default_rng(2)
    a, ta = _pair((16, 16), rng, dev)
    b, tb = _pair((16, 16), rng, dev)
    for _ in range(CALLS):
        close(a @ b, ta @ tb, rtol=1e-5, atol=1e-5)
    names = [c.name for c in lib_matmul.MATMUL.candidates]
    before = plan.stats()["plans"]
    ran = 0
    for name in names[:3]:
        try:
            with lib_matmul.MATMUL.only(name):
                for _ in range(CALLS):
                    close(a @ b, ta @ tb, rtol=1e-5, atol=1e-5)
                ran += 1
        except NoCandidate:  # a candidate that cannot run this shape
            pass
    assert ran
    assert plan.stats()["plans"] > before


def test_disabled_plans_give_the_same_bits(dev):
    rng = np.random.default_rng(4)
    x, _ = _pair((7, 19), rng, dev)
    w, _ = _pair((5, 19), rng, dev)
    got = [F.log_softmax(F.linear(x, w), -1).numpy() for _ in range(CALLS)]
    plan.enabled = False
    try:
        want = F.log_softmax(F.linear(x, w), -1).numpy()
    finally:
        plan.enabled = True
    for g in got:
        np.testing.assert_array_equal(g, want)


def test_disabled_plans_are_off_at_every_caller(dev):
    """`plan.enabled = False` turns every dispatch plan off: no call site traces or replays
    one (cross_entropy's and the 2-D matmul's key their buffers themselves, and traced
    plans while the switch was off)."""
    rng = np.random.default_rng(5)
    x, tx = _pair((6, 9), rng, dev)
    w, tw = _pair((4, 9), rng, dev)
    y = dl.tensor(rng.integers(0, 4, 6), device=dev)
    before = set(plan._plans)
    plan.enabled = False
    try:
        for _ in range(CALLS):
            loss = F.cross_entropy(x @ w.T, y)
            got = loss.item()
    finally:
        plan.enabled = True
    assert set(plan._plans) == before
    want = torch.nn.functional.cross_entropy(tx @ tw.T, torch.tensor(y.numpy()))
    np.testing.assert_allclose(got, want.item(), rtol=1e-5)


ELEMENTWISE = {
    "add": (((6, 17), (6, 17)), lambda a, b: a + b),
    "mul_broadcast": (((6, 17), (17,)), lambda a, b: a * b),
    "sub_scalar": (((6, 17),), lambda a: a - 1.5),
    "relu": (((6, 17),), lambda a: a.relu()),
    "exp_of_transposed": (((17, 6),), lambda a: a.T.exp()),
    "where_of_slice": (((8, 17),), lambda a: (a[2:6] > 0).float()),
    "div_rows": (((6, 17), (6, 1)), lambda a, b: a / b),
    # a graph of 20 nodes over three leaves (one broadcast), planned as one key
    "chain_of_20": (((6, 17), (6, 17), (17,)),
                    lambda a, b, c: _chain(a, b, c, 20)),
    "per_channel": (((2, 3, 4, 5), (1, 3, 1, 1)), lambda a, b: (a - b) * b + b * 0.5),
}


def _chain(a, b, c, n):
    t = a
    for i in range(n // 2):
        t = (t * b + c) if i % 2 else (t - c) * 0.5
    return t


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_repeated_elementwise_matches_numpy(dev, name):
    """One eager op over materialised tensors goes through a plan from the third call; each
    call's values are new (the plan must read the new operands' memory)."""
    shapes, fn = ELEMENTWISE[name]
    rng = np.random.default_rng(13)
    for _ in range(CALLS):
        xs = [rng.standard_normal(s).astype(np.float32) + 0.1 for s in shapes]
        got = fn(*(dl.tensor(x, device=dev) for x in xs))
        want = fn(*(torch.tensor(x.astype(np.float64)) for x in xs))
        close(got, want, rtol=1e-5, atol=1e-6)


def test_scalar_values_key_the_plan(dev):
    """x * c for several c at one shape: each value keys a plan of its own (the value is a
    kernel argument the trace froze)."""
    rng = np.random.default_rng(17)
    x = rng.standard_normal((5, 9)).astype(np.float32)
    t = dl.tensor(x, device=dev)
    for _ in range(CALLS):
        for c in (0.5, 2.0, -3.0, 7, 0.0, -0.0):
            got, want = (t * c).numpy(), x * np.float32(c)
            np.testing.assert_allclose(got, want, rtol=1e-6)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # -0.0 != 0.0


def test_planned_launches_are_counted(dev):
    """dl.count_kernels sees a replayed op's launches as it saw the traced call's."""
    rng = np.random.default_rng(19)
    a, _ = _pair((9, 9), rng, dev)
    b, _ = _pair((9, 9), rng, dev)
    counts = []
    for _ in range(CALLS):
        with dl.count_kernels() as c:
            F.softmax((a + b) @ b, -1)._materialise()
        counts.append((c.launches, c.names))
    assert all(x == counts[0] for x in counts), counts


def test_plans_hold_no_memory(dev):
    """A plan keeps views' shapes and strides, not buffers: once the tensors of a traced or
    replayed call are gone, their memory is free (no gc pass needed)."""
    import gc
    import weakref
    rng = np.random.default_rng(23)
    refs = []
    gc.disable()
    try:
        for _ in range(CALLS):
            a, _ = _pair((6, 6), rng, dev)
            b, _ = _pair((6, 6), rng, dev)
            y = (a @ b).relu() * 2.0 + a
            y._materialise()
            refs += [weakref.ref(a._buf), weakref.ref(y._buf)]
            del a, b, y
        assert all(r() is None for r in refs)
    finally:
        gc.enable()


def test_empty_tensors_replay(dev):
    """Size-0 operands and outputs: a replay writes only where the traced call wrote (an
    empty buffer once shared its address with the next allocation, and the plan took the
    output for the empty input)."""
    for shape, dim in (((0, 3), 0), ((0, 3), 1), ((4, 0), 1), ((4, 0), 0)):
        want = torch.zeros(shape).sum(dim)
        for fused in (False, True):
            with dl.fusion(fused):
                for _ in range(CALLS):
                    x = dl.tensor(np.zeros(shape, np.float32), device=dev)
                    close(x.sum(dim), want)
                    close((x + 1.0).exp(), torch.zeros(shape).add(1.0).exp())

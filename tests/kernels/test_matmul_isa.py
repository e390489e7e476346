"""matmul register tiles derived from the target's register file: the generated shapes fit
it, every tile of AVX2's (16 registers) and AVX-512's (32) files is right against NumPy
float64 on every runtime, in every operand layout, and the AVX2-only CPU model tunes and
computes with its own tiles."""
import numpy as np
import pytest
from kutil import candidate

import cube as cb
from dl.kernels import matmul as mm
from dl.kernels.view import transpose

FILES = ((16, 32), (32, 64))  # (registers, line bytes): AVX2, AVX-512
# every tile the candidates can pick on either file
TILES = sorted({t for regs, line in FILES for t in mm.register_tiles(regs, line)[:mm.RANKED]})


@pytest.mark.parametrize("regs", [8, 16, 32])
def test_register_tiles_fit_and_fill_the_file(regs):
    tiles = mm.register_tiles(regs)
    assert tiles
    for mr, nr in tiles:
        assert mr * nr + nr + 1 <= regs  # accumulators, B lines, the broadcast A value
        assert 2 <= mr <= mm.MR_MAX and (mr * nr >= 8 or regs < 16)
        assert mr == mm.MR_MAX or (mr + 1) * nr + nr + 1 > regs  # as tall as fits
    if regs >= 16:
        assert all(mr + nr <= mr * nr for mr, nr in tiles)  # at most a load per FMA
    traffic = [64 / mr + 4 / nr for mr, nr in tiles]
    assert traffic == sorted(traffic)


def test_known_files():
    assert mm.register_tiles(16, 32)[:mm.RANKED] == [(6, 2), (4, 3), (2, 5)]
    assert mm.register_tiles(32, 64)[:mm.RANKED] == [(12, 2), (9, 3), (6, 4)]


def _operand(rt, rng, shape, trans):
    x = rng.standard_normal(shape).astype(np.float32)
    if not trans:
        return x, rt.from_numpy(x)
    return x, transpose(rt.from_numpy(np.ascontiguousarray(np.swapaxes(x, -1, -2))))


def _check_relu_product(rt, run, shape, ta, tb, seed, runs=1):
    """relu(a @ b + bias) by `run` (a launcher of the candidates) against NumPy float64,
    `runs` times (a race shows in some runs only)."""
    batch, m, n, k = shape
    rng = np.random.default_rng(seed)
    lead = () if batch is None else (batch,)
    a, da = _operand(rt, rng, (*lead, m, k), ta)
    b, db = _operand(rt, rng, (*lead, k, n), tb)
    bias = rng.standard_normal(n).astype(np.float32)
    a3, b3, c3, bias3, act, out = mm.prepare(rt, da, db, None, rt.from_numpy(bias), "relu")
    for _ in range(runs):
        run(rt, a3, b3, c3, bias3, act)
        np.testing.assert_allclose(out.numpy(), mm.reference(a, b, bias, "relu"), rtol=1e-4,
                                   atol=1e-4)


# (batch, m, n, k): partial row tiles and partial panels everywhere
SHAPES = [(None, 13, 96, 7), (2, 29, 80, 33)]
# (pack B, pack A, A transposed, B transposed): each way the candidates read operands
LAYOUTS = [("lines", False, False, False), ("", False, False, False),
           ("lines", True, True, False)]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: "-".join(map(str, x)))
@pytest.mark.parametrize("tile", TILES, ids=lambda t: f"{t[0]}x{t[1]}")
def test_every_register_tile_matches_numpy(rt, tile, layout):
    pack, pack_a, ta, tb = layout
    if rt.name != "cpu" and layout != LAYOUTS[0]:
        # the layouts differ only in the launcher's packing (the same kernel source): one
        # per tile where compiling is slow (the interpreter, PoCL, lavapipe)
        pytest.skip("one layout per tile off the CPU")
    for batch, m, n, k in SHAPES if rt.name == "cpu" else SHAPES[:1]:
        _check_relu_product(rt, mm._run_tiled(*tile, pack, pack_a), (batch, m, n, k), ta, tb,
                            m * n + k)


@pytest.mark.parametrize("kind", ["kblocked", "akblocked", "swapped"])
@pytest.mark.parametrize("tile", TILES, ids=lambda t: f"{t[0]}x{t[1]}")
def test_k_blocked_tiles_cover_each_row_once(rt, tile, kind, monkeypatch):
    """The K-blocked kernels with every tile, over several row blocks and K blocks (made
    small here): each cube read-adds-writes its rows' partial sums once per K block, so a
    row tile reaching into the next cube's block raced with it (9x3 tiles in 96-row blocks:
    wrong sums in half the runs on two threads; the interpreter refuses the race)."""
    if kind == "swapped" and tile != (9, 3):
        pytest.skip("the swapped launcher's row blocks: one tile (its kernel is kblocked's)")
    monkeypatch.setattr(mm, "KC", 16)
    monkeypatch.setattr(mm, "MC", 24)  # not a multiple of 9
    run = {"kblocked": mm._run_kblocked(*tile), "akblocked": mm._run_kblocked(*tile, True),
           "swapped": mm._run_swapped(*tile)}[kind]
    for batch, m, n, k in [(None, 50, 64, 40), (2, 27, 48, 33)][:2 if rt.name == "cpu" else 1]:
        if kind == "swapped":  # rows of the kernel are C's columns
            m, n = n, m
        _check_relu_product(rt, run, (batch, m, n, k), False, kind == "swapped", m + n + k,
                            runs=3 if rt.name == "cpu" else 1)


DOT_TILES = sorted({t for regs, _ in FILES for t in mm.dot_tiles(regs)[:2]})


@pytest.mark.parametrize("tile", DOT_TILES, ids=lambda t: f"dot{t[0]}x{t[1]}")
def test_every_dot_tile_matches_numpy(rt, tile):
    """The dot kernels' tiles (A and B^T both K-contiguous, as in nn.Linear)."""
    for batch, m, n, k in SHAPES if rt.name == "cpu" else SHAPES[:1]:
        k = 16 * k  # K in whole lines
        rng = np.random.default_rng(m + n + k)
        lead = () if batch is None else (batch,)
        a, da = _operand(rt, rng, (*lead, m, k), False)
        b, db = _operand(rt, rng, (*lead, k, n), True)
        a3, b3, c3, bias3, act, out = mm.prepare(rt, da, db, None, None, "none")
        if not mm._dot_ok(rt, a3, b3, c3, bias3, act):
            pytest.skip("no lines along K on this runtime")
        mm._run_dot(*tile)(rt, a3, b3, c3, bias3, act)
        np.testing.assert_allclose(out.numpy(), mm.reference(a, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tile", sorted({mm.register_tiles(r, line)[0] for r, line in FILES}),
                         ids=lambda t: f"{t[0]}x{t[1]}")
def test_transposed_b_packed_into_register_tiles(rt, tile):
    """tpacked_r0: a K-contiguous B gathered into the first tile's panels."""
    rng = np.random.default_rng(5)
    a, da = _operand(rt, rng, (2, 19, 40), False)
    b, db = _operand(rt, rng, (2, 40, 72), True)
    a3, b3, c3, bias3, act, out = mm.prepare(rt, da, db, None, None, "none")
    mm._run_tiled(*tile, "strided")(rt, a3, b3, c3, bias3, act)
    np.testing.assert_allclose(out.numpy(), mm.reference(a, b), rtol=1e-4, atol=1e-4)


def _avx2():
    try:
        return cb.runtime("cpu", isa="avx2")
    except cb.RuntimeUnavailable as e:
        pytest.skip(f"no AVX2 model here: {e}")


def test_cpu_tiles_come_from_the_isa():
    host, avx2 = cb.runtime("cpu"), _avx2()
    assert mm.tiles_for(avx2) == mm.register_tiles(16, 32)
    f = host.features
    assert mm.tiles_for(host) == mm.register_tiles(f.vector_registers, f.vector_bits // 8)


RANKED_NAMES = [c.name for c in mm.MATMUL.candidates if c.name[-2:-1] == "r"]


@pytest.mark.parametrize("name", RANKED_NAMES + [None])
def test_avx2_model_matmul_matches_numpy(name, monkeypatch):
    """The AVX2-only model runs its own register tiles (and the tuned choice) correctly."""
    rt = _avx2()
    rng = np.random.default_rng(7)
    a = rng.standard_normal((70, 64)).astype(np.float32)
    b = rng.standard_normal((64, 72)).astype(np.float32)
    db = rt.from_numpy(b)
    if name is not None and name.startswith(("dot", "tpacked")):
        db = transpose(rt.from_numpy(np.ascontiguousarray(b.T)))
    if name is None:
        out = mm.matmul(rt, rt.from_numpy(a), db)
    else:
        with candidate(mm.MATMUL, name, monkeypatch):
            out = mm.matmul(rt, rt.from_numpy(a), db)
    np.testing.assert_allclose(out.numpy(), mm.reference(a, b), rtol=1e-4, atol=1e-4)


def test_fit_tiles_rank_loads_per_useful_fma():
    """`fit_tiles` reorders the file's tiles for one product: fewest loads (MR broadcasts of
    A + NR lines of B) per FMA that lands inside the m x nl product."""
    for regs, line in FILES:
        for m, nl in [(1024, 16), (1024, 48), (17, 5), (512, 32), (1, 1)]:
            fit = mm.fit_tiles(regs, line, m, nl)
            assert sorted(fit) == sorted(mm.register_tiles(regs, line))

            def cost(t, m=m, nl=nl):
                mr, nr = t
                inside = m * nl / (-(-m // mr) * mr * -(-nl // nr) * nr)
                return (mr + nr) / (mr * nr * inside)
            costs = [cost(t) for t in fit]
            assert costs == sorted(costs)
    # 16 lines of N (n = 256 on AVX-512): 5x5's panels overhang by a fifth, so 6x4 first
    assert mm.fit_tiles(32, 64, 1024, 16)[0] == (6, 4)
    assert mm.fit_tiles(32, 64, 1024, 128)[:2] == [(5, 5), (6, 4)]
    assert mm.fit_tiles(16, 32, 1024, 32)[0] == (4, 3)


# every tile `fit_tiles` can rank first or second, beyond the ranked ones (CPU candidates)
FIT_TILES = sorted({t for regs, line in FILES for t in mm.register_tiles(regs, line)} - set(TILES))


FIRST_TILES = {mm.register_tiles(regs, line)[0] for regs, line in FILES}


@pytest.mark.parametrize("pack", ["strided", "kblocked"])
@pytest.mark.parametrize("tile", sorted(set(TILES + FIT_TILES) - FIRST_TILES),
                         ids=lambda t: f"{t[0]}x{t[1]}")
def test_every_fitted_tile_matches_numpy(tile, pack, monkeypatch):
    """The `_fitted` candidates' kernels (B gathered into panels, or K-blocked with A in
    place) with each tile of either file but its first (the r0 candidates' tests run
    those), on the CPU, where they run: a batch, partial row tiles and panels; K-blocked
    over several K and row blocks; bias and activation."""
    rt = cb.runtime("cpu")
    monkeypatch.setattr(mm, "KC", 16)
    monkeypatch.setattr(mm, "MC", 24)
    run = mm._run_kblocked(*tile) if pack == "kblocked" else mm._run_tiled(*tile, pack)
    # B gathered: K in whole lines as at nn.Linear's shapes (`pack_t_lines`) and an odd K
    # (`pack_b_strided`)
    shapes = [(2, 29, 80, 40), (None, 13, 96, 7)] if pack == "strided" else \
        [(2, 29, 80, 33), (None, 50, 48, 40)]
    for shape in shapes:
        _check_relu_product(rt, run, shape, False, pack == "strided", sum(shape[1:]))


@pytest.mark.parametrize("isa", ["host", "avx2"])
@pytest.mark.parametrize("name", ["tpacked_f0", "tpacked_f1", "kblocked_f0", "kblocked_f1"])
def test_fitted_candidates_through_the_tunable(name, isa, monkeypatch):
    """The fitted candidates as autotune runs them, at a shape where each fits a tile of its
    own (nn.Linear's x @ W^T for tpacked, a plain product for kblocked), on each ISA model."""
    try:
        rt = cb.runtime("cpu", isa=isa)
    except cb.RuntimeUnavailable as e:
        pytest.skip(f"no {isa} model here: {e}")
    rng = np.random.default_rng(9)
    m, k = 100, 72
    for n in (64, 80, 128, 160, 256):
        a, da = _operand(rt, rng, (m, k), False)
        b, db = _operand(rt, rng, (k, n), name.startswith("tpacked"))
        args = mm.prepare(rt, da, db)[:5]
        if mm.MATMUL[name].is_valid(rt, *args):
            break
    else:
        assert name.endswith("f1"), f"{name} fits no tile of its own at any n"
        pytest.skip(f"{name}: the second fitted tile is the file's first here")
    with candidate(mm.MATMUL, name, monkeypatch):
        out = mm.matmul(rt, da, db)
    np.testing.assert_allclose(out.numpy(), mm.reference(a, b), rtol=1e-4, atol=1e-4)

"""matmul: every candidate against NumPy float64, on every runtime."""
import os

import numpy as np
import pytest
from kutil import candidate, names, need

from dl.kernels import matmul as mm
from dl.kernels.view import transpose

CASES = [  # (batch, m, n, k, transposed a, transposed b)
    (None, 7, 13, 5, False, False),
    (None, 1, 1, 1, False, False),
    (3, 17, 32, 9, False, True),
    (2, 33, 48, 20, True, False),
    (None, 5, 64, 64, True, True),
    # the dot kernels' case (A and B K-contiguous, K in whole lines), with partial tiles
    (2, 13, 20, 24, False, True),
]


def _operand(rt, rng, shape, trans, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    if not trans:
        return x, rt.from_numpy(x)
    t = np.ascontiguousarray(np.swapaxes(x, -1, -2))
    return x, transpose(rt.from_numpy(t))


@pytest.mark.parametrize("name", names(mm.MATMUL))
@pytest.mark.parametrize("case", CASES)
def test_matmul_candidates(rt, name, case, monkeypatch):
    batch, m, n, k, ta, tb = case
    rng = np.random.default_rng(m * n + k)
    lead = () if batch is None else (batch,)
    a, da = _operand(rt, rng, (*lead, m, k), ta, np.float32)
    b, db = _operand(rt, rng, (*lead, k, n), tb, np.float32)
    with candidate(mm.MATMUL, name, monkeypatch):
        out = mm.matmul(rt, da, db)
    np.testing.assert_allclose(out.numpy(), mm.reference(a, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", [n for n in names(mm.MATMUL) if n.startswith("dot_")])
def test_dot_candidates_f16_over_whole_simd_lines(rt, name, monkeypatch):
    """f16 with K a multiple of 32: a 64-byte register holds 32 halves, so the dot kernels
    read lines of 32 along K (a lane sum unrolled for at most 16 lanes dropped half of K)."""
    if not rt.features.f16:
        pytest.skip(f"{rt.name} has no f16")
    if rt.name == "opencl" and name != "dot_4x2" and not os.environ.get("CUBE_SLOW"):
        # PoCL compiled each of these f16 kernels for 35-113 s on an AVX2 CPU (5.4 min of CI)
        pytest.skip("opencl runs dot_4x2 here, every dot candidate with CUBE_SLOW=1")
    rng = np.random.default_rng(7)
    a, da = _operand(rt, rng, (9, 96), False, np.float16)
    b, db = _operand(rt, rng, (96, 32), True, np.float16)
    with candidate(mm.MATMUL, name, monkeypatch):
        out = mm.matmul(rt, da, db)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out.numpy().astype(np.float64), want, rtol=2e-2, atol=0.1)


@pytest.mark.parametrize("act", ["relu", "gelu", "tanh"])
@pytest.mark.parametrize("name", ["tiled_6x2", "packed_4x4", "dot_4x3", "dot_4x2", "dot_4x4",
                                  "swapped_r0", "shared_8", "plane", "blocked_32", "split_16"])
def test_matmul_epilogue(rt, name, act, monkeypatch):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((9, 32)).astype(np.float32), \
        rng.standard_normal((32, 16)).astype(np.float32)
    bias = rng.standard_normal(16).astype(np.float32)
    db = rt.from_numpy(b) if not name.startswith(("dot_", "swapped")) else \
        transpose(rt.from_numpy(np.ascontiguousarray(b.T)))
    with candidate(mm.MATMUL, name, monkeypatch):
        out = mm.matmul(rt, rt.from_numpy(a), db, bias=rt.from_numpy(bias), act=act)
    np.testing.assert_allclose(out.numpy(), mm.reference(a, b, bias, act), rtol=1e-4,
                               atol=1e-4)


def test_matmul_broadcast_batch_and_f64(rt):
    need(rt, np.float64)
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 6, 10))
    b = rng.standard_normal((10, 7))
    out = mm.matmul(rt, rt.from_numpy(a), rt.from_numpy(b[None]))  # batch 1 broadcasts
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-12, atol=1e-12)


def test_matmul_rejects_bad_shapes(rt):
    a, b = rt.empty((3, 4)), rt.empty((5, 2))
    with pytest.raises(ValueError, match="do not match"):
        mm.matmul(rt, a, b)


@pytest.mark.slow
def test_matmul_tuned_large(rt):
    if rt.name == "interp":
        pytest.skip("too big for the interpreter")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((300, 257)).astype(np.float32)
    b = rng.standard_normal((257, 190)).astype(np.float32)
    out = mm.matmul(rt, rt.from_numpy(a), rt.from_numpy(b))
    np.testing.assert_allclose(out.numpy(), mm.reference(a, b), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("name", ["tiled_6x2", "packed_6x2", "apacked_6x2", "tpacked_6x2"])
def test_matmul_row_blocked_cube_order(rt, name, monkeypatch):
    """Shapes where the CPU walks blocks of row tiles (an A too big for L2, short K, many
    panels): six whole blocks, a shorter last block, a partial last row tile and a partial
    last panel."""
    if rt.name == "interp":
        pytest.skip("too big for the interpreter")
    m, k, n = 611, 256, 136
    if rt.name == "cpu":
        assert mm._row_block(rt, 6, k, (mm.cdiv(m, 6), mm.cdiv(n // 8, 2), 1), rt.empty(
            (1,)).elem) == 16
    rng = np.random.default_rng(4)
    ta, tb = name.startswith("a"), name.startswith("t")
    a, da = _operand(rt, rng, (m, k), ta, np.float32)
    b, db = _operand(rt, rng, (k, n), tb, np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    with candidate(mm.MATMUL, name, monkeypatch):
        out = mm.matmul(rt, da, db, bias=rt.from_numpy(bias), act="relu")
    np.testing.assert_allclose(out.numpy(), mm.reference(a, b, bias, "relu"), rtol=1e-4,
                               atol=1e-4)


def test_small_b_ranks_unpacked_tiles_first(rt):
    """An L1-sized B with contiguous rows (attention's p @ v) times the unpacked register
    tiles first on the CPU; a transposed or a large B keeps the packed ones."""
    rng = np.random.default_rng(6)
    a, da = _operand(rt, rng, (4, 24, 32), False, np.float32)
    b, db = _operand(rt, rng, (4, 32, 64), False, np.float32)
    args = mm.prepare(rt, da, db)[:5]
    first = mm.MATMUL.valid_candidates(rt, *args)[0].name
    if rt.name == "cpu":
        assert first == "tiled_r0"
        big = mm.prepare(rt, da, rt.empty((32, 1024)))[:5]
        assert not mm.MATMUL.valid_candidates(rt, *big)[0].name.startswith("tiled_r")
    out = mm.matmul(rt, da, db)
    np.testing.assert_allclose(out.numpy(), mm.reference(a, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["kblocked_r0", "akblocked_r0", "akblocked_big_r0"])
def test_kblocked_over_several_k_and_row_blocks(rt, name, monkeypatch):
    """kblocked_r0 (and with A packed, in K blocks of KC or of KC_BIG, here 200) with K over
    three K blocks (the last partial), rows over two row blocks (the last partial, with a
    partial row tile) and column panels in groups of NP (the last group partial), bias and
    activation on the last."""
    if rt.name != "cpu":
        pytest.skip("a CPU candidate")
    monkeypatch.setattr(mm, "MIN_UNITS", 1)  # groups of panels even at this size
    monkeypatch.setattr(mm, "KC_BIG", 200)
    monkeypatch.setattr(mm, "MC_BIG", mm.MC)
    m, k, n = mm.MC + 37, 2 * mm.KC + 19, 328
    lsz = mm.line_size(rt, mm.cb.f32, n)
    assert mm.panels_per_unit(mm.tiles_for(rt)[0][1], lsz, m, 99, 2, mm.cb.f32) > 1
    rng = np.random.default_rng(8)
    a, da = _operand(rt, rng, (2, m, k), False, np.float32)
    b, db = _operand(rt, rng, (2, k, n), False, np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    with candidate(mm.MATMUL, name, monkeypatch):
        out = mm.matmul(rt, da, db, bias=rt.from_numpy(bias), act="relu")
    np.testing.assert_allclose(out.numpy(), mm.reference(a, b, bias, "relu"), rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("case", [
    # (batch, m, n, k, transposed a, transposed b): a conv weight gradient's shape (A
    # transposed, K = batch x pixels), a batch with a ragged last chunk, and an epilogue
    (None, 16, 9, 700, True, False),
    (3, 5, 20, 300, False, True),
    (None, 33, 17, 129, False, False),
])
def test_split_k_over_chunks(rt, case, monkeypatch):
    """split_16: partial products over chunks of K, summed with the bias and activation
    (GPU targets only: the CPU walks K in cache blocks)."""
    batch, m, n, k, ta, tb = case
    assert mm.split_chunks(16, batch or 1, m, n, k)[1] > 1  # the case splits K
    rng = np.random.default_rng(k)
    lead = () if batch is None else (batch,)
    a, da = _operand(rt, rng, (*lead, m, k), ta, np.float32)
    b, db = _operand(rt, rng, (*lead, k, n), tb, np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    with candidate(mm.MATMUL, "split_16", monkeypatch):
        out = mm.matmul(rt, da, db, bias=rt.from_numpy(bias), act="relu")
    np.testing.assert_allclose(out.numpy(), mm.reference(a, b, bias, "relu"), rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("k", [1, 63, 64, 65, 1000, 50176])
@pytest.mark.parametrize("tiles", [(1, 1, 1), (1, 32, 144), (64, 512, 512)])
def test_split_chunks_cover_k_once(k, tiles):
    """Every step of K falls in exactly one chunk, chunks are whole tiles, none is empty."""
    batch, m, n = tiles
    kc, s = mm.split_chunks(16, batch, m, n, k)
    assert kc % 16 == 0 and s >= 1
    assert (s - 1) * kc < k <= s * kc
    if s > 1:
        assert kc >= mm.SPLIT_MIN * 16 and (s - 1) * kc < k


@pytest.mark.parametrize("name", ["blocked_32", "blocked_64"])
@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_blocked_over_several_tiles(rt, name, ta, tb, monkeypatch):
    """The register-tiled GPU kernel over several cube tiles, edge tiles on both sides and
    several K steps, each operand in either layout (the loads walk the contiguous side)."""
    m, n, k = 70, 130, 40
    rng = np.random.default_rng(7)
    a, da = _operand(rt, rng, (2, m, k), ta, np.float32)
    b, db = _operand(rt, rng, (2, k, n), tb, np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    with candidate(mm.MATMUL, name, monkeypatch):
        out = mm.matmul(rt, da, db, bias=rt.from_numpy(bias))
    np.testing.assert_allclose(out.numpy(), mm.reference(a, b, bias), rtol=1e-4, atol=1e-4)

"""The fused attention kernel behind F.scaled_dot_product_attention (no gradient, no mask but
causality): against torch float64 on every runtime, on the views a multi-head layer passes
(slices of one projection, heads strided), and falling back to the unfused ops, with the same
values, where the kernel does not apply."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import dl
from dl import nn
from dl.kernels import attention as lib
from dl.kernels import plan
from dl.kernels.common import simd_bytes
from dl.nn import functional as F


def _ref(q, k, v, causal):
    """torch's own sdpa in float64: its causal mask is top-left aligned (query i sees keys
    0 .. i) whatever Lq and Lk are (a hand-written mask here once encoded the kernel's
    bottom-right alignment and passed it)."""
    t = [torch.tensor(a, dtype=torch.float64) for a in (q, k, v)]
    return torch.nn.functional.scaled_dot_product_attention(*t, is_causal=causal).numpy()


def _sdpa(dev, q, k, v, causal, dtype=dl.float32):
    dq, dk, dv = (dl.tensor(a, device=dev, dtype=dtype) for a in (q, k, v))
    with dl.no_grad(), dl.count_kernels() as c:
        out = F.scaled_dot_product_attention(dq, dk, dv, is_causal=causal).numpy()
    return out, c.names


# (q shape, k/v shape, causal): heads of 64 and 128 (two blocks of output lines), Lq != Lk
# (causal alignment), one head as a 3-D operand, row counts off the unit's row block
CASES = [((2, 4, 128, 64), (2, 4, 128, 64), False),
         ((2, 3, 37, 64), (2, 3, 48, 64), True),
         ((1, 2, 64, 128), (1, 2, 32, 128), False),
         ((3, 20, 32), (3, 16, 32), True),
         ((2, 2, 16, 16), (2, 2, 16, 16), True),
         # causal, fewer queries than keys and more (top-left alignment; on AVX2 the scores
         # go in blocks and a tile skips the key lines past its last row)
         ((1, 2, 40, 32), (1, 2, 128, 32), True),
         ((1, 2, 150, 32), (1, 2, 128, 32), True)]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_fused_attention_matches_torch(dev, case):
    qs, ks, causal = case
    rng = np.random.default_rng(sum(qs))
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in (qs, ks, ks))
    out, names = _sdpa(dev, q, k, v, causal)
    assert "lib.attention" in names, names  # the fused kernel, not the unfused ops
    np.testing.assert_allclose(out, _ref(q, k, v, causal), rtol=1e-4, atol=1e-5)


def test_tiles_fit_the_register_file():
    """`tiles` for every key and head size the kernel takes, on AVX2's and AVX-512's files:
    the score block divides the keys and, with its query broadcasts and a line of k^T,
    leaves a register spare; so do the output rows with their lines of v; a row's whole
    scores stay in registers only where they fit."""
    for regs in (16, 32):
        for kl in range(1, 65):
            for dl_ in range(1, 9):
                ms, sb, g, db = lib.tiles(regs, kl, dl_)
                assert 1 <= ms <= lib.MS_MAX and kl % sb == 0 and dl_ % db == 0
                assert ms * sb + ms + 1 <= regs - 1, (regs, kl, ms, sb)
                assert g * ms * db + db + 1 <= regs or g == 1, (regs, dl_, g, ms, db)
                if sb < kl:  # blocked only where a row's scores could not all stay
                    assert kl + 2 > regs - 1


@pytest.mark.parametrize("regs", [16, 32])
@pytest.mark.parametrize("kl,causal", [(4, True), (32, True), (32, False)])
def test_every_register_file_tiling_matches_torch(dev, rt, regs, kl, causal, monkeypatch):
    """The kernel tiled for AVX2's 16 registers and for AVX-512's 32, whatever the machine,
    at kl lines of keys (4: a row's scores in registers; 32: in blocks on both files) and
    4 lines of head size: both give torch's values."""
    if rt.name.startswith("wgpu"):  # WGSL and our SPIR-V alike
        pytest.skip(f"{rt.name}: lavapipe takes minutes to compile these tilings (32 "
                    f"registers at 16 keys: over 5 min); the cases above run its own")
    monkeypatch.setattr(lib, "registers", lambda rt: regs)
    lsz = simd_bytes(rt) // 4
    ms, sb, _, _ = lib.tiles(regs, kl, 4)
    assert (sb < kl) == (kl == 32)  # the path this case is for
    plan.clear()  # no replay of a plan traced with the machine's own tiles
    rng = np.random.default_rng(kl + regs)
    q = rng.standard_normal((1, 2, 9, 4 * lsz)).astype(np.float32)
    k, v = (rng.standard_normal((1, 2, kl * lsz, 4 * lsz)).astype(np.float32) for _ in "kv")
    try:
        out, names = _sdpa(dev, q, k, v, causal)
    finally:
        plan.clear()
    assert "lib.attention" in names, names
    np.testing.assert_allclose(out, _ref(q, k, v, causal), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("causal", [True, False])
def test_long_sequences_fuse_on_the_cpu(dev, rt, causal):
    """1024 keys: past a GPU thread's limit (`max_keys`: the unfused ops there), fused on
    the CPU (the probabilities on the thread's stack); torch's values either way, with
    fewer queries than keys (causal: query i sees keys 0 .. i)."""
    rng = np.random.default_rng(7)
    q = rng.standard_normal((1, 2, 70, 32)).astype(np.float32)
    k, v = (rng.standard_normal((1, 2, 1024, 32)).astype(np.float32) for _ in "kv")
    out, names = _sdpa(dev, q, k, v, causal)
    assert ("lib.attention" in names) == (lib.max_keys(rt) >= 1024), names
    np.testing.assert_allclose(out, _ref(q, k, v, causal), rtol=1e-4, atol=1e-5)


def test_fused_attention_float64(dev, rt):
    if not getattr(rt.features, "f64", True):
        pytest.skip(f"{rt.name} has no f64")
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 2, 32, 32)) for _ in range(3))
    out, names = _sdpa(dev, q, k, v, True, dl.float64)
    assert "lib.attention" in names, names
    np.testing.assert_allclose(out, _ref(q, k, v, True), rtol=1e-10, atol=1e-12)


def test_unsupported_shapes_fall_back_with_the_same_values(dev):
    """A head size off every line (12) and a mask: the unfused ops, same values."""
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((2, 2, 9, 12)).astype(np.float32) for _ in range(3))
    out, names = _sdpa(dev, q, k, v, False)
    assert "lib.attention" not in names, names
    np.testing.assert_allclose(out, _ref(q, k, v, False), rtol=1e-4, atol=1e-5)
    dq, dk, dv = (dl.tensor(a, device=dev) for a in (q, k, v))
    mask = dl.tensor(np.tril(np.ones((9, 9), bool)), device=dev)
    with dl.no_grad():
        masked = F.scaled_dot_product_attention(dq, dk, dv, attn_mask=mask).numpy()
    np.testing.assert_allclose(masked, _ref(q, k, v, True), rtol=1e-4, atol=1e-5)


def test_multihead_attention_reads_the_projection_in_place(dev):
    """nn.MultiheadAttention without a gradient: q, k and v are strided slices of one
    projection, read by the fused kernel where they lie, and its output feeds out_proj
    without a copy; the layer's output matches torch's."""
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(64, 4, batch_first=True).double()
    ours = nn.MultiheadAttention(64, 4, batch_first=True).to(dev)
    ours.load_state_dict({n: dl.tensor(p.detach().float().numpy(), device=dev)
                          for n, p in ref.state_dict().items()})
    x = np.random.default_rng(5).standard_normal((2, 32, 64)).astype(np.float32)
    dx = dl.tensor(x, device=dev)
    with dl.no_grad(), dl.count_kernels() as c:
        out, w = ours(dx, dx, dx, need_weights=False)
        got = out.numpy()
    assert w is None and "lib.attention" in c.names, c.names
    want, _ = ref(*(torch.tensor(x, dtype=torch.float64),) * 3, need_weights=False)
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_gradients_take_the_unfused_ops(dev):
    rng = np.random.default_rng(6)
    q, k, v = (dl.tensor(rng.standard_normal((1, 2, 16, 16)).astype(np.float32), device=dev,
                         requires_grad=True) for _ in range(3))
    with dl.count_kernels() as c:
        F.scaled_dot_product_attention(q, k, v).sum().backward()
    assert "lib.attention" not in c.names
    assert q.grad is not None and k.grad is not None and v.grad is not None

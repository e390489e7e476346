"""The direct blocked conv2d (dl/kernels/conv_direct.py): forward candidates against NumPy
float64, the input- and weight-gradient candidates against torch float64, and the dl op's
backward through them, on every runtime that starts."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from dl_helpers import close, rand_np

import dl
from autotune import NoCandidate
from dl.kernels import conv as C
from dl.kernels import conv_direct as cd
from dl.nn import functional as F

# the CPU's direct candidates: blocked tiles (conv_direct) and the 1x1 matmul (conv_1x1)
BLOCKED = [c.name for c in C.CONV.candidates if c.name.startswith(("blocked", "pix_"))]
GRAD = [c.name for c in C.CONV_GRAD_INPUT.candidates]
GRADW = [c.name for c in C.CONV_GRAD_WEIGHT.candidates]

# (x shape, w shape, stride, padding, dilation): output channels off the line size (lanes
# past OC skipped), rows that end in a partial tile, 3x3 and 1x1 at strides 1 and 2,
# dilation, asymmetric padding
CASES = [((2, 5, 9, 11), (18, 5, 3, 3), 1, 1, 1),
         ((1, 3, 8, 9), (16, 3, 3, 3), 2, 1, 1),
         ((2, 4, 6, 7), (20, 4, 1, 1), 1, 0, 1),
         ((1, 4, 7, 8), (16, 4, 1, 1), 2, 0, 1),
         ((1, 3, 9, 10), (5, 3, 3, 2), (2, 1), (2, 0), (2, 1)),
         ((1, 2, 5, 6), (4, 2, 3, 3), 1, (0, 1), 1),
         # interior tiles (no column tests) between the edge ones; padding past the
         # kernel's reach (whole output rows and columns of padding only)
         ((1, 3, 6, 45), (16, 3, 3, 3), 1, 1, 1),
         ((1, 2, 4, 5), (16, 2, 3, 3), 1, 3, 1),
         # 1x1 with whole lines of pixels and output channels off every tile, padded 1x1
         ((2, 6, 8, 8), (20, 6, 1, 1), 1, 0, 1),
         ((1, 3, 6, 8), (17, 3, 1, 1), 1, 1, 1),
         ((1, 5, 16, 15), (13, 5, 1, 1), 2, 0, 1),
         # rows a power-of-two tile divides: tiles stored as lines of pixels
         # (`cd.line_store`), output channels off the line size, and 1x3 / 5x5 kernels
         ((2, 3, 6, 16), (20, 3, 3, 3), 1, 1, 1),
         ((1, 4, 5, 8), (9, 4, 5, 5), 1, 2, 1),
         ((1, 2, 3, 32), (17, 2, 1, 3), 1, (0, 1), 1),
         # output channels past three AVX-512 lines: blocked_4 needed (`cd.needed`)
         ((1, 3, 5, 9), (50, 3, 3, 3), 1, 1, 1)]
LINE_CASES = CASES[-4:-1]


def _run(tunable, name, fn, monkeypatch):
    monkeypatch.setenv("CUBE_AUTOTUNE", "off")
    with tunable.only(name):
        try:
            return fn()
        except NoCandidate:
            pytest.skip(f"{name} cannot run this case on this runtime")


@pytest.mark.parametrize("name", BLOCKED)
@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("epilogue", ["none", "bias_relu"])
def test_blocked_forward(rt, name, case, epilogue, monkeypatch):
    xs, ws, s, p, d = case
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32) if epilogue != "none" else None
    act = "relu" if epilogue != "none" else "none"
    out = _run(C.CONV, name, lambda: C.conv2d(
        rt, rt.from_numpy(x), rt.from_numpy(w), None if b is None else rt.from_numpy(b), s, p,
        d, act=act), monkeypatch)
    ref = C.reference(x, w, b, s, p, d)
    np.testing.assert_allclose(out.numpy(), np.maximum(ref, 0) if act == "relu" else ref,
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", [n for n in BLOCKED if n.startswith("blocked")])
@pytest.mark.parametrize("case", LINE_CASES, ids=str)
def test_line_stores_are_taken(rt, name, case, monkeypatch):
    """Where a tile's width is a power of two that divides OW and fits a register, the
    blocked kernel stores lines of pixels (the values: test_blocked_forward's cases)."""
    xs, ws, s, p, d = case
    seen = []
    launch = cd.conv_blocked.launch
    monkeypatch.setattr(cd.conv_blocked, "launch",
                        lambda *a, **k: (seen.append((k["RW"], k["LINES"])), launch(*a, **k)))
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    out = _run(C.CONV, name, lambda: C.conv2d(rt, rt.from_numpy(x), rt.from_numpy(w), None,
                                               s, p, d), monkeypatch)
    np.testing.assert_allclose(out.numpy(), C.reference(x, w, None, s, p, d), rtol=1e-4,
                               atol=1e-4)
    simd = cd.simd_bytes(rt) // 4
    assert seen and all(lines == (rw & (rw - 1) == 0 and 1 < rw <= simd
                                  and out.shape[3] % rw == 0) for rw, lines in seen), seen
    if cd.is_cpu(rt):
        assert any(lines for _, lines in seen), seen


@pytest.mark.parametrize("name", BLOCKED)
def test_blocked_forward_f64_and_strided_input(rt, name, monkeypatch):
    """f64 (lines of half the f32 width) from a transposed (non-contiguous) input view."""
    if not rt.features.f64:
        pytest.skip(f"{rt.name} has no f64")
    rng = np.random.default_rng(3)
    xt = rng.standard_normal((2, 3, 9, 8))  # (N, C, W, H): the input is its transpose
    w = rng.standard_normal((10, 3, 3, 3))
    buf = rt.from_numpy(xt)
    xv = buf.view((2, 3, 8, 9), (buf.strides[0], buf.strides[1], 1, 8))
    out = _run(C.CONV, name, lambda: C.conv2d(rt, xv, rt.from_numpy(w), padding=1),
               monkeypatch)
    np.testing.assert_allclose(out.numpy(), C.reference(xt.transpose(0, 1, 3, 2), w,
                                                        padding=1), rtol=1e-10, atol=1e-10)


# stride 1 (the direct gradient's domain), and strides the phase candidate splits (one
# stride-1 conv per output phase): 3x3 s2, an input row no window reads (zero gradient),
# unequal strides, 5x5 s3, and dilation (refused by both direct candidates)
GRAD_CASES = [((2, 5, 9, 11), (18, 5, 3, 3), 1, 1, 1),
              ((1, 4, 6, 7), (3, 4, 3, 2), 1, 0, 1),
              ((1, 3, 9, 10), (17, 3, 3, 3), 1, 2, 2),
              ((2, 4, 6, 7), (20, 4, 1, 1), 1, 0, 1),
              ((1, 3, 8, 9), (16, 3, 3, 3), 2, 1, 1),
              ((2, 5, 10, 11), (18, 5, 3, 3), 2, 0, 1),
              ((1, 4, 9, 12), (7, 4, 3, 3), (2, 1), 1, 1),
              ((1, 3, 13, 14), (5, 3, 5, 5), 3, 2, 1),
              ((1, 3, 9, 9), (5, 3, 3, 3), 2, 1, 2),
              ((2, 3, 6, 16), (20, 3, 3, 3), 1, 1, 1),  # input rows stored as lines
              # input channels past one and three AVX-512 lines: the 2- and 4-line tiles
              # are needed (`cd.needed`; with fewer they would compute only zeros)
              ((1, 20, 5, 6), (6, 20, 3, 3), 1, 1, 1),
              ((1, 50, 4, 5), (4, 50, 3, 3), 1, 1, 1),
              ((1, 20, 9, 8), (6, 20, 3, 3), 2, 1, 1)]  # phases_2 needed


@pytest.mark.parametrize("name", GRAD)
@pytest.mark.parametrize("case", GRAD_CASES, ids=str)
def test_grad_input_candidates(rt, name, case, monkeypatch):
    xs, ws, s, p, d = case
    rng = np.random.default_rng(sum(xs))
    w = rng.standard_normal(ws).astype(np.float32)
    y = torch.nn.functional.conv2d(torch.zeros(xs, dtype=torch.float64),
                                   torch.tensor(w, dtype=torch.float64), None, s, p, d)
    g = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    g_rows = np.ascontiguousarray(g.transpose(1, 0, 2, 3).reshape(g.shape[1], -1))
    out = _run(C.CONV_GRAD_INPUT, name, lambda: C.conv2d_grad_input(
        rt, rt.from_numpy(g), rt.from_numpy(g_rows), rt.from_numpy(w), xs, s, p, d),
        monkeypatch)
    ref = torch.nn.grad.conv2d_input(xs, torch.tensor(w, dtype=torch.float64),
                                     torch.tensor(g, dtype=torch.float64), s, p, d)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", CASES[:2] + CASES[4:6], ids=str)
def test_matmul_grads_make_their_own_rows(rt, case, monkeypatch):
    """The matmul formulations of both gradients with no rows of g given (dl's backward
    passes none: `grad_rows` makes them where these candidates read them)."""
    xs, ws, s, p, d = case
    rng = np.random.default_rng(sum(xs) + 2)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    x64, w64 = torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64)
    g = rng.standard_normal(tuple(torch.nn.functional.conv2d(x64, w64, None, s, p, d).shape))
    g = g.astype(np.float32)
    g64 = torch.tensor(g, dtype=torch.float64)
    gw = _run(C.CONV_GRAD_WEIGHT, "im2col", lambda: C.conv2d_grad_weight(
        rt, rt.from_numpy(x), rt.from_numpy(g), None, ws, s, p, d), monkeypatch)
    np.testing.assert_allclose(gw.numpy(), torch.nn.grad.conv2d_weight(x64, ws, g64, s, p, d),
                               rtol=1e-4, atol=1e-4)
    gx = _run(C.CONV_GRAD_INPUT, "col2im", lambda: C.conv2d_grad_input(
        rt, rt.from_numpy(g), None, rt.from_numpy(w), xs, s, p, d), monkeypatch)
    np.testing.assert_allclose(gx.numpy(), torch.nn.grad.conv2d_input(xs, w64, g64, s, p, d),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", GRADW)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_grad_weight_candidates(rt, name, case, monkeypatch):
    xs, ws, s, p, d = case
    rng = np.random.default_rng(sum(xs) + 1)
    x = rng.standard_normal(xs).astype(np.float32)
    y = torch.nn.functional.conv2d(torch.tensor(x, dtype=torch.float64),
                                   torch.zeros(ws, dtype=torch.float64), None, s, p, d)
    g = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    g_rows = np.ascontiguousarray(g.transpose(1, 0, 2, 3).reshape(g.shape[1], -1))
    out = _run(C.CONV_GRAD_WEIGHT, name, lambda: C.conv2d_grad_weight(
        rt, rt.from_numpy(x), rt.from_numpy(g), rt.from_numpy(g_rows), ws, s, p, d),
        monkeypatch)
    ref = torch.nn.grad.conv2d_weight(torch.tensor(x, dtype=torch.float64), ws,
                                      torch.tensor(g, dtype=torch.float64), s, p, d)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-4, atol=1e-4)


# (x shape, w shape, stride, padding): few channels, so the blocked weight gradient splits
# the batch (an uneven last split at 11 images in 6 splits of 2)
SPLIT_CASES = [((11, 3, 6, 7), (16, 3, 3, 3), 1, 1),
               ((16, 1, 8, 8), (16, 1, 3, 3), 1, 1),
               ((5, 2, 9, 9), (20, 2, 3, 3), 2, 1)]


@pytest.mark.parametrize("case", SPLIT_CASES, ids=str)
def test_grad_weight_batch_splits(rt, case, monkeypatch):
    """The blocked weight gradient summed in batch splits (`wgrad_splits`) and added up
    equals torch's float64 gradient; the split count is the one the rule gives."""
    xs, ws, s, p = case
    monkeypatch.setattr(cd, "WGRAD_MIN_PIXELS", 1)
    rng = np.random.default_rng(sum(xs) + 5)
    x = rng.standard_normal(xs).astype(np.float32)
    x64 = torch.tensor(x, dtype=torch.float64)
    y = torch.nn.functional.conv2d(x64, torch.zeros(ws, dtype=torch.float64), None, s, p)
    g = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    assert cd.wgrad_splits(xs[1], xs[0], y.shape[2] * y.shape[3]) > 1
    out = _run(C.CONV_GRAD_WEIGHT, "blocked", lambda: C.conv2d_grad_weight(
        rt, rt.from_numpy(x), rt.from_numpy(g), None, ws, s, p, 1), monkeypatch)
    ref = torch.nn.grad.conv2d_weight(x64, ws, torch.tensor(g, dtype=torch.float64), s, p)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-4, atol=1e-4)


def test_grad_weight_of_an_empty_batch_is_zero(rt, monkeypatch):
    """The blocked weight gradient of a size-0 batch: zeros, as torch's (no split)."""
    x, g = np.zeros((0, 3, 6, 7), np.float32), np.zeros((0, 16, 6, 7), np.float32)
    out = _run(C.CONV_GRAD_WEIGHT, "blocked", lambda: C.conv2d_grad_weight(
        rt, rt.from_numpy(x), rt.from_numpy(g), None, (16, 3, 3, 3), 1, 1, 1), monkeypatch)
    np.testing.assert_array_equal(out.numpy(), np.zeros((16, 3, 3, 3), np.float32))


@pytest.mark.parametrize("cfg", [dict(padding=1), dict(stride=2, padding=1), dict()])
def test_dl_conv2d_backward_through_blocked(dev, cfg, monkeypatch):
    """F.conv2d forward and backward with the blocked candidates chosen, against torch."""
    x, w, b = rand_np((2, 20, 7, 9), 1), rand_np((18, 20, 3, 3), 2), rand_np((18,), 3)
    gy = None
    monkeypatch.setenv("CUBE_AUTOTUNE", "off")
    with C.CONV.only("blocked_2"), C.CONV_GRAD_INPUT.only(
            "blocked_2" if cfg.get("stride", 1) == 1 else "col2im"), \
            C.CONV_GRAD_WEIGHT.only("blocked"):
        try:
            X, W, B = (dl.tensor(a, device=dev, requires_grad=True) for a in (x, w, b))
            y = F.conv2d(X, W, B, **cfg)
            gy = rand_np(tuple(y.shape), 9)
            (y * dl.tensor(gy, device=dev)).sum().backward()
        except NoCandidate:
            pytest.skip("blocked_2 cannot run on this runtime")
    T = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w, b)]
    ty = torch.nn.functional.conv2d(*T, **cfg)
    (ty * torch.tensor(gy, dtype=torch.float64)).sum().backward()
    close(y, ty, rtol=1e-4, atol=1e-4)
    for got, t in zip((X, W, B), T):
        close(got.grad, t.grad, rtol=1e-4, atol=1e-4)


def test_tile_widths_fit_the_register_file():
    class _Rt:  # a CPU with 32 or 16 vector registers
        target = "llvm"

        def __init__(self, avx512):
            self.avx512 = avx512

        def device_id(self):
            return "x [avx512f]" if self.avx512 else "x [avx2]"

        features = object()
    for avx512, regs in ((True, 32), (False, 16)):
        rt = _Rt(avx512)
        for ow in (7, 14, 28, 56, 112):
            for kw in (1, 3):
                for nb in (1, 2, 4):
                    rw = cd.tile_width(rt, ow, kw, nb)
                    assert rw == 0 or rw * nb + kw * nb + 2 <= regs
    assert cd.tile_width(_Rt(True), 56, 3, 2) == 8  # 7 tiles, no waste


def test_tiles_wider_than_the_channels_are_not_candidates(rt):
    """A tile of NB lines of output channels where NB - 1 lines hold them all would compute
    lines of zeros: it is no candidate (forward and input gradient); one more channel and it
    is (where its tile fits the register file)."""
    cfg = dict(G=1, KH=3, KW=3, SH=1, SW=1, PH=1, PW=1, DH=1, DW=1, ACT="none")
    probe = rt.empty((1, 1, 4, 5), np.float32)
    lane = cd._line(rt, probe.elem)
    for nb in (2, 4):
        fits = cd.tile_width(rt, 5, 3, nb) > 0
        for oc, want in (((nb - 1) * lane, False), ((nb - 1) * lane + 1, fits)):
            x = out = rt.empty((1, oc, 4, 5), np.float32)
            w = rt.empty((oc, oc, 3, 3), np.float32)
            assert cd.valid(nb)(rt, x, w, None, out, cfg) == want, (nb, oc, lane)
            assert cd.grad_input_ok(rt, out, None, w, x, cfg, nb=nb) == want, (nb, oc, lane)
            if oc == (nb - 1) * lane:  # not needed: the strided gradient's phases neither
                assert not cd.grad_input_strided_ok(rt, out, None, w, x, dict(cfg, SH=2, SW=2),
                                                    nb=nb)
            assert cd.valid(1)(rt, x, w, None, out, cfg)

"""Entries for issue 17's math family: einsum, norms, cdist, logsumexp, products, elementwise
math (atan2, remainder, fmod, floor_divide, hypot, lerp, bitwise ops, predicates,
nan_to_num), any/all, isclose/allclose, linspace/logspace and the activations.

Integer samples use int32 arrays (iarr(...).astype(int32)) so that they run on the wgpu
runtimes too (no int64 there) and int64 ones where the runtime has them; those entries
declare one float dtype (the runner's dtype axis is for float arrays)."""
from __future__ import annotations

import math

import numpy as np
import torch

import dl
import dl.nn.functional as F

from .core import ALL_FLOATS, FLOATS, OpInfo, Sample, arr, barr, edge_values, iarr

I32, I64 = np.int32, np.int64
NO_NAN = "WGSL lets implementations assume no nan: lavapipe folds x != x to false"
WGPU_NAN = {"wgpu": NO_NAN, "wgpu-spirv": NO_NAN}
NO_I64 = "no 64-bit integers on the wgpu runtimes (int64 samples arrive as int32)"
NO_I64_SUM = "integer sums accumulate in int64 (as torch's), which the wgpu runtimes lack"
EDGE = edge_values()


def _t(b, like):
    """torch's atan2 and hypot take tensors only: a Python scalar as a tensor like `like`."""
    return b if isinstance(b, torch.Tensor) else torch.tensor(b, dtype=like.dtype)


def _dt(lib, kw: dict) -> dict:
    """A dtype given by name in a sample, as lib's dtype."""
    return {k: getattr(lib, v) if k == "dtype" else v for k, v in kw.items()}


def _ia(shape, high, seed=0, low=0, dt=I32):
    return iarr(shape, high, seed, low).astype(dt)


def _nz(shape, seed=0, dt=I32, m=6):
    """Non-zero integers in [-m, m] (divisors: PyTorch raises on an integer division by 0)."""
    a = iarr(shape, m, seed, 1)
    return (a * np.where(barr(shape, seed + 7), 1, -1)).astype(dt)


def _away(shape, seed=0, lo=0.25, hi=2.0):
    """Floats of both signs with |x| in [lo, hi] (divisors, kinks kept out of reach)."""
    return arr(shape, seed, lo, hi) * np.where(barr(shape, seed + 9), 1.0, -1.0)


# the edge pairs hold fmod(1, 1e-30): WGSL defines a float % as a - b * trunc(a / b), which
# is not exact once a / b passes 2**24 (fmod is)
_SHADER_FMOD = ("WGSL/SPIR-V float % is a - b * trunc(a / b), which is wrong once a / b "
                "passes 2**24 (fmod(1, 1e-30) is 0, fmod(1e30, 1e-30) -inf)")


def _binary_samples(b_away: bool = False, edge: bool = True, scalar=2.5):
    """The shared samples of a binary float op: typical, broadcast, non-contiguous, size 0,
    size 1, a scalar operand and (interp only) every pair of edge values."""
    def b(shape, seed):
        return _away(shape, seed) if b_away else arr(shape, seed)

    def make():
        ss = [Sample(arr((3, 5)), b((3, 5), 1), desc="typical"),
              Sample(arr((4, 1, 3), 2), b((5, 1), 3), desc="broadcast"),
              Sample(arr((4, 6), 4), b((4, 6), 5), noncontig=True, desc="noncontig"),
              Sample(arr((0, 3)), b((1, 3), 1), grad=(), desc="size 0"),
              Sample(arr((1, 1)), b((1,), 1), desc="size 1"),
              Sample(arr((2, 3)), scalar, desc="scalar other")]
        if edge:
            ss.append(Sample(EDGE.reshape(12, 1), EDGE.reshape(1, 12), grad=(),
                             desc="edge pairs"))
        return ss
    return make


def _unary_samples(low=-3.0, high=3.0, edge=True, grad_edge=False):
    def make():
        ss = [Sample(arr((3, 5), 0, low, high), desc="typical"),
              Sample(arr((4, 6), 1, low, high), noncontig=True, desc="noncontig"),
              Sample(arr((0, 3)), grad=(), desc="size 0"),
              Sample(arr((1, 1), 2), desc="size 1"),
              Sample(arr((2, 1, 3), 3, low, high), desc="3-d")]
        if edge:
            ss.append(Sample(EDGE, grad=None if grad_edge else (), desc="edge values"))
        return ss
    return make


def _int_pairs(seed=0):
    """Integer samples: int32 typical and broadcast, int64 (not on wgpu), a Python int."""
    return [Sample(_ia((3, 5), 20, seed, -20), _nz((3, 5), seed + 1), desc="int32"),
            Sample(_ia((4, 1, 3), 20, seed + 2, -20), _nz((5, 1), seed + 3),
                   desc="int32 broadcast"),
            Sample(_ia((2, 3), 9, seed + 4, -9), 4, desc="int32 with a Python int"),
            Sample(_ia((0, 3), 5), _nz((1, 3)), desc="size 0")]


def _int64_pairs(seed=0):
    return [Sample(_ia((3, 4), 1000, seed, -1000, I64), _nz((3, 4), seed + 1, I64, 50),
                   desc="int64")]


OPS = [
    # ---- einsum ----------------------------------------------------------------------------
    OpInfo("einsum", op=lambda eq, *xs: dl.einsum(eq, *xs),
           ref=lambda eq, *xs: torch.einsum(eq, *xs),
           samples=lambda: [
               Sample("bij,bjk->bik", arr((2, 3, 4)), arr((2, 4, 5), 1), desc="bmm"),
               Sample("...ij,jk", arr((2, 3, 4)), arr((4, 2), 1), desc="ellipsis, implicit"),
               Sample("ij,jk->ik", arr((3, 4)), arr((4, 5), 1), desc="mm explicit"),
               Sample("ij,jk", arr((3, 4)), arr((4, 5), 1), noncontig=True,
                      desc="implicit, noncontig"),
               Sample("i,j->ij", arr((3,)), arr((4,), 1), desc="outer"),
               Sample("ii->i", arr((4, 4)), desc="diagonal"),
               Sample("ii", arr((4, 4)), desc="trace"),
               Sample("iij->j", arr((3, 3, 2)), desc="diagonal summed"),
               Sample("ij->", arr((3, 4)), desc="sum all"),
               Sample("ij->ji", arr((3, 4)), desc="transpose"),
               Sample("bi,bi->b", arr((5, 3)), arr((5, 3), 1), desc="batched dot"),
               Sample("bij,bkj->bik", arr((2, 3, 4)), arr((1, 5, 4), 1),
                      desc="broadcast batch"),
               Sample("ij,jk,kl->il", arr((2, 3)), arr((3, 4), 1), arr((4, 2), 2),
                      desc="three operands"),
               Sample("i,i->", arr((0,)), arr((0,), 1), desc="size 0"),
               Sample("ab...,b->a...", arr((2, 3, 4, 1)), arr((3,), 1), desc="ellipsis end"),
               Sample("ik,jk->ijk", arr((1, 3)), arr((4, 3), 1), desc="size 1"),
           ]),
    OpInfo("einsum_int", op=lambda eq, *xs: dl.einsum(eq, *xs),
           ref=lambda eq, *xs: torch.einsum(eq, *xs), dtypes=(dl.float32,), grad=False,
           skip={"wgpu": NO_I64_SUM, "wgpu-spirv": NO_I64_SUM},
           samples=lambda: [Sample("ij,jk->ik", _ia((3, 4), 9, 0, -9), _ia((4, 2), 9, 1, -9),
                                   desc="int32 contraction"),
                            Sample("ii->i", _ia((3, 3), 9), desc="int32 diagonal")]),
    # ---- reductions and norms -------------------------------------------------------------
    OpInfo("logsumexp", op=lambda x, *a, **k: dl.logsumexp(x, *a, **k),
           ref=lambda x, *a, **k: torch.logsumexp(x, *a, **k), dtypes=ALL_FLOATS,
           tol={dl.bfloat16: (2e-2, 2e-2)},
           samples=lambda: [Sample(arr((3, 5), 0, -30, 30), 1, desc="dim 1"),
                            Sample(arr((4, 6), 1), (0, 1), keepdim=True, noncontig=True,
                                   desc="all dims keepdim noncontig"),
                            Sample(arr((3, 4), 2), -1, keepdim=True, desc="keepdim"),
                            Sample(arr((0, 4)), 0, desc="size 0 reduced"),
                            Sample(arr((1, 4)), 0, desc="size 1"),
                            Sample(np.array([[-np.inf, -np.inf], [np.inf, 1.0],
                                             [np.nan, 0.0]]), 1, grad=(), desc="inf, nan")]),
    OpInfo("logsumexp_int", op=lambda x, d: dl.logsumexp(x, d),
           ref=lambda x, d: torch.logsumexp(x, d), dtypes=(dl.float32,), grad=False,
           samples=lambda: [Sample(_ia((3, 4), 5), 1, desc="int32 gives float32")]),
    OpInfo("vector_norm", op=lambda x, *a, **k: dl.linalg.vector_norm(x, *a, **k),
           ref=lambda x, *a, **k: torch.linalg.vector_norm(x, *a, **k), dtypes=ALL_FLOATS,
           tol={dl.float16: (4e-3, 2e-3), dl.bfloat16: (2e-2, 2e-2)},
           samples=lambda: [
               Sample(arr((3, 5)), 2, 1, desc="ord 2"),
               Sample(arr((4, 6), 1), 3.5, (0, 1), keepdim=True, noncontig=True,
                      desc="ord 3.5 noncontig keepdim"),
               Sample(arr((3, 5), 2), desc="default"),
               Sample(arr((3, 5), 3), 1, 0, desc="ord 1"),
               Sample(arr((3, 5), 4), math.inf, 1, desc="ord inf"),
               Sample(arr((3, 5), 5), -math.inf, 1, desc="ord -inf"),
               Sample(np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]]), 0, 1, desc="ord 0"),
               Sample(arr((3, 5), 6, 0.2, 2.0), 0.5, 1, desc="ord 0.5"),
               Sample(arr((3, 5), 7, 0.2, 2.0), 1.5, 1, desc="ord 1.5"),
               Sample(np.array([[0.0, 0.0], [3.0, -4.0]]), 2, 1, desc="zero row (grad 0)"),
               Sample(np.array([[0.0, 0.0], [3.0, -4.0]]), 3.0, 1, desc="zero row p 3"),
               Sample(np.array([[0.0, 0.0], [3.0, -4.0]]), 0.5, 1, grad=(),
                      desc="zero row p 0.5"),
               Sample(arr((0, 3)), 2, 1, desc="size 0"),
               Sample(arr((1, 1)), 2, desc="size 1"),
           ]),
    OpInfo("norm", op=lambda x, *a, **k: dl.norm(x, *a, **k),
           ref=lambda x, *a, **k: torch.norm(x, *a, **k),
           samples=lambda: [Sample(arr((3, 5))), Sample(arr((4, 6), 1), 1, 0,
                                                        noncontig=True, desc="p 1 dim 0"),
                            Sample(arr((3, 4), 2), "fro", (0, 1), keepdim=True),
                            Sample(arr((3, 4), 3), math.inf, 1),
                            Sample(arr((3, 4), 4), dim=1, p=3)]),
    OpInfo("cdist", op=lambda a, b, *p: dl.cdist(a, b, *p),
           ref=lambda a, b, *p: torch.cdist(a, b, *p), grad_tol={dl.float32: (1e-4, 1e-4)},
           samples=lambda: [
               Sample(arr((4, 3)), arr((5, 3), 1), desc="p 2"),
               Sample(arr((2, 4, 3), 2), arr((2, 6, 3), 3), 1.0, desc="batched p 1"),
               Sample(arr((3, 4), 4), arr((2, 4), 5), noncontig=True, desc="noncontig"),
               Sample(arr((3, 2), 6), arr((4, 2), 7), math.inf, desc="p inf"),
               Sample(arr((3, 2), 8), arr((4, 2), 9), 0.5, desc="p 0.5"),
               Sample(arr((3, 2), 8), arr((4, 2), 9), 3.0, desc="p 3"),
               Sample(arr((3, 2), 8), arr((4, 2), 9), 0.0, desc="p 0"),
               Sample(arr((2, 3, 2), 10), arr((1, 4, 2), 11), desc="broadcast batch"),
               Sample(np.array([[1.0, 2.0], [0.0, 0.0]]), np.array([[1.0, 2.0]]),
                      desc="zero distance (grad 0)"),
               Sample(arr((0, 3)), arr((2, 3), 1), desc="size 0"),
               Sample(arr((1, 1)), arr((1, 1), 1), desc="size 1"),
           ]),
    # ---- products --------------------------------------------------------------------------
    OpInfo("outer", op=lambda a, b: dl.outer(a, b), ref=lambda a, b: torch.outer(a, b),
           samples=lambda: [Sample(arr((3,)), arr((4,), 1)),
                            Sample(arr((0,)), arr((2,), 1), desc="size 0"),
                            Sample(arr((1,)), arr((1,), 1), desc="size 1")]),
    OpInfo("outer_int", op=lambda a, b: dl.outer(a, b), ref=lambda a, b: torch.outer(a, b),
           dtypes=(dl.float32,), grad=False,
           samples=lambda: [Sample(_ia((3,), 9, 0, -9), _ia((4,), 9, 1, -9), desc="int32"),
                            Sample(arr((3,)), _ia((2,), 9, 1, -9), desc="float with int")]),
    OpInfo("addmm", op=lambda i, a, b, **k: dl.addmm(i, a, b, **k),
           ref=lambda i, a, b, **k: torch.addmm(i, a, b, **k),
           samples=lambda: [
               Sample(arr((3, 5)), arr((3, 4), 1), arr((4, 5), 2), beta=0.5, alpha=2.0,
                      desc="beta alpha"),
               Sample(arr((5,), 3), arr((3, 4), 4), arr((4, 5), 5), noncontig=True,
                      desc="broadcast input noncontig"),
               Sample(np.full((3, 2), np.nan), arr((3, 4), 1), arr((4, 2), 2), beta=0.0,
                      desc="beta 0 ignores nan"),
               Sample(arr((3, 2)), np.full((3, 4), np.nan), arr((4, 2), 2), alpha=0.0,
                      beta=1.5, desc="alpha 0 ignores the product's nan"),
               Sample(arr((2,)), arr((3, 4), 1), np.full((4, 2), np.inf), alpha=0, beta=0,
                      desc="alpha and beta 0: zeros"),
               Sample(arr((1, 1)), arr((2, 3), 1), arr((3, 2), 2), desc="size-1 input"),
               Sample(arr((2, 3)), arr((2, 0), 1), arr((0, 3), 2), desc="k = 0"),
           ]),
    OpInfo("baddbmm", op=lambda i, a, b, **k: dl.baddbmm(i, a, b, **k),
           ref=lambda i, a, b, **k: torch.baddbmm(i, a, b, **k),
           samples=lambda: [
               Sample(arr((2, 3, 5)), arr((2, 3, 4), 1), arr((2, 4, 5), 2), beta=0.5,
                      alpha=-1.5, desc="beta alpha"),
               Sample(arr((3, 5), 3), arr((2, 3, 4), 4), arr((2, 4, 5), 5), noncontig=True,
                      desc="broadcast input noncontig"),
               Sample(np.full((1, 3, 2), np.inf), arr((1, 3, 4), 1), arr((1, 4, 2), 2),
                      beta=0, desc="beta 0 ignores inf"),
               Sample(arr((3, 2)), np.full((2, 3, 4), np.inf), arr((2, 4, 2), 2), alpha=0,
                      desc="alpha 0 keeps the product's nan (torch's baddbmm, not its addmm)"),
               Sample(arr((0, 2, 2)), arr((0, 2, 3), 1), arr((0, 3, 2), 2), desc="size 0"),
           ]),
    # ---- binary elementwise math ----------------------------------------------------------
    OpInfo("atan2", op=lambda a, b: dl.atan2(a, b), ref=lambda a, b: torch.atan2(a, _t(b, a)),
           dtypes=ALL_FLOATS, signed_zero=True, samples=_binary_samples()),
    # gradients at the singular points, PyTorch's: atan2 at the origin (0, not 0 / 0), pow
    # at a zero exponent (0 for the base) and a zero base (0 for exponents >= 0)
    OpInfo("atan2_origin", op=lambda a, b: dl.atan2(a, b), ref=lambda a, b: torch.atan2(a, b),
           samples=lambda: [Sample(np.array([0.0, 0.0, 2.0, 1e-30]),
                                   np.array([0.0, 1.0, 0.0, 1e-30]), desc="the origin")]),
    OpInfo("pow_singular", op=lambda a, b: dl.pow(a, b), ref=lambda a, b: torch.pow(a, b),
           samples=lambda: [Sample(np.array([0.0, 2.0, 0.0, 0.0, 3.0]),
                                   np.array([0.0, 0.0, 2.0, -1.0, 1.5]), desc="zeros"),
                            Sample(np.array([0.0, 2.0, -1.5]), 0.0, desc="exponent 0"),
                            Sample(0.0, np.array([2.0, 0.0, -1.0]), desc="base 0")]),
    OpInfo("atan2_int", op=lambda a, b: dl.atan2(a, b), ref=lambda a, b: torch.atan2(a, b),
           dtypes=(dl.float32,), grad=False,
           samples=lambda: [Sample(_ia((3, 4), 9, 0, -9), _ia((3, 4), 9, 1, -9),
                                   desc="int32 gives float32")]),
    OpInfo("remainder", op=lambda a, b: dl.remainder(a, b),
           ref=lambda a, b: torch.remainder(a, b), dtypes=ALL_FLOATS, signed_zero=True,
           samples=_binary_samples(b_away=True), tol={dl.float32: (1e-5, 1e-5)},
           shader_edges=_SHADER_FMOD,
           note="an integer remainder, fmod or floor_divide by 0 gives 0 (PyTorch raises; "
           "raising would need a host synchronisation per op)"),
    OpInfo("remainder_op", op=lambda a, b: (a % b, 7.5 % b, a % -2),
           ref=lambda a, b: (a % b, 7.5 % b, a % -2), signed_zero=True, grad=False,
           samples=lambda: [Sample(arr((3, 4)), _away((3, 4), 1))]),
    OpInfo("remainder_int", op=lambda a, b: (dl.remainder(a, b), a % b),
           ref=lambda a, b: (torch.remainder(a, b), a % b), dtypes=(dl.float32,), grad=False,
           samples=lambda: _int_pairs() + _int64_pairs()),
    OpInfo("fmod", op=lambda a, b: dl.fmod(a, b), ref=lambda a, b: torch.fmod(a, b),
           dtypes=ALL_FLOATS, signed_zero=True, samples=_binary_samples(b_away=True),
           shader_edges=_SHADER_FMOD,
           tol={dl.float32: (1e-5, 1e-5)}),
    OpInfo("fmod_int", op=lambda a, b: dl.fmod(a, b), ref=lambda a, b: torch.fmod(a, b),
           dtypes=(dl.float32,), grad=False, samples=lambda: _int_pairs()[:3]),
    OpInfo("floor_divide", op=lambda a, b: (dl.floor_divide(a, b), a // b),
           ref=lambda a, b: (torch.floor_divide(a, b), a // b), dtypes=ALL_FLOATS,
           grad=False, signed_zero=True, samples=_binary_samples(b_away=True)),
    OpInfo("floor_divide_int", op=lambda a, b: (dl.floor_divide(a, b), a // b, 17 // b),
           ref=lambda a, b: (torch.floor_divide(a, b), a // b, 17 // b),
           dtypes=(dl.float32,), grad=False, samples=lambda: _int_pairs()[:2]),
    OpInfo("div_rounding", op=lambda a, b: (dl.div(a, b, rounding_mode="trunc"),
                                            a.div(b, rounding_mode="floor"),
                                            dl.div(-7.5, a, rounding_mode="trunc")),
           ref=lambda a, b: (torch.div(a, b, rounding_mode="trunc"),
                             a.div(b, rounding_mode="floor"),
                             torch.div(-7.5, a, rounding_mode="trunc")),
           dtypes=ALL_FLOATS, grad=False, signed_zero=True, samples=_binary_samples(b_away=True),
           note='`rounding_mode` is not differentiable (PyTorch\'s gives zero gradients)'),
    OpInfo("div_rounding_int", op=lambda a, b: (dl.div(a, b, rounding_mode="trunc"),
                                                dl.div(a, b, rounding_mode="floor")),
           ref=lambda a, b: (torch.div(a, b, rounding_mode="trunc"),
                             torch.div(a, b, rounding_mode="floor")),
           dtypes=(dl.float32,), grad=False, samples=lambda: _int_pairs() + _int64_pairs()),
    OpInfo("hypot", op=lambda a, b: dl.hypot(a, b), ref=lambda a, b: torch.hypot(a, _t(b, a)),
           dtypes=ALL_FLOATS, samples=_binary_samples(scalar=1.5)),
    OpInfo("lerp", op=lambda a, b, w: dl.lerp(a, b, w), ref=lambda a, b, w: torch.lerp(a, b, w),
           dtypes=ALL_FLOATS,
           samples=lambda: [
               Sample(arr((3, 5)), arr((3, 5), 1), arr((3, 5), 2, -0.5, 1.5),
                      desc="tensor weight"),
               Sample(arr((4, 6), 3), arr((4, 6), 4), 0.3, noncontig=True,
                      desc="scalar weight noncontig"),
               Sample(arr((4, 1), 5), arr((5,), 6), arr((4, 5), 7), desc="broadcast"),
               Sample(arr((2, 3), 8), arr((2, 3), 9), 0.75, desc="weight >= 0.5"),
               Sample(arr((0, 3)), arr((1, 3), 1), 0.5, grad=(), desc="size 0"),
               Sample(EDGE, EDGE[::-1].copy(), 0.25, grad=(), desc="edge values"),
           ]),
    # ---- bitwise ---------------------------------------------------------------------------
    OpInfo("bitwise_int", op=lambda a, b: (dl.bitwise_and(a, b), dl.bitwise_or(a, b),
                                           dl.bitwise_xor(a, b), dl.bitwise_not(a),
                                           a & b, a | b, a ^ b, ~a, a & 6, 5 | a),
           ref=lambda a, b: (torch.bitwise_and(a, b), torch.bitwise_or(a, b),
                             torch.bitwise_xor(a, b), torch.bitwise_not(a),
                             a & b, a | b, a ^ b, ~a, a & 6, 5 | a),
           dtypes=(dl.float32,), grad=False,
           samples=lambda: [Sample(_ia((3, 5), 100, 0, -100), _ia((3, 5), 100, 1, -100)),
                            Sample(_ia((4, 1, 3), 64, 2), _ia((5, 1), 64, 3),
                                   desc="broadcast"),
                            Sample(_ia((4, 6), 64, 4), _ia((4, 6), 64, 5), noncontig=True),
                            Sample(_ia((0, 2), 4), _ia((1, 2), 4), desc="size 0")]),
    OpInfo("bitwise_int64", op=lambda a, b: (a & b, a | b, a ^ b, ~a, a >> 3, a << 2),
           ref=lambda a, b: (a & b, a | b, a ^ b, ~a, a >> 3, a << 2),
           dtypes=(dl.float32,), grad=False,
           skip={"wgpu": NO_I64, "wgpu-spirv": NO_I64},
           samples=lambda: [Sample(_ia((3, 4), 1 << 40, 6, -(1 << 40), I64),
                                   _ia((3, 4), 1 << 40, 7, 0, I64), desc="beyond 32 bits")]),
    OpInfo("bitwise_bool", op=lambda a, b: (a & b, a | b, a ^ b, ~a, a & True,
                                            dl.bitwise_xor(a, b)),
           ref=lambda a, b: (a & b, a | b, a ^ b, ~a, a & True, torch.bitwise_xor(a, b)),
           dtypes=(dl.float32,), grad=False,
           samples=lambda: [Sample(barr((3, 5)), barr((3, 5), 1)),
                            Sample(barr((4, 1)), barr((1, 5), 2), desc="broadcast"),
                            Sample(barr((4, 6), 3), barr((4, 6), 4), noncontig=True)]),
    OpInfo("bitwise_shift", op=lambda a, b: (dl.bitwise_left_shift(a, b), a << b,
                                             dl.bitwise_right_shift(a, b), a >> b, a >> 2),
           ref=lambda a, b: (torch.bitwise_left_shift(a, b), a << b,
                             torch.bitwise_right_shift(a, b), a >> b, a >> 2),
           dtypes=(dl.float32,), grad=False,
           samples=lambda: [Sample(_ia((3, 5), 1000, 0, -1000), _ia((3, 5), 12, 1)),
                            Sample(_ia((4, 1), 1000, 2, -1000), _ia((1, 3), 12, 3),
                                   desc="broadcast")]),
    # ---- predicates, nan_to_num ------------------------------------------------------------
    OpInfo("isnan_isinf_isfinite", op=lambda x: (dl.isnan(x), dl.isinf(x), dl.isfinite(x)),
           ref=lambda x: (torch.isnan(x), torch.isinf(x), torch.isfinite(x)),
           dtypes=ALL_FLOATS, grad=False, skip=WGPU_NAN,
           samples=lambda: [Sample(EDGE.reshape(3, 4), desc="edge values"),
                            Sample(np.where(barr((4, 6)), np.nan, arr((4, 6))), noncontig=True),
                            Sample(arr((0, 3)), desc="size 0")]),
    OpInfo("isinf_isfinite", op=lambda x: (dl.isinf(x), dl.isfinite(x)),
           ref=lambda x: (torch.isinf(x), torch.isfinite(x)), dtypes=FLOATS, grad=False,
           samples=lambda: [Sample(np.array([np.inf, -np.inf, 1e30, -2.0, 0.0, 3.0]),
                                   desc="inf, finite"),
                            Sample(_ia((2, 3), 9), desc="int32")]),
    OpInfo("predicates_int", op=lambda x: (dl.isnan(x), dl.isinf(x), dl.isfinite(x),
                                           dl.nan_to_num(x)),
           ref=lambda x: (torch.isnan(x), torch.isinf(x), torch.isfinite(x),
                          torch.nan_to_num(x)),
           dtypes=(dl.float32,), grad=False,
           samples=lambda: [Sample(_ia((2, 3), 9), desc="int32"),
                            Sample(barr((2, 3)), desc="bool")]),
    OpInfo("nan_to_num", op=lambda x, *a, **k: dl.nan_to_num(x, *a, **k),
           ref=lambda x, *a, **k: torch.nan_to_num(x, *a, **k), dtypes=ALL_FLOATS,
           signed_zero=True, skip=WGPU_NAN,
           samples=lambda: [Sample(EDGE, desc="defaults"),
                            Sample(EDGE.reshape(3, 4), 1.5, 100.0, -100.0, noncontig=True,
                                   desc="nan posinf neginf"),
                            Sample(EDGE, posinf=7.0, desc="posinf only"),
                            Sample(arr((0, 2)), desc="size 0")]),
    # ---- any / all / isclose / allclose ----------------------------------------------------
    OpInfo("any_all", op=lambda x, *a, **k: (dl.any(x, *a, **k), dl.all(x, *a, **k)),
           ref=lambda x, *a, **k: (torch.any(x, *a, **k), torch.all(x, *a, **k)),
           dtypes=(dl.float32,), grad=False,
           samples=lambda: [Sample(barr((4, 5), 0, 0.3), 1, desc="bool dim 1"),
                            Sample(np.where(barr((4, 6), 1, 0.2), 0.0, arr((4, 6))), 0,
                                   keepdim=True, noncontig=True, desc="float keepdim"),
                            Sample(barr((3, 4), 2, 0.9), desc="all dims"),
                            Sample(_ia((3, 4), 2, 3), (0, 1), desc="int32 tuple dims"),
                            Sample(barr((0, 3)), 0, desc="size 0 reduced"),
                            Sample(barr((1, 1)), desc="size 1")]),
    OpInfo("isclose", op=lambda a, b, **k: dl.isclose(a, b, **k),
           ref=lambda a, b, **k: torch.isclose(a, b, **k), grad=False,
           samples=lambda: [
               Sample(arr((3, 5)), arr((3, 5)) + np.where(barr((3, 5)), 1e-9, 1e-3),
                      desc="near and far"),
               Sample(arr((4, 6), 1), arr((4, 6), 1) * (1 + 5e-6), rtol=1e-5,
                      noncontig=True, desc="rtol"),
               Sample(EDGE, EDGE, desc="edge values equal"),
               Sample(EDGE, EDGE, equal_nan=True, desc="equal_nan"),
               Sample(arr((4, 1)), arr((5,), 1), atol=1.0, desc="broadcast atol"),
           ], skip=WGPU_NAN),
    OpInfo("allclose", op=lambda a, b, **k: dl.allclose(a, b, **k),
           ref=lambda a, b, **k: torch.allclose(a, b, **k), grad=False,
           samples=lambda: [Sample(arr((3, 5)), arr((3, 5)) + 1e-9, desc="close"),
                            Sample(arr((3, 5)), arr((3, 5)) + 1e-3, desc="not close"),
                            Sample(arr((3, 5)), arr((3, 5)) + 1e-3, atol=1e-2, desc="atol")]),
    # ---- linspace / logspace ---------------------------------------------------------------
    OpInfo("linspace", op=lambda *a, **k: dl.linspace(*a, **_dt(dl, k)),
           ref=lambda *a, **k: torch.linspace(*a, **_dt(torch, k)), grad=False,
           dtypes=(dl.float32,),
           samples=lambda: [Sample(-2.0, 3.0, 11), Sample(5.0, -5.0, 8, desc="decreasing"),
                            Sample(0.0, 1.0, 1, desc="one step"),
                            Sample(0.0, 1.0, 0, desc="no steps"),
                            Sample(0, 10, 5, dtype="int64", desc="int64"),
                            Sample(0, 10, 7, dtype="int32", desc="int32"),
                            Sample(0.0, 1.0, 7, dtype="float64", desc="float64")]),
    OpInfo("logspace", op=lambda *a, **k: dl.logspace(*a, **_dt(dl, k)),
           ref=lambda *a, **k: torch.logspace(*a, **_dt(torch, k)), grad=False,
           dtypes=(dl.float32,),
           samples=lambda: [Sample(-2.0, 3.0, 11), Sample(0.0, 4.0, 5, base=2.0),
                            Sample(1.0, 1.0, 1, desc="one step"),
                            Sample(0.0, 1.0, 0, desc="no steps")]),
    # ---- activations -----------------------------------------------------------------------
    OpInfo("softplus_beta", op=lambda x, **k: F.softplus(x, **k),
           ref=lambda x, **k: torch.nn.functional.softplus(x, **k), dtypes=ALL_FLOATS,
           samples=lambda: [Sample(arr((3, 5), 0, -4, 4), beta=2.0, threshold=3.0),
                            Sample(arr((4, 6), 1, -30, 30), noncontig=True, desc="default"),
                            Sample(arr((3, 4), 2), beta=0.5, desc="beta 0.5"),
                            Sample(arr((0, 3)), grad=(), desc="size 0"),
                            Sample(EDGE, beta=1.5, grad=(), desc="edge values")]),
    OpInfo("mish", op=lambda x: F.mish(x), ref=lambda x: torch.nn.functional.mish(x),
           dtypes=ALL_FLOATS, samples=_unary_samples(-5, 5)),
    OpInfo("hardswish", op=lambda x: F.hardswish(x),
           ref=lambda x: torch.nn.functional.hardswish(x), dtypes=ALL_FLOATS,
           samples=lambda: [*_unary_samples(-5, 5)(),
                            Sample(np.array([-3.0, 3.0, -2.5, 2.5]), desc="the ends: 0, 1")]),
    OpInfo("leaky_relu", op=lambda x, *a: F.leaky_relu(x, *a),
           ref=lambda x, *a: torch.nn.functional.leaky_relu(x, *a), dtypes=ALL_FLOATS,
           samples=lambda: [Sample(arr((3, 5)), 0.2),
                            Sample(arr((4, 6), 1), noncontig=True, desc="default slope"),
                            Sample(np.array([-1.0, 0.0, -0.0, 2.0]), 0.3, desc="zeros"),
                            Sample(arr((0, 3)), grad=()), Sample(EDGE, grad=(), desc="edge")]),
    OpInfo("elu", op=lambda x, *a: F.elu(x, *a), ref=lambda x, *a: torch.nn.functional.elu(x, *a),
           dtypes=ALL_FLOATS,
           samples=lambda: [Sample(arr((3, 5), 0, -4, 4), 0.7),
                            Sample(arr((4, 6), 1), noncontig=True, desc="default alpha"),
                            Sample(arr((0, 3)), grad=()), Sample(EDGE, grad=(), desc="edge")]),
    OpInfo("selu", op=lambda x: F.selu(x), ref=lambda x: torch.nn.functional.selu(x),
           dtypes=ALL_FLOATS, samples=_unary_samples(-4, 4)),
    OpInfo("logsigmoid", op=lambda x: F.logsigmoid(x),
           ref=lambda x: torch.nn.functional.logsigmoid(x), dtypes=ALL_FLOATS,
           samples=_unary_samples(-40, 40, grad_edge=False)),
    OpInfo("glu", op=lambda x, *a: F.glu(x, *a), ref=lambda x, *a: torch.nn.functional.glu(x, *a),
           dtypes=ALL_FLOATS,
           samples=lambda: [Sample(arr((3, 6))), Sample(arr((4, 6), 1), 0, noncontig=True),
                            Sample(arr((2, 0, 4)), 1, desc="size 0"),
                            Sample(arr((1, 2)), desc="size 1 halves")]),
    OpInfo("activation_modules",
           op=lambda x: tuple(m(x) for m in (
               dl.nn.Softplus(2.0, 5.0), dl.nn.Mish(), dl.nn.Hardswish(),
               dl.nn.LeakyReLU(0.1), dl.nn.ELU(0.5), dl.nn.SELU(), dl.nn.GLU(0),
               dl.nn.LogSigmoid())),
           ref=lambda x: tuple(m(x) for m in (
               torch.nn.Softplus(2.0, 5.0), torch.nn.Mish(), torch.nn.Hardswish(),
               torch.nn.LeakyReLU(0.1), torch.nn.ELU(0.5), torch.nn.SELU(), torch.nn.GLU(0),
               torch.nn.LogSigmoid())),
           samples=lambda: [Sample(arr((4, 3), 0, -4, 4))]),
]

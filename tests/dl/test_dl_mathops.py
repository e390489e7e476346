"""Issue 17's math family beyond the op table: operator forms, type promotion, errors naming
shapes and dtypes, fusion, einsum's parsing, gradients at the kinks, modules."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from dl_helpers import close, rand_np

import dl
import dl.nn.functional as F


def _i(a, dt=np.int32):
    return dl.tensor(np.asarray(a, dt)), torch.tensor(np.asarray(a, dt))


def _same(got, want):
    assert got.dtype.name == str(want.dtype).removeprefix("torch."), (got.dtype, want.dtype)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_integer_operators_match_torch():
    (a, ta), (b, tb) = _i([7, -7, 9, -9, 0, 5]), _i([2, 2, -4, -4, 3, -3])
    for f in (lambda x, y: x % y, lambda x, y: x // y, lambda x, y: x & y,
              lambda x, y: x | y, lambda x, y: x ^ y, lambda x, y: x << (y & 3),
              lambda x, y: x >> (y & 3), lambda x, y: ~x, lambda x, y: 17 % y,
              lambda x, y: 17 // y, lambda x, y: 6 & x, lambda x, y: 6 | x, lambda x, y: 6 ^ x):
        _same(f(a, b), f(ta, tb))


def test_promotion():
    (a, ta), (b, tb) = _i([7, -7, 9]), _i([2, 3, -4], np.int64)
    _same(a & b, ta & tb)  # int32 with int64: int64
    _same(a % 2.5, ta % 2.5)  # int tensor with a float scalar: float32
    assert dl.atan2(a, b).dtype is dl.float32  # integers give float32
    close(dl.atan2(a, b), torch.atan2(ta, tb))
    _same(dl.floor_divide(a, 2), torch.floor_divide(ta, 2))
    m, tm = dl.tensor(np.array([True, False])), torch.tensor([True, False])
    _same(m & True, tm & True)
    _same(m ^ m, tm ^ tm)
    _same(~m, ~tm)
    x = dl.tensor(np.array([1.5, -2.0], np.float16))
    assert dl.remainder(x, 1.0).dtype is dl.float16
    assert dl.hypot(x, dl.tensor(np.array([1.0, 2.0]))).dtype is dl.float64
    assert dl.isnan(a).dtype is dl.bool_ and not dl.isinf(a).numpy().any()
    assert dl.nan_to_num(a).dtype is dl.int32


@pytest.mark.parametrize("call, match", [
    (lambda: dl.tensor([1.0]) & dl.tensor([1.0]), "bitwise_and.*float32"),
    (lambda: ~dl.tensor([1.0]), "bitwise_not.*float32"),
    (lambda: dl.remainder(dl.tensor([True]), dl.tensor([True])), "remainder.*bool"),
    (lambda: dl.tensor([True]) // dl.tensor([True]), "floor_divide.*bool"),
    (lambda: dl.hypot(dl.tensor([1]), dl.tensor([2])), "hypot.*int64"),
    (lambda: dl.lerp(dl.tensor([1]), dl.tensor([2]), 0.5), "lerp.*int64"),
    (lambda: dl.vector_norm(dl.tensor([1, 2])), "floating point.*int64"),
])
def test_dtype_errors(call, match):
    with pytest.raises((TypeError, RuntimeError), match=match):
        call()


@pytest.mark.parametrize("call, match", [
    (lambda: dl.einsum("ij,jk->ik", dl.ones(2, 3), dl.ones(4, 5)), r"'j'.*\(4, 5\)"),
    (lambda: dl.einsum("ij->ij", dl.ones(2, 3, 4)), r"\(2, 3, 4\)"),
    (lambda: dl.einsum("ij,j", dl.ones(2, 3)), "2 operands but 1"),
    (lambda: dl.einsum("ij->k", dl.ones(2, 3)), "'k' does not appear"),
    (lambda: dl.einsum("ii->i", dl.ones(2, 3)), r"'i'.*\(2, 3\)"),
    (lambda: dl.addmm(dl.ones(2, 2), dl.ones(2, 3), dl.ones(4, 2)), r"2x3 and 4x2"),
    (lambda: dl.addmm(dl.ones(3, 3), dl.ones(2, 3), dl.ones(3, 2)), r"\(3, 3\).*\(2, 2\)"),
    (lambda: dl.baddbmm(dl.ones(2, 2), dl.ones(2, 3), dl.ones(3, 2)), "3-D"),
    (lambda: dl.cdist(dl.ones(2, 3), dl.ones(4, 2)), r"\(2, 3\).*\(4, 2\)"),
    (lambda: dl.cdist(dl.ones(2, 3), dl.ones(4, 3), p=-1.0), "non-negative"),
    (lambda: dl.outer(dl.ones(2, 2), dl.ones(2)), r"1-D.*\(2, 2\)"),
    (lambda: F.glu(dl.ones(2, 5)), r"even.*\(2, 5\)"),
    (lambda: dl.norm(dl.ones(2, 2), "nuc"), "nuc"),
    (lambda: dl.linspace(0, 1, -1), "non-negative"),
])
def test_errors_name_shapes(call, match):
    with pytest.raises((ValueError, TypeError, RuntimeError), match=match):
        call()


def test_elementwise_math_fuses():
    a, b = dl.tensor(rand_np((64,), 1)), dl.tensor(rand_np((64,), 2, low=0.5))
    with dl.count_kernels() as c:
        y = (dl.atan2(a, b) + a % b + dl.hypot(a, b) + dl.lerp(a, b, 0.3)
             + F.mish(a) + F.elu(a) + dl.nan_to_num(a)).numpy()
    assert c.launches == 1
    with dl.fusion(False):
        y2 = (dl.atan2(a, b) + a % b + dl.hypot(a, b) + dl.lerp(a, b, 0.3)
              + F.mish(a) + F.elu(a) + dl.nan_to_num(a)).numpy()
    np.testing.assert_allclose(y, y2, rtol=1e-6)


def test_activation_parameters_are_kernel_arguments():
    x = dl.tensor(rand_np((32,), 3))
    F.leaky_relu(x, 0.1).numpy()
    with dl.count_kernels() as c:
        F.leaky_relu(x, 0.2).numpy()
        F.elu(x, 0.3).numpy()
        F.elu(x, 0.4).numpy()
    assert c.compiles <= 1  # elu compiles once; new slopes and alphas reuse kernels


def test_einsum_forms():
    a, b = rand_np((2, 3, 4), 4), rand_np((4, 5), 5)
    ta, tb = torch.tensor(a), torch.tensor(b)
    close(dl.einsum("bij,jk", [dl.tensor(a), dl.tensor(b)]), torch.einsum("bij,jk", ta, tb))
    close(dl.einsum("Bij, jK -> KB i", dl.tensor(a), dl.tensor(b)),
          torch.einsum("Bij,jK->KBi", ta, tb))
    s = rand_np((3, 3), 6)
    close(dl.einsum("ji", dl.tensor(s)), torch.einsum("ji", torch.tensor(s)))  # implicit: ij
    close(dl.einsum("...i,...i->...", dl.tensor(a), dl.tensor(a)),
          torch.einsum("...i,...i->...", ta, ta), rtol=1e-5, atol=1e-5)


def test_einsum_gradients():
    a, b = rand_np((3, 3), 7, np.float64), rand_np((3, 4), 8, np.float64)
    x, y = dl.tensor(a, requires_grad=True), dl.tensor(b, requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    w = rand_np((3, 4), 9, np.float64)
    (dl.einsum("ii,ij->ij", x, y) * dl.tensor(w)).sum().backward()
    (torch.einsum("ii,ij->ij", tx, ty) * torch.tensor(w)).sum().backward()
    close(x.grad, tx.grad, dl.float64)
    close(y.grad, ty.grad, dl.float64)


@pytest.mark.parametrize("p", [2, 1, 0.5, 3, math.inf, 0])
def test_vector_norm_gradient_at_zero(p):
    a = np.array([[0.0, 0.0, 0.0], [1.0, -1.0, 0.0], [2.0, 0.0, -2.0]])
    x = dl.tensor(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    dl.linalg.vector_norm(x, p, 1).sum().backward()
    torch.linalg.vector_norm(tx, p, 1).sum().backward()
    close(x.grad, tx.grad if tx.grad is not None else torch.zeros(3, 3, dtype=torch.float64),
          dl.float64)


def test_addmm_beta_zero_ignores_input():
    i = dl.tensor(np.full((2, 2), np.nan), requires_grad=True)
    m = dl.tensor(rand_np((2, 3), 10, np.float64))
    n = dl.tensor(rand_np((3, 2), 11, np.float64))
    y = dl.addmm(i, m, n, beta=0, alpha=2.0)
    assert np.isfinite(y.numpy()).all()
    y.sum().backward()
    np.testing.assert_array_equal(i.grad.numpy(), np.zeros((2, 2)))


def test_reductions_and_predicates():
    x = dl.tensor(np.array([[0.0, 1.0], [0.0, 0.0]]))
    assert dl.any(x).item() is True and dl.all(x).item() is False
    _same(dl.any(x, 1, keepdim=True), torch.tensor([[True], [False]]))
    assert x.any().dtype is dl.bool_
    assert dl.allclose(x, x + 1e-9) is True
    assert dl.allclose(x, x + 1e-3) is False
    assert x.allclose(x)
    y = dl.tensor(np.array([np.nan, 1.0]))
    assert not dl.allclose(y, y) and dl.allclose(y, y, equal_nan=True)


def test_linspace_logspace():
    close(dl.linspace(0, 1, 5, requires_grad=True), torch.linspace(0, 1, 5))
    assert dl.linspace(0, 1, 5, requires_grad=True).requires_grad
    close(dl.linspace(dl.tensor(1.0), dl.tensor(3.0), 4), torch.linspace(1.0, 3.0, 4))
    close(dl.logspace(0, 3, 4, base=2), torch.logspace(0, 3, 4, base=2))
    assert dl.linspace(0, 1, 0).shape == (0,)


def test_inplace_activations():
    a = rand_np((3, 4), 12)
    for name in ("elu", "selu", "leaky_relu", "mish", "hardswish"):
        x = dl.tensor(a)
        y = getattr(F, name)(x, inplace=True)
        assert y is x
        close(x, getattr(torch.nn.functional, name)(torch.tensor(a)), rtol=1e-5, atol=1e-6)
    # a leaf that requires grad: refused, as torch refuses it, and left as it was
    with pytest.raises(RuntimeError):
        torch.nn.functional.elu(torch.tensor(a, requires_grad=True), inplace=True)
    x = dl.tensor(a, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        F.elu(x, inplace=True)
    close(x, torch.tensor(a))


def test_modules_args_and_repr():
    assert repr(dl.nn.LeakyReLU(0.2, inplace=True)) == "LeakyReLU(negative_slope=0.2, inplace=True)"
    assert repr(dl.nn.ELU(alpha=0.5)) == "ELU(alpha=0.5)"
    assert repr(dl.nn.Softplus(beta=2, threshold=10)) == "Softplus(beta=2, threshold=10)"
    assert repr(dl.nn.GLU(dim=1)) == "GLU(dim=1)"
    assert repr(dl.nn.Mish(inplace=True)) == "Mish(inplace=True)"
    x = rand_np((2, 4), 13)
    close(dl.nn.GLU(1)(dl.tensor(x)), torch.nn.GLU(1)(torch.tensor(x)), rtol=1e-5, atol=1e-6)
    close(dl.nn.SELU()(dl.tensor(x)), torch.nn.SELU()(torch.tensor(x)), rtol=1e-5, atol=1e-6)


def test_methods():
    x = dl.tensor(rand_np((3, 4), 14))
    t = torch.tensor(np.asarray(x.numpy()))
    close(x.logsumexp(1), t.logsumexp(1), rtol=1e-5, atol=1e-6)
    close(x.norm(), t.norm(), rtol=1e-5, atol=1e-6)
    close(x.atan2(x + 1), t.atan2(t + 1), rtol=1e-5, atol=1e-6)
    close(x.lerp(x * 2, 0.5), t.lerp(t * 2, 0.5), rtol=1e-5, atol=1e-6)
    close(x.remainder(0.7), t.remainder(0.7), rtol=1e-5, atol=1e-6)
    close(x.fmod(0.7), t.fmod(0.7), rtol=1e-5, atol=1e-6)


def _fused_sources(target: str):
    """The fused kernels (elementwise and reduce-on-read) that the math ops generate, forward
    and backward, as C-family sources for `target`."""
    import sys

    from codegen.cfamily import emit_source
    from dl.kernels import plan
    M = sys.modules["dl.fusion.materialise"]  # dl.fusion.materialise is also a function

    kernels = []
    run_pipeline = M.run_pipeline

    def capture(kernel, **kw):
        k = run_pipeline(kernel, **kw)
        kernels.append(k)
        return k

    saved = (M._cache, M._hot, plan.enabled, M.run_pipeline)
    M._cache, M._hot, plan.enabled, M.run_pipeline = {}, {}, False, capture
    try:
        floats = (np.float32,) if target == "msl" else (np.float32, np.float64)
        for dt in floats + (np.float16,):
            a = dl.tensor(rand_np((4, 6), 20).astype(dt), requires_grad=dt != np.float16)
            b = dl.tensor(rand_np((4, 6), 21, low=0.5).astype(dt), requires_grad=dt != np.float16)
            ys = [dl.atan2(a, b), a % b, dl.fmod(a, b), a // b, dl.hypot(a, b),
                  dl.lerp(a, b, 0.3), dl.lerp(a, b, a), dl.nan_to_num(a),
                  F.softplus(a, 2.0, 3.0), F.mish(a), F.hardswish(a), F.leaky_relu(a),
                  F.elu(a), F.selu(a), F.logsigmoid(a), F.glu(a), dl.logsumexp(a, 1),
                  dl.vector_norm(a, 3.0, 1), dl.cdist(a, b, 2.0),
                  dl.isnan(a) | dl.isinf(b) | dl.isfinite(a)]
            loss = None
            for y in ys:
                s = y.float().sum() if y.dtype is dl.bool_ else y.sum()
                loss = s if loss is None else loss + s.to(loss.dtype)
            if dt != np.float16:
                loss.backward()
            else:
                loss.numpy()
        i, j = dl.tensor(np.arange(-6, 6, dtype=np.int32)), dl.tensor(np.full(12, 3, np.int32))
        m = i > 0
        for y in (i % j, i // j, dl.fmod(i, j), i & j, i | j, i ^ j, ~i, i << 2, i >> 1,
                  m & (j > 2), ~m, dl.any(m), dl.all(i, 0)):
            y.numpy()
    finally:
        M._cache, M._hot, plan.enabled, M.run_pipeline = saved
    out = []
    for n, k in enumerate(kernels):
        k.name = f"math_fused_{n}"
        out.append((f"{k.name}", emit_source(k, target).text))
    return out


@pytest.mark.parametrize("target", ["cuda", "hip", "msl"])
def test_fused_math_kernels_compile_for_gpu_targets(target, tmp_path):
    """The fused kernels of the math ops compile with each vendor's real tool (nvcc + ptxas,
    hipcc, clang++ with the Metal shim)."""
    from cube.check import tools
    tool = {"cuda": "nvcc", "hip": "hipcc", "msl": "clang++"}[target]
    if tools.find_tool(tool) is None:
        pytest.skip(f"{tool} is not installed")
    sources = _fused_sources(target)
    assert len(sources) > 20
    if target == "cuda":
        run = tools.cuda(sources, "sm_80", tmp_path)
    elif target == "hip":
        run = tools.hip(sources, tools.hip_archs()[0][0][0], tmp_path)
    else:
        run = tools.msl(sources, "metal-shim", tmp_path)
    assert run.ok, run.error or "\n".join(f"{k}:\n{v}" for k, v in run.failed.items())

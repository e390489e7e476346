"""Elementwise ops against PyTorch: forward, gradients, broadcasting, promotion."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from dl_helpers import close, rand_np, to_torch

import dl
from dl.ops.common import result_type

UNARY = {  # name: (dl fn, torch fn, input range)
    "neg": (lambda x: -x, lambda x: -x, (-2, 2)),
    "abs": (dl.abs, torch.abs, (-2, 2)),
    "sqrt": (dl.sqrt, torch.sqrt, (0.1, 3)),
    "rsqrt": (dl.rsqrt, torch.rsqrt, (0.1, 3)),
    "exp": (dl.exp, torch.exp, (-2, 2)),
    "log": (dl.log, torch.log, (0.1, 3)),
    "log1p": (dl.log1p, torch.log1p, (-0.5, 3)),
    "sin": (dl.sin, torch.sin, (-3, 3)),
    "cos": (dl.cos, torch.cos, (-3, 3)),
    "tanh": (dl.tanh, torch.tanh, (-3, 3)),
    "erf": (dl.erf, torch.erf, (-2, 2)),
    "sigmoid": (dl.sigmoid, torch.sigmoid, (-5, 5)),
    "relu": (dl.relu, torch.relu, (-2, 2)),
    "gelu": (dl.gelu, torch.nn.functional.gelu, (-3, 3)),
    "gelu_tanh": (lambda x: dl.gelu(x, approximate="tanh"),
                  lambda x: torch.nn.functional.gelu(x, approximate="tanh"), (-3, 3)),
    "silu": (dl.silu, torch.nn.functional.silu, (-4, 4)),
    "softplus": (dl.softplus, torch.nn.functional.softplus, (-30, 30)),
    "square": (dl.square, torch.square, (-2, 2)),
    "reciprocal": (dl.reciprocal, torch.reciprocal, (0.5, 2)),
    "floor": (dl.floor, torch.floor, (-3, 3)),
    "ceil": (dl.ceil, torch.ceil, (-3, 3)),
    "sign": (dl.sign, torch.sign, (-2, 2)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_forward_and_grad(name):
    f, tf, (lo, hi) = UNARY[name]
    a = rand_np((3, 5), 11, low=lo, high=hi)
    x = dl.tensor(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    y, ty = f(x), tf(tx)
    close(y, ty, rtol=2e-6, atol=1e-6)
    g = rand_np((3, 5), 12)
    y.backward(dl.tensor(g))
    ty.backward(torch.tensor(g))
    close(x.grad, tx.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["exp", "gelu", "sigmoid", "relu", "tanh"])
def test_unary_on_every_runtime(dev, name):
    f, tf, (lo, hi) = UNARY[name]
    a = rand_np((2, 3, 4), 13, low=lo, high=hi)
    x = dl.tensor(a, device=dev, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    y, ty = f(x), tf(tx)
    close(y, ty, rtol=2e-6, atol=1e-6)
    y.backward(dl.ones_like(y))
    ty.backward(torch.ones_like(ty))
    close(x.grad, tx.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_on_bool(dev, name):
    """A bool input: neg, abs and relu, which have no bool form, are refused at the op with
    a DTypeError as PyTorch refuses them (before, neg and abs raised an internal IR error
    from the fused kernel's compile when the value was computed, and relu one of the SPIR-V
    target's on wgpu-spirv); the others compute on 0/1 (PyTorch's result where it takes
    bools, its float result on 0/1 where it refuses them)."""
    f, tf, _ = UNARY[name]
    a = np.array([[True, False, True], [False, False, True]])
    x = dl.tensor(a, device=dev)
    if name in ("neg", "abs", "relu"):
        with pytest.raises(RuntimeError):
            tf(torch.tensor(a))
        with pytest.raises(RuntimeError, match=f"{name} is not implemented for bool tensors"):
            f(x)  # at the op, not when the lazy value is computed
        return
    ref = tf(torch.tensor(a.astype(np.float32))).numpy()
    np.testing.assert_allclose(f(x).numpy().astype(np.float64), ref, rtol=2e-6, atol=1e-7)


def test_neg_and_abs_of_bool_refused_in_every_form():
    from dl import abs as dl_abs
    from dl import neg
    b = dl.tensor(np.array([True, False]))
    forms = {"neg": [lambda: -b, lambda: neg(b), lambda: b.neg(), lambda: b.neg_()],
             "abs": [lambda: abs(b), lambda: dl_abs(b), lambda: b.abs(), lambda: b.abs_()]}
    for name, fs in forms.items():
        for f in fs:
            with pytest.raises(dl.ops.elementwise.DTypeError,
                               match=f"{name} is not implemented for bool tensors"):
                f()
    assert b.numpy().tolist() == [True, False]  # the refused in-place forms wrote nothing
    i = dl.tensor(np.array([3, -4], np.int32))
    assert (-i).numpy().tolist() == [-3, 4] and abs(i).numpy().tolist() == [3, 4]
    assert (-i).dtype is dl.int32


def test_clamp_of_bools(dev):
    """clamp on bool tensors is max/min of bools, x or lo, then and hi (its select of an
    ordered compare was a SPIR-V target error on wgpu-spirv); clamp_min/clamp_max against
    PyTorch's, clamp (which PyTorch refuses for bools) against NumPy's."""
    x, lo, hi = (np.array(v) for v in ([True, True, False, False], [True, False, True, False],
                                        [False, True, True, False]))
    dx, dlo, dhi = (dl.tensor(a, device=dev) for a in (x, lo, hi))
    tx, tlo, thi = (torch.tensor(a) for a in (x, lo, hi))
    for got, ref in ((dl.clamp_min(dx, dlo), torch.clamp_min(tx, tlo)),
                     (dx.clamp_max(dhi), torch.clamp_max(tx, thi))):
        assert got.dtype is dl.bool_ and got.numpy().tolist() == ref.numpy().tolist()
    got = dl.clamp(dx, dlo, dhi)
    assert got.dtype is dl.bool_
    assert got.numpy().tolist() == np.minimum(np.maximum(x, lo), hi).tolist()
    assert dl.clamp(dx, True, False).numpy().tolist() == [False] * 4  # min > max: max


@pytest.mark.parametrize("op", ["mean", "var", "std"])
def test_integer_statistics_refused_naming_the_op(op):
    x = dl.tensor(np.array([1, 2, 3], np.int32))
    with pytest.raises(RuntimeError):
        getattr(torch.tensor([1, 2, 3], dtype=torch.int32), op)()
    with pytest.raises(TypeError, match=rf"^{op}\(\) needs a float tensor, got dl.int32"):
        getattr(x, op)()
    ref = getattr(torch.tensor([1.0, 2.0, 3.0]), op)().item()
    assert abs(getattr(x.float(), op)().item() - ref) < 1e-6


BROADCAST = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 1, 4), (3, 1)),
             ((), (2, 3)), ((2, 3), ()), ((), ()), ((0, 3), (1, 3)), ((1,), (5, 1, 1)),
             ((4, 1, 2), (4, 3, 1))]
BINARY = {
    "add": (dl.add, torch.add), "sub": (dl.sub, torch.sub), "mul": (dl.mul, torch.mul),
    "div": (dl.div, torch.div), "pow": (dl.pow, torch.pow),
    "maximum": (dl.maximum, torch.maximum), "minimum": (dl.minimum, torch.minimum),
}


@pytest.mark.parametrize("shapes", BROADCAST, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcast_forward_and_grad(name, shapes):
    f, tf = BINARY[name]
    sa, sb = shapes
    a = rand_np(sa, 21, low=0.5, high=2.0)
    b = rand_np(sb, 22, low=0.5, high=2.0)
    if name in ("maximum", "minimum") and a.size and b.size:
        b.reshape(-1)[0] = a.reshape(-1)[0]  # a tie: the gradient splits in half
    x, y = dl.tensor(a, requires_grad=True), dl.tensor(b, requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    z, tz = f(x, y), tf(tx, ty)
    close(z, tz, rtol=2e-6)
    g = rand_np(tz.shape, 23)
    z.backward(dl.tensor(g))
    tz.backward(torch.tensor(g))
    close(x.grad, tx.grad, rtol=1e-5, atol=1e-6)
    close(y.grad, ty.grad, rtol=1e-5, atol=1e-6)


def test_broadcast_on_every_runtime(dev):
    a, b = rand_np((2, 1, 3), 1), rand_np((4, 1), 2)
    x, y = dl.tensor(a, device=dev, requires_grad=True), dl.tensor(b, device=dev,
                                                                   requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    z, tz = (x * y - y / 3).sigmoid(), (tx * ty - ty / 3).sigmoid()
    close(z, tz)
    z.backward(dl.ones_like(z))
    tz.backward(torch.ones_like(tz))
    close(x.grad, tx.grad)
    close(y.grad, ty.grad)


def test_random_broadcast_shapes():
    rng = np.random.default_rng(5)
    for _ in range(12):
        rank = int(rng.integers(0, 4))
        full = [int(rng.integers(0, 4)) for _ in range(rank)]
        sa = tuple(1 if rng.random() < 0.3 else s for s in full)
        sb = tuple(1 if rng.random() < 0.3 else s for s in full)[int(rng.integers(0, rank + 1)):]
        a, b = rand_np(sa, 1), rand_np(sb, 2)
        z = dl.tensor(a) * 2 - dl.tensor(b).exp()
        close(z, torch.tensor(a) * 2 - torch.tensor(b).exp())


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons(op):
    a, b = np.array([1, 2, 3, 4], np.int32), np.array([[3.0], [2.0]], np.float32)
    got = getattr(dl, op)(dl.tensor(a), dl.tensor(b))
    want = getattr(torch, op)(torch.tensor(a), torch.tensor(b))
    assert got.dtype is dl.bool_
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(getattr(dl, op)(dl.tensor(a), 2).numpy(),
                                  getattr(torch, op)(torch.tensor(a), 2).numpy())


def test_logical_ops():
    a, b = np.array([True, False, True, False]), np.array([True, True, False, False])
    x, y = dl.tensor(a), dl.tensor(b)
    np.testing.assert_array_equal((x & y).numpy(), a & b)
    np.testing.assert_array_equal((x | y).numpy(), a | b)
    np.testing.assert_array_equal((x ^ y).numpy(), a ^ b)
    np.testing.assert_array_equal((~x).numpy(), ~a)


def test_where_and_clamp_with_grads():
    a, b = rand_np((3, 4), 31), rand_np((4,), 32)
    x, y = dl.tensor(a, requires_grad=True), dl.tensor(b, requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    z = dl.where(x > 0, x * 2, y) + x.clamp(-0.5, 0.7) + y.clamp(min=0.1)
    tz = torch.where(tx > 0, tx * 2, ty) + tx.clamp(-0.5, 0.7) + ty.clamp(min=0.1)
    close(z, tz)
    g = rand_np((3, 4), 33)
    z.backward(dl.tensor(g))
    tz.backward(torch.tensor(g))
    close(x.grad, tx.grad)
    close(y.grad, ty.grad)
    close(dl.where(x > 0, 1.0, 0.0), torch.where(tx > 0, 1.0, 0.0))
    lo, hi = dl.tensor(rand_np((4,), 34) - 1), dl.tensor(rand_np((3, 1), 35) + 1)
    close(x.clamp(lo, hi), tx.clamp(to_torch(lo), to_torch(hi)))


DT = [dl.bool_, dl.int32, dl.int64, dl.float16, dl.bfloat16, dl.float32, dl.float64]
TORCH_DT = {dl.bool_: torch.bool, dl.int32: torch.int32, dl.int64: torch.int64,
            dl.float16: torch.float16, dl.bfloat16: torch.bfloat16,
            dl.float32: torch.float32, dl.float64: torch.float64}


def test_promotion_matches_torch():
    for a in DT:
        for b in DT:
            want = torch.result_type(torch.ones(1, dtype=TORCH_DT[a]),
                                     torch.ones(1, dtype=TORCH_DT[b]))
            assert TORCH_DT[dl.dtypes.promote(a, b)] == want, (a, b)
        for s in (True, 2, 2.5):
            want = torch.result_type(torch.ones(1, dtype=TORCH_DT[a]), s)
            assert TORCH_DT[dl.dtypes.promote_scalar(a, s)] == want, (a, s)


def test_zero_dim_tensors_promote_like_torch():
    """A 0-dim tensor beside a tensor with dims counts only where its category is higher
    (torch.result_type's rule; before, int32 vector + int64 0-dim was int64), and the ops
    that promote their operands compute in that type."""
    for a in DT:
        for b in DT:
            want = torch.result_type(torch.ones(2, dtype=TORCH_DT[a]),
                                     torch.tensor(1, dtype=TORCH_DT[b]))
            assert TORCH_DT[result_type(dl.ones(2, dtype=a), dl.tensor(1, dtype=b))] == want
            both = torch.result_type(torch.tensor(1, dtype=TORCH_DT[a]),
                                     torch.tensor(1, dtype=TORCH_DT[b]))
            assert TORCH_DT[result_type(dl.tensor(1, dtype=a), dl.tensor(1, dtype=b))] == both
    for dev_a, dev_b in ((dl.int32, dl.int64), (dl.float32, dl.float64), (dl.bool_, dl.int32)):
        x, z = dl.tensor([3, -2], dtype=dev_a), dl.tensor(5, dtype=dev_b)
        tx = torch.tensor([3, -2], dtype=TORCH_DT[dev_a])
        tz = torch.tensor(5, dtype=TORCH_DT[dev_b])
        for op in ("add", "mul", "maximum", "where"):
            got = dl.where(x > 0, x, z) if op == "where" else getattr(dl, op)(x, z)
            want = torch.where(tx > 0, tx, tz) if op == "where" else getattr(torch, op)(tx, tz)
            assert TORCH_DT[got.dtype] == want.dtype, (op, dev_a, dev_b)
            np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_bool_arithmetic_is_torchs(dev):
    """Two bools: +, *, maximum, minimum stay bool (or, and), - is refused, square is int64,
    as torch's (before, every arithmetic op gave int64), on every runtime."""
    a0, b0 = [True, False, True, False], [True, True, False, False]
    a, b = dl.tensor(a0, device=dev), dl.tensor(b0, device=dev)
    ta, tb = torch.tensor(a0), torch.tensor(b0)
    pairs = [(a + b, ta + tb), (a * b, ta * tb), (dl.maximum(a, b), torch.maximum(ta, tb)),
             (dl.minimum(a, b), torch.minimum(ta, tb)), (a + True, ta + True),
             (a * False, ta * False), (a * b + a, ta * tb + ta)]
    if a.device.rt.features.int64:  # int64 results (WGSL has none)
        pairs += [(dl.square(a), torch.square(ta)), (a + 1, ta + 1)]
    for got, want in pairs:
        assert TORCH_DT[got.dtype] == want.dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    # any subtraction with a bool tensor, as PyTorch (we refused two bools only)
    ti, di = torch.tensor([1, 2]), dl.tensor([1, 2], device=dev)
    for call in (lambda x, y, i: x - y, lambda x, y, i: x - True, lambda x, y, i: i - x,
                 lambda x, y, i: x - 1, lambda x, y, i: 1.5 - x,
                 lambda x, y, i: x.float() - y):
        with pytest.raises(RuntimeError):
            call(ta, tb, ti)
        with pytest.raises(RuntimeError, match="subtraction with a bool tensor"):
            call(a, b, di)


def test_python_ints_outside_the_integer_type_are_refused_at_the_op(dev):
    """A Python int that does not fit the integer type it enters the kernel as is refused
    when the op is made, naming the op and the value (before: a LaunchError about argument
    'c0' when the lazy value was computed, far from the op); ints that fit compute and
    wrap as torch's."""
    t = dl.tensor([3, -1], dtype=dl.int32, device=dev)
    for call in (lambda: t + 2 ** 31, lambda: t < 2 ** 31, lambda: t.clamp(max=2 ** 40),
                 lambda: dl.where(t > 0, t, -2 ** 31 - 1), lambda: t.masked_fill(t > 0, 2 ** 31),
                 lambda: dl.full((2,), 2 ** 31, dtype=dl.int32, device=dev)):
        with pytest.raises(RuntimeError, match="cannot be converted to int32 without overflow"):
            call()
    tt = torch.tensor([3, -1], dtype=torch.int32)
    for f in (lambda x: x + (2 ** 31 - 1), lambda x: x * -2 ** 31, lambda x: x - (2 ** 31 - 1)):
        got, want = f(t), f(tt)
        assert got.dtype is dl.int32
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("dt", [dl.float16, dl.bfloat16, dl.float64, dl.int32, dl.int64])
def test_dtypes_compute_like_torch(dt):
    a, b = rand_np((5, 3), 41) * 4, rand_np((3,), 42) * 4
    if not dt.is_float:
        a, b = np.round(a), np.round(b) + 5
    x, y = dl.tensor(a, dtype=dt), dl.tensor(b, dtype=dt)
    tx, ty = torch.tensor(a).to(TORCH_DT[dt]), torch.tensor(b).to(TORCH_DT[dt])
    z, tz = x * y + x - 3, tx * ty + tx - 3
    assert z.dtype is dt
    close(z, tz, dt)
    close(x / y, tx / ty, dt if dt.is_float else dl.float32)
    if dt.is_float:
        close((x * 0.5).exp(), (tx * 0.5).exp(), dt)


def test_int_tensor_with_float_scalar_is_float():
    t = dl.tensor([1, 2, 3]) * 0.5
    assert t.dtype is dl.float32
    np.testing.assert_array_equal(t.numpy(), [0.5, 1.0, 1.5])
    assert (dl.tensor([True, False]) + 1).dtype is dl.int64


def test_every_op_in_one_kernel_on_every_runtime(dev):
    """All unary and binary ops, forward, computed together in one fused kernel per shape."""
    a = rand_np((2, 3), 51, low=0.2, high=2.0)
    b = rand_np((3,), 52, low=0.2, high=2.0)
    x, y = dl.tensor(a, device=dev), dl.tensor(b, device=dev)
    tx, ty = torch.tensor(a), torch.tensor(b)
    outs = [f(x) for f, _, _ in UNARY.values()] + [f(x, y) for f, _ in BINARY.values()]
    wants = [tf(tx) for _, tf, _ in UNARY.values()] + [tf(tx, ty) for _, tf in BINARY.values()]
    with dl.count_kernels() as c:
        dl.fusion.realise(outs)
    assert c.launches == 1
    for got, want in zip(outs, wants):
        close(got, want, rtol=2e-6, atol=1e-6)


def test_integer_pow_by_a_negative_python_exponent_raises_as_torch():
    """An integer tensor to a negative Python power raises, as PyTorch (its values would
    be fractions); a float exponent gives floats."""
    with pytest.raises(RuntimeError):
        torch.tensor([3]) ** -1
    with pytest.raises(RuntimeError, match="negative integer powers"):
        dl.tensor([3]) ** -1
    assert (dl.tensor([4]) ** -1.0).dtype is dl.float32

"""In-place writes mean what they mean in PyTorch: `t += x` and `t.add_(x)` write into t's
storage (aliases and views see it); a lazy value made before a write keeps the values it was
made from; a backward that would read a value overwritten since its op ran is refused (as
PyTorch's version counter refuses it), and one that does not read it gives PyTorch's
gradients. Every case runs the same program on torch (the reference: eager, float64 where
values are compared) and on dl, on every runtime."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from dl_helpers import close

import dl
import dl.nn as nn
import dl.nn.functional as F


@pytest.fixture(autouse=True)
def _on(dev):
    """Tensors made without a device (indices, values) go where the test's tensors are."""
    dl.set_default_device(dev)


def _pair(shape, seed, dev, grad=False):
    a = np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)
    t = dl.tensor(a, device=dev, requires_grad=grad)
    return t, torch.tensor(a.astype(np.float64), requires_grad=grad)


# (name, the in-place call on (t, other), its operands' shapes): run on dl and torch alike
INPLACE = {
    "iadd": (lambda t, o: t.__iadd__(o), (3, 4), (4,)),
    "isub_scalar": (lambda t, o: t.__isub__(1.5), (3, 4), None),
    "imul": (lambda t, o: t.__imul__(o), (3, 4), (3, 1)),
    "itruediv": (lambda t, o: t.__itruediv__(o.abs() + 1), (3, 4), (3, 4)),
    "ipow": (lambda t, o: t.__ipow__(2), (3, 4), None),
    "add_alpha": (lambda t, o: t.add_(o, alpha=0.5), (3, 4), (3, 4)),
    "sub_": (lambda t, o: t.sub_(o), (2, 3), (2, 3)),
    "mul_scalar": (lambda t, o: t.mul_(-3.0), (5,), None),
    "div_": (lambda t, o: t.div_(o.abs() + 0.5), (5,), (5,)),
    "clamp_": (lambda t, o: t.clamp_(-0.5, 0.75), (4, 4), None),
    "clamp_min_": (lambda t, o: t.clamp_min_(0.1), (4, 4), None),
    "exp_": (lambda t, o: t.exp_(), (6,), None),
    "neg_": (lambda t, o: t.neg_(), (6,), None),
    "sqrt_abs": (lambda t, o: t.abs_().sqrt_(), (6,), None),
    "tanh_": (lambda t, o: t.tanh_(), (6,), None),
    "sigmoid_": (lambda t, o: t.sigmoid_(), (6,), None),
    "relu_": (lambda t, o: t.relu_(), (6,), None),
    "floor_": (lambda t, o: t.floor_(), (6,), None),
    "lerp_": (lambda t, o: t.lerp_(o, 0.25), (6,), (6,)),
    "maximum_via_clamp": (lambda t, o: t.clamp_(min=o), (2, 3), (2, 3)),
    "xlogy_": (lambda t, o: t.xlogy_(o.abs() + 0.5), (2, 3), (2, 3)),
    "copysign_": (lambda t, o: t.copysign_(o), (2, 3), (3,)),
    "frac_": (lambda t, o: t.frac_(), (6,), None),
    "sinc_": (lambda t, o: t.sinc_(), (6,), None),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_ops_write_the_tensor_and_its_aliases(dev, name):
    """The call returns t itself; t, an alias bound before and a view taken before all hold
    PyTorch's values."""
    fn, shape, oshape = INPLACE[name]
    t, tt = _pair(shape, 1, dev)
    o, to = _pair(oshape, 2, dev) if oshape else (None, None)
    alias, view = t, t.reshape(-1)
    talias, tview = tt, tt.reshape(-1)
    r, tr = fn(t, o), fn(tt, to)
    assert tr is talias and r is alias
    close(alias, tr)
    close(view, tview)


@pytest.mark.parametrize("case", ["broadcast column", "shifted rows", "flipped copy_"])
def test_a_source_overlapping_its_destination_is_read_whole_first(dev, case):
    """A write whose source is a view of its destination means NumPy's result: the source
    as it was before the write (torch refuses most of these, and computed `x[:] =
    x.select(1, 0)` over values it had already overwritten: the program fuzzer's seed
    7067)."""
    a = np.arange(20, dtype=np.float32).reshape(4, 5) * 0.5 - 3
    want, x = a.copy(), dl.tensor(a, device=dev)
    if case == "broadcast column":
        want[:] = want[:, 0:1].copy()
        x[:] = x.select(1, 0)[:, None]
    elif case == "shifted rows":
        want[1:] = want[:-1].copy()
        x[1:] = x[:-1]
    else:
        want[:] = want[::-1].copy()
        x.copy_(x.flip(0))
    np.testing.assert_array_equal(x.numpy(), want)


def test_augmented_assignment_keeps_the_name_bound_to_the_same_tensor(dev):
    """`x += y` (and -=, *=, /=) on a dl tensor changes the object, not the name: a list
    holding x, and a slice of x, see the change."""
    x, tx = _pair((4, 3), 3, dev)
    y, ty = _pair((4, 3), 4, dev)
    held, rows = [x], x[1:3]
    trows = tx[1:3]
    for op in ("__iadd__", "__isub__", "__imul__", "__itruediv__"):
        x2 = getattr(x, op)(y if op != "__itruediv__" else y.abs() + 1)
        getattr(tx, op)(ty if op != "__itruediv__" else ty.abs() + 1)
        assert x2 is x
    close(held[0], tx)
    close(rows, trows)


def test_integer_and_bool_augmented_assignment(dev):
    """Integer floor division, remainder, shifts and bit ops in place, on int32 storage."""
    a = np.array([[7, -9, 12], [5, 0, -3]], np.int32)
    x, tx = dl.tensor(a, device=dev), torch.tensor(a)
    x //= 2
    tx //= 2
    x %= 3
    tx %= 3
    x <<= 1
    tx <<= 1
    x |= 4
    tx |= 4
    x ^= 1
    tx ^= 1
    np.testing.assert_array_equal(x.numpy(), tx.numpy())
    assert x.dtype is dl.int32
    m, tm = dl.tensor(a > 0, device=dev), torch.tensor(a > 0)
    m &= dl.tensor(a < 7, device=dev)
    tm &= torch.tensor(a < 7)
    np.testing.assert_array_equal(m.numpy(), tm.numpy())


@pytest.mark.parametrize("case", ["int_true_divide", "int_float_scalar", "broadcast_grows",
                                  "bool_add_int"])
def test_results_that_do_not_fit_are_refused_as_torch_refuses_them(dev, case):
    """A result of a wider category than the tensor, or of a larger shape, is a
    RuntimeError on both; the tensor is left as it was."""
    i = np.arange(6, dtype=np.int64).reshape(2, 3)
    f = np.ones((2, 2, 3), np.float32)
    calls = {
        "int_true_divide": (i, lambda t, m: t.__itruediv__(2)),
        "int_float_scalar": (i, lambda t, m: t.__imul__(1.5)),
        "broadcast_grows": (i.astype(np.float32), lambda t, m: t.__iadd__(m.tensor(f))),
        "bool_add_int": (i > 2, lambda t, m: t.__iadd__(1)),
    }
    a, call = calls[case]
    with pytest.raises(RuntimeError):
        call(torch.tensor(a), torch)
    x = dl.tensor(a, device=dev)
    with pytest.raises(RuntimeError, match="_:"):
        call(x, dl)
    np.testing.assert_array_equal(x.numpy(), a)


def test_manual_sgd_updates_the_model(dev):
    """The loop a PyTorch tutorial writes by hand: `p -= lr * p.grad` under no_grad moves the
    module's own parameters (a rebinding `-=` would leave the model untouched)."""
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    m = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 2)).to(dev)
    m.load_state_dict({k: dl.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    tm = tm.double()
    x, tx = _pair((8, 5), 5, dev)
    for _ in range(3):
        for mod, inp in ((m, x), (tm, tx)):
            loss = (mod(inp) ** 2).mean()
            for p in mod.parameters():
                p.grad = None
            loss.backward()
            no_grad = dl.no_grad() if mod is m else torch.no_grad()
            with no_grad:
                for p in mod.parameters():
                    p -= 0.1 * p.grad
    for p, tp in zip(m.parameters(), tm.parameters()):
        close(p, tp, rtol=1e-4, atol=1e-5)


# ---- lazy values keep the values they were made from -----------------------------------
WRITES = {
    "setitem": lambda x, m: x.__setitem__((0, slice(None)), 5.0),
    "setitem_index": lambda x, m: x.__setitem__(m.tensor([1, 0]), -1.0),
    "copy_": lambda x, m: x.copy_(m.zeros(3, 4)),
    "fill_": lambda x, m: x.fill_(0.25),
    "zero_": lambda x, m: x.zero_(),
    "iadd": lambda x, m: x.__iadd__(1.0),
    "mul_": lambda x, m: x.mul_(-2.0),
    "masked_fill_": lambda x, m: x.masked_fill_(x > 0, 9.0),
    "index_put_": lambda x, m: x.index_put_((m.tensor([2]),), m.full((4,), 3.0,
                                                                     dtype=x.dtype)),
    "view_write": lambda x, m: x.reshape(-1)[3:7].fill_(7.0),
}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_lazy_values_keep_the_values_they_were_made_from(dev, write):
    """y = f(x) made (lazily, fused later) before an in-place write to x has the values
    f(x) had before it, as in eager torch: through x itself and through a view of x."""
    x, tx = _pair((3, 4), 6, dev)
    y, z = x * 2.0 + 1.0, x[1:].exp()
    ty, tz = tx * 2.0 + 1.0, tx[1:].exp()
    WRITES[write](x, dl)
    WRITES[write](tx, torch)
    close(x, tx)
    close(y, ty)
    close(z, tz)


def test_a_value_written_into_its_own_source_stays_what_it_was(dev):
    """x.copy_(y) with y = x + 1 lazy: y keeps old x + 1 (it is not recomputed from the
    new x)."""
    x, tx = _pair((5,), 7, dev)
    y, ty = x + 1.0, tx + 1.0
    x.copy_(y)
    tx.copy_(ty)
    x.add_(y)
    tx.add_(ty)
    close(x, tx)
    close(y, ty)


def test_optimiser_step_after_a_lazy_read_of_a_parameter(dev):
    """A lazy value of a parameter made before `opt.step()` keeps the old parameter."""
    lin = nn.Linear(3, 2).to(dev)
    w0 = lin.weight.numpy().copy()
    opt = dl.optim.SGD(lin.parameters(), lr=0.5)
    x, _ = _pair((4, 3), 8, dev)
    lin(x).sum().backward()
    scaled = lin.weight * 3.0
    opt.step()
    np.testing.assert_allclose(scaled.numpy(), w0 * 3.0, rtol=1e-6)
    assert not np.allclose(lin.weight.numpy(), w0)


# ---- autograd ----------------------------------------------------------------------------
def _refused_both(fn):
    """fn(module) builds a graph, writes a saved value in place and calls backward."""
    with pytest.raises(RuntimeError):
        fn(torch)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        fn(dl)


@pytest.mark.parametrize("case", ["mul_operand", "exp_output", "optimiser_between"])
def test_backward_reading_an_overwritten_value_is_refused(dev, case):
    def mul_operand(m):
        x = m.tensor(np.ones(3, np.float32), requires_grad=True)
        h = x * 2.0
        z = h * h
        h[1] = 0.0
        z.sum().backward()

    def exp_output(m):
        x = m.tensor(np.ones(3, np.float32), requires_grad=True)
        y = x.exp()
        y += 1.0
        y.sum().backward()

    def optimiser_between(m):
        w = m.tensor(np.ones(3, np.float32), requires_grad=True)
        x = m.tensor(np.full(3, 2.0, np.float32), requires_grad=True)
        loss = (w * x).sum()
        opt = (torch.optim.SGD if m is torch else dl.optim.SGD)([w], lr=0.1)
        w.grad = m.tensor(np.ones(3, np.float32))
        opt.step()
        loss.backward()

    fns = {"mul_operand": mul_operand, "exp_output": exp_output,
           "optimiser_between": optimiser_between}
    _refused_both(fns[case])


def test_backward_not_reading_the_overwritten_value_gives_torchs_gradients(dev):
    """The ResNet block's `out = bn(conv(x)); out += identity; relu(out)` and a write into the
    output of an add: neither op's gradient reads the overwritten value."""
    torch.manual_seed(1)
    tconv, tbn = torch.nn.Conv2d(3, 3, 3, padding=1).double(), torch.nn.BatchNorm2d(3).double()
    conv, bn = nn.Conv2d(3, 3, 3, padding=1).to(dev), nn.BatchNorm2d(3).to(dev)
    conv.load_state_dict({k: dl.tensor(v.detach().float().numpy())
                          for k, v in tconv.state_dict().items()})
    x, tx = _pair((2, 3, 5, 5), 9, dev, grad=True)

    def block(m, c, b, inp):
        out = b(c(inp))
        out += inp
        out = m.relu(out) + 1.0
        out[:, 0] = 0.0  # a write into the add's output: its gradient reads nothing
        return (out * out).sum()

    block(torch, tconv, tbn, tx).backward()
    block(dl, conv, bn, x).backward()
    close(x.grad, tx.grad, rtol=1e-4, atol=1e-5)
    close(conv.weight.grad, tconv.weight.grad, rtol=1e-4, atol=1e-4)


def test_gradients_through_inplace_ops(dev):
    """h = x * 1.5; h.mul_(w); h -= x; h[0] += w[0]; h.clamp_(max=1); h.tanh_(): x's and w's
    gradients are torch's (mul_'s gradient for w reads h's value before the write)."""
    x, tx = _pair((4,), 10, dev, grad=True)
    w, tw = _pair((4,), 11, dev, grad=True)
    for a, b in ((x, w), (tx, tw)):
        h = a * 1.5
        h.mul_(b)
        h -= a
        h[0] += b[0]
        h.clamp_(max=1.0)
        h.tanh_()
        (h.exp() * h).sum().backward()
    close(x.grad, tx.grad, rtol=1e-5, atol=1e-6)
    close(w.grad, tw.grad, rtol=1e-5, atol=1e-6)


def test_inplace_on_a_leaf_that_requires_grad_is_refused(dev):
    x, _ = _pair((3,), 12, dev, grad=True)
    before = x.numpy().copy()
    for call in (lambda: x.add_(1.0), lambda: x.__imul__(2.0), lambda: x.relu_()):
        with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
            call()
    np.testing.assert_array_equal(x.numpy(), before)
    with dl.no_grad():
        x += 1.0
    np.testing.assert_allclose(x.numpy(), before + 1.0, rtol=1e-6)


def test_inplace_activation_flag_writes_the_input(dev):
    """F.leaky_relu(x, inplace=True) on a tensor that takes no gradient writes x, and a lazy
    value of x made before keeps the old values."""
    x, tx = _pair((2, 5), 13, dev)
    before, tbefore = x * 1.0, tx.clone()
    r = F.leaky_relu(x, 0.1, inplace=True)
    tr = torch.nn.functional.leaky_relu(tx, 0.1, inplace=True)
    assert r is x
    close(x, tr)
    close(before, tbefore)


@pytest.mark.parametrize("other", [None, "text", (1, 2), [1.0, 2.0], np.ones(3)])
def test_binary_ops_refuse_operands_that_are_not_numbers(other):
    """`t + other` for an operand that is neither a tensor nor a scalar is a TypeError naming
    the op, not a conversion error from inside (torch refuses these too, arrays aside)."""
    t = dl.tensor(np.ones(3, np.float32))
    for call in (lambda: t + other, lambda: other + t, lambda: t * other):
        with pytest.raises(TypeError, match="unsupported operand"):
            call()


# ---- views and the history of the tensors they view ---------------------------------------
def _rows_and_cols(m, x, w):
    h = x * 2.0
    h[0] += w  # Python: t = h[0]; t += w; h[0] = t
    h[1] *= w
    v = h[:, 1:]
    v *= 3.0  # an indexed view: h takes the history
    return (h * h).sum()


def _buffer_filled_by_rows(m, x, w):
    buf = m.zeros(2, 3)
    buf[0] = x[1] * w
    buf[1] += w
    return buf.exp().sum() + x.sum()


def _used_before_the_write(m, x, w):
    h = x * 2.0
    a = h * 3.0  # reads h before the write: its gradient goes to h's old history
    h[0] = 5.0
    return (a + h * w).sum()


def _view_read_after_the_base_changed(m, x, w):
    h = x * 2.0
    r = h[1]  # made before: it views h's new value once h changes
    h[1] *= w
    return (h * h).sum() + (r * 3.0).sum()


def _nested_index(m, x, w):
    h = x * 1.0
    h[1][1:] *= w[:2]
    return (h * h).sum()


@pytest.mark.parametrize("prog", [_rows_and_cols, _buffer_filled_by_rows, _used_before_the_write,
                                  _view_read_after_the_base_changed, _nested_index],
                         ids=lambda f: f.__name__.strip("_"))
def test_inplace_through_indexed_views_gives_torchs_gradients(dev, prog):
    """In-place ops on views made by indexing, and tensors read before an in-place op:
    the loss and the gradients of x and w are torch's. (Before, an op that read h before
    `h[0] = 5` sent its gradient through the setitem, and `h[0] += w` lost x's row.)"""
    _program_against_torch(dev, prog, 14)


def _program_against_torch(dev, prog, seed):
    """prog(m, x, w) -> a loss, run on dl and torch from the same x (2, 3) and w (3,): the
    loss and both gradients agree."""
    x, tx = _pair((2, 3), seed, dev, grad=True)
    w, tw = _pair((3,), seed + 1, dev, grad=True)
    loss, tloss = prog(dl, x, w), prog(torch, tx, tw)
    loss.backward()
    tloss.backward()
    close(loss, tloss, rtol=1e-5, atol=1e-5)
    close(x.grad, tx.grad, rtol=1e-5, atol=1e-5)
    assert (w.grad is None) == (tw.grad is None)
    if tw.grad is not None:
        close(w.grad, tw.grad, rtol=1e-5, atol=1e-5)


def _transpose_written(m, x, w):
    h = x * 2.0
    h.T.mul_(w[:2])  # a write through a transpose: h takes the history
    return (h * h).sum()


def _reshape_written(m, x, w):
    h = x * 2.0
    h.reshape(-1).mul_(3.0)
    h.view(3, 2)[1:].add_(w[:2])
    return (h * w).sum()


def _older_views_regenerated(m, x, w):
    h = x * 1.0
    v, u = h.view(-1), h.unsqueeze(0)  # made before the write: they view h's new value
    h.t().mul_(w[:2])
    return (v * v).sum() + (u * 3.0).sum() + (h.squeeze() * w).sum()


def _view_of_a_view(m, x, w):
    h = x + 1.0
    v = h.t()
    v.unsqueeze(1).mul_(3.0)  # through two views: v and h both take the history
    return (v.exp()).sum() + (h * w).sum()


def _detached_alias_written(m, x, w):
    h = x * 2.0
    h.detach().add_(1.0)  # no view: h keeps its history, as torch's, with the new values
    return (h * w).sum()


def _stale_view_written(m, x, w):
    h = x * 2.0
    r, v = h[0], h.view(3, 2)
    h.mul_(3.0)
    r.mul_(2.0)  # r and v were made before h changed: the writes continue h's new history
    v.add_(w[:2])
    return (h * h).sum()


@pytest.mark.parametrize("prog", [_transpose_written, _reshape_written, _older_views_regenerated,
                                  _view_of_a_view, _detached_alias_written, _stale_view_written],
                         ids=lambda f: f.__name__.strip("_"))
def test_inplace_through_shape_views_gives_torchs_gradients(dev, prog):
    """In-place ops through views made by shape ops (reshape, view, t, T, unsqueeze,
    squeeze) under autograd: the loss and the gradients are torch's. (Before, the base's
    next use was refused, as dl rebased only views made by indexing.)"""
    _program_against_torch(dev, prog, 16)


def _views_of_a_base_without_history(m, x, w):
    buf = m.zeros(2, 3)
    r, c, v = buf[1], buf[:, 2], buf.view(3, 2)  # made while buf had no history
    cc = c.unsqueeze(0)  # a view of such a view
    buf.add_(x * w)  # buf requires grad now: so do they, viewing its new value
    return (r * 3.0).sum() + (c * c).sum() + v.exp().sum() + (cc * w[0]).sum()


def _base_given_history_through_another_view(m, x, w):
    buf = m.ones(2, 3)
    t, row = buf.t(), buf[0]
    row.mul_(w)  # buf takes the history through row, t views it
    return (t * t).sum() + (buf * x).sum()


def _select_of_a_row_added_in_place(m, x, w):
    h = m.ones(2, 3)
    v = h.select(1, 2)  # fuzzer seed 2095: v's part of the loss was lost
    h.add_(w)
    return (v * 2.0).sum() + (x * 1.0).sum()


@pytest.mark.parametrize("prog", [_views_of_a_base_without_history,
                                  _base_given_history_through_another_view,
                                  _select_of_a_row_added_in_place],
                         ids=lambda f: f.__name__.strip("_"))
def test_views_made_before_their_base_had_history(dev, prog):
    """Views made while their base required no grad, the base then written in place by a
    value that requires grad: the views require grad too, their gradients torch's. (Before,
    the views kept no history: a loss through one alone raised at backward, and beside
    another term its gradient was silently left out.)"""
    _program_against_torch(dev, prog, 20)


def test_a_view_reports_its_regenerated_history(dev):
    """`requires_grad`, `is_leaf` and `grad_fn` of a view whose base was given a history
    in place are torch's, read directly (under no_grad too)."""
    w, tw = _pair((3,), 22, dev, grad=True)
    flags = []
    for m, ww in ((torch, tw), (dl, w)):
        base = m.zeros(2, 3, dtype=m.float64 if m is torch else m.float32)
        v, u = base[0], base.reshape(6)
        before = (v.requires_grad, v.is_leaf)
        base.add_(ww)
        with m.no_grad():
            now = (v.requires_grad, v.is_leaf, v.grad_fn is None)
        flags.append((before, now, u.grad_fn is None, u.requires_grad))
    assert flags[0] == flags[1] == (((False, True), (True, False, False), False, True))


def test_detached_alias_write_under_a_saved_value_is_refused(dev):
    """A write through a detached alias of a value a backward needs: torch's error at
    backward, not a gradient of the new values."""
    x, _ = _pair((2, 3), 18, dev, grad=True)
    h = x.exp()
    y = (h * 3.0).sum()
    h.detach().mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward()


@pytest.mark.parametrize("write", ["copy_", "fill_", "add_", "setitem"])
def test_writes_into_an_expanded_view_are_refused(dev, write):
    """Several elements of an expanded view are one memory location: torch refuses an
    in-place write of values that differ there, and so does dl (before, the last of the
    racing writes won); one value written everywhere is allowed by both."""
    calls = {"copy_": lambda v, m: v.copy_(m.ones(2, 3)),
             "fill_": lambda v, m: v.fill_(1.0),
             "add_": lambda v, m: v.add_(1.0),
             "setitem": lambda v, m: v.__setitem__(0, 2.0)}
    for m in (torch, dl):
        x = m.zeros(3)
        if write in ("fill_", "setitem"):
            calls[write](x.expand(2, 3), m)
            assert float(x.sum()) == {"fill_": 3.0, "setitem": 6.0}[write]
            continue
        with pytest.raises(RuntimeError):
            calls[write](x.expand(2, 3), m)
        np.testing.assert_array_equal(x.numpy(), np.zeros(3, np.float32))


@pytest.mark.parametrize("other", [None, "text", (1, 2)])
def test_equality_with_a_non_number_is_pythons_answer(other):
    """`t == None` is False and `t != None` True, as in torch (its operators give Python's
    identity answer for operands that are not numbers); `None in [t]` works."""
    t, tt = dl.tensor(np.ones(3, np.float32)), torch.ones(3)
    assert (t == other) is (tt == other) is False
    assert (t != other) is (tt != other) is True
    assert t in [other, t] and other not in [t]
    close(t == 1.0, tt == 1.0)


@pytest.mark.parametrize("act", ["relu", "silu", "leaky_relu", "elu", "dropout_eval"])
def test_inplace_activation_modules_write_their_input(dev, act):
    """nn.ReLU(inplace=True) and its kin, as torchvision writes them: the module returns its
    input, written in place, also when the return value is dropped; values and gradients
    are torch's (the input is an intermediate of a graph that requires grad)."""
    mods = {"relu": lambda m: m.ReLU(inplace=True), "silu": lambda m: m.SiLU(inplace=True),
            "leaky_relu": lambda m: m.LeakyReLU(0.2, inplace=True),
            "elu": lambda m: m.ELU(0.7, inplace=True),
            "dropout_eval": lambda m: m.Dropout(0.3, inplace=True).eval()}
    x, tx = _pair((3, 5), 17, dev, grad=True)
    for m, a in ((nn, x), (torch.nn, tx)):
        h = a * 1.5
        alias = h
        r = mods[act](m)(h)
        assert r is alias
        mods[act](m)(h * 1.0)  # the result dropped: nothing else changes
        (h * h).sum().backward()
    close(x.grad, tx.grad, rtol=1e-5, atol=1e-6)
    t = dl.tensor(np.array([-1.0, 2.0], np.float32), device=dev)
    F.relu_(t)
    np.testing.assert_array_equal(t.numpy(), [0.0, 2.0])


def test_inplace_dropout_in_training_writes_its_input(dev):
    """F.dropout(x, p, True, inplace=True): x holds the dropped, rescaled values (each
    element 0 or x / (1 - p)) and is returned; the 4th positional argument is torch's
    inplace, not the generator."""
    a = np.random.default_rng(18).uniform(1, 2, (64, 64)).astype(np.float32)
    x = dl.tensor(a, device=dev)
    r = F.dropout(x, 0.25, True, True)
    assert r is x
    got = x.numpy()
    kept = got != 0
    np.testing.assert_allclose(got[kept], a[kept] / 0.75, rtol=1e-6)
    assert 0.15 < 1 - kept.mean() < 0.35


def test_value_free_inplace_ops_under_autograd_are_one_kernel(dev):
    """relu_, add_ and mul_ by a scalar under autograd read and write x in one kernel (their
    gradients need no copy of x's old value: relu's reads its output, which is x's storage
    after the write); exp_ keeps a copy first. Gradients are torch's either way."""
    a = np.random.default_rng(19).uniform(-1, 1, (16, 16)).astype(np.float32)
    for name, call, kernels in (("relu_", lambda h: h.relu_(), 1),
                                ("add_", lambda h: h.add_(1.0), 1),
                                ("mul_", lambda h: h.mul_(-2.0), 1),
                                ("exp_", lambda h: h.exp_(), 2)):
        x = dl.tensor(a, device=dev, requires_grad=True)
        tx = torch.tensor(a.astype(np.float64), requires_grad=True)
        h = (x * 3.0)._materialise()
        with dl.count_kernels() as c:
            call(h)
        assert c.launches == kernels, (name, c.launches)
        th = tx * 3.0
        call(th)
        (h * h).sum().backward()
        (th * th).sum().backward()
        close(x.grad, tx.grad, rtol=1e-5, atol=1e-5)


def test_batchnorm_running_stats_update_keeps_earlier_lazy_reads(dev):
    """BatchNorm's training forward writes running_mean/var in its statistics kernel: a
    lazy value of them made before (a clone, a product) keeps the old statistics, as in
    torch; the new ones are torch's."""
    a = np.random.default_rng(20).uniform(-1, 3, (6, 4, 3, 3)).astype(np.float32)
    bn, tbn = nn.BatchNorm2d(4).to(dev), torch.nn.BatchNorm2d(4).double()
    for _ in range(2):
        olds = (bn.running_mean.clone(), bn.running_var * 1.0, bn.num_batches_tracked + 0)
        tolds = (tbn.running_mean.clone(), tbn.running_var * 1.0, tbn.num_batches_tracked + 0)
        bn(dl.tensor(a, device=dev))
        tbn(torch.tensor(a.astype(np.float64)))
        for o, to in zip(olds, tolds, strict=True):
            close(o, to)
        close(bn.running_mean, tbn.running_mean)
        close(bn.running_var, tbn.running_var)
        assert bn.num_batches_tracked.item() == tbn.num_batches_tracked.item()


# each repeats one in-place write (the same shapes: a dispatch plan serves the later ones)
REPEATED = {
    "add_scalar": lambda t, o: t.add_(1.0),
    "mul_self": lambda t, o: t.mul_(t),  # the written memory is also the operand
    "add_other": lambda t, o: t.add_(o),
    "sub_broadcast": lambda t, o: t.sub_(o[0]),
    "view_write": lambda t, o: t[1:].mul_(0.5),  # an offset view of t
    "transposed": lambda t, o: t.T.add_(o.T),
    "copy_flipped": lambda t, o: t.copy_(o.flip(0)),
    "clamp_": lambda t, o: t.clamp_(-1.0, 1.0),
}


@pytest.mark.parametrize("name", sorted(REPEATED))
def test_repeated_inplace_writes_stay_right(dev, name):
    """An in-place write repeated on fresh tensors of one shape (the later writes replay
    a dispatch plan keyed on the write's graph and the written view) and on the same
    tensor: torch's values at every step, the other operand untouched."""
    fn = REPEATED[name]
    for seed in range(6):
        t, tt = _pair((4, 4), seed, dev)
        o, to = _pair((4, 4), seed + 50, dev)
        fn(t, o)
        fn(tt, to)
        close(t, tt, rtol=1e-5, atol=1e-5)
        close(o, to)
    t, tt = _pair((4, 4), 60, dev)
    o, to = _pair((4, 4), 61, dev)
    for _ in range(6):
        fn(t, o)
        fn(tt, to)
        close(t, tt, rtol=1e-5, atol=1e-5)


def test_writes_differing_only_in_the_written_view_stay_apart(dev):
    """Writes with one graph into views that differ only in offset or strides (rows 1..3
    against rows 0..2, a transposed view): each lands where its view says, at every
    repetition (a replay keyed without the written view would write the first's place)."""
    views = (lambda t: t[1:], lambda t: t[:3], lambda t: t.T[:3], lambda t: t[:, 1:].T)
    t, tt = _pair((4, 4), 70, dev)
    o, to = _pair((3, 4), 71, dev)
    for _ in range(5):
        for k, view in enumerate(views):
            view(t).fill_(-1.0)  # one value: the graph and its scalars are the same
            view(tt).fill_(-1.0)
            close(t, tt)
            view(t).add_(o if k < 3 else o.T[:, :3].T)
            view(tt).add_(to if k < 3 else to.T[:, :3].T)
            close(t, tt, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "SGD", "RMSprop", "Adagrad"])
def test_optimiser_state_is_keyed_by_parameter_and_read_before_a_step(dev, name):
    """`opt.state[p]` is the parameter's state, as in torch (it was keyed by id(p):
    `opt.state[p]` raised an error from comparing tensors), with torch's values; a lazy value
    of a moment made before `opt.step()` keeps the moment of before (the step writes it in
    place)."""
    lin = nn.Linear(3, 2).to(dev)
    tlin = torch.nn.Linear(3, 2).double()
    tlin.load_state_dict({k: torch.tensor(v.numpy().astype(np.float64))
                          for k, v in lin.state_dict().items()})
    kw = {"lr": 0.1, "momentum": 0.9} if name in ("SGD", "RMSprop") else {"lr": 0.1}
    opt = getattr(dl.optim, name)(lin.parameters(), **kw)
    topt = getattr(torch.optim, name)(tlin.parameters(), **kw)
    x, tx = _pair((4, 3), 21, dev)
    for i in range(3):
        lin(x).pow(2).sum().backward()
        tlin(tx).pow(2).sum().backward()
        st, tst = opt.state.get(lin.weight, {}), topt.state.get(tlin.weight, {})
        if i:  # (torch's Adagrad makes its state before the first step, ours at it)
            assert sorted(st) == sorted(tst)
        moments = [k for k, v in tst.items() if torch.is_tensor(v) and v.shape == (2, 3)]
        olds = [(st[k] * 1.0, tst[k] * 1.0) for k in moments if k in st]
        opt.step()
        topt.step()
        for old, told in olds:
            close(old, told, rtol=1e-4, atol=1e-5)
        for k in moments:
            close(opt.state[lin.weight][k], topt.state[tlin.weight][k], rtol=1e-4, atol=1e-5)
        close(lin.weight, tlin.weight, rtol=1e-4, atol=1e-5)
        opt.zero_grad()
        topt.zero_grad()
    assert olds  # the moments were read before the last step


@pytest.mark.parametrize("owner", ["optimizer", "module"])
def test_zero_grad_without_none_zeroes_in_place(dev, owner):
    """zero_grad(set_to_none=False) leaves `.grad` a tensor of zeros, the same object a
    reference taken before holds, as torch's; the next backward gives torch's gradients."""
    lin = nn.Linear(3, 2).to(dev)
    tlin = torch.nn.Linear(3, 2).double()
    tlin.load_state_dict({k: torch.tensor(v.numpy().astype(np.float64))
                          for k, v in lin.state_dict().items()})
    opt, topt = dl.optim.SGD(lin.parameters(), lr=0.1), torch.optim.SGD(tlin.parameters(),
                                                                        lr=0.1)
    x, tx = _pair((4, 3), 22, dev)
    for _ in range(2):
        lin(x).pow(2).sum().backward()
        tlin(tx).pow(2).sum().backward()
        held, theld = lin.weight.grad, tlin.weight.grad
        (opt if owner == "optimizer" else lin).zero_grad(set_to_none=False)
        (topt if owner == "optimizer" else tlin).zero_grad(set_to_none=False)
        assert lin.weight.grad is held and tlin.weight.grad is theld
        close(held, theld)
        close(lin.bias.grad, tlin.bias.grad)
    lin(x).pow(2).sum().backward()
    tlin(tx).pow(2).sum().backward()
    close(lin.weight.grad, tlin.weight.grad, rtol=1e-5, atol=1e-6)
    lin.zero_grad()
    tlin.zero_grad()
    assert lin.weight.grad is None and tlin.weight.grad is None


# a lazy x (an elementwise value not yet computed) and y = x.detach(): one value in one
# storage, as a detached tensor and its source are in torch
DETACHED = {
    "write_source": lambda m, a: _detached(m, a, lambda x, y: x.add_(1.0)),
    "write_detached": lambda m, a: _detached(m, a, lambda x, y: y.add_(1.0)),
    "source_input_changes": lambda m, a: _detached(m, a, lambda x, y: (x.tolist(),
                                                                       a.mul_(3.0))),
    "reduce_after_input_changes": lambda m, a: _detached(
        m, a, lambda x, y: (x.tolist(), a.mul_(3.0)), lambda x, y: y.sum(0)),
    "copy_after_input_changes": lambda m, a: _detached(
        m, a, lambda x, y: (x.tolist(), a.mul_(3.0)),
        lambda x, y: m.zeros(4, 3, dtype=x.dtype).copy_(y)),
    "graph_over_detached": lambda m, a: _detached(
        m, a, lambda x, y: None, lambda x, y: (y * 3.0, x.mul_(10.0))[0]),
}


def _detached(m, a, act, read=lambda x, y: y):
    x = a * 2.0 + 1.0
    y = x.detach()
    act(x, y)
    return x, read(x, y)


@pytest.mark.parametrize("case", sorted(DETACHED))
def test_a_detached_lazy_value_is_an_alias_of_its_source(dev, case):
    """y = x.detach() of a lazy x shares x's storage however the two are computed: a write
    to either is seen by both, and y, computed after x and after x's inputs changed, is x's
    value (it was computed again from the changed inputs: 3x the value)."""
    a, ta = _pair((4, 3), 23, dev)
    x, y = DETACHED[case](dl, a)
    tx, ty = DETACHED[case](torch, ta)
    close(x, tx)
    close(y, ty)


# in-place ops reading the storage they write (torch refuses these under autograd; dl
# computes them as the out-of-place program, on the right): once the other operand was read
# after the write (y.mul_(y): the gradient 2y + y^2)
_SELF_READS = [
    ("y.mul_(y)", "y = y * y"),
    ("y.mul_(y.detach())", "y = y * y.detach()"),
    ("y.pow_(y)", "y = y ** y"),
    ("y.atan2_(y)", "y = torch.atan2(y, y)"),
    ("y.hypot_(y)", "y = torch.hypot(y, y)"),
    ("y.div_(y.t().t())", "y = y / y"),
    ("y[1:].mul_(y[:2].detach())", "y = torch.cat([y[:1], y[1:] * y[:2].detach()])"),
    ("w = y * 3; y.div_(w); y.pow_(2)", "w = y * 3; y = (y / w) ** 2"),
]


@pytest.mark.parametrize("prog, ref", _SELF_READS, ids=[p for p, _ in _SELF_READS])
def test_inplace_op_reading_its_own_storage_gives_the_out_of_place_gradient(dev, prog, ref):
    x, tx = _pair((3,), 31, dev, grad=True)
    env = {"y": x * x + 0.5, "torch": dl}
    exec(prog, env)
    tenv = {"y": tx * tx + 0.5, "torch": torch}
    exec(ref, tenv)
    close(env["y"], tenv["y"], rtol=1e-5, atol=1e-6)
    (env["y"] * env["y"]).sum().backward()
    (tenv["y"] * tenv["y"]).sum().backward()
    close(x.grad, tx.grad, rtol=1e-4, atol=1e-5)

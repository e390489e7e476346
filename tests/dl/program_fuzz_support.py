"""Differential fuzzing of dl programs against PyTorch (support for test_fuzz_programs.py).

A program is a list of steps over a pool of live tensors. It starts from 2-4 random leaves
(ranks 0-4, sizes 0-5, float16/32/64, int32/64 or bool, some float ones requiring grad);
each step applies one op of OPS to tensors of the pool and appends its result (or writes in
place). The program is generated against torch in the leaves' own dtypes (the oracle for
what is valid, for shapes and for dtypes): a step torch refuses is kept in the program as
"rejected" and left out on every side (an out-of-place one is still tried on dl: dl
accepting what torch refuses is a soft finding). The program is then replayed on torch with
every float promoted to float64 (the value reference) and on dl, on each device asked for;
values are compared at "read" steps (`.numpy()` / `.item()`), optionally after every step,
and at the end; shapes and dtypes after every step; then the leaves' gradients after one
or two backward calls (the second with the first's graph retained: accumulation).

`run_program(seed, devices)` returns a list of findings (strings); [] means dl agrees.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np
import torch

import dl

FLOATS = ("float16", "float32", "float64")
INTS = ("int32", "int64")
TORCH_DT = {"float16": torch.float16, "float32": torch.float32, "float64": torch.float64,
            "int32": torch.int32, "int64": torch.int64, "bool": torch.bool}
DL_DT = {"float16": dl.float16, "float32": dl.float32, "float64": dl.float64,
         "int32": dl.int32, "int64": dl.int64, "bool": dl.bool_}
# (rtol, atol) of a dl value against torch's float64 value, by dl's dtype
LOOSE = [False]
TOL = {"float16": (2e-2, 2e-2), "float32": (2e-4, 2e-4), "float64": (1e-6, 1e-6)}


def dtname(t) -> str:
    return str(t.dtype).split(".")[-1]


def is_float(t) -> bool:
    return dtname(t) in FLOATS


class Backend:
    """The module a program runs with: dl on a device, or torch (f64=True: every float
    promoted to float64 and the default dtype float64)."""

    def __init__(self, m, dev=None, f64=False):
        self.m, self.dev, self.f64 = m, dev, f64
        self.F = m.nn.functional

    def tensor(self, a: np.ndarray, requires_grad=False):
        if self.m is dl:
            return dl.tensor(a, device=self.dev, requires_grad=requires_grad)
        t = torch.from_numpy(np.array(a))
        if self.f64 and t.is_floating_point():
            t = t.double()
        return t.requires_grad_(requires_grad)

    def idx(self, a):
        return self.tensor(np.asarray(a, np.int64))

    def dtype(self, name):
        if self.m is dl:
            return DL_DT[name]
        if self.f64 and name in FLOATS:
            return torch.float64
        return TORCH_DT[name]


# ---- the op table -----------------------------------------------------------------------
# each op: name -> Op(fn(B, ts, p), arity, gen(rng, ts) -> params or None, inplace, kind)
# fn returns the new tensor (or None for an in-place op); ts are the operands, p the
# params gen drew from the torch operands' shapes and dtypes.

@dataclass
class Op:
    fn: object
    arity: int = 1
    gen: object = None
    inplace: bool = False
    read: bool = False


OPS: dict[str, Op] = {}


def op(name, arity=1, gen=None, inplace=False, read=False):
    def deco(fn):
        OPS[name] = Op(fn, arity, gen, inplace, read)
        return fn
    return deco


def _any(rng, ts):
    return ()


def _floats(rng, ts):
    return () if all(is_float(t) for t in ts) else None


def _dim(rng, ts):
    t = ts[0]
    return (rng.randrange(-t.ndim, t.ndim),) if t.ndim else None


def _dims_keep(rng, ts):
    t = ts[0]
    if t.ndim == 0:
        return (None, rng.random() < 0.5)
    k = rng.randint(1, t.ndim)
    dims = tuple(sorted(rng.sample(range(t.ndim), k)))
    if rng.random() < 0.3:
        dims = None
    elif len(dims) == 1 and rng.random() < 0.5:
        dims = dims[0]
    return (dims, rng.random() < 0.5)


SCAL = (2.0, -1.5, 0.5, 3, -2, 0.0, True)


def _scalar(rng, ts):
    return (rng.choice(SCAL),)


def _unary(name, f, need_float=False):
    op(name, gen=_floats if need_float else _any)(lambda B, ts, p: f(B, ts[0]))


# elementwise unary (domains made safe where the op needs it)
_unary("neg", lambda B, x: -x)
_unary("abs", lambda B, x: x.abs())
_unary("exp", lambda B, x: (x * 0.5).exp(), True)
_unary("log", lambda B, x: (x.abs() + 0.5).log(), True)
_unary("sqrt", lambda B, x: x.abs().sqrt(), True)
_unary("rsqrt", lambda B, x: (x.abs() + 0.25).rsqrt(), True)
_unary("sigmoid", lambda B, x: x.sigmoid(), True)
_unary("tanh", lambda B, x: B.m.tanh(x), True)
_unary("relu", lambda B, x: x.relu())
_unary("sin", lambda B, x: x.sin(), True)
_unary("cos", lambda B, x: B.m.cos(x), True)
_unary("reciprocal", lambda B, x: (x.abs() + 0.5).reciprocal(), True)
_unary("square", lambda B, x: x.square())
_unary("floor", lambda B, x: (x * 1.3).floor(), True)
_unary("ceil", lambda B, x: x.ceil(), True)
_unary("sign", lambda B, x: x.sign())
_unary("log1p", lambda B, x: x.abs().log1p(), True)
_unary("gelu", lambda B, x: B.F.gelu(x), True)
_unary("silu", lambda B, x: B.F.silu(x), True)
_unary("softplus", lambda B, x: B.F.softplus(x), True)
_unary("leaky_relu", lambda B, x: B.F.leaky_relu(x, 0.1), True)
_unary("logical_not", lambda B, x: x.logical_not())
_unary("isfinite", lambda B, x: B.m.isfinite(x))
_unary("clone", lambda B, x: x.clone())
_unary("detach", lambda B, x: x.detach())


# scalar arithmetic (int scalars, float scalars and bools promote differently)
@op("add_s", gen=_scalar)
def _(B, ts, p):
    return ts[0] + p[0]


@op("rsub_s", gen=_scalar)
def _(B, ts, p):
    return p[0] - ts[0]


@op("mul_s", gen=_scalar)
def _(B, ts, p):
    return ts[0] * p[0]


@op("div_s", gen=lambda rng, ts: (rng.choice((2.0, -4, 0.5)),))
def _(B, ts, p):
    return ts[0] / p[0]


@op("pow_s", gen=lambda rng, ts: (rng.choice((2, 3, 0.5, 2.0)),) if is_float(ts[0]) else None)
def _(B, ts, p):
    x = ts[0].abs() + 0.25 if p[0] == 0.5 else ts[0]
    return x ** p[0]


@op("clamp", gen=lambda rng, ts: rng.choice(((-0.5, 0.5), (None, 0.25), (0.0, None), (-1, 1))))
def _(B, ts, p):
    return ts[0].clamp(p[0], p[1])


# binary elementwise (broadcasting)
def _bin(name, f, floats=False):
    op(name, 2, gen=_floats if floats else _any)(lambda B, ts, p: f(B, ts[0], ts[1]))


_bin("add", lambda B, x, y: x + y)
_bin("sub", lambda B, x, y: x - y)
_bin("mul", lambda B, x, y: x * y)
_bin("div", lambda B, x, y: x / (y.abs() + 0.5), True)
_bin("truediv_any", lambda B, x, y: x / (y * y + 1))
_bin("add_alpha", lambda B, x, y: B.m.add(x, y, alpha=2))
_bin("maximum", lambda B, x, y: B.m.maximum(x, y))
_bin("minimum", lambda B, x, y: B.m.minimum(x, y))
_bin("pow", lambda B, x, y: (x.abs() + 0.5) ** (y * 0.5), True)
_bin("atan2", lambda B, x, y: B.m.atan2(x, y), True)
_bin("eq", lambda B, x, y: x == y)
_bin("lt", lambda B, x, y: x < y)
_bin("ge", lambda B, x, y: x >= y)
_bin("ne", lambda B, x, y: x != y)
_bin("logical_and", lambda B, x, y: B.m.logical_and(x, y))
_bin("logical_or", lambda B, x, y: x.logical_or(y))
_bin("logical_xor", lambda B, x, y: x.logical_xor(y))
_bin("where", lambda B, x, y: B.m.where(x > 0, x, y))
_bin("where_s", lambda B, x, y: B.m.where(y < 0.5, x, 0.0))
_bin("lerp_like", lambda B, x, y: x * 0.25 + y * 0.75, True)
_bin("addcmul", lambda B, x, y: B.m.addcmul(x, x, y, value=0.5), True)


# reductions
def _red(name, f, gen=_dims_keep, need_float=False, nonempty=False):
    def g(rng, ts):
        if need_float and not is_float(ts[0]):
            return None
        if nonempty and ts[0].numel() == 0:
            return None
        return gen(rng, ts)
    op(name, gen=g)(f)


def _kw(p):
    return {} if p[0] is None else {"dim": p[0], "keepdim": p[1]}


_red("sum", lambda B, ts, p: ts[0].sum(**_kw(p)))
_red("mean", lambda B, ts, p: ts[0].mean(**_kw(p)), need_float=True)
_red("amax", lambda B, ts, p: ts[0].amax(**({} if p[0] is None else _kw(p))), nonempty=True)
_red("amin", lambda B, ts, p: B.m.amin(ts[0], **({} if p[0] is None else _kw(p))),
     nonempty=True)
_red("prod", lambda B, ts, p: ts[0].prod() if p[0] is None or not isinstance(p[0], int)
     else ts[0].prod(p[0], keepdim=p[1]))
_red("var", lambda B, ts, p: ts[0].var(**_kw(p)), need_float=True)
_red("std", lambda B, ts, p: ts[0].std(**_kw(p), correction=0) if p[0] is not None
     else ts[0].std(), need_float=True)
_red("logsumexp", lambda B, ts, p: B.m.logsumexp(ts[0], dim=p[0], keepdim=p[1]),
     gen=lambda rng, ts: (rng.randrange(ts[0].ndim), rng.random() < 0.5) if ts[0].ndim
     else None, need_float=True)
_red("argmax", lambda B, ts, p: ts[0].argmax(dim=p[0], keepdim=p[1]),
     gen=lambda rng, ts: (rng.randrange(ts[0].ndim), rng.random() < 0.5) if ts[0].ndim
     else (None, False), nonempty=True)
_red("argmin", lambda B, ts, p: ts[0].argmin(dim=p[0]),
     gen=lambda rng, ts: (rng.randrange(ts[0].ndim) if ts[0].ndim else None,), nonempty=True)
_red("max_dim", lambda B, ts, p: ts[0].max(dim=p[0], keepdim=p[1])[0],
     gen=lambda rng, ts: (rng.randrange(ts[0].ndim), rng.random() < 0.5) if ts[0].ndim
     else None, nonempty=True)
_red("any", lambda B, ts, p: ts[0].any() if p[0] is None or not isinstance(p[0], int)
     else ts[0].any(dim=p[0], keepdim=p[1]))
_red("all", lambda B, ts, p: ts[0].all())


# softmax / cumsum along one dim
op("softmax", gen=lambda rng, ts: _dim(rng, ts) if is_float(ts[0]) else None)(
    lambda B, ts, p: B.F.softmax(ts[0], dim=p[0]))
op("log_softmax", gen=lambda rng, ts: _dim(rng, ts) if is_float(ts[0]) else None)(
    lambda B, ts, p: ts[0].log_softmax(p[0]))
op("cumsum", gen=_dim)(lambda B, ts, p: ts[0].cumsum(p[0]))
op("sort", gen=lambda rng, ts: (_dim(rng, ts) or (0,))[0:1] + (rng.random() < 0.5,)
   if ts[0].ndim else None)(
    lambda B, ts, p: ts[0].sort(dim=p[0], descending=p[1])[0])


@op("topk", gen=lambda rng, ts: (rng.randint(0, ts[0].shape[-1]), rng.random() < 0.5)
    if ts[0].ndim and is_float(ts[0]) else None)
def _(B, ts, p):
    return ts[0].topk(p[0], dim=-1, largest=p[1])[0]


# views and shape ops
def _perm(rng, ts):
    d = list(range(ts[0].ndim))
    rng.shuffle(d)
    return (tuple(d),)


op("permute", gen=_perm)(lambda B, ts, p: ts[0].permute(*p[0]))
op("transpose", gen=lambda rng, ts: (rng.randrange(ts[0].ndim), rng.randrange(ts[0].ndim))
   if ts[0].ndim else None)(lambda B, ts, p: ts[0].transpose(p[0], p[1]))
op("T", gen=lambda rng, ts: () if ts[0].ndim == 2 else None)(lambda B, ts, p: ts[0].T)
op("mT", gen=lambda rng, ts: () if ts[0].ndim >= 2 else None)(lambda B, ts, p: ts[0].mT)
op("unsqueeze", gen=lambda rng, ts: (rng.randrange(-ts[0].ndim - 1, ts[0].ndim + 1),))(
    lambda B, ts, p: ts[0].unsqueeze(p[0]))
op("squeeze", gen=lambda rng, ts: (rng.choice([None] + list(range(ts[0].ndim))),))(
    lambda B, ts, p: ts[0].squeeze() if p[0] is None else ts[0].squeeze(p[0]))
op("contiguous")(lambda B, ts, p: ts[0].contiguous())
op("flatten", gen=lambda rng, ts: tuple(sorted((rng.randrange(max(ts[0].ndim, 1)),
                                               rng.randrange(max(ts[0].ndim, 1))))))(
    lambda B, ts, p: ts[0].flatten(p[0], p[1]))


def _reshape_gen(rng, ts):
    n = ts[0].numel()
    if n == 0:
        return (rng.choice(((0,), (0, -1, 2)[:2], (-1, 0))),)
    divs = [d for d in range(1, n + 1) if n % d == 0]
    a = rng.choice(divs)
    shape = rng.choice(((n,), (a, n // a), (a, -1), (-1,), (1, a, n // a), (n // a, 1, a)))
    return (shape,)


op("reshape", gen=_reshape_gen)(lambda B, ts, p: ts[0].reshape(*p[0]))
op("view", gen=_reshape_gen)(lambda B, ts, p: ts[0].view(*p[0]))


@op("expand", gen=lambda rng, ts: (tuple(rng.choice((s, -1)) if s != 1 else rng.choice((1, 3, 0))
                                          for s in ts[0].shape), rng.random() < 0.3))
def _(B, ts, p):
    shape = ((2,) if p[1] else ()) + p[0]
    return ts[0].expand(*shape)


@op("narrow", gen=lambda rng, ts: (lambda d: (d, rng.randint(0, ts[0].shape[d]), None))(
    rng.randrange(ts[0].ndim)) if ts[0].ndim else None)
def _(B, ts, p):
    d, start, _n = p
    length = (ts[0].shape[d] - start) // 2
    return ts[0].narrow(d, start, length)


def _slice_gen(rng, ts):
    if not ts[0].ndim:
        return None
    sl = []
    for s in ts[0].shape[:rng.randint(1, ts[0].ndim)]:
        kind = rng.randrange(5)
        if kind == 0:
            sl.append(("i", rng.randrange(-s, s)) if s else ("s", None, None, None))
        elif kind == 1:
            sl.append(("s", rng.choice((None, 1, -2)), rng.choice((None, -1, 4)),
                       rng.choice((None, 2, 3))))
        elif kind == 2:
            sl.append(("N",))
        else:
            sl.append(("s", None, None, None))
    if rng.random() < 0.2:
        sl.insert(0, ("E",))
    return (tuple(sl),)


def _key(p):
    out = []
    for s in p:
        if s[0] == "i":
            out.append(s[1])
        elif s[0] == "N":
            out.append(None)
        elif s[0] == "E":
            out.append(Ellipsis)
        else:
            out.append(slice(s[1], s[2], s[3]))
    return tuple(out)


op("slice", gen=_slice_gen)(lambda B, ts, p: ts[0][_key(p[0])])
op("select", gen=lambda rng, ts: (lambda d: (d, rng.randrange(ts[0].shape[d])) if
                                  ts[0].shape[d] else None)(rng.randrange(ts[0].ndim))
   if ts[0].ndim else None)(lambda B, ts, p: ts[0][(slice(None),) * p[0] + (p[1],)])

# dtype conversions: the params record whether the conversion is a no-op in the program's
# own dtypes (it returns its input: an alias). The float64 reference turns every float
# conversion into a no-op; where the program's conversion copies, so does the reference
# (else an in-place write on the result reached its input there: a leaf requiring grad
# made torch raise on a valid program, and any other input was written through)
def _to(B, x, name, same):
    out = x.to(B.dtype(name))
    if B.f64 and B.m is torch and not same and out is x:
        out = out.clone()
    return out


def _to_gen(n):
    def gen(rng, ts):
        x = ts[0]
        if n in INTS and is_float(x):  # nan, inf or out of range to an integer: undefined
            v = x.detach().double()     # in C (torch's value is the CPU's: INT_MIN on x86)
            if not bool((v.isfinite() & (v.abs() < 2.0 ** (31 if n == "int32" else 63)))
                        .all()):
                return None
        return (n, dtname(x) == n)
    return gen


for _n in ("float16", "float32", "float64", "int32", "int64", "bool"):
    op("to_" + _n, gen=_to_gen(_n))(lambda B, ts, p: _to(B, ts[0], p[0], p[1]))
op("float", gen=lambda rng, ts: (dtname(ts[0]) == "float32",))(
    lambda B, ts, p: _to(B, ts[0], "float32", p[0]))


# matmul family
def _mm_gen(rng, ts):
    a, b = ts
    if not (is_float(a) and is_float(b)) or a.ndim == 0 or b.ndim == 0:
        return None
    return (rng.random() < 0.5,)


@op("matmul", 2, gen=_mm_gen)
def _(B, ts, p):
    a, b = ts
    if p[0] and b.ndim >= 2:
        b = b.mT
    return a @ b


op("bmm", 2, gen=lambda rng, ts: () if ts[0].ndim == 3 and ts[1].ndim == 3 and is_float(ts[0])
   else None)(lambda B, ts, p: B.m.bmm(ts[0], ts[1].transpose(1, 2)))


@op("linear", 2, gen=lambda rng, ts: (rng.random() < 0.5,) if ts[1].ndim == 2 and ts[0].ndim
    and is_float(ts[0]) else None)
def _(B, ts, p):
    x, w = ts
    bias = w[:, 0] * 0.5 if p[0] else None
    return B.F.linear(x, w, bias)


# joins
op("cat", 2, gen=lambda rng, ts: (rng.randrange(max(ts[0].ndim, 1)),))(
    lambda B, ts, p: B.m.cat([ts[0], ts[1]], dim=p[0]))
op("stack", 2, gen=lambda rng, ts: (rng.randrange(ts[0].ndim + 1),))(
    lambda B, ts, p: B.m.stack([ts[0], ts[1]], dim=p[0]))


# indexing with index tensors and masks
def _idx_gen(rng, ts):
    t = ts[0]
    if not t.ndim or not t.shape[0]:
        return None
    return (tuple(rng.randrange(-t.shape[0], t.shape[0]) for _ in range(rng.randint(0, 4))),)


op("index_tensor", gen=_idx_gen)(lambda B, ts, p: ts[0][B.idx(p[0])])
op("index_select", gen=_idx_gen)(
    lambda B, ts, p: ts[0].index_select(0, B.idx([i % ts[0].shape[0] for i in p[0]])))


@op("gather", gen=lambda rng, ts: (rng.randrange(ts[0].ndim),) if ts[0].ndim and
    ts[0].numel() else None)
def _(B, ts, p):
    t, d = ts[0], p[0]
    n = t.shape[d]
    ix = (np.arange(int(np.prod(t.shape))).reshape(tuple(t.shape)) * 7 + 3) % n
    return t.gather(d, B.idx(ix))


# (the mask broadcast to the input's shape: dl refuses a mask that widens the input)
op("masked_fill", 2, gen=lambda rng, ts: (rng.choice((0.0, -1.5, 7)),)
   if _bcast_to(ts[1], ts[0]) else None)(
    lambda B, ts, p: ts[0].masked_fill(ts[1] > 0, p[0]))
op("masked_select", 1, gen=lambda rng, ts: () if ts[0].ndim else None)(
    lambda B, ts, p: ts[0][ts[0] > 0])


# in-place ops on tensors and on views of them (torch refuses writing a leaf needing grad)
def _ip_view(rng, ts):
    return (rng.choice(("self", "self", "tail", "T", "step", "row")),)


def _view_of(t, v):
    if v == "tail" and t.ndim:
        return t[1:]
    if v == "T" and t.ndim >= 2:
        return t.mT
    if v == "step" and t.ndim:
        return t[..., ::2]
    if v == "row" and t.ndim:
        return t[0]
    return t


def _ip(name, arity, f):
    def fn(B, ts, p):
        f(B, _view_of(ts[0], p[0]), *ts[1:])
    op(name, arity, gen=_ip_view, inplace=True)(fn)


_ip("add_", 2, lambda B, v, y: v.add_(y))
_ip("sub_", 2, lambda B, v, y: v.sub_(y, alpha=0.5))
_ip("mul_", 2, lambda B, v, y: v.mul_(y))
_ip("mul_s_", 1, lambda B, v: v.mul_(2))
_ip("add_s_", 1, lambda B, v: v.add_(1.5))
_ip("div_s_", 1, lambda B, v: v.div_(2.0))
_ip("clamp_", 1, lambda B, v: v.clamp_(-0.5, 0.75))
_ip("relu_", 1, lambda B, v: v.relu_())
_ip("neg_", 1, lambda B, v: v.neg_())
_ip("exp_", 1, lambda B, v: v.exp_())
_ip("fill_", 1, lambda B, v: v.fill_(0.25))
_ip("zero_", 1, lambda B, v: v.zero_())
_ip("copy_", 2, lambda B, v, y: v.copy_(_source(B, v, y)))
_ip("masked_fill_", 2, lambda B, v, y: v.masked_fill_(y < 0, -3.0))


@op("setitem", 1, gen=_slice_gen, inplace=True)
def _(B, ts, p):
    ts[0][_key(p[0])] = 1.25


def _source(B, dst, src):
    """The source of a copy into dst: on torch, a clone where src shares dst's storage.
    torch refuses most such copies ("clone() the tensor before performing the operation"),
    but an expanded source slips past its overlap check and is copied element by element
    over values already overwritten (`x[:] = x.select(1, 0)`: seed 7067); cloned, it means
    what dl and NumPy compute, the source read whole before the write."""
    if B.m is torch and isinstance(src, torch.Tensor) and \
            src.untyped_storage().data_ptr() == dst.untyped_storage().data_ptr():
        return src.clone()
    return src


@op("setitem_t", 2, gen=_slice_gen, inplace=True)
def _(B, ts, p):
    ts[0][_key(p[0])] = _source(B, ts[0], ts[1])


@op("index_put", 1, gen=_idx_gen, inplace=True)
def _(B, ts, p):
    ts[0][B.idx(p[0])] = -0.75


# reads: .numpy() / .item() at this point (values compared now); item feeds a scalar on
@op("numpy", read=True)
def _(B, ts, p):
    return None


@op("item", gen=lambda rng, ts: () if ts[0].numel() >= 1 else None, read=True)
def _(B, ts, p):
    x = ts[0].reshape(-1)[0].item()
    return ts[0] * 0.5 + x


# ---- program generation and replay ------------------------------------------------------
@dataclass
class Step:
    name: str
    args: tuple
    params: tuple
    ok: bool = True  # False: torch refused it
    err: str = ""


@dataclass
class Program:
    seed: int
    leaves: list  # (np array, requires_grad)
    steps: list = field(default_factory=list)
    check_every_step: bool = False
    backward: int = 1  # 0: none, 1: one, 2: two (retain_graph, accumulation)
    loss_weights: list = field(default_factory=list)

    def describe(self) -> str:
        lines = [f"# seed {self.seed}"]
        for i, (a, rg) in enumerate(self.leaves):
            lines.append(f"t{i} = tensor(shape={a.shape}, dtype={a.dtype}, requires_grad={rg})")
        for s in self.steps:
            if s.ok:
                lines.append(f"{s.name}{tuple(f't{a}' for a in s.args)} {s.params}")
        lines.append(f"backward x{self.backward}")
        return "\n".join(lines)


def _rand_shape(rng, base):
    if base is not None and rng.random() < 0.6:
        shape = list(base[rng.randint(0, min(2, len(base))):])
        for i in range(len(shape)):
            if rng.random() < 0.25:
                shape[i] = 1
        return tuple(shape)
    rank = rng.choice((0, 1, 2, 2, 3, 3, 4))
    return tuple(rng.choice((0, 1, 2, 3, 3, 4, 5)) if rng.random() < 0.08 else
                 rng.randint(1, 5) for _ in range(rank))


def _leaf(rng, shape):
    dt = rng.choice(("float32",) * 6 + ("float64", "float64", "float16", "int32", "int64",
                                          "bool"))
    nr = np.random.default_rng(rng.randrange(1 << 30))
    if dt in FLOATS:
        # multiples of 1/256 in (-2, 2): exact in float16, few ties
        a = (np.round(nr.uniform(-2, 2, shape) * 256) / 256).astype(dt)
    elif dt == "bool":
        a = nr.random(shape) < 0.5
    else:
        a = nr.integers(-4, 5, shape).astype(dt)
    rg = dt in ("float32", "float64") and rng.random() < 0.6
    return a, rg


def generate(seed: int, n_steps=None, ops=None) -> Program:
    """A program valid for torch (steps torch refuses are marked, not applied)."""
    rng = random.Random(seed)
    ops = ops or OPS
    names = sorted(ops)
    n_steps = n_steps or rng.randint(8, 12)
    base = None
    leaves = []
    for _ in range(rng.randint(2, 4)):
        shape = _rand_shape(rng, base)
        base = base or (shape if shape else None)
        leaves.append(_leaf(rng, shape))
    prog = Program(seed, leaves, check_every_step=rng.random() < 0.3,
                   backward=rng.choice((1, 1, 2, 0)))
    B = Backend(torch)
    pool = [B.tensor(a, rg) for a, rg in leaves]
    tries = 0
    while len([s for s in prog.steps if s.ok]) < n_steps and tries < n_steps * 20:
        tries += 1
        name = rng.choice(names)
        o = ops[name]
        first = rng.randrange(len(pool))
        args = [first]
        for _ in range(o.arity - 1):
            # prefer an operand broadcastable with the first
            cands = [j for j, u in enumerate(pool) if _bcast(pool[first], u)]
            args.append(rng.choice(cands) if cands and rng.random() < 0.85
                        else rng.randrange(len(pool)))
        ts = [pool[j] for j in args]
        p = o.gen(rng, ts) if o.gen else ()
        if p is None:
            continue
        step = Step(name, tuple(args), p)
        try:
            out = o.fn(B, ts, p)
        except Exception as e:  # torch refuses: the program would be invalid
            step.ok, step.err = False, f"{type(e).__name__}: {e}"[:200]
            prog.steps.append(step)
            continue
        prog.steps.append(step)
        if out is not None:
            pool.append(out)
    prog.loss_weights = [rng.choice((1.0, -0.5, 2.0, 0.0)) for _ in range(len(pool))]
    return prog


def _bcast_to(a, b):
    try:
        return tuple(torch.broadcast_shapes(a.shape, b.shape)) == tuple(b.shape)
    except RuntimeError:
        return False


def _bcast(a, b):
    try:
        torch.broadcast_shapes(a.shape, b.shape)
        return True
    except RuntimeError:
        return False


def _np(t):
    t = t.detach() if hasattr(t, "detach") else t
    if isinstance(t, torch.Tensor):
        return t.numpy() if t.dtype != torch.bfloat16 else t.float().numpy()
    return np.asarray(t.numpy())


def compare(label, g, w, wn, out: list):
    """g: the dl tensor; w: torch's float64 run's; wn: torch's in the native dtypes."""
    if tuple(g.shape) != tuple(wn.shape):
        out.append(f"{label}: shape dl {tuple(g.shape)} torch {tuple(wn.shape)}")
        return
    if dtname(g) != dtname(wn):
        out.append(f"{label}: dtype dl {dtname(g)} torch {dtname(wn)}")
        return
    gv = _np(g)
    if gv.shape != tuple(wn.shape):
        out.append(f"{label}: .numpy() shape {gv.shape} vs shape {tuple(wn.shape)}")
        return
    wv, wnv = _np(w), _np(wn)
    if dtname(g) in FLOATS:
        r, a = TOL["float16" if LOOSE[0] else dtname(g)]
        ok = any(np.allclose(gv.astype(np.float64), x.astype(np.float64), rtol=r, atol=a,
                             equal_nan=True) for x in (wv, wnv))
    else:
        ok = np.array_equal(gv, wnv)
    if not ok:
        out.append(f"{label}: values differ\n  dl    {gv.ravel()[:12].tolist()}\n"
                   f"  torch {wnv.ravel()[:12].tolist()}")


def _replay(prog: Program, B: Backend, ops, soft: list | None):
    """Runs prog on B: returns (pool, leaves, snapshots: list per check of (label, tensor
    copy)) — a snapshot is the values at a read, as numpy (dl's read through .numpy())."""
    leaves = [B.tensor(a, rg) for a, rg in prog.leaves]
    pool = list(leaves)
    snaps = []
    for k, s in enumerate(prog.steps):
        o = ops[s.name]
        ts = [pool[j] for j in s.args]
        if not s.ok:
            if soft is not None and not o.inplace and not o.read:
                try:
                    o.fn(B, ts, s.params)
                    soft.append(f"step {k} {s.name}: dl accepts what torch refuses "
                                f"({s.err})")
                except Exception:
                    pass
            continue
        out = o.fn(B, ts, s.params)
        if o.read:
            snaps.append((f"step {k} {s.name} read t{s.args[0]}", _snap(ts[0])))
        if out is not None:
            pool.append(out)
        if prog.check_every_step:
            snaps.append((f"after step {k} {s.name} t{len(pool) - 1}", _snap(pool[-1])))
        snaps.append((f"after step {k} {s.name} meta", [(tuple(t.shape), dtname(t))
                                                          for t in pool]))
    return leaves, pool, snaps


def _snap(t):
    return (tuple(t.shape), dtname(t), _np(t).copy())


def _backward(prog, leaves, pool):
    loss = None
    for t, wgt in zip(pool, prog.loss_weights, strict=False):
        if t.requires_grad and is_float(t) and wgt:
            s = (t * wgt).sum() if t.ndim else t * wgt
            s = (s * s) * 0.1 + s
            loss = s if loss is None else loss + s
    if loss is None:
        return None
    if prog.backward == 2:
        loss.backward(retain_graph=True)
        loss.backward()
    else:
        loss.backward()
    return [x.grad for x in leaves]


def run_program(seed: int, devices=("cpu",), ops=None, dl_ops=None, n_steps=None):
    """Findings for one program: list of strings (hard) and a list of soft findings.
    ops: the table (torch side and generation); dl_ops: dl's table (default the same)."""
    ops = ops or OPS
    dl_ops = dl_ops or ops
    prog = generate(seed, n_steps, ops)
    findings, soft = [], []
    # a float16 value anywhere carries its rounding into what it flows into
    LOOSE[0] = any(a.dtype == np.float16 for a, _ in prog.leaves) or any(
        s.ok and "float16" in s.name for s in prog.steps)
    ref = Backend(torch)
    wl, wp, wsnaps = _replay(prog, ref, ops, None)
    with _f64_default():
        fl, fp, fsnaps = _replay(prog, Backend(torch, f64=True), ops, None)
    want = want64 = None
    torch_bwd = False
    if prog.backward:
        try:
            want = _backward(prog, wl, wp)
            with _f64_default():
                want64 = _backward(prog, fl, fp)
            torch_bwd = want is not None
        except RuntimeError:
            pass  # torch refuses the backward (a saved value overwritten): dl may not
    for dev in devices:
        tag = f"[{dev}]"
        try:
            gl, gp, gsnaps = _replay(prog, Backend(dl, dev), dl_ops, soft)
        except Exception as e:
            findings.append(f"{tag} dl raised where torch did not: {type(e).__name__}: "
                            f"{str(e)[:300]}")
            continue
        for (lab, g), (_, w), (_, wn) in zip(gsnaps, fsnaps, wsnaps, strict=True):
            if lab.endswith("meta"):
                if g != wn:
                    findings.append(f"{tag} {lab}: dl {g} torch {wn}")
                    break
                continue
            _cmp_snap(f"{tag} {lab}", g, w, wn, findings)
        for i, (g, w, wn) in enumerate(zip(gp, fp, wp, strict=True)):
            try:
                compare(f"{tag} final t{i}", g, w, wn, findings)
            except Exception as e:
                findings.append(f"{tag} final t{i}: reading raised {type(e).__name__}: {e}")
        if findings or not torch_bwd:
            continue
        try:
            got = _backward(prog, gl, gp)
        except Exception as e:
            findings.append(f"{tag} backward: dl raised {type(e).__name__}: {str(e)[:300]}")
            continue
        if got is None:
            findings.append(f"{tag} backward: dl built no loss (no value requires grad)")
            continue
        for i, (g, w, wn) in enumerate(zip(got, want64, want, strict=True)):
            if (g is None) != (wn is None):
                findings.append(f"{tag} grad of leaf t{i}: dl {'None' if g is None else 'set'}"
                                f" torch {'None' if wn is None else 'set'}")
            elif g is not None:
                compare(f"{tag} grad of leaf t{i}", g, w, wn, findings)
    return prog, findings, soft


def _cmp_snap(lab, g, w, wn, out):
    gs, gd, gv = g
    ws, wd, wv = wn
    if (gs, gd) != (ws, wd):
        out.append(f"{lab}: dl {gs} {gd} torch {ws} {wd}")
        return
    if gd in FLOATS:
        r, a = TOL["float16" if LOOSE[0] else gd]
        ok = any(np.allclose(gv.astype(np.float64), x.astype(np.float64), rtol=r, atol=a,
                             equal_nan=True) for x in (w[2], wv))
    else:
        ok = np.array_equal(gv, wv)
    if not ok:
        out.append(f"{lab}: values differ\n  dl    {gv.ravel()[:12].tolist()}\n"
                   f"  torch {wv.ravel()[:12].tolist()}")


class _f64_default:
    def __enter__(self):
        self.prev = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)

    def __exit__(self, *a):
        torch.set_default_dtype(self.prev)


def dl_devices():
    """cpu, and the interpreter runtime where it starts."""
    devs = ["cpu"]
    try:
        dl.tensor(np.zeros(1, np.float32), device="interp").numpy()
        devs.append("interp")
    except Exception:
        pass
    return devs

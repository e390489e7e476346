"""Entries for the elementwise ops dl had before the op table (commit b41ee54): unary math,
activations, rounding, binary arithmetic and operators, comparisons, logical ops, where,
clamp and casts. Reductions, rows, linalg, shape and nn ops are in ops_core_*.py."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as TF

import dl

from .core import ALL, ALL_FLOATS, INTS, OpInfo, Sample, arr, barr, edge_values, ties

HALF = (dl.float16, dl.bfloat16)
FLOAT_IN = ALL  # float-valued ops that take integer and bool inputs (float32 results)
NO_BOOL = ALL_FLOATS + INTS


# the edge sample holds 1e30: WGSL promises sin/cos only on [-pi, pi] (lavapipe: sin(1e30)
# is -1, cos(1e30) 1)
_SHADER_TRIG = "WGSL/SPIR-V sin and cos are accurate on [-pi, pi] only (sin(1e30))"


def _edges(drop=()):
    """edge_values() without the values in drop (nan, inf: a narrower sample, see notes)."""
    e = edge_values()
    keep = np.ones(e.shape, bool)
    for v in drop:
        keep &= ~(np.isnan(e) if np.isnan(v) else e == v)
    return e[keep]


def _unary_samples(low=-2.0, high=2.0, edge=True, drop=()):
    def samples():
        ss = [Sample(arr((3, 5), 0, low, high)),
              Sample(arr((4, 6), 1, low, high), noncontig=True, desc="transposed view"),
              Sample(arr((0, 3)), desc="size 0"),
              Sample(arr((1, 1, 4), 2, low, high), desc="size-1 dims"),
              Sample(arr((), 3, low, high), desc="0-dim")]
        if edge:
            ss.insert(2, Sample(_edges(drop), grad=(), desc="inf, nan, -0.0, ties"))
        return ss
    return samples


def unary(name, fn=None, ref=None, dtypes=FLOAT_IN, low=-2.0, high=2.0, edge=True, drop=(),
          **kw):
    """An entry for a unary op called as dl.<name>(x) / torch.<name>(x)."""
    fn = fn or (lambda x: getattr(dl, name)(x))
    ref = ref or (lambda x: getattr(torch, name)(x))
    return OpInfo(name, op=fn, ref=ref, samples=_unary_samples(low, high, edge, drop),
                  dtypes=dtypes, **kw)


def _binary_samples(scalar=1.5, positive=False, edge=True, drop=()):
    lo = 0.25 if positive else -2.0

    def samples():
        ss = [Sample(arr((3, 5), 0, lo), arr((3, 5), 1, lo)),
              Sample(arr((4, 6), 2, lo), arr((4, 6), 3, lo), noncontig=True,
                     desc="transposed views"),
              Sample(arr((2, 1, 4), 4, lo), arr((3, 1), 5, lo), desc="broadcast both"),
              Sample(arr((0, 4)), arr((1, 4), 7, lo), desc="size 0"),
              Sample(arr((), 8, lo), arr((2, 3), 9, lo), desc="0-dim with 2-D")]
        if scalar is not None:
            ss.insert(3, Sample(arr((3, 4), 6, lo), scalar, desc="python scalar"))
        if edge:
            e = _edges(drop)
            ss.insert(3, Sample(e, e[::-1].copy(), grad=(), desc="edge values"))
        return ss
    return samples


def binary(name, fn=None, ref=None, dtypes=ALL, scalar=1.5, positive=False, edge=True,
           drop=(), **kw):
    fn = fn or (lambda a, b: getattr(dl, name)(a, b))
    ref = ref or (lambda a, b: getattr(torch, name)(a, b))
    return OpInfo(name, op=fn, ref=ref, samples=_binary_samples(scalar, positive, edge, drop),
                  dtypes=dtypes, **kw)


def _fn(mod, name):
    return lambda *a: getattr(mod, name)(*a)


def _method(name):
    return lambda x: getattr(x, name)()


def _cast_samples(dst):
    edges = [-0.0, 0.0, 0.5, -0.5, 1.5, 2.5, -2.7, 100.9, -100.9]
    if dst.is_float:
        edges += [1e30, -1e30, 65504.0, 70000.0, np.inf, -np.inf, np.nan, 1e-30]
    return [Sample(arr((3, 5), 0, -3, 3)), Sample(arr((4, 6), 1, -3, 3), noncontig=True),
            Sample(np.array(edges), grad=(), desc="range edges, -0.0, halves"),
            Sample(arr((0, 2)), desc="size 0")]


OPS = [
    # ---- unary math -----------------------------------------------------------------------
    unary("abs", dtypes=NO_BOOL, signed_zero=True),
    unary("neg", dtypes=NO_BOOL, signed_zero=True),
    unary("sqrt", low=0.1),
    unary("rsqrt", low=0.1),
    unary("exp"),
    unary("log", low=0.1),
    unary("log1p", low=-0.9),
    unary("sin", signed_zero=True, shader_edges=_SHADER_TRIG),
    unary("cos", shader_edges=_SHADER_TRIG),
    unary("tanh", signed_zero=True),
    unary("erf", signed_zero=True),
    unary("sigmoid"),
    unary("reciprocal", low=0.25, tol={dl.float16: (2e-3, 2e-3)}),
    unary("square", dtypes=ALL),
    unary("sign", dtypes=ALL, grad=False),
    unary("floor", dtypes=NO_BOOL, grad=False, signed_zero=True),
    unary("ceil", dtypes=NO_BOOL, grad=False, signed_zero=True),
    OpInfo("round", op=lambda x: dl.round(x), ref=lambda x: torch.round(x),
           samples=lambda: [Sample(np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -0.51]),
                                   desc="ties to even"),
                            *_unary_samples()()],
           dtypes=NO_BOOL, grad=False, signed_zero=True),
    unary("logical_not", dtypes=ALL, grad=False),
    unary("__invert__", fn=lambda x: ~(x != 0), ref=lambda x: ~(x != 0), dtypes=ALL,
          grad=False),
    unary("neg_op", fn=lambda x: -x, ref=lambda x: -x, dtypes=NO_BOOL, signed_zero=True),
    unary("abs_op", fn=lambda x: abs(x), ref=lambda x: abs(x), dtypes=NO_BOOL),
    # ---- activations --------------------------------------------------------------------
    unary("relu", dtypes=NO_BOOL, signed_zero=True),
    unary("softplus", fn=lambda x: dl.softplus(x), ref=lambda x: TF.softplus(x),
          dtypes=ALL_FLOATS, low=-30.0, high=30.0, grad_tol={dl.float64: (1e-8, 1e-10)},
          note="softplus's gradient above the threshold (x > 20) is sigmoid(x), PyTorch's 1 "
               "(1e-9 apart)"),
    unary("silu", fn=lambda x: dl.silu(x), ref=lambda x: TF.silu(x), dtypes=ALL_FLOATS),
    unary("gelu", fn=lambda x: dl.gelu(x), ref=lambda x: TF.gelu(x), dtypes=ALL_FLOATS,
          drop=(np.inf, 1e30), note="gelu(inf) is inf (PyTorch's CPU kernel gives nan)"),
    unary("gelu_tanh", fn=lambda x: dl.gelu(x, approximate="tanh"),
          ref=lambda x: TF.gelu(x, approximate="tanh"), dtypes=ALL_FLOATS, drop=(-np.inf,),
          note="gelu(x, approximate='tanh') at -inf: PyTorch gives nan (-inf * 0), the "
               "OpenCL build -inf, the CPU nan; the edge sample leaves -inf out"),
    unary("nn_functional_relu", fn=lambda x: dl.nn.functional.relu(x), ref=TF.relu,
          dtypes=ALL_FLOATS, edge=False),
    unary("nn_functional_tanh", fn=lambda x: dl.nn.functional.tanh(x), ref=torch.tanh,
          dtypes=ALL_FLOATS, edge=False),
    unary("nn_functional_sigmoid", fn=lambda x: dl.nn.functional.sigmoid(x),
          ref=torch.sigmoid, dtypes=ALL_FLOATS, edge=False),
    # ---- binary arithmetic --------------------------------------------------------------
    binary("add", dtypes=NO_BOOL, signed_zero=True),
    # two bools: or / and / max / min, bool as torch's
    *(binary(f"{op}_bool", fn=_fn(dl, op), ref=_fn(torch, op), dtypes=(dl.bool_,), scalar=None)
      for op in ("add", "mul", "maximum", "minimum")),
    binary("add_alpha", fn=lambda a, b: dl.add(a, b, alpha=2), ref=lambda a, b: torch.add(
        a, b, alpha=2), dtypes=NO_BOOL, scalar=3),
    binary("sub", dtypes=NO_BOOL, signed_zero=True),
    binary("sub_alpha", fn=lambda a, b: dl.sub(a, b, alpha=-3),
           ref=lambda a, b: torch.sub(a, b, alpha=-3), dtypes=NO_BOOL, scalar=2),
    binary("mul", dtypes=NO_BOOL, signed_zero=True),
    binary("div", dtypes=ALL, positive=False),
    binary("true_divide", fn=lambda a, b: dl.ops.OPS["true_divide"](a, b),
           ref=torch.true_divide, dtypes=ALL_FLOATS, edge=False),
    binary("pow", dtypes=ALL_FLOATS, positive=True, scalar=2.0,
           tol={dl.float32: (2e-5, 1e-6)}),
    binary("pow_int", fn=lambda a, b: dl.pow(a, b), ref=lambda a, b: torch.pow(a, b),
           dtypes=INTS, positive=True, scalar=2, edge=False),
    # integer pow stays integer, exact and wrapping as PyTorch's (dl once gave float32):
    # overflow, negative exponents (0 but for bases 1 and -1), a float exponent gives floats
    OpInfo("pow_int_wraps", op=lambda a, b: dl.pow(a, b), ref=lambda a, b: torch.pow(a, b),
           dtypes=(dl.int64,), samples=lambda: [
               Sample(np.array([3, -2, 5, 7, 0, 1]), np.array([20, 31, 27, 40, 0, 100]),
                      desc="overflow wraps")],
           skip={rt: "int64 is int32 on this device: it wraps at 32 bits, torch's at 64"
                 for rt in ("wgpu", "wgpu-spirv")}),
    OpInfo("pow_int_edges", op=lambda a, b: dl.pow(a, b), ref=lambda a, b: torch.pow(a, b),
           dtypes=(dl.int64,), samples=lambda: [
               Sample(np.array([3, 1, -1, -1, 0, 2]), np.array([-1, -5, -3, -2, -1, -4]),
                      desc="negative exponents"),
               Sample(np.array([[2, 3], [4, 5]]), 3, desc="a Python exponent"),
               Sample(np.array([4, 9]), 0.5, desc="a float exponent: floats")]),
    binary("maximum", dtypes=NO_BOOL, scalar=None),
    binary("minimum", dtypes=NO_BOOL, scalar=None),
    *[OpInfo(f"{n}_ties", op=_fn(dl, n), ref=_fn(torch, n),
             samples=lambda: [Sample(ties((3, 5)), ties((3, 5), 1), desc="ties share the grad"),
                              Sample(ties((4, 4), 2), ties((4,), 3), desc="broadcast ties")])
      for n in ("maximum", "minimum")],
    # ---- operators ----------------------------------------------------------------------
    binary("__add__", fn=lambda a, b: a + b, ref=lambda a, b: a + b, dtypes=NO_BOOL),
    binary("__radd__", fn=lambda a, b: 2.5 + a, ref=lambda a, b: 2.5 + a, grad=True),
    binary("__sub__", fn=lambda a, b: a - b, ref=lambda a, b: a - b, dtypes=NO_BOOL),
    binary("__rsub__", fn=lambda a, b: 2 - a, ref=lambda a, b: 2 - a, dtypes=NO_BOOL),
    binary("__mul__", fn=lambda a, b: a * b, ref=lambda a, b: a * b, dtypes=NO_BOOL),
    binary("__rmul__", fn=lambda a, b: -0.0 * a, ref=lambda a, b: -0.0 * a, signed_zero=True),
    binary("__truediv__", fn=lambda a, b: a / b, ref=lambda a, b: a / b, dtypes=ALL),
    binary("__rtruediv__", fn=lambda a, b: 3 / a, ref=lambda a, b: 3 / a, positive=True),
    binary("__pow__", fn=lambda a, b: a ** b, ref=lambda a, b: a ** b, positive=True,
           dtypes=ALL_FLOATS,
           tol={dl.float32: (2e-5, 1e-6)}),
    binary("__rpow__", fn=lambda a, b: 2 ** a, ref=lambda a, b: 2 ** a, dtypes=ALL_FLOATS),
    binary("__pow_scalar__", fn=lambda a, b: a ** 3, ref=lambda a, b: a ** 3,
           dtypes=ALL_FLOATS),
    # ---- comparisons and logical ops ----------------------------------------------------
    *[binary(n, dtypes=ALL, grad=False) for n in ("eq", "ne", "lt", "le", "gt", "ge")],
    *[binary(f"__{n}__", fn=f, ref=f, dtypes=ALL, grad=False) for n, f in (
        ("eq", lambda a, b: a == b), ("ne", lambda a, b: a != b), ("lt", lambda a, b: a < b),
        ("le", lambda a, b: a <= b), ("gt", lambda a, b: a > b), ("ge", lambda a, b: a >= b))],
    *[binary(n, dtypes=ALL, grad=False, scalar=None)
      for n in ("logical_and", "logical_or", "logical_xor")],
    *[binary(f"__{n}__", fn=f, ref=f, dtypes=(dl.bool_,), grad=False, scalar=True)
      for n, f in (("and", lambda a, b: a & b), ("or", lambda a, b: a | b),
                   ("xor", lambda a, b: a ^ b))],
    # ---- where / clamp -------------------------------------------------------------------
    OpInfo("where", op=lambda c, a, b: dl.where(c, a, b), ref=lambda c, a, b: torch.where(
        c, a, b), dtypes=ALL,
           samples=lambda: [Sample(barr((3, 5)), arr((3, 5), 1), arr((3, 5), 2)),
                            Sample(barr((4, 6), 3), arr((4, 6), 4), arr((4, 6), 5),
                                   noncontig=True),
                            Sample(barr((3, 1), 6), arr((1, 4), 7), arr((3, 4), 8),
                                   desc="broadcast"),
                            Sample(barr((0, 2)), arr((0, 2)), arr((1, 2), 9), desc="size 0"),
                            Sample(barr((6,)), edge_values()[:6], edge_values()[6:], grad=(),
                                   desc="edge values")]),
    # PyTorch's method: x.where(cond, y) is x where cond, else y (dl read x as the cond)
    OpInfo("where_method", op=lambda x, c, y: x.where(c, y), ref=lambda x, c, y: x.where(c, y),
           samples=lambda: [Sample(arr((3, 4)), barr((3, 4), 1), arr((3, 4), 2)),
                            Sample(arr((3, 4), 3), barr((4,), 4), 0.0, desc="a scalar y")]),
    OpInfo("where_scalar", op=lambda c, a: dl.where(c, a, 0.0),
           ref=lambda c, a: torch.where(c, a, 0.0), dtypes=ALL_FLOATS,
           samples=lambda: [Sample(barr((3, 5)), arr((3, 5), 1)),
                            Sample(barr((2, 4), 2), arr((4,), 3), desc="broadcast")]),
    OpInfo("clamp", op=lambda x, lo, hi: dl.clamp(x, lo, hi),
           ref=lambda x, lo, hi: torch.clamp(x, lo, hi), dtypes=NO_BOOL,
           samples=lambda: [Sample(arr((3, 5)), -0.5, 0.75),
                            Sample(arr((4, 6), 1), -1.0, None, noncontig=True),
                            Sample(arr((4,), 2), None, 0.0, desc="max only"),
                            Sample(edge_values(), -1.0, 1.0, grad=(), desc="edge values"),
                            Sample(arr((3,), 3), 1.0, -1.0, desc="min > max"),
                            Sample(arr((0, 2)), 0.0, 1.0, desc="size 0")]),
    OpInfo("clamp_tensor", op=lambda x, lo, hi: dl.clamp(x, lo, hi),
           ref=lambda x, lo, hi: torch.clamp(x, lo, hi),
           samples=lambda: [Sample(arr((3, 5)), arr((3, 1), 1, -1, 0), arr((5,), 2, 0, 1)),
                            Sample(arr((4, 4), 3), arr((4, 4), 4), arr((4, 4), 5, 1, 2),
                                   noncontig=True)]),
    OpInfo("clamp_min", op=lambda x, lo: dl.clamp_min(x, lo),
           ref=lambda x, lo: torch.clamp_min(x, lo), dtypes=NO_BOOL,
           samples=lambda: [Sample(arr((3, 5)), 0.25), Sample(arr((4, 6), 1), arr((6,), 2),
                                                              noncontig=True),
                            Sample(edge_values(), 0.0, grad=(), desc="edge values")]),
    OpInfo("clamp_max", op=lambda x, hi: dl.clamp_max(x, hi),
           ref=lambda x, hi: torch.clamp_max(x, hi), dtypes=NO_BOOL,
           samples=lambda: [Sample(arr((3, 5)), 0.25), Sample(arr((4, 6), 1), arr((6,), 2),
                                                              noncontig=True),
                            Sample(edge_values(), 0.0, grad=(), desc="edge values")]),
    # a NaN bound, scalar or in a tensor, gives NaN as PyTorch's (it let x through)
    OpInfo("clamp_nan_bound", op=lambda x, lo, hi: dl.clamp(x, lo, hi),
           # a NaN bound gives NaN (torch >= 2.12; torch 2.11 ignored a NaN scalar bound)
           ref=lambda x, lo, hi: torch.where(torch.isnan(torch.as_tensor(
               lo if lo is not None else hi)), float("nan"), torch.clamp(x, lo, hi)),
           grad=False, shader_edges="WGSL/SPIR-V compilers may fold a compare with NaN as finite",
           samples=lambda: [Sample(arr((4,)), float("nan"), None, desc="min nan"),
                            Sample(arr((4,), 1), None, float("nan"), desc="max nan"),
                            Sample(arr((4,), 2), np.array([0.0, np.nan, 0.0, -1.0]), None,
                                   desc="a nan in a tensor min")]),
    OpInfo("clip", op=lambda x: dl.ops.OPS["clip"](x, -1, 1), ref=lambda x: torch.clip(x, -1, 1),
           samples=lambda: [Sample(arr((3, 5)))]),
    # ---- casts ------------------------------------------------------------------------------
    *[OpInfo(f"to_{dst.name}", op=(lambda d: lambda x: x.to(d))(dst),
             ref=(lambda d: lambda x: x.to(d))(tdst), dtypes=ALL,
             grad=dst.is_float,
             samples=(lambda d: lambda: _cast_samples(d))(dst),
             note="float to int casts of values out of the int range saturate (PyTorch: "
                  "undefined)" if dst in INTS else "")
      for dst, tdst in ((dl.float32, torch.float32), (dl.float64, torch.float64),
                        (dl.float16, torch.float16), (dl.bfloat16, torch.bfloat16),
                        (dl.int32, torch.int32), (dl.int64, torch.int64),
                        (dl.bool_, torch.bool))],
    *[OpInfo(f"method_{m}", op=_method(m), ref=_method(m), dtypes=ALL_FLOATS,
             samples=lambda: [Sample(arr((3, 5)))])
      for m in ("float", "double", "half", "bfloat16")],
    *[OpInfo(f"method_{m}", op=_method(m), ref=_method(m), dtypes=ALL, grad=False,
             samples=lambda: [Sample(arr((3, 5), 0, -3, 3))])
      for m in ("int", "long", "bool")],
]

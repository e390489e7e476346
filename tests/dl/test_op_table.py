"""Runs the op table (tests/dl/op_table): every entry forward against torch and gradients
against torch autograd (or float64 finite differences), per runtime and dtype, with fusion on
and off; which runtime runs which samples, dtypes and fusion modes without CUBE_SLOW=1 is
the policy in op_table/core.py's docstring."""
from __future__ import annotations

import importlib
import math
import os
import pkgutil

import numpy as np
import op_table
import pytest
import torch
from dl_helpers import TOL
from op_table import core  # noqa: I001

import dl
from cube.targets import RUNTIMES

# CUBE_OP_TABLE=ops_core,ops_nn runs those table files only (while writing entries)
_ONLY = [m for m in os.environ.get("CUBE_OP_TABLE", "").split(",") if m]
MODULES = [importlib.import_module(f"op_table.{m.name}")
           for m in pkgutil.iter_modules(op_table.__path__) if m.name.startswith("ops_")
           and (not _ONLY or m.name in _ONLY)]
OPS = core.collect(*MODULES)

_TORCH_DTYPE = {dl.float32: torch.float32, dl.float64: torch.float64,
                dl.float16: torch.float16, dl.bfloat16: torch.bfloat16,
                dl.int32: torch.int32, dl.int64: torch.int64, dl.bool_: torch.bool}


def _names_unique():
    names = [o.name for o in OPS]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f"op table entries named twice: {sorted(dup)}"


def test_op_table_names_unique():
    _names_unique()
    assert OPS, "the op table is empty"


def _convert(v, dtype, dev, noncontig, lib):
    """A sample value for dl (lib='dl') or torch: float arrays in `dtype`, others as they are."""
    if isinstance(v, (list, tuple)) and any(isinstance(e, np.ndarray) for e in v):
        return type(v)(_convert(e, dtype, dev, noncontig, lib) for e in v)
    if not isinstance(v, np.ndarray):
        return v
    a = v
    is_float = a.dtype.kind == "f"
    if is_float and not dtype.is_float:  # an integer or bool dtype under test
        a = _as_int(a, dtype)
        is_float = False
    if noncontig and a.ndim >= 2:
        a = np.ascontiguousarray(a.swapaxes(-1, -2))
    if lib == "dl":
        if a.dtype == np.int64 and not _int64(dev):
            a = a.astype(np.int32)  # WGSL/SPIR-V: int64 indices arrive as int32
        if is_float:
            t = dl.tensor(a.astype(np.float64), device=dev).to(dtype) if dtype in (
                dl.float16, dl.bfloat16) else dl.tensor(a.astype(dtype.storage_np), device=dev)
        else:
            t = dl.tensor(a, device=dev)
    else:
        t = torch.from_numpy(np.array(a))
        if is_float:
            t = t.to(_TORCH_DTYPE[dtype])
    if noncontig and a.ndim >= 2:
        t = t.transpose(-1, -2)
    return t


def _int64(dev: str) -> bool:
    import cube as cb
    return getattr(cb.runtime(dev).features, "int64", True)


def _as_int(a: np.ndarray, dtype) -> np.ndarray:
    """A float sample array as the integer or bool dtype under test."""
    if dtype is dl.bool_:
        return a != 0
    a = np.rint(np.nan_to_num(a, nan=0.0, posinf=100.0, neginf=-100.0))
    return np.clip(a, -100, 100).astype(dtype.storage_np)


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [o for x in out for o in _flat(x)]
    if hasattr(out, "_fields"):  # torch's named tuples (sort, topk, ...)
        return [o for x in tuple(out) for o in _flat(x)]
    return [out]


def _np(x):
    if isinstance(x, dl.Tensor):
        return np.asarray(x.numpy()) if x.dtype is not dl.bfloat16 else \
            np.asarray(x.to(dl.float32).numpy())
    if isinstance(x, torch.Tensor):
        x = x.detach()
        return (x.float() if x.dtype == torch.bfloat16 else x).numpy()
    return np.asarray(x)


def _compare(got, want, dtype, tol, signed_zero, what):
    g, w = _np(got), _np(want)
    assert g.shape == w.shape, f"{what}: shape {g.shape} != torch's {w.shape}"
    if w.dtype.kind in "biu" or w.dtype == bool:
        np.testing.assert_array_equal(g, w, err_msg=what)
        return
    r, a = tol
    np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=r, atol=a,
                               equal_nan=True, err_msg=what)
    if signed_zero:
        zg, zw = g == 0, w == 0
        np.testing.assert_array_equal(np.signbit(g[zg & zw]), np.signbit(w[zg & zw]),
                                      err_msg=f"{what}: the sign of zero")


def _dtype_name(t) -> str:
    if isinstance(t, dl.Tensor):
        return t.dtype.name
    return {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
            torch.bfloat16: "bfloat16", torch.int64: "int64", torch.int32: "int32",
            torch.int16: "int16", torch.int8: "int8", torch.uint8: "uint8",
            torch.bool: "bool"}.get(t.dtype, str(t.dtype))


def _weights(outs):
    """The fixed random weights of the gradient loss, one per float output (NumPy)."""
    return [np.random.default_rng(100 + k).uniform(0.5, 1.5, tuple(o.shape))
            for k, o in enumerate(outs)]


def _fd_grads(info, s, dev, gidx):
    """Central finite differences of sum(out_k * w_k) (dl's own op, float64, no grad) with
    respect to the float arguments gidx: {index: gradient as laid out in the sample}."""
    base = [np.asarray(a, np.float64) if i in gidx else a for i, a in enumerate(s.args)]

    def loss(args):
        with dl.no_grad():
            dargs = [_convert(a, dl.float64, dev, s.noncontig, "dl") for a in args]
            dkw = {k: _convert(v, dl.float64, dev, s.noncontig, "dl")
                   for k, v in s.kwargs.items()}
            outs = [o for o in _flat(info.op(*dargs, **dkw))
                    if isinstance(o, dl.Tensor) and o.dtype.is_float]
        return sum(float(np.sum(_np(o) * w)) for o, w in zip(outs, _weights(outs)))

    eps = info.fd_eps
    grads = {}
    for i in gidx:
        g = np.zeros_like(base[i])
        for j in np.ndindex(base[i].shape):
            plus, minus = base[i].copy(), base[i].copy()
            plus[j] += eps
            minus[j] -= eps
            args_p = list(base)
            args_p[i] = plus
            args_m = list(base)
            args_m[i] = minus
            g[j] = (loss(args_p) - loss(args_m)) / (2 * eps)
        grads[i] = g
    return grads


_DL_DTYPE = {v: k for k, v in _TORCH_DTYPE.items()}


def _tol(info, dtype, out):
    """An output's tolerance: the entry's for the dtype under test, else the coarser of
    TOL's for that dtype and for the output's dtype (exp of int64 is float32)."""
    if dtype in info.tol:
        return info.tol[dtype]
    a = TOL.get(dtype, (0.0, 0.0))
    od = out.dtype if isinstance(out, dl.Tensor) else _DL_DTYPE.get(
        getattr(out, "dtype", None))
    b = TOL.get(od, (0.0, 0.0))
    return (max(a[0], b[0]), max(a[1], b[1]))


def _out_dtype(g):
    """The dl dtype of a float output (the gradient loss's weights take it)."""
    return g.dtype if isinstance(g, dl.Tensor) and g.dtype.is_float else dl.float64


def _run_sample(info: core.OpInfo, s: core.Sample, dtype, dev: str, grad: bool):
    tol = info.tol.get(dtype, TOL.get(dtype, (0.0, 0.0)))
    dargs = [_convert(a, dtype, dev, s.noncontig, "dl") for a in s.args]
    targs = [_convert(a, dtype, dev, s.noncontig, "torch") for a in s.args]
    dkw = {k: _convert(v, dtype, dev, s.noncontig, "dl") for k, v in s.kwargs.items()}
    tkw = {k: _convert(v, dtype, dev, s.noncontig, "torch") for k, v in s.kwargs.items()}
    gidx = [i for i, a in enumerate(s.args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"
            and (s.grad is None or i in s.grad)] if grad else []
    if gidx:
        for i in gidx:
            dargs[i] = dargs[i].detach().requires_grad_(True)
            targs[i] = targs[i].detach().requires_grad_(True)
    want = _flat(info.ref(*targs, **tkw))
    got = _flat(info.op(*dargs, **dkw))
    if info.inplace:  # the target itself, after the call
        want, got = want + [targs[0]], got + [dargs[0]]
    _check_outputs(info, got, want, dtype, dev, tol, "")
    if gidx and not info.inplace:
        # the inference path too: without a gradient an op may take other kernels (the
        # fused attention kernel, conv's epilogue), and only this run reaches them
        with dl.no_grad():
            plain = [_convert(a, dtype, dev, s.noncontig, "dl") for a in s.args]
            _check_outputs(info, _flat(info.op(*plain, **dkw)), want, dtype, dev, tol,
                           " (no_grad)")
    _check_grads(info, s, dtype, dev, tol, got, want, dargs, targs, gidx)


def _check_outputs(info, got, want, dtype, dev, tol, when: str):
    assert len(got) == len(want), f"{len(got)} outputs{when}, torch gives {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        what = f"output {k}{when}"
        if isinstance(w, torch.Tensor):
            assert isinstance(g, dl.Tensor), f"{what}: {type(g).__name__}, torch gives a tensor"
            if info.check_dtype and not (_dtype_name(w) == "int64" and _dtype_name(g) ==
                                         "int32" and not _int64(dev)):
                assert _dtype_name(g) == _dtype_name(w), \
                    f"{what}: dtype {_dtype_name(g)}, torch gives {_dtype_name(w)}"
        elif isinstance(w, str) or w is None:  # dtype names and the like: equal
            assert g == w, f"{what}: {g!r}, torch gives {w!r}"
            continue
        elif isinstance(w, (bool, int, float)):
            if isinstance(w, float) and math.isnan(w):
                assert math.isnan(float(g)), what
                continue
            assert type(g) is type(w) or (isinstance(g, (int, float)) and not isinstance(
                w, bool)), f"{what}: {type(g).__name__}, torch gives {type(w).__name__}"
        _compare(g, w, dtype, _tol(info, dtype, g),
                 info.signed_zero and dev not in core.SHADER_MATH, what)


def _check_grads(info, s, dtype, dev, tol, got, want, dargs, targs, gidx):
    if not gidx:
        return
    fd = info.grad_check == "fd"
    if fd:
        floats = [(g, g) for g in got if isinstance(g, dl.Tensor) and g.dtype.is_float]
    else:
        floats = [(g, w) for g, w in zip(got, want) if isinstance(w, torch.Tensor)
                  and w.dtype.is_floating_point and w.requires_grad]
    if not floats:
        return
    dloss, tloss = None, None
    for (g, w), wt in zip(floats, _weights([w for _, w in floats])):
        od = _out_dtype(g)  # weights in the output's dtype: gradients round as torch's do
        d = (g * _convert(wt, od, dev, False, "dl")).sum()
        dloss = d if dloss is None else dloss + d
        if not fd:
            t = (w * _convert(wt, od, dev, False, "torch")).sum()
            tloss = t if tloss is None else tloss + t
    if not fd:
        tloss.backward()
    dloss.backward()
    gtol = info.grad_tol.get(dtype, tuple(x * 10 for x in tol))
    if fd:
        gtol = info.grad_tol.get(dtype, (1e-6, 1e-7))
        want_g = _fd_grads(info, s, dev, gidx)
    for i in gidx:
        if fd:
            dg = dargs[i].grad
            assert dg is not None, f"grad of arg {i} is missing"
            _compare(dg, want_g[i], dtype, gtol, False, f"grad of arg {i} (finite differences)")
            continue
        tg = targs[i].grad
        dg = dargs[i].grad
        if tg is None:
            assert dg is None or np.all(_np(dg) == 0), f"grad of arg {i}: torch gives none"
            continue
        assert dg is not None, f"grad of arg {i} is missing (torch has one)"
        _compare(dg, tg, dtype, gtol, False, f"grad of arg {i}")


_SLOW = [pytest.mark.slow,
         pytest.mark.skipif(not core.run_slow(), reason="exhaustive variant: CUBE_SLOW=1")]


def _cases():
    for info in OPS:
        for name in RUNTIMES:
            for dtype in info.dtypes:
                marks = () if core.is_default_case(info, name, dtype) else _SLOW
                yield pytest.param(info, name, dtype, id=f"{info.name}-{name}-{dtype.name}",
                                   marks=marks)


@pytest.mark.parametrize("info,runtime,dtype", list(_cases()))
def test_op(info: core.OpInfo, runtime: str, dtype):
    import cube as cb
    reason = info.skip_reason(runtime, dtype)
    if reason:
        pytest.skip(f"declared: {reason}")
    try:
        rt = cb.runtime(runtime)
    except cb.RuntimeUnavailable as e:
        pytest.skip(f"runtime {runtime} unavailable: {str(e).splitlines()[0]}")
    f = rt.features
    if (dtype is dl.float64 and not f.f64) or (dtype is dl.float16 and not f.f16) or (
            dtype is dl.bfloat16 and not f.bf16):
        pytest.skip(f"{runtime}'s device declares no {dtype.name}")
    failures, ran, lacks = [], 0, []
    for k, s in enumerate(core.samples_for(info, runtime)):
        for fused in core.fusion_modes_for(info, runtime, dtype, k):
            grad = info.grad and dtype in info.grad_dtypes and (
                info.grad_check != "fd" or dtype is dl.float64)
            label = s.desc or f"args {[getattr(a, 'shape', a) for a in s.args]}"
            try:
                with dl.fusion(fused):
                    _run_sample(info, s, dtype, runtime, grad)
                ran += 1
            except cb.CapabilityError as e:  # declared by the target's capability table
                if e.target != rt.target or rt.target in ("ir", "llvm"):
                    raise
                lacks.append(f"[{label}] {e.capability}")
            except Exception as e:  # every failing sample is reported, not the first only
                failures.append(f"[{label}, fusion {'on' if fused else 'off'}] "
                                f"{type(e).__name__}: {str(e)[:600]}")
    assert not failures, f"{info.name} on {runtime} {dtype.name}:\n" + "\n".join(failures)
    if not ran and not lacks:
        pytest.skip(f"no sample of {info.name} runs on {runtime} (non-finite values)")
    if lacks and not ran:
        pytest.skip(f"{runtime} lacks the capability {'; '.join(sorted(set(lacks)))[:300]}")

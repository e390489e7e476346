"""The kernels of `dl/kernels` and of dl's fusion engine, as dl really launches them.

A representative dl workload (elementwise chains over strided and broadcast views, casts,
reductions, softmax, layer/batch norm, matmul with bias and activation epilogues,
convolution, pooling, cross-entropy, indexing, optimiser steps, forward and backward, in
f32/f16/bf16/f64) runs once on an interpreter runtime that records what it compiles:

- library kernels as (CubeFunction, Signature): the element types, line sizes, ranks and
  comptime values of the launch, rebuilt later for each target's own features;
- fused kernels (dl/fusion builds them with the IR builder, target-free) as their IR.

Every autotune candidate runs (one op per candidate, `Tunable.only`), so the GPU-only
kernels (shared memory, plane ops) are specialised as the launcher would pick them. The
interpreter is not the CPU: launchers take their GPU paths (16-byte lines, P = 32 planes)."""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile

from cube.kernel import CubeFunction, Signature
from runtimes.interp import InterpRuntime

DEVICE = "cube-check"
PLANE = 32  # the plane size of the recording runtime (CUDA's warp)


class _Recorder(InterpRuntime):
    name = DEVICE

    def __init__(self) -> None:
        super().__init__(plane_size=PLANE)
        self.fused: dict[str, tuple[str, object]] = {}  # printed IR -> (label, kernel)
        self.execute = os.environ.get("CUBE_CHECK_EXECUTE") == "1"

    def device_id(self) -> str:
        return DEVICE

    def compile(self, kernel, cache_key=None):
        if kernel.source.startswith("dl.fusion:"):
            from cube_ir.printer import format_kernel
            self.fused.setdefault(format_kernel(kernel), (_fused_label(kernel), kernel))
        if not self.execute:
            return _NoRun(kernel)
        return super().compile(kernel, cache_key)


class _NoRun:
    """An executable that runs nothing: the workload's values are not needed, only what it
    compiles (a launch still checks its arguments on the way here)."""

    def __init__(self, kernel) -> None:
        self.kernel = kernel
        self.source = ""

    def launch(self, cube_count, cube_dim, args) -> None:
        pass


def _fused_label(kernel) -> str:
    """fused[op,op,...](dtypes, rank r[, reduce op]) from the Structure being compiled (the
    caller's frame, dl/fusion/materialise._compiled), else the kernel's hash."""
    f = sys._getframe(2)
    for _ in range(6):
        if f is None:
            break
        s = f.f_locals.get("s")
        if s is not None and hasattr(s, "nodes") and hasattr(s, "leaves"):
            ops = ",".join(dict.fromkeys(n[0] for n in s.nodes)) or "copy"
            types = ",".join(dict.fromkeys([d for d, _ in s.leaves] +
                                           [o[1] for o in s.outs]))
            extra = f.f_locals.get("extra") or ()
            red = f" {extra[0]}" if extra else ""
            mode = f" rows{s.rows}" if s.rows else ""
            return f"{kernel.name}[{ops}]({types}; rank {s.rank}{mode}{red})"
        f = f.f_back
    return f"{kernel.name}[{kernel.source.split(':')[-1]}]"


@contextlib.contextmanager
def _recording():
    """The recorder as dl device DEVICE, every CubeFunction build recorded, autotune and the
    kernel cache in a private directory."""
    from dl import devices
    rec = _Recorder()
    builds: dict[tuple, tuple[CubeFunction, Signature, dict]] = {}
    original = CubeFunction.build_ir

    def build_ir(self, sig, target, optimise=True, deps=None):
        kernel = original(self, sig, target, optimise, deps)
        if target.name == "ir" and optimise:
            builds.setdefault((id(self), repr(sig)), (self, sig, {target.plane_size: kernel}))
        return kernel

    dev = devices.Device(DEVICE)
    dev._rt = rec
    saved_env = {k: os.environ.get(k) for k in ("CUBE_CACHE_DIR", "CUBE_AUTOTUNE")}
    saved_default = devices.default_device
    with tempfile.TemporaryDirectory(prefix="cube-check-") as tmp:
        os.environ["CUBE_CACHE_DIR"] = tmp
        os.environ["CUBE_AUTOTUNE"] = "off"
        devices._devices[DEVICE] = dev
        devices.default_device = DEVICE
        CubeFunction.build_ir = build_ir
        try:
            yield rec, builds
        finally:
            CubeFunction.build_ir = original
            devices._devices.pop(DEVICE, None)
            devices.default_device = saved_default
            for k, v in saved_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def _each_candidate(tunable, fn) -> None:
    """fn() once per candidate of tunable (those that cannot take fn's arguments skip)."""
    from autotune import NoCandidate
    for c in tunable.candidates:
        with tunable.only(c.name):
            try:
                fn()
            except NoCandidate:
                pass


def _workload() -> None:
    import numpy as np

    import dl
    import dl.nn.functional as F
    from cube_ir import types as cube_types
    from dl.kernels import conv, matmul, norm, pool, reduce, softmax

    rng = np.random.default_rng(0)

    def t(*shape, dtype=dl.float32, grad=False):
        return dl.tensor(rng.standard_normal(shape).astype(np.float32), dtype=dtype,
                         requires_grad=grad)

    floats = (dl.float32, dl.float16, dl.bfloat16, dl.float64)
    for dt in floats:
        x, y = t(4, 80, dtype=dt), t(80, dtype=dt)
        # elementwise chains: contiguous, broadcast, transposed (rows mode), sliced
        ((x * 2 + y).exp().sigmoid() - x.tanh()).numpy()
        (x.gelu() + y.relu() * x.erf() / (x.abs() + 1)).sqrt().numpy()
        (x.T.T[:, ::2] * 3).log1p().numpy()
        dl.where(x > 0, x, x.clamp(-1, 1)).numpy()
        x.to(dl.int32).to(dt).numpy()
        (t(3, 4, 80, dtype=dt).permute(0, 2, 1) + 1).contiguous().numpy()
        # fused reductions and softmax over lazy inputs
        (x * x).sum(dim=1).numpy()
        (x + 1).amax(dim=0).numpy()
        (x.exp()).mean().numpy()
    for dt in (dl.float32, dl.float64):  # the library's own reductions (materialised input)
        x = t(6, 96, dtype=dt)
        for op in ("sum", "amax", "mean", "prod", "amin"):
            _each_candidate(reduce.REDUCE, lambda op=op, x=x: getattr(x, op)(dim=1).numpy())
        _each_candidate(reduce.REDUCE, lambda x=x: x.sum(dim=0).numpy())
        x.argmax(dim=1).numpy()
        x.max(dim=1)[0].numpy()
        _each_candidate(softmax.SOFTMAX, lambda x=x: F.softmax(x, dim=-1).numpy())
        _each_candidate(softmax.SOFTMAX, lambda x=x: F.log_softmax(x, dim=-1).numpy())
        w, b = t(96, dtype=dt), t(96, dtype=dt)
        _each_candidate(norm.LAYER_NORM,
                        lambda x=x, w=w, b=b: F.layer_norm(x, (96,), w, b).numpy())
    # matmul: every candidate (f32: for each operand layout), bias + activation epilogues as
    # the launcher picks them
    for dt in (dl.float32, dl.float16):
        a, b, bias = t(8, 32, dtype=dt), t(32, 16, dtype=dt), t(16, dtype=dt)
        _each_candidate(matmul.MATMUL, lambda a=a, b=b: (a @ b).numpy())
        if dt is dl.float32:
            _each_candidate(matmul.MATMUL, lambda a=a, b=b: (a @ b.T.contiguous().T).numpy())
            # N off the line size: the swapped kernels' result written a lane at a time
            b6 = t(32, 6, dtype=dt)
            _each_candidate(matmul.MATMUL, lambda a=a, b=b6: (a @ b.T.contiguous().T).numpy())
            _each_candidate(matmul.MATMUL, lambda a=a, b=b: (a.T.contiguous().T @ b).numpy())
        for act in ("relu", "gelu", "tanh"):
            F.linear(a, b.T, bias, act=act).numpy()
    # the library's fill (what a reduction over an empty axis or an empty-K matmul writes,
    # launched directly: dl's ops catch those cases before the launchers)
    from dl.kernels.fill import fill
    rt = dl.device(DEVICE).rt
    for elem in (cube_types.f32, cube_types.f64):
        fill(rt, rt.empty((7,), elem), 1.5)
    a3 = t(2, 8, 16)
    _each_candidate(matmul.MATMUL, lambda: (a3 @ t(16, 8)).numpy())
    # convolution and pooling
    img = t(2, 3, 10, 10)
    wconv, bconv = t(4, 3, 3, 3), t(4)
    _each_candidate(conv.CONV, lambda: F.conv2d(img, wconv, bconv, padding=1).numpy())
    w1 = t(4, 3, 1, 1)  # 1x1: the direct 1x1 kernels, and their gathered strided input
    _each_candidate(conv.CONV, lambda: F.conv2d(img, w1, bconv).numpy())
    _each_candidate(conv.CONV, lambda: F.conv2d(img, w1, stride=2).numpy())
    # the conv gradients' candidates (dl's backward takes the GPU-first ones here) and an
    # input with a non-unit w stride (the direct kernel copies it first)
    gy = rng.standard_normal((2, 4, 10, 10)).astype(np.float32)
    gb, wb = rt.from_numpy(gy), rt.from_numpy(wconv.numpy())
    gr = rt.from_numpy(np.ascontiguousarray(gy.transpose(1, 0, 2, 3).reshape(4, -1)))
    xt = rt.from_numpy(np.ascontiguousarray(img.numpy().transpose(0, 1, 3, 2)))
    xb = xt.view((2, 3, 10, 10), (300, 100, 1, 10))
    _each_candidate(conv.CONV_GRAD_WEIGHT, lambda: conv.conv2d_grad_weight(
        rt, rt.from_numpy(img.numpy()), gb, gr, (4, 3, 3, 3), 1, 1, 1))
    _each_candidate(conv.CONV_GRAD_INPUT, lambda: conv.conv2d_grad_input(
        rt, gb, gr, wb, (2, 3, 10, 10), 1, 1, 1))
    # 9 x 9 pixels, off every line size: the weight gradient's scalar pixel-major copy
    g9 = rt.from_numpy(rng.standard_normal((2, 4, 9, 9)).astype(np.float32))
    _each_candidate(conv.CONV_GRAD_WEIGHT, lambda: conv.conv2d_grad_weight(
        rt, rt.from_numpy(img.numpy()[:, :, :9, :9].copy()), g9, None, (4, 3, 3, 3), 1, 1, 1))
    _each_candidate(conv.CONV, lambda: conv.conv2d(rt, xb, wb, padding=1))
    _each_candidate(pool.POOL, lambda: F.max_pool2d(img, 2).numpy())
    _each_candidate(pool.POOL, lambda: F.avg_pool2d(img, 2).numpy())
    F.max_pool2d(t(2, 4, 8, 8), 2).numpy()  # windows that tile it: lines of outputs
    _workload_issue17(t)
    # fused attention (no gradient): the key pack and the rows kernel, plain and causal
    with dl.no_grad():
        qa, ka = t(2, 2, 16, 16), t(2, 2, 16, 16)
        for causal in (False, True):
            F.scaled_dot_product_attention(qa, ka, ka, is_causal=causal).numpy()
    # a small network, forward and backward, two optimisers
    for dt in (dl.float32, dl.float64):
        xin = t(4, 3, 8, 8, dtype=dt, grad=True)
        net = dl.nn.Sequential(dl.nn.Conv2d(3, 4, 3, padding=1), dl.nn.BatchNorm2d(4),
                               dl.nn.ReLU(), dl.nn.MaxPool2d(2), dl.nn.Conv2d(4, 4, 3),
                               dl.nn.AvgPool2d(2), dl.nn.Flatten(), dl.nn.Linear(4, 16),
                               dl.nn.LayerNorm(16), dl.nn.GELU(), dl.nn.Linear(16, 5))
        net.to(dtype=dt)
        labels = dl.tensor(np.array([0, 3, 1, 4]))
        emb = dl.nn.Embedding(10, 5)
        emb.to(dtype=dt)
        params = list(net.parameters()) + list(emb.parameters())
        # the multi-tensor steps (foreach, the default) and the per-parameter kernels
        for opt in [make(params, foreach=fe) for fe in (None, False) for make in (
                lambda ps, **k: dl.optim.SGD(ps, lr=0.1, momentum=0.9, **k),
                lambda ps, **k: dl.optim.AdamW(ps, lr=1e-3, **k))]:
            opt.zero_grad()
            logits = net(xin) + emb(labels)
            loss = F.cross_entropy(logits, labels) + F.mse_loss(logits, logits.detach() * 0)
            loss = loss + F.softmax(logits, dim=1).gather(1, labels[:, None]).sum()
            loss.backward()
            opt.step()
            loss.numpy()


def _workload_issue17(t) -> None:
    """Scans, sorts, histograms, indexing, interpolation and adaptive pooling. Their ops
    read counts and flags back (nonzero's size, bounds checks), so these kernels execute on
    the recorder (small sizes: the interpreter runs them)."""
    import numpy as np

    import dl
    import dl.nn.functional as F
    from dl.kernels import sort as lib_sort

    rt = dl.device(DEVICE).rt
    rt.execute = True
    try:
        for dt in (dl.float32, dl.float64):
            dl.cumsum(t(40, 5, dtype=dt), 0).numpy()
            dl.cumsum(t(3, 2500, dtype=dt), 1).numpy()  # the multi-block scan
            dl.cumprod(t(3, 70, dtype=dt), 1).numpy()
            dl.logcumsumexp(t(3, 70, dtype=dt), 1).numpy()
            dl.sort(t(3, 40, dtype=dt), 1)[0].numpy()
            dl.sort(t(2, 1500, dtype=dt), 1)[0].numpy()  # global bitonic steps
            v = t(4, 9, dtype=dt, grad=True)
            dl.topk(v, 2)[0].sum().backward()
            x = t(3, 64, dtype=dt)
            vals = rt.empty((3, 64), x.dtype.cube)
            inds = rt.empty((3, 64), dl.int64.cube)
            lib_sort.sort_rows(rt, x._karg(), vals.view((3, 64), (64, 1)),
                               inds.view((3, 64), (64, 1)), merge=True)
            edges = dl.sort(t(10, dtype=dt))[0]
            dl.searchsorted(edges, t(7, dtype=dt)).numpy()
            dl.histc(t(50, dtype=dt), bins=5, min=-1, max=1).numpy()
            img = t(2, 3, 5, 7, dtype=dt, grad=True)
            y = F.interpolate(img, scale_factor=2, mode="bilinear", align_corners=False)
            y = y + F.interpolate(img, scale_factor=2, mode="nearest")
            y.sum().backward()
            seq = t(2, 3, 9, dtype=dt, grad=True)
            F.interpolate(seq, size=14, mode="linear").sum().backward()
            F.adaptive_avg_pool2d(img, (3, 4)).sum().backward()
            F.max_pool2d(img, 3, stride=2, padding=1).sum().backward()  # the general pool
            F.max_pool2d(img, 2).sum().backward()  # 5x7: windows do not tile the input
            src = t(4, 6, dtype=dt, grad=True)
            idx = dl.tensor(np.array([[0, 1, 2, 3, 0, 1]] * 2))
            base = t(4, 6, dtype=dt, grad=True)
            (base.scatter_add(0, idx, src[:2]) + base.index_add(0, dl.tensor([0, 0]), src[:2])
             ).sum().backward()
            dl.tensor(np.arange(200) % 7).to(dt).index_select(0, dl.tensor(
                np.arange(100) % 13)).numpy()
            ib = dl.tensor(np.arange(90) % 4)
            (t(4, 5, dtype=dt, grad=True)[ib]).sum().backward()  # a long index row: sorted
            m = t(5, 6, dtype=dt) > 0
            t(5, 6, dtype=dt)[m].numpy()
            dl.nonzero(m).numpy()
            dl.tril(t(5, 6, dtype=dt)).numpy()
            (dl.flip(t(5, 6, dtype=dt), [0]) + dl.roll(t(5, 6, dtype=dt), 2, 1)).numpy()
            long_idx = dl.tensor(np.arange(200).reshape(100, 2) % 5)  # sorted accumulation
            t(5, 2, dtype=dt).scatter_add(0, long_idx, t(100, 2, dtype=dt)).numpy()
            dl.take_along_dim(t(4, 6, dtype=dt), dl.tensor(np.arange(24).reshape(4, 6) % 6),
                              1).numpy()
            w = t(9, 3, dtype=dt)
            w[dl.tensor([1, 4, 4])] = t(3, 3, dtype=dt)
            w.numpy()
        dl.bincount(dl.tensor(np.arange(30) % 7)).numpy()
        dl.bincount(dl.tensor(np.arange(30) % 7), weights=t(30)).numpy()
    finally:
        rt.execute = False


def capture() -> tuple[list[tuple], list[tuple[str, object]]]:
    """(library kernels as (label, CubeFunction, Signature, {plane size: IR built}), fused
    kernels as (label, IR))."""
    with _recording() as (rec, builds):
        _workload()
    lib = [(label(cf, sig), cf, sig, built) for cf, sig, built in builds.values()
           if cf.fn.__module__.startswith("dl.")]
    lib.sort(key=lambda x: (x[1].fn.__module__, x[0]))
    return lib, list(rec.fused.values())


def library_kernels() -> dict[str, CubeFunction]:
    """Every @cube kernel defined in dl/kernels (what the capture must cover)."""
    import importlib
    import pkgutil

    import dl.kernels
    out = {}
    for m in pkgutil.iter_modules(dl.kernels.__path__):
        mod = importlib.import_module(f"dl.kernels.{m.name}")
        for name, v in vars(mod).items():
            if isinstance(v, CubeFunction) and v.is_kernel and v.fn.__module__ == mod.__name__:
                out[f"{mod.__name__}.{name}"] = v
    return out


def label(cf: CubeFunction, sig: Signature) -> str:
    """name(comptime values)[element types]: the specialisation in a line."""
    ct = ",".join(f"{k}={v}" for k, v in sig.comptime)
    types = ",".join(dict.fromkeys(
        str(t) + (f"^{rank}" if kind == "tensor" else "") for _, kind, t, rank in sig.params
        if kind != "scalar"))
    return f"{cf.__name__}({ct})[{types}]" if ct else f"{cf.__name__}[{types}]"

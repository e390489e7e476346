"""One buffer passed to two parameters of a launch (Numba's `kernel[grid, block](a, a)`, an
in-place update): every runtime gives the interpreter's result. The C-family signatures
declare buffers `restrict`; a launch whose written buffer shares memory with another
parameter runs a variant without it (runtimes/aliasing.py), and every other launch keeps
the `restrict` kernel."""
from __future__ import annotations

import types

import numpy as np
import pytest

import cube as cb
from codegen.cfamily import emit_source
from cube import ABSOLUTE_POS, Array, Line, Tensor, cube, f32, u32
from cube.recording import Recording
from cube_ir import types as T
from cube_ir.builder import Builder
from runtimes import aliasing, cuda
from runtimes.buffer import as_elem


@cube(launch=True)
def relax(src: Array[f32], dst: Array[f32], steps: u32):
    i = ABSOLUTE_POS
    if i < len(dst):
        for _ in range(steps):
            dst[i] = 0.5 * (src[i] + 1.0)


@cube(launch=True)
def add(a: Array[f32], b: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < len(out):
        out[i] = a[i] + b[i]


@cube(launch=True)
def axpy_steps(a: Array[f32], b: Array[f32], out: Array[f32], steps: u32):
    i = ABSOLUTE_POS
    if i < len(out):
        for _ in range(steps):
            out[i] = a[i] * 0.5 + b[i]


@cube(launch=True)
def relax_lines(src: Array[Line[f32]], dst: Array[Line[f32]], steps: u32):
    i = ABSOLUTE_POS
    if i < len(dst):
        for _ in range(steps):
            dst[i] = (src[i] + 1.0) * 0.5


@cube(launch=True)
def relax_tensor(src: Tensor[f32], dst: Tensor[f32], steps: u32):
    """dst is src transposed: dst[c, r] is src[r, c]."""
    i = ABSOLUTE_POS
    if i < src.shape(0) * src.shape(1):
        r = i // src.shape(1)
        c = i % src.shape(1)
        for _ in range(steps):
            x = src[r * src.stride(0) + c * src.stride(1)]
            dst[c * dst.stride(0) + r * dst.stride(1)] = 0.5 * (x + 1.0)


def _relaxed(x: np.ndarray, steps: int) -> np.ndarray:
    """What Python gives for relax(x, x, steps): each step reads the last one's value."""
    want = x.astype(np.float32)
    for _ in range(steps):
        want = np.float32(0.5) * (want + np.float32(1.0))
    return want


def _on(rt, interp, launch, arrays: dict, alias: dict):
    """launch(rt, **buffers) on rt and on the interpreter, buffers named in `alias` being
    the buffer of the name they map to; the host copies of every distinct buffer, both."""
    out = []
    for r in (rt, interp):
        bufs = {n: r.from_numpy(a) for n, a in arrays.items()}
        args = {n: bufs[alias.get(n, n)] for n in [*arrays, *alias]}
        launch(r, args)
        out.append({n: b.numpy() for n, b in bufs.items()})
    return out


def test_in_place_update(rt, interp):
    x = np.arange(64, dtype=np.float32) - 20
    got, ref = _on(rt, interp, lambda r, a: relax.launch(r, 2, 32, steps=4, **a),
                   {"src": x}, {"dst": "src"})
    np.testing.assert_array_equal(ref["src"], _relaxed(x, 4))
    np.testing.assert_array_equal(got["src"], ref["src"])


def test_read_only_alias(rt, interp):
    """x passed as both inputs of an add: no promise breaks (nothing they reach is written)."""
    x = np.linspace(-3, 5, 40, dtype=np.float32)
    z = np.zeros_like(x)
    got, ref = _on(rt, interp, lambda r, a: add.launch(r, 1, 64, **a),
                   {"a": x, "out": z}, {"b": "a"})
    np.testing.assert_array_equal(ref["out"], x + x)
    np.testing.assert_array_equal(got["out"], ref["out"])
    np.testing.assert_array_equal(got["a"], x)


def test_output_aliases_one_input(rt, interp):
    """out is a; b is its own buffer: out[i] = a[i] * 0.5 + b[i], each step on the last."""
    a = np.arange(48, dtype=np.float32)
    b = np.full(48, 0.25, np.float32)
    got, ref = _on(rt, interp, lambda r, g: axpy_steps.launch(r, 1, 64, steps=3, **g),
                   {"a": a, "b": b}, {"out": "a"})
    want = a.copy()
    for _ in range(3):
        want = want * np.float32(0.5) + b
    np.testing.assert_array_equal(ref["a"], want)
    np.testing.assert_array_equal(got["a"], ref["a"])
    np.testing.assert_array_equal(got["b"], b)


@pytest.mark.parametrize("n", [2, 4])
def test_line_views_of_one_buffer(rt, interp, n):
    """Two line views (different objects) of one allocation."""
    x = np.arange(32, dtype=np.float32) * 0.75
    res = []
    for r in (rt, interp):
        buf = r.from_numpy(x)
        relax_lines.launch(r, 1, 32 // n, src=buf.lines(n), dst=buf.lines(n), steps=3)
        res.append(buf.numpy())
    np.testing.assert_array_equal(res[1], _relaxed(x, 3))
    np.testing.assert_array_equal(res[0], res[1])


def test_tensor_view_of_the_buffer(rt, interp):
    """dst the transposed view of src's buffer (the same memory, another object)."""
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    res = []
    for r in (rt, interp):
        buf = r.from_numpy(x)
        relax_tensor.launch(r, 1, 32, src=buf, dst=buf.view((6, 4), (1, 6)), steps=2)
        res.append(buf.numpy())
    np.testing.assert_array_equal(res[1], _relaxed(x, 2))
    np.testing.assert_array_equal(res[0], res[1])


def test_distinct_buffers_after_an_aliased_launch(rt):
    """The restrict kernel and its variant side by side: each launch gets its own result."""
    x = np.arange(16, dtype=np.float32)
    a, b = rt.from_numpy(x), rt.from_numpy(x)
    relax.launch(rt, 1, 16, src=a, dst=a, steps=3)
    relax.launch(rt, 1, 16, src=b, dst=a, steps=3)  # not aliased
    relax.launch(rt, 1, 16, src=b, dst=b, steps=3)
    np.testing.assert_array_equal(a.numpy(), _relaxed(x, 1))
    np.testing.assert_array_equal(b.numpy(), _relaxed(x, 3))


def test_recorded_aliased_launch_replays(rt):
    """A recording replays through the executable: it chooses the variant there too."""
    x = np.arange(16, dtype=np.float32)
    a = rt.from_numpy(x)
    with Recording() as rec:
        relax.launch(rt, 1, 16, src=a, dst=a, steps=2)
    rec.replay()
    rec.replay()
    np.testing.assert_array_equal(a.numpy(), _relaxed(x, 6))


# ---- which kernel a launch gets --------------------------------------------------------

def _exe(kernel, rt):
    return next(e[0] for k, e in kernel._hot.items() if k[0] is rt)


def _opencl():
    try:
        return cb.runtime("opencl")
    except cb.RuntimeUnavailable as e:
        pytest.skip(f"runtime opencl unavailable: {str(e).splitlines()[0]}")


def _kernel_line(src: str) -> str:
    return next(ln for ln in src.splitlines() if "__kernel" in ln)


@cube(launch=True)
def add_once(a: Array[f32], b: Array[f32], out: Array[f32]):  # compiled by one test only
    i = ABSOLUTE_POS
    if i < len(out):
        out[i] = a[i] + b[i]


@cube(launch=True)
def relax_once(src: Array[f32], dst: Array[f32], steps: u32):  # compiled by one test only
    i = ABSOLUTE_POS
    if i < len(dst):
        for _ in range(steps):
            dst[i] = 0.5 * (src[i] + 1.0)


def test_opencl_keeps_restrict_unless_aliased():
    rt = _opencl()
    x = rt.from_numpy(np.ones(8, np.float32))
    y, z = rt.empty(8), rt.empty(8)
    add_once.launch(rt, 1, 8, a=x, b=y, out=z)
    exe = _exe(add_once, rt)
    assert _kernel_line(exe.source).count("* restrict") == 3, exe.source
    before = rt.stats["codegen"]
    add_once.launch(rt, 1, 8, a=x, b=x, out=z)  # read-only alias: the restrict kernel
    assert rt.stats["codegen"] == before and not exe._variants.made
    relax_once.launch(rt, 1, 8, src=x, dst=y, steps=1)
    rexe = _exe(relax_once, rt)
    relax_once.launch(rt, 1, 8, src=x, dst=x, steps=1)
    relax_once.launch(rt, 1, 8, src=x, dst=x.lines(1), steps=1)
    relax_once.launch(rt, 1, 8, src=x, dst=y, steps=1)
    assert rt.stats["codegen"] == before + 2  # relax_once, then its variant once
    (variant,) = rexe._variants.made.values()
    assert "restrict" not in _kernel_line(variant.source)
    assert "__global const float* p_src_0" in variant.source
    assert _kernel_line(rexe.source).count("* restrict") == 2


def test_output_alias_drops_restrict_only_where_memory_is_shared():
    """out aliases a, b is separate: b keeps its restrict in the variant."""
    rt = _opencl()
    a, b = rt.from_numpy(np.ones(8, np.float32)), rt.from_numpy(np.ones(8, np.float32))
    axpy_steps.launch(rt, 1, 8, a=a, b=b, out=a, steps=1)
    (variant,) = _exe(axpy_steps, rt)._variants.made.values()
    line = _kernel_line(variant.source)
    assert "__global const float* p_a_0" in line and "__global float* p_out_2" in line
    assert "__global const float* restrict p_b_1" in line


def test_cuda_source_restrict_and_variant():
    """Without a GPU: the CUDA signature promises __restrict__, the variant does not."""
    src = relax.source(target="cuda", src=Array[f32], dst=Array[f32], steps=u32)
    assert "const float* __restrict__ p_src_0" in src and "float* __restrict__ p_dst_1" in src
    k = relax.ir(src=Array[f32], dst=Array[f32], steps=u32)
    c = emit_source(k, "cuda")
    assert c.written == (False, True) and c.restrict == (True, True)
    v = emit_source(k, "cuda", frozenset({0, 1}))
    assert "__restrict__" not in v.text and "const float* p_src_0" in v.text
    assert v.restrict == (False, False)
    assert emit_source(k, "hip", frozenset({0, 1})).text.count("__restrict__") == 0
    m = emit_source(k, "msl")  # Metal never promised restrict: nothing to break
    assert "restrict" not in m.text and m.restrict == (False, False)
    assert aliasing.alias_check(m.written, m.restrict) is None


def test_alias_set():
    w, r = (False, False, True, False), (True,) * 4
    assert aliasing.alias_set([1, 2, 3, 4], w, r) == frozenset()
    assert aliasing.alias_set([1, 1, 3, 4], w, r) == frozenset()  # two inputs: allowed
    assert aliasing.alias_set([1, 2, 1, 4], w, r) == {0, 2}
    assert aliasing.alias_set([1, 1, 1, 4], w, r) == {0, 1, 2}  # the whole group
    chk = aliasing.alias_check(w, r)
    bufs = [types.SimpleNamespace(ptr=p) for p in (1, 1, 3, 4)]
    assert not chk(bufs)
    bufs[3].ptr = 3
    assert chk(bufs)
    assert aliasing.alias_check((False, False), (True, True)) is None  # nothing written
    assert aliasing.alias_check((True,), (True,)) is None
    many = aliasing.alias_check((True,) * 8, (True,) * 8)  # the set-based check
    assert not many([types.SimpleNamespace(ptr=p) for p in range(8)])
    assert many([types.SimpleNamespace(ptr=p % 7) for p in range(8)])


# ---- the CUDA launch's choice, without a GPU (a stand-in driver, as test_cuda_params) --

def _cuda_kernel():
    b = Builder("inplace")
    src = b.array("src", T.f32)
    dst = b.array("dst", T.f32)
    i = b.scalar_param_value(b.scalar("i", T.u32))
    b.store(dst, i, b.emit_load(src, i))
    return b.finish()


class _Rt:
    name = "cuda"
    stream = types.SimpleNamespace(ptr=0x5EED)


def _dev_buffer(rt, n, ptr):
    b = object.__new__(cuda.DeviceBuffer)
    elem = as_elem(np.float32)
    b.rt, b.shape, b.elem, b.dtype, b.size, b.strides = rt, (n,), elem, elem.np, n, (1,)
    b._alloc, b.mem, b.ptr = n * 4, None, ptr
    return b


def test_cuda_launch_picks_the_variant(monkeypatch):
    calls, compiled = [], []
    monkeypatch.setattr(cuda, "driver", types.SimpleNamespace(
        launchKernel=lambda f, *a: calls.append(f)))
    k, rt = _cuda_kernel(), _Rt()

    def make(aliased=frozenset(), fptr=0xF00D):
        src = emit_source(k, "cuda", aliased)
        mod = types.SimpleNamespace(get_function=lambda name: types.SimpleNamespace(ptr=fptr))
        exe = cuda.DeviceExecutable(rt, k, src, mod)
        aliasing.setup(exe, src, None if aliased else
                       lambda s: compiled.append(s) or make(s, 0xA11A5))
        return exe

    exe = make()
    a, b = _dev_buffer(rt, 8, 0x1000), _dev_buffer(rt, 8, 0x2000)
    exe.launch((1, 1, 1), (8, 1, 1), [a, b, 8])
    exe.launch((1, 1, 1), (8, 1, 1), [a, a.view((2, 4), (4, 1)), 8])
    exe.launch((1, 1, 1), (8, 1, 1), [b, b, 8])
    exe.launch((1, 1, 1), (8, 1, 1), [b, a, 8])
    assert calls == [0xF00D, 0xA11A5, 0xA11A5, 0xF00D]
    assert compiled == [frozenset({0, 1})]  # once

"""Differential fuzzing: random expression / loop / branch kernels must agree between the
interpreter, every compiled runtime and a NumPy evaluation of the same expression.

CI runs a bounded number of examples; CUBE_FUZZ_EXAMPLES=N (or CUBE_SLOW=1) runs more."""
import os
import textwrap
import types

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cube as cb
from cube import ABSOLUTE_POS, Array, cube, f32, i32

N_EXAMPLES = int(os.environ.get("CUBE_FUZZ_EXAMPLES", 200 if os.environ.get("CUBE_SLOW")
                                else 25))

FLOAT_BIN = ["+", "-", "*"]
INT_BIN = ["+", "-", "*", "&", "|", "^"]


@st.composite
def float_expr(draw, depth=0):
    leaves = ["a", "b", "c", "1.5", "0.25", "2.0"]
    if depth > 3 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(leaves))
    kind = draw(st.integers(0, 4))
    x = draw(float_expr(depth + 1))
    y = draw(float_expr(depth + 1))
    if kind == 0:
        return f"({x} {draw(st.sampled_from(FLOAT_BIN))} {y})"
    if kind == 1:
        return f"cb.{draw(st.sampled_from(['min', 'max']))}({x}, {y})"
    if kind == 2:
        return f"({x} if {y} > {x} else {y})"
    if kind == 3:
        return f"cb.{draw(st.sampled_from(['tanh', 'sin', 'cos', 'abs']))}({x})"
    return f"cb.sqrt(abs({x}) + 1.0)"


@st.composite
def int_expr(draw, depth=0):
    leaves = ["p", "q", "i32(3)", "i32(7)", "i32(k)"]
    if depth > 3 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(leaves))
    x = draw(int_expr(depth + 1))
    y = draw(int_expr(depth + 1))
    kind = draw(st.integers(0, 2))
    if kind == 0:
        return f"({x} {draw(st.sampled_from(INT_BIN))} {y})"
    if kind == 1:
        return f"({x} // (({y}) % 5 + 6))"
    return f"({x} % (abs({y}) % 7 + 1))"


KERNEL = textwrap.dedent("""
    @cube(launch=True)
    def fuzz(fa: Array[f32], fb: Array[f32], ia: Array[i32], ib: Array[i32],
             fo: Array[f32], io: Array[i32]):
        i = ABSOLUTE_POS
        if i < fo.len():
            a = fa[i]
            b = fb[i]
            c = a * 0.5
            p = ia[i]
            q = ib[i]
            acc = 0.0
            iacc = 0
            for k in range({trips}):
                if {cond}:
                    acc = acc + {fexpr}
                else:
                    iacc = iacc + {iexpr}
                    {maybe_break}
                a = a * 0.9
            fo[i] = acc
            io[i] = iacc
""")


def _python_eval(src_kernel: str, inputs: dict, n: int):
    """Evaluate the same kernel body per element in plain Python/NumPy scalars."""
    body = src_kernel.split("if i < fo.len():\n", 1)[1]
    body = textwrap.dedent(body)
    fn_src = "def one(fa, fb, ia, ib, i):\n" + textwrap.indent(body, "    ").replace(
        "fo[i] = acc", "return_f = acc").replace("io[i] = iacc", "return_i = iacc") + \
        "\n    return return_f, return_i\n"
    ns = {"cb": _NumpyCb, "i32": _i32, "f32": np.float32, "abs": abs}
    exec(fn_src, ns)
    fo = np.zeros(n, np.float32)
    io = np.zeros(n, np.int32)
    with np.errstate(all="ignore"):
        for i in range(n):
            f, v = ns["one"](*(inputs[k] for k in ("fa", "fb", "ia", "ib")), i)
            fo[i], io[i] = np.float32(f), _i32(v)
    return fo, io


def _wrap(v):
    return np.float32(v) if isinstance(v, np.floating) else _i32(v)


def _i32(v):
    return np.int32(np.int64(v).astype(np.int32)) if not isinstance(v, np.int32) else v


class _NumpyCb:
    min = staticmethod(lambda x, y: np.minimum(x, y))
    max = staticmethod(lambda x, y: np.maximum(x, y))
    tanh = staticmethod(np.tanh)
    sin = staticmethod(np.sin)
    cos = staticmethod(np.cos)
    abs = staticmethod(abs)
    sqrt = staticmethod(np.sqrt)


def _build(src: str):
    mod = types.ModuleType("fuzz_kernel")
    mod.__dict__.update(cube=cube, Array=Array, f32=f32, i32=i32, cb=cb,
                        ABSOLUTE_POS=ABSOLUTE_POS)
    path = f"<fuzz-{abs(hash(src))}>"
    import linecache
    linecache.cache[path] = (len(src), None, src.splitlines(True), path)
    exec(compile(src, path, "exec"), mod.__dict__)
    return mod.fuzz


def _runtimes():
    names = []
    for name in cb.available_runtimes():
        names.append(name)
    return names


@settings(max_examples=N_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(fexpr=float_expr(), iexpr=int_expr(), cond=st.sampled_from(
    ["p > q", "a < b", "k % 2 == 0", "True", "(p & 1) == 1"]), trips=st.integers(0, 4),
    brk=st.booleans(), seed=st.integers(0, 2**16))
def test_random_kernels_agree(fexpr, iexpr, cond, trips, brk, seed):
    src = KERNEL.format(fexpr=fexpr, iexpr=iexpr, cond=cond, trips=trips,
                        maybe_break="if iacc > 100:\n                        break" if brk
                        else "pass")
    kern = _build(src)
    n = 67
    rng = np.random.default_rng(seed)
    inputs = {"fa": rng.uniform(-2, 2, n).astype(np.float32),
              "fb": rng.uniform(-2, 2, n).astype(np.float32),
              "ia": rng.integers(-1000, 1000, n).astype(np.int32),
              "ib": rng.integers(-1000, 1000, n).astype(np.int32)}
    ref_f, ref_i = _python_eval(src, inputs, n)
    results = {}
    for name in _runtimes():
        rt = cb.runtime(name)
        bufs = {k: rt.from_numpy(v) for k, v in inputs.items()}
        fo, io = rt.empty(n, np.float32), rt.empty(n, np.int32)
        kern.launch(rt, cube_count=3, cube_dim=32, fo=fo, io=io, **bufs)
        results[name] = (fo.numpy(), io.numpy())
    assert results, "no runtime available"
    for name, (fo, io) in results.items():
        np.testing.assert_array_equal(io, ref_i, err_msg=f"{name}\n{src}")
        np.testing.assert_allclose(fo, ref_f, rtol=2e-4, atol=2e-4, err_msg=f"{name}\n{src}")

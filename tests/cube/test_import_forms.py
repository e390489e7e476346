"""Every public name of `cube` usable in a kernel, used through every import form:
`from cube import X` (bare `X`), `import cube as cb` (`cb.X`) and `import cube.lang as L`
(`L.X`, for the names cube.lang defines). One table drives the three forms: each group is a
kernel template whose `{X}` (or `{Name}`) placeholders are filled with the form's spelling, the
source is written to a temporary module (the frontend reads a real file), run on every runtime
that starts and compared with NumPy, and with cube.simulate where the simulator supports it.

The support names a template needs besides the ones under test come from `from cube import ...
as _alias`, so the form under test is the only way the tested name is reached.

Names of the same kind share one kernel per form (compiles are what this file spends its time
on: PoCL's take ~0.5 s each); CUBE_IMPORT_FORMS_SPLIT=1 builds one kernel per name instead, to
find which name of a failing group fails."""
from __future__ import annotations

import math
import os
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import cube
import cube.lang

sys.path.insert(0, str(Path(__file__).parent))
from pystyle_support import assert_close, launch, load_module, oracle  # noqa: E402

from cube.simulate import Lines  # noqa: E402

SPLIT = bool(os.environ.get("CUBE_IMPORT_FORMS_SPLIT"))

SUPPORT = """\
from cube import cube as _cube, Array as _Array, Tensor as _Tensor, Comptime as _Comptime
from cube import f32 as _f32, i32 as _i32, u32 as _u32
from cube import ABSOLUTE_POS as _POS, UNIT_POS as _UPOS, UNIT_POS_PLANE as _UPP
from cube import PLANE_DIM as _PD, SharedMemory as _Shared, sync_cube as _sync
"""

FORMS = {
    "from": lambda name: (f"from cube import {name}\n", name),
    "cb": lambda name: ("import cube as cb\n", f"cb.{name}"),
    "L": lambda name: ("import cube.lang as L\n", f"L.{name}"),
}


@dataclass
class Group:
    """A kernel template. `stmts` maps each tested name to its statement(s) in the kernel
    body (`{X}`: the name as the form spells it, `{j}`: its index in the group, `{G}`: the
    group's size); `params`, `pre`, `post` and `module` may name any tested name as `{Name}`.
    `ref(inputs, rt, names)` gives the expected output arrays."""

    names: list[str]
    params: str
    stmts: dict[str, str]
    inputs: Callable[[list[str]], dict]
    ref: Callable
    pre: str = "i = _POS\nif i < n_units:"
    post: str = ""
    module: str = ""
    launch: tuple = ((2,), (32,))
    use_oracle: bool = True
    splittable: bool = True
    rtol: float = 2e-5
    plane: bool = False
    extra_names: list[str] = field(default_factory=list)


def _f(n, lo=0.1, hi=3.0):
    return np.linspace(lo, hi, n).astype(np.float32)


N = 64  # units of a 1-D launch (2 cubes of 32)

# ---- builtins ------------------------------------------------------------------------------

BUILTINS = list(cube.lang.BUILTINS)
B_LAUNCH = ((2, 3, 2), (8, 2, 2))


def _builtin_ref(inputs, rt, names):
    (cx_n, cy_n, cz_n), (dx, dy, dz) = B_LAUNCH
    g = len(names)
    out = np.zeros(len(inputs["out"]), np.uint32)
    p = rt.plane_size
    for cz in range(cz_n):
        for cy in range(cy_n):
            for cx in range(cx_n):
                for uz in range(dz):
                    for uy in range(dy):
                        for ux in range(dx):
                            unit = ux + uy * dx + uz * dx * dy
                            cpos = cx + cy * cx_n + cz * cx_n * cy_n
                            v = {"UNIT_POS": unit, "UNIT_POS_X": ux, "UNIT_POS_Y": uy,
                                 "UNIT_POS_Z": uz, "CUBE_POS": cpos, "CUBE_POS_X": cx,
                                 "CUBE_POS_Y": cy, "CUBE_POS_Z": cz, "CUBE_DIM": dx * dy * dz,
                                 "CUBE_DIM_X": dx, "CUBE_DIM_Y": dy, "CUBE_DIM_Z": dz,
                                 "CUBE_COUNT": cx_n * cy_n * cz_n, "CUBE_COUNT_X": cx_n,
                                 "CUBE_COUNT_Y": cy_n, "CUBE_COUNT_Z": cz_n,
                                 "ABSOLUTE_POS": cpos * dx * dy * dz + unit,
                                 "ABSOLUTE_POS_X": cx * dx + ux, "ABSOLUTE_POS_Y": cy * dy + uy,
                                 "ABSOLUTE_POS_Z": cz * dz + uz, "PLANE_DIM": p,
                                 "UNIT_POS_PLANE": unit % p}
                            pos = v["ABSOLUTE_POS"]
                            for j, name in enumerate(names):
                                out[pos * g + j] = v[name]
    return {"out": out}


def _units(launch_):
    cc, cd = launch_
    return math.prod(cc) * math.prod(cd)


# ---- math ----------------------------------------------------------------------------------

_erf = np.vectorize(math.erf)
MATH1 = {"sqrt": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v), "exp": np.exp, "log": np.log,
         "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "erf": _erf,
         "floor": np.floor, "ceil": np.ceil, "round": np.rint, "abs": np.abs}
MATH2 = {
    "min": ("{X}(x[i], y[i])", lambda x, y: np.minimum(x, y)),
    "max": ("{X}(x[i], y[i])", lambda x, y: np.maximum(x, y)),
    "pow": ("{X}(x[i], y[i])", lambda x, y: x ** y),
    "fma": ("{X}(x[i], y[i], 1.5)", lambda x, y: x * y + 1.5),
    "clamp": ("{X}(x[i], 0.5, 2.0)", lambda x, y: np.clip(x, 0.5, 2.0)),
    "select": ("{X}(x[i] > y[i], x[i], y[i] * 2.0)", lambda x, y: np.where(x > y, x, y * 2)),
    "cast": ("_f32({X}(x[i] * 3.0, _i32))", lambda x, y: np.trunc(
        (x * np.float32(3)).astype(np.float64))),
    # x * 1e30 * 1e30 overflows f32 to inf; inf - inf is nan
    "isnan": ("_f32(1.0) if {X}(x[i] * 1e30 * 1e30 - y[i] * 1e30 * 1e30) else _f32(0.5)",
              lambda x, y: np.where(np.isnan(_big(x) - _big(y)), 1.0, 0.5)),
    "isinf": ("_f32(1.0) if {X}(x[i] * 1e30 * 1e30) else _f32(0.5)",
              lambda x, y: np.where(np.isinf(_big(x)), 1.0, 0.5)),
    "isfinite": ("_f32(1.0) if {X}(x[i] * 1e30 * 1e30) else _f32(0.5)",
                 lambda x, y: np.where(np.isfinite(_big(x)), 1.0, 0.5)),
}


# the math added for Numba/Triton/Warp ports; x in [0.1, 0.9] suits asin, acos, atanh, and
# acosh takes 1 + x
MATH_MORE = {
    "tan": ("{X}(x[i])", lambda x, y: np.tan(x)),
    "asin": ("{X}(x[i])", lambda x, y: np.arcsin(x)),
    "acos": ("{X}(x[i])", lambda x, y: np.arccos(x)),
    "atan": ("{X}(x[i])", lambda x, y: np.arctan(x)),
    "sinh": ("{X}(x[i])", lambda x, y: np.sinh(x)),
    "cosh": ("{X}(x[i])", lambda x, y: np.cosh(x)),
    "asinh": ("{X}(x[i])", lambda x, y: np.arcsinh(x)),
    "acosh": ("{X}(x[i] + 1.0)", lambda x, y: np.arccosh(x + 1)),
    "atanh": ("{X}(x[i])", lambda x, y: np.arctanh(x)),
    "log2": ("{X}(y[i])", lambda x, y: np.log2(y)),
    "log10": ("{X}(y[i])", lambda x, y: np.log10(y)),
    "exp2": ("{X}(y[i])", lambda x, y: np.exp2(y)),
    "expm1": ("{X}(x[i])", lambda x, y: np.expm1(x)),
    "trunc": ("{X}(y[i] * -1.7)", lambda x, y: np.trunc(y.astype(np.float32) * np.float32(-1.7))),
    "atan2": ("{X}(x[i], -y[i])", lambda x, y: np.arctan2(x, -y)),
    "hypot": ("{X}(x[i], y[i])", lambda x, y: np.hypot(x, y)),
    "fmod": ("{X}(y[i] * -8.0, 3.0)", lambda x, y: np.fmod(y.astype(np.float32) * -8, 3)),
    "copysign": ("{X}(x[i], -y[i])", lambda x, y: np.copysign(x, -y)),
}


def _big(v):
    with np.errstate(all="ignore"):
        return v.astype(np.float32) * np.float32(1e30) * np.float32(1e30)


def _math_ref(table, two):
    def ref(inputs, rt, names):
        x = inputs["x"].astype(np.float64)
        y = inputs["y"].astype(np.float64) if two else None
        cols = [table[n][1](x, y) if two else table[n](x) for n in names]
        return {"out": np.stack(cols, 1).reshape(-1).astype(np.float32)}
    return ref


def _xy(names):
    return {"x": _f(N), "y": _f(N, 2.5, 0.2), "out": np.zeros(N * len(names), np.float32)}


# ---- types ---------------------------------------------------------------------------------

TYPE_NP = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8,
           "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
           "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "bool_": np.bool_,
           "boolean": np.bool_, "bf16": np.float32}


def _types_ref(inputs, rt, names):
    v = inputs["v"]
    cols = [v.astype(TYPE_NP[n]).astype(np.float32) for n in names]
    return {"out": np.stack(cols, 1).reshape(-1)}


def _types_inputs(names):
    v = np.arange(-100, 100, 200 // N + 1, dtype=np.int32)[:N]
    v = np.resize(v, N).astype(np.int32)
    return {"v": v, "out": np.zeros(N * len(names), np.float32)}


def _types_group(names):
    return Group(names=names, params="v: _Array[_i32], out: _Array[_f32]",
                 stmts={n: "out[i * {G} + {j}] = _f32({X}(v[i]))" for n in names},
                 inputs=_types_inputs, ref=_types_ref,
                 use_oracle="bf16" not in names)


# ---- atomics -------------------------------------------------------------------------------

ATOMIC_INIT = {"add": 0, "sub": 1000, "min": 1000, "max": 0, "and": 0xFFFFFFFF, "or": 0,
               "xor": 0}


def _atomics_inputs(names):
    rng = np.random.default_rng(3)
    h = np.zeros(8 * len(names), np.uint32)
    for j, n in enumerate(names):
        h[8 * j:8 * j + 8] = ATOMIC_INIT.get(n[7:], 0)
    return {"x": rng.integers(0, 100, N).astype(np.uint32), "h": h,
            "hx": (np.arange(N) * 7).astype(np.uint32), "hc": np.arange(N, dtype=np.uint32),
            "old": np.zeros(N * len(names), np.uint32)}


def _atomics_ref(inputs, rt, names):
    x, h = inputs["x"], inputs["h"].copy()
    hx, hc = inputs["hx"].copy(), inputs["hc"].copy()
    old = inputs["old"].copy()
    g = len(names)
    b = x % 8
    for j, n in enumerate(names):
        op = n[7:]
        seg = h[8 * j:8 * j + 8]
        for k in range(8):
            vals = x[b == k]
            if op == "add":
                seg[k] += len(vals)
            elif op == "sub":
                seg[k] -= len(vals)
            elif op == "min" and len(vals):
                seg[k] = min(seg[k], vals.min())
            elif op == "max" and len(vals):
                seg[k] = max(seg[k], vals.max())
            elif op in ("and", "or", "xor"):
                f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
                for v in vals:
                    seg[k] = f(seg[k], v)
        if op == "exchange":
            old[np.arange(N) * g + j] = hx
            hx = x.copy()
        if op == "cas":
            old[np.arange(N) * g + j] = hc
            hc = np.where(np.arange(N) % 2 == 0, np.uint32(5), hc).astype(np.uint32)
    return {"h": h, "hx": hx, "hc": hc, "old": old}


ATOMIC_STMT = {
    "exchange": "old[i * {G} + {j}] = {X}(hx, i, x[i])",
    "cas": "old[i * {G} + {j}] = {X}(hc, i, i if i % 2 == 0 else 999, 5)",
}

# ---- plane ops -----------------------------------------------------------------------------

PLANE = {
    "plane_sum": "{X}(v)", "plane_prod": "{X}(v)", "plane_max": "{X}(v)", "plane_min": "{X}(v)",
    "plane_all": "_i32({X}(v > 1))", "plane_any": "_i32({X}(v > 2))",
    "plane_broadcast": "{X}(v, 0)", "plane_shuffle": "{X}(v, (_UPP + 1) % _PD)",
    "plane_shuffle_xor": "{X}(v, _PD // 2)", "plane_inclusive_sum": "{X}(v)",
    "plane_exclusive_sum": "{X}(v)", "plane_inclusive_prod": "{X}(v)",
    "plane_exclusive_prod": "{X}(v)",
}


def _plane_ref(inputs, rt, names):
    p = rt.plane_size
    v = inputs["v"].astype(np.int64)
    g = len(names)
    out = np.zeros(N * g, np.int64)
    for base in range(0, N, p):
        w = v[base:base + p]
        for lane in range(p):
            r = {"plane_sum": w.sum(), "plane_prod": w.prod(), "plane_max": w.max(),
                 "plane_min": w.min(), "plane_all": int((w > 1).all()),
                 "plane_any": int((w > 2).any()), "plane_broadcast": w[0],
                 "plane_shuffle": w[(lane + 1) % p], "plane_shuffle_xor": w[lane ^ (p // 2)],
                 "plane_inclusive_sum": w[:lane + 1].sum(),
                 "plane_exclusive_sum": w[:lane].sum(),
                 "plane_inclusive_prod": w[:lane + 1].prod(),
                 "plane_exclusive_prod": w[:lane].prod()}
            for j, n in enumerate(names):
                out[(base + lane) * g + j] = r[n]
    return {"out": out.astype(np.int32)}


# ---- the table -----------------------------------------------------------------------------

GROUPS: dict[str, Group] = {
    "builtins": Group(
        names=BUILTINS, params="out: _Array[_u32]",
        stmts={n: "out[i * {G} + {j}] = {X}" for n in BUILTINS},
        inputs=lambda names: {"out": np.zeros(_units(B_LAUNCH) * len(names), np.uint32)},
        ref=_builtin_ref, launch=B_LAUNCH),
    "math1": Group(
        names=list(MATH1), params="x: _Array[_f32], y: _Array[_f32], out: _Array[_f32]",
        stmts={n: "out[i * {G} + {j}] = {X}(x[i])" for n in MATH1},
        inputs=_xy, ref=_math_ref(MATH1, False)),
    "math2": Group(
        names=list(MATH2), params="x: _Array[_f32], y: _Array[_f32], out: _Array[_f32]",
        stmts={n: "out[i * {G} + {j}] = " + e for n, (e, _) in MATH2.items()},
        inputs=_xy, ref=_math_ref(MATH2, True)),
    "math_more": Group(
        names=list(MATH_MORE), params="x: _Array[_f32], y: _Array[_f32], out: _Array[_f32]",
        stmts={n: "out[i * {G} + {j}] = " + e for n, (e, _) in MATH_MORE.items()},
        inputs=lambda names: {"x": _f(N, 0.1, 0.9), "y": _f(N, 2.5, 0.2),
                              "out": np.zeros(N * len(names), np.float32)},
        ref=_math_ref(MATH_MORE, True),
        rtol=5e-4),  # lavapipe's SPIR-V atan family (test_math_functions_more: ulps)
    "types": _types_group(["f32", "i32", "u32", "bool_", "boolean"]),
    "types_f16": _types_group(["f16", "bf16"]),
    "types_f64": _types_group(["f64"]),
    "types_64bit_ints": _types_group(["i64", "u64"]),
    "types_small_ints": _types_group(["i8", "i16", "u8", "u16"]),
    "annotations": Group(
        names=["Array", "Tensor", "Line", "Comptime"],
        params="a: {Array}[_f32], t: {Tensor}[_f32], ln: {Array}[{Line}[_f32]], "
               "out: {Array}[_f32], K: {Comptime}[int]",
        stmts={"Array": "out[i] = a[i] * 2.0",
               "Tensor": "out[i] += _f32(t.shape(0) * 10 + t.stride(0)) + t[i]",
               "Line": "out[i] += ln[i // 4][i % 4] + {Line}[_f32, 2](_f32(K))[1]",
               "Comptime": "out[i] += _f32(K * 100)"},
        inputs=lambda names: {"a": _f(N), "t": _f(N).reshape(8, 8),
                              "ln": Lines(_f(N, 5.0, 6.0), 4),
                              "out": np.zeros(N, np.float32), "K": 3},
        ref=lambda inp, rt, names: {"out": inp["a"] * 2 + np.float32(88) + inp["t"].reshape(-1)
                                    + inp["ln"].array[np.arange(N) // 4 * 4 + np.arange(N) % 4]
                                    + 3 + 300},
        pre="i = _POS\nif i < a.len():", splittable=False),
    "TypeVar": Group(
        names=["TypeVar"], params="a: _Array[F], out: _Array[F], s: F",
        module="F = {TypeVar}(\"F\")\n",
        stmts={"TypeVar": "out[i] = a[i] * s + F(1)"},
        inputs=lambda names: {"a": _f(N), "out": np.zeros(N, np.float32),
                              "s": np.float32(2.0)},
        ref=lambda inp, rt, names: {"out": inp["a"] * 2 + 1}, pre="i = _POS\nif i < a.len():"),
    "range_comptime": Group(
        names=["range", "comptime"], params="out: _Array[_i32], K: _Comptime[int]",
        stmts={"range": "acc = 0\nfor k in {X}(_i32(i) % 5):\n    acc += _i32(k)\n"
                        "for k in {X}(3, unroll=True):\n    acc += k * 10\n"
                        "out[i * {G} + {j}] = acc",
               "comptime": "out[i * {G} + {j}] = {X}(K * 2) + _i32(i)"},
        inputs=lambda names: {"out": np.zeros(N * len(names), np.int32), "K": 4},
        ref=lambda inp, rt, names: {"out": np.stack(
            [{"range": np.array([sum(range(u % 5)) + 30 for u in range(N)]),
              "comptime": 8 + np.arange(N)}[n] for n in names], 1).reshape(-1).astype(
            np.int32)}),
    "atomics": Group(
        names=[n for n in cube.lang.ATOMICS if n != "atomic_cas"],
        params="x: _Array[_u32], h: _Array[_u32], hx: _Array[_u32], hc: _Array[_u32], "
               "old: _Array[_u32]",
        stmts={n: ATOMIC_STMT.get(n[7:], "{X}(h, x[i] % 8 + 8 * {j}, " + (
            "x[i])" if n[7:] in ("min", "max", "and", "or", "xor") else "1)"))
               for n in cube.lang.ATOMICS},
        inputs=_atomics_inputs, ref=_atomics_ref),
    # its own kernel: a target without cas-with-result (SPIR-V on global u32) skips only it
    "atomic_cas": Group(
        names=["atomic_cas"],
        params="x: _Array[_u32], h: _Array[_u32], hx: _Array[_u32], hc: _Array[_u32], "
               "old: _Array[_u32]",
        stmts={"atomic_cas": ATOMIC_STMT["cas"]}, inputs=_atomics_inputs, ref=_atomics_ref),
    "plane": Group(
        names=list(PLANE), params="x: _Array[_i32], out: _Array[_i32]",
        pre="i = _POS\nv = x[i]\nif i < n_units:",
        stmts={n: "out[i * {G} + {j}] = " + e for n, e in PLANE.items()},
        inputs=lambda names: {"x": np.random.default_rng(5).integers(1, 4, N).astype(
            np.int32), "out": np.zeros(N * len(names), np.int32)},
        ref=lambda inp, rt, names: _plane_ref({"v": inp["x"]}, rt, names),
        use_oracle=False, plane=True),
    "memory": Group(
        names=["SharedMemory", "sync_cube", "LocalArray"],
        params="x: _Array[_f32], out: _Array[_f32]",
        pre="i = _POS\nu = _UPOS",
        stmts={"SharedMemory": "s = {X}(_f32, 32)\ns[u] = x[i]\n_sync()\n"
                               "out[i * {G} + {j}] = s[31 - u]",
               "sync_cube": "s2 = _Shared(_f32, 32)\ns2[u] = x[i] * 2.0\n{X}()\n"
                            "out[i * {G} + {j}] = s2[31 - u]",
               "LocalArray": "t = {X}(_f32, 4)\nfor k in range(4):\n    t[k] = x[i] + _f32(k)\n"
                             "out[i * {G} + {j}] = t[0] + t[3]"},
        inputs=lambda names: {"x": _f(N), "out": np.zeros(N * len(names), np.float32)},
        ref=lambda inp, rt, names: {"out": np.stack(
            [{"SharedMemory": inp["x"].reshape(2, 32)[:, ::-1].reshape(-1),
              "sync_cube": inp["x"].reshape(2, 32)[:, ::-1].reshape(-1) * 2,
              "LocalArray": inp["x"] * 2 + 3}[n] for n in names], 1).reshape(-1)},
        use_oracle=False),
    "cube": Group(
        names=["cube"], params="x: _Array[_f32], out: _Array[_f32]",
        module="@{cube}\ndef _twice(v):\n    return v * 2.0\n",
        stmts={"cube": "out[i] = _twice(x[i])"},
        inputs=lambda names: {"x": _f(N), "out": np.zeros(N, np.float32)},
        ref=lambda inp, rt, names: {"out": inp["x"] * 2}, pre="i = _POS\nif i < x.len():"),
}

# The names of cube.__all__ that are not used inside kernels (host API, modules, errors).
NOT_KERNEL_NAMES = {"BackendCompileError", "CapabilityError", "CompileError", "CubeError",
                    "CubeFunction", "LaunchError", "RuntimeUnavailable", "available_runtimes",
                    "capabilities", "errors", "frontend", "kernel", "lang", "recording",
                    "runtime", "targets", "targets_table"}


def test_every_public_name_is_covered():
    covered = {n for g in GROUPS.values() for n in g.names}
    missing = set(cube.__all__) - covered - NOT_KERNEL_NAMES
    assert not missing, f"public names with no import-form kernel: {sorted(missing)}"


# ---- building and running ------------------------------------------------------------------

def _cases():
    out = []
    for gname, g in GROUPS.items():
        subsets = [[n] for n in g.names] if SPLIT and g.splittable else [g.names]
        for names in subsets:
            for form in FORMS:
                if form == "L" and not all(hasattr(cube.lang, n) for n in names):
                    continue
                label = gname if len(subsets) == 1 else f"{gname}.{names[0]}"
                out.append(pytest.param(gname, tuple(names), form, id=f"{label}-{form}"))
    return out


def build_source(g: Group, names, form: str) -> str:
    imports, refs = set(), {}
    for n in names:
        imp, ref = FORMS[form](n)
        imports.add(imp)
        refs[n] = ref
    G = len(names)
    body = []
    for j, n in enumerate(names):
        body.append(textwrap.dedent(g.stmts[n]).format(X=refs[n], j=j, G=G, **refs))
    pre = g.pre.format(**refs)
    n_units = _units(g.launch)
    lines = []
    indent = ""
    for ln in pre.split("\n"):
        lines.append(ln.replace("n_units", str(n_units)))
    if pre.rstrip().endswith(":"):
        indent = "    "
    for b in body:
        lines += [indent + ln for ln in b.split("\n")]
    if g.post:
        lines += g.post.format(**refs).split("\n")
    src = "".join(sorted(imports)) + SUPPORT + "\n" + g.module.format(**refs) + "\n\n"
    src += f"@_cube(launch=True)\ndef k({g.params.format(**refs)}):\n"
    src += textwrap.indent("\n".join(lines), "    ") + "\n"
    return src


@pytest.mark.parametrize("gname,names,form", _cases())
def test_import_form(rt, gname, names, form):
    g = GROUPS[gname]
    names = list(names)
    src = build_source(g, names, form)
    mod = load_module(src, f"form_{gname}_{form}")
    inputs = g.inputs(names)
    cc, cd = g.launch
    want = g.ref(inputs, rt, names)
    got = launch(rt, mod.k, cc, cd, **inputs)
    for k, w in want.items():
        assert_close(got[k], np.asarray(w).astype(got[k].dtype),
                     f"{rt.name} {form}: '{k}' differs from NumPy\n{src}", rtol=g.rtol)
    if g.use_oracle:
        sim = oracle(mod.k, cc, cd, plane_dim=rt.plane_size, **inputs)
        for k, w in want.items():
            assert_close(sim[k], np.asarray(w).astype(sim[k].dtype),
                         f"oracle {form}: '{k}' differs from NumPy\n{src}", rtol=g.rtol)

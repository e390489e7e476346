"""The frontend mutation fuzzer's machinery (tests/cube/test_fuzz_mutations.py): a corpus of
small valid kernels, random AST mutations of them, and a runner that writes each mutant to a
real module file, imports it, launches it on the IR interpreter and the CPU runtime and
classifies what happened.

A mutant must end in one of
- `compile-error` / `launch-error`: a CompileError whose location is the mutant's file, a line
  of it that lies inside one of its functions, with that line quoted and `file:line:col` in
  the message; or a LaunchError (a launch-time argument problem);
- `agree`: it compiles, and the interpreter and the CPU runtime give what cube.simulate (the
  kernel's own Python, run per unit) gives on the same inputs (interp against cpu where the
  simulator cannot model the kernel: shared memory, sync_cube);
- a neutral outcome the fuzzer cannot judge: `python-rejects` (CPython refuses the mutant itself: a
  SyntaxError, a NameError while importing), `import-refused` (cube's own TypeError for a wrong
  decorator or annotation argument at import, IMPORT_CHECKS), `sim-race` (the mutant races: its
  result is undefined), `sim-undefined` (it reads a local array's element before any write:
  undefined, the simulator refuses it), `plane-size` (plane operations on runtimes of different
  plane sizes), `sim-gap` (the simulator raises where the language documents a meaning NumPy
  lacks: ORACLE_GAPS), `timeout` (both the kernel and the simulator run past the time limit: a
  mutated loop that never ends).
Everything else is a finding (`BUG_KINDS`): `internal` (any other exception from the
compiler), `bad-location`, `mismatch`, `cpu-differs` (interp accepts, cpu refuses or fails),
`sim-rejects` (the kernel compiles but the simulator raises a Python error on it: suspicious,
the frontend may give a meaning to Python that has none), `hang` (the kernel runs past the
limit where the simulator finishes) and `unlocated` (a CubeError with no location).

Everything is seeded: mutant number k is the same source every run (`make_mutant(k)`).
"""
from __future__ import annotations

import ast
import copy
import importlib.util
import itertools
import random
import re
import signal
import sys
import tempfile
import traceback
import typing
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pystyle_support import copy_args, differences, launch, oracle

import cube as cb
from cube import lang
from cube.kernel import CubeFunction
from cube.simulate import (
    Lines,
    SimulationError,
    SimulationUnsupported,
    UninitialisedRead,
)

ROOT = Path(cb.__file__).resolve().parents[1]  # the library as imported
LIBRARY_DIRS = tuple(str(ROOT / d) + "/" for d in ("cube", "cube_ir", "codegen", "runtimes"))

BUG_KINDS = ("internal", "bad-location", "mismatch", "cpu-differs", "sim-rejects", "hang",
             "unlocated")

HEADER = '''\
import math
import typing
import cube as cb
import cube.lang as L
from cube import (cube, Array, Tensor, Line, Comptime, SharedMemory, f32, i32, u32,
                  ABSOLUTE_POS, UNIT_POS, UNIT_POS_X, CUBE_POS, CUBE_DIM)

F = typing.TypeVar("F")
SCALE = 3
TABLE = (5, 7, 9)


def plain_py(x):
    return x + 1

'''


@dataclass
class Seed:
    """One valid kernel (`kernel`, with its helpers) and how to launch it."""
    src: str
    cube_count: int | tuple = 2
    cube_dim: int | tuple = 16
    n: int = 32  # elements per array argument unless `sizes` says otherwise
    line: int = 4  # line size given to Array[Line[T]] parameters
    sizes: dict = field(default_factory=dict)
    shapes: dict = field(default_factory=dict)  # Tensor parameters
    values: dict = field(default_factory=dict)  # scalar and comptime parameters
    types: dict = field(default_factory=dict)  # type variable -> numpy dtype
    sim: bool = True  # False: the simulator cannot model it (shared memory, sync_cube)


CORPUS: dict[str, Seed] = {
    "axpy": Seed('''
@cube(launch=True)
def kernel(x: Array[f32], y: Array[f32], out: Array[f32], alpha: f32):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = alpha * x[i] + y[i]
''', values={"alpha": 1.5}),
    "int_ops": Seed('''
@cube(launch=True)
def kernel(a: Array[i32], b: Array[i32], out: Array[i32]):
    i = ABSOLUTE_POS
    if i < out.len():
        p = a[i]
        q = b[i]
        out[i] = (p * 3 + q) ^ (p >> 1) - q % 7 + p // 3
'''),
    "row_sum": Seed('''
@cube(launch=True)
def kernel(x: Array[f32], out: Array[f32], cols: u32):
    row = ABSOLUTE_POS
    if row < out.len():
        acc = 0.0
        for j in range(cols):
            acc += x[row * cols + j]
        out[row] = acc
''', cube_count=1, cube_dim=8, sizes={"out": 8}, values={"cols": 4}),
    "early_return": Seed('''
@cube
def h_clip(v, lo, hi):
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


@cube(launch=True)
def kernel(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < x.len():
        out[i] = h_clip(x[i], -1.0, 1.0) * 2.0
'''),
    "comptime_unroll": Seed('''
@cube(launch=True)
def kernel(x: Array[f32], out: Array[f32], K: Comptime[int], MODE: Comptime[str]):
    i = ABSOLUTE_POS
    if i < out.len():
        acc = x[i]
        for k in cb.range(K, unroll=True):
            if MODE == "mul":
                acc = acc * 0.5 + k
            else:
                acc = acc + k
        out[i] = acc
''', values={"K": 3, "MODE": "mul"}),
    "lines": Seed('''
@cube(launch=True)
def kernel(x: Array[Line[f32]], y: Array[Line[f32]], out: Array[Line[f32]]):
    i = ABSOLUTE_POS
    if i < out.len():
        v = x[i]
        w = y[i] * 2.0
        out[i] = v + w - cb.abs(v)
''', cube_count=1, cube_dim=8),
    "line_lanes": Seed('''
@cube(launch=True)
def kernel(x: Array[Line[f32]], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < x.len():
        v = x[i]
        s = 0.0
        for k in cb.range(v.size, unroll=True):
            s += v[k]
        out[i] = s
''', cube_count=1, cube_dim=8, sizes={"out": 8}),
    "shared_reduce": Seed('''
@cube(launch=True)
def kernel(x: Array[f32], out: Array[f32], BLOCK: Comptime[int]):
    smem = SharedMemory(f32, BLOCK)
    t = UNIT_POS
    smem[t] = x[ABSOLUTE_POS]
    cb.sync_cube()
    s = u32(BLOCK // 2)
    while s > 0:
        if t < s:
            smem[t] += smem[t + s]
        cb.sync_cube()
        s //= 2
    if t == 0:
        out[CUBE_POS] = smem[0]
''', cube_count=2, cube_dim=8, sizes={"x": 16, "out": 2}, values={"BLOCK": 8}, sim=False),
    "collatz": Seed('''
@cube(launch=True)
def kernel(a: Array[u32], out: Array[u32]):
    i = ABSOLUTE_POS
    if i < a.len():
        v = a[i] + 1
        steps = u32(0)
        while v != 1 and steps < 50:
            if v % 2 == 0:
                v = v // 2
            else:
                v = 3 * v + 1
            steps += 1
        out[i] = steps
'''),
    "tuple_fib": Seed('''
@cube(launch=True)
def kernel(a: Array[i32], out: Array[i32], n: i32):
    i = ABSOLUTE_POS
    if i < out.len():
        x, y = a[i], i32(1)
        for k in range(n):
            x, y = y, x + y
        out[i] = x - y
''', values={"n": 5}),
    "ternary_cast": Seed('''
@cube(launch=True)
def kernel(x: Array[f32], out: Array[i32], thr: f32):
    i = ABSOLUTE_POS
    if i < x.len():
        v = x[i]
        r = i32(v * 10.0) if v > thr else -i32(cb.floor(v))
        out[i] = r + i32(i % 3)
''', values={"thr": 0.2}),
    "tuple_helper": Seed('''
@cube
def h_divmod(a, b):
    return a // b, a % b


@cube(launch=True)
def kernel(a: Array[i32], out_q: Array[i32], out_r: Array[i32], d: i32):
    i = ABSOLUTE_POS
    if i < a.len():
        q, r = h_divmod(a[i], d)
        out_q[i] = q
        out_r[i] = r
''', values={"d": 3}),
    "break_continue": Seed('''
@cube(launch=True)
def kernel(x: Array[i32], out: Array[i32], N: Comptime[int]):
    i = ABSOLUTE_POS
    if i < out.len():
        found = -1
        for j in range(N):
            v = x[(i + j) % N]
            if v < 0:
                continue
            if v > 10:
                found = i32(j)
                break
        out[i] = found
''', cube_count=1, n=16, values={"N": 16}),
    "tensor2d": Seed('''
@cube(launch=True)
def kernel(t: Tensor[f32], out: Tensor[f32]):
    r = CUBE_POS
    c = UNIT_POS
    if r < t.shape(0) and c < t.shape(1):
        o = r * t.stride(0) + c * t.stride(1)
        out[o] = t[o] * 2.0 + f32(c)
''', cube_count=4, cube_dim=8, shapes={"t": (4, 8), "out": (4, 8)}),
    "histogram": Seed('''
@cube(launch=True)
def kernel(x: Array[u32], hist: Array[u32], BINS: Comptime[int]):
    i = ABSOLUTE_POS
    if i < x.len():
        cb.atomic_add(hist, x[i] % BINS, u32(1))
''', sizes={"hist": 8}, values={"BINS": 8}),
    "math": Seed('''
@cube(launch=True)
def kernel(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < x.len():
        v = x[i]
        out[i] = cb.sqrt(cb.abs(v)) + cb.exp(-v * v) - max(v, 0.0) + cb.clamp(v, -0.5, 0.5)
'''),
    "helper_chain": Seed('''
@cube
def h_scale(v, k=2.0):
    return v * k


@cube
def h_poly(v, DEG: Comptime[int]):
    acc = 0.0
    for d in cb.range(DEG, unroll=True):
        acc = h_scale(acc, 0.5) + v
    return acc


@cube(launch=True)
def kernel(x: Array[f32], out: Array[f32], DEG: Comptime[int]):
    i = ABSOLUTE_POS
    if i < x.len():
        out[i] = h_poly(x[i], DEG)
''', values={"DEG": 3}),
    "local_array": Seed('''
@cube(launch=True)
def kernel(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < x.len():
        buf = cb.LocalArray(f32, 4)
        for k in range(4):
            buf[k] = x[i] * f32(k)
        s = 0.0
        for k in range(4):
            s += buf[3 - k]
        out[i] = s
'''),
    "elif_bool": Seed('''
@cube(launch=True)
def kernel(a: Array[i32], out: Array[i32], lo: i32, hi: i32):
    i = ABSOLUTE_POS
    if i < a.len():
        v = a[i]
        inside = v >= lo and v <= hi
        if v < lo:
            out[i] = lo
        elif not inside:
            out[i] = hi
        else:
            out[i] = v * SCALE + TABLE[1]
''', values={"lo": -3, "hi": 8}),
    "popcount": Seed('''
@cube(launch=True)
def kernel(a: Array[u32], out: Array[u32]):
    i = ABSOLUTE_POS
    if i < a.len():
        v = a[i]
        c = u32(0)
        while v != 0:
            v &= v - 1
            c += 1
        out[i] = (c << 2) | (a[i] >> 3)
'''),
    "grid_stride": Seed('''
@cube(launch=True)
def kernel(x: Array[f32], out: Array[f32], n: u32):
    i = ABSOLUTE_POS
    stride = CUBE_DIM * cb.CUBE_COUNT
    while i < n:
        out[i] = x[i] * x[i]
        i += stride
''', cube_count=2, cube_dim=4, values={"n": 32}),
    "generic": Seed('''
@cube(launch=True)
def kernel(x: Array[F], out: Array[F]):
    i = ABSOLUTE_POS
    if i < x.len():
        out[i] = x[i] * F(2) + F(1)
''', types={"x": np.float32, "out": np.float32}),
    "tuple_loop": Seed('''
@cube(launch=True)
def kernel(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < out.len():
        acc = 0.0
        for w in TABLE:
            acc += x[i] * w
        out[i] = acc
'''),
    "select_minmax": Seed('''
@cube
def h_sat(v, top: Comptime[int]):
    return cb.select(v > top, top, v)


@cube(launch=True)
def kernel(a: Array[i32], b: Array[i32], out: Array[i32]):
    i = ABSOLUTE_POS
    if i < a.len():
        lo = min(a[i], b[i])
        hi = max(a[i], b[i])
        out[i] = h_sat(hi - lo, 12) + abs(lo)
'''),
}


# ---- mutations ---------------------------------------------------------------------------

MODULE_NAMES = {"cb", "L", "math", "typing"}
BUILTIN_NAMES = ["ABSOLUTE_POS", "UNIT_POS", "UNIT_POS_X", "CUBE_POS", "CUBE_DIM", "SCALE",
                 "TABLE"]
LITERALS = ["0", "1", "-1", "7", "2.5", "-0.5", "True", "False", "None", "'s'", "(1, 2)",
            "2 ** 31", "4294967296", "1e30", "0.0", "[1]"]
ANNOTATIONS = ["Array[f32]", "Array[i32]", "Array[u32]", "Array[Line[f32]]", "Array[Line[i32]]",
               "Tensor[f32]", "Comptime[int]", "Comptime[float]", "f32", "i32", "u32", "int",
               "float", "bool", "Line[f32, 4]", "Array[F]", "F", "Array[Line[f32, 2]]",
               "Comptime[str]", "cb.f64"]
CASTS = ["f32", "i32", "u32", "float", "int", "bool", "cb.f64", "cb.u8", "cb.i64"]
INTRINSICS = ["cb.sqrt", "cb.exp", "cb.abs", "abs", "cb.floor", "min", "max", "cb.clamp",
              "cb.select", "cb.fma", "cb.pow", "cb.cast", "len", "cb.comptime", "round",
              "cb.atomic_add", "cb.plane_sum", "cb.sync_cube", "cb.SharedMemory",
              "cb.LocalArray", "range", "cb.range", "cb.rsqrt", "cb.erf", "cb.isnan"]

# statement templates inserted at a random point: {e} an in-scope expression, {n} a name in
# scope (or a fresh one), {a} an array parameter
INSERTS = {
    "with": "with plain_py({e}):\n    {n} = {e}",
    "try": "try:\n    {n} = {e}\nexcept Exception:\n    pass",
    "try_finally": "try:\n    {n} = {e}\nfinally:\n    {n} = {e}",
    "lambda": "{n} = (lambda v: v + 1)({e})",
    "lambda_assign": "_lam = lambda v: v",
    "listcomp": "{n} = [{e} for _q in range(2)][0]",
    "genexp": "{n} = sum((_q for _q in range(3)))",
    "dictcomp": "{n} = {{_q: {e} for _q in range(2)}}[0]",
    "global": "global {n}",
    "nonlocal": "nonlocal {n}",
    "yield": "yield {e}",
    "yield_from": "yield from range(2)",
    "await": "await {e}",
    "star_args": "{n} = max(*({e}, {e}))",
    "star_kwargs": "{n} = cb.sqrt(**{{'x': {e}}})",
    "fstring": "{n} = f'{{{e}}}'",
    "walrus": "if (_w := {e}) > 0:\n    {n} = _w",
    "chained_cmp": "{n} = 0 < {e} < 10",
    "chained_cmp_if": "if -1 < {e} <= 4:\n    {n} = {e}",
    "del": "del {n}",
    "assert": "assert {e} > 0",
    "match": "match {e}:\n    case 1:\n        {n} = {e}\n    case _:\n        pass",
    "raise": "if {e} < -100:\n    raise ValueError('x')",
    "print": "print({e})",
    "list_literal": "{n} = [{e}, {e}]",
    "set_literal": "{n} = {{{e}}}",
    "dict_literal": "{n} = {{1: {e}}}",
    "string_op": "{n} = 'a' + 'b'",
    "import": "import os",
    "nested_def": "def _g():\n    return 1",
    "class_def": "class _C:\n    pass",
    "for_else": "for _q in range(3):\n    {n} = {e}\nelse:\n    {n} = {e}",
    "while_else": "_q = 0\nwhile _q < 2:\n    _q += 1\nelse:\n    {n} = {e}",
    "starred_assign": "_p, *_r = (1, 2, 3)",
    "multi_target": "{n} = _z = {e}",
    "ann_assign": "{n}: f32 = {e}",
    "ann_assign_int": "{n}: i32 = {e}",
    "is_none": "{n} = {e} is None",
    "in_tuple": "{n} = {e} in (1, 2)",
    "matmul": "{n} = {e} @ {e}",
    "attr_on_scalar": "{n} = {e}.real",
    "method_on_scalar": "{n} = {e}.bit_length()",
    "call_value": "{n} = {e}()",
    "unknown_kw": "for _q in cb.range(2, unrol=True):\n    pass",
    "kw_intrinsic": "{n} = cb.sqrt(x={e})",
    "swap_subscripts": "{a}[0], {a}[1] = {a}[1], {a}[0]",
    "aug_subscript": "{a}[ABSOLUTE_POS] += {e}",
    "index_scalar": "{n} = {e}[0]",
    "index_scalar_store": "{n}[0] = {e}",
    "slice": "{n} = {a}[1:3]",
    "tuple_index": "{n} = {a}[0, 1]",
    "array_attr": "{n} = {a}.shape",
    "array_len_builtin": "{n} = len({a})",
    "array_as_value": "{n} = {a} + 1",
    "array_compare": "if {a}:\n    {n} = {e}",
    "assign_array": "{a} = {e}",
    "assign_builtin": "ABSOLUTE_POS = {e}",
    "assign_module": "cb = {e}",
    "break_top": "break",
    "continue_top": "continue",
    "break_in_if": "if {e} > 0:\n    break",
    "return_value": "return {e}",
    "return_tuple": "return ({e}, {e})",
    "return_none": "return None",
    "runtime_unroll": "for _q in cb.range({e}, unroll=True):\n    {n} = {e}",
    "runtime_unroll_stop": "for _q in cb.range(0, {e}, 1, unroll=True):\n    pass",
    "runtime_shared": "_sm = SharedMemory(f32, {e})",
    "runtime_local": "_la = cb.LocalArray(f32, {e})",
    "runtime_comptime": "{n} = cb.comptime({e} * 2)",
    "shape_runtime": "_la = cb.LocalArray(f32, {a}.len())",
    "line_mix": "{n} = Line[f32, 2](1.0) + Line[f32, 4](2.0)",
    "line_mix_value": "{n} = Line[f32, 4]({e}) * Line[f32, 2]({e})",
    "line_lane_oob": "{n} = Line[f32, 4]({e})[5]",
    "line_of_line": "{n} = Line[f32, 4](Line[f32, 2](1.0))",
    "line_store": "{a}[0] = Line[f32, 4]({e})",
    "line_bad_size": "{n} = Line[f32, 3]({e})",
    "line_zero": "{n} = Line[f32, 0]({e})",
    "step_zero": "for _q in range(0, 4, 0):\n    {n} = {e}",
    "neg_step": "for _q in range(4, 0, -1):\n    {n} = {e}",
    "runtime_step": "for _q in range(0, 8, {e}):\n    pass",
    "range_float": "for _q in range(2.5):\n    pass",
    "range_many": "for _q in range(1, 2, 3, 4):\n    pass",
    "for_tuple_target": "for _q, _r in range(3):\n    pass",
    "for_over_array": "for _q in {a}:\n    pass",
    "while_true_break": "while True:\n    {n} = {e}\n    break",
    "sync_in_branch": "if {e} > 0:\n    cb.sync_cube()",
    "atomic_on_scalar": "cb.atomic_add({e}, 0, 1)",
    "atomic_wrong_val": "cb.atomic_add({a}, 0, (1, 2))",
    "plane_op": "{n} = cb.plane_sum({e})",
    "intrinsic_tuple": "{n} = cb.sqrt((1.0, 2.0))",
    "intrinsic_string": "{n} = cb.exp('x')",
    "intrinsic_array": "{n} = cb.abs({a})",
    "intrinsic_none": "{n} = max(None, {e})",
    "intrinsic_noargs": "{n} = cb.sqrt()",
    "cast_string": "{n} = f32('1.5')",
    "cast_tuple": "{n} = i32((1, 2))",
    "cast_array": "{n} = f32({a})",
    "cast_two": "{n} = f32({e}, {e})",
    "plain_python": "{n} = plain_py({e})",
    "python_builtin": "{n} = sum({e})",
    "undefined": "{n} = undefined_zz + {e}",
    "undefined_call": "{n} = undefined_fn({e})",
    "undefined_attr": "{n} = cb.not_a_thing({e})",
    "recursive_kernel": "kernel.launch(None)",
    "call_kernel": "{n} = kernel({e})",
    "huge_int": "{n} = 123456789012345678901234567890",
    "big_shift": "{n} = 1 << 40",
    "neg_shift": "{n} = {e} << -1",
    "div_zero_lit": "{n} = {e} // 0",
    "fdiv_zero_lit": "{n} = 1.0 / 0",
    "pow_neg": "{n} = 2 ** -1",
    "bool_arith": "{n} = True + {e}",
    "not_value": "{n} = not {e}",
    "invert_value": "{n} = ~{e}",
    "complex_lit": "{n} = 1j",
    "bytes_lit": "{n} = b'x'",
    "ellipsis": "{n} = ...",
    "none_arith": "{n} = None + {e}",
    "str_index": "{n} = 'abc'[{e}]",
    "tuple_index_runtime": "{n} = TABLE[{e}]",
    "tuple_index_oob": "{n} = TABLE[5]",
    "tuple_unpack_bad": "_p, _r = (1, 2, 3)",
    "tuple_unpack_scalar": "_p, _r = {e}",
    "swap_names": "{n}, _z = _z0, {n}",
}

# replacing a call's argument / an expression
EXPR_WRAPS = ["plain_py({e})", "({e}, {e})", "'{e}'", "[{e}]", "{e}[0]", "{e}[1:2]",
              "lambda: {e}", "(_w := {e})", "f'{{{e}}}'", "-{e}", "not {e}", "~{e}",
              "{e} if {e} else {e}", "0 < {e} < 10", "{e} is None", "{e} in (1, 2)",
              "{e} ** 2", "{e} ** 0.5", "{e} ** -1", "{e} << 3", "{e} >> 40", "{e} // 0",
              "{e} % 0", "{e} / 0", "abs({e})", "-abs({e})", "min({e}, 0)", "max({e}, 1.5)",
              "cb.cast({e}, f32)", "cb.cast({e}, i32)", "i32({e})", "u32({e})", "f32({e})",
              "bool({e})", "int({e})", "float({e})", "{e} and {e}", "{e} or 0", "(not {e})",
              "cb.select({e}, 1, 2)", "cb.comptime({e})", "{e}.size", "{e}.len()"]

BINOPS = [ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift,
          ast.RShift, ast.BitOr, ast.BitXor, ast.BitAnd, ast.MatMult]
CMPOPS = [ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot, ast.In,
          ast.NotIn]


class _Ctx:
    """The cube functions of a parsed mutant and what is in scope where."""

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and any(
            "cube" in ast.unparse(d) for d in n.decorator_list)]
        self.kernel = next(f for f in self.funcs if f.name == "kernel")
        self.helpers = [f for f in self.funcs if f is not self.kernel]

    @staticmethod
    def params(fn) -> list[str]:
        return [a.arg for a in fn.args.args]

    def array_params(self, fn) -> list[str]:
        out = [a.arg for a in self.kernel.args.args
               if a.annotation is not None and ast.unparse(a.annotation).startswith(
                   ("Array", "Tensor"))]
        return out or ["x"]

    @staticmethod
    def names_before(fn, lineno: int) -> list[str]:
        names = list(_Ctx.params(fn))
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and \
                    getattr(node, "lineno", 10 ** 9) < lineno and node.id not in names:
                names.append(node.id)
        return names

    @staticmethod
    def stmt_lists(fn) -> list[tuple[list, object]]:
        """Every statement list in fn (its body, branch bodies, loop bodies)."""
        out = []
        for node in ast.walk(fn):
            for fld in ("body", "orelse", "finalbody"):
                v = getattr(node, fld, None)
                if isinstance(v, list) and v and isinstance(v[0], ast.stmt):
                    out.append((v, node))
        return out

    @staticmethod
    def expr_sites(fn, pred) -> list[tuple[object, str, int | None, ast.AST]]:
        """(parent, field, index, node) of every expression in fn's body satisfying pred
        (not annotations, decorators, call targets, assignment targets)."""
        out = []

        def visit(node, in_target=False):
            for fld, val in ast.iter_fields(node):
                if fld in ("annotation", "decorator_list", "returns", "args") and \
                        isinstance(node, (ast.FunctionDef, ast.arg)):
                    continue
                items = val if isinstance(val, list) else [val]
                for idx, child in enumerate(items):
                    if not isinstance(child, ast.AST):
                        continue
                    tgt = in_target or (fld in ("targets", "target") and
                                        isinstance(node, (ast.Assign, ast.AugAssign,
                                                          ast.For, ast.AnnAssign)))
                    skip = (isinstance(node, ast.Call) and fld == "func") or (
                        isinstance(node, ast.Attribute) and isinstance(child, ast.Name) and
                        child.id in MODULE_NAMES)
                    if isinstance(child, ast.expr) and not tgt and not skip and pred(child):
                        out.append((node, fld, idx if isinstance(val, list) else None,
                                    child))
                    visit(child, tgt)

        for stmt in fn.body:
            visit(ast.Module(body=[stmt], type_ignores=[]))
        return out


def _set(parent, fld, idx, new):
    if idx is None:
        setattr(parent, fld, new)
    else:
        getattr(parent, fld)[idx] = new


def _expr(src: str) -> ast.expr:
    return ast.parse(src, mode="eval").body


def _rand_expr(rng, names: list[str]) -> str:
    r = rng.random()
    if r < 0.6 and names:
        return rng.choice(names)
    if r < 0.8:
        return rng.choice(BUILTIN_NAMES)
    return rng.choice(LITERALS)


def _pick_fn(ctx, rng):
    return ctx.kernel if rng.random() < 0.7 or not ctx.helpers else rng.choice(ctx.helpers)


def m_operand(ctx, rng):
    fn = _pick_fn(ctx, rng)
    sites = ctx.expr_sites(fn, lambda e: isinstance(e, (ast.Name, ast.Constant)))
    if not sites:
        return None
    parent, fld, idx, node = rng.choice(sites)
    names = ctx.names_before(fn, getattr(node, "lineno", 0)) + ctx.array_params(fn)
    new = rng.choice(names + BUILTIN_NAMES) if rng.random() < 0.5 else rng.choice(LITERALS)
    _set(parent, fld, idx, _expr(new))
    return f"operand {ast.unparse(node)} -> {new} in {fn.name}"


def m_constant(ctx, rng):
    fn = _pick_fn(ctx, rng)
    sites = ctx.expr_sites(fn, lambda e: isinstance(e, ast.Constant) and
                           isinstance(e.value, (int, float)))
    if not sites:
        return None
    parent, fld, idx, node = rng.choice(sites)
    v = node.value
    if isinstance(v, bool):
        new = repr(not v)
    elif isinstance(v, int):
        new = repr(rng.choice([0, 1, 2, -1, v + 1, v - 1, 31, 32, 255, 2 ** 31 - 1, -2 ** 31,
                                2 ** 32 - 1, 1000]))
    else:
        new = repr(rng.choice([0.0, -0.0, 1.0, v * 2, 1e-40, 3.4e38, float(int(v) + 1)]))
    _set(parent, fld, idx, _expr(new))
    return f"constant {ast.unparse(node)} -> {new} in {fn.name}"


def m_binop(ctx, rng):
    fn = _pick_fn(ctx, rng)
    nodes = [n for n in ast.walk(fn) if isinstance(n, (ast.BinOp, ast.AugAssign))]
    if not nodes:
        return None
    node = rng.choice(nodes)
    old = type(node.op).__name__
    node.op = rng.choice(BINOPS)()
    return f"binop {old} -> {type(node.op).__name__} in {fn.name}"


def m_compare(ctx, rng):
    fn = _pick_fn(ctx, rng)
    nodes = [n for n in ast.walk(fn) if isinstance(n, (ast.Compare, ast.BoolOp, ast.IfExp,
                                                       ast.If, ast.While))]
    if not nodes:
        return None
    node = rng.choice(nodes)
    if isinstance(node, ast.Compare):
        i = rng.randrange(len(node.ops))
        old = type(node.ops[i]).__name__
        if rng.random() < 0.25:  # chain it
            node.ops.append(rng.choice(CMPOPS[:6])())
            node.comparators.append(_expr(rng.choice(["1", "0", "10", "2.5"])))
            return f"compare chained in {fn.name}"
        node.ops[i] = rng.choice(CMPOPS)()
        return f"compare {old} -> {type(node.ops[i]).__name__} in {fn.name}"
    if isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return f"boolop swapped in {fn.name}"
    if isinstance(node, ast.IfExp):
        node.body, node.orelse = node.orelse, node.body
        return f"ternary branches swapped in {fn.name}"
    node.test = ast.UnaryOp(ast.Not(), node.test)
    return f"condition negated in {fn.name}"


def m_annotation(ctx, rng):
    fns = [f for f in ctx.funcs if any(a.annotation is not None for a in f.args.args)]
    fn = rng.choice(fns)
    args = [a for a in fn.args.args if a.annotation is not None]
    a = rng.choice(args)
    old = ast.unparse(a.annotation)
    new = rng.choice([x for x in ANNOTATIONS if x != old])
    a.annotation = _expr(new)
    return f"annotation {a.arg}: {old} -> {new} in {fn.name}"


def m_drop_dup(ctx, rng):
    fn = _pick_fn(ctx, rng)
    lists = ctx.stmt_lists(fn)
    body, _ = rng.choice(lists)
    i = rng.randrange(len(body))
    what = ast.unparse(body[i]).splitlines()[0]
    r = rng.random()
    if r < 0.45:
        del body[i]
        if not body:
            body.append(ast.Pass())
        return f"drop `{what}` in {fn.name}"
    if r < 0.8:
        body.insert(i, copy.deepcopy(body[i]))
        return f"duplicate `{what}` in {fn.name}"
    if i + 1 < len(body):
        body[i], body[i + 1] = body[i + 1], body[i]
        return f"swap `{what}` with the next in {fn.name}"
    return None


def m_argcount(ctx, rng):
    fn = _pick_fn(ctx, rng)
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
    if not calls:
        return None
    call = rng.choice(calls)
    names = ctx.names_before(fn, call.lineno)
    if call.args and rng.random() < 0.5:
        call.args.pop(rng.randrange(len(call.args)))
        return f"drop an argument of `{ast.unparse(call.func)}` in {fn.name}"
    if rng.random() < 0.2:
        call.keywords.append(ast.keyword(arg=rng.choice(["unroll", "k", "x", "bogus"]),
                                         value=_expr(_rand_expr(rng, names))))
        return f"add a keyword to `{ast.unparse(call.func)}` in {fn.name}"
    call.args.append(_expr(_rand_expr(rng, names)))
    return f"add an argument to `{ast.unparse(call.func)}` in {fn.name}"


def m_wrong_kind(ctx, rng):
    """A call argument replaced by an array, a tuple, a string, None; or an intrinsic
    called on a random in-scope thing."""
    fn = _pick_fn(ctx, rng)
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and n.args]
    arr = rng.choice(ctx.array_params(fn))
    if calls and rng.random() < 0.6:
        call = rng.choice(calls)
        i = rng.randrange(len(call.args))
        new = rng.choice([arr, "(1, 2)", "'s'", "None", "(1.0,)", "Array", "f32", "cb",
                          "plain_py", "kernel", "TABLE", "[1, 2]"])
        call.args[i] = _expr(new)
        return f"argument {i} of `{ast.unparse(call.func)}` -> {new} in {fn.name}"
    sites = ctx.expr_sites(fn, lambda e: isinstance(e, (ast.Name, ast.Constant, ast.BinOp,
                                                        ast.Subscript)))
    if not sites:
        return None
    parent, fld, idx, node = rng.choice(sites)
    f = rng.choice(INTRINSICS)
    nargs = rng.choice([1, 1, 2, 3])
    extra = [rng.choice([arr, "1", "2.0", "(1, 2)", "'s'"]) for _ in range(nargs - 1)]
    new = f"{f}({', '.join([ast.unparse(node)] + extra)})"
    _set(parent, fld, idx, _expr(new))
    return f"`{ast.unparse(node)}` -> `{new}` in {fn.name}"


def m_wrap_expr(ctx, rng):
    fn = _pick_fn(ctx, rng)
    sites = ctx.expr_sites(fn, lambda e: not isinstance(e, (ast.Starred, ast.Slice)))
    if not sites:
        return None
    parent, fld, idx, node = rng.choice(sites)
    tmpl = rng.choice(EXPR_WRAPS)
    new = tmpl.format(e=f"({ast.unparse(node)})")
    _set(parent, fld, idx, _expr(new))
    return f"`{ast.unparse(node)}` -> `{new}` in {fn.name}"


def m_subscript(ctx, rng):
    fn = _pick_fn(ctx, rng)
    subs = [n for n in ast.walk(fn) if isinstance(n, ast.Subscript)]
    names = [n for n in ctx.names_before(fn, 10 ** 9)]
    if not subs or rng.random() < 0.25:
        # index a scalar / a name
        sites = ctx.expr_sites(fn, lambda e: isinstance(e, ast.Name) and e.id in names)
        if not sites:
            return None
        parent, fld, idx, node = rng.choice(sites)
        new = f"{node.id}[{rng.choice(['0', 'i', '1:2', '0, 0'])}]"
        try:
            _set(parent, fld, idx, _expr(new))
        except SyntaxError:
            return None
        return f"index `{node.id}` -> `{new}` in {fn.name}"
    s = rng.choice(subs)
    old = ast.unparse(s)
    sl = ast.unparse(s.slice)
    new = rng.choice([f"{sl}:", f":{sl}", f"{sl}:{sl} + 1", f"{sl}, 0", f"({sl},)", "()",
                      f"{sl}, {sl}", "-1", "'k'", "None", "2.0", "True", f"{sl} + 0.5",
                      "4294967295", "-2147483649", "2 ** 40", "..."])
    s.slice = ast.parse(f"_[{new}]", mode="eval").body.slice
    return f"subscript `{old}` -> `{ast.unparse(s)}` in {fn.name}"


def m_insert(ctx, rng):
    fn = _pick_fn(ctx, rng)
    lists = ctx.stmt_lists(fn)
    body, _ = rng.choice(lists)
    i = rng.randrange(len(body) + 1)
    lineno = body[i].lineno if i < len(body) else body[-1].end_lineno + 1
    names = [n for n in ctx.names_before(fn, lineno)]
    key = rng.choice(sorted(INSERTS))
    e = _rand_expr(rng, names)
    n = rng.choice(names) if names and rng.random() < 0.5 else "_t"
    a = rng.choice(ctx.array_params(fn))
    src = INSERTS[key].format(e=e, n=n, a=a).replace("_z0", rng.choice(names or ["_t"]))
    try:
        stmts = ast.parse(src).body
    except SyntaxError:
        return None
    body[i:i] = stmts
    return f"insert {key}: `{src.splitlines()[0]}` in {fn.name}"


def m_assign_param(ctx, rng):
    fn = _pick_fn(ctx, rng)
    params = ctx.params(fn)
    if not params:
        return None
    p = rng.choice(params)
    lists = ctx.stmt_lists(fn)
    body, _ = rng.choice(lists)
    i = rng.randrange(len(body) + 1)
    val = rng.choice([f"{p} + 1", "0", "1.5", f"{p}", "None", "(1, 2)", f"{p} * 2"])
    body.insert(i, ast.parse(f"{p} = {val}").body[0])
    return f"assign parameter `{p} = {val}` in {fn.name}"


def m_wrap_stmt(ctx, rng):
    """A statement moved under an (unsupported or unusual) construct."""
    fn = _pick_fn(ctx, rng)
    body, _ = rng.choice(ctx.stmt_lists(fn))
    i = rng.randrange(len(body))
    s = body[i]
    inner = ast.unparse(s)
    ind = "\n".join("    " + ln for ln in inner.splitlines())
    names = ctx.names_before(fn, s.lineno)
    e = _rand_expr(rng, names)
    tmpl = rng.choice([
        "with plain_py(1):\n{b}",
        "try:\n{b}\nexcept Exception:\n    pass",
        "if True:\n{b}",
        "if False:\n{b}",
        "if {e}:\n{b}",
        "while False:\n{b}",
        "for _q in range(1):\n{b}",
        "for _q in cb.range(2, unroll=True):\n{b}",
        "for _q in range(0):\n{b}",
        "while True:\n{b}\n    break",
        "match 1:\n    case 1:\n    {b}",
        "for _q in TABLE:\n{b}",
        "for _q in range(2):\n{b}\nelse:\n    pass",
    ])
    src = tmpl.format(b=ind, e=e).replace("    case 1:\n    ", "    case 1:\n    ")
    if "match" in tmpl:
        src = "match 1:\n    case 1:\n" + "\n".join("        " + ln for ln in
                                                     inner.splitlines())
    try:
        stmts = ast.parse(src).body
    except SyntaxError:
        return None
    body[i:i + 1] = stmts
    return f"wrap `{inner.splitlines()[0]}` in `{tmpl.splitlines()[0]}` in {fn.name}"


def m_cast(ctx, rng):
    fn = _pick_fn(ctx, rng)
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and
             ast.unparse(n.func) in CASTS + ["F", "cb.cast"]]
    if not calls:
        return None
    c = rng.choice(calls)
    old = ast.unparse(c.func)
    new = rng.choice(CASTS)
    c.func = _expr(new)
    return f"cast {old} -> {new} in {fn.name}"


def m_recursion(ctx, rng):
    fn = rng.choice(ctx.funcs)
    target = rng.choice([fn.name] + [h.name for h in ctx.helpers])
    nparams = len(fn.args.args) if target == fn.name else len(
        next(h for h in ctx.funcs if h.name == target).args.args)
    names = ctx.names_before(fn, 10 ** 9)
    args = ", ".join(rng.choice(names or ["1"]) for _ in range(nparams))
    body, _ = rng.choice(ctx.stmt_lists(fn))
    i = rng.randrange(len(body) + 1)
    call = rng.choice([f"_rec = {target}({args})", f"{target}({args})",
                       f"if {rng.choice(names or ['1'])} < 0:\n    _rec = {target}({args})"])
    body[i:i] = ast.parse(call).body
    if fn.name != "kernel" and ctx.helpers and rng.random() < 0.5:
        # and make another helper call back
        other = rng.choice(ctx.helpers)
        ob = other.body
        oargs = ", ".join(a.arg for a in other.args.args)
        ob.insert(0, ast.parse(f"_back = {fn.name}({oargs})").body[0])
    return f"recursion: `{call.splitlines()[-1].strip()}` in {fn.name}"


def m_return(ctx, rng):
    fn = _pick_fn(ctx, rng)
    rets = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    names = ctx.names_before(fn, 10 ** 9)
    if rets and rng.random() < 0.6:
        r = rng.choice(rets)
        new = rng.choice(["None", "1", "1.0", "(1, 2)", "True", "'s'",
                          rng.choice(names or ["1"]), "", f"({rng.choice(names or ['1'])},)"])
        r.value = _expr(new) if new else None
        return f"return -> `return {new}` in {fn.name}"
    body, _ = rng.choice(ctx.stmt_lists(fn))
    i = rng.randrange(len(body) + 1)
    new = rng.choice(["return", "return 1", "return None", f"return {_rand_expr(rng, names)}",
                      f"if {_rand_expr(rng, names)}:\n    return"])
    body[i:i] = ast.parse(new).body
    return f"insert `{new.splitlines()[0]}` in {fn.name}"


def m_loop(ctx, rng):
    fn = _pick_fn(ctx, rng)
    loops = [n for n in ast.walk(fn) if isinstance(n, ast.For) and isinstance(n.iter, ast.Call)]
    if not loops:
        return None
    lp = rng.choice(loops)
    old = ast.unparse(lp.iter)
    args = [ast.unparse(a) for a in lp.iter.args]
    names = ctx.names_before(fn, lp.lineno)
    r = rng.random()
    if r < 0.3:
        lp.iter.args = [_expr(a) for a in rng.choice([
            ["0"], ["1", "0"], [args[0], "0", "-1"], ["-2", "3"], ["0", args[-1], "2"],
            ["0", args[-1], "0"], [args[-1], "-1", "-1"], ["3", "0", "-2"],
            [_rand_expr(rng, names)], ["0", _rand_expr(rng, names), "3"]])]
    elif r < 0.55:
        has = any(k.arg == "unroll" for k in lp.iter.keywords)
        if has:
            lp.iter.keywords = []
        else:
            lp.iter.func = _expr("cb.range")
            lp.iter.keywords = [ast.keyword(arg="unroll", value=_expr("True"))]
    elif r < 0.75:
        lp.iter.func = _expr(rng.choice(["reversed", "cb.range", "range", "enumerate", "zip"]))
        if ast.unparse(lp.iter.func) == "reversed":
            lp.iter.args = [_expr(old)]
    else:
        lp.iter = _expr(rng.choice(["TABLE", "(1, 2.5)", "(ABSOLUTE_POS, 1)", "()",
                                    "reversed(range(3))", "range(ABSOLUTE_POS)"]))
    return f"loop `{old}` -> `{ast.unparse(lp.iter)}` in {fn.name}"


MUTATORS = {
    "operand": m_operand, "constant": m_constant, "binop": m_binop, "compare": m_compare,
    "annotation": m_annotation, "drop_dup": m_drop_dup, "argcount": m_argcount,
    "wrong_kind": m_wrong_kind, "wrap_expr": m_wrap_expr, "subscript": m_subscript,
    "insert": m_insert, "assign_param": m_assign_param, "wrap_stmt": m_wrap_stmt,
    "cast": m_cast, "recursion": m_recursion, "return": m_return, "loop": m_loop,
}
WEIGHTS = {"insert": 5, "operand": 3, "wrap_expr": 3, "constant": 2, "binop": 2, "compare": 2,
           "annotation": 2, "drop_dup": 2, "argcount": 2, "wrong_kind": 2, "subscript": 2,
           "assign_param": 1, "wrap_stmt": 2, "cast": 1, "recursion": 1, "return": 1,
           "loop": 2}


@dataclass
class Mutant:
    number: int
    seed: str
    src: str
    mutations: list[str]


def make_mutant(number: int, seed_name: str | None = None) -> Mutant:
    """Mutant `number`: the same source every run."""
    rng = random.Random(number * 7919 + 17)
    name = seed_name or rng.choice(sorted(CORPUS))
    k = 1 if rng.random() < 0.75 else 2
    for _attempt in range(20):
        tree = ast.parse(HEADER + CORPUS[name].src)
        ctx = _Ctx(tree)
        done = []
        for _ in range(k):
            op = rng.choices(sorted(MUTATORS), [WEIGHTS[m] for m in sorted(MUTATORS)])[0]
            try:
                what = MUTATORS[op](ctx, rng)
            except (IndexError, ValueError, SyntaxError, StopIteration):
                what = None
            if what:
                done.append(f"{op}: {what}")
        if done:
            ast.fix_missing_locations(tree)
            try:
                src = ast.unparse(tree)
            except Exception:  # noqa: BLE001 - an unparsable tree: draw again
                continue
            return Mutant(number, name, src + "\n", done)
    return Mutant(number, name, HEADER + CORPUS[name].src, ["(none)"])


# ---- running -----------------------------------------------------------------------------

_DIR = Path(tempfile.mkdtemp(prefix="cube-mutants-"))
_COUNTER = itertools.count()


class Timeout(BaseException):  # not an Exception: the compiler's handlers cannot swallow it
    pass


def _alarm(seconds: float):
    def handler(signum, frame):
        raise Timeout()
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _disarm():
    signal.setitimer(signal.ITIMER_REAL, 0)


def _timed(fn, seconds):
    _alarm(seconds)
    try:
        return fn()
    finally:
        _disarm()


@dataclass
class Outcome:
    kind: str
    detail: str = ""
    key: str = ""  # what dedups findings: exception type + innermost library frame


def _innermost_lib_frame(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    lib = [f for f in frames if f.filename.startswith(LIBRARY_DIRS)]
    if not lib:
        return "<no library frame>"
    f = lib[-1]
    return f"{Path(f.filename).relative_to(ROOT)}:{f.name}"


def _tb_tail(exc: BaseException, n: int = 6) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(lines).rstrip().splitlines()
    return "\n".join(text[-2 * n:])


def check_location(e: cb.CompileError, path: Path, src: str) -> str | None:
    """Why e's location is wrong, or None when it is right: the mutant's file, a line of it
    inside one of its functions (decorators and signature included), that line quoted, and
    `file:line:col` in the message."""
    msg = str(e)
    if not e.loc:
        return "no location"
    filename, line, col, quoted = e.loc
    if Path(filename).resolve() != path.resolve():
        return f"location names {filename}, not the kernel's file"
    lines = src.splitlines()
    if not 1 <= line <= len(lines):
        return f"line {line} is not in the file ({len(lines)} lines)"
    spans = []
    for node in ast.parse(src).body:
        if isinstance(node, ast.FunctionDef):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            spans.append((first, node.end_lineno))
    if not any(a <= line <= b for a, b in spans):
        return f"line {line} is not inside a function: {lines[line - 1]!r}"
    if quoted is None or quoted.strip() != lines[line - 1].strip():
        return f"quoted {quoted!r} but line {line} is {lines[line - 1]!r}"
    if not 0 <= col <= len(lines[line - 1]):
        return f"column {col} is past the end of line {line}"
    if f"{filename}:{line}:{col + 1}:" not in msg or lines[line - 1].strip() not in msg:
        return "the message lacks file:line:col or the source line"
    return None


def _value_for(t, hint, rng):
    """A scalar argument of type t (a Scalar, or int/float/bool), from the seed's hint."""
    kind = getattr(t, "kind", {int: "int", float: "float", bool: "bool"}.get(t, "float"))
    if kind == "float":
        return float(hint) if isinstance(hint, (int, float)) else 1.5
    if kind == "bool":
        return bool(hint) if isinstance(hint, (int, float)) else True
    v = int(hint) if isinstance(hint, (int, float)) else 5
    return abs(v) if kind == "uint" else v


def build_args(kernel: CubeFunction, seed: Seed, rng: np.random.Generator) -> dict:
    """NumPy arguments fitting the mutant's own annotations (so a swapped annotation is
    compiled, not refused by the launch), sized by the seed."""
    args = {}
    for name in kernel.signature().parameters:
        try:
            args.update(_build_args(kernel, seed, rng, name))
        except Exception:  # noqa: BLE001 - an odd annotation: an f32 array; the launch judges
            args[name] = rng.standard_normal(seed.sizes.get(name, seed.n)).astype(np.float32)
    return args


def _build_args(kernel: CubeFunction, seed: Seed, rng: np.random.Generator, only: str) -> dict:
    try:
        ann = typing.get_type_hints(kernel.fn, globalns=kernel.fn.__globals__)
    except Exception:  # noqa: BLE001 - the launch reports it
        ann = {}
    args = {}
    for name in [only]:
        spec = ann.get(name)
        hint = seed.values.get(name)
        if isinstance(spec, lang.MemSpec):
            elem = spec.elem
            lanes = None
            if isinstance(elem, lang.LineSpec):
                lanes = elem.lanes or seed.line
                elem = elem.elem
            if isinstance(elem, typing.TypeVar):
                dtype = np.dtype(seed.types.get(name, np.float32))
            else:
                dtype = np.dtype(elem.np)
            if spec.kind == "tensor":
                shape = seed.shapes.get(name, (4, 8))
            else:
                shape = (seed.sizes.get(name, seed.n),)
            if lanes:
                shape = shape[:-1] + (shape[-1] * lanes,)
            if dtype.kind == "f":
                a = (rng.standard_normal(shape) * 4).astype(dtype)
            elif dtype.kind == "u":
                a = rng.integers(0, 40, shape).astype(dtype)
            elif dtype.kind == "b":
                a = rng.integers(0, 2, shape).astype(dtype)
            else:
                a = rng.integers(-20, 20, shape).astype(dtype)
            args[name] = Lines(a, lanes) if lanes else a
        elif isinstance(spec, lang.ComptimeSpec):
            t = spec.type
            if t is str:
                args[name] = hint if isinstance(hint, str) else "mul"
            elif t in (int, float, bool):
                args[name] = t(hint) if isinstance(hint, (int, float)) else t(4)
            else:
                args[name] = hint if hint is not None else 4
        elif spec is not None and (lang.is_type(spec) or spec in (int, float, bool)):
            args[name] = _value_for(spec, hint, rng)
        elif isinstance(spec, typing.TypeVar):
            args[name] = np.float32(hint if isinstance(hint, (int, float)) else 1.5)
        elif hint is not None:
            args[name] = hint
        else:  # an odd annotation: give an array and let the launch judge
            args[name] = rng.standard_normal(seed.sizes.get(name, seed.n)).astype(np.float32)
    return args


def _differ(got: dict, want: dict, rtol=1e-4) -> str | None:
    for k in want:
        msg = differences(got[k], want[k], rtol, show=4)
        if msg is not None:
            return f"'{k}': {msg}"
    return None


def _classify_error(e: BaseException, path: Path, src: str, where: str) -> Outcome:
    if isinstance(e, cb.CompileError):
        why = check_location(e, path, src)
        if why:
            return Outcome("bad-location", f"{where}: {why}\n{e}",
                           f"bad-location:{why.split(':')[0].split(' ')[0]}:"
                           f"{_innermost_lib_frame(e)}")
        return Outcome("compile-error", str(e).splitlines()[0])
    if isinstance(e, cb.LaunchError):
        return Outcome("launch-error", str(e).splitlines()[0])
    if isinstance(e, cb.CubeError):
        return Outcome("unlocated", f"{where}: {type(e).__name__}: {e}",
                       f"unlocated:{type(e).__name__}:{_innermost_lib_frame(e)}")
    if isinstance(e, Timeout):
        return Outcome("timeout", where)
    return Outcome("internal", f"{where}: {_tb_tail(e)}",
                   f"{type(e).__name__}:{_innermost_lib_frame(e)}")


def load(src: str, tag: str = "m"):
    name = f"cube_mutant_{tag}_{next(_COUNTER)}"
    path = _DIR / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        pass
    return mod, path


# Where the simulator is not a usable oracle for a mutant (each a documented difference
# between its NumPy values and the language, docs/language.md and cube/simulate.py's
# docstring), the outcome is `sim-gap`, not a finding: the message of its SimulationError.
ORACLE_GAPS = {
    # docs: "A scalar is a line of 1, so v[k] and v[k] = x ... work"; the simulator has lanes
    # only on line values (a NumPy scalar / Python number is not subscriptable)
    "scalar-as-line": r"invalid index to scalar variable|object is not subscriptable|"
                      r"object does not support item assignment",
    # docs: "a runtime lane index ... out of range reads 0"; the simulator raises
    "runtime-lane-oob": r"IndexError: index -?\d+ is out of bounds for axis 0",
    # NumPy's bool has no unary minus; Python's (and the kernel's) -abs(b) is an int
    "numpy-bool-neg": r"numpy boolean negative",
    # a literal the kernel folds away (a select on a compile-time condition, a literal-seeded
    # value the kernel types as f32) is a Python number in the simulator
    "python-number": r"the literal -?\d+ does not fit|float division by zero|"
                     r"integer division or modulo by zero|float floor division by zero|"
                     r"float modulo",
    # the language has reversed(range(...)); the simulator's range is a generator
    "reversed-range": r"'generator' object is not reversible",
}


def oracle_gap(msg: str) -> str | None:
    for name, pat in ORACLE_GAPS.items():
        if re.search(pat, msg):
            return name
    return None


def _mismatch(detail: str, key: str, src: str, seed: Seed, rts: dict) -> Outcome:
    """A disagreement, unless the mutant made the result undefined: plane operations where
    the runtimes' plane sizes differ, or atomics the seed did not have (atomics are exempt
    from the simulator's race check, so an atomic on an element other units read races; an
    array updated by atomics and also read or written plainly likewise), or
    fewer sync_cube() barriers than the seed (shared memory races)."""
    sizes = {rt.plane_size for rt in rts.values()}
    if "plane_" in src and len(sizes) > 1:
        return Outcome("plane-size", detail)
    if "atomic_" in src and "atomic_" not in seed.src:
        return Outcome("sim-race", f"atomics added by the mutation: {detail}")
    for arr in re.findall(r"atomic_\w+\((\w+)", src):
        if re.search(rf"\b{arr}\[", src):  # also read or written plainly: a race
            return Outcome("sim-race", f"'{arr}' is updated atomically and accessed "
                           f"plainly: {detail}")
    if src.count("sync_cube()") < seed.src.count("sync_cube()"):
        return Outcome("sim-race", f"a barrier dropped: shared memory races: {detail}")
    return Outcome("mismatch", detail, key)


# TypeErrors cube raises on purpose while a module is imported (Python's class for a wrong
# argument to a decorator or a subscripted type): `@cube(1)`, `Line[()]`
IMPORT_CHECKS = frozenset(("TypeError:cube/kernel.py:wrap",
                           "TypeError:cube/lang.py:__class_getitem__"))


def run_source(src: str, seed: Seed, runtimes=("interp", "cpu"), timeout: float = 4.0,
               tag: str = "m") -> Outcome:
    """Import `src` (a module defining `kernel`), launch it as `seed` says, classify."""
    warnings.simplefilter("ignore", SyntaxWarning)
    try:
        compile(src, "<mutant>", "exec")
    except SyntaxError as e:
        return Outcome("python-rejects", f"SyntaxError: {e.msg}")
    try:
        mod, path = _timed(lambda: load(src, tag), timeout)
    except cb.CubeError as e:
        return _classify_error(e, Path("?"), src, "import")
    except Exception as e:  # noqa: BLE001 - user code failing at import is Python's business
        key = f"{type(e).__name__}:{_innermost_lib_frame(e)}"
        if key in IMPORT_CHECKS:  # cube's own check of a decorator / annotation argument
            return Outcome("import-refused", f"{type(e).__name__}: {e}")
        if _innermost_lib_frame(e) != "<no library frame>" and not isinstance(e, Timeout):
            return Outcome("internal", f"import: {_tb_tail(e)}",
                           f"{type(e).__name__}:{_innermost_lib_frame(e)}")
        return Outcome("python-rejects", f"import: {type(e).__name__}: {e}")
    kernel = getattr(mod, "kernel", None)
    if not isinstance(kernel, CubeFunction):
        return Outcome("python-rejects", "no kernel")
    args = build_args(kernel, seed, np.random.default_rng(1234))
    rts = {n: cb.runtime(n) for n in runtimes}
    first = runtimes[0]

    def run(rt):  # on copies: a later runtime and the oracle see the same inputs
        return launch(rt, kernel, seed.cube_count, seed.cube_dim, **copy_args(args))

    def sim():
        return oracle(kernel, seed.cube_count, seed.cube_dim, rts[first].plane_size, **args)

    try:
        got = {first: _timed(lambda: run(rts[first]),
                             timeout)}
    except Timeout:
        if seed.sim:
            try:
                _timed(sim, timeout)
            except Timeout:
                return Outcome("timeout", "interp and simulate")
            except Exception:  # noqa: BLE001 - the simulator refuses it: no verdict
                return Outcome("timeout", "interp (the simulator refuses the kernel)")
            return Outcome("hang", f"{first} runs past {timeout}s, simulate finishes",
                           "hang")
        return Outcome("timeout", first)
    except Exception as e:  # noqa: BLE001 - classified
        return _classify_error(e, path, src, first)
    want, wname = None, None
    if seed.sim:
        try:
            want = _timed(sim,
                          timeout)
            wname = "simulate"
        except SimulationUnsupported:
            pass
        except Timeout:
            return Outcome("sim-timeout", f"{first} finishes, simulate runs past {timeout}s",
                           "sim-timeout")
        except SimulationError as e:
            msg = str(e)
            if "data race" in msg:
                return Outcome("sim-race", msg.splitlines()[0])
            if isinstance(e, UninitialisedRead):  # undefined, as a race is
                return Outcome("sim-undefined", msg.splitlines()[0])
            gap = oracle_gap(msg)
            if gap:
                return Outcome("sim-gap", f"{gap}: {msg.splitlines()[0]}")
            cause = e.__cause__
            ctype = type(cause).__name__ if cause is not None else "SimulationError"
            return Outcome("sim-rejects", f"compiles, but simulate: {msg}",
                           f"sim-rejects:{ctype}")
        except Exception as e:  # noqa: BLE001 - the oracle itself failed on it
            return Outcome("sim-rejects", f"compiles, but simulate: {_tb_tail(e)}",
                           f"sim-rejects:{type(e).__name__}")
    if want is None:
        want, wname = got[first], first
    elif (why := _differ(got[first], want)):
        return _mismatch(f"{first} vs {wname}: {why}", f"mismatch:{first}", src, seed, rts)
    for name in runtimes[1:]:
        try:
            got[name] = _timed(lambda r=rts[name]: run(r),
                               timeout)
        except cb.CapabilityError:
            continue
        except Timeout:
            return Outcome("hang", f"{name} runs past {timeout}s, {first} finishes", "hang")
        except Exception as e:  # noqa: BLE001 - classified
            o = _classify_error(e, path, src, name)
            return Outcome("cpu-differs", f"{first} compiles and runs; {name}: {o.kind}: "
                           f"{o.detail}", f"cpu-differs:{o.key or o.kind}")
        why = _differ(got[name], want)
        if why:
            return _mismatch(f"{name} vs {wname}: {why}", f"mismatch:{name}", src, seed, rts)
    return Outcome("agree", wname)


def run_mutant(m: Mutant, **kw) -> Outcome:
    return run_source(m.src, CORPUS[m.seed], tag=f"{m.seed}_{m.number}", **kw)


def kernel_text(src: str) -> str:
    """The mutant without the shared header (for reports)."""
    return src.split("return x + 1\n", 1)[-1].strip()


# ---- the large run: `python tests/cube/mutation_support.py START COUNT OUT.jsonl [JOBS]` -----
# Workers run slices of mutant numbers, one JSON line per mutant; a worker that stops
# answering for 120 s (a native hang) or dies (a crash) is killed, the mutant it was on is
# recorded as `hang`/`crash`, and a new worker goes on after it.

def _worker(start: int, stop: int, out: str) -> None:
    import json
    with open(out, "a") as f:
        for k in range(start, stop):
            f.write(json.dumps({"start": k}) + "\n")
            f.flush()
            m = make_mutant(k)
            try:
                o = run_mutant(m)
            except BaseException as e:  # noqa: BLE001 - the runner itself failed
                o = Outcome("runner", _tb_tail(e), f"runner:{type(e).__name__}")
            f.write(json.dumps({"k": k, "seed": m.seed, "mutations": m.mutations,
                                "kind": o.kind, "detail": o.detail[:3000], "key": o.key})
                    + "\n")
            f.flush()


def _drive(start: int, count: int, out: str, jobs: int = 2) -> None:
    import json
    import subprocess
    import time
    bounds = [start + count * j // jobs for j in range(jobs + 1)]
    todo = [(bounds[j], bounds[j + 1], f"{out}.{j}") for j in range(jobs)]
    procs = {}

    def spawn(a, b, part):
        return subprocess.Popen([sys.executable, __file__, "--worker", str(a), str(b), part])

    for a, b, part in todo:
        Path(part).write_text("")
        procs[part] = [spawn(a, b, part), a, b, time.time(), 0]
    while procs:
        time.sleep(2)
        for part, st in list(procs.items()):
            p, a, b, _, size = st
            cur = Path(part).stat().st_size
            if cur != size:
                st[3], st[4] = time.time(), cur
            rc = p.poll()
            lines = Path(part).read_text().splitlines()
            last = json.loads(lines[-1]) if lines else None
            if rc is None and time.time() - st[3] < 120:
                continue
            if rc is None:
                p.kill()
                p.wait()
            if last is not None and "start" in last:  # died or hung inside a mutant
                k = last["start"]
                m = make_mutant(k)
                kind = "hang" if rc is None else "crash"
                with open(part, "a") as f:
                    f.write(json.dumps({"k": k, "seed": m.seed, "mutations": m.mutations,
                                        "kind": kind, "detail": f"worker rc={rc}",
                                        "key": kind}) + "\n")
                if k + 1 < b:
                    st[0], st[3] = spawn(k + 1, b, part), time.time()
                    continue
            del procs[part]
    with open(out, "w") as f:
        for _a, _b, part in todo:
            for line in Path(part).read_text().splitlines():
                if '"start"' not in line[:10]:
                    f.write(line + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        _worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    else:
        _drive(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
               int(sys.argv[4]) if len(sys.argv) > 4 else 2)

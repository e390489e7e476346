"""Every module-level kernel of the tests and examples, with representative specialisations.

`collect()` finds the kernels by walking the modules (so a new kernel is picked up); kernels
with comptime parameters or type variables need an entry in VARIANTS (a test checks that).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from cube.frontend.translator import Target
from cube.kernel import CubeFunction
from cube.targets import TARGETS
from cube_ir.types import bf16, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64

ROOT = Path(__file__).resolve().parents[2]
MODULES = ["tests/cube/test_language.py", "tests/cube/test_cache.py", "tests/cube/test_lines.py",
           "tests/cube/test_tuple_indexing.py",
           *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*.py"))]
MATH_OPS = ["sqrt", "rsqrt", "exp", "log", "log1p", "sin", "cos", "tanh", "erf", "floor",
            "ceil", "round", "abs", "neg", "pow", "fma", "clamp", "minmax"]

# kernel name -> list of (type vars, comptime values, line sizes)
VARIANTS: dict[str, list[tuple[dict, dict, dict]]] = {
    "axpby": [({"F": t}, {}, {"x": n, "y": n, "out": n}) for t, n in [
        (f32, 1), (f32, 4), (f16, 4), (bf16, 8), (f64, 3), (i32, 16), (i64, 2), (u8, 4)]],
    "math_ops": [({"F": t}, {"OP": op}, {}) for op in MATH_OPS for t in (f32, f64, f16, bf16)],
    "int_ops": [({"F": t}, {}, {}) for t in (i32, i64, u32, i8, u16, u64)],
    "comptime_branches": [({}, {"MODE": m, "N": 4}, {}) for m in (0, 1)],
    "add_k": [({}, {"K": k}, {}) for k in (0, 7)],
    "select_lines": [({}, {}, {"x": n, "out": n}) for n in (3, 4, 16)],
    "tree_sum": [({}, {"BLOCK": 64}, {})],
    "cas_bits": [({"F": f32}, {}, {}), ({"F": f64}, {}, {})],
    "reverse_in_cube": [({}, {"BLOCK": 100}, {})],
    "gelu_kernel": [({}, {}, {"inp": n, "out": n}) for n in (1, 4, 8, 16)],
    "vector_add": [({}, {}, {"a": n, "b": n, "out": n}) for n in (1, 4, 16)],
    "matmul": [({}, {"TILE": 16}, {})],
    "fast_matmul": [({}, {"TPB": 16}, {})],
    "local_table": [({}, {"R": 2, "C": 3}, {})],
    "block_scan": [({}, {"BLOCK": 256}, {})],
    "softmax_rows": [({}, {"BLOCK": 128}, {})],
    "line_float": [({"F": t}, {}, dict.fromkeys(("x", "y", "o_ar", "o_math", "o_sel", "o_cmp",
                                                   "o_plane"), n))
                   for t, n in [(f32, 1), (f32, 2), (f32, 3), (f32, 4), (f32, 8), (f32, 16),
                                (f16, 3), (f16, 4), (bf16, 4), (f64, 2)]],
    "line_int": [({"I": t}, {}, dict.fromkeys(("x", "y", "o_ar", "o_bits", "o_div"), n))
                 for t, n in [(i32, 4), (u8, 16), (i64, 2), (i16, 3), (u32, 8)]],
    "line_cast": [({}, {}, dict.fromkeys(("x", "oi", "ou8", "oi8", "of", "ob"), n))
                  for n in (1, 3, 4, 8, 16)],
}


def _load(rel: str):
    path = ROOT / rel
    name = "cfamily_src_" + path.stem
    if name in sys.modules:
        return sys.modules[name]
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def collect() -> dict[str, CubeFunction]:
    out = {}
    for rel in MODULES:
        mod = _load(rel)
        for name, v in vars(mod).items():
            if isinstance(v, CubeFunction) and v.is_kernel and v.fn.__module__ == mod.__name__:
                out[name] = v
    return out


def needs_variants(k: CubeFunction) -> bool:
    import typing
    for _, kind, spec in k._param_specs():
        if kind == 2:
            return True
        elem = getattr(spec, "elem", spec)
        elem = getattr(elem, "elem", elem)
        if isinstance(elem, typing.TypeVar) or isinstance(spec, typing.TypeVar):
            return True
    return False


def build_all(target: str, plane_size: int | None = None):
    """[(label, ir.Kernel or the CompileError it raised)] for every kernel variant."""
    info = TARGETS[target]
    ps = plane_size or info.features.plane_size
    out = []
    for name, k in collect().items():
        for i, (tv, ct, lines) in enumerate(VARIANTS.get(name, [({}, {}, {})])):
            label = f"{name}#{i}"
            try:
                sig = k.signature_from_types(type_vars=tv, comptime=ct, line_sizes=lines)
                kern = k.build_ir(sig, Target(target, ps, info.features))
                kern.name = f"{name}_v{i}"  # unique entry points in one translation unit
                out.append((label, kern))
            except Exception as e:  # reported by the caller
                out.append((label, e))
    return out

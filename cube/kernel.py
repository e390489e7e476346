"""`@cube` functions: specialisation per signature, the launch hot path and the caches."""
from __future__ import annotations

import functools
import inspect
import math
import operator
import os
import threading
import types
import typing
import weakref
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import numpy as np

from cube_ir import ir
from cube_ir.builder import Builder
from cube_ir.errors import IRError
from cube_ir.passes import run_pipeline
from cube_ir.printer import format_kernel
from cube_ir.types import Scalar, Type, boolean, f32, from_numpy_dtype, i32, vec
from runtimes.base import Runtime
from runtimes.buffer import contiguous
from runtimes.disk_cache import make_key
from runtimes.errors import CubeError, LaunchError
from runtimes.scalar_bits import bf16_bits

from . import lang, recording
from .capabilities import check_features
from .errors import CompileError
from .frontend.source import FunctionSource, capture, function_source
from .frontend.translator import Target, Translator
from .frontend.values import MemRef
from .frontend.weak import MAX_RETRIES, Retype
from .targets import max_cube_count

# parameter kinds (_ARRAY: an Array param in a launch plan; _MEM covers both elsewhere)
_MEM, _SCALAR, _COMPTIME, _ARRAY = 0, 1, 2, 3
_MISSING = object()
_U32 = 0xFFFFFFFF  # positions are u32: at most this many units in a launch


@dataclass(frozen=True)
class Signature:
    """One specialisation: runtime params (name, kind, type, rank) and comptime values."""

    params: tuple
    comptime: tuple
    checked: bool
    nowrap: bool = False


def _dim3(d, what: str) -> tuple[int, int, int]:
    if type(d) is int:
        return (d, 1, 1)
    if type(d) is tuple:
        n = len(d)
        if n == 3 and type(d[0]) is type(d[1]) is type(d[2]) is int:
            return d
        if n == 1 and type(d[0]) is int:
            return (d[0], 1, 1)
        if n == 2 and type(d[0]) is type(d[1]) is int:
            return (d[0], d[1], 1)
    if d is None:
        raise LaunchError(f"launch needs {what}, e.g. cube_count=(n + 255) // 256, "
                          f"cube_dim=256 (an int or a 1-3-tuple)")
    items = tuple(d.tolist()) if isinstance(d, np.ndarray) and d.ndim == 1 else \
        tuple(d) if isinstance(d, (tuple, list)) else (d,)
    if not 1 <= len(items) <= 3:
        raise LaunchError(f"{what} has 1 to 3 entries (x, y, z), got {d!r}")
    for x in items:
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
            hint = " (divide with //, e.g. (n + 255) // 256)" if isinstance(x, float) else ""
            raise LaunchError(f"{what} takes ints, got {x!r} ({type(x).__name__})"
                              f"{f' in {d!r}' if items != (d,) else ''}{hint}")
    return tuple(map(int, items)) + (1,) * (3 - len(items))


def _bad_dim(cd: tuple, max_dim: int, rt) -> LaunchError:
    if min(cd) < 1:
        return LaunchError(f"cube_dim {cd}: every entry must be at least 1")
    return LaunchError(f"cube_dim {cd} ({cd[0] * cd[1] * cd[2]} units) is outside the limit "
                       f"of {max_dim} units per cube on {rt.name}")


def _within(cc: tuple, limit: tuple) -> bool:
    return cc[0] <= limit[0] and cc[1] <= limit[1] and cc[2] <= limit[2]


def _bad_count(cc: tuple, cd: tuple, limit, rt) -> LaunchError:
    if min(cc) < 0:
        return LaunchError(f"cube_count {cc}: entries must not be negative")
    if limit is not None and not _within(cc, limit):
        return LaunchError(f"cube_count {cc} exceeds {rt.name}'s limit of {limit[:3]} cubes "
                           f"per dimension ({limit[3]})")
    total = math.prod(cc) * math.prod(cd)
    return LaunchError(f"cube_count {cc} x cube_dim {cd} is {total} units; positions are "
                       f"u32, so a launch has at most {_U32} units")


class _Cell:
    """A closure cell read like a namespace dict (`get`), so that one loop checks both."""

    __slots__ = ("cell",)

    def __init__(self, cell) -> None:
        self.cell = cell

    def get(self, name: str, default):
        try:
            return self.cell.cell_contents
        except ValueError:  # the variable was deleted
            return default


# values for which `==` may hold across objects that compile differently (4 == 4.0 == True,
# (1, 2) == (1.0, 2.0)): their bindings are checked by identity, one lookup each
_VALUE_TYPES = (int, float, complex, np.generic, np.ndarray, tuple, list, dict, set,
                frozenset)


_MUTABLE = (list, dict, set, bytearray, np.ndarray)


def _contents(o):
    """A comparable copy of what a compile-time value holds, through containers: a kernel
    folds the elements of a list constant, so an element assigned in place (`TABLE[1] = 5.0`,
    Python's meaning at the next call) must recompile it as a rebinding does."""
    if isinstance(o, list | tuple):
        return (type(o), tuple(_contents(v) for v in o))
    if isinstance(o, dict):
        return (dict, tuple((k, _contents(v)) for k, v in o.items()))
    if isinstance(o, set):
        return (set, frozenset(o))
    if isinstance(o, bytearray):
        return bytes(o)
    if isinstance(o, np.ndarray):
        return (o.shape, o.dtype.str, o.tobytes())
    return o


def _holds_mutable(o) -> bool:
    return isinstance(o, _MUTABLE) or isinstance(o, tuple) and any(map(_holds_mutable, o))


def _watch(deps: list) -> tuple[tuple, tuple]:
    """What a launch checks of the (namespace, name, value)s a translation read: per module
    dict of 3 names or more, an itemgetter of the names and the values it must give
    (compared with `!=` in C: functions, modules, helpers, types compare by identity or by
    what they mean); numbers, containers, closure cells and the rest one by one with `is`;
    and a value holding a mutable container, its `_contents` too."""
    groups: dict = {}
    exact = []
    watched = []
    for d, n, o in deps:
        if _holds_mutable(o):
            watched.append((_contents, o, _contents(o)))
        if isinstance(d, MappingProxyType):  # a class's attributes
            exact.append((d, n, o))
        elif not isinstance(d, dict):
            exact.append((_Cell(d), n, o))
        elif isinstance(o, _VALUE_TYPES):
            exact.append((d, n, o))
        else:
            groups.setdefault(id(d), (d, []))[1].append((n, o))
    for d, items in groups.values():
        if len(items) < 3:  # a lookup each is cheaper than building a tuple
            exact += [(d, n, o) for n, o in items]
        else:
            watched.append((operator.itemgetter(*[n for n, _ in items]), d,
                            tuple(o for _, o in items)))
    return tuple(watched), tuple(exact)


def _fresh(entry: tuple) -> bool:
    """Whether every global and closure variable the entry's kernel read is still bound to
    the object it read (on every cached launch: plain loops, no generators)."""
    for get, d, snap in entry[4]:  # one C-level compare per namespace
        try:
            if get(d) != snap:
                return False
        except Exception:  # deleted (KeyError), or a new value's odd __eq__
            return False
    for d, n, o in entry[5]:  # the rest one by one: identity
        if d.get(n, _MISSING) is not o:
            return False
    return True


_FLOAT_MAX = {"f16": 65504.0, "bf16": 3.3895313892515355e38, "f32": 3.4028234663852886e38,
              "f64": 1.7976931348623157e308}


def _scalar_bounds(t: Scalar) -> tuple:
    """(lo, hi) such that lo <= v <= hi passes every value t holds as given (floats: the
    finite range; nan, inf and values that round down to the largest finite one fail it
    and are looked at by _check_scalar)."""
    if t.is_bool:
        return 0, 1
    if t.is_float:
        m = _FLOAT_MAX[t.name]
        return -m, m
    return t.int_range


def _needs_check(arg_type: type, t: Scalar) -> bool:
    """Whether a value of arg_type (a launch's key holds it) may not fit t: a numpy scalar
    type whose range t covers, a bool, a float for f64, always fit (and a float bound
    compared with a narrower numpy float would overflow in the cast)."""
    if arg_type is bool or arg_type is np.bool_:
        return False
    if arg_type is float:
        return t.name != "f64"
    if arg_type is int or not issubclass(arg_type, np.generic):
        return True
    try:
        at = from_numpy_dtype(np.dtype(arg_type))
    except TypeError:
        return True
    lo_a, hi_a = _scalar_bounds(at)
    lo, hi = _scalar_bounds(t)
    return lo_a < lo or hi_a > hi


def _rounds_to_inf(x: float, t: Scalar) -> bool:
    with np.errstate(all="ignore"):
        if t.name == "f16":
            return bool(np.isinf(np.float16(x)))
        if t.name == "bf16":
            return (bf16_bits(x) & 0x7F80) == 0x7F80
        if t.name == "f32":
            return bool(np.isinf(np.float32(x)))
    return False


def _show(a) -> str:
    r = repr(a)
    return r if len(r) <= 40 else f"{r[:18]}...{r[-18:]} ({len(r)} characters)"


def _check_scalar(name: str, t: Scalar, a) -> None:
    """A LaunchError naming the argument unless a holds as a t exactly as given: an int in
    range (never wrapped), a float for a float type whose finite values stay finite (nan and
    inf pass), a bool 0/1."""
    if isinstance(a, (bool, np.bool_)):
        return
    if not isinstance(a, (int, float, np.integer, np.floating)):
        raise LaunchError(f"argument '{name}' is a {t} scalar, got {type(a).__name__} "
                          f"{_show(a)}")
    is_float = isinstance(a, (float, np.floating))
    if not t.is_float:
        lo, hi = _scalar_bounds(t)
        if is_float:
            raise LaunchError(f"argument '{name}' is {t} but got the float {_show(a)}: pass an "
                              f"int (or declare a float type)")
        if not lo <= a <= hi:
            what = "0 or 1 (or a bool)" if t.is_bool else f"{lo}..{hi}"
            raise LaunchError(f"argument '{name}' is {t} but got {_show(a)}, which does not "
                              f"fit ({t} holds {what}); nothing is wrapped")
        return
    try:
        x = float(a)
    except OverflowError:
        x = math.inf
    if is_float and not np.isfinite(a):
        return  # nan and inf are values of every float type
    if math.isinf(x) or _rounds_to_inf(x, t):
        raise LaunchError(f"argument '{name}' is {t} but {_show(a)} is beyond its largest "
                          f"finite value {_FLOAT_MAX[t.name]:g} (it would become infinity)")


def _py_scalar_type(value) -> Scalar:
    if isinstance(value, np.generic):
        return from_numpy_dtype(value.dtype)
    if isinstance(value, bool):
        return boolean
    if isinstance(value, int):
        return i32
    return f32


class CubeFunction:
    """What `@cube` returns. Helpers are inlined into kernels; kernels (`launch=True`) have
    `.launch(rt, cube_count=, cube_dim=, **args)`, `.source(target=, **types)` and `.ir()`."""

    def __init__(self, fn, is_kernel: bool = False, checked: bool = True,
                 nowrap: bool = False):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.is_kernel = is_kernel
        self.checked = checked
        self.nowrap = nowrap
        # the source as it is now: a file saved later must not change the kernel
        self._captured = capture(fn)
        self._src: FunctionSource | None = None  # parsed on first use
        self._annotations: dict | None = None
        self._plan: list | None = None
        self._defaults: dict = {}  # the parameters' Python defaults (set with the plan)
        self._hot: dict = {}
        self._fast: dict = {}  # fast key -> bound launcher (see _fast_path)
        self._lock = threading.Lock()
        self.compiles = 0  # specialisations built in this process (tests read it)

    def __repr__(self) -> str:
        kind = "kernel" if self.is_kernel else "helper"
        return f"<cube {kind} {self.fn.__module__}.{self.fn.__qualname__}>"

    def __call__(self, *args, **kwargs):
        if self.is_kernel:
            raise CubeError(f"{self.__name__} is a kernel: launch it with "
                            f"{self.__name__}.launch(rt, cube_count=..., cube_dim=..., ...)")
        return self.fn(*args, **kwargs)

    # ---- introspection -----------------------------------------------------------------
    def source_info(self) -> FunctionSource:
        """The kernel's source as captured when it was decorated (file, first line, text),
        parsed on first use; error messages quote it."""
        if self._src is None:
            self._src = function_source(self.fn, self._captured)
        return self._src

    @property
    def source_hash(self) -> str | None:
        """SHA-256 of the source captured at decoration (None without a source file)."""
        return self._captured.sha256 if self._captured is not None else None

    def signature(self) -> inspect.Signature:
        """The Python signature of the decorated function."""
        return inspect.signature(self.fn)

    def annotations(self) -> dict:
        """The parameters' annotations (Array[...], Tensor[...], Comptime[...], element
        types), evaluated once."""
        if self._annotations is None:
            try:
                self._annotations = inspect.get_annotations(self.fn, eval_str=True)
            except Exception as e:
                raise CompileError(f"cannot evaluate the annotations of {self.__name__}: {e}",
                                   self._def_loc()) from None
        return self._annotations

    def _def_loc(self, param: str | None = None):
        src = self.source_info()
        if param is not None:
            for a in src.tree.args.args:
                if a.arg == param:
                    return src.loc(a)
        return src.loc(src.tree)

    def _param_specs(self) -> list[tuple[str, int, object]]:
        ann = self.annotations()
        out = []
        for name, p in self.signature().parameters.items():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise CompileError("a kernel cannot take *args or **kwargs",
                                   self._def_loc(name))
            spec = ann.get(name, None)
            if spec is None:
                raise CompileError(f"kernel parameter '{name}' needs an annotation, e.g. "
                                   f"Array[f32], f32 or Comptime[int]", self._def_loc(name))
            if isinstance(spec, lang.MemSpec):
                out.append((name, _MEM, spec))
            elif isinstance(spec, lang.ComptimeSpec):
                out.append((name, _COMPTIME, spec))
            elif lang.is_type(spec) or isinstance(spec, typing.TypeVar) or spec in (
                    int, float, bool):
                out.append((name, _SCALAR, spec))
            else:
                raise CompileError(f"unsupported annotation for '{name}': {spec!r}",
                                   self._def_loc(name))
        return out

    def defaults(self) -> dict:
        """The parameters' Python defaults (`alpha: f32 = 2.0`, `BLOCK: Comptime[int] =
        256`): a launch that leaves one out passes the default, as a Python call."""
        return {n: p.default for n, p in self.signature().parameters.items()
                if p.default is not p.empty}

    def arg_names(self) -> list[str]:
        """The runtime (non-comptime) parameters, in the order of a launch's argument list
        (what a recorded launch holds)."""
        return [name for name, kind, _ in self._param_specs() if kind != _COMPTIME]

    # ---- launch ------------------------------------------------------------------------
    def launch(self, rt=None, cube_count=None, cube_dim=None, *extra, **args):
        """Launch on runtime rt: cube_count cubes of cube_dim units (ints or 1-3-tuples),
        the kernel's arguments by name. Everything is checked here, once for every runtime
        (types, scalar ranges, strided views for Array params, limits); a cache hit does
        no parsing or hashing: it rechecks the globals the kernel read (rebinding one
        recompiles), scalar ranges (a compare each) and the grid."""
        plan = self._plan
        if plan is None:
            plan = self._make_plan()
        if self._defaults:  # a parameter's Python default stands in for a missing argument
            args = {**self._defaults, **args}
        key = [rt]
        try:
            for name, kind in plan:
                a = args[name]
                if kind == _ARRAY:  # the type's name: a str hashes from its cache
                    # contiguous: None on a fresh view, worked out; a strided one misses
                    key += (a.rt, a.elem.name, a.line_size, a.contiguous or contiguous(a))
                elif kind == _SCALAR:
                    key.append(type(a))
                elif kind == _MEM:
                    key += (a.rt, a.elem.name, a.line_size, len(a.shape))
                else:
                    key.append(a)
            entry = self._hot.get(tuple(key)) if len(args) == len(plan) and not extra \
                else None
        except (KeyError, AttributeError, TypeError):
            entry = None
        try:
            if entry is None or not _fresh(entry):  # a global it read was rebound: stale
                entry = self._specialise(rt, args, tuple(key), extra)
            if not extra and len(args) == len(plan):
                _bind_fast(self, rt, args, entry)
            exe, names, max_dim, checks, _, _, count_limit = entry
            for n, lo, hi, t in checks:
                if not lo <= args[n] <= hi:  # False for nan too: _check_scalar decides
                    _check_scalar(n, t, args[n])
            cd = _dim3(cube_dim, "cube_dim")
            units = cd[0] * cd[1] * cd[2]
            if units > max_dim or min(cd) < 1:
                raise _bad_dim(cd, max_dim, rt)
            cc = _dim3(cube_count, "cube_count")
            if min(cc) < 1 or cc[0] * cc[1] * cc[2] * units > _U32 or (
                    count_limit is not None and not _within(cc, count_limit)):
                if min(cc) == 0:
                    return  # nothing to run (e.g. ceil(0 / 256) cubes)
                raise _bad_count(cc, cd, count_limit, rt)
            recording.launch(exe, cc, cd, [args[n] for n in names])
        except CubeError as e:
            raise e.with_traceback(None) from None

    def _make_plan(self):
        if not self.is_kernel:
            raise CubeError(f"{self.__name__} is a helper; mark kernels with "
                            f"@cube(launch=True)")
        specs = self._param_specs()
        for name, _, _ in specs:
            if name in ("rt", "cube_count", "cube_dim"):
                raise CubeError(f"kernel {self.__name__} has a parameter named '{name}', "
                                f"which launch(rt, cube_count, cube_dim, ...) takes itself: "
                                f"rename it")
        self._defaults = self.defaults()
        self._plan = [(name, _ARRAY if kind == _MEM and spec.kind == "array" else kind)
                      for name, kind, spec in specs]
        if not any(n.startswith("_cb_") for n, _ in self._plan):
            self.launch = _dispatcher(self, self._plan)  # the instance's: the class's is
            # the general path it falls back on
        return self._plan

    def _launch_miss(self, rt, cube_count, cube_dim, extra: tuple, rest: dict, vals: tuple):
        """The generated launch's fallback: the general path, with the arguments by name."""
        args = {n: v for (n, _), v in zip(self._plan, vals) if v is not _MISSING_ARG}
        args.update(rest)
        return CubeFunction.launch(self, rt, cube_count, cube_dim, *extra, **args)

    def _specialise(self, rt, args: dict, key, extra: tuple = ()):
        if extra:
            names = ", ".join(f"{n}=..." for n in self.arg_names())
            raise LaunchError(f"{self.__name__}.launch takes the kernel's arguments by name "
                              f"after cube_count and cube_dim, got {len(extra)} more "
                              f"positional: {self.__name__}.launch(rt, cube_count, cube_dim"
                              f"{', ' if names else ''}{names})")
        if not isinstance(rt, Runtime):
            raise LaunchError(f"{self.__name__}.launch needs a runtime first (rt = "
                              f"cb.runtime('cpu')), got {type(rt).__name__} {rt!r:.40}")
        with self._lock:
            sig = self._bind(rt, args)
            try:
                entry = self._hot.get(key)
            except TypeError:
                entry = None
            if entry is not None and _fresh(entry):
                return entry  # another thread built it
            deps: list = []
            kernel = self.build_ir(sig, Target(rt.target, rt.plane_size, rt.features),
                                   deps=deps)
            cache_key = make_key(format_kernel(kernel), rt.name, rt.device_id())
            exe = rt.compile(kernel, cache_key)
            _dump(self, kernel, exe)
            names = [p[0] for p in sig.params]
            checks = tuple((n, *_scalar_bounds(t), t) for n, kind, t, _ in sig.params
                           if kind == "scalar" and _needs_check(type(args[n]), t))
            entry = (exe, names, rt.features.max_cube_dim, checks, *_watch(deps),
                     max_cube_count(rt))
            try:
                if len(self._hot) >= MAX_SPECIALISATIONS:
                    self._hot.clear()  # (a launch keyed on ever new values: bounded memory)
                    self._fast.clear()
                self._hot[key] = entry
            except TypeError:
                pass  # an unhashable comptime value: not cached in memory
            return entry

    def _bind(self, rt, args: dict) -> Signature:
        specs = self._param_specs()
        names = {n for n, _, _ in specs}
        for a in args:
            if a not in names:
                raise LaunchError(f"{self.__name__}() got an unexpected argument '{a}' "
                                  f"(parameters: {', '.join(n for n, _, _ in specs)})")
        for n, _, _ in specs:
            if n not in args:
                raise LaunchError(f"{self.__name__}() is missing the argument '{n}'")
        tvars: dict = {}
        params, comptime = [], []
        for name, kind, spec in specs:  # memories first: they bind type variables
            if kind != _MEM:
                continue
            a = args[name]
            if not all(hasattr(a, f) for f in ("buffer", "elem", "rt", "line_size", "shape",
                                                "strides", "contiguous")):
                raise LaunchError(f"argument '{name}' must be a buffer (rt.from_numpy(...)), "
                                  f"got {type(a).__name__}")
            if a.rt is not rt:
                raise LaunchError(f"argument '{name}' lives on runtime "
                                  f"'{getattr(a.rt, 'name', a.rt)}' but the launch is on "
                                  f"'{rt.name}': copy it (rt.from_numpy(x.numpy()))")
            if spec.kind == "array" and not contiguous(a):
                raise LaunchError(f"argument '{name}' is a strided view (shape {a.shape}, "
                                  f"strides {a.strides}) but the kernel takes an Array, which "
                                  f"reads the memory in order: pass a contiguous buffer, or "
                                  f"declare the parameter a Tensor to index with its strides")
            elem_spec, lanes_spec = spec.elem, 1
            if isinstance(elem_spec, lang.LineSpec):
                elem_spec, lanes_spec = elem_spec.elem, elem_spec.lanes
            elem = _match_elem(name, elem_spec, a.elem, tvars)
            if lanes_spec is None:
                lanes = a.line_size
            else:
                lanes = lanes_spec
                if a.line_size != lanes:
                    hint = f"pass {name}.lines({lanes})" if lanes > 1 else \
                        f"declare it Array[Line[{elem}]] to take lines"
                    raise LaunchError(f"argument '{name}' has line size {a.line_size} but the "
                                      f"kernel expects {lanes}: {hint}")
            t = vec(elem, lanes)
            params.append((name, spec.kind, t, len(a.shape) if spec.kind == "tensor" else 0))
        for name, kind, spec in specs:
            a = args[name]
            if kind == _SCALAR:
                if not isinstance(a, (int, float, np.integer, np.floating, np.bool_)):
                    hint = " (an array of one element: pass x.item())" if isinstance(
                        a, np.ndarray) and a.size == 1 else ""
                    raise LaunchError(f"argument '{name}' must be a number, got "
                                      f"{type(a).__name__}{hint}")
                if isinstance(spec, typing.TypeVar):
                    t = tvars.get(spec) or _py_scalar_type(a)
                    tvars.setdefault(spec, t)
                elif spec in (int, float, bool):
                    t = lang.PY_TYPES[spec]
                else:
                    t = spec
                _check_scalar(name, t, a)
                params.append((name, "scalar", t, 0))
            elif kind == _COMPTIME:
                comptime.append((name, a))
        order = {n: i for i, (n, _, _) in enumerate(specs)}
        params.sort(key=lambda p: order[p[0]])
        return Signature(tuple(params), tuple(comptime), self.checked, self.nowrap)

    # ---- building ----------------------------------------------------------------------
    def build_ir(self, sig: Signature, target: Target, optimise: bool = True,
                 deps: list | None = None) -> ir.Kernel:
        """Translate for one signature, run the IR passes and check target features.
        deps, if given, gets (namespace, name, value) for every global and closure variable
        the translation read (a launch recompiles when one is rebound)."""
        self.compiles += 1
        # a name seeded by a literal takes the type of what it meets (frontend/weak.py):
        # each translation that decides one is repeated with it decided
        hints: dict = {}
        for _ in range(MAX_RETRIES):
            try:
                kernel, tr = self._translate(sig, target, hints)
                break
            except Retype as r:
                hints.update(r.hints)
        else:
            raise CompileError(f"'{self.__name__}': the types of its names seeded by "
                               f"literals did not settle; give them types (`x: i32 = 0`)",
                               self.source_info().loc(self.source_info().tree))
        if deps is not None:
            deps.extend(tr.globals_used.values())
        kernel.source = f"{self.fn.__module__}.{self.fn.__qualname__}"
        if os.environ.get("CUBE_DUMP"):
            _write_dump(self, "0-frontend.ir", format_kernel(kernel))
        if optimise:
            kernel = _run_passes(kernel)
        check_features(kernel, target)
        return kernel

    def _translate(self, sig: Signature, target: Target, hints: dict):
        """One translation for `sig` (the kernel, unoptimised, and its translator)."""
        b = Builder(self.__name__, plane_size=target.plane_size, checked=sig.checked,
                    nowrap=sig.nowrap)
        bindings = {}
        for name, kind, t, rank in sig.params:
            if kind == "array":
                bindings[name] = MemRef(b.array(name, t))
            elif kind == "tensor":
                bindings[name] = MemRef(b.tensor(name, t, rank))
            else:
                bindings[name] = b.scalar(name, t)
        tr = Translator(b, target, hints)
        # scalar params are read once at entry
        for name, value in list(bindings.items()):
            if isinstance(value, ir.Param):
                with b.into(tr.entry):
                    bindings[name] = b.scalar_param_value(value)
                    bindings[name].name = name
        for name, value in sig.comptime:
            bindings[name] = value
        tvars = self._type_var_bindings(sig)
        return tr.translate(self, {**tvars, **bindings}), tr

    def _type_var_bindings(self, sig: Signature) -> dict:
        """TypeVars named in annotations, bound from the signature's types."""
        out = {}
        ann = self.annotations()
        types = {n: t for n, _, t, _ in sig.params}
        for name, spec in ann.items():
            elem = spec.elem if isinstance(spec, lang.MemSpec) else spec
            if isinstance(elem, lang.LineSpec):
                elem = elem.elem
            if isinstance(elem, typing.TypeVar) and name in types:
                out[elem.__name__] = types[name].elem
        return out

    def signature_from_types(self, types: dict | None = None, type_vars: dict | None = None,
                             comptime: dict | None = None, line_sizes: dict | None = None,
                             ranks: dict | None = None) -> Signature:
        """A signature from explicit types (for `source()` / `cube dump`), no buffers."""
        types, type_vars = dict(types or {}), dict(type_vars or {})
        comptime, line_sizes, ranks = dict(comptime or {}), dict(line_sizes or {}), \
            dict(ranks or {})
        tv = {}
        for k, v in type_vars.items():
            tv[k] = v
        specs = self._param_specs()
        kinds = {name: kind for name, kind, _ in specs}
        tensors = {name for name, kind, spec in specs
                   if kind == _MEM and getattr(spec, "kind", None) == "tensor"}
        for what, given, want in (("comptime ", comptime, _COMPTIME), ("", types, None),
                                  ("array/tensor ", line_sizes, _MEM), ("tensor ", ranks, _MEM)):
            for name in given:  # a misspelt name was ignored: the dump showed another kernel
                if name not in kinds or want is not None and kinds[name] != want or (
                        given is ranks and name not in tensors):
                    raise CompileError(f"{self.__name__} has no {what}parameter '{name}' (its "
                                       f"parameters: {', '.join(kinds) or 'none'})")
        params, ct = [], []
        for name, kind, spec in specs:
            if kind == _COMPTIME:
                if name not in comptime:
                    raise CompileError(f"give a value for the comptime parameter '{name}'")
                ct.append((name, comptime[name]))
                continue
            spec = types.get(name, spec)
            if kind == _MEM:
                mem_kind = spec.kind if isinstance(spec, lang.MemSpec) else "array"
                elem = spec.elem if isinstance(spec, lang.MemSpec) else spec
                lanes = 1
                if isinstance(elem, lang.LineSpec):
                    lanes = elem.lanes or line_sizes.get(name, 1)
                    elem = elem.elem
                lanes = line_sizes.get(name, lanes)
                elem = _resolve_tv(elem, tv, name)
                params.append((name, mem_kind, vec(elem, lanes),
                               ranks.get(name, 2) if mem_kind == "tensor" else 0))
            else:
                t = lang.PY_TYPES.get(spec, spec)
                params.append((name, "scalar", _resolve_tv(t, tv, name), 0))
        return Signature(tuple(params), tuple(ct), self.checked, self.nowrap)

    def ir(self, *, optimise: bool = True, plane_size: int = 1, **kwargs) -> ir.Kernel:
        """The kernel's IR for one specialisation, as `cube dump --target ir` prints it:
        kwargs give argument types, type variables (`F=f16`), comptime values and `ranks=`;
        `optimise=False` skips the pass pipeline."""
        sig = self._sig_from_kwargs(kwargs)
        try:
            return self.build_ir(sig, Target("ir", plane_size, None), optimise)
        except CubeError as e:
            raise e.with_traceback(None) from None

    def source(self, target: str = "ir", **kwargs) -> str:
        """Generated source for `target`; kwargs give argument types (`x=Array[Line[f32,
        4]]`), type variables (`F=f16`) and comptime values (`n=4`)."""
        from .targets import target_info
        try:
            info = target_info(target)
            sig = self._sig_from_kwargs(kwargs)
            kernel = self.build_ir(sig, Target(target, info.features.plane_size,
                                               info.features))
            return info.generate(kernel)
        except CubeError as e:
            raise e.with_traceback(None) from None

    def _sig_from_kwargs(self, kwargs) -> Signature:
        specs = {n: k for n, k, _ in self._param_specs()}
        types, tvars, comptime = {}, {}, {}
        ranks = kwargs.pop("ranks", None)
        for k, v in kwargs.items():
            if k in specs and specs[k] == _COMPTIME:
                comptime[k] = v
            elif k in specs:
                types[k] = v
            else:
                tvars[k] = v
        return self.signature_from_types(types, tvars, comptime, ranks=ranks)


# ---- the cached launch's fast path ---------------------------------------------------------
#
# After its first call a kernel's `launch` is a function generated for its parameters
# (`_launcher`): keyword-only parameters (no dict), a key of the runtime and per argument a
# token cached on the buffer object (`_cube_sig`: for runtime, element type and line size,
# which never change for a buffer or line view; a view copies it with the rest of its
# attributes), one dict lookup of the bound launcher for that key (`_bound`: per
# specialisation, with the checks of the general path's cache hit inline) and one call of
# the executable. Where the executable can prepare a launch (`prepare`, the CPU), the last
# launch of each specialisation is kept with what it was made of, and the instance's
# `launch` becomes that specialisation's own function, whose first lines compare the call
# with it: the same runtime, the same grid (the same object, or equal ints), the same
# buffer objects (weak references) and scalar objects, no recording active and every global
# the kernel read still bound as it was: then the prepared launch runs and nothing else.
# Whatever the generated code does not handle (a first launch, extra or missing arguments,
# unhashable comptime values, a stale kernel, a strided view for an Array) goes to the
# general `CubeFunction.launch`, which raises the LaunchErrors and registers the bound
# launcher for the next call.

# specialisations (and fast keys) a kernel keeps in memory: past it they are dropped and
# rebuilt on their next launch (from the disk cache), so a program that launches a kernel
# with ever new comptime values (a pool's output size per image size) holds bounded memory
MAX_SPECIALISATIONS = 1024


class _MissingArg:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing argument>"


_MISSING_ARG = _MissingArg()
_SIGS: dict = {}  # (runtime, element type, line size) -> its token (hashed by identity)


def _buffer_sig(a) -> object:
    """What of a buffer argument the fast key holds (with the rank for Tensor parameters;
    contiguity is checked for Array ones): a token per (runtime, element type, line size),
    set on the object the first time."""
    t = (a.rt, a.elem.name, a.line_size)
    sig = _SIGS.get(t)
    if sig is None:
        sig = _SIGS.setdefault(t, object())
    try:
        a._cube_sig = sig
    except AttributeError:  # slots or a read-only object: the general path every time
        pass
    return sig


def _fast_key(rt, plan, vals) -> tuple:
    key = [rt]
    for (_, kind), a in zip(plan, vals):
        if kind == _ARRAY or kind == _MEM:
            sig = getattr(a, "_cube_sig", None)  # (not __dict__: that builds the dict)
            key.append(_buffer_sig(a) if sig is None else sig)
            if kind == _MEM:
                key.append(len(a.shape))
        elif kind == _SCALAR:
            key.append(type(a))
        else:
            key.append(a)
    return tuple(key)


def _launcher_src(plan: list, hit: str = "", cf_defaults: dict | None = None) -> str:
    """The source of a kernel's generated `launch`: `hit` (a specialisation's check of its
    last launch) first, then the key lookup and the bound launcher, else the general path."""
    names = [n for n, _ in plan]
    key = ["rt"]
    for n, kind in plan:  # a buffer seen for the first time gets its token here
        if kind == _ARRAY:
            key.append(f"(_cb_getattr({n}, '_cube_sig', None) or _cb_sig({n}))")
        elif kind == _MEM:
            key += [f"(_cb_getattr({n}, '_cube_sig', None) or _cb_sig({n}))",
                    f"len({n}.shape)"]
        elif kind == _SCALAR:
            key.append(f"type({n})")
        else:
            key.append(n)
    defaults = cf_defaults or {}
    params = "".join(f", {n}=_cb_D[{n!r}]" if n in defaults else f", {n}=_cb_M"
                     for n in names)
    vals = "".join(f"{n}, " for n in names)
    return f"""
def launch(rt=None, cube_count=None, cube_dim=None, *_cb_extra{params}, **_cb_rest):{hit}
    try:
        _cb_f = _cb_fast.get(({', '.join(key)}))
    except Exception:
        _cb_f = None
    try:
        if _cb_f is None or _cb_extra or _cb_rest or not _cb_f(cube_count, cube_dim, {vals}):
            _cb_miss(rt, cube_count, cube_dim, _cb_extra, _cb_rest, ({vals}))
    except _cb_CubeError as e:
        raise e.with_traceback(None) from None
"""


def _launcher_env(cf: CubeFunction) -> dict:
    return {"_cb_M": _MISSING_ARG, "_cb_D": cf._defaults, "_cb_fast": cf._fast,
            "_cb_miss": cf._launch_miss,
            "_cb_CubeError": CubeError, "_cb_getattr": getattr, "_cb_sig": _buffer_sig}


def _dispatcher(cf: CubeFunction, plan: list):
    env = _launcher_env(cf)
    src = _launcher_src(plan, cf_defaults=cf._defaults)
    exec(compile(src, f"<cube launch {cf.__name__}>", "exec"), env)
    fn = env["launch"]
    fn.__doc__ = CubeFunction.launch.__doc__
    return fn


def _bind_fast(cf: CubeFunction, rt, args: dict, entry: tuple) -> None:
    """Register the bound launcher of entry under the fast key of these arguments."""
    plan = cf._plan
    try:
        key = _fast_key(rt, plan, [args[n] for n, _ in plan])
        f = cf._fast.get(key)
        if f is None or f.entry is not entry:
            if len(cf._fast) >= MAX_SPECIALISATIONS:
                cf._fast.clear()  # (cleared in place: the generated launchers hold it)
            cf._fast[key] = _bound(cf, rt, plan, entry)
    except Exception:  # unhashable comptime values, odd arguments: the general path
        pass


def _bound(cf: CubeFunction, rt, plan: list, entry: tuple):
    """The launcher of one specialisation: what the general path checks on a cache hit,
    inline: the globals read (stale: False, the general path recompiles), contiguity of
    Array arguments (False: the general path refuses), scalar ranges and the grid; and,
    where the executable prepares launches, its own `launch` (see above)."""
    exe, names, max_dim, checks, watched, exact, count_limit = entry
    prepare = getattr(exe, "prepare", None)
    env = {**_launcher_env(cf), "_cb_exe": exe, "_cb_launch": exe.launch,
           "_cb_rec": recording, "_cb_rt": rt, "_cb_prepare": prepare, "_cb_cf": cf,
           "_cb_last": [(_MISSING,) * (3 + len(plan))], "_cb_ref": weakref.ref,
           "_cb_int": int, "_cb_tuple": tuple, "_cb_dim3": _dim3, "_cb_bad_dim": _bad_dim,
           "_cb_bad_count": _bad_count, "_cb_within": _within, "_cb_contiguous": contiguous,
           "_cb_check_scalar": _check_scalar, "_cb_limit": count_limit, "_cb_maxd": max_dim,
           "_cb_cx": _U32 if count_limit is None else count_limit[0]}
    stale = []
    for j, (get, d, snap) in enumerate(watched):
        env[f"_cb_g{j}"], env[f"_cb_d{j}"], env[f"_cb_s{j}"] = get, d, snap
        stale.append(f"_cb_g{j}(_cb_d{j}) != _cb_s{j}")
    for j, (d, n, o) in enumerate(exact):
        env[f"_cb_o{j}"] = o
        if isinstance(d, _Cell):
            env[f"_cb_c{j}"] = d.cell
            stale.append(f"_cb_c{j}.cell_contents is not _cb_o{j}")
        else:
            env[f"_cb_e{j}"], env[f"_cb_n{j}"] = d, n
            stale.append(f"_cb_e{j}.get(_cb_n{j}, _cb_M) is not _cb_o{j}")
    stale_expr = " or ".join(stale) or "False"
    lines = [f"if not ({n}.contiguous or _cb_contiguous({n})):\n        return False"
             for n, kind in plan if kind == _ARRAY]
    for j, (n, lo, hi, t) in enumerate(checks):
        env[f"_cb_lo{j}"], env[f"_cb_hi{j}"], env[f"_cb_t{j}"] = lo, hi, t
        lines.append(f"if not _cb_lo{j} <= {n} <= _cb_hi{j}:\n"
                     f"        _cb_check_scalar({n!r}, _cb_t{j}, {n})")
    checks_src = "".join("    " + ln + "\n" for ln in lines)
    args = ", ".join(names)
    mems = [kind in (_ARRAY, _MEM) for _, kind in plan]
    keep = "".join(f", {'_cb_ref(' if m else ''}{n}{')' if m else ''}"
                   for (n, _), m in zip(plan, mems))
    if prepare is None:
        run = f"_cb_launch(_cb_cc, _cb_cd, [{args}])"
    else:
        run = f"""_cb_p = _cb_prepare(_cb_cc, _cb_cd, [{args}])
        if _cb_p is None:
            _cb_launch(_cb_cc, _cb_cd, [{args}])
        else:
            _cb_p()
            if (type(cube_count) is _cb_int or type(cube_count) is _cb_tuple) and (
                    type(cube_dim) is _cb_int or type(cube_dim) is _cb_tuple):
                try:
                    _cb_last[0] = (cube_count, cube_dim, _cb_p{keep})
                except TypeError:  # no weak references to an argument
                    pass
                else:
                    _cb_cf.launch = launch"""
    src = f"""
def bound(cube_count, cube_dim, {''.join(n + ', ' for n, _ in plan)}):
    try:
        if {stale_expr}:
            return False
    except Exception:
        return False
{checks_src}    if type(cube_dim) is int and 0 < cube_dim <= _cb_maxd:
        _cb_cd = (cube_dim, 1, 1)
        _cb_units = cube_dim
    else:
        _cb_cd = _cb_dim3(cube_dim, "cube_dim")
        _cb_units = _cb_cd[0] * _cb_cd[1] * _cb_cd[2]
        if _cb_units > _cb_maxd or min(_cb_cd) < 1:
            raise _cb_bad_dim(_cb_cd, _cb_maxd, _cb_rt)
    if type(cube_count) is int and 0 < cube_count <= _cb_cx and \\
            cube_count * _cb_units <= {_U32}:
        _cb_cc = (cube_count, 1, 1)
    else:
        _cb_cc = _cb_dim3(cube_count, "cube_count")
        if min(_cb_cc) < 1 or _cb_cc[0] * _cb_cc[1] * _cb_cc[2] * _cb_units > {_U32} or (
                _cb_limit is not None and not _cb_within(_cb_cc, _cb_limit)):
            if min(_cb_cc) == 0:
                return True
            raise _cb_bad_count(_cb_cc, _cb_cd, _cb_limit, _cb_rt)
    if _cb_rec.active is None:
        {run}
    else:
        _cb_rec.launch(_cb_exe, _cb_cc, _cb_cd, [{args}])
    return True
"""
    if prepare is not None:
        same = "".join(f" and _cb_L[{3 + j}]{'()' if m else ''} is {n}"
                       for j, ((n, _), m) in enumerate(zip(plan, mems)))
        def grid(v: str, k: int) -> str:
            """v gives the grid of the last launch: the same object, an equal int, or an
            equal tuple of ints (it has 1 to 3 entries, as the last one: [0], [-1] and
            [len // 2] are all of them; equal is not enough: (1.0,) == (True,) == (1,))"""
            last = f"_cb_L[{k}]"
            return (f"({v} is {last} or type({v}) is _cb_int and {v} == {last} or "
                    f"type({v}) is _cb_tuple and {v} == {last} and type({v}[0]) is _cb_int "
                    f"and type({v}[-1]) is _cb_int and type({v}[len({v}) // 2]) is _cb_int)")
        src += _launcher_src(plan, cf_defaults=cf._defaults, hit=f"""
    _cb_L = _cb_last[0]
    if rt is _cb_rt and {grid("cube_count", 0)} \\
            and {grid("cube_dim", 1)} \\
            {same} and not _cb_extra and not _cb_rest and _cb_rec.active is None:
        try:
            _cb_stale = {stale_expr}
        except Exception:
            _cb_stale = True
        if not _cb_stale:
            _cb_L[2]()
            return""")
    name = getattr(getattr(exe, "kernel", None), "name", cf.__name__)
    exec(compile(src, f"<cube bound launch {name}>", "exec"), env)
    fn = env["bound"]
    fn.entry = entry
    if prepare is not None:
        env["launch"].__doc__ = CubeFunction.launch.__doc__
    return fn


def _resolve_tv(t, tv: dict, name: str) -> Type:
    if isinstance(t, typing.TypeVar):
        got = tv.get(t.__name__) or tv.get(t)
        if got is None:
            raise CompileError(f"the type of '{name}' is the type variable {t.__name__}: "
                               f"give it, e.g. {t.__name__}=f32")
        return got
    return t


def _match_elem(name: str, spec, elem: Scalar, tvars: dict) -> Scalar:
    if isinstance(spec, typing.TypeVar):
        bound = tvars.get(spec)
        if bound is None:
            tvars[spec] = elem
            return elem
        if bound != elem:
            raise LaunchError(f"argument '{name}' has element type {elem} but {spec.__name__} "
                              f"is already {bound} from an earlier argument")
        return elem
    if spec != elem:
        raise LaunchError(f"argument '{name}' must hold {spec} elements, got {elem}")
    return elem


def _run_passes(kernel: ir.Kernel) -> ir.Kernel:
    try:
        return run_pipeline(kernel)
    except IRError as e:
        raise CompileError(e.message, e.loc) from None


def _write_dump(cf: CubeFunction, name: str, text: str) -> None:
    d = Path(os.environ["CUBE_DUMP"]) / f"{cf.fn.__module__}.{cf.__name__}"
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(text)


def _dump(cf: CubeFunction, kernel: ir.Kernel, exe) -> None:
    if not os.environ.get("CUBE_DUMP"):
        return
    _write_dump(cf, "1-optimised.ir", format_kernel(kernel))
    src = getattr(exe, "source", None)
    if src:
        _write_dump(cf, "2-target.txt", src if isinstance(src, str) else repr(src))


def cube(fn=None, *, launch: bool = False, unchecked: bool = False, nowrap: bool = False):
    """`@cube` marks a helper (inlined into kernels); `@cube(launch=True)` a kernel.
    unchecked: no bounds checks (the kernel keeps its accesses in range); nowrap: the
    kernel's u32 index arithmetic never wraps (adds and multiplies may be compiled as such:
    a wrap is then undefined)."""
    def wrap(f):
        if not isinstance(f, types.FunctionType):
            raise TypeError(f"@cube decorates a function (def ...), got {_what(f)}: write "
                            f"@cube, or @cube(launch=True, unchecked=..., nowrap=...) with "
                            f"its options by name")
        return CubeFunction(f, is_kernel=launch, checked=not unchecked, nowrap=nowrap)
    return wrap(fn) if fn is not None else wrap


def _what(v) -> str:
    r = repr(v)
    return f"{type(v).__name__} {r if len(r) <= 40 else r[:37] + '...'}"

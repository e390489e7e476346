"""`@cube` functions: specialisation per signature, the launch hot path and the caches."""
from __future__ import annotations

import functools
import inspect
import os
import threading
import typing
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cube_ir import ir
from cube_ir.builder import Builder
from cube_ir.errors import IRError
from cube_ir.passes import run_pipeline
from cube_ir.printer import format_kernel
from cube_ir.types import Scalar, Type, boolean, f32, from_numpy_dtype, i32, vec
from runtimes.disk_cache import make_key
from runtimes.errors import CubeError, LaunchError

from . import lang, recording
from .capabilities import check_features
from .errors import CompileError
from .frontend.source import FunctionSource, capture, function_source
from .frontend.translator import Target, Translator
from .frontend.values import MemRef

_MEM, _SCALAR, _COMPTIME = 0, 1, 2


@dataclass(frozen=True)
class Signature:
    """One specialisation: runtime params (name, kind, type, rank) and comptime values."""

    params: tuple
    comptime: tuple
    checked: bool
    nowrap: bool = False


def _dim3(d) -> tuple[int, int, int]:
    if type(d) is int:
        return (d, 1, 1)
    if type(d) is tuple and len(d) == 3 and type(d[0]) is type(d[1]) is type(d[2]) is int:
        return d
    d = tuple(int(x) for x in d)
    if not 1 <= len(d) <= 3:
        raise LaunchError(f"a cube count/dim has 1 to 3 entries, got {d}")
    return d + (1,) * (3 - len(d))


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
        self._hot: dict = {}
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
        if self._src is None:
            self._src = function_source(self.fn, self._captured)
        return self._src

    @property
    def source_hash(self) -> str | None:
        """SHA-256 of the source captured at decoration (None without a source file)."""
        return self._captured.sha256 if self._captured is not None else None

    def signature(self) -> inspect.Signature:
        return inspect.signature(self.fn)

    def annotations(self) -> dict:
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

    def arg_names(self) -> list[str]:
        """The runtime (non-comptime) parameters, in the order of a launch's argument list
        (what a recorded launch holds)."""
        return [name for name, kind, _ in self._param_specs() if kind != _COMPTIME]

    # ---- launch ------------------------------------------------------------------------
    def launch(self, rt, cube_count, cube_dim, **args):
        plan = self._plan
        if plan is None:
            plan = self._make_plan()
        key = [rt]
        try:
            for name, kind in plan:
                a = args[name]
                if kind == _MEM:  # the type's name: a str hashes from its cache
                    key += (a.rt, a.elem.name, a.line_size, len(a.shape))
                elif kind == _SCALAR:
                    key.append(type(a))
                else:
                    key.append(a)
            entry = self._hot.get(tuple(key)) if len(args) == len(plan) else None
        except (KeyError, AttributeError, TypeError):
            entry = None
        try:
            if entry is None:
                entry = self._specialise(rt, args, tuple(key))
            exe, names, max_dim = entry
            cd = _dim3(cube_dim)
            if cd[0] * cd[1] * cd[2] > max_dim or min(cd) < 1:
                raise LaunchError(f"cube_dim {cd} is outside the limit of {max_dim} units per "
                                  f"cube on {rt.name}")
            cc = _dim3(cube_count)
            if min(cc) < 1:
                return
            recording.launch(exe, cc, cd, [args[n] for n in names])
        except CubeError as e:
            raise e.with_traceback(None) from None

    def _make_plan(self):
        if not self.is_kernel:
            raise CubeError(f"{self.__name__} is a helper; mark kernels with "
                            f"@cube(launch=True)")
        self._plan = [(name, kind) for name, kind, _ in self._param_specs()]
        return self._plan

    def _specialise(self, rt, args: dict, key):
        with self._lock:
            sig = self._bind(rt, args)
            try:
                entry = self._hot.get(key)
            except TypeError:
                entry = None
            if entry is not None:
                return entry
            kernel = self.build_ir(sig, Target(rt.target, rt.plane_size, rt.features))
            cache_key = make_key(format_kernel(kernel), rt.name, rt.device_id())
            exe = rt.compile(kernel, cache_key)
            _dump(self, kernel, exe)
            names = [p[0] for p in sig.params]
            entry = (exe, names, rt.features.max_cube_dim)
            try:
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
            if not hasattr(a, "buffer") or not hasattr(a, "elem"):
                raise LaunchError(f"argument '{name}' must be a buffer (rt.from_numpy(...)), "
                                  f"got {type(a).__name__}")
            if a.rt is not rt:
                raise LaunchError(f"argument '{name}' lives on runtime '{a.rt.name}' but the "
                                  f"launch is on '{rt.name}'")
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
                if not isinstance(a, (int, float, bool, np.generic)):
                    raise LaunchError(f"argument '{name}' must be a number, got "
                                      f"{type(a).__name__}")
                if isinstance(spec, typing.TypeVar):
                    t = tvars.get(spec) or _py_scalar_type(a)
                    tvars.setdefault(spec, t)
                elif spec in (int, float, bool):
                    t = {int: i32, float: f32, bool: boolean}[spec]
                else:
                    t = spec
                if isinstance(a, float) and not t.is_float:
                    raise LaunchError(f"argument '{name}' is {t} but got the float {a!r}")
                params.append((name, "scalar", t, 0))
            elif kind == _COMPTIME:
                comptime.append((name, a))
        order = {n: i for i, (n, _, _) in enumerate(specs)}
        params.sort(key=lambda p: order[p[0]])
        return Signature(tuple(params), tuple(comptime), self.checked, self.nowrap)

    # ---- building ----------------------------------------------------------------------
    def build_ir(self, sig: Signature, target: Target, optimise: bool = True) -> ir.Kernel:
        """Translate for one signature, run the IR passes and check target features."""
        self.compiles += 1
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
        tr = Translator(b, target)
        # scalar params are read once at entry
        for name, value in list(bindings.items()):
            if isinstance(value, ir.Param):
                with b.into(tr.entry):
                    bindings[name] = b.scalar_param_value(value)
                    bindings[name].name = name
        for name, value in sig.comptime:
            bindings[name] = value
        tvars = self._type_var_bindings(sig)
        kernel = tr.translate(self, {**tvars, **bindings})
        kernel.source = f"{self.fn.__module__}.{self.fn.__qualname__}"
        if os.environ.get("CUBE_DUMP"):
            _write_dump(self, "0-frontend.ir", format_kernel(kernel))
        if optimise:
            kernel = _run_passes(kernel)
        check_features(kernel, target)
        return kernel

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
        params, ct = [], []
        for name, kind, spec in self._param_specs():
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
                t = {int: i32, float: f32, bool: boolean}.get(spec, spec)
                params.append((name, "scalar", _resolve_tv(t, tv, name), 0))
        return Signature(tuple(params), tuple(ct), self.checked, self.nowrap)

    def ir(self, *, optimise: bool = True, plane_size: int = 1, **kwargs) -> ir.Kernel:
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
        return CubeFunction(f, is_kernel=launch, checked=not unchecked, nowrap=nowrap)
    return wrap(fn) if fn is not None else wrap

"""`cube check`: compile kernels for every target and validate each with the target's real
tool (nvcc + ptxas, hipcc, clang with a Metal shim, spirv-val, naga), printing a table of
kernels x targets. See docs/check.md.

    from cube.check import check, user_kernels
    report = check(user_kernels("my_kernels.py"), ["cuda", "wgsl"])
    print(report.table()); report.ok
"""
from __future__ import annotations

import copy
import importlib
import importlib.util
import inspect
import sys
import time
import typing
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from cube_ir import ir

from ..errors import CapabilityError, CompileError, CubeError
from . import tools as T

DEFAULT_TARGETS = ("cuda", "hip", "msl", "spirv", "wgsl")
ALL_TARGETS = (*DEFAULT_TARGETS, "opencl")
SPIRV_CUBE_DIM = (64, 1, 1)  # SPIR-V fixes the workgroup size in the module


@dataclass
class Item:
    """One kernel specialisation to check: build(target, plane_size) gives its IR for a
    target (raising CapabilityError where the target lacks something it needs)."""

    label: str
    build: Callable[[str, int], ir.Kernel]
    group: str = ""  # a heading for the table ("dl/kernels", "dl fusion", a file)


@dataclass
class Cell:
    status: str  # ok, n/a, skipped, FAIL, error
    text: str  # what the table shows
    detail: str = ""  # the tool's (or the compiler's) message

    @property
    def failed(self) -> bool:
        return self.status in ("FAIL", "error")


@dataclass
class Report:
    items: list[Item]
    targets: list[str]
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)  # (label, target)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not any(c.failed for c in self.cells.values())

    def failures(self) -> list[tuple[str, str, Cell]]:
        return [(label, t, c) for (label, t), c in self.cells.items() if c.failed]

    def counts(self, target: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for it in self.items:
            s = self.cells[(it.label, target)].status
            out[s] = out.get(s, 0) + 1
        return out

    def table(self) -> str:
        w = max([len(i.label) for i in self.items] + [6])
        cols = {t: max([len(t)] + [len(self.cells[(i.label, t)].text) for i in self.items])
                for t in self.targets}
        head = f"{'kernel':<{w}}  " + "  ".join(f"{t:<{cols[t]}}" for t in self.targets)
        lines = [head.rstrip(), "-" * len(head.rstrip())]
        group = None
        for it in self.items:
            if it.group != group and it.group:
                lines.append(f"[{it.group}]")
            group = it.group
            row = f"{it.label:<{w}}  " + "  ".join(
                f"{self.cells[(it.label, t)].text:<{cols[t]}}" for t in self.targets)
            lines.append(row.rstrip())
        lines.append("-" * len(head.rstrip()))
        summary = []
        for t in self.targets:
            c = self.counts(t)
            summary.append(f"{t}: " + ", ".join(f"{n} {s}" for s, n in sorted(c.items())))
        lines.append(f"{len(self.items)} kernels; " + "; ".join(summary))
        return "\n".join(lines + self.notes)


# ---- checking --------------------------------------------------------------------------------

def _generate(target: str, kernel: ir.Kernel):
    if target == "spirv":
        from codegen.spirv import Unsupported, emit_module
        try:
            return emit_module(kernel, kernel.cube_dim or SPIRV_CUBE_DIM).binary
        except Unsupported as e:
            raise CompileError(str(e)) from None
    from ..targets import target_info
    return target_info(target).generate(kernel)


def _sources(items: list[Item], target: str, plane: int | None, cells: dict) -> list:
    """(label, source) for every item the target takes; the others' cells are filled."""
    from ..targets import TARGETS
    info = TARGETS[target]
    ps = plane or info.features.plane_size
    out = []
    for i, it in enumerate(items):
        if (it.label, target) in cells:
            continue  # refused for another architecture already
        try:
            k = it.build(target, ps)
            k = copy.copy(k)
            k.name = f"k{i}_{k.name}"  # entry points apart in one translation unit
            out.append((it.label, _generate(target, k)))
        except CapabilityError as e:
            cells[(it.label, target)] = Cell("n/a", f"n/a: {e.capability}", e.message)
        except CubeError as e:
            cells[(it.label, target)] = Cell("error", "ERROR", str(e))
        except Exception as e:  # a generator crash is a failure of that kernel
            cells[(it.label, target)] = Cell("error", "ERROR", f"{type(e).__name__}: {e}")
    return out


class _Skip(str):
    """A kernel the tool could not take here (a device feature it lacks): not validated."""


def _validate(tool: T.Tool, arch: str, sources: list,
              wd: Path) -> tuple[dict[str, str | None], float]:
    """(label -> None (passed) or the tool's error, seconds), splitting failed batches (see
    cube.check.tools)."""
    start = time.perf_counter()
    results: dict[str, str | None] = {}
    pending = [sources]
    n = 0
    while pending:
        batch = pending.pop()
        if not batch:
            continue
        n += 1
        sub = wd / f"{arch}-{n}"
        sub.mkdir(parents=True, exist_ok=True)
        r = tool.validate(batch, arch, sub)
        for label, why in r.skipped.items():
            results[label] = _Skip(why)
        batch = [s for s in batch if s[0] not in r.skipped]
        if r.ok:
            results.update(dict.fromkeys((label for label, _ in batch), None))
        elif r.failed:
            results.update(r.failed)
            rest = [s for s in batch if s[0] not in r.failed]
            if len(rest) < len(batch):
                pending.append(rest)
        elif len(batch) == 1:
            results[batch[0][0]] = r.error or "failed"
        elif len(batch) > 2 and _broken_tool(tool, arch, batch, wd / f"{arch}-probe{n}"):
            # the tool fails whatever it gets (an architecture it lacks, a missing header):
            # one verdict for all, not a bisection that runs it twice per kernel
            results.update(dict.fromkeys((label for label, _ in batch), r.error or "failed"))
        else:
            half = len(batch) // 2
            pending += [batch[:half], batch[half:]]
    return results, time.perf_counter() - start


def _broken_tool(tool: T.Tool, arch: str, batch: list, wd: Path) -> bool:
    """Whether the first and the last kernel of a failed batch each fail alone with an
    error that names no kernel."""
    for i, probe in enumerate((batch[:1], batch[-1:])):
        sub = wd / str(i)
        sub.mkdir(parents=True, exist_ok=True)
        r = tool.validate(probe, arch, sub)
        if r.ok or r.failed or r.skipped:
            return False
    return True


def check(items: list[Item], targets: list[str] | tuple[str, ...] = DEFAULT_TARGETS,
          verbose: bool = False) -> Report:
    start = time.perf_counter()
    for t in targets:
        if t not in T.tools():
            raise CubeError(f"cube check: unknown target '{t}' (known: "
                            f"{', '.join(ALL_TARGETS)})")
    report = Report(items, list(targets))
    cells = report.cells
    # the tools run in threads while this one generates the next target's sources
    with T.workdir() as tmp, ThreadPoolExecutor(T.JOBS) as ex:
        futures = []
        for t in targets:
            tool = T.tools()[t]
            missing = tool.missing()
            if missing:
                for it in items:
                    cells[(it.label, t)] = Cell("skipped", f"skipped ({missing})")
                continue
            if tool.note:
                report.notes.append(f"note: {t}: {tool.note}")
            by_plane: dict = {}
            for arch, plane in tool.archs:
                if plane not in by_plane:
                    by_plane[plane] = _sources(items, t, plane, cells)
                futures.append((tool, arch, ex.submit(_validate, tool, arch, by_plane[plane],
                                                      Path(tmp) / t)))
        verdicts: dict[tuple[str, str], list[tuple[str, str]]] = {}  # failures per cell
        passed: set[tuple[str, str]] = set()
        for tool, arch, fut in futures:
            results, seconds = fut.result()
            if verbose:
                report.notes.append(f"note: {tool.target} {arch}: {len(results)} kernels "
                                    f"validated in {seconds:.1f} s")
            for label, err in results.items():
                if err is None:
                    passed.add((label, tool.target))
                elif isinstance(err, _Skip):
                    cells.setdefault((label, tool.target), Cell("skipped", f"skipped ({err})"))
                else:
                    verdicts.setdefault((label, tool.target), []).append((arch, err))
    for key, errs in verdicts.items():
        archs = ",".join(a for a, _ in errs)
        detail = "\n".join(f"[{a}] {e}" for a, e in errs)
        cells[key] = Cell("FAIL", f"FAIL ({archs})" if len(T.tools()[key[1]].archs) > 1
                          else "FAIL", detail)
    for key in passed:
        cells.setdefault(key, Cell("ok", "ok"))
    report.seconds = time.perf_counter() - start
    return report


# ---- kernels of a file or module -------------------------------------------------------------

_SPEC_KEYS = {"type": "type_vars", "type_vars": "type_vars", "comptime": "comptime",
              "line_size": "line_sizes", "line_sizes": "line_sizes", "rank": "ranks",
              "ranks": "ranks", "types": "types"}


def _import_error(e: Exception, path: Path) -> str:
    """`Type: message` of an exception raised importing `path`, at the deepest frame in it."""
    import traceback
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == str(path)]
    where = f" ({frames[-1].filename}:{frames[-1].lineno}: {frames[-1].line})" if frames else ""
    return f"{type(e).__name__}: {e}{where}"


def load_module(spec: str):
    """A module from a file path (FILE.py) or a dotted module name."""
    if spec.endswith(".py") or "/" in spec or Path(spec).exists():
        p = Path(spec)
        if not p.exists():
            raise CubeError(f"no such file: {spec}")
        p = p.resolve()
        parts, root = [p.stem], p.parent
        while (root / "__init__.py").exists():  # a module of a package: import it as one, so
            parts.insert(0, root.name)          # its relative imports resolve
            root = root.parent
        sys.path.insert(0, str(root))
        try:
            if len(parts) > 1:
                return importlib.import_module(".".join(parts))
            name = f"_cube_check_{p.stem}"
            mspec = importlib.util.spec_from_file_location(name, p)
            module = importlib.util.module_from_spec(mspec)
            sys.modules[name] = module
            mspec.loader.exec_module(module)
            return module
        except CubeError:
            raise
        except Exception as e:  # the user's module failed to import: say where, no traceback
            raise CubeError(f"cannot import {spec}: {_import_error(e, p)}") from None
    try:
        return importlib.import_module(spec)
    except ImportError as e:
        raise CubeError(f"cannot import module '{spec}': {e}") from None


def _type_vars(cf) -> list[str]:
    from .. import lang
    out = []
    for spec in cf.annotations().values():
        elem = spec.elem if isinstance(spec, lang.MemSpec) else spec
        if isinstance(elem, lang.LineSpec):
            elem = elem.elem
        if isinstance(elem, typing.TypeVar) and elem.__name__ not in out:
            out.append(elem.__name__)
    return out


def _default_variant(cf) -> dict:
    """Type variables f32; comptime parameters their Python defaults."""
    from cube_ir.types import f32

    from ..kernel import _COMPTIME
    params = cf.signature().parameters
    comptime = {n: params[n].default for n, kind, _ in cf._param_specs()
                if kind == _COMPTIME and params[n].default is not inspect.Parameter.empty}
    return {"type_vars": dict.fromkeys(_type_vars(cf), f32), "comptime": comptime}


def _variant(cf, v: dict) -> dict:
    out = _default_variant(cf)
    for k, val in v.items():
        if k not in _SPEC_KEYS:
            raise CubeError(f"CUBE_CHECK entry for {cf.__name__}: unknown key '{k}' (use "
                            f"type, comptime, line_size, rank)")
        key = _SPEC_KEYS[k]
        out[key] = {**out.get(key, {}), **val}
    return out


def _describe(name: str, v: dict, n: int) -> str:
    if n == 1 and not v:
        return name
    parts = [f"{k}={getattr(t, 'name', t)}" for k, t in v.get("type_vars", {}).items()]
    parts += [f"{k}={val}" for k, val in v.get("comptime", {}).items()]
    parts += [f"{k}:{val}" for k, val in v.get("line_sizes", {}).items()]
    parts += [f"{k}^{val}" for k, val in v.get("ranks", {}).items()]
    return f"{name}[{','.join(parts)}]" if parts else name


def kernel_item(cf, sig, label: str, group: str = "", built: dict | None = None) -> Item:
    """An item for cf specialised by sig. The IR is built once per plane size (the frontend
    reads nothing else of the target), then checked against each target's capabilities;
    `built` may hold kernels already built, by plane size."""
    from ..frontend.translator import Target
    memo: dict[int, ir.Kernel] = dict(built or {})

    def base(plane: int) -> ir.Kernel:
        if plane not in memo:
            memo[plane] = cf.build_ir(sig, Target("ir", plane, None))
        return memo[plane]
    return Item(label, _checked(base), group)


def _checked(base: Callable[[int], ir.Kernel]) -> Callable[[str, int], ir.Kernel]:
    def build(target: str, plane: int) -> ir.Kernel:
        from ..capabilities import check_features
        from ..frontend.translator import Target
        from ..targets import TARGETS
        k = base(plane)
        check_features(k, Target(target, plane, TARGETS[target].features))
        return k
    return build


def user_kernels(spec: str) -> list[Item]:
    """Every @cube kernel defined in a file or module, in the specialisations its
    module-level `CUBE_CHECK = {"kernel": [dict(type=..., comptime=..., line_size=...,
    rank=...), ...]}` declares (keys may be the kernels themselves); a kernel without an
    entry is checked once, type variables f32, comptime parameters at their defaults."""
    from ..kernel import CubeFunction
    mod = load_module(spec)
    declared = getattr(mod, "CUBE_CHECK", {}) or {}
    declared = {(k.__name__ if isinstance(k, CubeFunction) else k): v
                for k, v in declared.items()}
    group = spec
    items = []
    for name, cf in vars(mod).items():
        if not (isinstance(cf, CubeFunction) and cf.is_kernel
                and cf.fn.__module__ == mod.__name__):
            continue
        variants = declared.get(name, [{}])
        if isinstance(variants, dict):
            variants = [variants]
        for raw in variants:
            v = _variant(cf, raw)
            label = _describe(name, {_SPEC_KEYS[k]: x for k, x in raw.items()},
                              len(variants))
            try:
                sig = cf.signature_from_types(**v)
            except CubeError as e:
                msg = getattr(e, "message", str(e))

                def build(target, plane, msg=msg):
                    raise CompileError(f"{msg} (declare it in CUBE_CHECK, see docs/check.md)")
                items.append(Item(label, build, group))
                continue
            items.append(kernel_item(cf, sig, label, group))
    unknown = set(declared) - {it for it, v in vars(mod).items() if isinstance(v, CubeFunction)}
    if unknown:
        raise CubeError(f"CUBE_CHECK names kernels {sorted(unknown)} that {spec} lacks")
    return items


# ---- the library -----------------------------------------------------------------------------

def library_items() -> tuple[list[Item], list[str]]:
    """dl/kernels in the specialisations dl's workload launched, and the fused kernels it
    built; plus the dl/kernels kernels the workload did not reach (notes)."""
    from .library import capture, library_kernels
    lib, fused = capture()
    items = []
    seen_labels: set[str] = set()
    for label, cf, sig, built in lib:
        if label in seen_labels:
            continue
        seen_labels.add(label)
        items.append(kernel_item(cf, sig, label, "dl/kernels", built))
    for label, k in fused:
        base, n = label, 2
        while label in seen_labels:
            label, n = f"{base}#{n}", n + 1
        seen_labels.add(label)
        items.append(Item(label, _checked(lambda plane, k=k: k), "dl fusion"))
    covered = {entry[1] for entry in lib}
    missing = [name for name, cf in library_kernels().items() if cf not in covered]
    return items, missing


# ---- the command -----------------------------------------------------------------------------

def run(spec: str | None, library: bool, targets: list[str], verbose: bool,
        out=None) -> int:
    out = out or sys.stdout
    items: list[Item] = []
    notes = []
    if spec:
        items += user_kernels(spec)
    if library:
        lib, missing = library_items()
        items += lib
        if missing:
            notes.append("note: dl/kernels kernels the workload did not launch: "
                         + ", ".join(missing))
    if not items:
        raise CubeError("cube check: no kernels found" + (f" in {spec}" if spec else ""))
    report = check(items, targets, verbose)
    report.notes += notes
    print(report.table(), file=out)
    for label, t, c in report.failures():
        print(f"\n{t}: {label}: {c.text}\n{c.detail.rstrip()}", file=out)
    if verbose:
        for (label, t), c in sorted(report.cells.items()):
            if c.status == "n/a":
                print(f"{t}: {label}: {c.detail}", file=out)
    print(f"cube check: {len(items)} kernels x {len(targets)} targets in "
          f"{report.seconds:.1f} s: " + ("ok" if report.ok else
                                          f"{len(report.failures())} FAILED"), file=out)
    return 0 if report.ok else 1

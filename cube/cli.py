"""The `cube` command: dump generated source, check kernels with the real tools, list
targets, manage the cache."""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

from cube_ir import types as T

from .errors import CubeError


def _load_kernel(spec: str):
    if ":" not in spec:
        raise CubeError(f"expected FILE.py:KERNEL, got '{spec}'")
    path, name = spec.rsplit(":", 1)
    if not Path(path).exists():
        raise CubeError(f"no such file: {path}")
    from .check import load_module
    module = load_module(path)
    from .kernel import CubeFunction
    obj = getattr(module, name, None)
    if not isinstance(obj, CubeFunction):
        kernels = [k for k, v in vars(module).items() if isinstance(v, CubeFunction)]
        raise CubeError(f"{path} has no @cube function '{name}' (it has: "
                        f"{', '.join(kernels) or 'none'})")
    return obj


def _pairs(items, what: str) -> dict:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise CubeError(f"--{what} takes NAME=VALUE, got '{item}'")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _count(v: str, what: str) -> int:
    """A positive integer option value (`--cube-dim 16,16`, `--line-size x=4`)."""
    try:
        n = int(v)
    except ValueError:
        n = 0
    if n < 1:
        raise CubeError(f"--{what} takes positive integers, got '{v}'")
    return n


def _scalar(name: str):
    try:
        return T.SCALARS["bool" if name == "bool_" else name]
    except KeyError:
        raise CubeError(f"unknown element type '{name}' (known: {', '.join(T.SCALARS)})") \
            from None


def cmd_dump(a) -> int:
    from .frontend.translator import Target
    from .targets import target_info
    k = _load_kernel(a.kernel)
    comptime = {}
    for key, v in _pairs(a.comptime, "comptime").items():
        try:
            comptime[key] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            comptime[key] = v
    tvars = {key: _scalar(v) for key, v in _pairs(a.type, "type").items()}
    lanes = {key: _count(v, "line-size") for key, v in _pairs(a.line_size, "line-size").items()}
    ranks = {key: _count(v, "rank") for key, v in _pairs(a.rank, "rank").items()}
    sig = k.signature_from_types(type_vars=tvars, comptime=comptime, line_sizes=lanes,
                                 ranks=ranks)
    if a.unchecked:
        from dataclasses import replace
        sig = replace(sig, checked=False)
    info = target_info(a.target)
    plane = a.plane_size if a.plane_size else info.features.plane_size
    if plane < 1 or plane & (plane - 1):
        raise CubeError(f"--plane-size must be a power of two, got {plane}")
    dims = None
    if a.cube_dim:
        dims = tuple(_count(x, "cube-dim") for x in a.cube_dim.split(","))
        if len(dims) > 3:
            raise CubeError(f"--cube-dim takes 1 to 3 sizes, got '{a.cube_dim}'")
    kernel = k.build_ir(sig, Target(a.target, plane, info.features), optimise=not a.no_opt)
    if dims:
        kernel.cube_dim = dims + (1,) * (3 - len(dims))
    print(info.generate(kernel))
    return 0


def cmd_targets(a) -> int:
    from .targets import targets_table
    rows = targets_table()
    w = max(len(r[0]) for r in rows)
    for name, target, ok, why in rows:
        state = "available    " if ok else "not available"
        print(f"{name:<{w}}  {target:<7} {state}  {why}")
    return 0


def cmd_cache(a) -> int:
    from runtimes.disk_cache import default_cache
    c = default_cache()
    if a.action == "info":
        info = c.info()
        print(f"path:    {info['path']}\nentries: {info['entries']}\nbytes:   {info['bytes']}")
    else:
        n = c.clear()
        print(f"removed {n} entries from {c.root}")
    return 0


def cmd_check(a) -> int:
    from .check import ALL_TARGETS, DEFAULT_TARGETS, run
    if not a.source and not a.library:
        raise CubeError("cube check: give FILE.py or a module name, or --library")
    targets = [t.strip() for t in a.targets.split(",") if t.strip()] if a.targets \
        else list(DEFAULT_TARGETS)
    if targets == ["all"]:
        targets = list(ALL_TARGETS)
    return run(a.source, a.library, targets, a.verbose)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="cube", description="The cube kernel compiler.")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="print the generated source of a kernel")
    d.add_argument("kernel", help="FILE.py:KERNEL")
    d.add_argument("--target", default="ir", help="ir, llvm, ... (see `cube targets`)")
    d.add_argument("--comptime", action="append", metavar="NAME=VALUE")
    d.add_argument("--type", action="append", metavar="TYPEVAR=TYPE", help="e.g. F=f16")
    d.add_argument("--line-size", action="append", metavar="ARG=N")
    d.add_argument("--rank", action="append", metavar="ARG=N", help="tensor rank (default 2)")
    d.add_argument("--cube-dim", help="e.g. 256 or 16,16")
    d.add_argument("--plane-size", type=int, default=0)
    d.add_argument("--unchecked", action="store_true", help="no bounds checks")
    d.add_argument("--no-opt", action="store_true", help="IR before the passes")
    d.set_defaults(fn=cmd_dump)
    k = sub.add_parser("check", help="compile kernels for every target and validate each "
                                     "with the real tool (nvcc, hipcc, clang, spirv-val, naga)")
    k.add_argument("source", nargs="?", help="FILE.py or a module name")
    k.add_argument("--library", action="store_true",
                   help="dl/kernels and the fused kernels of a dl workload")
    k.add_argument("--targets", metavar="T,T,...",
                   help="cuda,hip,msl,spirv,wgsl (the default), opencl, or all")
    k.add_argument("--verbose", action="store_true", help="also say why kernels are n/a")
    k.set_defaults(fn=cmd_check)
    t = sub.add_parser("targets", help="list runtimes and whether they start here")
    t.set_defaults(fn=cmd_targets)
    c = sub.add_parser("cache", help="inspect or clear the kernel cache")
    c.add_argument("action", choices=["info", "clear"])
    c.set_defaults(fn=cmd_cache)
    a = p.parse_args(argv)
    try:
        return a.fn(a)
    except CubeError as e:
        print(str(e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

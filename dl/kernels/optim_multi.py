"""Multi-tensor optimiser kernels: one launch steps several parameters (torch's foreach/fused
optimisers).

A kernel takes, per parameter (a *segment*), its buffers (parameter, gradient, state) and
offsets as separate arguments, so nothing is gathered or copied; the language has no list of
buffers, so the kernel for N segments is generated (source text, compiled like any `@cube`
kernel). Segment k owns the cubes from c_k on, its first n_k units: a cube never straddles
two segments, so the chain of compares that finds a unit's segment reads the cube's position
only. That matters on the CPU, where a cube is a loop over its units: a condition the same
for the whole loop is hoisted and the loop still vectorises (compares of the unit's position
made the step 3x slower).
Each element's update is the per-parameter kernel's own helper (`optim._adam_at`,
`optim._sgd_at`), so both paths give the same bits.

How many segments fit in one launch is declared per runtime (`max_segments`): a WebGPU
shader stage binds at most `max-storage-buffers-per-shader-stage` storage buffers (8 unless
the adapter declares more), a Metal kernel 31 buffers; where not even one segment fits, the
optimisers launch the per-parameter kernels."""
from __future__ import annotations

import linecache
import math
import sys
from dataclasses import dataclass

from cube import ABSOLUTE_POS, CUBE_DIM, CUBE_POS, Array, Comptime, cube, recording, u32

from . import launch, optim

# segments per launch where a runtime declares no lower bound: on the CPU, 16 made LLVM give
# up hoisting the segment compares out of the unit loop (4x slower than 12 or 8); OpenCL
# passes the arguments by value and guarantees 1024 bytes of them (CL_DEVICE_MAX_PARAMETER_
# SIZE; pocl here declares just that): 8 Adam segments take 944 (tests/dl/test_optim_foreach)
MAX_SEGMENTS = 8
OPENCL_MIN_PARAMETER_BYTES = 1024
WEBGPU_DEFAULT_STORAGE_BUFFERS = 8  # the WebGPU spec's default limit per shader stage
METAL_BUFFER_ARGUMENTS = 31  # Metal's buffer argument table; the argument block takes one


@dataclass(frozen=True)
class Rule:
    """What a multi kernel of one update rule takes: per segment its buffers (the first is
    the parameter), then the shared scalars and comptime flags, and the element helper.
    stand_in: the buffer passed for the helper's last buffer where the rule has none (a
    state its flags keep the helper from touching: SGD's momentum, Adam's AMSGRAD maximum)."""
    name: str
    buffers: tuple[str, ...]
    scalars: tuple[str, ...]
    flags: tuple[tuple[str, str], ...]  # (name, comptime type)
    helper: str
    stand_in: str = ""


ADAM = Rule("adam", ("p", "g", "m", "v"),
            ("decay", "wd", "b2", "omb1", "omb2", "eps", "step_size", "inv_sqrt_bc2"),
            (("MAXIMIZE", "bool"), ("COUPLED_WD", "bool"), ("DECOUPLED_WD", "bool"),
             ("AMSGRAD", "bool")), "_adam_at", stand_in="v")
ADAM_AMSGRAD = Rule("adam_amsgrad", ("p", "g", "m", "v", "x"), ADAM.scalars, ADAM.flags,
                    "_adam_at")  # x: the largest v so far
SGD = Rule("sgd", ("p", "g"), ("lr", "wd", "mom", "damp"),
           (("MAXIMIZE", "bool"), ("HAS_WD", "bool"), ("MOMENTUM", "int"),
            ("NESTEROV", "bool")), "_sgd_at", stand_in="p")
SGD_MOMENTUM = Rule("sgd_momentum", ("p", "g", "b"), SGD.scalars, SGD.flags, "_sgd_at")


def _call(rule: Rule, k: int, j: str) -> str:
    """The helper call updating element j of segment k."""
    bufs = [f"{b}{k}" for b in rule.buffers]
    idx = [f"{b}o{k} + {j}" for b in rule.buffers]
    if rule.stand_in:
        bufs.append(f"{rule.stand_in}{k}")
        idx.append("0")
    args = bufs + idx + list(rule.scalars) + [f for f, _ in rule.flags]
    return f"{rule.helper}({', '.join(args)})"


def _source(rule: Rule, n: int) -> tuple[str, str]:
    """(name, source) of the kernel of `rule` over n segments."""
    name = f"{rule.name}_multi{n}"
    params = [f"{b}{k}: Array[F]" for k in range(n) for b in rule.buffers]
    for k in range(n):
        params += ([f"c{k}: u32"] if k else []) + [f"n{k}: u32"]
        params += [f"{b}o{k}: u32" for b in rule.buffers]
    params += [f"{s}: F" for s in rule.scalars]
    params += [f"{f}: Comptime[{t}]" for f, t in rule.flags]
    lines = [DECORATOR, f"def {name}({', '.join(params)}):", "    i = ABSOLUTE_POS",
             "    c = CUBE_POS"]
    for k in range(n):
        if n == 1:
            head = None
        elif k == 0:
            head = "if c < c1:"
        elif k < n - 1:
            head = f"elif c < c{k + 1}:"
        else:
            head = "else:"
        pad = "    " if head is None else "        "
        if head is not None:
            lines.append("    " + head)
        j = "i"
        if k:
            lines.append(f"{pad}j = i - c{k} * CUBE_DIM")
            j = "j"
        lines.append(f"{pad}if {j} < n{k}:")
        lines.append(f"{pad}    {_call(rule, k, j)}")
    return name, "\n".join(lines) + "\n"


# unchecked: a segment's n units index a contiguous tensor of n elements; nowrap: as small
# (bounds checks halved the speed of the per-parameter kernel on the CPU)
DECORATOR = "@cube(launch=True, unchecked=True, nowrap=True)"
_KERNELS: dict[tuple[str, int], object] = {}


def kernel(rule: Rule, n: int):
    """The `@cube` kernel of rule over n segments (generated once per process)."""
    got = _KERNELS.get((rule.name, n))
    if got is None:
        name, src = _source(rule, n)
        path = f"<dl optim {name}>"
        # the frontend reads a kernel's source through linecache, as for a file
        linecache.cache[path] = (len(src), None, src.splitlines(True), path)
        env = {"cube": cube, "Array": Array, "Comptime": Comptime, "u32": u32,
               "F": optim.F, "ABSOLUTE_POS": ABSOLUTE_POS, "CUBE_POS": CUBE_POS,
               "CUBE_DIM": CUBE_DIM, rule.helper: getattr(optim, rule.helper),
               "__name__": __name__}  # the kernel's module: this one (cube check lists it)
        exec(compile(src, path, "exec"), env)
        got = _KERNELS[(rule.name, n)] = env[name]
    return got


def max_segments(rt, rule: Rule) -> int:
    """How many segments of rule one launch on rt takes, from the limits rt declares (a
    WebGPU runtime, WGSL or SPIR-V shaders alike: its adapter's storage-buffer limit)."""
    cap = MAX_SEGMENTS
    if rt.target in ("wgsl", "spirv"):
        limits = getattr(rt, "limits", None) or {}
        bound = limits.get("max-storage-buffers-per-shader-stage",
                           WEBGPU_DEFAULT_STORAGE_BUFFERS)
        cap = min(cap, bound // len(rule.buffers))
    elif rt.target == "msl":
        cap = min(cap, (METAL_BUFFER_ARGUMENTS - 1) // len(rule.buffers))
    elif rt.target == "opencl":
        cap = min(cap, opencl_segments(rule))
    return cap


def opencl_segments(rule: Rule) -> int:
    """Segments of rule whose arguments fit OpenCL's guaranteed parameter bytes: 8 Adam
    segments (4 buffers each) take 944 of the 1024, so a rule with more buffers per
    segment takes proportionally fewer (AMSGRAD's 5: 6 segments)."""
    return MAX_SEGMENTS * 4 // max(4, len(rule.buffers))


class Launch:
    """One prepared launch of a multi kernel: its arguments with the parameters' and the
    state's buffers in place; each step patches the gradients and the scalars.

    The first launch goes through `CubeFunction.launch` (every check), traced
    (`recording.trace`) to learn the executable and its argument order; later ones launch
    that executable (`recording.launch`) with the argument list patched in place. The
    general path re-checks, per launch, ~120 arguments whose types and values this plan
    fixed (~25 us of a 30 us launch); what can change is checked here (the caller checks
    the gradients: dtype, shape, device, contiguity; the float scalars are checked to fit
    F, or take the general path, whose LaunchError names them)."""
    __slots__ = ("kernel", "rt", "grid", "args", "slots", "name", "fmax", "direct",
                 "template", "gpos", "spos")

    def __init__(self, rule: Rule, rt, segments: list[tuple], flags: dict):
        """segments: per parameter, its tensors in rule.buffers order (the gradient's slot
        is refreshed by `run`)."""
        n = len(segments)
        self.kernel, self.rt = kernel(rule, n), rt
        args: dict = dict(flags)
        cubes = 0
        for k, tensors in enumerate(segments):
            size = tensors[0].numel()
            if k:
                args[f"c{k}"] = cubes
            args[f"n{k}"] = size
            for b, t in zip(rule.buffers, tensors):
                args[f"{b}{k}"], args[f"{b}o{k}"] = t._buf, t.offset
            end = cubes * launch.CUBE_DIM + size
            cubes += -(-size // launch.CUBE_DIM)
        self.grid = launch.cube_count(end)
        # names as the kernel's parameters spell them (interned): a call by keyword
        # matches a name by identity first, else compares strings with every parameter
        # (~0.2 ms a launch for 16 segments' hundred arguments)
        self.args = {sys.intern(k): v for k, v in args.items()}
        self.slots = [(sys.intern(f"g{k}"), sys.intern(f"go{k}")) for k in range(n)]
        self.name = self.kernel.__name__
        self.fmax = 3.4028234663852886e38 if segments[0][0].dtype.itemsize == 4 else math.inf
        self.direct = None  # (executable, cube count, cube dim) once learnt
        names = self.kernel.arg_names()
        pos = {nm: i for i, nm in enumerate(names)}
        self.gpos = [(pos[g], pos[go]) for g, go in self.slots]
        self.spos = {nm: pos[nm] for nm in rule.scalars}
        # no gradient is kept between steps: its memory goes back to the pool
        for g, go in self.slots:
            self.args[g] = self.args[go] = None
        self.template = [self.args.get(nm) for nm in names]

    def run(self, grads: list, scalars: dict) -> None:
        """Launch with these gradients (materialised, checked by the caller) and scalars."""
        direct, fmax = self.direct, self.fmax
        if direct is None or not all(-fmax <= v <= fmax for v in scalars.values()):
            return self._checked(grads, scalars)
        argl = self.template[:]  # a recording keeps the list it is given
        for (gp, op), g in zip(self.gpos, grads):
            argl[gp] = g._buf
            argl[op] = g.offset
        spos = self.spos
        for nm, v in scalars.items():
            argl[spos[nm]] = v
        exe, cc, cd = direct
        recording.launch(exe, cc, cd, argl)
        launch.record_launch(self.name)

    def _checked(self, grads: list, scalars: dict) -> None:
        args = dict(self.args)
        for (gs, go), g in zip(self.slots, grads):
            args[gs] = g._buf
            args[go] = g.offset
        args.update(scalars)
        with recording.trace() as t:  # handed on to an active recording
            self.kernel.launch(self.rt, self.grid, (launch.CUBE_DIM,), **args)
        if t.entries and 0 in t.exes:
            _, cc, cd, got = t.entries[0]
            ours = [args.get(nm) for nm in self.kernel.arg_names()]
            if len(got) == len(ours) and all(a is b for a, b in zip(got, ours)):
                self.direct = (t.exes[0], cc, cd)  # it takes the arguments in our order
        launch.record_launch(self.name)

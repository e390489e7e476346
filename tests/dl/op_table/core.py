"""The op table: each dl op declares sample inputs, the torch reference and what it does
not support, in the style of PyTorch's OpInfo; tests/dl/test_op_table.py runs every entry
forward against torch and its gradients against torch autograd (or float64 finite
differences), on every runtime that starts, with fusion on and off.

An entry:

    OpInfo("cumsum", op=lambda x, dim: dl.cumsum(x, dim),
           ref=lambda x, dim: torch.cumsum(x, dim),
           samples=lambda: [Sample(arr((3, 5)), 1), Sample(arr((0, 4)), 0, desc="size 0"),
                            Sample(arr((4, 6)), 0, noncontig=True)])

- `op` gets dl tensors where the sample holds NumPy arrays (and the same Python values
  elsewhere), `ref` gets torch tensors. Float arrays are cast to the dtype under test;
  integer and bool arrays keep theirs (indices, masks). When the dtype under test is an
  integer or bool dtype (`dtypes=ALL`), float arrays become that dtype too: rounded to the
  nearest integer (nan 0, +-inf +-100), bool where non-zero.
- Outputs may be a tensor, a tuple/list of tensors (sort: values, indices) or a Python
  value (allclose: a bool; item: a float); each is compared with the reference's (integer
  and bool tensors exactly, floats to the dtype's tolerance, nan where nan, the sign of zero
  where `signed_zero`). Output dtypes must be torch's (`check_dtype`), integer ones included.
- In-place ops (`inplace=True`: add_, copy_, setitem): after the call the first argument of
  each side is compared too (dl's against torch's), so an op that returns the right value
  but leaves its target unchanged fails.
- Gradients: when `grad` is set and the dtype is in `grad_dtypes`, the float array
  arguments (or those `Sample.grad` names) require grad; the loss is sum(out_i * w_i) over
  the float outputs with fixed random weights w_i, and each input's grad is compared with
  torch's. `grad_check="fd"` compares instead with central finite differences of dl's own
  op in float64 (for ops torch's autograd cannot serve: no torch gradient, or one that
  differs on purpose); keep those samples small (2 evaluations per input element).
- Declared, not discovered: `dtypes` lists the dtypes an op supports; `skip` maps a runtime
  name (or "runtime:dtype", or "*:dtype") to the reason it is not run there. A dtype the
  runtime's device lacks (f64 on WGSL) is skipped from the runtime's declared Features.
  `note` says where dl differs from torch on purpose or through a known bug (docs/dl.md
  and scripts/dl_surface.py list the notes).

Runtimes without 64-bit ints (wgpu: WGSL, SPIR-V) get int64 sample arrays as int32 and
may give int32 where torch gives int64 (indices: argmax, max(dim)...). A sample that needs
what the runtime's target lacks (f64 or i64 inside an op on WGSL: a CapabilityError from the
target's declared capability table) is skipped there, not failed; the case skips when every
sample did.

WGSL and Vulkan let a compiler assume floats are finite; the shader targets spell compares,
min/max and rem in bit tests so NaN and infinities keep their meaning there, and the wgpu
runtimes run the non-finite samples too. What they do not promise (`SHADER_MATH`): the sign
of a zero result (the `signed_zero` check is skipped there), and an entry whose shader
results at non-finite or huge arguments differ on purpose names why in `shader_edges` (its
non-finite samples are skipped on those runtimes; docs/language.md lists the cases).

Time policy: the whole table (every engineer's entries on every runtime) must stay within
~4 minutes of CI's 2 cores, and a compiled runtime pays a compile per distinct kernel
(PoCL ~0.5 s each), so without CUBE_SLOW=1 each runtime runs a share of the cases
(`POLICY`; CUBE_SLOW=1 runs everything, and the cases it adds are marked
`@pytest.mark.slow` and skipped otherwise):

| runtime | entries | samples | dtypes | fusion off |
|---|---|---|---|---|
| interp (the oracle; no compile) | all | all | all declared | first device dtype |
| cpu (LLVM) | all | first `DEVICE_SAMPLES` (*) | device dtypes | first sample |
| opencl, wgpu, wgpu-spirv | a stable 1/`share` each | first (*) | device dtypes | no |
| cuda, hip, metal (GPU machines) | all | first `DEVICE_SAMPLES` (*) | device dtypes | yes |

(*) and every sample marked `device=True`; `OpInfo.device_samples` lowers the count for an
entry whose samples each compile a family of kernels (conv2d). The share is
crc32(entry name) % share == offset: the three runtimes take disjoint quarters of the
entries.

`device_dtypes(info)`: float32 where the entry declares it (else its first dtype), plus
every dtype listed in `OpInfo.device_dtypes` (an entry whose lowering differs per dtype,
say a float16 path of its own, names it there). Samples: put the most telling first.
`CUBE_OP_TABLE=ops_core,ops_nn` runs those table files only (while writing entries).
"""
from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

import dl

FLOATS = (dl.float32, dl.float64)
ALL_FLOATS = (dl.float32, dl.float64, dl.float16, dl.bfloat16)
INTS = (dl.int64, dl.int32)
ALL = ALL_FLOATS + INTS + (dl.bool_,)
DEVICE_SAMPLES = 2

# the fusion modes run per runtime (CUBE_SLOW=1: both everywhere)
FUSION_BOTH = ("interp", "cpu", "cuda", "hip", "metal")


# runtimes whose targets may fold arithmetic assuming finite floats (WGSL, SPIR-V through
# naga): the sign of a zero result is not compared there, and entries with `shader_edges`
# skip their non-finite samples there
SHADER_MATH = ("wgpu", "wgpu-spirv")


def _finite(v) -> bool:
    if isinstance(v, (list, tuple)):
        return all(_finite(e) for e in v)
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        return bool(np.all(np.isfinite(v)))
    if isinstance(v, float):
        return bool(np.isfinite(v))
    return True


def sample_runs_on(s: Sample, runtime: str, info: OpInfo | None = None) -> bool:
    return runtime not in SHADER_MATH or not (info and info.shader_edges) or (
        _finite(s.args) and _finite(tuple(s.kwargs.values())))


@dataclass(frozen=True)
class Policy:
    """What a runtime runs without CUBE_SLOW=1 (the table in the docstring)."""

    samples: int | None = DEVICE_SAMPLES  # the first n samples (None: all)
    share: int = 1  # runs the entries with crc32(name) % share == offset
    offset: int = 0
    all_dtypes: bool = False  # every declared dtype (else device_dtypes)


POLICY = {"interp": Policy(samples=None, all_dtypes=True),
          "opencl": Policy(samples=1, share=4, offset=0),
          "wgpu": Policy(samples=1, share=4, offset=1),
          "wgpu-spirv": Policy(samples=1, share=4, offset=2)}


def policy(runtime: str) -> Policy:
    return POLICY.get(runtime, Policy())


@dataclass
class Sample:
    """One call: positional args and kwargs (NumPy arrays become tensors)."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    desc: str = ""
    grad: tuple[int, ...] | None = None  # indices of args needing grad (None: every float array)
    noncontig: bool = False  # array args of ndim >= 2 arrive as transposed views
    device: bool = False  # run on compiled runtimes even beyond DEVICE_SAMPLES

    def __init__(self, *args, desc: str = "", grad=None, noncontig: bool = False,
                 device: bool = False, **kwargs):
        self.args, self.kwargs, self.desc = args, kwargs, desc
        self.grad, self.noncontig, self.device = grad, noncontig, device


@dataclass
class OpInfo:
    name: str
    op: Callable
    ref: Callable
    samples: Callable[[], Sequence[Sample]]
    dtypes: tuple = FLOATS
    grad: bool = True
    grad_dtypes: tuple = (dl.float64, dl.float32)
    skip: dict[str, str] = field(default_factory=dict)
    tol: dict = field(default_factory=dict)  # dtype -> (rtol, atol) overriding TOL
    grad_tol: dict = field(default_factory=dict)
    signed_zero: bool = False
    # why the wgpu runtimes' results at its non-finite/huge edge samples differ (they are
    # skipped there); "" runs them
    shader_edges: str = ""
    check_dtype: bool = True  # output dtypes must match torch's
    fusion_modes: tuple[bool, ...] = (True, False)
    note: str = ""  # where dl differs from torch on purpose (docs/dl.md lists these)
    # additions (the runner's defaults keep older entries' meaning)
    grad_check: str = "torch"  # "torch": torch autograd; "fd": float64 finite differences
    inplace: bool = False  # the op changes its first argument: compared after the call
    device_dtypes: tuple = ()  # dtypes compiled runtimes run besides float32 (see above)
    device_samples: int | None = None  # fewer samples than the runtime's policy (see above)
    fd_eps: float = 1e-6

    def skip_reason(self, runtime: str, dtype) -> str | None:
        return self.skip.get(runtime) or self.skip.get(f"{runtime}:{dtype.name}") or \
            self.skip.get(f"*:{dtype.name}")


def arr(shape, seed: int = 0, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    """A float64 array of uniform values (cast to the dtype under test by the runner)."""
    return np.random.default_rng(seed).uniform(low, high, shape)


def iarr(shape, high: int, seed: int = 0, low: int = 0) -> np.ndarray:
    """An int64 array in [low, high)."""
    return np.random.default_rng(seed).integers(low, high, shape).astype(np.int64)


def barr(shape, seed: int = 0, p: float = 0.5) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 1, shape) < p


def edge_values() -> np.ndarray:
    """inf, -inf, nan, -0.0, 0.0, ties and tiny/huge values, for ops that must propagate them."""
    return np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, 1.0, 1.0, -1.0, 1e-30, 1e30, 0.5,
                     -2.5])


def ties(shape, seed: int = 0, values=(-1.0, 0.0, 1.0, 2.0)) -> np.ndarray:
    """A float64 array drawn from a few values: every row holds ties (max/argmax, sort)."""
    return np.random.default_rng(seed).choice(np.asarray(values, np.float64), shape)


def run_slow() -> bool:
    return bool(os.environ.get("CUBE_SLOW"))


def samples_for(info: OpInfo, runtime: str) -> list[Sample]:
    ss = [s for s in info.samples() if sample_runs_on(s, runtime, info)]
    n = policy(runtime).samples
    if n is None or run_slow():
        return ss
    if info.device_samples is not None:
        n = min(n, info.device_samples)
    return [s for i, s in enumerate(ss) if i < n or s.device]


# runtimes that run fusion off on their first sample only (the time policy above)
FUSION_OFF_FIRST_ONLY = ("cpu",)


def fusion_modes_for(info: OpInfo, runtime: str, dtype=None, index: int = 0
                     ) -> tuple[bool, ...]:
    """The fusion modes a runtime runs for dtype and the index-th sample it runs (the time
    policy above)."""
    if run_slow() or (runtime in FUSION_BOTH and (
            dtype is None or runtime != "interp" or dtype is device_dtypes(info)[0]) and (
            index == 0 or runtime not in FUSION_OFF_FIRST_ONLY)):
        return tuple(info.fusion_modes)
    return tuple(m for m in info.fusion_modes if m) or tuple(info.fusion_modes[:1])


def device_dtypes(info: OpInfo) -> tuple:
    """The dtypes compiled runtimes run without CUBE_SLOW (the time policy above)."""
    first = dl.float32 if dl.float32 in info.dtypes else info.dtypes[0]
    return (first,) + tuple(d for d in info.device_dtypes if d in info.dtypes and d is not first)


def is_default_case(info: OpInfo, runtime: str, dtype) -> bool:
    """Whether runtime x dtype runs without CUBE_SLOW (else it is a slow case)."""
    p = policy(runtime)
    if p.share > 1 and zlib.crc32(info.name.encode()) % p.share != p.offset:
        return False
    return p.all_dtypes or dtype in device_dtypes(info)


def collect(*modules) -> list[OpInfo]:
    ops: list[OpInfo] = []
    for m in modules:
        ops.extend(getattr(m, "OPS", ()))
    return ops

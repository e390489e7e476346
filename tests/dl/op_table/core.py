"""The op table: each dl op declares sample inputs, the torch reference and what it does
not support, in the style of PyTorch's OpInfo; tests/dl/test_op_table.py runs every entry
forward against torch and its gradients against torch autograd, on every runtime that
starts, with fusion on and off.

An entry:

    OpInfo("cumsum", op=lambda x, dim: dl.cumsum(x, dim),
           ref=lambda x, dim: torch.cumsum(x, dim),
           samples=lambda: [Sample(arr((3, 5)), 1), Sample(arr((0, 4)), 0, desc="size 0"),
                            Sample(arr((4, 6)), 0, noncontig=True)])

- `op` gets dl tensors where the sample holds NumPy arrays (and the same Python values
  elsewhere), `ref` gets torch tensors. Float arrays are cast to the dtype under test;
  integer and bool arrays keep theirs (indices, masks).
- Outputs may be a tensor, a tuple/list of tensors (sort: values, indices) or a Python
  value (allclose: a bool); each is compared with the reference's (integer and bool
  tensors exactly, floats to the dtype's tolerance, nan where nan, the sign of zero where
  `signed_zero`).
- Gradients: when `grad` is set and the dtype is in `grad_dtypes`, the float array
  arguments (or those `Sample.grad` names) require grad; the loss is sum(out_i * w_i) over
  the float outputs with fixed random weights w_i, and each input's grad is compared with
  torch's.
- Declared, not discovered: `dtypes` lists the dtypes an op supports; `skip` maps a runtime
  name (or "runtime:dtype") to the reason it is not run there. A dtype the runtime's device
  lacks (f64 on WGSL) is skipped from the runtime's declared Features.
- Samples: put the most telling first. Compiled runtimes run the first `DEVICE_SAMPLES`
  samples of each entry (and every sample marked `device=True`); the interpreter runs them
  all; CUBE_SLOW=1 runs all of them everywhere.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

import dl

FLOATS = (dl.float32, dl.float64)
ALL_FLOATS = (dl.float32, dl.float64, dl.float16, dl.bfloat16)
DEVICE_SAMPLES = 2


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
    check_dtype: bool = True  # output dtypes must match torch's
    fusion_modes: tuple[bool, ...] = (True, False)
    note: str = ""  # where dl differs from torch on purpose (docs/dl.md lists these)

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


def run_slow() -> bool:
    return bool(os.environ.get("CUBE_SLOW"))


def samples_for(info: OpInfo, runtime: str) -> list[Sample]:
    ss = list(info.samples())
    if runtime == "interp" or run_slow():
        return ss
    return [s for i, s in enumerate(ss) if i < DEVICE_SAMPLES or s.device]


def collect(*modules) -> list[OpInfo]:
    ops: list[OpInfo] = []
    for m in modules:
        ops.extend(getattr(m, "OPS", ()))
    return ops


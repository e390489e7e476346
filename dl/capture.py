"""`dl.capture`: record the kernel launches of a function once, then replay them without the
Python that produced them (what a CUDA graph does for a GPU stream).

    step = dl.capture(train_step)     # train_step(x, y) -> loss tensor
    for xb, yb in batches:
        loss = step(xb, yb)           # 1st call eager, 2nd eager and recorded, then replays

A small model's step is launch-bound: each op costs tens of microseconds of Python
(tensor objects, the autograd tape, fusion's graph walk, choosing a kernel) around a kernel
of a few. A replay runs the recorded launches in order, each through its executable's own
launch function, so the Python left is one call per launch.

What a replay repeats, and what it does not:
- Tensor arguments are copied into the capture's own input tensors (one launch each); calls
  with other shapes, dtypes, devices or non-tensor arguments get a capture of their own.
- Outputs (a tensor, or a tuple/list/dict of them) are the same tensor objects every call,
  overwritten by the next replay: read or clone them before calling again.
- Parameters, optimiser state and buffers (BatchNorm's running statistics) are updated in
  place, as in the eager run. An optimiser's `step()` runs again at each replay (it reads host
  state: step counts, a scheduler's learning rate).
- Anything else decided on the host while recording is frozen: Python control flow,
  `train()/eval()`, values bound to new tensors outside the launches. Reading a tensor on the
  host (`item()`, `numpy()`) or drawing random numbers while recording raises `CaptureError`,
  since a replay would repeat the recorded value.
- The first call per signature runs eagerly (`warmup` calls): autotuning and compiles happen
  there, not in the recording.
"""
from __future__ import annotations

from cube.recording import CaptureError, Recording

from .ops.shape import assign
from .tensor import Tensor

__all__ = ["capture", "Captured", "CaptureError"]


def _signature(args: tuple, kwargs: dict):
    def one(v):
        if isinstance(v, Tensor):
            return ("tensor", v.shape, v.dtype.name, v.device, v.requires_grad)
        try:
            hash(v)
            return ("value", type(v), v)
        except TypeError:
            return ("object", id(v))
    return (tuple(one(a) for a in args), tuple((k, one(v)) for k, v in sorted(kwargs.items())))


def _outputs(out):
    """The output's tensors (materialised), checking it holds nothing but tensors."""
    if out is None:
        return []
    if isinstance(out, Tensor):
        return [out]
    items = out.values() if isinstance(out, dict) else out if isinstance(out, list | tuple) \
        else None
    if items is None or not all(isinstance(t, Tensor) for t in items):
        raise CaptureError(f"a captured function returns tensors (or a tuple, list or dict "
                           f"of them), not {type(out).__name__}: a value computed on the host "
                           f"would not change between replays")
    return list(items)


class _Graph:
    def __init__(self, fn, args: tuple, kwargs: dict):
        # the capture's own inputs: copies the replays refill, so callers' tensors are never
        # written
        def own(v):
            if not isinstance(v, Tensor):
                return v
            t = Tensor._empty(v.shape, v.dtype, v.device)
            assign(t, v)
            t.requires_grad = v.requires_grad
            return t
        self.args = tuple(own(a) for a in args)
        self.kwargs = {k: own(v) for k, v in kwargs.items()}
        self.inputs = [(i, t) for i, t in enumerate(self.args) if isinstance(t, Tensor)]
        self.kw_inputs = [(k, t) for k, t in self.kwargs.items() if isinstance(t, Tensor)]
        with Recording() as rec:
            out = fn(*self.args, **self.kwargs)
            for t in _outputs(out):
                t._materialise()
        self.recording, self.out = rec, out

    def run(self, args: tuple, kwargs: dict):
        for i, t in self.inputs:
            if args[i] is not t:
                assign(t, args[i])
        for k, t in self.kw_inputs:
            if kwargs[k] is not t:
                assign(t, kwargs[k])
        self.recording.replay()
        return self.out


class Captured:
    """A function with its recordings, one per call signature (see the module docstring)."""

    def __init__(self, fn, warmup: int = 1):
        self.fn = fn
        self.warmup = int(warmup)
        self._graphs: dict = {}
        self._calls: dict = {}

    def __call__(self, *args, **kwargs):
        key = _signature(args, kwargs)
        g = self._graphs.get(key)
        if g is not None:
            return g.run(args, kwargs)
        seen = self._calls.get(key, 0)
        if seen < self.warmup:
            self._calls[key] = seen + 1
            return self.fn(*args, **kwargs)
        g = _Graph(self.fn, args, kwargs)
        self._graphs[key] = g
        self._calls.pop(key, None)
        return g.out

    @property
    def launches(self) -> int:
        """Launches one replay makes (summed over signatures), hooks not counted."""
        return sum(g.recording.launches for g in self._graphs.values())

    def reset(self) -> None:
        """Drop every recording (and the memory it holds); the next calls capture anew."""
        self._graphs.clear()
        self._calls.clear()


def capture(fn=None, *, warmup: int = 1):
    """Wrap fn (also as a decorator, `@dl.capture` or `@dl.capture(warmup=2)`)."""
    if fn is None:
        return lambda f: Captured(f, warmup)
    return Captured(fn, warmup)

"""Data parallelism: DistributedDataParallel (dl.distributed underneath), as torch's.

    dist.init_process_group("mpi")                 # mpirun -n 2 python train.py
    model = DistributedDataParallel(model)          # rank 0's parameters and buffers, everywhere
    loss_fn(model(x_shard), y_shard).backward()     # gradients averaged over the ranks
    opt.step()

How the gradients are averaged: the parameters are split, in reverse order of registration
(about the order backward finishes their gradients), into buckets of at most `bucket_cap_mb`
MB (the first one 1 MB, as torch, so communication starts early), each a flat buffer on the
parameters' device with one view per parameter. When backward has accumulated a parameter's
gradient (a post-accumulate-grad hook, dl/autograd/hooks.py) it is marked ready; once every
parameter of a bucket is ready the bucket is launched, in bucket order: each gradient is
copied into its view pre-divided by the world size (one fused kernel a parameter), the
parameter's `.grad` becomes that view, and a non-blocking all-reduce (MPI Iallreduce, or NCCL)
of the flat buffer starts while backward goes on with the rest. The hook of the last bucket
waits for all of them, so `backward()` returns with averaged gradients.

`no_sync()`: forwards (and their backwards) inside it skip the averaging; gradients accumulate
locally and the first synchronised backward after it averages the sums (as torch).

`dl.capture`: a captured step replays the gradient copies as launches and the all-reduces and
their waits as replay hooks in their places (dl/distributed/collectives.py), so replays
average again on the same buffers. `broadcast_buffers=True` (default, as torch) broadcasts
rank 0's buffers (BatchNorm statistics) at every forward, a hook as well.

Unused parameters: with `find_unused_parameters=True` the forward's graph is walked from its
outputs and the parameters it does not reach count as ready with a zero gradient; without it,
a backward that leaves a parameter without gradient is reported by the next forward.

`record_events`: set `ddp.events = []` to log ("grad", name), ("start", bucket), ("wait",
bucket) in the order they happen (what the tests check the overlap with)."""
from __future__ import annotations

from contextlib import contextmanager

from .. import distributed as dist
from ..autograd import no_grad, register_post_accumulate_grad_hook
from ..autograd.tape import GradFn
from ..distributed import process_group as _pg
from ..ops.shape import assign
from ..shapes import contiguous_strides
from ..tensor import Tensor
from .module import Module

__all__ = ["DistributedDataParallel"]

_MB = 1024 * 1024
_FIRST_BUCKET_BYTES = 1 * _MB  # torch's dist._DEFAULT_FIRST_BUCKET_BYTES


class _Bucket:
    def __init__(self, index: int, params: list, names: list):
        self.index = index
        self.params, self.names = params, names
        p0 = params[0]
        total = sum(p.numel() for p in params)
        self.flat = Tensor._empty((total,), p0.dtype, p0.device)
        self.views, off = [], 0
        for p in params:
            self.views.append(self.flat._view(p.shape, contiguous_strides(p.shape), off))
            off += p.numel()
        self.ready: set = set()
        self.work = None

    @property
    def nbytes(self) -> int:
        return self.flat.numel() * self.flat.dtype.itemsize


class DistributedDataParallel(Module):
    """Wraps `module` for data-parallel training over the initialised process group
    (torch's signature; `device_ids`, `output_device`, `dim`, `check_reduction` and
    `static_graph` are accepted and ignored: one device per process, the inputs are each
    rank's own shard; `gradient_as_bucket_view=True` is how it always works: after the
    averaging each `.grad` is a view of its bucket)."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group=None,
                 bucket_cap_mb: float | None = None, find_unused_parameters: bool = False,
                 check_reduction: bool = False, gradient_as_bucket_view: bool = False,
                 static_graph: bool = False):
        super().__init__()
        pg = _pg.current()
        self.module = module
        object.__setattr__(self, "_world", pg.size)
        object.__setattr__(self, "broadcast_buffers", broadcast_buffers)
        object.__setattr__(self, "find_unused_parameters", find_unused_parameters)
        object.__setattr__(self, "require_backward_grad_sync", True)
        object.__setattr__(self, "events", None)
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't "
                               "have any parameter that requires a gradient")
        with no_grad():  # rank 0's state everywhere
            for _, p in module.named_parameters():
                dist.broadcast(p, 0)
            for t in self._buffers_list():
                dist.broadcast(t, 0)
        cap = (25 if bucket_cap_mb is None else bucket_cap_mb) * _MB
        object.__setattr__(self, "bucket_cap_bytes", int(cap))
        buckets, cur, limit = [], [], min(_FIRST_BUCKET_BYTES, cap)
        size = 0
        for n, p in reversed(named):
            nb = p.numel() * p.dtype.itemsize
            if cur and (size + nb > limit or p.dtype != cur[0][1].dtype
                        or p.device != cur[0][1].device):
                buckets.append(cur)
                cur, size, limit = [], 0, cap
            cur.append((n, p))
            size += nb
        buckets.append(cur)
        buckets = [_Bucket(i, [p for _, p in b], [n for n, _ in b])
                   for i, b in enumerate(buckets)]
        where = {}
        for b in buckets:
            for p in b.params:
                where[id(p)] = b
        object.__setattr__(self, "_buckets", buckets)
        object.__setattr__(self, "_where", where)
        object.__setattr__(self, "_next", 0)
        object.__setattr__(self, "_armed", False)
        object.__setattr__(self, "_handles",
                           [register_post_accumulate_grad_hook(p, self._grad_ready)
                            for _, p in named])

    # ---- forward -------------------------------------------------------------------------
    def _buffers_list(self) -> list:
        return [t for _, t in self.module.named_buffers() if t is not None]

    def forward(self, *args, **kwargs):
        """The wrapped module's forward; arms this iteration's gradient averaging (unless
        inside `no_sync()`) and broadcasts rank 0's buffers first (`broadcast_buffers`)."""
        self._check_finished()
        if self.broadcast_buffers and self._world > 1:
            with no_grad():
                for t in self._buffers_list():
                    dist.broadcast(t, 0)
        for b in self._buckets:
            b.ready.clear()
            b.work = None
        object.__setattr__(self, "_next", 0)
        object.__setattr__(self, "_armed", self.require_backward_grad_sync)
        out = self.module(*args, **kwargs)
        if self._armed and self.find_unused_parameters:
            self._mark_unused(out)
        return out

    def _check_finished(self) -> None:
        if not self._armed:
            return
        some = any(b.ready for b in self._buckets)
        if some and self._next < len(self._buckets):
            missing = [n for b in self._buckets for n, p in zip(b.names, b.params)
                       if id(p) not in b.ready]
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting "
                "a new one: these parameters did not receive gradients in the last backward: "
                f"{', '.join(missing)}. Pass find_unused_parameters=True to "
                "DistributedDataParallel, or make sure every output takes part in the loss.")

    def _mark_unused(self, out) -> None:
        seen, stack = set(), []
        outs = out if isinstance(out, list | tuple) else list(out.values()) \
            if isinstance(out, dict) else [out]
        # the graph's nodes (GradFns, and the leaves they feed: dl/autograd/tape.py)
        stack = [t._grad_fn or t for t in outs if isinstance(t, Tensor)]
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            if n.__class__ is GradFn:
                stack.extend(x for x in n.inputs if x is not None)
        unused = [p for b in self._buckets for p in b.params if id(p) not in seen]
        for p in unused:
            self._where[id(p)].ready.add(id(p))
            self._unused.add(id(p))
        self._launch_ready()

    @property
    def _unused(self) -> set:
        u = self.__dict__.get("_unused_set")
        if u is None:
            u = set()
            object.__setattr__(self, "_unused_set", u)
        return u

    # ---- backward ------------------------------------------------------------------------
    def _grad_ready(self, p: Tensor) -> None:
        if not self._armed:
            return
        b = self._where[id(p)]
        if self.events is not None:
            self.events.append(("grad", b.names[[id(q) for q in b.params].index(id(p))]))
        b.ready.add(id(p))
        self._unused.discard(id(p))
        for prev in self._buckets[:self._next]:  # drive MPI's progress on those in flight
            if prev.work is not None:
                prev.work.poll()
        self._launch_ready()

    def _launch_ready(self) -> None:
        buckets = self._buckets
        while self._next < len(buckets) and len(buckets[self._next].ready) == \
                len(buckets[self._next].params):
            b = buckets[self._next]
            object.__setattr__(self, "_next", self._next + 1)
            self._start(b)
        if self._next == len(buckets) and self._armed:
            for b in buckets:
                if b.work is not None:
                    b.work.wait()
                    if self.events is not None:
                        self.events.append(("wait", b.index))
            object.__setattr__(self, "_armed", False)  # this iteration is done
            self._unused.clear()

    def _start(self, b: _Bucket) -> None:
        inv = 1.0 / self._world
        with no_grad():
            for p, view in zip(b.params, b.views):
                g = p.grad
                if id(p) in self._unused or g is None:
                    assign(view, 0.0)
                elif g is not view:
                    assign(view, g * inv if self._world > 1 else g)
                elif self._world > 1:
                    assign(view, view * inv, internal=True)
                p.grad = view
            if self.events is not None:
                self.events.append(("start", b.index))
            b.work = dist.all_reduce(b.flat, async_op=True) if self._world > 1 else None

    # ---- torch's extras ------------------------------------------------------------------
    @contextmanager
    def no_sync(self):
        """Inside: forward/backward pairs accumulate gradients locally, unsynchronised."""
        old = self.require_backward_grad_sync
        object.__setattr__(self, "require_backward_grad_sync", False)
        try:
            yield
        finally:
            object.__setattr__(self, "require_backward_grad_sync", old)

    @property
    def bucket_sizes(self) -> list:
        """The parameters per bucket, in launch order (their names)."""
        return [list(b.names) for b in self._buckets]

    def extra_repr(self) -> str:
        return f"world_size={self._world}, buckets={len(self._buckets)}"

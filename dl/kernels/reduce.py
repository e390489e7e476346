"""Reductions over one axis: sum, mean, prod, max, min, argmax, argmin (float types).

The input is seen as (outer, r, inner) with element strides (the reduced axis r in the
middle). Candidates:

- `unit`: one unit per output element, a loop over r; with inner > 1 (a strided reduced
  axis) each unit takes a line of L neighbouring outputs, so reads are vectorised on CPUs
  and neighbouring units read neighbouring memory on GPUs.
- `split`: the reduced axis contiguous (inner == 1): each unit reduces a chunk of a row as
  lines (several accumulators in flight), a second launch (`unit`) combines the partials.
  This is what keeps all cores busy on one long row (a sum over a whole array).
- `shared`: one cube per output, BLOCK units stride over r, a shared-memory tree combines.
- `plane`: one plane per output, lanes stride over r, plane ops combine.
"""
from __future__ import annotations

import typing

import numpy as np

import cube as cb
from autotune import Candidate, Tunable, tune_key
from cube import (
    ABSOLUTE_POS,
    CUBE_POS,
    UNIT_POS,
    UNIT_POS_PLANE,
    Comptime,
    Line,
    Tensor,
    cube,
    u32,
)

from .common import cdiv, is_cpu, line_size
from .fill import fill
from .view import strided

F = typing.TypeVar("F")
OPS = ("sum", "mean", "prod", "max", "min", "argmax", "argmin")
BIG_INDEX = 0xFFFFFFFF


@cube
def combine(a, b, OP: Comptime[str]):
    if OP == "prod":
        return a * b
    elif OP == "max" or OP == "argmax":  # nan propagates, as PyTorch's (max alone may drop it)
        return cb.select(b != b, b, cb.select(a != a, a, max(a, b)))
    elif OP == "min" or OP == "argmin":
        return cb.select(b != b, b, cb.select(a != a, a, min(a, b)))
    else:
        return a + b


@cube
def better(v, i, best, best_i, OP: Comptime[str]):
    """Whether (v, i) beats (best, best_i) for argmax/argmin: ties go to the lower index;
    nan beats every number (the first nan's index, as PyTorch's)."""
    if v != v:
        return best == best or i < best_i
    elif OP == "argmax":
        return v > best or (v == best and i < best_i)
    else:
        return v < best or (v == best and i < best_i)


@cube
def finish(v, scale, OP: Comptime[str]):
    if OP == "mean":
        v = v * scale
    return v


@cube
def _partial(x, base, first, STEP: Comptime[int], init, OP: Comptime[str]):
    """One unit's share of a strided row: x[base + j * x.stride(1)] for j = first,
    first + STEP, ... combined (and, for arg ops, the index of the best)."""
    acc = init
    best_i = u32(BIG_INDEX)
    for j in range(first, x.shape(1), STEP):
        v = x[base + j * x.stride(1)]
        if OP == "argmax" or OP == "argmin":
            if better(v, j, acc, best_i, OP):
                acc = v
                best_i = j
        else:
            acc = combine(acc, v, OP)
    return acc, best_i


@cube(launch=True, unchecked=True, nowrap=True)
def reduce_unit(x: Tensor[Line[F]], out: Tensor[Line[F]], idx: Tensor[Line[u32]], scale: F,
                OP: Comptime[str], INIT: Comptime[float]):
    """x: (outer, r, inner) lines along inner; out/idx: (outer, inner) lines."""
    L = cb.comptime(x.line_size())
    inl = out.shape(1) // L
    g = ABSOLUTE_POS
    o = g // inl
    il = g % inl
    if o < out.shape(0):
        base = o * x.stride(0) + il * L * x.stride(2)
        sr = x.stride(1)
        acc = Line[F, L](INIT)
        if OP == "argmax" or OP == "argmin":
            best_i = u32(BIG_INDEX)  # the launcher gives arg ops lines of 1
            for j in range(x.shape(1)):
                v = x[(base + j * sr) // L]
                if better(v, j, acc, best_i, OP):
                    acc = v
                    best_i = j
            idx[(o * idx.stride(0)) // L + il] = best_i
        else:
            for j in range(x.shape(1)):
                acc = combine(acc, x[(base + j * sr) // L], OP)
        out[(o * out.stride(0)) // L + il] = finish(acc, scale, OP)


@cube(launch=True, unchecked=True, nowrap=True)
def reduce_split(x: Tensor[Line[F]], part: Tensor[F], OP: Comptime[str], CHUNKS: Comptime[int],
                 ACCS: Comptime[int], INIT: Comptime[float]):
    """x: (outer, r) lines along r (contiguous); part: (outer, CHUNKS) partial results."""
    L = cb.comptime(x.line_size())
    rl = x.shape(1) // L
    g = ABSOLUTE_POS
    o = g // CHUNKS
    ch = g % CHUNKS
    if o < x.shape(0):
        per = (rl + CHUNKS - 1) // CHUNKS
        start = ch * per
        stop = min(start + per, rl)
        base = (o * x.stride(0)) // L
        accs = cb.LocalArray(Line[F, L], ACCS)
        for t in cb.range(ACCS, unroll=True):
            accs[t] = Line[F, L](INIT)
        j = start
        while j + ACCS <= stop:
            for t in cb.range(ACCS, unroll=True):
                accs[t] = combine(accs[t], x[base + j + t], OP)
            j += ACCS
        while j < stop:
            accs[0] = combine(accs[0], x[base + j], OP)
            j += 1
        acc = accs[0]
        for t in cb.range(1, ACCS, unroll=True):
            acc = combine(acc, accs[t], OP)
        if L == 1:
            part[o * CHUNKS + ch] = acc
        else:
            s = acc[0]
            for q in cb.range(1, L, unroll=True):
                s = combine(s, acc[q], OP)
            part[o * CHUNKS + ch] = s


@cube(launch=True)
def reduce_shared(x: Tensor[F], out: Tensor[F], idx: Tensor[u32], scale: F, OP: Comptime[str],
                  BLOCK: Comptime[int], INIT: Comptime[float]):
    """One cube per output element (o, i): BLOCK units stride over r, then a tree."""
    inner = out.shape(1)
    o = CUBE_POS // inner
    i = CUBE_POS % inner
    t = UNIT_POS
    base = o * x.stride(0) + i * x.stride(2)
    vals = cb.SharedMemory(F, BLOCK)
    inds = cb.SharedMemory(u32, BLOCK)
    acc, best_i = _partial(x, base, t, BLOCK, F(INIT), OP)
    vals[t] = acc
    inds[t] = best_i
    cb.sync_cube()
    s = u32(BLOCK // 2)
    while s > 0:
        if t < s:
            if OP == "argmax" or OP == "argmin":
                if better(vals[t + s], inds[t + s], vals[t], inds[t], OP):
                    vals[t] = vals[t + s]
                    inds[t] = inds[t + s]
            else:
                vals[t] = combine(vals[t], vals[t + s], OP)
        cb.sync_cube()
        s = s // 2
    if t == 0 and o < out.shape(0):
        out[o * out.stride(0) + i] = finish(vals[0], scale, OP)
        idx[o * idx.stride(0) + i] = inds[0]


@cube(launch=True)
def reduce_plane(x: Tensor[F], out: Tensor[F], idx: Tensor[u32], scale: F, OP: Comptime[str],
                 P: Comptime[int], INIT: Comptime[float]):
    """One plane (P lanes, one plane per cube) per output element."""
    inner = out.shape(1)
    o = CUBE_POS // inner
    i = CUBE_POS % inner
    lane = UNIT_POS_PLANE
    base = o * x.stride(0) + i * x.stride(2)
    acc, best_i = _partial(x, base, lane, P, F(INIT), OP)
    if OP == "sum" or OP == "mean":
        total = cb.plane_sum(acc)
    elif OP == "prod":
        total = cb.plane_prod(acc)
    elif OP == "max" or OP == "argmax":
        total = cb.plane_max(acc)
    else:
        total = cb.plane_min(acc)
    if OP == "argmax" or OP == "argmin":
        best_i = cb.plane_min(best_i if acc == total else u32(BIG_INDEX))
    if lane == 0 and o < out.shape(0):
        out[o * out.stride(0) + i] = finish(total, scale, OP)
        idx[o * idx.stride(0) + i] = best_i


# ---- launch -------------------------------------------------------------------------------

def _init(op: str) -> float:
    return {"sum": 0.0, "mean": 0.0, "prod": 1.0, "max": -np.inf, "argmax": -np.inf}.get(
        op, np.inf)


def as_3d(x, axis: int):
    """x viewed as (outer, r, inner): the dims before `axis` must collapse into one stride,
    and so must the dims after it."""
    b = x.buffer
    shape, strides = list(b.shape), list(b.strides)
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis < len(shape):
        raise ValueError(f"axis {axis} is out of range for shape {b.shape}")

    def collapse(dims):
        n, stride = 1, 0
        for d in reversed(dims):
            if shape[d] == 1:
                continue
            if n > 1 and strides[d] != stride * n:
                raise ValueError(f"reduce: dims {dims} of a view with strides {b.strides} "
                                 f"do not collapse; make it contiguous first")
            if n == 1:
                stride = strides[d]
            n *= shape[d]
        return n, stride if n > 1 else 0

    outer, so = collapse(list(range(axis)))
    inner, si = collapse(list(range(axis + 1, len(shape))))
    return strided(b, (outer, shape[axis], inner), (so, strides[axis], si))


def run_unit(rt, x, out, idx, op, scale=None):
    outer, r, inner = x.shape
    lsz = 1
    if x.strides[2] == 1 and inner > 1 and not op.startswith("arg"):
        lsz = line_size(rt, x.elem, inner, x.strides[0], x.strides[1])
    n = outer * (inner // lsz)
    idx = idx if idx is not None else rt.empty((1, lsz), cb.u32)
    dim = 64 if is_cpu(rt) else 128
    lv = (lambda v: v.lines(lsz)) if lsz > 1 else (lambda v: v)
    reduce_unit.launch(rt, cube_count=cdiv(n, dim), cube_dim=dim, x=lv(x), out=lv(out),
                       idx=lv(idx), scale=1.0 / max(r, 1) if scale is None else scale, OP=op,
                       INIT=_init(op))


# chunk sizes `chunked` tries, nearest 64 first (sorted once: the validity test runs per call)
_CHUNK_ROWS = sorted(range(16, 257), key=lambda d: abs(d - 64))


def _chunk_rows(x, op) -> int:
    """For `chunked`: rows per chunk (a divisor of r near 64), or 0 when it cannot run."""
    outer, r, inner = x.shape
    if op.startswith("arg") or inner == 1 or r < 128 or \
            (outer > 1 and x.strides[0] != r * x.strides[1]):
        return 0
    for d in _CHUNK_ROWS:
        if r % d == 0:
            return d
    return 0


def _run_chunked(rt, x, out, idx, op):
    """A strided reduced axis (a column sum) in two launches: chunks of ~64 rows, then the
    chunks. One unit per output line walking all r rows touched r pages at a power-of-two
    stride (TLB and cache-set misses: a 1024 x 2048 column sum took 1.1 ms), and gave few
    units for a short output."""
    outer, r, inner = x.shape
    rows = _chunk_rows(x, op)
    chunks = r // rows
    part = rt.empty((outer * chunks, inner), x.elem)
    first = "sum" if op == "mean" else op
    xs = strided(x, (outer * chunks, rows, inner),
                 (rows * x.strides[1], x.strides[1], x.strides[2]))
    run_unit(rt, xs, part, None, first)
    run_unit(rt, strided(part, (outer, chunks, inner), (chunks * inner, inner, 1)), out,
              None, op, scale=1.0 / r)


def _split_line(rt, x) -> int:
    outer, r, inner = x.shape
    if inner != 1 or (x.strides[1] != 1 and r > 1):
        return 0
    return line_size(rt, x.elem, r, x.strides[0])


def _run_split(rt, x, out, idx, op):
    outer, r, _ = x.shape
    lsz = _split_line(rt, x)
    chunks = max(1, min(256, r // (lsz * 1024)))
    if outer * chunks < 64:  # enough units for every core, chunks of at least 1K lines
        chunks = max(1, min(cdiv(64, outer), r // (lsz * 1024)))
    part = rt.empty((outer, chunks), x.elem)
    xl = strided(x, (outer, r), (x.strides[0], 1)).lines(lsz)
    reduce_split.launch(rt, cube_count=cdiv(outer * chunks, 64), cube_dim=64, x=xl,
                        part=part, OP=op, CHUNKS=chunks, ACCS=4, INIT=_init(op))
    p3 = strided(part, (outer, chunks, 1), (chunks, 1, 1))
    final = "sum" if op == "mean" else op
    idx = idx if idx is not None else rt.empty((1, 1), cb.u32)
    reduce_unit.launch(rt, cube_count=cdiv(outer, 64), cube_dim=64, x=p3, out=out, idx=idx,
                       scale=1.0 / max(r, 1), OP="mean" if op == "mean" else final,
                       INIT=_init(final))


def _run_shared(block: int):
    def run(rt, x, out, idx, op):
        outer, r, inner = x.shape
        idx = idx if idx is not None else rt.empty((1, 1), cb.u32)
        reduce_shared.launch(rt, cube_count=outer * inner, cube_dim=block, x=x, out=out,
                             idx=idx, scale=1.0 / max(r, 1), OP=op, BLOCK=block,
                             INIT=_init(op))
    return run


def _run_plane(rt, x, out, idx, op):
    outer, r, inner = x.shape
    idx = idx if idx is not None else rt.empty((1, 1), cb.u32)
    reduce_plane.launch(rt, cube_count=outer * inner, cube_dim=rt.plane_size, x=x, out=out,
                        idx=idx, scale=1.0 / max(r, 1), OP=op, P=rt.plane_size,
                        INIT=_init(op))


def _cpu_first(cpu: int, gpu: int):
    return lambda rt: cpu if is_cpu(rt) else gpu


REDUCE = Tunable("reduce", [
    Candidate("split", _run_split, _cpu_first(100, 60),
              lambda rt, x, out, idx, op: not op.startswith("arg") and _split_line(rt, x) > 0),
    Candidate("chunked", _run_chunked, _cpu_first(95, 55),
              lambda rt, x, out, idx, op: _chunk_rows(x, op) > 0),
    Candidate("unit", run_unit, _cpu_first(90, 50)),
    Candidate("shared_128", _run_shared(128), _cpu_first(10, 80),
              lambda rt, *a: rt.features.max_cube_dim >= 128),
    Candidate("shared_32", _run_shared(32), _cpu_first(5, 70)),
    # plane_max/plane_min drop nan: extremes go through the other candidates (PyTorch's nan)
    Candidate("plane", _run_plane, _cpu_first(0, 75),
              lambda rt, x, out, idx, op: rt.features.plane_ops and op in (
                  "sum", "mean", "prod")),
])


def prepare(rt, x, axis: int, op: str):
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {op!r}")
    b = x.buffer
    if not b.elem.is_float:
        raise ValueError(f"reduce supports float types, got {b.elem}")
    x3 = as_3d(b, axis)
    outer, r, inner = x3.shape
    axis = axis + len(b.shape) if axis < 0 else axis
    shape = tuple(s for d, s in enumerate(b.shape) if d != axis)
    out = rt.empty(shape, b.elem)
    o2 = strided(out, (outer, inner), (inner, 1))
    idx = i2 = None
    if op.startswith("arg"):
        idx = rt.empty(shape, cb.u32)
        i2 = strided(idx, (outer, inner), (inner, 1))
    return x3, o2, i2, out, idx


def reduce(rt, x, axis: int, op: str = "sum"):
    """Reduce x over `axis`; argmax/argmin return u32 indices (ties: the lowest index)."""
    x3, o2, i2, out, idx = prepare(rt, x, axis, op)
    outer, r, inner = x3.shape
    if outer * inner == 0:
        return idx if op.startswith("arg") else out
    if r == 0:
        if op.startswith("arg"):
            raise ValueError(f"{op} of an empty axis")
        return fill(rt, out, np.nan if op == "mean" else _init(op))
    key = tune_key("r", x3.elem, [(outer, r, inner)], (op.startswith("arg"),
                                                        int(x3.strides[1] == 1)))
    REDUCE(rt, key, x3, o2, i2, op)
    return idx if op.startswith("arg") else out


def reference(x: np.ndarray, axis: int, op: str) -> np.ndarray:
    x = x.astype(np.float64)
    return {"sum": np.sum, "mean": np.mean, "prod": np.prod, "max": np.max, "min": np.min,
            "argmax": np.argmax, "argmin": np.argmin}[op](x, axis=axis)

"""Inclusive scans along the rows of a (rows, n) view: cumulative sum, product and
log-sum-exp, forwards or (rev) from the end of the row backwards.

- `scan_unit`: one unit per row, a sequential loop (short rows, or many rows on the CPU,
  whose cube units run as a loop anyway).
- `scan_block`: a work-efficient block scan. A cube of BLOCK units takes a tile of
  BLOCK * ITEMS elements of a row; each unit scans its ITEMS elements sequentially, the unit
  totals are scanned across the cube (sum and prod on devices with plane ops: a plane scan
  per plane, then the plane totals; else, and for logsumexp, all of them in shared memory
  by Blelloch's up-sweep / down-sweep: 2 * BLOCK combines), and each unit adds its
  exclusive prefix to its elements. A row longer than a tile takes
  three steps (reduce-then-scan): the tiles' totals (`scan_block`, mode TOTALS), an inclusive
  scan of those totals (recursively, the same code), and the tile scan again with the total
  of the tiles before it as a carry-in. The input is read twice, the output written once.

The scan order is the logical one: with rev, logical position j is the row's element n-1-j
(a reverse cumulative sum, cumsum's gradient), and tile totals are in logical order.
Float sums accumulate in the element type (the caller gives halves as float32).
"""
from __future__ import annotations

import typing

import numpy as np

import cube as cb
from cube import ABSOLUTE_POS, CUBE_POS, UNIT_POS, UNIT_POS_PLANE, Comptime, Tensor, cube, u32

from .common import cdiv, is_cpu
from .launch import cube_count
from .view import strided

F = typing.TypeVar("F")
OPS = ("sum", "prod", "logsumexp")
SCAN, TOTALS, CARRY = 0, 1, 2
LN2 = 0.6931471805599453


@cube
def logaddexp(a, b):
    """log(exp(a) + exp(b)) without overflow: -inf with -inf is -inf, inf with inf is inf,
    nan propagates."""
    m = max(a, b)
    mn = min(a, b)
    r = m + cb.log1p(cb.exp(mn - m))
    if mn == m:
        r = m + LN2
    if not (a == a) or not (b == b):  # nan (`!=` is ordered on WGSL/SPIR-V)
        r = a + b
    return r


@cube
def combine(a, b, OP: Comptime[str]):
    if OP == "prod":
        return a * b
    elif OP == "logsumexp":
        return logaddexp(a, b)
    else:
        return a + b


@cube
def _pos(j, n, rev):
    return n - 1 - j if rev != 0 else j


@cube(launch=True)
def scan_unit(x: Tensor[F], out: Tensor[F], rev: u32, OP: Comptime[str],
              INIT: Comptime[object]):
    """x, out: (rows, n), any strides; one unit per row."""
    row = ABSOLUTE_POS
    if row < x.shape(0):
        n = x.shape(1)
        bx = row * x.stride(0)
        bo = row * out.stride(0)
        acc = F(INIT)
        for j in range(n):
            p = _pos(j, n, rev)
            acc = combine(acc, x[bx + p * x.stride(1)], OP)
            out[bo + p * out.stride(1)] = acc


@cube
def _exclusive_block(sh, v, me, ident, OP: Comptime[str], N: Comptime[int]):
    """Blelloch's work-efficient exclusive scan over shared memory of the values `v` of
    units 0..N-1 (N a power of two, at most the cube's size; every unit calls it, for the
    barriers): returns (the combination of the values of the units before unit `me`, the
    total)."""
    t = UNIT_POS
    if t < N:
        sh[t] = v
    cb.sync_cube()
    offset = u32(1)
    d = u32(N // 2)
    while d > 0:  # up-sweep: sh[k] holds the total of its subtree
        if t < d:
            ai = offset * (2 * t + 1) - 1
            bi = offset * (2 * t + 2) - 1
            sh[bi] = combine(sh[ai], sh[bi], OP)
        offset = offset * 2
        d = d // 2
        cb.sync_cube()
    total = sh[N - 1]
    cb.sync_cube()
    if t == 0:
        sh[N - 1] = ident
    cb.sync_cube()
    d = u32(1)
    while d < N:  # down-sweep: each node passes its prefix left, prefix+left right
        offset = offset // 2
        if t < d:
            ai = offset * (2 * t + 1) - 1
            bi = offset * (2 * t + 2) - 1
            left = sh[ai]
            sh[ai] = sh[bi]
            sh[bi] = combine(sh[bi], left, OP)
        d = d * 2
        cb.sync_cube()
    prefix = sh[me]
    cb.sync_cube()
    return prefix, total


@cube
def _plane_exclusive(v, OP: Comptime[str]):
    if OP == "prod":
        return cb.plane_exclusive_prod(v)
    else:
        return cb.plane_exclusive_sum(v)


@cube
def _exclusive_units(sh, v, ident, OP: Comptime[str], BLOCK: Comptime[int],
                     PLANE: Comptime[int]):
    """The exclusive scan of the units' values over the cube, and the cube's total. PLANE > 1
    (sum and prod on devices with plane ops): a plane scan (`plane_exclusive_sum/prod`) in
    each plane, then the Blelloch scan of the BLOCK / PLANE plane totals in shared memory;
    else the Blelloch scan of all BLOCK values."""
    NP = cb.comptime(BLOCK // PLANE)
    if PLANE > 1:
        ex = _plane_exclusive(v, OP)
        plane = UNIT_POS // PLANE
        if UNIT_POS_PLANE == PLANE - 1:
            sh[BLOCK + plane] = combine(ex, v, OP)  # the plane's total, after the block's
        cb.sync_cube()
        pv = sh[BLOCK + UNIT_POS] if UNIT_POS < NP else ident
        pp, total = _exclusive_block(sh, pv, plane, ident, OP, NP)
        prefix = combine(pp, ex, OP)
    else:
        prefix, total = _exclusive_block(sh, v, UNIT_POS, ident, OP, BLOCK)
    return prefix, total


@cube(launch=True)
def scan_block(x: Tensor[F], out: Tensor[F], part: Tensor[F], rev: u32, mode: u32,
               OP: Comptime[str], BLOCK: Comptime[int], ITEMS: Comptime[int],
               INIT: Comptime[object], PLANE: Comptime[int] = 1):
    """x, out: (rows, n), any strides. One cube per tile of BLOCK * ITEMS (logical) elements
    of a row, tiles of a row in consecutive cubes. mode (a runtime value: one compiled
    kernel serves the three passes) SCAN: the scan of each tile; TOTALS: each tile's total
    to part[row, tile] and nothing else; CARRY: part holds the inclusive scan of the tile
    totals and tile b starts from part[row, b - 1]."""
    TILE = cb.comptime(BLOCK * ITEMS)
    n = x.shape(1)
    nb = (n + TILE - 1) // TILE
    row = CUBE_POS // nb
    blk = CUBE_POS % nb
    t = UNIT_POS
    bx = row * x.stride(0)
    start = blk * TILE + t * ITEMS
    ident = F(INIT)
    loc = cb.LocalArray(F, ITEMS)
    acc = ident
    for q in cb.range(ITEMS, unroll=True):
        j = start + q
        if j < n and row < x.shape(0):
            acc = combine(acc, x[bx + _pos(j, n, rev) * x.stride(1)], OP)
        loc[q] = acc
    sh = cb.SharedMemory(F, 2 * BLOCK)
    prefix, total = _exclusive_units(sh, acc, ident, OP, BLOCK, PLANE)
    if mode == TOTALS:
        if t == 0 and row < x.shape(0):
            part[row * part.stride(0) + blk * part.stride(1)] = total
    else:
        if mode == CARRY:
            if blk > 0:
                prefix = combine(part[row * part.stride(0) + (blk - 1) * part.stride(1)],
                                 prefix, OP)
        bo = row * out.stride(0)
        for q in cb.range(ITEMS, unroll=True):
            j = start + q
            if j < n and row < x.shape(0):
                out[bo + _pos(j, n, rev) * out.stride(1)] = combine(prefix, loc[q], OP)


# ---- launch -------------------------------------------------------------------------------

def _init(op: str) -> float:
    return {"sum": 0.0, "prod": 1.0, "logsumexp": -np.inf}[op]


def _config(rt) -> tuple[int, int]:
    """(BLOCK, ITEMS) of a tile."""
    if is_cpu(rt):
        return 64, 16
    return min(128, rt.features.max_cube_dim), 8


def _plane(rt, op: str, block: int) -> int:
    """The plane size the block scan uses (1: shared memory only)."""
    p = rt.plane_size if rt.features.plane_ops else 1
    if op == "logsumexp" or p <= 1 or block % p or block // p < 2:
        return 1
    return p


def _block(rt, x, out, op: str, rev: bool, block: int, items: int, init) -> None:
    rows, n = x.shape
    tile = block * items
    nb = cdiv(n, tile)
    args = dict(rev=int(rev), OP=op, BLOCK=block, ITEMS=items, INIT=init,
                PLANE=_plane(rt, op, block))
    if nb == 1:
        scan_block.launch(rt, cube_count=cube_count(rows, 1), cube_dim=block, x=x, out=out,
                          part=out, mode=SCAN, **args)
        return
    part = rt.empty((rows, nb), x.elem)
    count = cube_count(rows * nb, 1)
    scan_block.launch(rt, cube_count=count, cube_dim=block, x=x, out=out, part=part,
                      mode=TOTALS, **args)
    scan(rt, part, part, op, False, block=block, items=items)  # in place: one tile per row
    scan_block.launch(rt, cube_count=count, cube_dim=block, x=x, out=out, part=part,
                      mode=CARRY, **args)


def scan(rt, x, out, op: str = "sum", rev: bool = False, block: int | None = None,
         items: int | None = None, candidate: str | None = None):
    """out = the inclusive scan of x along its rows (both (rows, n) views, any strides;
    out may be x). `candidate` forces "unit" or "block" (tests)."""
    if op not in OPS:
        raise ValueError(f"scan op must be one of {OPS}, got {op!r}")
    x, out = x.buffer, out.buffer
    if len(x.shape) != 2 or tuple(x.shape) != tuple(out.shape):
        raise ValueError(f"scan takes two (rows, n) views of one shape, got {x.shape} and "
                         f"{out.shape}")
    rows, n = x.shape
    if rows * n == 0:
        return out
    b0, i0 = _config(rt)
    block, items = block or b0, items or i0
    init = _init(op) if x.elem.is_float else int(_init(op))
    if candidate is None:
        few = rows < (4 if is_cpu(rt) else 256)
        candidate = "block" if n > 32 and few or (n > 4096 and rows < 64) else "unit"
    if candidate == "unit":
        scan_unit.launch(rt, cube_count=cdiv(rows, 64), cube_dim=64, x=x, out=out,
                         rev=int(rev), OP=op, INIT=init)
    else:
        _block(rt, x, out, op, rev, block, items, init)
    return out


def scan_rows(rt, x, op: str = "sum", rev: bool = False, **kw):
    """A fresh contiguous (rows, n) result."""
    out = rt.empty(tuple(x.buffer.shape), x.buffer.elem)
    return scan(rt, x, strided(out, out.shape, (out.shape[1], 1)), op, rev, **kw)


def reference(x: np.ndarray, op: str = "sum", rev: bool = False) -> np.ndarray:
    x = x.astype(np.float64)
    x = x[:, ::-1] if rev else x
    y = {"sum": np.cumsum, "prod": np.cumprod,
         "logsumexp": lambda a, axis: np.logaddexp.accumulate(a, axis=axis)}[op](x, axis=1)
    return y[:, ::-1] if rev else y


# the specialisations `cube check dl.kernels.scan` builds (docs/check.md)
CUBE_CHECK = {
    scan_unit: [dict(type={"F": cb.f32}, comptime={"OP": "logsumexp", "INIT": -np.inf}),
                dict(type={"F": cb.i64}, comptime={"OP": "sum", "INIT": 0})],
    scan_block: [dict(type={"F": t}, comptime={"OP": op, "BLOCK": 128, "ITEMS": 8,
                                               "INIT": _init(op)})
                 for t in (cb.f32, cb.f64) for op in OPS] +
                [dict(type={"F": cb.f32}, comptime={"OP": op, "BLOCK": 128, "ITEMS": 8,
                                                    "INIT": _init(op), "PLANE": 32})
                 for op in ("sum", "prod")] +
                [dict(type={"F": cb.i32}, comptime={"OP": "prod", "BLOCK": 64, "ITEMS": 16,
                                                    "INIT": 1})],
}

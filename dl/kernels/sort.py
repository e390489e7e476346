"""Sorting the rows of a (rows, n) view: a bitonic sort of (value, index) pairs.

The order is a strict total order on (value, original index): nan sorts as the largest value
(first when descending, as PyTorch), equal values keep their original order, so every sort
is stable. A row is padded to P, the next power of two; padding positions carry an index
>= n and sort after everything in either direction.

- `sort_tile` with P <= TILE: one cube per row sorts it in shared memory (one launch: load,
  the log2(P) * (log2(P) + 1) / 2 compare-exchange steps, write the kept positions).
- the CPU: `sort_merge_rows`, one unit per row, a bottom-up merge sort (the barriers of a
  bitonic step split a CPU cube's unit loop: 0.3 s for 512 rows of 1000, 1.4 s for 4 rows
  of 200000, against milliseconds for the merge sort). Same order, same outputs.
- longer rows: `sort_tile` (LOCAL) sorts each TILE of the row in shared memory with the
  directions of the whole network into global work arrays (keys, u32 indices); then for each
  stage k > TILE the steps with a distance j >= TILE run as `sort_step` launches (one unit per
  pair) and the steps j < TILE as one `sort_tile` (MERGE) launch per stage, in shared memory;
  the last stage's MERGE writes the outputs.

Outputs: the sorted positions lo..hi-1 of each row (sort: 0..n, topk: 0..k, kthvalue: one),
values in the element type and indices in the index type (int64, or int32 on devices without
64-bit ints).
"""
from __future__ import annotations

import typing

import numpy as np

import cube as cb
from cube import ABSOLUTE_POS, CUBE_POS, UNIT_POS, Comptime, Tensor, cube, u32

from .common import is_cpu
from .launch import cube_count

F = typing.TypeVar("F")
I = typing.TypeVar("I")  # noqa: E741 - the index type variable

FULL, LOCAL, MERGE = 0, 1, 2


@cube
def before(av, ai, bv, bi, n, desc):
    """Whether (av, ai) sorts strictly before (bv, bi): padding (index >= n) last, nan as the
    largest value, ties by index."""
    an = not (av == av)  # nan: `!=` is an ordered comparison on some targets (WGSL, SPIR-V)
    bn = not (bv == bv)
    less = av < bv or (bn and not an)
    if desc != 0:
        less = av > bv or (an and not bn)
    eq = av == bv or (an and bn)
    return ai < n and (bi >= n or less or (eq and ai < bi))


@cube
def _exchange(sk, si, i, m, up, n, desc):
    av = sk[i]
    ai = si[i]
    bv = sk[m]
    bi = si[m]
    sw = False
    if up:
        sw = before(bv, bi, av, ai, n, desc)
    else:
        sw = before(av, ai, bv, bi, n, desc)
    if sw:
        sk[i] = bv
        sk[m] = av
        si[i] = bi
        si[m] = ai


@cube(launch=True)
def sort_tile(x: Tensor[F], keys: Tensor[F], idx: Tensor[u32], vals: Tensor[F],
              inds: Tensor[I], n: u32, P: u32, k: u32, lo: u32, hi: u32, mode: u32, desc: u32,
              TILE: Comptime[int], BLOCK: Comptime[int]):
    """mode (a runtime value: one compiled kernel serves all three passes) FULL (P <= TILE):
    one cube sorts row CUBE_POS of x and writes positions lo..hi-1 to vals/inds
    (rows, hi - lo). LOCAL: cube c sorts tile c % (P / TILE) of its row for the
    stages k = 2..TILE, from x into keys/idx (rows, P). MERGE: the steps j < TILE of stage k
    on keys/idx; when k == P the outputs are written instead."""
    size = P if mode == FULL else u32(TILE)
    tiles = P // size
    row = CUBE_POS // tiles
    base = (CUBE_POS % tiles) * size
    t = UNIT_POS
    valid = row < vals.shape(0)
    sk = cb.SharedMemory(F, TILE)
    si = cb.SharedMemory(u32, TILE)
    for e in range(t, size, BLOCK):
        g = base + e
        if mode == MERGE:
            sk[e] = keys[row * P + g]
            si[e] = idx[row * P + g]
        else:
            v = F(0)
            if g < n and valid:
                v = x[row * x.stride(0) + g * x.stride(1)]
            sk[e] = v
            si[e] = g
    cb.sync_cube()
    kk = u32(2)
    if mode == MERGE:
        kk = k
    while kk <= size or (mode == MERGE and kk == k):
        j = kk // 2
        if mode == MERGE:
            j = u32(TILE // 2)
        while j > 0:
            for p in range(t, size // 2, BLOCK):
                i = 2 * j * (p // j) + p % j
                _exchange(sk, si, i, i + j, ((base + i) & kk) == 0, n, desc)
            cb.sync_cube()
            j = j // 2
        kk = kk * 2
    if mode == FULL or (mode == MERGE and k == P):
        for e in range(t, size, BLOCK):
            g = base + e
            if g >= lo and g < hi and valid:
                o = g - lo
                vals[row * vals.stride(0) + o * vals.stride(1)] = sk[e]
                inds[row * inds.stride(0) + o * inds.stride(1)] = I(si[e])
    else:
        for e in range(t, size, BLOCK):
            if valid:
                keys[row * P + base + e] = sk[e]
                idx[row * P + base + e] = si[e]


@cube(launch=True)
def sort_step(keys: Tensor[F], idx: Tensor[u32], rows: u32, n: u32, P: u32, k: u32, j: u32,
              desc: u32):
    """One compare-exchange step (stage k, distance j) over all rows of keys/idx (rows, P):
    one unit per pair."""
    g = ABSOLUTE_POS
    half = P // 2
    row = g // half
    if row < rows:
        p = g % half
        i = 2 * j * (p // j) + p % j
        _exchange(keys, idx, row * P + i, row * P + i + j, (i & k) == 0, n, desc)


@cube(launch=True)
def sort_merge_rows(x: Tensor[F], keys: Tensor[F], idx: Tensor[u32], vals: Tensor[F],
                    inds: Tensor[I], n: u32, lo: u32, hi: u32, desc: u32):
    """The CPU's sort: one unit per row, a bottom-up merge sort (stable: a tie takes the
    left run, whose original positions all come first) between the two halves of the row's
    work space keys/idx (rows, 2n); then positions lo..hi-1 to vals/inds. O(n log n) per
    row where the bitonic network's barriers cost a CPU a loop split per step."""
    row = ABSOLUTE_POS
    if row < vals.shape(0):
        base = row * 2 * n
        for e in range(n):
            keys[base + e] = x[row * x.stride(0) + e * x.stride(1)]
            idx[base + e] = e
        src = u32(0)
        w = u32(1)
        while w < n:
            sb = base + src * n
            db = base + (1 - src) * n
            s = u32(0)
            while s < n:
                m = min(s + w, n)
                end = min(s + 2 * w, n)
                i = s
                j = m
                for o in range(s, end):
                    left = i < m
                    if left and j < end:
                        left = not before(keys[sb + j], idx[sb + j], keys[sb + i], idx[sb + i],
                                          n, desc)
                    if left:
                        keys[db + o] = keys[sb + i]
                        idx[db + o] = idx[sb + i]
                        i += 1
                    else:
                        keys[db + o] = keys[sb + j]
                        idx[db + o] = idx[sb + j]
                        j += 1
                s = end
            src = 1 - src
            w = w * 2
        sb = base + src * n
        for e in range(lo, hi):
            vals[row * vals.stride(0) + (e - lo) * vals.stride(1)] = keys[sb + e]
            inds[row * inds.stride(0) + (e - lo) * inds.stride(1)] = I(idx[sb + e])


# ---- launch -------------------------------------------------------------------------------

def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _tile(rt, elem, P: int) -> tuple[int, int]:
    """(TILE, BLOCK) for rows padded to P."""
    per = np.dtype(elem.np).itemsize + 4
    tile = 1024
    while tile > 64 and tile * per > rt.features.max_shared_bytes // 2:
        tile //= 2
    if P <= 64:
        tile = 64
    block = min(tile // 2, 256, rt.features.max_cube_dim)
    if is_cpu(rt):
        block = min(block, 64)
    return tile, block


def sort_rows(rt, x, vals, inds, descending: bool = False, lo: int = 0, hi: int | None = None,
              merge: bool | None = None):
    """Sorts the rows of x ((rows, n), any strides) and writes the sorted positions lo..hi-1
    of each row into vals (x's type) and inds (an int type), both (rows, hi - lo) views.
    `merge`: the merge sort per unit (default: on the CPU) rather than the bitonic network."""
    x, vals, inds = x.buffer, vals.buffer, inds.buffer
    rows, n = x.shape
    hi = n if hi is None else hi
    if not 0 <= lo <= hi <= n:
        raise ValueError(f"sort_rows: positions {lo}..{hi} outside a row of {n}")
    if tuple(vals.shape) != (rows, hi - lo) or tuple(inds.shape) != (rows, hi - lo):
        raise ValueError(f"sort_rows: outputs {vals.shape} and {inds.shape}, want "
                         f"{(rows, hi - lo)}")
    if rows == 0 or hi == lo:
        return vals, inds
    if is_cpu(rt) if merge is None else merge:
        keys = rt.empty((rows, 2 * n), x.elem)
        idx = rt.empty((rows, 2 * n), cb.u32)
        sort_merge_rows.launch(rt, cube_count=cube_count(rows, 1), cube_dim=1, x=x, keys=keys,
                               idx=idx, vals=vals, inds=inds, n=n, lo=lo, hi=hi,
                               desc=int(descending))
        return vals, inds
    P = max(2, _pow2(n))
    tile, block = _tile(rt, x.elem, P)
    common = dict(x=x, vals=vals, inds=inds, n=n, P=P, lo=lo, hi=hi, desc=int(descending),
                  TILE=tile, BLOCK=block)
    if P <= tile:
        dummy = rt.empty((1, 1), cb.u32)
        sort_tile.launch(rt, cube_count=cube_count(rows, 1), cube_dim=block, keys=x,
                         idx=dummy, k=0, mode=FULL, **common)
        return vals, inds
    keys = rt.empty((rows, P), x.elem)
    idx = rt.empty((rows, P), cb.u32)
    tiles = cube_count(rows * (P // tile), 1)
    sort_tile.launch(rt, cube_count=tiles, cube_dim=block, keys=keys, idx=idx, k=0,
                     mode=LOCAL, **common)
    k = tile * 2
    pairs = rows * P // 2
    while k <= P:
        j = k // 2
        while j >= tile:
            sort_step.launch(rt, cube_count=cube_count(pairs, 128), cube_dim=128, keys=keys,
                             idx=idx, rows=rows, n=n, P=P, k=k, j=j, desc=int(descending))
            j //= 2
        sort_tile.launch(rt, cube_count=tiles, cube_dim=block, keys=keys, idx=idx, k=k,
                         mode=MERGE, **common)
        k *= 2
    return vals, inds


def reference(x: np.ndarray, descending: bool = False):
    """Stable (values, indices) along the last axis, nan largest."""
    key = -x if descending else x
    if descending:  # nan first: sort by (not nan, -x)
        order = np.lexsort((key, ~np.isnan(x)), axis=-1)
    else:
        order = np.argsort(key, axis=-1, kind="stable")
    return np.take_along_axis(x, order, -1), order


@cube(launch=True)
def scatter_rows_kernel(g: Tensor[F], idx: Tensor[I], out: Tensor[F]):
    """out[r, idx[r, i]] = g[r, i]: one unit per (r, i); a row's indices are distinct, so no
    two units write one place."""
    p = ABSOLUTE_POS
    k = g.shape(1)
    r = p // k
    i = p % k
    if r < g.shape(0):
        j = u32(idx[r * idx.stride(0) + i * idx.stride(1)])
        out[r * out.stride(0) + j * out.stride(1)] = g[r * g.stride(0) + i * g.stride(1)]


def scatter_rows(rt, g, idx, out):
    """The gradient of selected entries: out (zeros, (rows, n)) receives g ((rows, k)) at
    the indices idx ((rows, k)) of each row."""
    g, idx, out = g.buffer, idx.buffer, out.buffer
    n = g.shape[0] * g.shape[1]
    if n:
        scatter_rows_kernel.launch(rt, cube_count=cube_count(n, 128), cube_dim=128, g=g,
                                   idx=idx, out=out)
    return out


# the specialisations `cube check dl.kernels.sort` builds (docs/check.md)
CUBE_CHECK = {
    sort_tile: [dict(type={"F": f, "I": i}, comptime={"TILE": tile, "BLOCK": block})
                for f, i in ((cb.f32, cb.i32), (cb.f64, cb.i64), (cb.i32, cb.i64))
                for tile, block in ((64, 32), (1024, 256))],
    sort_step: [dict(type={"F": cb.f32}), dict(type={"F": cb.f64})],
    sort_merge_rows: [dict(type={"F": cb.f32, "I": cb.i64}), dict(type={"F": cb.f32, "I": cb.i32})],
    scatter_rows_kernel: [dict(type={"F": cb.f32, "I": cb.i32}),
                          dict(type={"F": cb.f64, "I": cb.i64})],
}

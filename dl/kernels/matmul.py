"""Batched matmul C[z] = act(A[z] @ B[z] + bias), operands of any strides (a transpose is a
view), batch broadcast by stride 0. Candidates:

- `packed_rN`, `dot_rN`, `tpacked_r0`: the tiled / dot kernels with the N-th best tile of
  the runtime's register file (`Features.vector_registers` and `vector_bits`, from the CPU
  model it compiles for: AVX-512's 32 zmm registers take 12x2 and 9x3 where AVX2's 16 ymm
  take 6x2 and 4x3); the tile is comptime, so each ISA compiles its own kernels, and autotune
  picks among the ranks per shape bucket. GPUs run them too (at a default 16-register file).
- `tiled_MRxNR`: each unit keeps an MR x NR tile of lines of C in registers; B and C are read
  and written as lines along N (line size 1 when B's rows are not contiguous), A as scalars
  broadcast into lines. The CPU's main kernel: one unit per cube, cubes walk down the rows so
  one B panel stays in cache while A streams.
- `dot_MRxNR`: for B stored transposed (K contiguous in both operands): lines along K, a
  horizontal sum at the end.
- `shared_T`: GPU style, T x T units stage tiles of A and B in shared memory.
- `plane`: one plane per output element, lanes split K and `plane_sum` combines them (for
  small M x N with long K on GPUs).
- `blocked_B`: GPU style with register tiles: a B x B tile of C per cube, T x T per unit
  (rows and columns strided across the units, so shared memory is read without bank
  conflicts and C is stored coalesced), K in steps of BK staged through shared memory; the
  operand loads walk whichever of K and M (N) is contiguous.
- `split_T`: `shared_T` over chunks of K, one cube per (tile, chunk), the chunks' partial
  products summed by a second kernel that adds the bias and activation: a weight gradient
  (K = batch x pixels, a small output) fills the GPU instead of a few cubes walking all of K.
"""
from __future__ import annotations

import functools
import typing

import numpy as np

import cube as cb
from autotune import Candidate, Tunable, tune_key
from cube import (
    ABSOLUTE_POS_X,
    CUBE_COUNT_X,
    CUBE_COUNT_Y,
    CUBE_DIM_X,
    CUBE_DIM_Y,
    CUBE_POS_X,
    CUBE_POS_Y,
    CUBE_POS_Z,
    UNIT_POS_PLANE,
    UNIT_POS_X,
    UNIT_POS_Y,
    Array,
    Comptime,
    Line,
    Tensor,
    cube,
    u32,
)

from .common import cdiv, is_cpu, l2_bytes, line_size, registers
from .epilogue import ACTIVATIONS, activate
from .epilogue import reference as act_ref
from .fill import fill
from .rowops import lanes_sums, transpose_lines
from .view import is_contiguous, strided

F = typing.TypeVar("F")


@cube(launch=True, unchecked=True, nowrap=True)
def matmul_tiled(a: Tensor[F], b: Tensor[Line[F]], c: Tensor[Line[F]], bias: Array[Line[F]],
                 MR: Comptime[int], NR: Comptime[int], HAS_BIAS: Comptime[bool],
                 ACT: Comptime[str], PACKED: Comptime[bool], PACKED_A: Comptime[bool],
                 MB: Comptime[int]):
    """PACKED: b is `pack_b`'s output, each NR-line column panel contiguous over k.
    PACKED_A: a is A packed by `pack_b_strided` into (batch * row panels, K, MR): each unit
    reads its MR rows as one contiguous stream (a transposed A, as in a weight gradient
    gz^T @ x, would otherwise be read a column at a time at a power-of-two stride).
    MB > 0 (one unit per cube): cubes walk blocks of MB row tiles, every column panel for
    each block, so a block of A stays in the core's L2 while B's panels stream (walking all
    rows per panel re-read the whole of A from L3 for every panel: short K, many panels)."""
    L = cb.comptime(c.line_size())
    m = c.shape(1)
    k = a.shape(1) if PACKED_A else a.shape(2)
    nl = c.shape(2) // L
    z = CUBE_POS_Z
    row0 = (CUBE_POS_X * CUBE_DIM_X + UNIT_POS_X) * MR
    col0 = (CUBE_POS_Y * CUBE_DIM_Y + UNIT_POS_Y) * NR
    if MB > 0:
        tiles = CUBE_COUNT_X
        cid = CUBE_POS_Y * tiles + CUBE_POS_X
        per = MB * CUBE_COUNT_Y  # cubes in a whole block
        full = tiles // MB
        if cid < full * per:
            row0 = ((cid // per) * MB + cid % MB) * MR
            col0 = ((cid % per) // MB) * NR
        else:  # the last, shorter block
            rem = cid - full * per
            tail = tiles - full * MB
            row0 = (full * MB + rem % tail) * MR
            col0 = (rem // tail) * NR
    if row0 < m and col0 < nl:
        # unchecked: edge tiles clamp their reads to the last row/line and skip their stores
        offa = cb.LocalArray(u32, MR)
        for i in cb.range(MR, unroll=True):
            if PACKED_A:
                offa[i] = (z * ((m + MR - 1) // MR) + row0 // MR) * a.stride(0) + i
            else:
                offa[i] = z * a.stride(0) + min(row0 + i, m - 1) * a.stride(1)
        offb = cb.LocalArray(u32, NR)
        sb = b.stride(1) // L
        for j in cb.range(NR, unroll=True):
            if PACKED:
                offb[j] = z * (b.stride(0) // L) + col0 * k + j
            else:
                offb[j] = z * (b.stride(0) // L) + min(col0 + j, nl - 1) * b.stride(2)
        if PACKED:
            sb = u32(NR)
        acc = cb.LocalArray(Line[F, L], MR * NR)
        for t in cb.range(MR * NR, unroll=True):
            acc[t] = Line[F, L](0)
        bv = cb.LocalArray(Line[F, L], NR)
        sa = a.stride(2)
        if PACKED_A:
            sa = u32(MR)
        ka = u32(0)
        kb = u32(0)
        # a packed operand is one stream: one running index plus a constant per row/line
        # (LLVM folds it into the address; separate offsets cost two integer ops a load)
        if PACKED:
            kb = offb[0]
        if PACKED_A:
            ka = offa[0]
        for _ in range(k):
            for j in cb.range(NR, unroll=True):
                if PACKED:
                    bv[j] = b[kb + j]
                else:
                    bv[j] = b[offb[j] + kb]
            for i in cb.range(MR, unroll=True):
                if PACKED_A:
                    av = Line[F, L](a[ka + i])
                else:
                    av = Line[F, L](a[offa[i] + ka])
                for j in cb.range(NR, unroll=True):
                    acc[i * NR + j] = cb.fma(av, bv[j], acc[i * NR + j])
            ka += sa
            kb += sb
        sc0 = z * (c.stride(0) // L)
        sc1 = c.stride(1) // L
        if row0 + MR <= m and col0 + NR <= nl:  # an interior tile: no test per store
            for i in cb.range(MR, unroll=True):
                for j in cb.range(NR, unroll=True):
                    v = acc[i * NR + j]
                    if HAS_BIAS:
                        v += bias[col0 + j]
                    c[sc0 + (row0 + i) * sc1 + col0 + j] = activate(v, ACT)
        else:
            for i in cb.range(MR, unroll=True):
                for j in cb.range(NR, unroll=True):
                    if row0 + i < m and col0 + j < nl:
                        v = acc[i * NR + j]
                        if HAS_BIAS:
                            v += bias[col0 + j]
                        c[sc0 + (row0 + i) * sc1 + col0 + j] = activate(v, ACT)


@cube(launch=True, unchecked=True, nowrap=True)
def matmul_kblocked(a: Tensor[F], b: Tensor[Line[F]], c: Tensor[Line[F]],
                    bias: Array[Line[F]], MC: u32, MR: Comptime[int], NR: Comptime[int],
                    KC: Comptime[int], NP: Comptime[int], HAS_BIAS: Comptime[bool],
                    ACT: Comptime[str], PACKED_A: Comptime[bool]):
    """`matmul_tiled` on `pack_b`'s panels, K in blocks of KC: a unit owns NP column panels
    (x) of a block of MC rows (y; z the batch) and, for each K block, walks its panels and
    for each panel its row tiles: the panel's KC x NR lines of B stay in L1 while A's rows
    stream (a whole panel over K left L1: 512 x 2 lines is 32 KB beside 6 rows of A), the
    MC x KC block of A stays in L2 over the unit's NP panels, and so do the unit's MC x NP
    tiles of C, which hold the partial sums between K blocks (the epilogue runs on the
    last). One panel a unit re-read each row block's A over all of K from L3 for every
    panel once it outgrew L2 (sgemm 4096: MC x K = 3 MB). PACKED_A: a is `_pack_a`'s row
    panels, as `matmul_tiled`'s (each row tile one stream where MR rows of a wide A sit a
    row stride apart)."""
    L = cb.comptime(c.line_size())
    m = c.shape(1)
    k = a.shape(1) if PACKED_A else a.shape(2)
    nl = c.shape(2) // L
    z = CUBE_POS_Z
    sc0 = z * (c.stride(0) // L)
    sc1 = c.stride(1) // L
    acc = cb.LocalArray(Line[F, L], MR * NR)
    offa = cb.LocalArray(u32, MR)
    sa = MR if PACKED_A else a.stride(2)
    # the block's last row tile stops at the block's end: a tile reaching into the next
    # block stored rows that block's cube stores too, and with K in blocks the two cubes'
    # read-add-write of the partial sums raced (9x3 tiles in 96-row blocks: wrong results
    # in half the runs on two threads)
    mend = min(m, CUBE_POS_Y * MC + MC)
    for k0 in range(0, k, KC):
        k1 = min(k0 + KC, k)
        last = k1 == k
        for p in range(NP):
            col0 = (ABSOLUTE_POS_X * NP + p) * NR
            if col0 < nl:
                for row0 in range(CUBE_POS_Y * MC, mend, MR):
                    for i in cb.range(MR, unroll=True):
                        if PACKED_A:
                            offa[i] = (z * ((m + MR - 1) // MR) + row0 // MR) * a.stride(0) \
                                + k0 * MR + i
                        else:
                            offa[i] = z * a.stride(0) + min(row0 + i, m - 1) * a.stride(1) \
                                + k0 * a.stride(2)
                    for t in cb.range(MR * NR, unroll=True):
                        acc[t] = Line[F, L](0)
                    kb = z * (b.stride(0) // L) + (col0 * k + k0 * NR)
                    ka = u32(0)
                    for _ in range(k1 - k0):
                        for i in cb.range(MR, unroll=True):
                            av = Line[F, L](a[offa[i] + ka])
                            for j in cb.range(NR, unroll=True):
                                acc[i * NR + j] = cb.fma(av, b[kb + j], acc[i * NR + j])
                        ka += sa
                        kb += NR
                    for i in cb.range(MR, unroll=True):
                        for j in cb.range(NR, unroll=True):
                            if row0 + i < mend and col0 + j < nl:
                                o = sc0 + (row0 + i) * sc1 + col0 + j
                                v = acc[i * NR + j]
                                if k0 > 0:
                                    v += c[o]
                                if last:
                                    if HAS_BIAS:
                                        v += bias[col0 + j]
                                    v = activate(v, ACT)
                                c[o] = v


@cube(launch=True, nowrap=True)
def pack_b(b: Tensor[Line[F]], out: Array[Line[F]], NR: Comptime[int]):
    """(batch, K, N) lines -> (batch, panels, K, NR) lines, zero past N: each unit's B panel
    is then one contiguous stream (a power-of-two row stride would make the panel's rows
    collide in the same cache sets). x walks N's lines (reads in order), y K, z the batch:
    no division by a runtime value."""
    L = cb.comptime(b.line_size())
    k = b.shape(1)
    nl = b.shape(2) // L
    panels = (nl + NR - 1) // NR
    col = ABSOLUTE_POS_X
    kk = CUBE_POS_Y
    z = CUBE_POS_Z
    if col < panels * NR:
        v = Line[F, L](0)
        if col < nl:
            v = b[z * (b.stride(0) // L) + kk * (b.stride(1) // L) + col * b.stride(2)]
        out[((z * panels + col // NR) * k + kk) * NR + col % NR] = v


UNROLL_NRL = 32  # `pack_b_strided` unrolls both loops of a block up to panels this wide


@cube(launch=True, unchecked=True, nowrap=True)
def pack_b_strided(b: Tensor[F], out: Array[F], NRL: Comptime[int], K_X: Comptime[bool],
                   N_UNIT: Comptime[bool], KB: Comptime[int]):
    """(batch, K, N) of any strides -> `pack_b`'s panels (batch, panels, K, NRL) as scalars,
    zero past N: B stored transposed (nn.Linear's weight) reaches the tiled kernel with its
    rows as lines, and a transposed A (seen as (batch, K, M)) its MR rows as one stream.
    A unit moves a KB x NRL block (z is the batch; x walks K's blocks and y the panels when
    K is B's contiguous dim (K_X), else the other way round, so neighbouring units read
    neighbouring memory): its stores are one contiguous run, and its reads walk B's
    contiguous dim in the inner loop. One element per unit had every store or every read
    strided: 4-5x slower.
    N_UNIT: N's stride is 1."""
    z = CUBE_POS_Z
    k = b.shape(1)
    n = b.shape(2)
    panels = (n + NRL - 1) // NRL
    if K_X:
        k0 = ABSOLUTE_POS_X * KB
        p = CUBE_POS_Y
    else:  # neighbouring units read neighbouring runs of B's rows
        p = ABSOLUTE_POS_X
        k0 = CUBE_POS_Y * KB
    if k0 + KB <= k and (p + 1) * NRL <= n:  # a whole block: no test per element
        base = (z * panels + p) * k + k0
        src = z * b.stride(0) + k0 * b.stride(1) + p * NRL * b.stride(2)
        # the inner loop unrolled (its accesses vectorise), the outer only for a narrow
        # panel: both unrolled, a panel of 128 scalars compiled for 80 s (an odd K's
        # nn.Linear at 1024 rows); neither, 12 was 20% slower (A's row panels)
        if K_X:  # K's stride is 1 (a constant: the reads vectorise)
            for j in cb.range(NRL, unroll=NRL <= UNROLL_NRL):
                for r in cb.range(KB, unroll=True):
                    out[(base + r) * NRL + j] = b[src + r + j * b.stride(2)]
        elif N_UNIT:
            for r in cb.range(KB, unroll=NRL <= UNROLL_NRL):
                for j in cb.range(NRL, unroll=True):
                    out[(base + r) * NRL + j] = b[src + r * b.stride(1) + j]
        else:
            for r in cb.range(KB, unroll=NRL <= UNROLL_NRL):
                for j in cb.range(NRL, unroll=True):
                    out[(base + r) * NRL + j] = b[src + r * b.stride(1) + j * b.stride(2)]
    elif k0 < k and p < panels:  # an edge block: tested per element, zero past N
        base = (z * panels + p) * k
        zb = z * b.stride(0)
        for r in cb.range(KB):
            kk = k0 + r
            if kk < k:
                for j in cb.range(NRL):
                    col = p * NRL + j
                    v = F(0)
                    if col < n:
                        v = b[zb + kk * b.stride(1) + col * b.stride(2)]
                    out[(base + kk) * NRL + j] = v


@cube(launch=True, unchecked=True, nowrap=True)
def pack_t_lines(bt: Tensor[Line[F]], out: Array[Line[F]], NRL: Comptime[int]):
    """`pack_b_strided` for B stored transposed, as lines: bt is B seen as (batch, N, K)
    with lines along K; out is `pack_b`'s panels (batch, panels, K, NRL) as lines, zero
    past N. A unit (x: K's lines, y: N's blocks of L, z: the batch) reads L rows of bt as
    one line each, transposes the L x L square in registers (`transpose_lines`) and stores
    L lines of a panel (a scalar transpose moved each value alone: 0.45 ns a value)."""
    L = cb.comptime(bt.line_size())
    n = bt.shape(1)
    kl = bt.shape(2) // L
    k = kl * L
    panels = (n + NRL - 1) // NRL
    kk = ABSOLUTE_POS_X
    n0 = CUBE_POS_Y * L
    z = CUBE_POS_Z
    if kk < kl:
        rows = cb.LocalArray(Line[F, L], L)
        src = z * (bt.stride(0) // L) + kk
        for i in cb.range(L, unroll=True):
            rows[i] = Line[F, L](0)
            if n0 + i < n:
                rows[i] = bt[src + (n0 + i) * (bt.stride(1) // L)]
        transpose_lines(rows, L)
        p = n0 // NRL
        base = ((z * panels + p) * k + kk * L) * (NRL // L) + (n0 % NRL) // L
        for r in cb.range(L, unroll=True):
            out[base + r * (NRL // L)] = rows[r]


@cube(launch=True, unchecked=True, nowrap=True)
def unswap(src: Tensor[F], c: Tensor[Line[F]], bias: Array[Line[F]], TM: Comptime[int],
           HAS_BIAS: Comptime[bool], ACT: Comptime[str]):
    """c = act(src^T + bias) (`_run_swapped`'s last step): src (batch, N, M') is the product's
    transpose with unit stride along M, c (batch, M, N) is written as lines along N. A unit
    writes TM rows of one line of c (x: lines, y: row blocks, z: the batch): each lane
    comes from its own row of src, TM contiguous values of it (one cache line at TM=16)."""
    L = cb.comptime(c.line_size())
    m = c.shape(1)
    nl = c.shape(2) // L
    z = CUBE_POS_Z
    col = ABSOLUTE_POS_X
    r0 = CUBE_POS_Y * TM
    if col < nl:
        s = z * src.stride(0) + col * L * src.stride(1) + r0
        for i in cb.range(TM, unroll=True):
            if r0 + i < m:
                v = Line[F, L](0)
                for lane in cb.range(L, unroll=True):
                    v[lane] = src[s + lane * src.stride(1) + i]
                if HAS_BIAS:
                    v += bias[col]
                c[z * (c.stride(0) // L) + (r0 + i) * (c.stride(1) // L) + col] = \
                    activate(v, ACT)


@cube(launch=True, unchecked=True, nowrap=True)
def unswap_lines(src: Tensor[Line[F]], c: Tensor[Line[F]], bias: Array[Line[F]],
                 HAS_BIAS: Comptime[bool], ACT: Comptime[str]):
    """`unswap` where N is in whole lines: a unit (x: lines of N, y: M's blocks of L, z: the
    batch) reads an L x L square of src as L lines along M, transposes it in registers
    (`transpose_lines`) and writes L lines of c (a lane at a time took 0.37 ns a value)."""
    L = cb.comptime(c.line_size())
    m = c.shape(1)
    nl = c.shape(2) // L
    col = ABSOLUTE_POS_X
    m0 = CUBE_POS_Y * L
    z = CUBE_POS_Z
    if col < nl:
        rows = cb.LocalArray(Line[F, L], L)
        s = z * (src.stride(0) // L) + col * L * (src.stride(1) // L) + m0 // L
        for i in cb.range(L, unroll=True):
            rows[i] = src[s + i * (src.stride(1) // L)]
        transpose_lines(rows, L)
        o = z * (c.stride(0) // L) + col
        for r in cb.range(L, unroll=True):
            if m0 + r < m:
                v = rows[r]
                if HAS_BIAS:
                    v += bias[col]
                c[o + (m0 + r) * (c.stride(1) // L)] = activate(v, ACT)


@cube
def store_dot_tile(acc, c, bias, z, row0, col0, m, n, MR: Comptime[int], NR: Comptime[int],
                   L: Comptime[int], HAS_BIAS: Comptime[bool], ACT: Comptime[str]):
    """`matmul_dot`'s epilogue: each accumulator's lane sum (+ bias, activation) stored to
    C, up to L sums folded into one line at a time (`lanes_sums`). A halving tree per
    accumulator was ~50 of 64x512x512's 214 us on AVX-512 (the time at K -> 0), the fold
    ~22: 1.05-1.10x at 64 rows (1.06-1.16x on one core); AVX2's 8 lanes level."""
    T = cb.comptime(MR * NR)
    t0 = cb.comptime(0)
    for _ in cb.range(T, unroll=True):
        if t0 < T:
            g = cb.comptime(min(L, 1 << ((T - t0).bit_length() - 1)))
            sums = lanes_sums(acc, t0, g, L)
            for q in cb.range(g, unroll=True):
                i = cb.comptime((t0 + q) // NR)
                j = cb.comptime((t0 + q) % NR)
                if row0 + i < m and col0 + j < n:
                    v = sums[q]
                    if HAS_BIAS:
                        v += bias[col0 + j]
                    c[z * c.stride(0) + (row0 + i) * c.stride(1) + col0 + j] = activate(v, ACT)
            t0 = t0 + g


@cube(launch=True, unchecked=True, nowrap=True)
def matmul_dot(a: Tensor[Line[F]], bt: Tensor[Line[F]], c: Tensor[F], bias: Array[F],
               MR: Comptime[int], NR: Comptime[int], HAS_BIAS: Comptime[bool],
               ACT: Comptime[str]):
    """bt is B seen as (batch, N, K) with K contiguous; a and bt are read as lines along K."""
    L = cb.comptime(a.line_size())
    m = a.shape(1)
    kl = a.shape(2) // L
    n = bt.shape(1)
    z = CUBE_POS_Z
    row0 = (CUBE_POS_X * CUBE_DIM_X + UNIT_POS_X) * MR
    col0 = (CUBE_POS_Y * CUBE_DIM_Y + UNIT_POS_Y) * NR
    if row0 < m and col0 < n:
        offa = cb.LocalArray(u32, MR)
        for i in cb.range(MR, unroll=True):
            offa[i] = (z * a.stride(0) + min(row0 + i, m - 1) * a.stride(1)) // L
        offb = cb.LocalArray(u32, NR)
        for j in cb.range(NR, unroll=True):
            offb[j] = (z * bt.stride(0) + min(col0 + j, n - 1) * bt.stride(1)) // L
        acc = cb.LocalArray(Line[F, L], MR * NR)
        for t in cb.range(MR * NR, unroll=True):
            acc[t] = Line[F, L](0)
        bv = cb.LocalArray(Line[F, L], NR)
        for kk in range(kl):
            for j in cb.range(NR, unroll=True):
                bv[j] = bt[offb[j] + kk]
            for i in cb.range(MR, unroll=True):
                av = a[offa[i] + kk]
                for j in cb.range(NR, unroll=True):
                    acc[i * NR + j] = cb.fma(av, bv[j], acc[i * NR + j])
        store_dot_tile(acc, c, bias, z, row0, col0, m, n, MR, NR, L, HAS_BIAS, ACT)


@cube
def shared_dot(a, b, ta, tb, z, row, col, m, n, k, k0, k1, zero, T: Comptime[int]):
    """Row `row` of A[z] times column `col` of B[z] over K steps k0..k1 (a multiple of T
    apart), T steps at a time staged through the cube's shared tiles ta and tb (T x T: each
    unit loads one element of each)."""
    ty = UNIT_POS_Y
    tx = UNIT_POS_X
    acc = zero
    for t0 in range(k0, k1, T):
        ka = t0 + tx
        kb = t0 + ty
        ta[ty * T + tx] = a[z * a.stride(0) + row * a.stride(1) + ka * a.stride(2)] \
            if row < m and ka < k else zero
        tb[ty * T + tx] = b[z * b.stride(0) + kb * b.stride(1) + col * b.stride(2)] \
            if kb < k and col < n else zero
        cb.sync_cube()
        for kk in cb.range(T, unroll=True):
            acc += ta[ty * T + kk] * tb[kk * T + tx]
        cb.sync_cube()
    return acc


@cube(launch=True)
def matmul_shared(a: Tensor[F], b: Tensor[F], c: Tensor[F], bias: Array[F], T: Comptime[int],
                  HAS_BIAS: Comptime[bool], ACT: Comptime[str]):
    """T x T units per cube; each stages one element of the A and B tiles per step."""
    ty = UNIT_POS_Y
    tx = UNIT_POS_X
    z = CUBE_POS_Z
    m = a.shape(1)
    k = a.shape(2)
    n = b.shape(2)
    row = CUBE_POS_Y * T + ty
    col = CUBE_POS_X * T + tx
    ta = cb.SharedMemory(F, T * T)
    tb = cb.SharedMemory(F, T * T)
    acc = shared_dot(a, b, ta, tb, z, row, col, m, n, k, 0, k, F(0), T)
    if row < m and col < n:
        if HAS_BIAS:
            acc += bias[col]
        c[z * c.stride(0) + row * c.stride(1) + col] = activate(acc, ACT)


@cube
def stage_tile(src, base, sr, sk, dst, SD: Comptime[int], r0, nr, t0, k, tid, zero,
               R: Comptime[int], BK: Comptime[int], NT: Comptime[int], K_FAST: Comptime[bool]):
    """Copies the R x BK block of src at rows r0.. (of nr) and K steps t0.. (of k), strides
    sr and sk, into dst K-major (row stride SD), zero outside; NT units share it,
    consecutive units along K where K_FAST (K is src's contiguous side), else along R."""
    for q in cb.range((R * BK) // NT, unroll=True):
        e = q * NT + tid
        r = e % R
        kk = e // R
        if K_FAST:
            r = e // BK
            kk = e % BK
        gr = r0 + r
        gk = t0 + kk
        dst[kk * SD + r] = src[base + gr * sr + gk * sk] if gr < nr and gk < k else zero


@cube(launch=True)
def matmul_blocked(a: Tensor[F], b: Tensor[F], c: Tensor[F], bias: Array[F],
                   BM: Comptime[int], BN: Comptime[int], BK: Comptime[int], TM: Comptime[int],
                   TN: Comptime[int], A_K: Comptime[bool], B_K: Comptime[bool],
                   HAS_BIAS: Comptime[bool], ACT: Comptime[str]):
    """A BM x BN tile of C per cube of (BN / TN) x (BM / TM) units, each accumulating TM x TN
    elements in registers: rows UNIT_POS_Y + i * (BM / TM), columns UNIT_POS_X + j * (BN / TN).
    A_K (B_K): A's (B's) contiguous dimension is K, so consecutive units load along K;
    otherwise along M (N). The tiles are stored K-major with one pad element a row, so both
    load orders write shared memory without bank conflicts."""
    UX = cb.comptime(BN // TN)
    UY = cb.comptime(BM // TM)
    NT = cb.comptime(UX * UY)
    SA = cb.comptime(BM + 1)
    SB = cb.comptime(BN + 1)
    tx = UNIT_POS_X
    ty = UNIT_POS_Y
    tid = ty * UX + tx
    z = CUBE_POS_Z
    m = a.shape(1)
    k = a.shape(2)
    n = b.shape(2)
    row0 = CUBE_POS_Y * BM
    col0 = CUBE_POS_X * BN
    abase = z * a.stride(0)
    bbase = z * b.stride(0)
    ta = cb.SharedMemory(F, BK * SA)
    tb = cb.SharedMemory(F, BK * SB)
    acc = cb.LocalArray(F, TM * TN)
    for t in cb.range(TM * TN, unroll=True):
        acc[t] = F(0)
    af = cb.LocalArray(F, TM)
    bf = cb.LocalArray(F, TN)
    for t0 in range(0, k, BK):
        stage_tile(a, abase, a.stride(1), a.stride(2), ta, SA, row0, m, t0, k, tid, F(0), BM,
                   BK, NT, A_K)
        stage_tile(b, bbase, b.stride(2), b.stride(1), tb, SB, col0, n, t0, k, tid, F(0), BN,
                   BK, NT, B_K)
        cb.sync_cube()
        for kk in cb.range(BK, unroll=True):
            for i in cb.range(TM, unroll=True):
                af[i] = ta[kk * SA + ty + i * UY]
            for j in cb.range(TN, unroll=True):
                bf[j] = tb[kk * SB + tx + j * UX]
            for i in cb.range(TM, unroll=True):
                for j in cb.range(TN, unroll=True):
                    acc[i * TN + j] = cb.fma(af[i], bf[j], acc[i * TN + j])
        cb.sync_cube()
    for i in cb.range(TM, unroll=True):
        row = row0 + ty + i * UY
        for j in cb.range(TN, unroll=True):
            col = col0 + tx + j * UX
            if row < m and col < n:
                v = acc[i * TN + j]
                if HAS_BIAS:
                    v += bias[col]
                c[z * c.stride(0) + row * c.stride(1) + col] = activate(v, ACT)


@cube(launch=True)
def matmul_shared_split(a: Tensor[F], b: Tensor[F], part: Tensor[F], T: Comptime[int],
                        KC: u32, S: u32):
    """`matmul_shared` over one chunk of KC steps of K (KC a multiple of T): cube z = batch
    index * S + chunk; the chunk's partial product goes to part[z]."""
    ty = UNIT_POS_Y
    tx = UNIT_POS_X
    z = CUBE_POS_Z
    zb = z // S
    k0 = (z % S) * KC
    m = a.shape(1)
    k = a.shape(2)
    n = b.shape(2)
    row = CUBE_POS_Y * T + ty
    col = CUBE_POS_X * T + tx
    ta = cb.SharedMemory(F, T * T)
    tb = cb.SharedMemory(F, T * T)
    acc = shared_dot(a, b, ta, tb, zb, row, col, m, n, k, k0, k0 + KC, zero=F(0), T=T)
    if row < m and col < n:
        part[z * part.stride(0) + row * part.stride(1) + col] = acc


@cube(launch=True)
def sum_split(part: Tensor[F], c: Tensor[F], bias: Array[F], S: u32, HAS_BIAS: Comptime[bool],
              ACT: Comptime[str]):
    """c[z] = act(sum of part[z * S .. z * S + S - 1] + bias); a unit per element, cube y the
    batch index."""
    z = CUBE_POS_Y
    m = c.shape(1)
    n = c.shape(2)
    i = CUBE_POS_X * CUBE_DIM_X + UNIT_POS_X
    if i < m * n:
        acc = F(0)
        for s in range(S):
            acc += part[(z * S + s) * part.stride(0) + i]
        col = i % n
        if HAS_BIAS:
            acc += bias[col]
        c[z * c.stride(0) + (i // n) * c.stride(1) + col] = activate(acc, ACT)


@cube(launch=True)
def matmul_plane(a: Tensor[F], b: Tensor[F], c: Tensor[F], bias: Array[F],
                 P: Comptime[int], HAS_BIAS: Comptime[bool], ACT: Comptime[str]):
    """One plane (of P lanes) per output element; UNIT_POS_Y picks the plane."""
    z = CUBE_POS_Z
    m = a.shape(1)
    k = a.shape(2)
    n = b.shape(2)
    e = CUBE_POS_X * CUBE_DIM_Y + UNIT_POS_Y
    row = e // n
    col = e % n
    acc = F(0)
    if row < m:
        for kk in range(UNIT_POS_PLANE, k, P):
            acc += a[z * a.stride(0) + row * a.stride(1) + kk * a.stride(2)] \
                * b[z * b.stride(0) + kk * b.stride(1) + col * b.stride(2)]
    total = cb.plane_sum(acc)
    if row < m and UNIT_POS_PLANE == 0:
        if HAS_BIAS:
            total += bias[col]
        c[z * c.stride(0) + row * c.stride(1) + col] = activate(total, ACT)


# ---- launch -------------------------------------------------------------------------------

def _batch3(x):
    """A rank-3 view (batch, rows, cols) of a 2-D or 3-D operand."""
    x = x.buffer if hasattr(x, "buffer") else x
    if len(x.shape) == 2:
        return strided(x, (1, *x.shape), (0, *x.strides))
    if len(x.shape) != 3:
        raise ValueError(f"matmul takes 2-D or 3-D operands, got shape {x.shape}")
    return x


def _broadcast(x, batch: int):
    if x.shape[0] == batch and (batch > 1 or x.strides[0] == 0):
        return x
    # a batch of one (or a broadcast one) has batch stride 0: a size-1 dim's stride means
    # nothing, but an odd one (dl's views carry them) would force lines of 1 in every kernel
    return strided(x, (batch, *x.shape[1:]), (0, *x.strides[1:]))


def _tiled_line(rt, a, b, c) -> int:
    n = c.shape[2]
    if _strided_rows(b):
        return 1
    return line_size(rt, c.elem, n, b.strides[0], b.strides[1])


PACK_KB = 8  # K steps per unit of a K-contiguous pack


def _pack_strided(rt, x, nrl: int):
    """`pack_b_strided` of x (batch, K, N) into a new (batch, panels * K, nrl) buffer
    (`pack_t_lines` where K is contiguous and lines fit)."""
    batch, k, n = x.shape
    panels = cdiv(n, nrl)
    out = rt.empty((batch, panels * k, nrl), x.elem)
    k_x = x.strides[1] == 1 and x.strides[2] != 1
    lsz = line_size(rt, x.elem, k, x.strides[0], x.strides[2], nrl) if k_x else 1
    if lsz > 1:
        bt = strided(x, (batch, n, k), (x.strides[0], x.strides[2], 1))
        pack_t_lines.launch(rt, cube_count=(cdiv(k // lsz, 64), cdiv(n, lsz), batch),
                            cube_dim=(64, 1), bt=bt.lines(lsz), out=out.lines(lsz), NRL=nrl)
        return out
    blocks = cdiv(k, PACK_KB)
    pack_b_strided.launch(rt, cube_count=(cdiv(blocks, 64), panels, batch) if k_x else
                          (cdiv(panels, 64), blocks, batch), cube_dim=64, b=x, out=out,
                          NRL=nrl, K_X=k_x, N_UNIT=not k_x and x.strides[2] == 1, KB=PACK_KB)
    return out


def _pack_a(rt, a, mr: int):
    """A (batch, M, K) seen as (batch, K, M) and packed into MR-row panels over K, viewed
    as (batch * panels, K, MR): the tiled kernel steps over panels by stride(0)."""
    batch, m, k = a.shape
    packed = _pack_strided(rt, strided(a, (batch, k, m), (a.strides[0], a.strides[2],
                                                          a.strides[1])), mr)
    return strided(packed, (batch * cdiv(m, mr), k, mr), (k * mr, mr, 1))


A_BLOCK_BYTES = 96 * 1024  # a block of A rows that stays in a core's L2 beside B's panel
A_L2_BYTES = 512 * 1024  # an A this small stays in L2 whole: no blocks (B would stream twice)


def _row_block(rt, mr: int, k: int, grid, elem) -> int:
    """Row tiles per block of the CPU's cube order (0: all rows per panel, the order when A
    fits in L2 anyway or a block would hold too few tiles to pay back B's extra passes: a
    conv's 64x576 weights in blocks of 36 rows read its 7 MB of columns twice)."""
    size = np.dtype(elem.np).itemsize
    if not is_cpu(rt) or grid[1] < 8 or grid[0] * mr * k * size <= A_L2_BYTES:
        return 0
    mb = A_BLOCK_BYTES // (mr * k * size)
    return mb if 4 <= mb < grid[0] else 0


def _pack_lines(rt, b, lsz: int, nr: int, panels: int, elem):
    """B (batch, K, N) with rows of whole lines -> `pack_b`'s panels, as lines."""
    batch, k = b.shape[0], b.shape[1]
    bp = rt.empty((batch, panels * k, nr * lsz), elem)
    pack_b.launch(rt, cube_count=(cdiv(panels * nr, 64), k, batch), cube_dim=64,
                  b=b.lines(lsz) if lsz > 1 else b, out=bp.lines(lsz), NR=nr)
    return bp.lines(lsz)


def _bias_lines(bias, c, lsz: int):
    """The bias argument of the line kernels: bias as lines of lsz, or without one, c's
    buffer as lines of 1 (a placeholder the kernel never reads)."""
    return bias.buffer.lines(lsz) if bias is not None else c.buffer.lines(1)


def _run_tiled(mr: int, nr: int, pack: str = "", pack_a: bool = False):
    """pack: "" reads B as it lies (lines along N when its rows are contiguous), "lines"
    packs those lines into panels first, "strided" gathers any layout into panels as
    scalars; pack_a packs A's rows into panels."""
    def run(rt, a, b, c, bias, act):
        batch, m, n = c.shape
        k = b.shape[1]
        lsz = line_size(rt, c.elem, n) if pack == "strided" else _tiled_line(rt, a, b, c)
        nl = n // lsz
        panels = cdiv(nl, nr)
        if pack == "lines":
            bv = _pack_lines(rt, b, lsz, nr, panels, c.elem)
        elif pack == "strided":
            bv = _pack_strided(rt, b, nr * lsz).lines(lsz)
        else:
            bv = b.lines(lsz) if lsz > 1 else b
        av = _pack_a(rt, a, mr) if pack_a else a
        units = (1, 1) if is_cpu(rt) else (8, 8)
        grid = (cdiv(cdiv(m, mr), units[0]), cdiv(panels, units[1]), batch)
        matmul_tiled.launch(rt, cube_count=grid, cube_dim=units, a=av, b=bv, c=c.lines(lsz),
                            bias=_bias_lines(bias, c, lsz), MR=mr, NR=nr,
                            HAS_BIAS=bias is not None, ACT=act, PACKED=bool(pack), PACKED_A=pack_a,
                            MB=_row_block(rt, mr, k, grid, c.elem))
    return run


# `matmul_kblocked`'s K and row blocks: 128 K no better on AVX2 sgemm, 512 K slower at
# 1024^3; 96 rows against 192: sgemm 2048 per core 163 -> 175 GFLOP/s on AVX-512, 0.83x ->
# 0.89x NumPy on AVX2, level at 1024
KC, MC = 256, 96
# the K and row blocks of the `akblocked_big` candidates: on a 2-core Zen 4 (32 KB L1, 1 MB
# L2) a row tile's fixed cost (its offsets, zeroing, the read-add-write of C) over 256 K
# steps cost 7-10% at sgemm 2048/4096 (per core under AVX2 96 -> 104 GFLOP/s; two cores at
# 4096 in K blocks of 1024 and rows in blocks of 192: 0.90x -> 0.99x NumPy's Haswell
# kernels, 1.00x -> 1.08x its AVX-512 ones), though the panel of B then leaves L1 and A's
# block fills most of L2; level at 512/1024. Where it pays depends on the caches: a
# candidate of its own, timed beside KC's where A's rows are long or transposed
KC_BIG, MC_BIG = 1024, 192
NP_MAX = 8  # column panels a unit walks per K block (sgemm 2048 per core: 8 panels 6% faster
# than one at 192 rows; 4096: A's rows over K outgrow L2, and one panel a unit read them again
# from L3 for every panel)
C_BLOCK_L2 = 1 / 8  # of the core's L2: a unit's MC x NP tiles of C (partial sums)
MIN_UNITS = 16  # units a launch keeps for the pool to balance (a unit per panel at most)


def row_block(mr: int, mc: int | None = None) -> int:
    """`matmul_kblocked`'s row block for MR-row tiles: mc (default MC) rounded down to whole
    tiles (9-row tiles in 96-row blocks computed rows 96-98 of each block twice, once in
    each cube)."""
    return max(mr, (mc or MC) // mr * mr)


def panels_per_unit(nr: int, lsz: int, m: int, panels: int, batch: int, elem,
                    mc: int = MC) -> int:
    """`matmul_kblocked`'s NP for blocks of mc rows: the largest power of two up to NP_MAX
    whose mc x NP tiles of C fit C_BLOCK_L2 of the core's L2 and which leaves MIN_UNITS
    units."""
    tile = mc * nr * lsz * np.dtype(elem.np).itemsize
    rows = cdiv(m, mc) * batch
    np_ = 1
    while np_ < NP_MAX and 2 * np_ * tile <= l2_bytes() * C_BLOCK_L2 \
            and cdiv(panels, 2 * np_) * rows >= MIN_UNITS:
        np_ *= 2
    return np_


def _run_kblocked(mr: int, nr: int, pack_a: bool = False, big: bool = False):
    """B's panels packed (`pack_b`), A's row panels too with pack_a (`_pack_a`), then
    `matmul_kblocked` in K blocks of KC (KC_BIG with big)."""
    def run(rt, a, b, c, bias, act):
        batch, m, n = c.shape
        lsz = _tiled_line(rt, a, b, c)
        panels = cdiv(n // lsz, nr)
        bp = _pack_lines(rt, b, lsz, nr, panels, c.elem)
        mc = row_block(mr, MC_BIG if big else MC)
        np_ = panels_per_unit(nr, lsz, m, panels, batch, c.elem, mc)
        matmul_kblocked.launch(rt, cube_count=(cdiv(panels, np_), cdiv(m, mc), batch),
                               cube_dim=1, a=_pack_a(rt, a, mr) if pack_a else a, b=bp,
                               c=c.lines(lsz), bias=_bias_lines(bias, c, lsz), MC=mc, MR=mr,
                               NR=nr, KC=KC_BIG if big else KC, NP=np_,
                               HAS_BIAS=bias is not None, ACT=act, PACKED_A=pack_a)
    return run


UNSWAP_ROWS = 16  # rows of C per `unswap` unit: 16 floats of each row of C^T, a cache line


def _run_swapped(mr: int, nr: int):
    """C = A @ B computed as C^T = B^T @ A^T, then transposed: for B stored transposed (K
    contiguous, nn.Linear's weight) and few rows of A (x @ W^T at batch 64). A is packed
    into `pack_b`'s panels along M (M x K values moved where packing B, `tpacked`, moves
    N x K), B^T is read a scalar per row as `matmul_kblocked` reads A, the product's
    transpose goes to a scratch buffer in whole lines, and `unswap` writes C from it with
    the bias and the activation (the transposed store in the tile's epilogue, a lane at a
    time, cost more than this pass: 64x784x512 0.36 ms against 0.28)."""
    def run(rt, a, b, c, bias, act):
        batch, m, n = c.shape
        k = a.shape[2]
        lsz = line_size(rt, c.elem, 1 << 20)
        panels = cdiv(cdiv(m, lsz), nr)
        at = strided(a, (batch, k, m), (a.strides[0], a.strides[2], a.strides[1]))
        bp = _pack_strided(rt, at, nr * lsz).lines(lsz)
        bt = strided(b, (batch, n, k), (b.strides[0], b.strides[2], b.strides[1]))
        ct = rt.empty((batch, n, panels * nr * lsz), c.elem)
        mc = row_block(mr)
        np_ = panels_per_unit(nr, lsz, n, panels, batch, c.elem, mc)
        matmul_kblocked.launch(rt, cube_count=(cdiv(panels, np_), cdiv(n, mc), batch),
                               cube_dim=1, a=bt, b=bp, c=ct.lines(lsz), bias=ct.lines(1),
                               MC=mc, MR=mr, NR=nr, KC=KC, NP=np_, HAS_BIAS=False,
                               ACT="none", PACKED_A=False)
        csz = line_size(rt, c.elem, n)
        if csz == lsz:
            unswap_lines.launch(rt, cube_count=(cdiv(n // lsz, 64), cdiv(m, lsz), batch),
                                cube_dim=(64, 1), src=ct.lines(lsz), c=c.lines(lsz),
                                bias=_bias_lines(bias, c, lsz), HAS_BIAS=bias is not None,
                                ACT=act)
            return
        unswap.launch(rt, cube_count=(cdiv(n // csz, 64), cdiv(m, UNSWAP_ROWS), batch),
                      cube_dim=64, src=ct, c=c.lines(csz), bias=_bias_lines(bias, c, csz),
                      TM=UNSWAP_ROWS, HAS_BIAS=bias is not None, ACT=act)
    return run


def _dot_line(rt, a, b, c) -> int:
    k = a.shape[2]
    if a.strides[2] != 1 or b.strides[1] != 1:
        return 0
    return line_size(rt, a.elem, k, a.strides[0], a.strides[1], b.strides[0], b.strides[2])


def _run_dot(mr: int, nr: int):
    def run(rt, a, b, c, bias, act):
        lsz = _dot_line(rt, a, b, c)
        batch, m, n = c.shape
        bt = strided(b, (b.shape[0], b.shape[2], b.shape[1]),
                     (b.strides[0], b.strides[2], b.strides[1]))
        units = (1, 1) if is_cpu(rt) else (8, 8)
        grid = (cdiv(cdiv(m, mr), units[0]), cdiv(cdiv(n, nr), units[1]), batch)
        matmul_dot.launch(rt, cube_count=grid, cube_dim=units, a=a.lines(lsz),
                          bt=bt.lines(lsz), c=c, bias=bias if bias is not None else c.buffer,
                          MR=mr, NR=nr, HAS_BIAS=bias is not None, ACT=act)
    return run


def _run_shared(t: int):
    def run(rt, a, b, c, bias, act):
        batch, m, n = c.shape
        matmul_shared.launch(rt, cube_count=(cdiv(n, t), cdiv(m, t), batch), cube_dim=(t, t),
                             a=a, b=b, c=c, bias=bias if bias is not None else c.buffer, T=t,
                             HAS_BIAS=bias is not None, ACT=act)
    return run


BLOCK_K = 16  # K steps a blocked cube stages at a time
BLOCK_UNITS = 16  # units along each side of a blocked cube (256 a cube)


def _run_blocked(bt: int):
    """blocked_{bt}: bt x bt tiles of C, bt / BLOCK_UNITS square per unit."""
    tt = bt // BLOCK_UNITS

    def run(rt, a, b, c, bias, act):
        batch, m, n = c.shape
        matmul_blocked.launch(
            rt, cube_count=(cdiv(n, bt), cdiv(m, bt), batch),
            cube_dim=(BLOCK_UNITS, BLOCK_UNITS), a=a, b=b, c=c,
            bias=bias if bias is not None else c.buffer, BM=bt, BN=bt, BK=BLOCK_K, TM=tt,
            TN=tt, A_K=a.strides[2] == 1, B_K=b.strides[2] != 1 and b.strides[1] == 1,
            HAS_BIAS=bias is not None, ACT=act)
    return run


def _blocked_ok(bt: int):
    def ok(rt, a, b, c, bias, act):
        units = BLOCK_UNITS * BLOCK_UNITS
        smem = 2 * BLOCK_K * (bt + 1) * c.buffer.dtype.itemsize
        return units <= rt.features.max_cube_dim and smem <= rt.features.max_shared_bytes
    return ok


# Chunks of K for split_T, measured on an H200 (132 multiprocessors) over 128-1024 cubes and
# 16-512 chunks at most: a 16x9 product over K = 50176 took 0.149 ms in 16 chunks, 0.051 in
# 126, 0.070 in 448 (the sum's serial adds per element then cost more than they save);
# 256x256x8192 took 0.392 in one chunk (shared_16), 0.301 in 4
SPLIT_CUBES = 1024  # cubes a split product aims at: several per multiprocessor
SPLIT_MIN = 4  # tiles of K a chunk takes at least
SPLIT_MAX = 128  # chunks at most


def split_chunks(t: int, batch: int, m: int, n: int, k: int) -> tuple[int, int]:
    """(KC, S): chunks of KC steps (a multiple of t), S of them, so that the tiles times the
    chunks come near SPLIT_CUBES; S is 1 where the tiles fill the GPU or K is short."""
    tiles = cdiv(n, t) * cdiv(m, t) * batch
    s = max(1, min(cdiv(SPLIT_CUBES, tiles), k // (SPLIT_MIN * t), SPLIT_MAX))
    kc = cdiv(cdiv(k, s), t) * t
    return kc, cdiv(k, kc)


def _run_split(t: int):
    def run(rt, a, b, c, bias, act):
        batch, m, n = c.shape
        kc, s = split_chunks(t, batch, m, n, a.shape[2])
        part = rt.empty((batch * s, m, n), c.elem)
        matmul_shared_split.launch(rt, cube_count=(cdiv(n, t), cdiv(m, t), batch * s),
                                   cube_dim=(t, t), a=a, b=b, part=part, T=t, KC=kc, S=s)
        sum_split.launch(rt, cube_count=(cdiv(m * n, 256), batch), cube_dim=(256,), part=part,
                         c=c, bias=bias if bias is not None else c.buffer, S=s,
                         HAS_BIAS=bias is not None, ACT=act)
    return run


def _split_ok(t: int):
    """GPUs only (a CPU core walks K in cache blocks, `kblocked`), where K splits."""
    shared = _shared_ok(t)

    def ok(rt, a, b, c, bias, act):
        return not is_cpu(rt) and shared(rt, a, b, c, bias, act) \
            and split_chunks(t, *c.shape, a.shape[2])[1] > 1
    return ok


def _run_plane(rt, a, b, c, bias, act):
    batch, m, n = c.shape
    planes = max(1, 64 // rt.plane_size)
    matmul_plane.launch(rt, cube_count=(cdiv(m * n, planes), 1, batch),
                        cube_dim=(rt.plane_size, planes), a=a, b=b, c=c,
                        bias=bias if bias is not None else c.buffer, P=rt.plane_size,
                        HAS_BIAS=bias is not None, ACT=act)


def _cpu_first(cpu: int, gpu: int):
    return lambda rt: cpu if is_cpu(rt) else gpu


# ---- register tiles from the target's register file ---------------------------------------

MR_MAX = 12  # rows of a tile: each is a row pointer in a general register (16 on x86-64)
RANKED = 3  # register-file tiles offered to autotune (its `fast` mode times the top three)


def register_tiles(regs: int, line_bytes: int = 64, elem_bytes: int = 4) -> list[tuple[int, int]]:
    """(MR, NR) tiles of C (MR rows x NR lines) that fill a file of `regs` vector registers:
    MR * NR accumulators + NR lines of B + one broadcast A value <= regs, each as tall as
    fits, best first by the bytes each FMA reads (line_bytes / MR of B + elem_bytes / NR of
    A: B's panel and A's rows both stream from L2 at large sizes), then most accumulators.
    It ranks as measured (sgemm 2048, AVX-512: 12x2 > 9x3 > 8x3 > 6x4 > 4x6 > 5x5 GFLOP/s).
    32 registers of 64 bytes: 12x2, 9x3, 6x4, ...; 16 of 32 bytes: 6x2, 4x3, 2x5, ..."""
    tiles = []
    for nr in range(1, 9):
        mr = min((regs - 1 - nr) // nr, MR_MAX)
        if mr >= 2:
            tiles.append((mr, nr))
    # 8+ accumulators where the file holds them (the FMA latency needs 8 independent chains
    # on two FMA ports) and at most one load per FMA (two load ports feed two FMA ports);
    # a small file takes what fits
    tiles = [(m, n) for m, n in tiles if m * n >= 8 and m + n <= m * n] or tiles
    return sorted(tiles, key=lambda t: (line_bytes / t[0] + elem_bytes / t[1], -t[0] * t[1]))


@functools.lru_cache(maxsize=512)  # (shared lists: callers only read them)
def fit_tiles(regs: int, line_bytes: int, m: int, nl: int) -> list[tuple[int, int]]:
    """`register_tiles` ranked for one product of m rows and nl lines of columns: by the
    loads each useful FMA costs. A step of K loads MR broadcasts of A and NR lines of B for
    MR * NR FMAs, and the overhang of the last row tile past m and of the last panel past nl
    computes nothing. `register_tiles`' order (B's bytes first, tall tiles) ranked as
    measured on full-width AVX-512; on a Zen 4 (AVX-512 in two 256-bit halves) the tiles
    this ranks first won, in place of A (tpacked and kblocked, unpacked A):
    1024x2048 @ (256x2048)^T 6x4 209 GFLOP/s, 12x2 186, 5x5 167 (5-line panels overhang 16
    lines by a fifth); sgemm 1024 6x4 213, 12x2 188; AVX2, tpacked at 1024x2048x256: 4x3
    200, 6x2 190. Candidates of both rankings are offered; autotune times both."""
    def cost(t: tuple[int, int]) -> float:
        mr, nr = t
        useful = m / (cdiv(m, mr) * mr) * nl / (cdiv(nl, nr) * nr)
        return (mr + nr) / (mr * nr * useful)
    return sorted(register_tiles(regs, line_bytes), key=lambda t: (cost(t), -t[0] * t[1]))


def dot_tiles(regs: int) -> list[tuple[int, int]]:
    """`register_tiles` for the dot kernels, which read A and B alike as lines along K:
    fewest loads per FMA ((MR + NR) / (MR * NR)) first. 32 registers: 5x5, 6x4, 4x6 (64x512x512
    sped up by 10% over 4x3); 16: 4x3, 6x2 (measured best on AVX2 before)."""
    return sorted(register_tiles(regs), key=lambda t: ((t[0] + t[1]) / (t[0] * t[1]),
                                                       -t[0] * t[1]))


_tiles_memo: dict = {}


def _register_file(rt) -> tuple[int, int]:
    """rt's vector registers and their width in bytes."""
    return registers(rt), (rt.features.vector_bits or 128) // 8


def tiles_for(rt, dot: bool = False) -> list[tuple[int, int]]:
    """The ranked register tiles of rt's register file (comptime MR, NR of its kernels)."""
    regs, line = _register_file(rt)
    hit = _tiles_memo.get((regs, line, dot))
    if hit is None:
        hit = _tiles_memo[regs, line, dot] = dot_tiles(regs) if dot else \
            register_tiles(regs, line)
    return hit


def _tile_runner(pick, pack: str = "", pack_a: bool = False, dot: bool = False):
    """A candidate's run with the tile pick(rt, a, b, c) chooses: `_run_dot`, or the launcher
    of `pack` (`_run_swapped`, `_run_kblocked` with A packed and big blocks as named, else
    `_run_tiled`), one per tile."""
    runs: dict = {}

    def run(rt, a, b, c, bias, act):
        tile = pick(rt, a, b, c)
        fn = runs.get(tile)
        if fn is None:
            fn = runs[tile] = _run_dot(*tile) if dot else \
                _run_swapped(*tile) if pack == "swapped" else \
                _run_kblocked(*tile) if pack == "kblocked" else \
                _run_kblocked(*tile, True) if pack == "akblocked" else \
                _run_kblocked(*tile, True, big=True) if pack == "akblocked_big" else \
                _run_tiled(*tile, pack, pack_a)
        return fn(rt, a, b, c, bias, act)
    return run


def _ranked(rank: int, pack: str = "", pack_a: bool = False, dot: bool = False):
    """`_tile_runner` with the rank-th tile of the runtime's register file."""
    return _tile_runner(lambda rt, a, b, c: tiles_for(rt, dot)[rank], pack, pack_a, dot)


def _fit_line(rt, a, b, c, pack: str) -> int:
    """The line size the `_fitted` family runs with (`_run_tiled`'s and `_run_kblocked`'s)."""
    return line_size(rt, c.elem, c.shape[2]) if pack == "strided" else _tiled_line(rt, a, b, c)


def fitted_tile(rt, a, b, c, rank: int, pack: str) -> tuple[int, int] | None:
    """The rank-th tile of `fit_tiles` for this product, or None where it is the register
    file's first tile (the r0 candidate of the same family runs it already) or past the
    list."""
    nl = c.shape[2] // _fit_line(rt, a, b, c, pack)
    fit = fit_tiles(*_register_file(rt), c.shape[1], nl)
    if rank >= len(fit) or fit[rank] == tiles_for(rt)[0]:
        return None
    return fit[rank]


def _fitted(rank: int, pack: str):
    """`_tile_runner` (pack "strided": B gathered into panels, or "kblocked") with
    `fitted_tile`: a tile chosen for this shape, A read in place."""
    return _tile_runner(lambda rt, a, b, c: fitted_tile(rt, a, b, c, rank, pack), pack)


def _fit_ok(rank: int, pack: str):
    """CPU only (GPU kernels tile for work groups, not a register file), a fitted tile that
    no other candidate of the family runs, and kblocked's contiguous rows of B."""
    def ok(rt, a, b, c, bias, act) -> bool:
        return is_cpu(rt) and (pack != "kblocked" or not _strided_rows(b)) \
            and fitted_tile(rt, a, b, c, rank, pack) is not None
    return ok


def _has_rank(rank: int, dot: bool = False):
    if dot:
        return lambda rt, *args: rank < len(tiles_for(rt, True)) and _dot_ok(rt, *args)
    return lambda rt, *args: rank < len(tiles_for(rt))


def _shared_ok(t: int):
    def ok(rt, a, b, c, bias, act):
        return 2 * t * t * c.buffer.dtype.itemsize <= rt.features.max_shared_bytes \
            and t * t <= rt.features.max_cube_dim
    return ok


def _dot_ok(rt, a, b, c, bias, act) -> bool:
    return _dot_line(rt, a, b, c) > 1


def _strided_rows(x) -> bool:
    """x (batch, rows, cols) has rows that are not contiguous (a transposed operand)."""
    return x.strides[2] != 1 and x.shape[2] > 1


def _b_transposed(rt, a, b, c, bias, act) -> bool:
    """On the CPU, these kernels go first for a K-contiguous B (GPU kernels stage tiles in
    shared memory and read any layout alike)."""
    return is_cpu(rt) and _strided_rows(b)


B_L1_BYTES = 32 * 1024  # a B (per batch) this small stays in L1 (48 KB) as it lies


def _b_small(rt, a, b, c, bias, act) -> bool:
    """On the CPU, the unpacked tiles go first for a B with contiguous rows that fits in L1:
    its rows cannot collide in cache sets, so packing only costs a launch and a pass
    (attention's p @ v, (32,128,128)@(32,128,64): packed 12x2 0.75 ms, plain 6x4 0.50)."""
    return is_cpu(rt) and not _strided_rows(b) \
        and b.shape[1] * b.shape[2] * c.buffer.dtype.itemsize <= B_L1_BYTES


def _few_rows(rt, a, b, c, bias, act) -> bool:
    """On the CPU, B stored transposed and few rows of A: the swapped kernels move A (M x K)
    and C (M x N) once more where `tpacked` moves B (N x K) once (at 1024x256x2048 the
    swapped kernels ran 1.3x tpacked's time)."""
    _, m, n = c.shape
    k = a.shape[2]
    return _b_transposed(rt, a, b, c, bias, act) and m * (k + n) < n * k


def _long_rows(rt, a, b, c, bias, act) -> bool:
    """On the CPU, rows of A (contiguous) a multiple of 4 KB apart: each row of a tile maps
    to the same L1 sets."""
    row = a.strides[1] * c.buffer.dtype.itemsize
    return is_cpu(rt) and a.strides[2] == 1 and row >= 4096 and row % 4096 == 0


def _many_rows(rt, a, b, c, bias, act) -> bool:
    """On the CPU, B stored transposed and rows enough that packing B pays (not
    `_few_rows`): nn.Linear's forward at a large batch."""
    return _b_transposed(rt, a, b, c, bias, act) and not _few_rows(rt, a, b, c, bias, act)


def _a_transposed(rt, a, b, c, bias, act) -> bool:
    """On the CPU, A-packing kernels go first for an A whose rows are not contiguous."""
    return is_cpu(rt) and _strided_rows(a) and not _strided_rows(b)


def _ab_transposed(rt, a, b, c, bias, act) -> bool:
    return is_cpu(rt) and _strided_rows(a) and _strided_rows(b)


MATMUL = Tunable("matmul", [
    # the register file's own tiles (`register_tiles`: AVX-512's 32 registers hold 12x2, 9x3,
    # 6x4 where AVX2's 16 hold 6x2, 4x3, 2x5), B's panels packed first; autotune picks
    # among them per shape bucket
    *(Candidate(f"packed_r{r}", _ranked(r, "lines"), _cpu_first(120 - r, 44 - r),
                _has_rank(r)) for r in range(RANKED)),
    # 6x2: 6 rows x 2 lines of C in 12 vector registers, one B line pair and one broadcast
    # A value per step (4x4 needs 21 of AVX2's 16 and spills). Packing B's panels first
    # keeps a power-of-two row stride (n = 256, 1024) from colliding in the cache sets
    # K in blocks (`matmul_kblocked`): each K block of a B panel stays in L1 over a block of
    # rows (sgemm on AVX2, 6x2 tiles, one core: 512^3 2.87 -> 2.70 ms, 1024^3 23.0 -> 21.5;
    # AVX-512's 12x2 was level at 512), the fast tuning's first
    # (valid on every target, last on the GPUs: `cube check --library` compiles it for them)
    # ... and the tiles `fit_tiles` ranks first for the shape (A read in place: fewest
    # loads per useful FMA), timed before the register file's first
    *(Candidate(f"kblocked_f{r}", _fitted(r, "kblocked"), _cpu_first(123 - r, 0),
                _fit_ok(r, "kblocked")) for r in range(2)),
    Candidate("kblocked_r0", _ranked(0, "kblocked"), _cpu_first(121, 0),
              lambda rt, a, b, c, bias, act: not _strided_rows(b)),
    # ... and A's row panels packed too: rows of A a power-of-two multiple of 4 KB apart
    # share L1's sets (sgemm 2048/4096 per core: 0.85x/0.82x NumPy against 0.82x/0.80x), and
    # a transposed A (a weight gradient g^T @ x) becomes one stream per row tile (per core,
    # torch's ratio at 1024 rows of 256 -> 768 / 256 -> 2048 / 2048 -> 256: 0.94x / 0.93x /
    # 0.86x, against apacked_6x2's 0.81x / 0.82x / 0.65x)
    Candidate("akblocked_r0", _ranked(0, "akblocked"), _cpu_first(92, 0),
              lambda rt, a, b, c, bias, act: not _strided_rows(b),
              prefer=lambda *args: _long_rows(*args) or _a_transposed(*args)),
    # ... in K blocks of KC_BIG (a K of at least 2 * KC: fewer row tiles' fixed costs)
    Candidate("akblocked_big_r0", _ranked(0, "akblocked_big"), _cpu_first(91, 0),
              lambda rt, a, b, c, bias, act: not _strided_rows(b) and a.shape[2] >= 2 * KC,
              prefer=lambda *args: _long_rows(*args) or _a_transposed(*args)),
    # ... and unpacked, for a small B (`_b_small`)
    *(Candidate(f"tiled_r{r}", _ranked(r), _cpu_first(108 - r, 41 - r), _has_rank(r),
                prefer=_b_small) for r in range(RANKED)),
    Candidate("packed_6x2", _run_tiled(6, 2, "lines"), _cpu_first(110, 45)),
    Candidate("tiled_6x2", _run_tiled(6, 2), _cpu_first(105, 60)),
    Candidate("tiled_8x1", _run_tiled(8, 1), _cpu_first(103, 40)),
    Candidate("packed_4x4", _run_tiled(4, 4, "lines"), _cpu_first(100, 45)),
    Candidate("tiled_4x4", _run_tiled(4, 4), _cpu_first(99, 50)),
    # B stored transposed (K contiguous, as nn.Linear's weight): the tiled kernels would read
    # B a scalar at a time (~7 GFLOP/s at 64x784x512). The dot kernels read lines along K
    # (best for few rows: 64x784x512 at 114 GFLOP/s); packing B's panels first feeds the
    # tiled kernel (best for many: 1024x256x768 at 156 GFLOP/s against dot's 80)
    # 4x3: 12 accumulators, 3 B lines and an A line fill AVX2's 16 registers, and 12
    # independent FMA chains hide the FMA latency that 8 only just cover (64x784x512:
    # 0.48 ms against 4x2's 0.59; 64x512x512: 0.35 against 0.44)
    # and the register file's own: dot tiles for few rows, B's panels packed for many
    # (1024x256x2048 on AVX-512: 12x2 packed 2.6x dot 5x5's speed)
    Candidate("dot_r0", _ranked(0, dot=True), _cpu_first(100, 26), _has_rank(0, True),
              prefer=_few_rows),
    # few rows of A: the product's transpose, A packed (`_run_swapped`)
    # (the other ranks after the dot kernels: `fast` times the first rank beside dot_r0 and
    # tpacked_r0)
    *(Candidate(f"swapped_r{r}", _ranked(r, "swapped"), _cpu_first(101 if r == 0 else 90 - r,
                                                                   7 - r),
                _has_rank(r), prefer=_few_rows) for r in range(RANKED)),
    # the second dot tile before tpacked: with few rows `fast` times swapped_r0, dot_r0 and
    # dot_r1 (tpacked lost every few-row tuning by 15-60%, 6x4 beat AVX-512's 5x5 at
    # 64x512x512 by 8%: 245 against 270 us, and was never timed); with many, tpacked_r0
    # is still among the three
    Candidate("dot_r1", _ranked(1, dot=True), _cpu_first(99, 25), _has_rank(1, True),
              prefer=_few_rows),
    # with many rows, `fast` times B packed into the two tiles `fit_tiles` ranks first for
    # the shape and the register file's first (the dot kernels lost every many-row tuning:
    # 1024x2048x256 on a Zen 4, dot_r0 194 GFLOP/s against tpacked 6x4's 209-218; under
    # AVX2 124 against 4x3's 200)
    *(Candidate(f"tpacked_f{r}", _fitted(r, "strided"), _cpu_first(104 - r, 0),
                _fit_ok(r, "strided"), prefer=_many_rows) for r in range(2)),
    Candidate("tpacked_r0", _ranked(0, "strided"), _cpu_first(98, 8), _has_rank(0),
              prefer=_b_transposed),
    Candidate("dot_4x3", _run_dot(4, 3), _cpu_first(97, 27), _dot_ok, prefer=_b_transposed),
    Candidate("dot_4x2", _run_dot(4, 2), _cpu_first(96, 30), _dot_ok, prefer=_b_transposed),
    Candidate("tpacked_6x2", _run_tiled(6, 2, "strided"), _cpu_first(95, 10),
              prefer=_b_transposed),
    Candidate("dot_2x4", _run_dot(2, 4), _cpu_first(94, 28), _dot_ok, prefer=_b_transposed),
    Candidate("dot_4x4", _run_dot(4, 4), _cpu_first(93, 29), _dot_ok),
    Candidate("tpacked_4x4", _run_tiled(4, 4, "strided"), _cpu_first(92, 9)),
    # A stored transposed (a weight gradient gz^T @ x): the tiled kernels would read A's
    # rows a column at a time at a power-of-two stride (2048x1024x256 at 91 GFLOP/s);
    # packing A's row panels first makes every operand one stream (149 GFLOP/s)
    Candidate("apacked_6x2", _run_tiled(6, 2, "lines", True), _cpu_first(91, 8),
              prefer=_a_transposed),
    Candidate("atpacked_6x2", _run_tiled(6, 2, "strided", True), _cpu_first(97, 7),
              prefer=_ab_transposed),
    Candidate("atiled_6x2", _run_tiled(6, 2, "", True), _cpu_first(89, 7),
              prefer=_a_transposed),
    # the GPUs' first three (H200, against cuBLAS: sgemm 4096 blocked_64 13.9 TFLOP/s, 0.28x,
    # shared_16 4.1; 1024 9.7 against 5.0; 512 blocked_32 3.4 against 3.2; 128x128 tiles
    # were slower at every size but one, and are not offered). shared_16 stays among them:
    # few output tiles fill more multiprocessors with its small cubes (64x784 @ 784x512:
    # 0.054 ms against blocked_32's 0.090)
    Candidate("blocked_64", _run_blocked(64), _cpu_first(0, 110), _blocked_ok(64)),
    Candidate("shared_16", _run_shared(16), _cpu_first(20, 108), _shared_ok(16)),
    Candidate("blocked_32", _run_blocked(32), _cpu_first(0, 105), _blocked_ok(32)),
    Candidate("shared_8", _run_shared(8), _cpu_first(10, 90), _shared_ok(8)),
    # few output tiles over a long K (a weight gradient: 16x9 over 64 x 784 pixels took
    # shared_16 1.91 ms on an H200, one cube walking all of K; split_16 0.083)
    Candidate("split_16", _run_split(16), _cpu_first(0, 80), _split_ok(16), prefer=_split_ok(16)),
    # (timed beside split_16 wherever K splits: a 64x1568 @ 1568x10 took it 0.039 ms, split
    # 0.044)
    Candidate("plane", _run_plane, _cpu_first(0, 40),
              lambda rt, *args: rt.features.plane_ops, prefer=_split_ok(16)),
])


def prepare(rt, a, b, out=None, bias=None, act: str = "none"):
    """Validated rank-3 operands (a, b, c, bias, act) for the candidates."""
    if act not in ACTIVATIONS:
        raise ValueError(f"act must be one of {ACTIVATIONS}, got {act!r}")
    a3, b3 = _batch3(a), _batch3(b)
    if a3.elem != b3.elem:
        raise ValueError(f"matmul operands differ in type: {a3.elem} and {b3.elem}")
    if a3.shape[2] != b3.shape[1]:
        raise ValueError(f"matmul shapes do not match: {a3.shape} @ {b3.shape}")
    batch = max(a3.shape[0], b3.shape[0])
    if a3.shape[0] not in (1, batch) or b3.shape[0] not in (1, batch):
        raise ValueError(f"matmul batches do not broadcast: {a3.shape} @ {b3.shape}")
    a3, b3 = _broadcast(a3, batch), _broadcast(b3, batch)
    m, n = a3.shape[1], b3.shape[2]
    squeeze = len(a.buffer.shape) == 2 and len(b.buffer.shape) == 2
    shape = (m, n) if squeeze else (batch, m, n)
    if out is None:
        out = rt.empty(shape, a3.elem)
    elif tuple(out.buffer.shape) != shape or not is_contiguous(out):
        raise ValueError(f"out must be a contiguous {shape} buffer, got {out.buffer.shape}")
    c3 = _batch3(out.buffer)
    if bias is not None and tuple(bias.buffer.shape) != (n,):
        raise ValueError(f"bias must have shape ({n},), got {bias.buffer.shape}")
    return a3, b3, c3, (None if bias is None else bias.buffer), act, out


def matmul(rt, a, b, out=None, *, bias=None, act: str = "none"):
    """act(a @ b + bias); a (..., M, K), b (..., K, N): 2-D or batched 3-D, any strides."""
    a3, b3, c3, bias, act, out = prepare(rt, a, b, out, bias, act)
    batch, m, n = c3.shape
    if m * n * batch == 0:
        return out
    k = a3.shape[2]
    if k == 0:
        fill(rt, out, 0.0)
        if bias is not None or act != "none":
            raise ValueError("an empty K with an epilogue is not supported")
        return out
    layout = (int(a3.strides[2] == 1), int(b3.strides[2] == 1), int(b3.strides[1] == 1))
    key = tune_key("f", c3.elem, [(batch, m, n, k)], (layout, act, bias is not None))
    MATMUL(rt, key, a3, b3, c3, bias, act)
    return out


def reference(a, b, bias=None, act="none"):
    r = np.matmul(a.astype(np.float64), b.astype(np.float64))
    if bias is not None:
        r = r + bias.astype(np.float64)
    return act_ref(r, act)

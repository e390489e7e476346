"""Fused attention: softmax(scale * q @ k^T [causal]) @ v in one kernel, no scores buffer.

Operands are (B, H, L, D) views of any strides (D's stride 1 for k and v) starting at an
element offset of their storage, so the heads that a multi-head layer slices out of its
fused q/k/v projection are read where they lie (no copies). `pack_keys` writes k^T with the
keys contiguous (an L x L square of lines at a time through `transpose_lines`); then a
unit of `attention_rows` owns MR query rows of one (batch, head): it keeps their scores over
all keys in lines (registers, MS rows at a time, where the register file holds a row; else
in blocks of keys, stored to the unit's probabilities), takes each row's softmax (max, exp,
sum: no pass over memory) and accumulates the MR rows' outputs from v's rows, each
probability broadcast lane by lane. The tiles come from the target's register file
(`tiles`). The unfused ops wrote and read the (B, H, Lq, Lk)
scores three times and launched four kernels (q's scaled copy, q @ k^T with its pack,
softmax, p @ v).

`supported` says what it takes (keys and head size in whole lines, at most `max_keys`);
dl's scaled_dot_product_attention falls back to the unfused ops for the rest (and for masks
other than causality, dropout, attention weights out, gradients)."""
from __future__ import annotations

import functools
import typing

import cube as cb
from cube import (
    CUBE_POS_X,
    CUBE_POS_Y,
    CUBE_POS_Z,
    UNIT_POS_X,
    Comptime,
    Line,
    Tensor,
    cube,
    i32,
    u32,
)

from .common import cdiv, is_cpu, line_size, registers
from .rowops import lanes_max, lanes_sum, transpose_lines

F = typing.TypeVar("F")

# a unit's probabilities (MR x keys) live in a local array: on the stack of a CPU thread
# (6 rows x 2048 keys of f64 is 96 KB), in a GPU thread's private memory (kept small there)
MAX_KEYS_CPU, MAX_KEYS_GPU = 2048, 512
MS_MAX = 4  # query rows whose scores a unit keeps at once
DB_MAX = 4  # lines of the head size a unit's outputs hold at once (at most)


@cube(launch=True, unchecked=True, nowrap=True)
def pack_keys(k: Tensor[Line[F]], kt: Tensor[Line[F]], K0: u32):
    """kt (B, H, D, Lk) = k (B, H, Lk, D) transposed, both as lines (k from element K0 of
    its buffer, a whole line). A unit (x: a line of D, y: a block of L keys, z: b * H + h)
    reads L keys' lines, transposes the square in registers and writes L lines of keys."""
    L = cb.comptime(k.line_size())
    h_n = k.shape(1)
    dl = CUBE_POS_X * 64 + UNIT_POS_X
    key0 = CUBE_POS_Y * L
    b = CUBE_POS_Z // h_n
    h = CUBE_POS_Z % h_n
    if dl < k.shape(3) // L:
        rows = cb.LocalArray(Line[F, L], L)
        src = (K0 + b * k.stride(0) + h * k.stride(1) + key0 * k.stride(2)) // L + dl
        for i in cb.range(L, unroll=True):
            rows[i] = k[src + i * (k.stride(2) // L)]
        transpose_lines(rows, L)
        dst = (b * kt.stride(0) + h * kt.stride(1) + dl * L * kt.stride(2) + key0) // L
        for r in cb.range(L, unroll=True):
            kt[dst + r * (kt.stride(2) // L)] = rows[r]


@cube
def softmax_lines(src, at, dst, to, last, n, L: Comptime[int], CAUSAL: Comptime[bool],
                  UNROLL: Comptime[bool]):
    """A row's first n lines (of L lanes) of scores src[at:] -> their exponentials less
    the row's max in dst[to:] (src and dst may be one array); returns 1 / their sum. n >= 1:
    a comptime count with UNROLL (the scores in registers), else an i32 (a loop). CAUSAL:
    lanes past key `last` count as -inf."""
    if CAUSAL:  # a compare and a select per line (lane by lane: L inserts a line)
        idx = Line[i32, L](0)
        for lane in cb.range(L, unroll=True):
            idx[lane] = i32(lane)
        for j in cb.range(n, unroll=UNROLL):
            src[at + j] = cb.select(idx > Line[i32, L](last - j * L), -float("inf"),
                                    src[at + j])
    mv = src[at]
    for j in cb.range(1, n, unroll=UNROLL):
        mv = max(mv, src[at + j])
    m = lanes_max(mv, L)
    sv = cb.exp(src[at] - m)
    dst[to] = sv
    for j in cb.range(1, n, unroll=UNROLL):
        e = cb.exp(src[at + j] - m)
        sv += e
        dst[to + j] = e
    return 1.0 / lanes_sum(sv, L)


@cube(launch=True, unchecked=True, nowrap=True)
def attention_rows(q: Tensor[F], kt: Tensor[Line[F]], v: Tensor[Line[F]],
                   out: Tensor[Line[F]], scale: F, Q0: u32, V0: u32, MS: Comptime[int],
                   G: Comptime[int], LK: Comptime[int], DL: Comptime[int],
                   DB: Comptime[int], SB: Comptime[int], CAUSAL: Comptime[bool]):
    """q (B, H, Lq, D) of any strides from element Q0; kt (B, H, D, LK) from `pack_keys`;
    v (B, H, LK, D) from element V0 and out (B, H, Lq, D), both as lines along D (DL
    lines, in blocks of DB). Cube x: MR = G * MS query rows, y: the head, z: the batch.
    The scores go MS rows at a time, SB lines of keys at a time (SB = LK/L: a row's scores
    stay in registers through its softmax; fewer: each block of MS x SB lines is stored
    to the probabilities and the softmax reads them back), the outputs all MR rows at once
    (each line of v serves MR rows). CAUSAL: query i sees keys j <= i, PyTorch's top-left
    alignment (`torch.ones(Lq, Lk).tril()`) at any Lq and Lk."""
    L = cb.comptime(kt.line_size())
    KL = cb.comptime(LK // L)
    MR = cb.comptime(G * MS)
    lq = q.shape(2)
    d = q.shape(3)
    h = CUBE_POS_Y
    b = CUBE_POS_Z
    row0 = CUBE_POS_X * MR
    if row0 < lq:
        # p keeps each row's probabilities as lines, broadcast lane by lane below (a scalar
        # copy of each cost a lane extract and a store)
        p = cb.LocalArray(Line[F, L], MR * KL)
        inv = cb.LocalArray(F, MR)
        s = cb.LocalArray(Line[F, L], MS * SB)
        qo = cb.LocalArray(u32, MS)
        qv = cb.LocalArray(Line[F, L], MS)
        qb = Q0 + b * q.stride(0) + h * q.stride(1)
        kb = (b * kt.stride(0) + h * kt.stride(1)) // L
        # lines of keys some row of the tile sees: causal tiles skip the lines past their
        # last row's last key in the products (blocked scores), the softmax and the outputs'
        # pass over v (half the work of a causal sequence)
        kend = u32(KL)
        if CAUSAL:  # the tile's last row sees keys 0 .. min(row0 + MR, lq) - 1: one at least
            kend = min(kend, (min(row0 + MR, lq) + L - 1) // L)
        for g in cb.range(G, unroll=True):
            for i in cb.range(MS, unroll=True):
                qo[i] = qb + min(row0 + g * MS + i, lq - 1) * q.stride(2)
            for j0 in range(0, kend, SB):
                for t in cb.range(MS * SB, unroll=True):
                    s[t] = Line[F, L](0)
                ko = kb + j0
                for dd in range(d):
                    for i in cb.range(MS, unroll=True):
                        qv[i] = Line[F, L](q[qo[i] + dd * q.stride(3)] * scale)
                    for j in cb.range(SB, unroll=True):  # each line of k^T loaded once
                        kv = kt[ko + j]
                        for i in cb.range(MS, unroll=True):
                            s[i * SB + j] = cb.fma(qv[i], kv, s[i * SB + j])
                    ko += kt.stride(2) // L
                if SB < KL:
                    for i in cb.range(MS, unroll=True):
                        for j in cb.range(SB, unroll=True):
                            p[(g * MS + i) * KL + j0 + j] = s[i * SB + j]
            for i in cb.range(MS, unroll=True):  # each row's softmax
                r = g * MS + i
                last = i32(row0) + i32(r)
                if SB == KL:  # where it lies, every line (unrolled: in registers)
                    inv[r] = softmax_lines(s, i * KL, p, r * KL, last, KL, L, CAUSAL, True)
                else:  # the lines some row of the tile sees (the rest unwritten, unread)
                    inv[r] = softmax_lines(p, r * KL, p, r * KL, last, i32(kend), L, CAUSAL,
                                           False)
        acc = cb.LocalArray(Line[F, L], MR * DB)
        vl = cb.LocalArray(Line[F, L], DB)
        vs = v.stride(2) // L
        for dq in range(0, DL, DB):  # D in blocks of DB lines: the rows' outputs in registers
            for a in cb.range(MR * DB, unroll=True):
                acc[a] = Line[F, L](0)
            vo = (V0 + b * v.stride(0) + h * v.stride(1)) // L + dq
            for kl in range(kend):
                for lane in cb.range(L, unroll=True):  # key kl * L + lane: its v row once
                    for c in cb.range(DB, unroll=True):
                        vl[c] = v[vo + lane * vs + c]
                    for ri in cb.range(MR, unroll=True):
                        pv = Line[F, L](p[ri * KL + kl][lane])
                        for c in cb.range(DB, unroll=True):
                            acc[ri * DB + c] = cb.fma(pv, vl[c], acc[ri * DB + c])
                vo += L * vs
            ob = (b * out.stride(0) + h * out.stride(1)) // L + dq
            for ri in cb.range(MR, unroll=True):
                if row0 + ri < lq:
                    oo = ob + (row0 + ri) * (out.stride(2) // L)
                    for c in cb.range(DB, unroll=True):
                        out[oo + c] = acc[ri * DB + c] * inv[ri]


def max_keys(rt) -> int:
    return MAX_KEYS_CPU if is_cpu(rt) else MAX_KEYS_GPU


def supported(rt, q, k, v, offsets=(0, 0, 0)) -> bool:
    """(B, H, L, D) views q, k, v (k, v: Lk keys) this kernel takes: D and Lk in whole lines
    of the runtime's width, Lk at most `max_keys`, D in blocks of DB_MAX lines (or fewer), k
    and v read as lines along D (unit stride, other strides and their offsets in lines)."""
    lsz = line_size(rt, q.elem, 1 << 20)
    b, h, lk, d = k.shape
    if lsz < 2 or d % lsz or lk % lsz or lk > max_keys(rt) or q.shape[3] != d \
            or tuple(v.shape) != (b, h, lk, d) or (d // lsz > DB_MAX and d // lsz % DB_MAX):
        return False
    return all(x.strides[3] == 1 and all(s % lsz == 0 for s in x.strides[:3]) and o % lsz == 0
               for x, o in ((k, offsets[1]), (v, offsets[2])))


def out_strides(b: int, h: int, lq: int, d: int, heads_last: bool) -> tuple:
    """The strides of `attention`'s (B, H, Lq, D) result in its buffer."""
    return (lq * h * d, d, h * d, 1) if heads_last else (h * lq * d, lq * d, d, 1)


def attention(rt, q, k, v, q0: int, k0: int, v0: int, scale: float, causal: bool,
              heads_last: bool = False):
    """softmax(scale * q @ k^T) @ v (causal: query i sees keys 0 .. i, as PyTorch) for the
    (B, H, Lq, D) view q from element q0 of its buffer and (B, H, Lk, D) views k, v from
    k0, v0 (`supported`): a new (B, H, Lq, D) buffer, or with heads_last a new (B, Lq, H, D)
    one (what a multi-head layer's output projection reads as (B, Lq, H * D) rows)."""
    b, h, lq, d = q.shape
    lk = k.shape[2]
    lsz = line_size(rt, q.elem, 1 << 20)
    kt = rt.empty((b, h, d, lk), q.elem)  # k^T, the keys contiguous
    pack_keys.launch(rt, cube_count=(cdiv(d // lsz, 64), lk // lsz, b * h), cube_dim=(64, 1),
                     k=k.lines(lsz), kt=kt.lines(lsz), K0=k0)
    buf = rt.empty((b, lq, h, d) if heads_last else (b, h, lq, d), q.elem)
    out = buf.view((b, h, lq, d), out_strides(b, h, lq, d, True)) if heads_last else buf
    dl = d // lsz
    ms, sb, g, db = tiles(registers(rt), lk // lsz, dl)
    attention_rows.launch(rt, cube_count=(cdiv(lq, ms * g), h, b), cube_dim=1, q=q,
                          kt=kt.lines(lsz), v=v.lines(lsz), out=out.lines(lsz),
                          scale=float(scale), Q0=q0, V0=v0, MS=ms, G=g, LK=lk, DL=dl, DB=db,
                          SB=sb, CAUSAL=causal)
    return buf


@functools.cache  # a search over blocks: once per shape, not per call
def tiles(regs: int, kl: int, dl: int) -> tuple[int, int, int, int]:
    """`attention_rows`' (MS, SB, G, DB) for kl lines of keys and dl lines of the head size
    in a file of regs vector registers. Scores: MS rows x SB lines of accumulators beside
    MS broadcast queries and a line of k^T; a row's whole kl lines (SB = kl, its softmax in
    registers) where they fit, else the block with the most accumulators (then the fewest
    loads per FMA). Outputs: MR = G * MS rows x DB lines beside DB lines of v and a
    broadcast probability. AVX-512's 32 registers: MS 3 x SB 8 at 128 keys, 6 x 4 outputs
    (as tuned there); AVX2's 16: 2 x 4 score blocks, 6 x 2 outputs (6 x 4 outputs spilled:
    sdpa (8,4,128,64) 3.6 -> 2.3 ms on two Zen 3 cores; the score blocks measured level
    with a row's 16 lines spilled, within this machine's noise)."""
    free = regs - 1  # one spare: a full file spilled
    ms = min(MS_MAX, (free - 1) // (kl + 1))
    sb = kl
    if ms < 1:
        ms, sb = max(((m, b) for m in range(1, MS_MAX + 1) for b in range(1, kl + 1)
                      if kl % b == 0 and m * b + m + 1 <= free),
                     key=lambda t: (t[0] * t[1], -t[0] - t[1], t[1]))
    db = max(b for b in range(1, min(dl, DB_MAX, max(1, regs // 8)) + 1) if dl % b == 0)
    g = max(1, (free - db) // db // ms)
    return ms, sb, g, db

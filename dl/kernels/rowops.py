"""Helpers for row-wise kernels: combining the lanes of a line, transposing a square of
lines, and a shared-memory tree."""
import cube as cb
from cube import UNIT_POS, Comptime, cube, u32


@cube
def lanes_tree(v, L: Comptime[int], IS_MAX: Comptime[bool]):
    """The max (NaN if any lane is NaN) or the sum of v's L lanes as a halving tree: lane i
    meets lane i + L/2, then i + L/4, ... (a shuffle reduction's order; an odd count keeps
    its middle lane for the next level). log2(L) dependent steps where a chain of L - 1
    kept a 128-wide softmax row waiting ~150 cycles per row; the order every target and the
    interpreter share."""
    w = v
    n = cb.comptime(L)
    for _ in cb.range(cb.comptime((L - 1).bit_length()), unroll=True):
        h = n // 2
        for i in cb.range(h, unroll=True):
            if IS_MAX:
                w[i] = max(w[i], w[i + n - h])
            else:
                w[i] = w[i] + w[i + n - h]
        n = n - h
    return w[0]


@cube
def transpose_lines(rows, L: Comptime[int]):
    """Transposes rows, a local array of L lines of L lanes (L a power of two), in place:
    log2(L) stages, stage s swapping lanes l + s of row i and l of row i + s (i and l
    without bit s): each new line takes its lanes from two lines, which LLVM makes one
    shuffle (vshufps, vpermt2pd...: 16 x 16 floats in ~64 shuffles, where a scalar
    transpose moves each of the 256 values through a register)."""
    s = cb.comptime(1)
    for _ in cb.range(cb.comptime((L - 1).bit_length()), unroll=True):
        for i in cb.range(L, unroll=True):
            if i & s == 0:
                a = rows[i]
                b = rows[i + s]
                na = a
                nb = b
                for lane in cb.range(L, unroll=True):
                    if lane & s == 0:
                        nb[lane] = a[lane + s]
                    else:
                        na[lane] = b[lane - s]
                rows[i] = na
                rows[i + s] = nb
        s = s * 2


@cube
def lanes_max(v, L: Comptime[int]):
    if L == 1:
        return v
    else:
        return lanes_tree(v, L, True)


@cube
def lanes_sum(v, L: Comptime[int]):
    if L == 1:
        return v
    else:
        return lanes_tree(v, L, False)


@cube
def lanes_sums(v, BASE: Comptime[int], G: Comptime[int], L: Comptime[int]):
    """The sums of lines v[BASE], ..., v[BASE + G - 1] (a local array; G a power of two up
    to L) in one line: lane j holds v[BASE + j]'s sum, each added in `lanes_tree`'s order
    (the same bits). Each level folds two lines into one: its lower half takes the lower
    and upper halves of the first line's blocks, its upper half the second's, and one add
    halves every block (two two-line shuffles and an add); a lone line folds with itself.
    16 lines of 16: 15 folds, ~45 vector ops, where a tree per line takes 16 x 8 and 16
    extractions (the dot matmul's epilogue was a quarter of 64x512x512). v is overwritten."""
    n = cb.comptime(G)
    w = cb.comptime(L)
    half = cb.comptime(L // 2)
    for _ in cb.range(cb.comptime((L - 1).bit_length()), unroll=True):
        h = w // 2
        for p in cb.range(cb.comptime(max(n // 2, 1)), unroll=True):
            x = v[BASE + 2 * p]
            y = x
            if n > 1:
                y = v[BASE + 2 * p + 1]
            lo = x
            hi = x
            for lane in cb.range(L, unroll=True):
                r = lane % half
                src = r // h * w + r % h
                if lane < half:
                    lo[lane] = x[src]
                    hi[lane] = x[src + h]
                else:
                    lo[lane] = y[src]
                    hi[lane] = y[src + h]
            v[BASE + p] = lo + hi
        n = max(n // 2, 1)
        w = h
    return v[BASE]


@cube
def block_reduce(smem, value, BLOCK: Comptime[int], IS_MAX: Comptime[bool]):
    """Reduce `value` over the BLOCK units of the cube; every unit gets the result."""
    t = UNIT_POS
    smem[t] = value
    cb.sync_cube()
    s = u32(BLOCK // 2)
    while s > 0:
        if t < s:
            if IS_MAX:
                smem[t] = max(smem[t], smem[t + s])
            else:
                smem[t] = smem[t] + smem[t + s]
        cb.sync_cube()
        s = s // 2
    result = smem[0]
    cb.sync_cube()
    return result

"""Helpers for row-wise kernels: combining the lanes of a line and a shared-memory tree."""
import cube as cb
from cube import UNIT_POS, Comptime, cube, u32


@cube
def lanes_max(v, L: Comptime[int]):
    """The largest lane of v (NaN if any lane is NaN) as a halving tree: lane i meets lane
    i + L/2, then i + L/4, ... (a shuffle reduction's order): log2(L) dependent steps where
    a chain of L - 1 kept a 128-wide softmax row waiting ~150 cycles per row."""
    if L == 1:
        return v
    else:
        w = v
        h = cb.comptime(L // 2)
        for _ in cb.range(cb.comptime(L.bit_length() - 1), unroll=True):
            for i in cb.range(h, unroll=True):
                w[i] = max(w[i], w[i + h])
            h = h // 2
        return w[0]


@cube
def lanes_sum(v, L: Comptime[int]):
    """The sum of v's lanes in `lanes_max`'s halving tree (the order every target and the
    interpreter share; log2(L) dependent adds instead of L - 1). L is a power of two."""
    if L == 1:
        return v
    else:
        w = v
        h = cb.comptime(L // 2)
        for _ in cb.range(cb.comptime(L.bit_length() - 1), unroll=True):
            for i in cb.range(h, unroll=True):
                w[i] = w[i] + w[i + h]
            h = h // 2
        return w[0]


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

"""Helpers for row-wise kernels: combining the lanes of a line and a shared-memory tree."""
import cube as cb
from cube import UNIT_POS, Comptime, cube, u32


@cube
def lanes_max(v, L: Comptime[int]):
    if L == 1:
        return v
    else:
        r = v[0]
        for q in cb.range(1, L, unroll=True):
            r = max(r, v[q])
        return r


@cube
def lanes_sum(v, L: Comptime[int]):
    if L == 1:
        return v
    else:
        r = v[0]
        for q in cb.range(1, L, unroll=True):
            r += v[q]
        return r


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

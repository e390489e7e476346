"""Scatter-style kernels: scatter/scatter_add along a dim, take/put through element offsets
(advanced indexing, index_put, index_add), flip/roll, tril/triu and nonzero.

Tensors come in as `Tensor` params (the whole storage with the view's shape and strides) plus
the view's offset, as in tensor_index.py. Writes with repeated targets are deterministic
without atomics (which WGSL lacks for floats): the first unit of a group of equal targets
(the "owner") sums the whole group in index order and writes once; the others do nothing.
That costs a loop over the index row per unit; for long index rows the indices are sorted
first (a stable sort) and each run of equal targets is summed by its first unit (the
`sorted_*` kernels). Either way the sums match a sequential loop bit for bit."""
from __future__ import annotations

from typing import TypeVar

import cube as cb
from cube import ABSOLUTE_POS, Array, Comptime, Tensor, cube, i32, u32

F = TypeVar("F")
I = TypeVar("I")  # noqa: E741 - the index type variable
B = TypeVar("B")  # a mask's (bool) element type
P = TypeVar("P")  # a permutation's (sort indices') type

SET, ADD, MUL, OR, AND = 0, 1, 2, 3, 4  # scatter modes (OR/AND: bool add/multiply)


@cube(launch=True)
def scatter_kernel(x: Tensor[F], x_off: u32, idx: Tensor[I], idx_off: u32, src: Tensor[F],
                   src_off: u32, n: u32, dim: Comptime[int], mode: Comptime[int]):
    """x (in place) along dim at idx <- src (mode SET), += src (ADD), *= src (MUL), |= src
    (OR) or &= src (AND, bools); one unit per index element (n = idx.numel(), idx's shape
    drives the coordinates)."""
    i = ABSOLUTE_POS
    if i < n:
        rem = i
        xb = x_off
        ip = idx_off
        sp = src_off
        j = u32(0)
        for d in cb.range(idx.rank() - 1, -1, -1, unroll=True):
            c = rem % idx.shape(d)
            rem = rem // idx.shape(d)
            ip += c * idx.stride(d)
            sp += c * src.stride(d)
            if d == dim:
                j = c
            else:
                xb += c * x.stride(d)
        v = idx[ip]
        if v < I(0):
            v += I(x.shape(dim))
        t = xb + u32(v) * x.stride(dim)
        if mode == 0:
            x[t] = src[sp]
        elif mode == 3:
            if src[sp]:
                x[t] = src[sp]  # every writer writes true
        elif mode == 4:
            if not src[sp]:
                x[t] = src[sp]  # every writer writes false
        else:
            istep = idx.stride(dim)
            sstep = src.stride(dim)
            row = ip - j * istep
            srow = sp - j * sstep
            owner = True
            for k in range(0, j):
                w = idx[row + k * istep]
                if w < I(0):
                    w += I(x.shape(dim))
                if w == v:
                    owner = False
            if owner:
                acc = src[sp]
                for k in range(j + 1, idx.shape(dim)):
                    w = idx[row + k * istep]
                    if w < I(0):
                        w += I(x.shape(dim))
                    if w == v:
                        if mode == 1:
                            acc += src[srow + k * sstep]
                        else:
                            acc *= src[srow + k * sstep]
                if mode == 1:
                    x[t] = x[t] + acc
                else:
                    x[t] = x[t] * acc


@cube(launch=True)
def take_kernel(x: Tensor[F], x_off: u32, off: Array[I], out: Tensor[F], n: u32,
                dim: Comptime[int]):
    """out (contiguous, shape (pre, K, post)) = x at x_off + off[k] plus the pre/post
    coordinates times x's strides (x's shape/strides given as out's, dim's stride unused)."""
    i = ABSOLUTE_POS
    if i < n:
        rem = i
        src = x_off
        for d in cb.range(out.rank() - 1, -1, -1, unroll=True):
            c = rem % out.shape(d)
            rem = rem // out.shape(d)
            if d == dim:
                src += u32(off[c])
            else:
                src += c * x.stride(d)
        out[i] = x[src]


@cube(launch=True)
def put_kernel(x: Tensor[F], x_off: u32, off: Array[I], v: Tensor[F], v_off: u32, n: u32,
               dim: Comptime[int], mode: Comptime[int]):
    """The inverse of take_kernel, in place on x: one unit per element of v (shape (pre, K,
    post), strided, may broadcast). mode 0: x <- v (repeated targets: any one wins); 1: x +=
    v with unique targets; 2: x += v with repeated targets summed in order by an owner; 3:
    x |= v (bools)."""
    i = ABSOLUTE_POS
    if i < n:
        rem = i
        t = x_off
        vp = v_off
        j = u32(0)
        for d in cb.range(v.rank() - 1, -1, -1, unroll=True):
            c = rem % v.shape(d)
            rem = rem // v.shape(d)
            vp += c * v.stride(d)
            if d == dim:
                j = c
                t += u32(off[c])
            else:
                t += c * x.stride(d)
        if mode == 0:
            x[t] = v[vp]
        elif mode == 3:
            if v[vp]:
                x[t] = v[vp]  # bool accumulate: every writer writes true
        elif mode == 1:
            x[t] = x[t] + v[vp]
        else:
            mine = off[j]
            owner = True
            for k in range(0, j):
                if off[k] == mine:
                    owner = False
            if owner:
                acc = v[vp]
                vstep = v.stride(dim)
                vrow = vp - j * vstep
                for k in range(j + 1, v.shape(dim)):
                    if off[k] == mine:
                        acc += v[vrow + k * vstep]
                x[t] = x[t] + acc


@cube(launch=True)
def remap_kernel(x: Tensor[F], x_off: u32, sh: Array[u32], out: Tensor[F], n: u32,
                 flips: Comptime[int]):
    """out (contiguous) = x with each coordinate c read from (c + sh[d]) % size, reversed
    where bit d of flips is set (flip and roll)."""
    i = ABSOLUTE_POS
    if i < n:
        rem = i
        src = x_off
        for d in cb.range(out.rank() - 1, -1, -1, unroll=True):
            size = out.shape(d)
            c = rem % size
            rem = rem // size
            c = (c + sh[d]) % size
            if cb.comptime((flips >> d) & 1 == 1):
                c = size - 1 - c
            src += c * x.stride(d)
        out[i] = x[src]


@cube(launch=True)
def tri_kernel(x: Tensor[F], x_off: u32, out: Tensor[F], n: u32, k: i32,
               lower: Comptime[bool]):
    """out (contiguous) = x where column - row <= k (lower) or >= k (upper), else 0."""
    i = ABSOLUTE_POS
    if i < n:
        rem = i
        src = x_off
        r = i32(0)
        col = i32(0)
        for d in cb.range(out.rank() - 1, -1, -1, unroll=True):
            c = rem % out.shape(d)
            rem = rem // out.shape(d)
            if d == out.rank() - 1:
                col = i32(c)
            if d == out.rank() - 2:
                r = i32(c)
            src += c * x.stride(d)
        keep = col - r >= k
        if lower:
            keep = col - r <= k
        if keep:
            out[i] = x[src]
        else:
            out[i] = F(u32(0))


@cube(launch=True)
def count_kernel(m: Tensor[B], m_off: u32, counts: Array[u32], chunk: u32, n: u32,
                 chunks: u32):
    """counts[c] = the number of true entries among m's elements c*chunk .. (c+1)*chunk - 1
    (row-major positions of m's view)."""
    ci = ABSOLUTE_POS
    if ci < chunks:
        acc = u32(0)
        start = ci * chunk
        stop = min(start + chunk, n)
        for p in range(start, stop):
            rem = p
            src = m_off
            for d in cb.range(m.rank() - 1, -1, -1, unroll=True):
                c = rem % m.shape(d)
                rem = rem // m.shape(d)
                src += c * m.stride(d)
            if m[src]:
                acc += u32(1)
        counts[ci] = acc


@cube(launch=True)
def scan_kernel(counts: Array[u32], starts: Array[u32], chunks: u32):
    """starts[c] = counts[0] + ... + counts[c-1]; starts[chunks] = the total (one unit)."""
    if ABSOLUTE_POS == 0:
        acc = u32(0)
        for c in range(0, chunks):
            starts[c] = acc
            acc += counts[c]
        starts[chunks] = acc


@cube(launch=True)
def nonzero_kernel(m: Tensor[B], m_off: u32, starts: Array[u32], out: Array[I],
                   chunk: u32, n: u32, chunks: u32):
    """out (K, rank) row k = the coordinates of the k-th true entry of m (row-major)."""
    ci = ABSOLUTE_POS
    if ci < chunks:
        k = starts[ci]
        start = ci * chunk
        stop = min(start + chunk, n)
        for p in range(start, stop):
            rem = p
            src = m_off
            for d in cb.range(m.rank() - 1, -1, -1, unroll=True):
                c = rem % m.shape(d)
                rem = rem // m.shape(d)
                src += c * m.stride(d)
            if m[src]:
                rem = p
                for d in cb.range(m.rank() - 1, -1, -1, unroll=True):
                    out[k * u32(m.rank()) + u32(d)] = I(rem % m.shape(d))
                    rem = rem // m.shape(d)
                k += u32(1)


@cube(launch=True)
def bounds_kernel(idx: Tensor[I], idx_off: u32, lo: I, size: I, flag: Array[u32],
                  bad: Array[I], n: u32):
    """flag[0] = 1 and bad[0] = an entry of idx outside [lo, size), if any (every writer
    writes the same flag; any one offender's value lands in bad)."""
    i = ABSOLUTE_POS
    if i < n:
        rem = i
        p = idx_off
        for d in cb.range(idx.rank() - 1, -1, -1, unroll=True):
            c = rem % idx.shape(d)
            rem = rem // idx.shape(d)
            p += c * idx.stride(d)
        v = idx[p]
        if v >= size or v < lo:
            flag[0] = u32(1)
            bad[0] = v


@cube(launch=True)
def sorted_put_kernel(x: Tensor[F], x_off: u32, soff: Array[I], perm: Array[P], v: Tensor[F],
                      v_off: u32, n: u32, dim: Comptime[int]):
    """put_kernel's accumulation for long indices: x += v at the offsets, given sorted
    (stably) as soff with perm (soff[k] = off[perm[k]]). The first unit of each run of equal
    offsets sums the run's values, in index order, and adds once: O(K) work, not O(K^2)."""
    i = ABSOLUTE_POS
    if i < n:
        rem = i
        t = x_off
        vb = v_off
        j = u32(0)
        for d in cb.range(v.rank() - 1, -1, -1, unroll=True):
            c = rem % v.shape(d)
            rem = rem // v.shape(d)
            if d == dim:
                j = c
            else:
                vb += c * v.stride(d)
                t += c * x.stride(d)
        mine = soff[j]
        first = True
        if j > u32(0):
            if soff[j - u32(1)] == mine:
                first = False
        if first:
            vstep = v.stride(dim)
            acc = v[vb + u32(perm[j]) * vstep]
            for k in range(j + 1, v.shape(dim)):
                if soff[k] != mine:
                    break
                acc += v[vb + u32(perm[k]) * vstep]
            t += u32(mine)
            x[t] = x[t] + acc


@cube(launch=True)
def scatter_sorted_kernel(x: Tensor[F], x_off: u32, sidx: Tensor[I], perm: Tensor[P],
                          src: Tensor[F], src_off: u32, n: u32, dim: Comptime[int],
                          mode: Comptime[int]):
    """scatter_kernel's ADD/MUL for long index rows: sidx is the index sorted (stably) along
    dim and perm the positions it came from (both contiguous, the index's shape); the first
    unit of each run of equal indices in a row combines the run's src values in index order."""
    i = ABSOLUTE_POS
    if i < n:
        rem = i
        xb = x_off
        sb = src_off
        j = u32(0)
        for d in cb.range(sidx.rank() - 1, -1, -1, unroll=True):
            c = rem % sidx.shape(d)
            rem = rem // sidx.shape(d)
            if d == dim:
                j = c
            else:
                xb += c * x.stride(d)
                sb += c * src.stride(d)
        v = sidx[i]
        step = sidx.stride(dim)
        first = True
        if j > u32(0):
            if sidx[i - step] == v:
                first = False
        if first:
            sstep = src.stride(dim)
            acc = src[sb + u32(perm[i]) * sstep]
            q = i
            for _k in range(j + 1, sidx.shape(dim)):
                q += step
                if sidx[q] != v:
                    break
                if mode == 1:
                    acc += src[sb + u32(perm[q]) * sstep]
                else:
                    acc *= src[sb + u32(perm[q]) * sstep]
            t = xb + u32(v) * x.stride(dim)
            if mode == 1:
                x[t] = x[t] + acc
            else:
                x[t] = x[t] * acc

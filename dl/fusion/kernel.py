"""Builds one fused elementwise kernel from a graph with the cube_ir builder.

The kernel has one unit per element of the graph's shape. Operands that are contiguous with
the graph's shape are read at `offset + i`; any other view (broadcast: stride 0, permuted,
sliced) is read at `offset + sum(coord[d] * stride[d])`, the coordinates decomposed from `i`
once per kernel. Which of the two each operand uses is part of the structure key, its strides
and offsets are launch arguments, so one kernel serves every shape of that rank.

Line mode (`Structure.lanes` > 1, see `build_lines`): each unit computes one line of L
elements with the same builder calls on line types, as a hand-written `Array[Line[f32]]`
kernel does; the CPU then runs the graph's math in SIMD registers of the host's width."""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

from cube_ir import ir
from cube_ir.builder import Builder
from cube_ir.types import f32, f64, u32, vec

from .emit_ops import EMITTERS


@dataclass(frozen=True)
class Structure:
    """The cache key of a fused kernel: no shapes, no values."""

    rank: int
    nodes: tuple  # (op, dtype, in_types, attrs, refs) in topological order
    leaves: tuple  # (dtype, contiguous)
    consts: tuple  # dtype of each scalar argument
    outs: tuple  # (node position, dtype, contiguous)
    # 0: one unit per element along x; 1: x over the last dim, y/z over the rows (see
    # build); 2: the same for rank 3 with y = dim 1 and z = dim 0, so no unit divides
    rows: int = 0
    # rows mode: leaves constant along the last dim (stride 0), read once per row: the load
    # does not depend on the column, so the unit loop vectorises around a broadcast value
    row_leaves: tuple = ()
    # line mode: lanes per unit (1: one element per unit); line_leaves: how each leaf is read
    # there, "c" a contiguous line, "r" a line of a row repeated over the leading dims (a
    # bias: the line at i % row_lines), "w" one element per row (element i / row_lines: a
    # (rows, 1) operand), "p" one element per row repeating every `period` rows (element
    # (i / row_lines) % period: a (1, C, 1, 1) operand), "s" one element; "w", "p" and "s"
    # broadcast to every lane; "g" a line
    # of a row gathered from anywhere (the row's coordinates over the graph's `rank` dims
    # times the leaf's strides in lines, plus the line's place in the row)
    lanes: int = 1
    line_leaves: tuple = ()
    # every unit of the launch is in range (the grid tiles the shape exactly): no bounds
    # test, so the CPU's unit loop vectorises without masked loads and stores (slow
    # on some x86 cores: 4x the plain loop's time on AMD EPYC)
    exact: bool = False


class _Ctx:
    def __init__(self, b: Builder, i, out_param, row=None, col=None):
        self.b, self.i, self._out = b, i, out_param
        self.row, self.col = row, col  # rows mode: i = row * last_dim + col
        self.y = None  # rows mode 2: the unit's index along dim 1
        self.coords: list | None = None  # i's coordinates, where the kernel knows them
        self._shape: dict[int, object] = {}
        self.lanes = 1  # line mode: i is the line's index, its elements i*L .. i*L + L-1
        self._elem_index = None

    def elem_index(self):
        """The index of each element the unit computes: i, or in line mode the line of
        indices i*L + (0, 1, .., L-1) (generators read it)."""
        if self.lanes == 1:
            return self.i
        if self._elem_index is None:
            b, L = self.b, self.lanes
            lane = b.const(0, vec(u32, L))
            for k in range(1, L):
                lane = b.insert(lane, k, k)
            self._elem_index = b.add(b.to_type(b.mul(self.i, L), vec(u32, L)), lane)
        return self._elem_index

    def shape(self, d: int):
        if d not in self._shape:
            self._shape[d] = self.b.shape(self._out, d)
        return self._shape[d]


def build(s: Structure, dtypes: dict) -> ir.Kernel:
    """`dtypes` maps dtype names to DTypes (the structure holds names to stay hashable)."""
    if s.lanes > 1:
        return build_lines(s, dtypes)
    b = Builder("dl_fused", checked=False, nowrap=True)  # the host sized every index
    r = s.rank
    outs = [b.tensor(f"out{k}", dtypes[dt].cube, r) for k, (_, dt, _) in enumerate(s.outs)]
    leaves, n_p, out_off, leaf_off, consts = _params(b, s, dtypes, len(outs))
    n = b.scalar_param_value(n_p)
    if s.rows:
        # x runs along the last dim and y/z over the rows: a strided or broadcast operand is
        # then read at (row part, computed once per row) + col * stride, which the CPU's
        # loop vectoriser handles; the 1-D form needs a div/rem per element and does not
        # vectorise
        # vectorise; a cube holds several short rows (y units), which spreads the cube's
        # fixed cost
        col = b.add(b.mul(b.builtin("CUBE_POS_X"), b.builtin("CUBE_DIM_X")),
                    b.builtin("UNIT_POS_X"))
        y = b.add(b.mul(b.builtin("CUBE_POS_Y"), b.builtin("CUBE_DIM_Y")),
                  b.builtin("UNIT_POS_Y"))
        cols = b.shape(outs[0], s.rank - 1)
        if s.rows == 2:  # y is dim 1, the cube's z dim 0
            rows1 = b.shape(outs[0], 1)
            row = b.add(b.mul(b.builtin("CUBE_POS_Z"), rows1), y)
            cond = b.binary("and", b.lt(col, cols), b.lt(y, rows1))
        else:
            row = b.add(y, b.mul(b.builtin("CUBE_POS_Z"),
                                 b.mul(b.builtin("CUBE_COUNT_Y"), b.builtin("CUBE_DIM_Y"))))
            cond = None
        i = b.add(b.mul(row, cols), col)
        if s.exact:
            cond = None
        elif cond is None:
            cond = b.binary("and", b.lt(col, cols), b.lt(i, n))
    else:
        i = b.builtin("ABSOLUTE_POS")
        row = col = None
        cond = None if s.exact else b.lt(i, n)
    with contextlib.nullcontext() if cond is None else b.if_(cond):
        ctx = _Ctx(b, i, outs[0], row, col)
        ctx.y = y if s.rows else None
        vals, index = emit_graph(b, s, dtypes, ctx, leaves, leaf_off, consts)
        for k, (pos, dt, contig) in enumerate(s.outs):
            b.store(outs[k], index(outs[k], out_off[k], contig), b.to_type(vals[pos],
                                                                           dtypes[dt].cube))
    return b.finish()


def _decompose(b: Builder, ctx: _Ctx, x, dims: range) -> list:
    """x's coordinates over `dims` (innermost last) of the graph's shape."""
    out: list = []
    rem = x
    for d in reversed(dims[1:]):
        out.insert(0, b.binary("rem", rem, ctx.shape(d)))
        rem = b.binary("div", rem, ctx.shape(d))
    return [rem, *out] if len(dims) else []


def _split_coords(b: Builder, ctx: _Ctx, u, j, kept: int, rank: int) -> list | None:
    if not 0 < kept < rank:
        return None
    return _decompose(b, ctx, u, range(kept)) + _decompose(b, ctx, j, range(kept, rank))


def _params(b: Builder, s: Structure, dtypes: dict, n_outs: int):
    r = s.rank
    leaves = [b.array(f"x{j}", dtypes[dt].cube) if contig else
              b.tensor(f"x{j}", dtypes[dt].cube, r) for j, (dt, contig) in enumerate(s.leaves)]
    n_p = b.scalar("n", u32)
    out_off = [b.scalar(f"out{k}_off", u32) for k in range(n_outs)]
    leaf_off = [b.scalar(f"x{j}_off", u32) for j in range(len(leaves))]
    const_p = [b.scalar(f"c{k}", dtypes[dt].cube) for k, dt in enumerate(s.consts)]
    return (leaves, n_p, [b.scalar_param_value(p) for p in out_off],
            [b.scalar_param_value(p) for p in leaf_off],
            [b.scalar_param_value(p) for p in const_p])


def emit_graph(b: Builder, s: Structure, dtypes: dict, ctx, leaves, leaf_off, consts,
               read=None):
    """The graph's values at element `ctx.i` (each in its compute type, a line of
    `ctx.lanes`) and the indexing function used for the leaves (contiguous: offset + i; else
    through the strides). `read(j)`, where given, loads leaf j instead."""
    r = s.rank
    i = ctx.i
    lanes = ctx.lanes
    coords: list = []

    def index(param, off, contig, per_row=False):
        if contig:
            return b.add(off, i)
        if not coords and ctx.coords is not None:
            coords.extend(ctx.coords)
        if not coords and s.rows == 2:  # the cube's y and z are the row's coordinates
            coords.extend((b.builtin("CUBE_POS_Z"), ctx.y, ctx.col))
        if not coords and ctx.row is not None:  # rows mode: decompose the row only
            coords.extend(_decompose(b, ctx, ctx.row, range(r - 1)) + [ctx.col])
        if not coords:  # decompose i into coordinates once, innermost dim last
            coords.extend(_decompose(b, ctx, i, range(r)))
        acc = off
        for d in range(r - 1 if per_row else r):
            acc = b.add(acc, b.mul(coords[d], b.stride(param, d)))
        return acc

    leaf_vals: dict[int, object] = {}

    def leaf(j):
        if j not in leaf_vals:
            leaf_vals[j] = read(j) if read is not None else \
                b.load(leaves[j], index(leaves[j], leaf_off[j], s.leaves[j][1],
                                        j in s.row_leaves))
        return leaf_vals[j]

    vals = []
    for op, dt, in_types, attrs, refs in s.nodes:
        args = []
        for (kind, k), t in zip(refs, in_types, strict=True):
            v = vals[k] if kind == "n" else leaf(k) if kind == "t" else consts[k]
            # a scalar (a constant, an "s" leaf) takes the element type, then fills a line
            v = b.to_type(v, dtypes[t].cube) if v.type.lanes == 1 else v
            args.append(b.to_type(v, vec(dtypes[t].cube, lanes)))
        node = _NodeView(op, dtypes[dt], tuple(dtypes[t] for t in in_types), attrs, lanes)
        res = EMITTERS[op](ctx, node, args)
        # round to the storage type after every op: fused == unfused, bit for bit
        vals.append(b.to_type(b.to_type(res, vec(dtypes[dt].cube, lanes)),
                              vec(dtypes[dt].compute.cube, lanes)))
    return vals, index


@dataclass(frozen=True)
class _NodeView:
    op: str
    dtype: object
    in_types: tuple
    attrs: tuple
    lanes: int = 1  # the emitter's values are lines of this many elements


def build_lines(s: Structure, dtypes: dict) -> ir.Kernel:
    """The graph over lines: unit i computes elements i*L .. i*L + L-1 (all operands flat
    and contiguous but for the "r", "w", "p" and "s" leaves, see Structure). Params: the
    outputs and leaves as arrays of lines ("s", "w", "p" leaves of elements), the line
    count, offsets in lines ("s", "w", "p": in elements), the scalars, then the row's length
    in lines and each "p" leaf's period where an "r", "w" or "p" leaf is. With those
    (s.rows == 1) the grid is 2-D as in rows mode: x along a row's lines, y/z over the rows,
    so that no unit divides its index by the row length (a udiv per line cost as much as
    the line's exp; a "p" leaf's remainder is one per row, outside the unit loop along x)."""
    L = s.lanes
    b = Builder("dl_fused_lines", checked=False, nowrap=True)  # the host sized every index
    outs = [b.array(f"out{k}", vec(dtypes[dt].cube, L)) for k, (_, dt, _) in enumerate(s.outs)]
    leaves = [b.array(f"x{j}", dtypes[dt].cube if kind in "swp" else vec(dtypes[dt].cube, L))
              for j, ((dt, _), kind) in enumerate(zip(s.leaves, s.line_leaves, strict=True))]
    n = b.scalar_param_value(b.scalar("n", u32))
    out_off = [b.scalar_param_value(b.scalar(f"out{k}_off", u32)) for k in range(len(outs))]
    leaf_off = [b.scalar_param_value(b.scalar(f"x{j}_off", u32)) for j in range(len(leaves))]
    consts = [b.scalar_param_value(b.scalar(f"c{k}", dtypes[dt].cube))
              for k, dt in enumerate(s.consts)]
    periods = {}
    if s.rows:
        row_lines = b.scalar_param_value(b.scalar("row_lines", u32))
        periods = {j: b.scalar_param_value(b.scalar(f"x{j}_period", u32))
                   for j, kind in enumerate(s.line_leaves) if kind == "p"}
        col = b.add(b.mul(b.builtin("CUBE_POS_X"), b.builtin("CUBE_DIM_X")),
                    b.builtin("UNIT_POS_X"))
        row = b.add(b.add(b.mul(b.builtin("CUBE_POS_Y"), b.builtin("CUBE_DIM_Y")),
                          b.builtin("UNIT_POS_Y")),
                    b.mul(b.builtin("CUBE_POS_Z"),
                          b.mul(b.builtin("CUBE_COUNT_Y"), b.builtin("CUBE_DIM_Y"))))
        i = b.add(b.mul(row, row_lines), col)
        cond = None if s.exact else b.binary("and", b.lt(col, row_lines), b.lt(i, n))
    else:
        i = b.builtin("ABSOLUTE_POS")
        row = col = None
        cond = None if s.exact else b.lt(i, n)
    g_outs = [k for k, (_, _, contig) in enumerate(s.outs) if not contig]
    gathered = [j for j, kind in enumerate(s.line_leaves) if kind == "g"]
    # per strided output, then per "g" leaf, its strides in lines over the rank - 1 leading
    # dims; then the sizes of dims 1 .. rank - 2 (a row's coordinates come from its index)
    g_strides = {("o", k): [b.scalar_param_value(b.scalar(f"out{k}_st{d}", u32))
                            for d in range(s.rank - 1)] for k in g_outs}
    g_strides.update({("x", j): [b.scalar_param_value(b.scalar(f"x{j}_st{d}", u32))
                                 for d in range(s.rank - 1)] for j in gathered})
    dims = [b.scalar_param_value(b.scalar(f"dim{d}", u32)) for d in range(1, s.rank - 1)] \
        if g_strides else []
    row_base: dict = {}

    def gathered_row(key, off):
        """The line where an operand's row starts (the row's coordinates decomposed once)."""
        if "coords" not in row_base:
            coords, rem = [], row
            for d in reversed(dims):
                coords.insert(0, b.binary("rem", rem, d))
                rem = b.binary("div", rem, d)
            row_base["coords"] = [rem, *coords]
        if key not in row_base:
            at = off
            for c, st in zip(row_base["coords"], g_strides[key], strict=True):
                at = b.add(at, b.mul(c, st))
            row_base[key] = at
        return row_base[key]

    def read(j):
        kind = s.line_leaves[j]
        if kind == "s":
            return b.load(leaves[j], leaf_off[j])
        if kind in "rw":
            return b.load(leaves[j], b.add(leaf_off[j], col if kind == "r" else row))
        if kind == "p":
            return b.load(leaves[j], b.add(leaf_off[j], b.binary("rem", row, periods[j])))
        if kind == "g":
            return b.load(leaves[j], b.add(gathered_row(("x", j), leaf_off[j]), col))
        return b.load(leaves[j], b.add(leaf_off[j], i))

    with contextlib.nullcontext() if cond is None else b.if_(cond):
        ctx = _Ctx(b, i, None)
        ctx.lanes = L
        vals, _ = emit_graph(b, s, dtypes, ctx, leaves, leaf_off, consts, read)
        for k, (pos, dt, contig) in enumerate(s.outs):
            at = b.add(out_off[k], i) if contig else \
                b.add(gathered_row(("o", k), out_off[k]), col)
            b.store(outs[k], at, b.to_type(vals[pos], vec(dtypes[dt].cube, L)))
    return b.finish()


def build_reduce(s: Structure, dtypes: dict, op: str, acc: str, kept: int = 0,
                 chunked: bool = False) -> ir.Kernel:
    """A reduction reading the graph on the fly: one unit per output row; the graph's shape
    is (kept dims..., reduced dims...) (the host permutes the leaves' strides), so row u
    covers elements u*r .. u*r + r - 1. `op`: sum, mean, prod, max, min; `acc` the dtype the
    graph's root is accumulated (and stored) in. The coordinates of a strided leaf come from
    u (the `kept` leading dims, loop-invariant: hoisted out of the loop) and from j (the
    reduced dims; none to divide when one dim is reduced): decomposing u*r + j whole cost a
    division per dim per element, 5 ns an element.

    chunked: unit u reduces rows `per * c .. per * (c + 1) - 1` (c = u // rows) of output
    row u % rows into out[u] (a (chunks, rows) partial; a mean's is scaled by 1/r): for
    a strided reduced axis, where one unit's walk over all of r left the cache lines it
    shares with its neighbours before they came to read them."""
    if s.lanes > 1:
        return build_reduce_lines(s, dtypes, op, acc)
    b = Builder("dl_fused_reduce", checked=False, nowrap=True)
    at = dtypes[acc].cube
    out = b.array("out0", at)
    shape_ref = b.tensor("shape", at, s.rank)  # carries the graph's (permuted) shape
    leaves, n_p, _, leaf_off, consts = _params(b, s, dtypes, 1)
    r = b.scalar_param_value(b.scalar("r", u32))
    scale = b.scalar_param_value(b.scalar("scale", f64 if at == f64 else f32))
    n = b.scalar_param_value(n_p)
    u = b.builtin("ABSOLUTE_POS")
    row, lo, hi = u, b.const(0, u32), r
    if chunked:
        rows = b.scalar_param_value(b.scalar("rows", u32))
        per = b.scalar_param_value(b.scalar("per", u32))
        row = b.binary("rem", u, rows)
        lo = b.mul(b.binary("div", u, rows), per)
        hi = b.binary("min", b.add(lo, per), r)
    init = {"sum": 0, "mean": 0, "prod": 1, "max": -math.inf, "min": math.inf}[op]
    if not dtypes[acc].is_float and op in ("max", "min"):
        init = {"max": -(2 ** 63), "min": 2 ** 63 - 1}[op] if at.bits == 64 else \
            {"max": -(2 ** 31), "min": 2 ** 31 - 1}[op]
    with b.if_(b.lt(u, n)):
        total = b.var(at, "acc")
        b.assign(total, b.const(init, at))
        with b.range(lo, hi, t=u32) as j:
            ctx = _Ctx(b, b.add(b.mul(row, r), j), shape_ref)
            ctx.coords = _split_coords(b, ctx, row, j, kept, s.rank)
            vals, _ = emit_graph(b, s, dtypes, ctx, leaves, leaf_off, consts)
            v = b.to_type(vals[s.outs[0][0]], at)
            comb = {"sum": "add", "mean": "add", "prod": "mul"}.get(op, op)
            b.assign(total, _combine(b, comb, total, v, dtypes[acc].is_float))
        res = b.to_type(b.mul(b.to_type(total, scale.type), scale), at) if op == "mean" \
            else total
        b.store(out, u, res)
    return b.finish()


_INIT = {"sum": 0, "mean": 0, "prod": 1, "max": -math.inf, "min": math.inf}


def _combine(b, comb: str, acc, v, is_float: bool):
    """acc comb v; a float max/min keeps a nan from either side, as PyTorch's reductions
    (the targets' max/min return the other operand)."""
    r = b.binary(comb, acc, v)
    if is_float and comb in ("max", "min"):
        r = b.select(b.binary("ne", v, v), v, r)
        r = b.select(b.binary("ne", acc, acc), acc, r)
    return r


def _reduce_init(op: str, acc) -> float | int:
    if not acc.is_float and op in ("max", "min"):
        return {"max": -(2 ** 63), "min": 2 ** 63 - 1}[op] if acc.cube.bits == 64 else \
            {"max": -(2 ** 31), "min": 2 ** 31 - 1}[op]
    return _INIT[op]


def build_reduce_lines(s: Structure, dtypes: dict, op: str, acc: str) -> ir.Kernel:
    """build_reduce over lines: unit u reduces its row (identity order, the reduced dims
    last) a line of L at a time into L partial results, then combines the lanes in order.
    Leaves (s.line_leaves): "c" contiguous lines, "s" one element, "w" one element per row
    (constant along the reduced dims: a row's max or mean). Params: out0, the leaves, the
    row count, offsets (lines for "c", elements else), the scalars, lines per row, scale."""
    L = s.lanes
    b = Builder("dl_fused_reduce_lines", checked=False, nowrap=True)
    at = dtypes[acc].cube
    out = b.array("out0", at)
    leaves = [b.array(f"x{j}", vec(dtypes[dt].cube, L) if kind == "c" else dtypes[dt].cube)
              for j, ((dt, _), kind) in enumerate(zip(s.leaves, s.line_leaves, strict=True))]
    n = b.scalar_param_value(b.scalar("n", u32))
    leaf_off = [b.scalar_param_value(b.scalar(f"x{j}_off", u32)) for j in range(len(leaves))]
    consts = [b.scalar_param_value(b.scalar(f"c{k}", dtypes[dt].cube))
              for k, dt in enumerate(s.consts)]
    r_lines = b.scalar_param_value(b.scalar("r_lines", u32))
    scale = b.scalar_param_value(b.scalar("scale", f64 if at == f64 else f32))
    u = b.builtin("ABSOLUTE_POS")
    comb = {"sum": "add", "mean": "add", "prod": "mul"}.get(op, op)
    with b.if_(b.lt(u, n)):
        # the row's constants, loaded once (outside the loop)
        fixed = {j: b.load(leaves[j], leaf_off[j] if kind == "s" else b.add(leaf_off[j], u))
                 for j, kind in enumerate(s.line_leaves) if kind != "c"}
        base = b.mul(u, r_lines)
        total = b.var(vec(at, L), "acc")
        b.assign(total, b.const(_reduce_init(op, dtypes[acc]), vec(at, L)))
        with b.range(0, r_lines, t=u32) as jl:
            idx = b.add(base, jl)

            def read(j):
                return fixed[j] if j in fixed else b.load(leaves[j], b.add(leaf_off[j], idx))
            ctx = _Ctx(b, idx, None)
            ctx.lanes = L
            vals, _ = emit_graph(b, s, dtypes, ctx, leaves, leaf_off, consts, read)
            nan = dtypes[acc].is_float
            b.assign(total, _combine(b, comb, total, b.to_type(vals[s.outs[0][0]], vec(at, L)),
                                     nan))
        res = b.extract(total, 0)
        for k in range(1, L):
            res = _combine(b, comb, res, b.extract(total, k), dtypes[acc].is_float)
        if op == "mean":
            res = b.to_type(b.mul(b.to_type(res, scale.type), scale), at)
        b.store(out, u, res)
    return b.finish()

"""Computing lazy tensors: one fused kernel per call, cached by the graph's structure."""
from __future__ import annotations

import hashlib
import threading

from cube import recording
from cube.frontend.translator import Target
from cube.kernel import check_features
from cube_ir.passes import run_pipeline
from cube_ir.printer import format_kernel
from runtimes.disk_cache import make_key

from .. import dtypes, shapes
from ..kernels.common import simd_bytes
from ..kernels.launch import CUBE_DIM, MAX_CUBES_X, cube_count, record_compile, record_launch
from ..tensor import Tensor
from .graph import Const, Node
from .kernel import Structure, build

_DTYPES = {d.name: d for d in (*dtypes.ALL, dtypes.uint32)}
_cache: dict = {}
MAX_FUSED = 4096  # fused kernels kept in memory (graphs built from ever new expressions)
_hot: dict = {}  # (runtime, Structure fields) -> executable: _cache without the dataclass
_lock = threading.Lock()


SHAPE_READERS = ("eye",)  # ops that read the kernel's shape: their graphs keep it as it is
# ops that read the element's index (generators): no lines-and-tail split, whose tail kernel
# counts its elements from 0 (arange(65537)[-1] was 0, randn's tail repeated its first values)
INDEX_READERS = frozenset(("arange", "eye", "rand", "randn"))
ROWS_MIN_COLS = 64  # a shorter last dim would leave most units of a row's cube idle


def rows_cube_dim(shape) -> tuple:
    """(units along a row, rows per cube): the row's length rounded up to a power of two, up
    to CUBE_DIM (a row of 64 in cubes of 256 would leave three units of four idle), and as
    many rows as fill CUBE_DIM units."""
    x = min(CUBE_DIM, 1 << max(0, shape[-1] - 1).bit_length())
    return x, CUBE_DIM // x, 1


def rows_cube_count(shape, grid: bool = False) -> tuple:
    dx, dy, _ = rows_cube_dim(shape)
    cx = -(-shape[-1] // dx)
    if grid:  # rank 3: y walks dim 1 (dy rows a cube) and z dim 0
        return (cx, -(-shape[1] // dy), shape[0])
    ys = -(-shapes.numel(shape[:-1]) // dy)
    y = min(ys, MAX_CUBES_X)
    return (cx, y, -(-ys // y))


def settled(t: Tensor) -> bool:
    """Whether t is materialised, taking the storage its node was computed into by another
    tensor sharing the node (a lazy `detach()`), if so."""
    node = t._node
    if node is None:
        return True
    r = node.result
    if r is None:
        return False
    t._buf, t._node, t._strides, t.offset = r._buf, None, r._strides, r.offset
    return True


def _kernel_shape(shape) -> tuple:
    return shape if shape else (1,)  # a 0-d graph runs as one element of rank 1


def materialise(roots: list[Tensor], outs: list[Tensor] | None = None) -> None:
    """Compute the lazy `roots` (one shape, one device) in one kernel. Without `outs` each
    root gets fresh contiguous storage; with `outs` (materialised views of the roots' shape)
    the values are written there instead (the roots stay lazy)."""
    shape = roots[0].shape
    device = roots[0].device
    for r in roots:
        if r.shape != shape or r.device != device:
            raise ValueError(f"one fused kernel computes values of one shape on one device, "
                             f"got {shape} on {device} and {r.shape} on {r.device}")
    later: list = []
    if outs is None:
        # a root whose node another tensor computed already (a lazy `detach()` of it) takes
        # that storage, and roots sharing a node are computed once: one value, one storage,
        # as an alias of it is in PyTorch
        todo, nodes = [], set()
        for r in roots:
            if settled(r):
                continue
            if id(r._node) in nodes:
                later.append(r)
            else:
                nodes.add(id(r._node))
                todo.append(r)
        roots = todo
        if not roots:
            return
        outs = [Tensor._empty(shape, r.dtype, device) for r in roots]
        attach = True
    else:
        attach = False
    if shapes.numel(shape) > 0:
        _run(roots, outs, _kernel_shape(shape), device)
    if attach:  # each root (and a root sharing its node) takes its node's new storage
        for r, o in zip(roots, outs, strict=True):
            r._node.result = o
        for r in (*roots, *later):
            settled(r)


class Graph:
    """The nodes of one or more lazy roots in topological order, with their leaves (distinct
    views) and scalar constants, described hashably for the kernel structure."""

    def __init__(self):
        self.order: list[Node] = []
        self.pos: dict[int, int] = {}
        self.leaves: list = []
        self._leaf_pos: dict = {}
        self.consts: list[Const] = []
        self.nodes_desc: list = []

    def ref(self, x):
        if isinstance(x, Node) and x.result is not None:
            x = x.result
        if isinstance(x, Node):
            return ("n", self.pos[id(x)])
        if isinstance(x, Const):
            self.consts.append(x)
            return ("c", len(self.consts) - 1)
        key = (id(x._buf), x.shape, x._strides, x.offset)
        if key not in self._leaf_pos:
            self._leaf_pos[key] = len(self.leaves)
            self.leaves.append(x)
        return ("t", self._leaf_pos[key])

    def visit(self, root: Node) -> int:
        """Adds root's graph; returns root's position. A root computed already is read from
        its result (never computed again from inputs that may have changed since)."""
        if root.result is not None:
            r = root.result
            root = Node("identity", (r,), (r.dtype.compute,), r.dtype, r.shape)
        stack = [(root, False)]
        while stack:
            n, done = stack.pop()
            if id(n) in self.pos:
                continue
            if done:
                refs = tuple(self.ref(x) for x in n.inputs)
                self.pos[id(n)] = len(self.order)
                self.order.append(n)
                self.nodes_desc.append((n.op, n.dtype.name,
                                        tuple(t.name for t in n.in_types), n.attrs, refs))
                continue
            stack.append((n, True))
            for x in reversed(n.inputs):
                if isinstance(x, Node) and x.result is None and id(x) not in self.pos:
                    stack.append((x, False))
        return self.pos[id(root)]


def _run(roots, outs, kshape, device) -> None:
    g = Graph()
    nodes_desc, leaves = g.nodes_desc, g.leaves
    out_desc = []
    for r, o in zip(roots, outs, strict=True):
        if r._node is None:  # already materialised: a copy (identity) into the output
            node = Node("identity", (r,), (r.dtype.compute,), r.dtype, r.shape)
        else:
            node = r._node
        contig = o.is_contiguous()
        out_desc.append((g.visit(node), o.dtype.name, contig))
    leaf_desc = []
    leaf_strides = []
    for t in leaves:
        st = shapes.broadcast_strides(t.shape, t._strides, roots[0].shape)
        contig = tuple(t.shape) == tuple(roots[0].shape) and t.is_contiguous()
        leaf_desc.append((t.dtype.name, contig))
        leaf_strides.append(st)
    n = shapes.numel(kshape)
    out_strides = [o._strides for o in outs]
    if len(roots[0].shape) > 1 and not any(d[0] in SHAPE_READERS for d in nodes_desc):
        kshape, merged = shapes.coalesce(roots[0].shape, out_strides + leaf_strides)
        out_strides, leaf_strides = merged[:len(outs)], merged[len(outs):]
    g.out_desc, g.leaf_desc = out_desc, leaf_desc
    g.nodes_key, g.leaf_key, g.out_key = tuple(nodes_desc), tuple(leaf_desc), tuple(out_desc)
    plan = _line_plan(device.rt, g, kshape, leaf_strides, outs, out_strides) \
        if n >= LINE_MIN_ELEMS else None
    if plan is None:
        _launch(g, kshape, device, outs, out_strides, leaf_desc, leaf_strides,
                [o.offset for o in outs], [t.offset for t in leaves])
        return
    lanes, kinds, row, periods = plan
    lines = n // lanes
    if lines:
        _launch_lines(g, device, outs, lanes, kinds, row, periods, lines,
                      (kshape, out_strides, leaf_strides) if _gathers(g, kinds) else None)
    tail = n - lines * lanes
    if tail:  # the last elements, fewer than a line, by the scalar kernel over (tail,)
        done = lines * lanes
        _launch(g, (tail,), device, outs, [(1,)] * len(outs),
                [(dt, k == "c") for (dt, _), k in zip(leaf_desc, kinds, strict=True)],
                [(0,) if k == "s" else (1,) for k in kinds],
                [o.offset + done for o in outs],
                [t.offset + (0 if k == "s" else done) for t, k in zip(leaves, kinds,
                                                                      strict=True)])


def _launch(g: Graph, kshape, device, outs, out_strides, leaf_desc, leaf_strides, out_offs,
            leaf_offs) -> None:
    """The scalar kernel: one unit per element of kshape."""
    nodes_desc, leaves, consts, out_desc = g.nodes_desc, g.leaves, g.consts, g.out_desc
    n = shapes.numel(kshape)
    rank = len(kshape)
    # rows mode wherever some operand is not contiguous (a strided output too: writing a
    # transposed gradient into a slice took 4 ns an element with a division per dim)
    rows = int(kshape[-1] >= ROWS_MIN_COLS and rank > 1 and
               not (all(c for _, c in leaf_desc) and all(c for _, _, c in out_desc)))
    if rows and rank == 3 and kshape[0] <= MAX_CUBES_X and \
            -(-kshape[1] // rows_cube_dim(kshape)[1]) <= MAX_CUBES_X:
        rows = 2
    row_leaves = tuple(j for j, ((_, contig), st) in enumerate(zip(leaf_desc, leaf_strides))
                       if rows and not contig and st[-1] == 0)
    if rows:
        cc, cd = rows_cube_count(kshape, rows == 2), rows_cube_dim(kshape)
    else:
        cc, cd = cube_count(n), (CUBE_DIM, 1, 1)
    # each axis of the grid covers its part of the shape at least once, so the grid tiles
    # the shape exactly (no unit out of range) when it has exactly n units
    exact = cc[0] * cc[1] * cc[2] * cd[0] * cd[1] * cd[2] == n
    fields = (rank, tuple(nodes_desc), tuple(leaf_desc), tuple(c.dtype.name for c in consts),
              tuple(out_desc), rows, row_leaves, 1, (), exact)
    # looked up by the plain tuple (hashed in C); the Structure is built on a miss only
    exe = _hot.get((device.rt, fields))
    if exe is None:
        exe = _hot[(device.rt, fields)] = _compiled(device.rt, Structure(*fields))
    args = []
    for o, st in zip(outs, out_strides, strict=True):
        args.append(o._karg(kshape, st or (1,)))
    for t, (_, contig), st in zip(leaves, leaf_desc, leaf_strides, strict=True):
        args.append(t._buf if contig else t._karg(kshape, st or (0,)))
    args.append(n)
    args += out_offs
    args += leaf_offs
    args += [_py(c) for c in consts]
    recording.launch(exe, cc, cd, args)
    record_launch(lambda: "dl_fused[" + ",".join(d[0] for d in nodes_desc) + "]")


def line_bytes(rt) -> int:
    """The bytes of a fused kernel's line on rt (0: no line kernels there): the host's SIMD
    register on the CPU; the interpreter (the oracle) runs lines of 16 bytes so the tests
    check the line kernels there too. The GPU targets keep one element per unit (their
    units are the SIMD lanes)."""
    if rt.target == "llvm":
        return simd_bytes(rt)
    return 16 if rt.target == "ir" else 0


LINE_MIN_LANES = 4  # narrower lines than this: the scalar kernel (auto-vectorised on CPU)
LINE_MIN_ELEMS = 1 << 14  # smaller graphs: the scalar kernel (a few µs either way, and
# the line plan's Python cost more than the lines saved: 4096 f32 ran 12% slower)
TAIL_MIN_ELEMS = 1 << 16  # a size no line divides: lines and a scalar tail kernel from here
_type_lanes: dict = {}  # (rt, nodes, leaves, outs) -> the graph's widest lanes, 0: no lines


def _graph_lanes(rt, g: Graph) -> int:
    """The lanes of a SIMD register of the widest type the graph touches (0: no line kernel:
    no lines on rt, an op reading the shape); memoised per graph
    structure, as the per-launch Python time counts for small tensors."""
    key = (rt, g.nodes_key, g.leaf_key, g.out_key)
    lanes = _type_lanes.get(key)
    if lanes is None:
        width = line_bytes(rt)
        lanes = 0
        if width and not any(d[0] in SHAPE_READERS for d in g.nodes_desc):
            lanes = width // max(_DTYPES[name].itemsize for name in _type_names(g))
        _type_lanes[key] = lanes = lanes if lanes >= LINE_MIN_LANES else 0
    return lanes


def _line_plan(rt, g: Graph, kshape, leaf_strides, outs, out_strides):
    """(lanes, leaf kinds, row elements) for a line kernel over the flat graph, or None:
    every output contiguous or with gathered rows (as a "g" leaf: a slice being written),
    each leaf contiguous ("c"), a row repeated over leading dims
    ("r": zero strides, then a contiguous row of `row` elements, `row` a multiple of the
    line), one element per row ("w": row-major strides, then zeros over the row's `row`
    elements), one element ("s") or rows gathered from anywhere ("g": unit stride along the
    last dim, of `row` elements, every other stride and the offset whole lines: a slice
    along the last dim, a permute keeping it last); each line-read operand's offset a
    multiple of the line; no op reading the shape (eye)."""
    lanes = _graph_lanes(rt, g)
    if not lanes or any(o.offset % lanes for o in outs):
        return None
    kinds, row, periods = [], None, []
    r = len(kshape)
    for (_, _, contig), o, st in zip(g.out_desc, outs, out_strides, strict=True):
        if not contig:
            if not _gathered(kshape, st, o.offset, lanes) or row not in (None, kshape[-1]):
                return None
            row = kshape[-1]
    for t, st in zip(g.leaves, leaf_strides, strict=True):
        k = 0 if t.offset % lanes == 0 and st == _row_major(kshape, st) else \
            _row_split(kshape, st)
        if k is None and _gathered(kshape, st, t.offset, lanes):
            if row not in (None, kshape[-1]):
                return None
            row = kshape[-1]
            kinds.append("g")
            continue
        if k is None:  # one element per row (a (rows, 1) operand: a softmax's max)?
            k = _col_split(kshape, st)
            kind = "w"
            if not k:  # or per row, repeating over the leading dims (a (1, C, 1, 1) one)?
                k, period = _period_split(kshape, st) or (0, 0)
                kind = "p"
            cols = shapes.numel(kshape[k:]) if k else 0
            if not k or cols % lanes or row not in (None, cols):
                return None
            row = cols
            kinds.append(kind)
            if kind == "p":
                periods.append(period)
            continue
        if k == r:
            kinds.append("s")
            continue
        if t.offset % lanes:
            return None
        if k == 0:
            kinds.append("c")
            continue
        cols = shapes.numel(kshape[k:])
        if cols % lanes or row not in (None, cols):
            return None
        row = cols
        kinds.append("r")
    n = shapes.numel(kshape)
    if n % lanes and (n < TAIL_MIN_ELEMS or rt.target == "ir"
                      or any(d[0] in INDEX_READERS for d in g.nodes_desc)):
        # narrower lines where they divide, else the scalar kernel
        while n % lanes and lanes > LINE_MIN_LANES:
            lanes //= 2
        if n % lanes:
            return None
    if rt.target == "ir" and any(b.size % lanes for b in _line_bufs(g, kinds, outs)):
        return None  # the interpreter takes whole allocations as lines: none may be partial
    if _gathers(g, kinds) and any(k in "rwp" for k in kinds):
        return None  # their rows are kshape[k:], the gathered rows its last dim: one kind
    return lanes, tuple(kinds), row, tuple(periods)


def _row_major(kshape, st):
    """st itself when it is kshape's row-major strides (the common, flat case: one compare)."""
    return st if len(st) == 1 and st[0] == 1 else shapes.contiguous_strides(kshape)


def _line_bufs(g: Graph, kinds, outs):
    yield from (o._buf for o in outs)
    yield from (t._buf for t, k in zip(g.leaves, kinds, strict=True) if k in "crg")


def _type_names(g: Graph):
    for _, dt, in_types, _, _ in g.nodes_desc:
        yield dt
        yield from in_types
        yield _DTYPES[dt].compute.name
    for _, dt, _ in g.out_desc:
        yield dt
    for dt, _ in g.leaf_desc:
        yield dt


def _row_split(kshape, st) -> int | None:
    """k where strides st are 0 over dims < k and row-major over dims >= k (a row of
    kshape[k:] repeated; k == 0: contiguous, k == rank: one element); else None."""
    r = len(kshape)
    k = r
    acc = 1
    while k > 0 and (st[k - 1] == acc or kshape[k - 1] == 1):
        k -= 1
        acc *= kshape[k]
    return k if all(s == 0 for s in st[:k]) else None


def _gathers(g: Graph, kinds) -> bool:
    """Whether a line kernel finds some operand's rows from their coordinates: a "g" leaf
    or a strided output."""
    return "g" in kinds or not all(c for _, _, c in g.out_desc)


def _gathered(kshape, st, offset: int, lanes: int) -> bool:
    """Whether a leaf with strides st is read a whole line at a time along rows of kshape's
    last dim: unit stride there, the row a multiple of the line, every other stride and
    the offset multiples of it."""
    return len(kshape) >= 2 and st[-1] == 1 and kshape[-1] % lanes == 0 and \
        offset % lanes == 0 and all(x % lanes == 0 for x in st[:-1])


def _period_split(kshape, st) -> tuple | None:
    """(k, period) where strides st are 0 over dims < j, row-major over dims j .. k - 1 and
    0 over dims >= k, 0 < j < k < rank: one element per row of kshape[k:], the rows' values
    repeating every `period` = numel(kshape[j:k]) rows (a (1, C, 1, 1) operand of an
    (N, C, H, W) graph); else None."""
    r = len(kshape)
    k = r
    while k > 0 and st[k - 1] == 0:
        k -= 1
    j, period = k, 1
    while j > 0 and st[j - 1] == period:
        j -= 1
        period *= kshape[j]
    if not 0 < j < k < r or any(st[:j]):
        return None
    return k, period


def _col_split(kshape, st) -> int | None:
    """k where strides st are row-major over dims < k and 0 over dims >= k (one element
    per row of kshape[k:]), 0 < k < rank; else None."""
    k = len(kshape)
    while k > 0 and st[k - 1] == 0:
        k -= 1
    if not 0 < k < len(kshape) or not shapes.is_contiguous(kshape[:k], st[:k]):
        return None
    return k


def _launch_lines(g: Graph, device, outs, lanes, kinds, row, periods, lines,
                  gather=None) -> None:
    """periods: the rows after which each "p" leaf's values repeat. gather: (kshape, out
    strides, leaf strides) where an output is strided or a leaf is "g" (their rows'
    strides and the leading dims' sizes go to the kernel, in lines)."""
    if row is not None:  # rows of row // lanes lines: a 2-D grid as rows mode's
        rshape = (lines * lanes // row, row // lanes)
        cc, cd = rows_cube_count(rshape), rows_cube_dim(rshape)
    else:
        # cubes of 256 lines, or of the largest power of two from 64 up that divides the
        # line count: then no unit is out of range, and the kernel has no bounds test
        dim = min(CUBE_DIM, lines & -lines)
        cc, cd = cube_count(lines, dim if dim >= 64 else CUBE_DIM), \
            (dim if dim >= 64 else CUBE_DIM, 1, 1)
    exact = cc[0] * cc[1] * cc[2] * cd[0] * cd[1] * cd[2] == lines
    rank = 1 if gather is None else len(gather[0])  # "g" leaves index by the row's coordinates
    fields = (rank, g.nodes_key, g.leaf_key, tuple(c.dtype.name for c in g.consts), g.out_key,
              int(row is not None), (), lanes, kinds, exact)
    exe = _hot.get((device.rt, fields))
    if exe is None:
        exe = _hot[(device.rt, fields)] = _compiled(device.rt, Structure(*fields))
    args = [_line_view(o._buf, lanes) for o in outs]
    args += [t._buf if k in "swp" else _line_view(t._buf, lanes)
             for t, k in zip(g.leaves, kinds, strict=True)]
    args.append(lines)
    args += [o.offset // lanes for o in outs]
    args += [t.offset if k in "swp" else t.offset // lanes
             for t, k in zip(g.leaves, kinds, strict=True)]
    args += [_py(c) for c in g.consts]
    if row is not None:
        args.append(row // lanes)
        args += periods
    if gather is not None:
        kshape, out_strides, leaf_strides = gather
        for st, (_, _, contig) in zip(out_strides, g.out_desc, strict=True):
            if not contig:
                args += [x // lanes for x in st[:-1]]
        for st, k in zip(leaf_strides, kinds, strict=True):
            if k == "g":
                args += [x // lanes for x in st[:-1]]
        args += list(kshape[1:-1])
    recording.launch(exe, cc, cd, args)
    record_launch(lambda: "dl_fused[" + ",".join(d[0] for d in g.nodes_desc) + "]")


def _line_view(buf, lanes: int):
    """The whole allocation as lines (its last partial line, if any, left out)."""
    if buf.size % lanes == 0 and len(buf.shape) == 1:
        return buf.lines(lanes)
    m = buf.size - buf.size % lanes
    return buf.view((m,), (1,)).lines(lanes)


def _py(c: Const):
    d = c.dtype
    if d.category == 2:
        return float(c.value)
    if d.category == 1:
        return int(c.value)
    return bool(c.value)


def _compiled(rt, s: Structure, builder=build, extra=()):
    key = (rt, s, *extra)
    exe = _cache.get(key)
    if exe is not None:
        return exe
    with _lock:
        exe = _cache.get(key)
        if exe is None:
            kernel = builder(s, _DTYPES, *extra)
            kernel.source = "dl.fusion:" + hashlib.sha1(repr(s).encode()).hexdigest()[:12]
            kernel = run_pipeline(kernel, checked=False)
            check_features(kernel, Target(rt.target, rt.plane_size, rt.features))
            exe = rt.compile(kernel, make_key(format_kernel(kernel), rt.name, rt.device_id()))
            record_compile()
            if len(_cache) >= MAX_FUSED:  # bounded memory: rebuilt from the disk cache
                _cache.clear()
                _hot.clear()
                _type_lanes.clear()
            _cache[key] = exe
    return exe


def cached_kernels() -> int:
    return len(_cache)

"""How each elementwise op is emitted through the cube_ir builder.

An emitter gets the builder context, the node and its inputs already converted to the node's
`in_types` (compute types); it returns the result in the node's compute type. Fusion's own
ops are here: copies and casts, and the generators (they read the element's index). The
tensor-level ops declare their math with their gradient, in dl/ops/elementwise.py, which
fills this table through `emitter`."""
from __future__ import annotations

import math

from cube_ir.types import f32, f64, vec

EMITTERS: dict = {}


def emitter(*names):
    def wrap(fn):
        for n in names:
            EMITTERS[n] = fn
        return fn
    return wrap


def _ct(node):
    return vec(node.dtype.compute.cube, node.lanes)


def _float_t(node):
    """The float type a generator computes in: f64 for float64 results, else f32."""
    return vec(f64 if node.dtype.cube == f64 else f32, node.lanes)


# ---- copies and casts -------------------------------------------------------------------
@emitter("cast", "identity")
def _cast(ctx, node, a):
    return ctx.b.to_type(a[0], _ct(node))


# ---- generators: they read the element's linear index (a line of them in line mode) --------
@emitter("full")
def _full(ctx, node, a):
    return ctx.b.to_type(a[0], _ct(node))


@emitter("arange")
def _arange(ctx, node, a):
    b = ctx.b  # start + i * step, in the compute type (f64 steps for float64)
    t = vec(node.in_types[0].cube, node.lanes)
    return b.to_type(b.add(a[0], b.mul(b.cast(ctx.elem_index(), t), a[1])), _ct(node))


@emitter("eye")
def _eye(ctx, node, a):
    b = ctx.b
    cols = ctx.shape(1)
    return b.to_type(b.binary("eq", b.binary("rem", ctx.i, cols),
                              b.binary("div", ctx.i, cols)), _ct(node))


def _mix32(b, x):
    """lowbias32 (Chris Wellons): a strong 32-bit integer hash."""
    x = b.binary("xor", x, b.binary("shr", x, 16))
    x = b.mul(x, 0x7FEB352D)
    x = b.binary("xor", x, b.binary("shr", x, 15))
    x = b.mul(x, 0x846CA68B)
    return b.binary("xor", x, b.binary("shr", x, 16))


def counter_hash(b, i, k0, k1, stream: int):
    """A counter-based random u32 for element i under the key (k0, k1): the same key and
    index always give the same bits, on every runtime and fused or not."""
    x = b.add(b.mul(i, 0x9E3779B9), b.add(k0, stream * 0x632BE5AB))
    return _mix32(b, b.binary("xor", _mix32(b, x), k1))


def _uniform(b, h, t):
    """24 random bits as a float in [0, 1)."""
    return b.mul(b.cast(b.binary("shr", h, 8), t), 1.0 / (1 << 24))


@emitter("rand")
def _rand(ctx, node, a):
    b = ctx.b
    t = _float_t(node)
    return b.to_type(_uniform(b, counter_hash(b, ctx.elem_index(), a[0], a[1], 0), t),
                     _ct(node))


@emitter("randn")
def _randn(ctx, node, a):
    b = ctx.b  # Box-Muller on two independent uniforms; u1 in (0, 1] so log is finite
    t, i = _float_t(node), ctx.elem_index()
    u1 = b.sub(1.0, _uniform(b, counter_hash(b, i, a[0], a[1], 0), t))
    u2 = _uniform(b, counter_hash(b, i, a[0], a[1], 1), t)
    r = b.unary("sqrt", b.mul(-2.0, b.unary("log", u1)))
    return b.to_type(b.mul(r, b.unary("cos", b.mul(2.0 * math.pi, u2))), _ct(node))


GENERATORS = frozenset(("full", "arange", "eye", "rand", "randn"))

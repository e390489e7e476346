"""The reference interpreter: runs an `ir.Kernel` on NumPy arrays with the IR's semantics.

It is the oracle every runtime is compared with, so it favours faithfulness over speed, but it
is SIMT-vectorised to stay fast enough for tests: every unit of every cube runs in lockstep as
one NumPy vector (shape (units,) for scalars, (units, lanes) for lines). Divergent control flow
runs under an active mask: `If` runs both branches under complementary masks, loops iterate
while any unit is still in them, and Break/Continue/Return clear units from the mask. Because
units run in lockstep, `SyncCube` is a no-op and barrier semantics hold automatically.

Choices where the IR leaves a value open (documented so runtimes can be compared knowingly):
- integer `div`/`rem` by zero give 0; INT_MIN / -1 wraps to INT_MIN;
- float->int casts saturate and NaN gives 0 (the IR promises neither);
- integer `pow` with a negative exponent truncates the real result (1, -1 or 0);
- `shape`/`stride` of an out-of-range dimension give 0;
- shared memory starts zeroed; a var read before any write reads 0;
- among several units storing to one address in one op, the highest linear unit wins.
Out-of-bounds Load/Store/Atomic raises IRError (checked kernels are guarded by a pass first).

Races between cubes raise IRError too (`races=True`, the default): cubes have no barrier
between them and run in any order or at once on a real device, so an element of a parameter
that one cube stores and another cube loads or stores in the same launch has no defined
value. Lockstep execution hides such a race (both cubes read before either writes), so each
parameter element remembers the cube that stored it and the cube(s) that loaded it; atomics
are exempt. Units of one cube may share memory (they can synchronise), so only cubes are
compared.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from . import ir
from .errors import IRError
from .types import Scalar, Type, bf16, u32

# A loop still running after this many iterations is taken to be infinite.
MAX_LOOP_ITERATIONS = 1 << 20

_F64 = np.dtype(np.float64)
_erf = np.frompyfunc(math.erf, 1, 1)


def run(kernel: ir.Kernel, cube_count: Sequence[int], cube_dim: Sequence[int], args: list,
        plane_size: int | None = None, races: bool = True) -> None:
    """Execute `kernel` over the grid; stores write into the argument arrays in place.

    args follow kernel.params: a flat contiguous array of the element dtype for 'array' params
    (bf16 as uint16 bits; line params are viewed as (n // lanes, lanes)), `(flat, shape,
    strides)` for 'tensor' params (shape/strides in scalar elements) and a number for 'scalar'
    params."""
    cc, cd = _dim3(cube_count), _dim3(cube_dim)
    if kernel.cube_dim is not None and tuple(kernel.cube_dim) != cd:
        raise ValueError(f"kernel {kernel.name} was specialised for cube_dim "
                         f"{tuple(kernel.cube_dim)}, launched with {cd}")
    ps = int(plane_size if plane_size is not None else kernel.plane_size)
    if ps < 1:
        raise ValueError(f"plane_size must be >= 1, got {ps}")
    if len(args) != len(kernel.params):
        raise ValueError(f"kernel {kernel.name} takes {len(kernel.params)} arguments, "
                         f"got {len(args)}")
    if cc[0] * cc[1] * cc[2] * cd[0] * cd[1] * cd[2] == 0:
        return
    with np.errstate(all="ignore"):  # integer wraparound and IEEE specials are intended
        _Machine(kernel, cc, cd, ps, args, races and cc[0] * cc[1] * cc[2] > 1).execute()


def _dim3(d) -> tuple[int, int, int]:
    if isinstance(d, (int, np.integer)):
        d = (d,)
    d = tuple(int(x) for x in d)
    if len(d) > 3 or any(x < 0 for x in d):
        raise ValueError(f"a grid dimension must be up to 3 non-negative ints, got {d}")
    return d + (1,) * (3 - len(d))


# ---- element conversions -----------------------------------------------------------------

def _dtype(t: Type) -> np.dtype:
    """How values of type t are held while computing (bf16 as f32 rounded to bf16)."""
    e = t.elem
    return np.dtype(np.float32) if e == bf16 else e.np


def round_bf16(x) -> np.ndarray:
    """x rounded (to nearest, ties to even) to bf16 precision, as float32."""
    x = np.asarray(x, dtype=_F64)
    m, e = np.frexp(x)  # x = m * 2**e, 0.5 <= |m| < 1: bf16 keeps 8 significant bits
    r = np.ldexp(np.rint(np.ldexp(m, 8)), e - 8)
    # below the smallest normal bf16 (2**-126) the spacing is fixed at 2**-133
    r = np.where(np.abs(x) < 2.0 ** -126, np.rint(x * 2.0 ** 133) * 2.0 ** -133, r)
    with np.errstate(over="ignore"):  # rounding past the largest bf16 gives inf
        return r.astype(np.float32)


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16_bits(x) -> np.ndarray:
    """Round-to-nearest-even to bf16 and return the raw uint16 bits."""
    r = np.ascontiguousarray(round_bf16(x))
    bits = (r.view(np.uint32) >> np.uint32(16)).astype(np.uint16)  # exact: r is bf16 already
    quiet = (bits & np.uint16(0x8000)) | np.uint16(0x7FC0)  # keep NaNs NaN
    return np.where(np.isnan(r), quiet, bits).astype(np.uint16)


def _float_to_int(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Truncate toward zero; saturate out-of-range values, NaN -> 0."""
    t = np.trunc(np.asarray(x, dtype=_F64))
    info = np.iinfo(dt)
    big, small = t >= float(info.max), t <= float(info.min)
    r = np.where(big | small | np.isnan(t), 0, t).astype(dt)
    r = np.where(big, dt.type(info.max), r)
    return np.where(small, dt.type(info.min), r).astype(dt)


def _cast(x: np.ndarray, src: Type, dst: Type) -> np.ndarray:
    se, de = src.elem, dst.elem
    x = np.asarray(x)
    if de.is_bool:
        r = x != 0
    elif se.is_bool:
        r = x.astype(_dtype(de))
    elif de.is_float:
        r = round_bf16(x) if de == bf16 else x.astype(de.np)
    elif se.is_float:
        r = _float_to_int(x, de.np)
    else:
        r = x.astype(de.np)  # int -> int wraps
    if dst.lanes > 1 and src.lanes == 1:
        r = r[..., None]  # splat (broadcast on write)
    return r


def _const_array(value, t: Type) -> np.ndarray:
    e = t.elem
    if e.is_bool:
        v = np.array(bool(value))
    elif e.is_float:
        v = np.array(float(value), dtype=_F64)
        v = round_bf16(v) if e == bf16 else v.astype(e.np)
    else:
        n = int(value) & ((1 << e.bits) - 1)
        if e.is_signed and n >= 1 << (e.bits - 1):
            n -= 1 << e.bits
        v = np.array(n, dtype=e.np)
    if t.lanes > 1:
        v = np.full(t.lanes, v, dtype=v.dtype)
    v.setflags(write=False)
    return v


# ---- arithmetic ----------------------------------------------------------------------------

def _int_div(a, b, rem: bool):
    """C division: truncate toward zero, remainder has the dividend's sign; x / 0 = 0."""
    a, b = np.asarray(a), np.asarray(b)
    zero = b == 0
    bs = np.where(zero, 1, b).astype(b.dtype)
    r = np.fmod(a, bs)
    out = r if rem else (a - r) // bs  # exact division, so floor == trunc
    return np.where(zero, 0, out).astype(a.dtype)


def _int_pow(a, b):
    a, b = np.asarray(a), np.asarray(b)
    dt = a.dtype
    e = b.astype(np.int64) if np.dtype(b.dtype).kind == "i" else b.astype(np.uint64)
    neg = e < 0
    e = np.where(neg, 0, e)
    one = dt.type(1)
    result = np.broadcast_to(one, np.broadcast_shapes(a.shape, e.shape)).astype(dt)
    base = np.broadcast_to(a, result.shape).astype(dt)
    while np.any(e > 0):
        odd = (e & 1) == 1
        result = np.where(odd, result * base, result).astype(dt)
        base = (base * base).astype(dt)
        e = e >> 1
    if np.any(neg):
        if dt.kind == "i":
            minus = np.where((b & 1) == 1, dt.type(-1), one)
            small = np.where(a == 1, one, np.where(a == -1, minus, dt.type(0)))
        else:
            small = np.where(a == 1, one, dt.type(0))
        result = np.where(neg, small, result).astype(dt)
    return result


def _shift(a, b, left: bool, bits: int):
    a = np.asarray(a)
    count = (np.asarray(b).astype(np.int64) & (bits - 1)).astype(a.dtype)
    return np.left_shift(a, count) if left else np.right_shift(a, count)


def _f64(x):
    return np.asarray(x, dtype=_F64)


def _unary(op: str, a, t: Type):
    e = t.elem
    match op:
        case "neg":
            return np.negative(a)
        case "not":
            return np.logical_not(a) if e.is_bool else np.asarray(a) == 0
        case "bitnot":
            return np.logical_not(a) if e.is_bool else np.invert(a)
        case "abs":
            return a if e.kind in ("uint", "bool") else np.abs(a)
        case "floor":
            return np.floor(a)
        case "ceil":
            return np.ceil(a)
        case "round":
            return np.rint(a)  # half to even
        case "sqrt":
            return np.sqrt(a)  # correctly rounded in its own precision
        case "rsqrt":
            return 1.0 / np.sqrt(_f64(a))
        case "exp":
            return np.exp(_f64(a))
        case "log":
            return np.log(_f64(a))
        case "log1p":
            return np.log1p(_f64(a))
        case "sin":
            return np.sin(_f64(a))
        case "cos":
            return np.cos(_f64(a))
        case "tanh":
            return np.tanh(_f64(a))
        case "erf":
            return _erf(_f64(a)).astype(_F64)
        case "trunc":
            return np.trunc(a)
    fn = _MORE_MATH.get(op)
    if fn is not None:  # in f64, rounded once to the type by the caller
        with np.errstate(all="ignore"):
            return fn(_f64(a))
    raise IRError(f"unknown unary op {op}")


_MORE_MATH = {"tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
              "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh,
              "atanh": np.arctanh, "log2": np.log2, "log10": np.log10, "exp2": np.exp2,
              "expm1": np.expm1}


_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
        "gt": np.greater, "ge": np.greater_equal}
_BITS = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def _binary(op: str, a, b, t: Type):
    e = t.elem
    if op in _CMP:
        return _CMP[op](a, b)
    if op in _BITS:
        return _BITS[op](a, b)
    match op:
        case "add":
            return np.add(a, b)
        case "sub":
            return np.subtract(a, b)
        case "mul":
            return np.multiply(a, b)
        case "div":
            return np.true_divide(a, b) if e.is_float else _int_div(a, b, rem=False)
        case "rem":
            return np.fmod(a, b) if e.is_float else _int_div(a, b, rem=True)
        case "pow":
            return np.power(_f64(a), _f64(b)) if e.is_float else _int_pow(a, b)
        case "min":
            return np.fmin(a, b) if e.is_float else np.minimum(a, b)
        case "max":
            return np.fmax(a, b) if e.is_float else np.maximum(a, b)
        case "shl" | "shr":
            return _shift(a, b, op == "shl", e.bits)
        case "atan2":  # Python's quadrants and signed zeros (C's atan2)
            return np.arctan2(_f64(a), _f64(b))
        case "hypot":  # in f64: no overflow for any f32 operands
            return np.hypot(_f64(a), _f64(b))
        case "copysign":
            return np.copysign(a, b)
    raise IRError(f"unknown binary op {op}")


def _scalar_atomic(op: str, old, v, cmp, e: Scalar):
    """One atomic update on NumPy scalars (wrapping for ints)."""
    match op:
        case "add":
            return old + v
        case "sub":
            return old - v
        case "min":
            return np.fmin(old, v) if e.is_float else min(old, v)
        case "max":
            return np.fmax(old, v) if e.is_float else max(old, v)
        case "and":
            return old & v
        case "or":
            return old | v
        case "xor":
            return old ^ v
        case "exchange":
            return v
        case "cas":  # compares bits, as every target's compare-and-swap does
            if not e.is_float:
                return v if old == cmp else old
            dt = np.dtype(np.float32 if e == bf16 else e.np)  # bf16 is held in f32
            bits = f"u{dt.itemsize}"
            same = np.asarray(old, dt).view(bits) == np.asarray(cmp, dt).view(bits)
            return v if same else old
    raise IRError(f"unknown atomic op {op}")


# ---- memories ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Packed:
    """A packed buffer's argument (cube_ir.passes.packing): its u32 words, and its length,
    shape and strides in elements, which is what the kernel's metadata reads."""

    words: np.ndarray
    length: int
    shape: tuple | None = None
    strides: tuple | None = None


class _Mem:
    """A memory as one flat storage; unit u's instance starts at base[u] (shared: per cube,
    local: per unit, params: 0). bf16 params hold raw uint16 bits."""

    __slots__ = ("data", "size", "base", "bits16", "mem", "shape", "strides", "length")

    def __init__(self, mem, data: np.ndarray, size: int, base, bits16: bool = False,
                 shape: tuple = (), strides: tuple = (), length: int | None = None):
        self.mem, self.data, self.size, self.base = mem, data, size, base
        self.bits16, self.shape, self.strides = bits16, shape, strides
        self.length = size if length is None else length  # what `len` reads

    def decode(self, raw):
        return bf16_bits_to_f32(raw) if self.bits16 else raw

    def encode(self, vals):
        return f32_to_bf16_bits(vals) if self.bits16 else vals


def storage_of(a: np.ndarray) -> tuple:
    """(key, first element, elements) of the memory array a views: arrays over the same
    memory with the same element size share the key (the memory's first byte and that
    size), and a's elements sit from the first element on, counted in a's element size."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    start = root.__array_interface__["data"][0]
    return ((start, a.itemsize), (a.__array_interface__["data"][0] - start) // a.itemsize,
            root.nbytes // a.itemsize)


class _Access:
    """Who touched each scalar element of one parameter's storage in this launch (shared by
    every parameter over the same storage): the cube that stored it (-1: none) and the cube
    that loaded it (-1: none, -2: more than one)."""

    __slots__ = ("stored", "loaded")

    def __init__(self, n: int):
        self.stored = np.full(n, -1, np.int64)
        self.loaded = np.full(n, -1, np.int64)


class _Frame:
    __slots__ = ("brk", "cont")

    def __init__(self, n: int):
        self.brk = np.zeros(n, bool)
        self.cont = np.zeros(n, bool)


# ---- the machine ---------------------------------------------------------------------------

class _Machine:
    def __init__(self, kernel: ir.Kernel, cc, cd, plane_size: int, args: list,
                 races: bool = False):
        self.kernel = kernel
        self.races = races
        self.access: dict[int, tuple[_Access, int, int]] = {}  # id(param) -> (acc, lanes, at)
        self._by_storage: dict[tuple, _Access] = {}
        self.cc, self.cd, self.ps = cc, cd, plane_size
        self.U = cd[0] * cd[1] * cd[2]
        self.C = cc[0] * cc[1] * cc[2]
        self.N = n = self.U * self.C
        self.g = np.arange(n, dtype=np.int64)
        self.unit = self.g % self.U
        self.cube = self.g // self.U
        self.vars: dict[ir.Var, np.ndarray] = {}
        self.consts: dict[int, np.ndarray] = {}
        self.builtins: dict[str, np.ndarray] = {}
        self.returned = np.zeros(n, bool)
        self.frames: list[_Frame] = []
        self._planes = None
        self.mems: dict[int, _Mem] = {}
        self.scalars: dict[int, np.ndarray] = {}
        for p, a in zip(kernel.params, args, strict=True):
            self._bind(p, a)
        for s in kernel.shared:
            self.mems[id(s)] = _Mem(s, np.zeros(self._shape(s.type, self.C * s.size),
                                                _dtype(s.type)), s.size, self.cube * s.size)
        for lo in kernel.locals:
            self.mems[id(lo)] = _Mem(lo, np.zeros(self._shape(lo.type, n * lo.size),
                                                  _dtype(lo.type)), lo.size, self.g * lo.size)
        self.handlers: dict[type, Callable] = {
            ir.Assign: self._assign, ir.Unary: self._unary, ir.Binary: self._binary,
            ir.Ternary: self._ternary, ir.Select: self._select, ir.Cast: self._cast,
            ir.Bitcast: self._bitcast,
            ir.Extract: self._extract, ir.Insert: self._insert, ir.Load: self._load,
            ir.Store: self._store, ir.Meta: self._meta, ir.Builtin: self._builtin,
            ir.Atomic: self._atomic, ir.Plane: self._plane, ir.SyncCube: _noop,
            ir.If: self._if, ir.Loop: self._loop, ir.Range: self._range,
            ir.Break: self._break, ir.Continue: self._continue, ir.Return: self._return,
        }

    @staticmethod
    def _shape(t: Type, n: int) -> tuple:
        return (n,) if t.lanes == 1 else (n, t.lanes)

    def _bind(self, p: ir.Param, a) -> None:
        if p.kind == "scalar":
            if isinstance(a, np.ndarray) and a.size == 1:
                a = a.reshape(()).item()
            self.scalars[id(p)] = _const_array(a, p.type)
            return
        shape = strides = None
        if isinstance(a, Packed):
            if p.type != u32 or a.words.dtype != np.uint32:
                raise TypeError(f"packed argument {p.name} must be u32 words of a u32 "
                                f"parameter")
            self.mems[id(p)] = _Mem(p, a.words.reshape(-1), a.words.size, None, False,
                                    a.shape or (a.length,), a.strides or (1,), a.length)
            return
        if isinstance(a, tuple):
            a, shape, strides = a
        if not isinstance(a, np.ndarray):
            raise TypeError(f"argument {p.name} must be a NumPy array, got {type(a).__name__}")
        want = np.dtype(np.uint16) if p.type.elem == bf16 else p.type.elem.np
        if a.dtype != want:
            raise TypeError(f"argument {p.name} must hold {want} ({p.type.elem}), got {a.dtype}")
        if shape is None:
            shape = a.shape if a.ndim else (a.size,)
            strides = tuple(s // a.itemsize for s in a.strides) if a.ndim else (1,)
        if p.kind == "tensor" and p.rank and len(shape) != p.rank:
            raise ValueError(f"tensor {p.name} has rank {p.rank}, got shape {tuple(shape)}")
        if not a.flags.c_contiguous:
            raise ValueError(f"argument {p.name} must be contiguous")  # stores need a view
        lanes = p.type.lanes
        # whole lines only: a view's storage may end in part of a line (the first 2 of 5
        # floats as lines of 2), which no line index reaches (the cpu runtime's length is
        # in whole lines too); a reduce over such a view raised here
        flat = a.reshape(-1) if lanes == 1 else \
            a.reshape(-1)[:a.size - a.size % lanes].reshape(-1, lanes)
        self.mems[id(p)] = _Mem(p, flat, flat.shape[0], None, p.type.elem == bf16,
                                tuple(int(s) for s in shape), tuple(int(s) for s in strides))
        if self.races:
            self._track(p, a, lanes)

    def _track(self, p: ir.Param, a: np.ndarray, lanes: int) -> None:
        """Race bookkeeping for p, shared with the other parameters over a's storage."""
        key, at, size = storage_of(a)
        acc = self._by_storage.get(key)
        if acc is None:
            acc = self._by_storage[key] = _Access(size)
        self.access[id(p)] = (acc, lanes, at)

    # ---- values --------------------------------------------------------------------------
    def val(self, x) -> np.ndarray:
        if isinstance(x, ir.Var):
            v = self.vars.get(x)
            if v is None:
                v = self.vars[x] = np.zeros(self._shape(x.type, self.N), _dtype(x.type))
            return v
        # keyed by identity: Const equality would merge 0.0 with -0.0
        v = self.consts.get(id(x))
        if v is None:
            v = self.consts[id(x)] = _const_array(x.value, x.type)
        return v

    def full(self, x, t: Type | None = None) -> np.ndarray:
        v = self.val(x) if isinstance(x, (ir.Var, ir.Const)) else x
        t = t or x.type
        return np.broadcast_to(v, self._shape(t, self.N))

    def set(self, var: ir.Var, value, m: np.ndarray, full: bool) -> None:
        t = var.type
        v = np.asarray(value)
        if t.elem == bf16:
            v = round_bf16(v)
        elif v.dtype != _dtype(t):
            v = v.astype(_dtype(t))
        shape = self._shape(t, self.N)
        if full:
            self.vars[var] = np.broadcast_to(v, shape)  # var arrays are never written in place
        else:
            mm = m if t.lanes == 1 else m[:, None]
            self.vars[var] = np.where(mm, v, self.val(var))

    # ---- execution -----------------------------------------------------------------------
    def execute(self) -> None:
        self.block(self.kernel.body, np.ones(self.N, bool))

    def dead(self) -> np.ndarray:
        if self.frames:
            f = self.frames[-1]
            return self.returned | f.brk | f.cont
        return self.returned

    def block(self, block: ir.Block, m: np.ndarray) -> None:
        if not m.any():
            return
        full = bool(m.all())
        for op in block:
            self.handlers[type(op)](op, m, full)
            if isinstance(op, (ir.If, ir.Loop, ir.Range, ir.Break, ir.Continue, ir.Return)):
                m = m & ~self.dead()
                if not m.any():
                    return
                full = bool(m.all())

    def _if(self, op: ir.If, m, full) -> None:
        c = np.broadcast_to(self.val(op.cond), (self.N,))
        then_m, else_m = m & c, m & ~c
        self.block(op.then, then_m)
        if op.orelse:
            self.block(op.orelse, else_m)

    def _iterations(self, op):
        yield from range(MAX_LOOP_ITERATIONS)
        raise IRError(f"loop still running after {MAX_LOOP_ITERATIONS} iterations "
                      f"(an infinite loop?)", op.loc)

    def _loop(self, op: ir.Loop, m, full) -> None:
        f = _Frame(self.N)
        self.frames.append(f)
        live = m.copy()
        try:
            for _ in self._iterations(op):
                live &= ~(f.brk | self.returned)
                if not live.any():
                    break
                f.cont[:] = False
                self.block(op.body, live)
        finally:
            self.frames.pop()

    def _range(self, op: ir.Range, m, full) -> None:
        t = op.var.type
        dt = _dtype(t)
        # count in int64 so the counter cannot wrap past `end` in narrow int types
        wide = np.dtype(np.int64) if dt.kind in "iu" and dt.itemsize < 8 else dt
        i = np.array(self.full(op.start, t), dtype=wide)
        end = np.array(self.full(op.end, t), dtype=wide)
        f = _Frame(self.N)
        self.frames.append(f)
        live = m.copy()
        step = wide.type(op.step) if dt.kind in "iuf" else op.step
        try:
            for _ in self._iterations(op):
                live &= ~(f.brk | self.returned)
                live &= (i < end) if op.step > 0 else (i > end)
                if not live.any():
                    break
                f.cont[:] = False
                lf = bool(live.all())
                self.set(op.var, i, live, lf)
                self.block(op.body, live)
                i = np.where(live, i + step, i).astype(wide)
        finally:
            self.frames.pop()

    def _break(self, op, m, full) -> None:
        if not self.frames:
            raise IRError("break outside a loop", op.loc)
        self.frames[-1].brk |= m

    def _continue(self, op, m, full) -> None:
        if not self.frames:
            raise IRError("continue outside a loop", op.loc)
        self.frames[-1].cont |= m

    def _return(self, op, m, full) -> None:
        self.returned |= m

    # ---- plain ops -----------------------------------------------------------------------
    def _assign(self, op: ir.Assign, m, full) -> None:
        self.set(op.dst, self.val(op.src), m, full)

    def _unary(self, op: ir.Unary, m, full) -> None:
        self.set(op.dst, _unary(op.op, self.val(op.a), op.a.type), m, full)

    def _binary(self, op: ir.Binary, m, full) -> None:
        self.set(op.dst, _binary(op.op, self.val(op.a), self.val(op.b), op.a.type), m, full)

    def _ternary(self, op: ir.Ternary, m, full) -> None:
        a, b, c = self.val(op.a), self.val(op.b), self.val(op.c)
        e = op.dst.type.elem
        if op.op == "fma":
            r = _f64(a) * _f64(b) + _f64(c) if e.is_float else a * b + c
        elif op.op == "clamp":
            r = np.fmin(np.fmax(a, b), c) if e.is_float else np.minimum(np.maximum(a, b), c)
        else:
            raise IRError(f"unknown ternary op {op.op}", op.loc)
        self.set(op.dst, r, m, full)

    def _select(self, op: ir.Select, m, full) -> None:
        c = self.val(op.cond)
        if op.dst.type.lanes > 1 and op.cond.type.lanes == 1:
            c = np.asarray(c)[..., None]
        self.set(op.dst, np.where(c, self.val(op.a), self.val(op.b)), m, full)

    def _cast(self, op: ir.Cast, m, full) -> None:
        self.set(op.dst, _cast(self.val(op.a), op.a.type, op.dst.type), m, full)

    def _bitcast(self, op: ir.Bitcast, m, full) -> None:
        x = np.ascontiguousarray(self.val(op.a), dtype=op.a.type.elem.np)
        self.set(op.dst, x.view(op.dst.type.elem.np), m, full)

    def _extract(self, op: ir.Extract, m, full) -> None:
        v = self.val(op.vec)
        self.set(op.dst, v if op.vec.type.lanes == 1 else v[..., op.lane], m, full)

    def _insert(self, op: ir.Insert, m, full) -> None:
        if op.vec.type.lanes == 1:  # a line of 1 is the scalar itself
            self.set(op.dst, self.val(op.value), m, full)
            return
        r = np.array(self.full(op.vec))
        r[:, op.lane] = self.val(op.value)
        self.set(op.dst, r, m, full)

    def _builtin(self, op: ir.Builtin, m, full) -> None:
        self.set(op.dst, self.builtin(op.name), m, full)

    def builtin(self, name: str) -> np.ndarray:
        v = self.builtins.get(name)
        if v is None:
            v = self.builtins[name] = self._compute_builtin(name).astype(np.uint32)
        return v

    def _compute_builtin(self, name: str) -> np.ndarray:
        (dx, dy, dz), (cx, cy, cz) = self.cd, self.cc
        u, c = self.unit, self.cube
        table = {
            "UNIT_POS": lambda: u, "UNIT_POS_X": lambda: u % dx,
            "UNIT_POS_Y": lambda: (u // dx) % dy, "UNIT_POS_Z": lambda: u // (dx * dy),
            "CUBE_POS": lambda: c, "CUBE_POS_X": lambda: c % cx,
            "CUBE_POS_Y": lambda: (c // cx) % cy, "CUBE_POS_Z": lambda: c // (cx * cy),
            "CUBE_DIM": lambda: self.U, "CUBE_DIM_X": lambda: dx, "CUBE_DIM_Y": lambda: dy,
            "CUBE_DIM_Z": lambda: dz, "CUBE_COUNT": lambda: self.C, "CUBE_COUNT_X": lambda: cx,
            "CUBE_COUNT_Y": lambda: cy, "CUBE_COUNT_Z": lambda: cz,
            "ABSOLUTE_POS": lambda: self.g,
            "ABSOLUTE_POS_X": lambda: self.builtin("CUBE_POS_X").astype(np.int64) * dx
            + self.builtin("UNIT_POS_X"),
            "ABSOLUTE_POS_Y": lambda: self.builtin("CUBE_POS_Y").astype(np.int64) * dy
            + self.builtin("UNIT_POS_Y"),
            "ABSOLUTE_POS_Z": lambda: self.builtin("CUBE_POS_Z").astype(np.int64) * dz
            + self.builtin("UNIT_POS_Z"),
            "PLANE_DIM": lambda: self.ps, "UNIT_POS_PLANE": lambda: u % self.ps,
        }
        if name not in table:
            raise IRError(f"unknown builtin {name}")
        return np.broadcast_to(np.asarray(table[name](), dtype=np.int64), (self.N,))

    def _meta(self, op: ir.Meta, m, full) -> None:
        mem = self.mems.get(id(op.mem))
        if mem is None:
            raise IRError(f"{op.what} of {op.mem!r}, which has no storage", op.loc)
        if op.what == "len":
            r = np.asarray(mem.length)
        elif op.what in ("shape", "stride"):
            table = np.asarray(mem.shape if op.what == "shape" else mem.strides, np.int64)
            d = np.asarray(self.val(op.dim)).astype(np.int64)
            ok = (d >= 0) & (d < table.size)
            r = np.where(ok, table[np.where(ok, d, 0)] if table.size else 0, 0)
        elif op.what == "rank":
            r = np.asarray(len(mem.shape))
        else:
            raise IRError(f"unknown meta {op.what}", op.loc)
        self.set(op.dst, r.astype(np.int64).astype(np.uint32), m, full)

    # ---- memory --------------------------------------------------------------------------
    def _address(self, op, mem_ref, index, m, what: str):
        """(mem, flat addresses of all units) after checking the active units' indices."""
        mem = self.mems.get(id(mem_ref))
        if mem is None:
            raise IRError(f"{what} of {mem_ref!r}, which is not an array", op.loc)
        raw = self.full(index)
        idx = raw.astype(np.int64)
        bad = m & ((idx < 0) | (idx >= mem.size))
        if raw.dtype == np.uint64:
            bad |= m & (raw > np.uint64(np.iinfo(np.int64).max))
        if bad.any():
            i = raw[np.argmax(bad)]
            raise IRError(f"out-of-bounds {what}: index {i} of {mem_ref!r} (size {mem.size})",
                          op.loc)
        idx = np.where(m, idx, 0)
        return mem, idx if mem.base is None else mem.base + idx

    def _load(self, op: ir.Load, m, full) -> None:
        if isinstance(op.mem, ir.Param) and op.mem.kind == "scalar":
            self.set(op.dst, self.scalars[id(op.mem)], m, full)
            return
        mem, addr = self._address(op, op.mem, op.index, m, "load")
        if self.access:
            self._raced(op, op.mem, addr, m, False)
        self.set(op.dst, mem.decode(mem.data[addr]), m, full)

    def _store(self, op: ir.Store, m, full) -> None:
        if isinstance(op.mem, ir.Param) and op.mem.kind == "scalar":
            raise IRError(f"store to the scalar parameter {op.mem!r}", op.loc)
        mem, addr = self._address(op, op.mem, op.index, m, "store")
        if self.access:
            self._raced(op, op.mem, addr, m, True)
        t = op.mem.type
        v = self.full(self._as(op.value, t), t)
        mem.data[addr[m]] = mem.encode(v[m])

    def _raced(self, op, mem_ref, addr: np.ndarray, m: np.ndarray, store: bool) -> None:
        """Raises IRError when this access's active units touch an element that another cube
        stored (or, for a store, loaded) in this launch; records the access."""
        hit = self.access.get(id(mem_ref))
        if hit is None:  # shared or local memory: a cube's own
            return
        acc, lanes, at = hit
        units = np.flatnonzero(m)
        if units.size == 0:
            return
        cubes = self.cube[units]
        el = addr[units] * lanes + at
        if lanes > 1:
            el = (el[:, None] + np.arange(lanes)).reshape(-1)
            cubes = np.repeat(cubes, lanes)
        prev = acc.stored[el]
        bad = (prev >= 0) & (prev != cubes)
        if store:
            seen = acc.loaded[el]
            bad |= (seen == -2) | ((seen >= 0) & (seen != cubes))
            if el.size > 1:  # two cubes storing one element in this very op
                order = np.argsort(el, kind="stable")
                se, sc = el[order], cubes[order]
                twice = (se[1:] == se[:-1]) & (sc[1:] != sc[:-1])
                if twice.any():
                    k = int(np.argmax(twice))
                    self._race(op, mem_ref, int(se[k]) - at, int(sc[k + 1]), int(sc[k]),
                               lanes, "stored")
        if bad.any():
            k = int(np.argmax(bad))
            other = int(prev[k]) if prev[k] >= 0 and prev[k] != cubes[k] else -1
            self._race(op, mem_ref, int(el[k]) - at, int(cubes[k]), other, lanes,
                       "stored" if other >= 0 else "loaded")
        if store:
            acc.stored[el] = cubes
        else:
            seen = acc.loaded[el]
            acc.loaded[el] = np.where(seen == -1, cubes, np.where(seen == cubes, seen, -2))

    def _race(self, op, mem_ref, element: int, cube: int, other: int, lanes: int,
              how: str) -> None:
        what = "stores to" if isinstance(op, ir.Store) else "loads"
        index = element // lanes if lanes > 1 else element
        who = f"cube {self._cube_xyz(other)}" if other >= 0 else "another cube"
        raise IRError(f"data race: cube {self._cube_xyz(cube)} {what} {mem_ref!r}[{index}], "
                      f"which {who} {how} in the same launch (cubes run in any order and "
                      f"at once: give each element one cube, or use atomics)", op.loc)

    def _cube_xyz(self, c: int) -> tuple:
        nx, ny = self.cc[0], self.cc[1]
        return (c % nx, (c // nx) % ny, c // (nx * ny))

    def _as(self, x, t: Type) -> np.ndarray:
        """x's value held as type t (for stores and atomics whose operand type may differ)."""
        v = self.val(x)
        if x.type != t:
            v = _cast(v, x.type, t)
        return round_bf16(v) if t.elem == bf16 else np.asarray(v).astype(_dtype(t))

    def _atomic(self, op: ir.Atomic, m, full) -> None:
        mem, addr = self._address(op, op.mem, op.index, m, "atomic")
        t = op.mem.type
        if t.lanes > 1:
            raise IRError("atomics on lines are not supported", op.loc)
        units = np.nonzero(m)[0]  # ascending: linear order
        a = addr[units]
        vals = self.full(self._as(op.value, t), t)[units]
        e = t.elem
        if op.op in ("add", "sub") and e.is_int:
            old = self._atomic_add_ints(mem, a, vals if op.op == "add" else np.negative(vals))
        else:
            cmps = None if op.cmp is None else self.full(self._as(op.cmp, t), t)[units]
            old = np.empty(len(units), vals.dtype)
            data = mem.data
            for k in range(len(units)):
                j = a[k]
                o = mem.decode(data[j:j + 1])[0]
                new = _scalar_atomic(op.op, o, vals[k], None if cmps is None else cmps[k], e)
                new = np.asarray([new], vals.dtype)
                data[j:j + 1] = mem.encode(round_bf16(new) if e == bf16 else new)
                old[k] = o
        if op.dst is not None:
            r = np.zeros(self.N, old.dtype)
            r[units] = old
            self.set(op.dst, r, m, full)

    @staticmethod
    def _atomic_add_ints(mem: _Mem, a: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Sequential wrapping adds, vectorised: old = initial + earlier adds to that address."""
        order = np.argsort(a, kind="stable")
        fa, fv = a[order], v[order]
        incl = np.cumsum(fv, dtype=fv.dtype)
        excl = incl - fv
        n = len(fa)
        starts = np.ones(n, bool)
        starts[1:] = fa[1:] != fa[:-1]
        first = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
        old_sorted = mem.data[fa] + (excl - excl[first])
        ends = np.ones(n, bool)
        ends[:-1] = starts[1:]
        mem.data[fa[ends]] = (old_sorted + fv)[ends]
        old = np.empty_like(old_sorted)
        old[order] = old_sorted
        return old

    # ---- plane ops -----------------------------------------------------------------------
    def planes(self):
        """(plane of each unit, lane of each unit, grid[plane, lane] -> unit or -1)."""
        if self._planes is None:
            ps = self.ps
            per_cube = -(-self.U // ps)
            pid = self.cube * per_cube + self.unit // ps
            lane = self.unit % ps
            grid = np.full((self.C * per_cube, ps), -1, np.int64)
            grid[pid, lane] = self.g
            self._planes = (pid, lane, grid)
        return self._planes

    def _plane(self, op: ir.Plane, m, full) -> None:
        pid, lane, grid = self.planes()
        t = op.value.type
        e = t.elem
        v = self.full(op.value)
        exists = grid >= 0
        gs = np.where(exists, grid, 0)
        act = exists & m[gs]  # (planes, ps)
        pv = v[gs]  # (planes, ps[, lanes])
        pa = act if t.lanes == 1 else act[..., None]
        o = op.op
        if o in ("broadcast", "shuffle", "shuffle_xor"):
            s = np.asarray(self.full(op.lane, op.lane.type)).astype(np.int64)
            if o == "shuffle_xor":
                s = lane ^ s
            ok = (s >= 0) & (s < self.ps)
            src = grid[pid, np.where(ok, s, 0)]
            ok &= src >= 0
            src = np.where(ok, src, self.g)
            ok &= m[src]
            r = np.where(ok if t.lanes == 1 else ok[:, None], v[src], v)
        elif o in ("all", "any"):
            b = pv != 0
            red = np.where(pa, b, o == "all")
            r = (red.all(axis=1) if o == "all" else red.any(axis=1))[pid]
        elif o in ("max", "min"):
            if e.is_float:
                red = (np.fmax if o == "max" else np.fmin).reduce(np.where(pa, pv, np.nan), 1)
            else:
                info = np.iinfo(pv.dtype) if e.is_int else None
                fill = (info.min if o == "max" else info.max) if info else (o == "min")
                red = np.where(pa, pv, fill).astype(pv.dtype)
                red = red.max(axis=1) if o == "max" else red.min(axis=1)
            r = red[pid]
        elif o in ("sum", "prod", "inclusive_sum", "exclusive_sum", "inclusive_prod",
                   "exclusive_prod"):
            is_sum = o.endswith("sum")
            dt = _F64 if e.is_float else pv.dtype  # floats accumulate in f64, round once
            x = np.where(pa, pv, 0 if is_sum else 1).astype(dt)
            if o in ("sum", "prod"):
                red = x.sum(axis=1, dtype=dt) if is_sum else x.prod(axis=1, dtype=dt)
                r = red[pid]
            else:
                scan = np.cumsum(x, axis=1, dtype=dt) if is_sum else np.cumprod(x, 1, dtype=dt)
                if o.startswith("exclusive"):
                    shifted = np.empty_like(scan)
                    shifted[:, 0] = 0 if is_sum else 1
                    shifted[:, 1:] = scan[:, :-1]
                    scan = shifted
                r = scan[pid, lane]
        else:
            raise IRError(f"unknown plane op {o}", op.loc)
        self.set(op.dst, r, m, full)


def _noop(op, m, full) -> None:
    pass


__all__ = ["MAX_LOOP_ITERATIONS", "Packed", "bf16_bits_to_f32", "f32_to_bf16_bits", "round_bf16",
           "run"]


"""IR ops as SPIR-V instructions (semantics as cube_ir.ir, like codegen/wgsl/expr.py:
int x/0 = 0, shift counts modulo 32, float->int saturating with NaN -> 0)."""
from __future__ import annotations

from cube_ir import ir
from cube_ir.types import Type, Vec, boolean, u32, with_elem

from .emit import BARRIER_SEM, FUNCTION, SCOPE_DEVICE, SCOPE_WG, STORAGE, XYZ, Emitter, Unsupported

FCMP = {"eq": "FOrdEqual", "ne": "FUnordNotEqual", "lt": "FOrdLessThan",
        "le": "FOrdLessThanEqual", "gt": "FOrdGreaterThan", "ge": "FOrdGreaterThanEqual"}
SCMP = {"eq": "IEqual", "ne": "INotEqual", "lt": "SLessThan", "le": "SLessThanEqual",
        "gt": "SGreaterThan", "ge": "SGreaterThanEqual"}
UCMP = {"eq": "IEqual", "ne": "INotEqual", "lt": "ULessThan", "le": "ULessThanEqual",
        "gt": "UGreaterThan", "ge": "UGreaterThanEqual"}


def _bt(t: Type) -> Type:
    return with_elem(t, boolean)


def logical(em: Emitter, name: str, t: Type, a: int, b: int) -> int:
    """OpLogicalAnd/Or on bools of type t. On bool vectors as selects: naga (wgpu's SPIR-V
    front end) accepts the logical instructions on scalars only."""
    if t.lanes == 1:
        return em.m.op(name, em.t(t), a, b)
    if name == "LogicalOr":
        return em.m.op("Select", em.t(t), a, em.c(True, t), b)
    return em.m.op("Select", em.t(t), a, b, em.c(False, t))


def binary(em: Emitter, o: str, t: Type, a: int, b: int) -> int:
    m, e, rt = em.m, t.elem, em.t(t)
    if o in FCMP:
        bt = em.t(_bt(t))
        if e.is_bool:
            name = {"eq": "LogicalEqual", "ne": "LogicalNotEqual"}.get(o)
            if name is None:
                raise Unsupported(f"{o} on bool is not supported by the spirv target")
            return m.op(name, bt, a, b)
        return m.op((FCMP if e.is_float else SCMP if e.is_signed else UCMP)[o], bt, a, b)
    if e.is_bool:
        name = {"and": "LogicalAnd", "or": "LogicalOr", "min": "LogicalAnd",
                "max": "LogicalOr", "xor": "LogicalNotEqual"}.get(o)
        if name is None:
            raise Unsupported(f"{o} on bool is not supported by the spirv target")
        if name in ("LogicalAnd", "LogicalOr"):
            return logical(em, name, t, a, b)
        return m.op(name, rt, a, b)
    if e.is_float:
        simple = {"add": "FAdd", "sub": "FSub", "mul": "FMul", "div": "FDiv", "rem": "FRem"}
        if o in simple:
            return m.op(simple[o], rt, a, b)
        if o in ("min", "max"):
            return em.ext(t, "NMin" if o == "min" else "NMax", a, b)
        if o == "pow":
            return _fpow(em, t, a, b)
        raise Unsupported(f"float {o}")
    simple = {"add": "IAdd", "sub": "ISub", "mul": "IMul", "and": "BitwiseAnd",
              "or": "BitwiseOr", "xor": "BitwiseXor"}
    if o in simple:
        return m.op(simple[o], rt, a, b)
    if o in ("min", "max"):
        return em.ext(t, ("S" if e.is_signed else "U") + o.capitalize(), a, b)
    if o in ("shl", "shr"):
        n = m.op("BitwiseAnd", rt, b, em.c(31, t))
        name = "ShiftLeftLogical" if o == "shl" else (
            "ShiftRightArithmetic" if e.is_signed else "ShiftRightLogical")
        return m.op(name, rt, a, n)
    if o in ("div", "rem"):
        bt = em.t(_bt(t))
        zero = em.c(0, t)
        bz = m.op("IEqual", bt, b, zero)
        if e.is_signed:  # x / -1 as a negation: INT_MIN / -1 wraps instead of being UB
            bm = m.op("IEqual", bt, b, em.c(-1, t))
            bad = logical(em, "LogicalOr", _bt(t), bz, bm)
            d = m.op("Select", rt, bad, em.c(1, t), b)
            if o == "div":
                q = m.op("SDiv", rt, a, d)
                q = m.op("Select", rt, bm, m.op("SNegate", rt, a), q)
                return m.op("Select", rt, bz, zero, q)
            return m.op("Select", rt, bad, zero, m.op("SRem", rt, a, d))
        d = m.op("Select", rt, bz, em.c(1, t), b)
        r = m.op("UDiv" if o == "div" else "UMod", rt, a, d)
        return m.op("Select", rt, bz, zero, r)
    raise Unsupported(f"{o} on {t} is not supported by the spirv target")


def _fpow(em: Emitter, t: Type, a: int, b: int) -> int:
    """pow with NumPy's real results: |x|^y, negated for odd integer y, NaN for x < 0 and
    a non-integer y, 1 for y = 0."""
    m, rt, bt = em.m, em.t(t), em.t(_bt(t))
    r = em.ext(t, "Pow", em.ext(t, "FAbs", a), b)
    yint = m.op("FOrdEqual", bt, b, em.ext(t, "Trunc", b))
    half = em.ext(t, "Trunc", m.op("FMul", rt, b, em.c(0.5, t)))
    odd = m.op("FOrdEqual", bt, em.ext(t, "FAbs", m.op("FSub", rt, b, m.op(
        "FMul", rt, half, em.c(2.0, t)))), em.c(1.0, t))
    odd = logical(em, "LogicalAnd", _bt(t), yint, odd)
    neg = m.op("Select", rt, yint, m.op("Select", rt, odd, m.op("FNegate", rt, r), r),
               em.c(float("nan"), t))
    res = m.op("Select", rt, m.op("FOrdLessThan", bt, a, em.c(0.0, t)), neg, r)
    return m.op("Select", rt, m.op("FOrdEqual", bt, b, em.c(0.0, t)), em.c(1.0, t), res)


def unary(em: Emitter, o: str, t: Type, a: int) -> int:
    m, e, rt = em.m, t.elem, em.t(t)
    if o == "not":
        if e.is_bool:
            return m.op("LogicalNot", rt, a)
        return binary(em, "eq", t, a, em.c(0, t))
    if o == "bitnot":
        return m.op("LogicalNot" if e.is_bool else "Not", rt, a)
    if o == "neg":
        if e.is_float:
            return m.op("FNegate", rt, a)
        return m.op("SNegate", rt, a)
    if o == "abs":
        if e.is_float:
            return em.ext(t, "FAbs", a)
        return em.ext(t, "SAbs", a) if e.is_signed else a
    if not e.is_float:
        raise Unsupported(f"{o} on {t}")
    simple = {"sqrt": "Sqrt", "floor": "Floor", "ceil": "Ceil", "round": "RoundEven",
              "sin": "Sin", "cos": "Cos", "exp": "Exp", "log": "Log", "tanh": "Tanh"}
    if o in simple:
        return em.ext(t, simple[o], a)
    if o == "rsqrt":
        return m.op("FDiv", rt, em.c(1.0, t), em.ext(t, "Sqrt", a))
    if o == "log1p":  # log(u) * x / (u - 1) with u = 1 + x corrects u's rounding
        bt = em.t(_bt(t))
        u = m.op("FAdd", rt, em.c(1.0, t), a)
        d = m.op("FSub", rt, u, em.c(1.0, t))
        r = m.op("FDiv", rt, m.op("FMul", rt, em.ext(t, "Log", u), a), d)
        return m.op("Select", rt, m.op("FOrdEqual", bt, d, em.c(0.0, t)), a, r)
    if o == "erf":
        return _erf(em, t, a)
    raise Unsupported(f"unary {o}")


def _erf(em: Emitter, t: Type, x: int) -> int:
    """N. Juffa's erff, as codegen.llvm.math."""
    m, rt, bt = em.m, em.t(t), em.t(_bt(t))

    def fma(a, b, c):
        return em.ext(t, "Fma", a, b, c)

    def k(v):
        return em.c(v, t)
    ax = em.ext(t, "FAbs", x)
    s = m.op("FMul", rt, x, x)
    r = fma(k(-1.72853470e-5), ax, k(3.83197126e-4))
    u = fma(k(-3.88396438e-3), ax, k(2.42546219e-2))
    r = fma(r, s, u)
    for c in (-1.06777877e-1, -6.34846687e-1, -1.28717512e-1):
        r = fma(r, ax, k(c))
    r = fma(r, ax, m.op("FNegate", rt, ax))
    big = m.op("FSub", rt, k(1.0), em.ext(t, "Exp", r))
    sign = m.op("Select", rt, m.op("FOrdLessThan", bt, x, k(0.0)), k(-1.0), k(1.0))
    big = m.op("FMul", rt, big, sign)
    sm = k(-5.96761703e-4)
    for c in (4.99119423e-3, -2.67681349e-2, 1.12819925e-1, -3.76125336e-1, 1.28379166e-1):
        sm = fma(sm, s, k(c))
    sm = fma(sm, x, x)
    return m.op("Select", rt, m.op("FOrdGreaterThan", bt, ax, k(0.927734375)), big, sm)


def cast(em: Emitter, src: Type, dst: Type, x: int) -> int:
    m = em.m
    if src == dst:
        return x
    if isinstance(dst, Vec) and not isinstance(src, Vec):
        y = cast(em, src, dst.elem, x)
        return m.op("CompositeConstruct", em.t(dst), *([y] * dst.lanes))
    s, d = src.elem, dst.elem
    rt = em.t(dst)
    if s == d:
        return x
    if d.is_bool:
        return binary(em, "ne", src, x, em.c(0, src))
    if s.is_bool:
        return m.op("Select", rt, x, em.c(1, dst), em.c(0, dst))
    if s.is_float and d.is_float:
        return m.op("FConvert", rt, x)
    if d.is_float:
        return m.op("ConvertSToF" if s.is_signed else "ConvertUToF", rt, x)
    if s.is_float:  # saturate, NaN -> 0
        bt = em.t(_bt(src))
        lo, hi = (-2.0 ** 31, 2147483520.0) if d.is_signed else (0.0, 4294967040.0)
        c = em.ext(src, "NMax", em.ext(src, "NMin", x, em.c(hi, src)), em.c(lo, src))
        r = m.op("ConvertFToS" if d.is_signed else "ConvertFToU", rt, c)
        big = m.op("FOrdGreaterThanEqual", bt, x, em.c(2.0 ** 31 if d.is_signed else 2.0 ** 32,
                                                       src))
        r = m.op("Select", rt, big, em.c(2 ** 31 - 1 if d.is_signed else 2 ** 32 - 1, dst), r)
        return m.op("Select", rt, m.op("IsNan", bt, x), em.c(0, dst), r)
    return m.op("Bitcast", rt, x)  # i32 <-> u32


def emit_op(em: Emitter, op) -> None:
    m = em.m
    match op:
        case ir.Assign(dst=d, src=s):
            em.write(d, em.val_as(s, d.type))
        case ir.Unary(dst=d, op=o, a=a):
            em.write(d, unary(em, o, a.type, em.val(a)))
        case ir.Binary(dst=d, op=o, a=a, b=b):
            t = a.type if not isinstance(a, ir.Const) else b.type
            em.write(d, binary(em, o, t, em.val_as(a, t), em.val_as(b, t)))
        case ir.Ternary(dst=d, op=o, a=a, b=b, c=c):
            t = d.type
            xs = [em.val_as(v, t) for v in (a, b, c)]
            if o == "clamp":
                r = binary(em, "min", t, binary(em, "max", t, xs[0], xs[1]), xs[2])
            elif t.elem.is_float:
                r = em.ext(t, "Fma", *xs)
            else:
                r = binary(em, "add", t, binary(em, "mul", t, xs[0], xs[1]), xs[2])
            em.write(d, r)
        case ir.Select(dst=d, cond=c, a=a, b=b):
            cv = em.val(c)
            if isinstance(d.type, Vec) and not isinstance(c.type, Vec):
                cv = m.op("CompositeConstruct", em.t(_bt(d.type)), *([cv] * d.type.lanes))
            em.write(d, m.op("Select", em.t(d.type), cv, em.val_as(a, d.type),
                             em.val_as(b, d.type)))
        case ir.Cast(dst=d, a=a):
            em.write(d, cast(em, a.type, d.type, em.val(a)))
        case ir.Extract(dst=d, vec=v, lane=n):
            if isinstance(v.type, Vec):
                em.write(d, m.op("CompositeExtract", em.t(d.type), em.val(v), n))
            else:
                em.write(d, em.val_as(v, d.type))
        case ir.Insert(dst=d, vec=v, lane=n, value=x):
            if isinstance(d.type, Vec):
                em.write(d, m.op("CompositeInsert", em.t(d.type), em.val_as(x, d.type.elem),
                                 em.val_as(v, d.type), n))
            else:
                em.write(d, em.val_as(x, d.type))
        case ir.Load(dst=d, mem=mem, index=i):
            _load(em, d, mem, i)
        case ir.Store(mem=mem, index=i, value=v):
            _store(em, mem, i, v)
        case ir.Meta():
            em.write(op.dst, _meta(em, op))
        case ir.Builtin(dst=d, name=n):
            em.write(d, _builtin(em, n))
        case ir.Atomic():
            _atomic(em, op)
        case ir.Plane(dst=d, op=o, value=x):
            if em.k.plane_size != 1:
                raise Unsupported("plane sizes other than 1 on the spirv target")
            if o == "exclusive_sum":
                r = em.c(False if d.type.elem.is_bool else 0, d.type)
            elif o == "exclusive_prod":
                r = em.c(1, d.type)
            else:
                r = em.val_as(x, d.type)
            em.write(d, r)
        case ir.SyncCube():
            m.emit("code", "ControlBarrier", em.u(SCOPE_WG), em.u(SCOPE_WG),
                   em.u(BARRIER_SEM))
        case ir.If(cond=c):
            cv = em.val(c)
            then, merge = m.id(), m.id()
            orelse = m.id() if op.orelse else merge
            m.emit("code", "SelectionMerge", merge, 0)
            m.emit("code", "BranchConditional", cv, then, orelse)
            em.label(then)
            em._block(op.then)
            em.branch(merge)
            if op.orelse:
                em.label(orelse)
                em._block(op.orelse)
                em.branch(merge)
            em.label(merge)
        case ir.Loop(body=body):
            _loop(em, None, body)
        case ir.Range():
            _loop(em, op, op.body)
        case ir.Break():
            em.branch(em.loops[-1][0])
        case ir.Continue():
            em.branch(em.loops[-1][1])
        case ir.Return():
            m.emit("code", "Return")
            em.terminated = True
        case _:  # pragma: no cover
            raise Unsupported(f"spirv codegen: {op!r}")


def _loop(em: Emitter, rng: ir.Range | None, body) -> None:
    m = em.m
    header, first, cont, merge = m.id(), m.id(), m.id(), m.id()
    if rng is not None:
        t = rng.var.type
        end = em.val_as(rng.end, t)
        em.write(rng.var, em.val_as(rng.start, t))
    em.branch(header)
    em.label(header)
    if rng is not None:  # the header computes the test, then merges and branches
        ok = binary(em, "lt" if rng.step > 0 else "gt", t, em.val(rng.var), end)
        m.emit("code", "LoopMerge", merge, cont, 0)
        m.emit("code", "BranchConditional", ok, first, merge)
    else:
        m.emit("code", "LoopMerge", merge, cont, 0)
        m.emit("code", "Branch", first)
    em.label(first)
    em.loops.append((merge, cont))
    em._block(body)
    em.loops.pop()
    em.branch(cont)
    em.label(cont)
    if rng is not None:
        em.write(rng.var, binary(em, "add", t, em.val(rng.var), em.c(rng.step, t)))
    m.emit("code", "Branch", header)
    em.terminated = True
    em.label(merge)


def _builtin(em: Emitter, name: str) -> int:
    m = em.m
    ut = m.int(32, False)

    def comp(var: str, i: int) -> int:
        v = m.op("Load", m.vec(ut, 3), em.builtin_vars[var])
        return m.op("CompositeExtract", ut, v, i)

    def mul(a, b):
        return m.op("IMul", ut, a, b)

    def add(a, b):
        return m.op("IAdd", ut, a, b)
    cd = [em.u(d) for d in em.cube_dim]
    if name == "UNIT_POS":
        return m.op("Load", ut, em.builtin_vars["lidx"])
    if name == "CUBE_DIM":
        return em.u(em.cube_dim[0] * em.cube_dim[1] * em.cube_dim[2])
    if name in ("CUBE_POS", "ABSOLUTE_POS"):
        w = [comp("wid", i) for i in range(3)]
        n = [comp("nwg", i) for i in range(3)]
        c = add(w[0], mul(n[0], add(w[1], mul(n[1], w[2]))))
        if name == "CUBE_POS":
            return c
        return add(mul(c, _builtin(em, "CUBE_DIM")), _builtin(em, "UNIT_POS"))
    if name == "CUBE_COUNT":
        n = [comp("nwg", i) for i in range(3)]
        return mul(mul(n[0], n[1]), n[2])
    if name == "PLANE_DIM":
        return em.u(1)
    if name == "UNIT_POS_PLANE":
        return em.u(0)
    base, ax = name.rsplit("_", 1)
    i = XYZ.index(ax.lower())
    src = {"UNIT_POS": "lid", "CUBE_POS": "wid", "CUBE_COUNT": "nwg", "ABSOLUTE_POS": "gid"}
    if base == "CUBE_DIM":
        return cd[i]
    return comp(src[base], i)


def _meta(em: Emitter, op: ir.Meta) -> int:
    m, mem = em.m, op.mem
    ut = m.int(32, False)
    if not isinstance(mem, ir.Param):
        return em.u(mem.size if op.what in ("len", "shape") else 1)
    if op.what == "rank":
        return em.u(mem.rank)
    slot = next(s for s in em.abi.slots if s.param is mem)
    if op.what == "len":
        return em.word(slot.meta)
    if mem.kind == "array":
        vals = [m.op("IMul", ut, em.word(slot.meta), em.u(mem.type.lanes))] \
            if op.what == "shape" else [em.u(1)]
    else:
        base = slot.meta + 1 + (0 if op.what == "shape" else mem.rank)
        vals = [em.word(base + d) for d in range(mem.rank)]
    if isinstance(op.dim, ir.Const):
        d = int(op.dim.value)
        return vals[d] if 0 <= d < len(vals) else em.u(0)
    dim = em.val_as(op.dim, u32)
    r = em.u(0)
    for d, v in enumerate(vals):
        hit = m.op("IEqual", m.bool(), dim, em.u(d))
        r = m.op("Select", ut, hit, v, r)
    return r


def _ptr(em: Emitter, mem, i: ir.Value) -> tuple[int, int]:
    m = em.m
    var, sc, elem = em.mems[id(mem)]
    idx = em.val_as(i, u32) if not isinstance(i, ir.Const) else em.u(int(i.value))
    chain = (em.u(0), idx) if sc == STORAGE else (idx,)
    return m.op("AccessChain", m.ptr(sc, elem), var, *chain), sc


def _load(em: Emitter, d: ir.Var, mem, i: ir.Value) -> None:
    m, t = em.m, mem.type
    if isinstance(mem, ir.Param) and mem.kind == "scalar":
        w = em.word(next(s for s in em.abi.slots if s.param is mem).meta)
        e = t.elem
        if e.is_bool:
            x = m.op("INotEqual", m.bool(), w, em.u(0))
        elif e == u32:
            x = w
        else:
            x = m.op("Bitcast", em.t(e), w)
        em.write(d, cast(em, e, d.type, x))
        return
    p, sc = _ptr(em, mem, i)
    if id(mem) in em.atomic:
        scope = SCOPE_WG if sc != STORAGE else SCOPE_DEVICE
        x = m.op("AtomicLoad", em._atomic_elem(t), p, em.u(scope), em.u(0))
        if t.elem.is_float:
            x = m.op("Bitcast", em.t(t), x)
    else:
        x = m.op("Load", em.t(t), p)
    em.write(d, cast(em, t, d.type, x))


def _store(em: Emitter, mem, i: ir.Value, v: ir.Value) -> None:
    m, t = em.m, mem.type
    x = em.val_as(v, t)
    p, sc = _ptr(em, mem, i)
    if id(mem) in em.atomic:
        if t.elem.is_float:
            x = m.op("Bitcast", em._atomic_elem(t), x)
        scope = SCOPE_WG if sc != STORAGE else SCOPE_DEVICE
        m.emit("code", "AtomicStore", p, em.u(scope), em.u(0), x)
    else:
        m.emit("code", "Store", p, x)


def _atomic(em: Emitter, op: ir.Atomic) -> None:
    m, t = em.m, op.mem.type
    e = t.elem
    p, sc = _ptr(em, op.mem, op.index)
    val = em.val_as(op.value, t)
    if sc == FUNCTION:  # a unit-private array: plain read-modify-write
        old = m.op("Load", em.t(t), p)
        new = _rmw(em, op, t, old, val)
        m.emit("code", "Store", p, new)
    else:
        it = em._atomic_elem(t)
        scope, sem = em.u(SCOPE_WG if sc != STORAGE else SCOPE_DEVICE), em.u(0)
        if e.is_float or op.op == "cas":
            old = _cas(em, op, t, p, val, scope, lambda: _ptr(em, op.mem, op.index)[0])
        else:
            name = {"add": "AtomicIAdd", "sub": "AtomicISub", "and": "AtomicAnd",
                    "or": "AtomicOr", "xor": "AtomicXor", "exchange": "AtomicExchange",
                    "min": "AtomicSMin" if e.is_signed else "AtomicUMin",
                    "max": "AtomicSMax" if e.is_signed else "AtomicUMax"}[op.op]
            old = m.op(name, it, p, scope, sem, val)
    if op.dst is not None:
        em.write(op.dst, cast(em, t, op.dst.type, old))


def _rmw(em: Emitter, op: ir.Atomic, t: Type, old: int, val: int) -> int:
    if op.op == "exchange":
        return val
    if op.op == "cas":
        eq = binary(em, "eq", t, old, em.val_as(op.cmp, t))
        return em.m.op("Select", em.t(t), eq, val, old)
    return binary(em, op.op, t, old, val)


def _cas(em: Emitter, op: ir.Atomic, t: Type, p: int, val: int, scope: int, ptr_again) -> int:
    """A compare-exchange loop on the bits (float RMW ops; `cas` is one exchange). Inside
    the loop everything is re-derived from variables: naga's SPIR-V front end rejects
    values that cross into a loop body."""
    m = em.m
    it = em._atomic_elem(t)
    f = t.elem.is_float
    sem = em.u(0)
    if op.op == "cas":
        cmp = em.val_as(op.cmp, t)
        bits = (lambda x: m.op("Bitcast", it, x)) if f else (lambda x: x)
        old = m.op("AtomicCompareExchange", it, p, scope, sem, sem, bits(val), bits(cmp))
        return m.op("Bitcast", em.t(t), old) if f else old
    cell, vcell, flag = em.scratch(it), em.scratch(em.t(t)), em.scratch(m.bool())
    m.emit("code", "Store", vcell, val)
    m.emit("code", "Store", cell, m.op("AtomicLoad", it, p, scope, sem))
    header, body, cont, merge = m.id(), m.id(), m.id(), m.id()
    em.branch(header)
    em.label(header)
    m.emit("code", "LoopMerge", merge, cont, 0)
    m.emit("code", "Branch", body)
    em.label(body)
    cur = m.op("Load", it, cell)
    p = ptr_again()
    new = _rmw(em, op, t, m.op("Bitcast", em.t(t), cur), m.op("Load", em.t(t), vcell))
    got = m.op("AtomicCompareExchange", it, p, scope, sem, sem, m.op("Bitcast", it, new), cur)
    m.emit("code", "Store", cell, got)
    m.emit("code", "Store", flag, m.op("IEqual", m.bool(), got, cur))
    m.emit("code", "Branch", cont)
    em.label(cont)  # the exit test sits in the continue block (a `break if`)
    m.emit("code", "BranchConditional", m.op("Load", m.bool(), flag), merge, header)
    em.label(merge)
    return m.op("Bitcast", em.t(t), m.op("Load", it, cell))


__all__ = ["binary", "cast", "emit_op", "unary"]

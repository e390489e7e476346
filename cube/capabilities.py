"""Check a kernel against its target's declared capability table, before any vendor compiler.

The table is `runtimes.base.capabilities(target, features)`: the device's `Features` (types,
atomic types, plane ops, limits) combined with what the target's code generator can emit
(`runtimes.base.TARGET_LIMITS`). Every op of the optimised IR is checked: the types of the
values it reads and writes (an index included), atomics by (op, type, memory space), plane
ops, shared memory and the cube dim. A miss is a `CompileError` at the op's source location
that names the capability, the target and what the kernel does; its text contains "<what> is
not supported by the <target> target". So whatever the frontend accepts either compiles on
the target or is refused here, never by the backend compiler."""
from __future__ import annotations

import typing

from cube_ir import ir
from runtimes.base import ATOMIC_OPS, CAS_NO_RESULT, SPACES, Capabilities, capabilities

from .errors import CapabilityError, CompileError

_CAPABILITY = {"f16": "f16", "bf16": "bf16", "f64": "f64", "i64": "int64", "u64": "int64"}


def table_for(target) -> Capabilities | None:
    """The capability table for a frontend `Target` (None: the bare IR, no target)."""
    if target.features is None:
        return None
    return capabilities(target.name, target.features)


def check_features(kernel: ir.Kernel, target) -> None:
    """A kernel needing what the target lacks fails here with a located CompileError."""
    caps = table_for(target)
    if caps is not None:
        check(kernel, caps)


def check(kernel: ir.Kernel, caps: Capabilities) -> None:
    """Raise the first miss that has a source location (ops a pass added, such as the
    bounds pass's length casts, have none), else the first miss."""
    misses: list = []  # (op, error) in program order
    for op in ir.walk(kernel.body):
        try:
            _check_op(op, caps)
        except CompileError as e:
            misses.append((op, e))
    located = [(op, e) for op, e in misses if e.loc]
    if located:
        # the bounds pass's guard (`lt` on the index as u64) shares its access's location
        # and comes first: report the access itself, which names what the user wrote
        loc = located[0][1].loc
        same = [(op, e) for op, e in located if e.loc == loc]
        raise next((e for op, e in same if isinstance(op, _MEMORY_OPS)), same[0][1])
    if misses:
        raise misses[0][1]
    _check_kernel(kernel, caps)


_MEMORY_OPS = (ir.Load, ir.Store, ir.Atomic)


def _check_op(op, caps: Capabilities) -> None:
    _check_types(op, caps)
    if isinstance(op, ir.Atomic):
        _check_atomic(op, caps)
    elif isinstance(op, ir.Plane) and not caps.plane_ops:
        raise CapabilityError(f"plane_{op.op} (capability plane_ops) is not supported by "
                              f"the {caps.target} target: it has no plane (warp/subgroup) "
                              f"operations", op.loc, capability="plane_ops",
                              target=caps.target)


def _check_kernel(kernel: ir.Kernel, caps: Capabilities) -> None:
    """Declarations and limits: memories of a missing type, shared bytes, the cube dim."""
    first_use: dict[int, typing.Any] = {}  # id(memory) -> the first op touching it
    for op in ir.walk(kernel.body):
        mem = getattr(op, "mem", None)
        if mem is not None:
            first_use.setdefault(id(mem), op)
    for m in [*kernel.params, *kernel.shared, *kernel.locals]:
        e = m.type.elem.name
        if not caps.has_type(e):  # declared but never touched: still part of the binding
            op = first_use.get(id(m))
            raise _type_error(e, caps, f"{_mem_name(m)} holds {e} elements",
                              op.loc if op is not None else None)
    shared = sum(s.size * (s.type.elem.bits // 8) * s.type.lanes for s in kernel.shared)
    if shared > caps.max_shared_bytes:
        op = next((first_use[id(s)] for s in kernel.shared if id(s) in first_use), None)
        raise CapabilityError(
            f"shared memory of {shared} bytes exceeds the {caps.target} limit of "
            f"{caps.max_shared_bytes} bytes (capability max_shared_bytes: {shared} bytes is "
            f"not supported by the {caps.target} target)", op.loc if op is not None else None,
            capability="max_shared_bytes", target=caps.target)
    if kernel.cube_dim is not None:
        n = kernel.cube_dim[0] * kernel.cube_dim[1] * kernel.cube_dim[2]
        if n > caps.max_cube_dim:
            raise CapabilityError(f"a cube of {n} units (capability max_cube_dim) is not "
                                  f"supported by the {caps.target} target (at most "
                                  f"{caps.max_cube_dim})", capability="max_cube_dim",
                                  target=caps.target)


def _check_types(op, caps: Capabilities) -> None:
    w = ir.writes(op)
    if w is not None and not caps.has_type(w.type.elem.name):
        raise _type_error(w.type.elem.name, caps, f"this {_op_name(op)} gives {w.type}",
                          op.loc)
    for v in ir.reads(op):
        if not caps.has_type(v.type.elem.name):
            role = "an index of" if v is getattr(op, "index", None) else "a value of"
            raise _type_error(v.type.elem.name, caps,
                              f"this {_op_name(op)} takes {role} {v.type}", op.loc)
    mem = getattr(op, "mem", None)
    if mem is not None and not caps.has_type(mem.type.elem.name):
        raise _type_error(mem.type.elem.name, caps,
                          f"{_op_name(op)}, which holds {mem.type} elements", op.loc)


def _type_error(name: str, caps: Capabilities, what: str, loc) -> CapabilityError:
    cap = _CAPABILITY.get(name, name)
    return CapabilityError(f"{name} is not supported by the {caps.target} target (capability "
                           f"{cap}): {what}", loc, capability=cap, target=caps.target)


def _op_name(op) -> str:
    mem = getattr(op, "mem", None)
    match op:
        case ir.Load():
            return f"load from {_mem_name(mem)}"
        case ir.Store():
            return f"store to {_mem_name(mem)}"
        case ir.Atomic():
            return f"atomic_{op.op} on {_mem_name(mem)}"
        case ir.Binary() | ir.Unary() | ir.Ternary() | ir.Plane():
            return f"'{op.op}'"
        case ir.Cast():
            return f"cast from {op.a.type} to {op.dst.type}"
        case ir.Meta():
            return f"{op.what} of {_mem_name(mem)}"
        case ir.Range():
            return "loop"
    return type(op).__name__.lower()


def _mem_name(m) -> str:
    if isinstance(m, ir.Param):
        return f"'{m.name}'"
    kind = "shared memory" if isinstance(m, ir.SharedArray) else "local array"
    return f"{kind} '{m.name}'" if m.name else kind


def _space(m) -> str:
    if isinstance(m, ir.SharedArray):
        return "shared"
    return "local" if isinstance(m, ir.LocalArray) else "global"


def _check_atomic(op: ir.Atomic, caps: Capabilities) -> None:
    t, space = op.mem.type.elem.name, _space(op.mem)
    key = CAS_NO_RESULT if op.op == "cas" and op.dst is None else op.op
    if caps.atomic(key, t, space) is not None:
        return
    have = [o for o in (*ATOMIC_OPS, CAS_NO_RESULT) if caps.atomic(o, t, space)]
    elsewhere = [s for s in SPACES if s != space and caps.atomic(key, t, s)]
    note = " (whose old value is used)" if op.op == "cas" else ""
    hint = f"; atomic_{op.op} on {t} works in {' and '.join(elsewhere)} memory" \
        if elsewhere else ""
    raise CapabilityError(
        f"atomic_{op.op}{note} on {t} in {space} memory is not supported by the "
        f"{caps.target} target (capability atomic {op.op}/{t}/{space}; on {t} in {space} "
        f"memory it has {', '.join(have) or 'no atomics'}{hint})", op.loc,
        capability=f"atomic {key}/{t}/{space}", target=caps.target)

"""A readable text form of the IR (`cube dump --target ir`)."""
from __future__ import annotations

from . import ir


def _v(x) -> str:
    return repr(x)


def format_op(op) -> str:
    match op:
        case ir.Assign(dst=d, src=s):
            return f"{d}: {d.type} = {_v(s)}"
        case ir.Unary(dst=d, op=o, a=a):
            return f"{d}: {d.type} = {o} {_v(a)}"
        case ir.Binary(dst=d, op=o, a=a, b=b):
            return f"{d}: {d.type} = {o} {_v(a)}, {_v(b)}"
        case ir.Ternary(dst=d, op=o, a=a, b=b, c=c):
            return f"{d}: {d.type} = {o} {_v(a)}, {_v(b)}, {_v(c)}"
        case ir.Select(dst=d, cond=c, a=a, b=b):
            return f"{d}: {d.type} = select {_v(c)} ? {_v(a)} : {_v(b)}"
        case ir.Cast(dst=d, a=a):
            return f"{d}: {d.type} = cast {_v(a)}"
        case ir.Bitcast(dst=d, a=a):
            return f"{d}: {d.type} = bitcast {_v(a)}"
        case ir.Extract(dst=d, vec=v, lane=k):
            return f"{d}: {d.type} = {_v(v)}[{k}]"
        case ir.Insert(dst=d, vec=v, lane=k, value=x):
            return f"{d}: {d.type} = insert {_v(v)}[{k}] <- {_v(x)}"
        case ir.Load(dst=d, mem=m, index=i):
            return f"{d}: {d.type} = load {m}[{_v(i)}]"
        case ir.Store(mem=m, index=i, value=v):
            return f"store {m}[{_v(i)}] <- {_v(v)}"
        case ir.Meta(dst=d, what=w, mem=m, dim=dim):
            return f"{d}: u32 = {w} {m}" + ("" if dim is None else f", {_v(dim)}")
        case ir.Builtin(dst=d, name=n):
            return f"{d}: u32 = {n}"
        case ir.Atomic(dst=d, op=o, mem=m, index=i, value=v, cmp=c):
            lhs = f"{d}: {d.type} = " if d is not None else ""
            extra = "" if c is None else f", cmp={_v(c)}"
            return f"{lhs}atomic_{o} {m}[{_v(i)}], {_v(v)}{extra}"
        case ir.Plane(dst=d, op=o, value=v, lane=lane):
            extra = "" if lane is None else f", {_v(lane)}"
            return f"{d}: {d.type} = plane_{o} {_v(v)}{extra}"
        case ir.SyncCube():
            return "sync_cube"
        case ir.Break():
            return "break"
        case ir.Continue():
            return "continue"
        case ir.Return():
            return "return"
    raise TypeError(f"unknown op {op!r}")


def _block(block, indent: int, out: list[str]) -> None:
    pad = "  " * indent
    for op in block:
        if isinstance(op, ir.If):
            out.append(f"{pad}if {_v(op.cond)} {{")
            _block(op.then, indent + 1, out)
            if op.orelse:
                out.append(f"{pad}}} else {{")
                _block(op.orelse, indent + 1, out)
            out.append(f"{pad}}}")
        elif isinstance(op, ir.Loop):
            out.append(f"{pad}loop {{")
            _block(op.body, indent + 1, out)
            out.append(f"{pad}}}")
        elif isinstance(op, ir.Range):
            out.append(f"{pad}for {op.var}: {op.var.type} in range({_v(op.start)}, "
                       f"{_v(op.end)}, {op.step}) {{")
            _block(op.body, indent + 1, out)
            out.append(f"{pad}}}")
        else:
            out.append(pad + format_op(op))


def format_kernel(k: ir.Kernel) -> str:
    params = []
    for p in k.params:
        if p.kind == "array":
            params.append(f"{p.name}: array<{p.type}>")
        elif p.kind == "tensor":
            params.append(f"{p.name}: tensor<{p.type}, rank={p.rank}>")
        else:
            params.append(f"{p.name}: {p.type}")
    out = [f"kernel {k.name}({', '.join(params)}) "
           f"[plane_size={k.plane_size}, checked={k.checked}"
           + (", nowrap" if k.nowrap else "")
           + (f", cube_dim={k.cube_dim}" if k.cube_dim else "") + "] {"]
    for s in k.shared:
        out.append(f"  {s}: shared {s.type}[{s.size}]")
    for a in k.locals:
        out.append(f"  {a}: local {a.type}[{a.size}]")
    _block(k.body, 1, out)
    out.append("}")
    return "\n".join(out)

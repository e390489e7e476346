"""Dispatch plans: a library call's launches, traced once per key and replayed.

A library op (`counted`) spends tens of microseconds of Python choosing a candidate, building
views and packing B panels' shapes before its kernels run, and all of it depends only on the
operands' shapes, strides and dtypes, the runtime and the op's flags. After `WARMUP` calls
with one such key (autotuning and compiles happen there), the next call is traced
(`cube.recording.trace`) and becomes the key's plan: its launches with every buffer argument
named by where it came from (operand k, or the call's j-th allocation: outputs and scratch),
every other argument kept. A later call with the key allocates the same buffers, puts the
new operands and allocations where the old ones were (same shapes and strides, other
memory) and launches the same executables with the same grids.

A key gets no plan (and keeps running its Python) when the trace shows something a replay
would not repeat: memory from outside the call (a cache, a host upload), a host read, a hook
or an autotune timing; or when an operand has no `ptr` naming its memory (every runtime's
buffers have one: the host or device address, OpenCL's cl_mem handle, wgpu's buffer
object's id). Host runtimes replay through prepared argument blocks; the others call their
executables' launch with the new buffers."""
from __future__ import annotations

import math
import os
import struct
import threading
from contextlib import contextmanager

from autotune import tunable
from cube import recording
from runtimes.buffer import Buffer, LineView
from runtimes.cpu import CpuExecutable

from . import launch

_PTR_LEN = struct.Struct("<qq")  # a buffer's pointer and length slots (the CPU's layout)

# calls per key before the trace: tuning and compiling are over by then (DL_PLAN_WARMUP=0
# traces every first call: the test suite's stress setting)
WARMUP = int(os.environ.get("DL_PLAN_WARMUP", "2"))
RETRIES = 3  # spoiled traces per key before the key is given up
MAX_PLANS = 4096  # keys kept; beyond that the table is dropped and refilled

_plans: dict = {}
_NONE = object()  # a key that cannot be planned
_spoiled: dict = {}
_epoch = tunable.epoch  # a Tunable restricted by `only` chooses anew: so do the plans
enabled = True


class _Unkeyable(Exception):
    pass


def _storage(a):
    """The address of an operand's memory, or None for a non-buffer."""
    if isinstance(a, LineView):
        a = a.buffer
    if isinstance(a, Buffer):
        ptr = a.__dict__.get("ptr")
        if ptr is None:
            raise _Unkeyable  # no name for its memory: operands cannot be told apart
        return ptr
    return None


def scalar_key(v) -> tuple:
    """A scalar argument as a key: its type and value, and a float's sign (-0.0 == 0.0,
    but a plan traced with one must not replay the other)."""
    if v.__class__ is float:
        return (float, v, math.copysign(1.0, v))
    return (v.__class__, v)


_SCALAR, _BUFFER, _LINES = range(3)
_KINDS: dict = {}  # an operand's class -> how `_key` reads it (what `_storage` decides)


def _kind(c) -> int:
    k = _KINDS.get(c)
    if k is None:
        k = _KINDS[c] = _LINES if issubclass(c, LineView) else \
            _BUFFER if issubclass(c, Buffer) else _SCALAR
    return k


def _key(fn, ops) -> tuple:
    """(key, operand addresses); raises _Unkeyable. Buffers key by shape, strides, element
    (and line size); other arguments by type and value (`scalar_key`); operands sharing
    memory by which one they share it with, as a plan maps an argument to the first operand
    it aliases. `_storage` inlined, the operand's kind looked up by its class: a library
    call has up to 14 operands (conv2d's), ~6 calls each through `_storage`."""
    sig: list = [fn, _epoch[0], ops[0]]  # ops[0]: the runtime
    ptrs: list = [None]
    kinds = _KINDS
    for a in ops[1:]:
        c = a.__class__
        k = kinds.get(c)
        if k is None:
            k = _kind(c)
        if k == _SCALAR:
            sig.append(scalar_key(a))
            ptrs.append(None)
            continue
        p = (a.buffer if k == _LINES else a).__dict__.get("ptr")
        if p is None:
            raise _Unkeyable  # no name for its memory: operands cannot be told apart
        if c is LineView:
            b = a.buffer
            sig.append((b.shape, b.strides, b.elem, a.line_size))
        else:
            sig.append((a.shape, a.strides, a.elem))
        ptrs.append(p)
    alias = alias_key(ptrs)
    if alias is not None:
        sig.append(alias)
    return tuple(sig), ptrs


def alias_key(ptrs: list):
    """Which operands share memory, as each operand's first operand with its address (-1 for
    a non-buffer); None when none do. ptrs[0] is the runtime's None, so two entries alias
    nothing (the eager path's common case, answered first)."""
    if len(ptrs) <= 2:
        return None
    live = [p for p in ptrs if p is not None]
    if len(set(live)) == len(live):
        return None
    return tuple(ptrs.index(p) if p is not None else -1 for p in ptrs)


def call(fn, args: tuple, kwargs: dict):
    """fn(*args, **kwargs) (a library launcher: args[0] the runtime), through its plan."""
    if not enabled:
        return fn(*args, **kwargs)
    ops = (*args, *kwargs.values(), *kwargs) if kwargs else args
    return planned(fn, ops, lambda: fn(*args, **kwargs))


def planned(tag, ops: tuple, run):
    """run() through the plan of (tag, ops' signature): ops[0] is the runtime, the buffers
    among ops the memory the plan's launches may read and write besides what run allocates;
    run returns what the replays return (buffers over that memory or fresh allocations,
    or None). tag and ops' non-buffer values must decide everything else run does."""
    if not enabled:
        return run()
    try:
        key, ptrs = _key(tag, ops)
        p = _plans.get(key)
    except (_Unkeyable, TypeError):  # TypeError: an unhashable argument
        return run()
    if p.__class__ is Plan:
        return p.run(ops)
    return _unplanned(p, key, ptrs, ops, run)


def planned_key(key: tuple, ptrs: list, ops: tuple, run):
    """`planned` with the key and operand addresses made by the caller (who knows its
    operands' kinds: a fused kernel's leaves), as `_key` would make them: the key must
    decide everything `_key`'s does (ops' views, aliasing, the autotune epoch)."""
    if not enabled:  # (`planned_bufs` comes here too: plans off means off at every caller)
        return run()
    try:
        p = _plans.get(key)
    except TypeError:  # an unhashable argument
        return run()
    if p.__class__ is Plan:
        return p.run(ops)
    return _unplanned(p, key, ptrs, ops, run)


def planned_bufs(tag, rt, bufs: tuple, run):
    """`planned` for a tag and plain buffers (a tensor's storage: no views, no scalars),
    keyed in one pass without the generic operand probe."""
    key: list = [tag, _epoch[0], rt]
    ptrs: list = [None]
    for b in bufs:
        p = b.__dict__.get("ptr")
        if p is None:  # no name for its memory: no plan
            return run()
        key.append((b.shape, b.strides, b.elem))
        ptrs.append(p)
    alias = alias_key(ptrs)
    if alias is not None:
        key.append(alias)
    return planned_key(tuple(key), ptrs, (rt, *bufs), run)


def _unplanned(p, key, ptrs, ops, run):
    if p is _NONE:
        return run()
    if p is None or p < WARMUP:
        if len(_plans) >= MAX_PLANS:
            _plans.clear()
            _spoiled.clear()
        _plans[key] = (p or 0) + 1
        return run()
    out, plan = _trace(run, ops, ptrs)
    if plan is None:  # spoiled (an autotune, a host read): try again after the warm-up
        n = _spoiled[key] = _spoiled.get(key, 0) + 1
        _plans[key] = _NONE if n >= RETRIES else 0
    elif plan is _NONE:
        _plans[key] = _NONE
    else:
        _plans[key] = plan
    return out


def clear() -> None:
    """Forget every plan (tests; a changed autotune choice)."""
    _plans.clear()
    _spoiled.clear()


def stats() -> dict:
    """How many keys have a plan, are given up, or are still warming up."""
    plans = sum(1 for p in _plans.values() if p.__class__ is Plan)
    none = sum(1 for p in _plans.values() if p is _NONE)
    return {"plans": plans, "unplanned": none, "warming": len(_plans) - plans - none}


_allocs = threading.local()  # .stacks: {id(rt): this thread's tracing calls' allocation lists}
_alloc_lock = threading.Lock()
_alloc_tracers: dict = {}  # id(rt) -> calls tracing on rt, in every thread


def _traced_allocs(rt) -> list | None:
    """This thread's allocation lists on rt, outermost first, while a call traces (None
    otherwise): an allocation goes to each (a plan inside a plan: the outer's replay makes
    the inner's buffers too)."""
    stacks = getattr(_allocs, "stacks", None)  # (a list is dropped when it empties)
    return None if stacks is None else stacks.get(id(rt))


def _recording_empty(rt):
    """rt.empty, also appending (buffer, shape, dtype) to the allocation lists of this
    thread's tracing calls (another thread's allocations are its own)."""
    plain = type(rt).empty.__get__(rt)

    def empty(shape, dtype=None):
        b = plain(shape) if dtype is None else plain(shape, dtype)
        lists = _traced_allocs(rt)
        if lists is not None:
            for allocs in lists:
                allocs.append((b, shape, dtype))
        return b
    return empty


@contextmanager
def _allocations(rt, allocs: list):
    """rt.empty records into allocs in this thread for the block: an instance attribute over
    the method while any thread traces on rt (one, however many trace)."""
    stacks = _allocs.__dict__.setdefault("stacks", {})
    stack = stacks.setdefault(id(rt), [])
    with _alloc_lock:
        n = _alloc_tracers.get(id(rt), 0)
        if n == 0:
            rt.empty = _recording_empty(rt)
        _alloc_tracers[id(rt)] = n + 1
    stack.append(allocs)
    try:
        yield
    finally:
        stack.pop()
        if not stack:
            del stacks[id(rt)]
        with _alloc_lock:
            n = _alloc_tracers[id(rt)] - 1
            if n == 0:
                del _alloc_tracers[id(rt)]
                del rt.empty
            else:
                _alloc_tracers[id(rt)] = n


def _trace(run, ops, ptrs):
    rt = ops[0]
    allocs: list = []  # (buffer, shape, dtype) per rt.empty during the call
    names: list = []
    mine = (threading.get_ident(), names)
    launch.traces.append(mine)
    try:
        with _allocations(rt, allocs), recording.trace() as t:
            out = run()
    finally:
        for i in range(len(launch.traces) - 1, -1, -1):  # this one, whichever thread's came after
            if launch.traces[i] is mine:
                del launch.traces[i]
                break
    if t.spoiled:
        return out, None
    try:
        plan = Plan(t, ops, ptrs, allocs, out, names)
    except _Unkeyable:
        return out, _NONE
    return out, plan


def _view_of(a) -> tuple:
    """What a replay needs of a recorded buffer argument to make it again over other memory
    (shape, strides, line size), holding none of its memory: a plan must not keep the
    traced call's buffers alive."""
    if isinstance(a, LineView):
        return (a.line_size, _view_of(a.buffer))
    return (None, (a.shape, a.strides, a.contiguous))


def _rebase(view: tuple, base):
    """The recorded argument described by `view` over `base`'s memory."""
    line, inner = view
    if line is not None:
        v = object.__new__(LineView)
        b = _rebase(inner, base)
        v.buffer, v.line_size, v.rt, v.elem = b, line, b.rt, b.elem
        v.shape, v.strides, v.size, v.contiguous = b.shape, b.strides, b.size, b.contiguous
        return v
    v = object.__new__(type(base))
    v.__dict__.update(base.__dict__)
    v.shape, v.strides, v.contiguous = inner
    return v


_SAME_OP, _VIEW_OP, _SAME_NEW, _VIEW_NEW = range(4)


class Plan:
    """One key's launches; see the module docstring."""

    def __init__(self, t: recording.Trace, ops: list, ptrs: list, allocs: list, out,
                 names: list):
        self.names = names  # what the trace counted (dl.count_kernels), counted again
        where: dict = {}  # memory address -> (operand or allocation, its index)
        for k, p in enumerate(ptrs):
            if p is not None and p not in where:
                where[p] = (ops[k], k, _SAME_OP)
        for j, (b, _, _) in enumerate(allocs):
            where.setdefault(_storage(b), (b, j, _SAME_NEW))
        self.allocs = [(shape, dtype) for _, shape, dtype in allocs]
        # what a replay allocates, as `empty_exact` takes it (host runtimes: every plan's)
        self.exact = [(b.shape, b.size, b.elem) for b, _, _ in allocs]
        # (launch, grid, block, argument specs, executable: a trace around a replay records it)
        self.launches = []
        self.blobs: list | None = []  # the CPU's prepared argument blocks, pointers patched
        for i, (fn, cc, cd, largs) in enumerate(t.entries):
            if cc is None:
                raise _Unkeyable  # a hook: host state
            specs = [self._spec(a, where) for a in largs]
            exe = t.exes.get(i)
            self.launches.append((fn, cc, cd, specs, exe))
            if self.blobs is not None and isinstance(exe, CpuExecutable):
                self.blobs.append(self._blob(exe, cc, cd, largs, specs))
            else:
                self.blobs = None
        self.many = isinstance(out, tuple | list)
        self.out_type = type(out)
        self.out = [self._spec(o, where) for o in out] if self.many else self._spec(out, where)
        self.fast = None if self.blobs is None else _compiled_replay(self, ops)

    @staticmethod
    def _spec(a, where):
        """(how, index, recorded argument): how says where a replay finds the argument."""
        p = _storage(a)
        if p is None:
            return (None, 0, a)  # a scalar (or None): the key fixed it
        src = where.get(p)
        if src is None:
            raise _Unkeyable  # memory from outside the call: a cache the plan cannot track
        base, k, how = src
        return (how, k, None) if a is base else (how + 1, k, _view_of(a))

    @staticmethod
    def _blob(exe, cc, cd, largs, specs):
        """The launch as (its prepared call, the argument block, pointer patches): a replay
        copies the block, writes each buffer's address and length, and calls."""
        call = exe.prepare(cc, cd, largs)
        if call is None:
            return None  # an empty grid
        size = exe.layout.spec.slot_bytes
        patches = []
        for s, (how, k, _), a in zip(exe.layout.params, specs, largs, strict=True):
            if s.kind != "scalar" and how is not None:
                patches.append((s.ptr * size, how < _SAME_NEW, k, a.line_size))
        return call.func, bytes(call.args[0]), call.args[1:], patches

    def run(self, ops: tuple):
        if self.fast is not None and recording.active is None and \
                "empty" not in ops[0].__dict__:
            return self.fast(ops)
        launch.record_launches(self.names)  # dl.count_kernels sees what the trace counted
        rt = ops[0]
        if _traced_allocs(rt) is not None:  # this thread's outer trace records them (rt.empty)
            allocs = [rt.empty(shape) if dtype is None else rt.empty(shape, dtype)
                      for shape, dtype in self.allocs]
        else:
            exact = rt.empty_exact
            allocs = [exact(shape, n, elem) for shape, n, elem in self.exact]
        active = recording.current()
        if self.blobs is not None and active is None:
            pack = _PTR_LEN.pack_into
            for b in self.blobs:
                if b is None:
                    continue
                func, tpl, rest, patches = b
                blob = bytearray(tpl)
                for off, op, k, ls in patches:
                    m = (ops[k] if op else allocs[k]).buffer
                    pack(blob, off, m.ptr, m.size // ls)
                func(bytes(blob), *rest)
            return self._outputs(ops, allocs)
        arg = self._arg
        for fn, cc, cd, specs, exe in self.launches:
            largs = [a if how is None else arg(how, k, a, ops, allocs) for how, k, a in specs]
            fn(cc, cd, largs)
            if active is not None:
                active.entries.append((fn, cc, cd, largs))
                if active.__class__ is recording.Trace and exe is not None:
                    # a plan traced around this replay gets a fast replay of its own
                    active.exes[len(active.entries) - 1] = exe
        return self._outputs(ops, allocs)

    def _outputs(self, ops, allocs):
        arg = self._arg
        if not self.many:
            how, k, a = self.out
            return a if how is None else arg(how, k, a, ops, allocs)
        return self.out_type(a if how is None else arg(how, k, a, ops, allocs)
                             for how, k, a in self.out)

    @staticmethod
    def _arg(how, k, a, ops, allocs):
        if how == _SAME_OP:
            return ops[k]
        if how == _SAME_NEW:
            return allocs[k]
        base = ops[k] if how == _VIEW_OP else allocs[k]
        if isinstance(base, LineView):
            base = base.buffer
        return _rebase(a, base)


def _compiled_replay(plan: Plan, ops: list):
    """`Plan.run`'s CPU replay as one straight-line function of the operands, made once per
    plan: each argument block one `struct.pack` of its fixed bytes and the new pointers and
    lengths (the loop of `pack_into` patches over a copied template, the allocation list and
    the per-launch unpacking cost ~1.5 us of an 8x8 op's ~9). None where a launch's argument
    is not a plain patch (the generic replay handles it)."""
    env: dict = {"record": launch.record_launches, "names": plan.names, "outputs": plan._outputs}
    body = ["def replay(ops):", "    record(names)", "    exact = ops[0].empty_exact"]
    for j, (shape, n, elem) in enumerate(plan.exact):
        env[f"e{j}"] = (shape, n, elem)
        body.append(f"    a{j} = exact(*e{j})")
    for i, b in enumerate(plan.blobs):
        if b is None:
            continue
        func, tpl, rest, patches = b
        fmt, parts, at = ["<"], [], 0
        for off, op, k, ls in sorted(patches):
            if off < at:
                return None  # overlapping patches: not a layout this replay knows
            env[f"s{i}_{off}"] = tpl[at:off]
            fmt.append(f"{off - at}sqq")
            src = f"ops[{k}]" if op else f"a{k}"
            if op and isinstance(ops[k], LineView):  # the key fixed the operand's kind
                src += ".buffer"
            parts += [f"s{i}_{off}", f"{src}.ptr", f"{src}.size // {ls}"]
            at = off + _PTR_LEN.size
        env[f"s{i}_end"] = tpl[at:]
        fmt.append(f"{len(tpl) - at}s")
        parts.append(f"s{i}_end")
        env[f"S{i}"], env[f"f{i}"], env[f"r{i}"] = struct.Struct("".join(fmt)), func, rest
        body.append(f"    f{i}(S{i}.pack({', '.join(parts)}), *r{i})")
    allocs = ", ".join(f"a{j}" for j in range(len(plan.exact)))
    if not plan.many and plan.out[0] == _SAME_NEW:
        body.append(f"    return a{plan.out[1]}")
    else:
        body.append(f"    return outputs(ops, [{allocs}])")
    exec(compile("\n".join(body), "<dl plan replay>", "exec"), env)
    return env["replay"]

"""One buffer passed to two parameters of a C-family kernel.

CUDA, HIP and OpenCL C declare every buffer parameter `restrict`: a promise that no other
parameter reaches its memory, which lets the compiler keep loads in registers, hoist them out
of loops and, for CUDA's `const __restrict__` inputs, read through the read-only cache. A
launch may break it: `kernel(src=a, dst=a)` works in place as Python (and Numba) users
expect, each unit touching its own element, and PoCL then hoisted the load of src[i] out of
a loop that wrote dst[i]. So each such executable checks its launch's buffers (a compare of
their `ptr`, the runtime's name for the memory, per pair of a written buffer with another)
and, where a written buffer shares memory with another one, launches a variant compiled
without `restrict` on the buffers sharing memory (made once per pattern, on first use). The
common launch keeps `restrict` and pays the compares; buffers that are only read may share
memory under `restrict` (C allows it: nothing they reach is modified), so `add(x, x)` needs
no variant. Host runtimes need none of this: the LLVM backend promises no `noalias`, and the
shader targets bind every buffer read-write for the same reason.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

_MAX_PAIRS = 10  # more pairs to compare: one set of the pointers instead


def alias_set(ptrs: Sequence, written: Sequence[bool], restrict: Sequence[bool]) -> frozenset:
    """The buffer positions to declare without `restrict` for a launch with these memory
    names (in buffer order): every member of each group sharing one memory in which a
    buffer is written and one is `restrict`; empty where the promise holds."""
    groups: dict = {}
    for i, p in enumerate(ptrs):
        groups.setdefault(p, []).append(i)
    out: list = []
    for g in groups.values():
        if len(g) > 1 and any(written[i] for i in g) and any(restrict[i] for i in g):
            out += g
    return frozenset(out)


def alias_check(written: Sequence[bool], restrict: Sequence[bool],
                name: str = "kernel") -> Callable | None:
    """A function of a launch's buffers (in buffer order, as `Packer.pack` returns them):
    True where a written buffer shares memory with another one so that a `restrict`
    promise breaks (then `alias_set` says which). None where no launch can break one (no
    buffer declared `restrict`, none written, fewer than two)."""
    n = len(written)
    pairs = [(i, j) for j in range(n) for i in range(j)
             if (written[i] or written[j]) and (restrict[i] or restrict[j])]
    if not pairs:
        return None
    env: dict = {"_alias_set": alias_set, "_written": tuple(written),
                 "_restrict": tuple(restrict)}
    if len(pairs) <= _MAX_PAIRS:
        used = sorted({k for p in pairs for k in p})
        get = ", ".join(f"bufs[{k}].ptr" for k in used)
        src = (f"def aliased(bufs):\n"
               f"    {', '.join(f'p{k}' for k in used)}{',' if len(used) == 1 else ''} = {get}\n"
               f"    return {' or '.join(f'p{i} == p{j}' for i, j in pairs)}\n")
    else:
        src = (f"def aliased(bufs):\n"
               f"    ptrs = [b.ptr for b in bufs]\n"
               f"    return len(set(ptrs)) < {n} and bool(_alias_set(ptrs, _written, "
               f"_restrict))\n")
    exec(compile(src, f"<alias check {name}>", "exec"), env)
    return env["aliased"]


class AliasVariants:
    """An executable's variants without `restrict`, one per set of buffer positions (see the
    module docstring); `compile(positions)` makes one (the runtime's compile with
    `aliased=positions`)."""

    def __init__(self, written: Sequence[bool], restrict: Sequence[bool],
                 compile: Callable):
        self.written, self.restrict = tuple(written), tuple(restrict)
        self.compile = compile
        self.made: dict = {}

    def get(self, bufs: Sequence):
        """The executable for a launch with these buffers (whose check said True)."""
        s = alias_set([b.ptr for b in bufs], self.written, self.restrict)
        exe = self.made.get(s)
        if exe is None:  # two threads may both compile it: the same code either way
            exe = self.made[s] = self.compile(s)
        return exe


def setup(exe, src, compile: Callable | None) -> None:
    """Give a C-family executable `_aliased` (its launch's check, or None) and `_variants`.
    compile: None for a variant itself (its launch was checked by the executable that
    chose it; it checks nothing)."""
    check = None if compile is None else alias_check(src.written, src.restrict,
                                                     getattr(exe.kernel, "name", "kernel"))
    exe._aliased = check
    exe._variants = None if check is None else AliasVariants(src.written, src.restrict,
                                                             compile)

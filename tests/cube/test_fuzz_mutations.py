"""A mutation fuzzer for the frontend. Small valid kernels (mutation_support.CORPUS: elementwise,
loops with reductions, helpers with early returns, comptime parameters, lines, shared memory
with sync_cube, while loops, tuple assignment, ternaries, casts, tensors, atomics, generics)
are parsed, mutated at random with `ast`, unparsed, written to a real module file and
launched on the IR interpreter and the CPU runtime. The project's rules under test:

- bad input gets a located error (file:line:col and the source line) and no Python traceback
  from the compiler's insides reaches the user;
- Python the frontend accepts never compiles to a different meaning (the result must be what
  cube.simulate, the kernel's own Python run per unit, gives on the same inputs).

Mutation classes (mutation_support.MUTATORS): an operand replaced by another in-scope name or
a literal of another type; numeric constants changed; binary/comparison/boolean operators
swapped, comparisons chained, ternaries swapped, conditions negated; parameter annotations
swapped (Array[f32] / Array[i32] / u32 / Line / Comptime[int] / ...); statements dropped,
duplicated, swapped; calls given one argument more or less or a keyword; call arguments
replaced by an array, a tuple, a string, None, a type, a module; intrinsics called on the wrong
kind; expressions wrapped (a plain Python function, a lambda, a walrus, an f-string, a chained
comparison, casts, `//0`, shifts, `**`); subscripts turned into slices, tuple indices, odd
types; a scalar indexed; a parameter assigned; statements inserted from INSERTS (with, try,
lambda, comprehensions, global, nonlocal, yield, await, star-args, f-string, walrus, del,
assert, match, raise, for-else, annotated assignment, `is`/`in`, runtime values where a
compile-time one is needed, mixed line sizes, break/continue outside loops, return values
from kernels, calling the kernel, undefined names, plain Python calls, ...); statements
wrapped in with/try/match/loops; casts swapped; recursion between helpers; returns changed;
loop ranges changed (empty, negative, zero step, unrolled, reversed, over tuples).

Outcomes (mutation_support.run_source): a located CompileError or a LaunchError, or agreement
with the simulator (interp against cpu where the simulator cannot model the kernel); anything
else is a finding (mutation_support.BUG_KINDS).

Budget: CUBE_FUZZ_MUTANTS=N mutants (default 120; 1500 with CUBE_SLOW=1), numbered from
CUBE_FUZZ_MUTANT_START (default 0; CUBE_SLOW=1 starts at a random place, printed). A mutant
is reproduced by its number: `make_mutant(k)`. For thousands, run the driver, which survives
native hangs and crashes:
    CUBE_CACHE_DIR=$(mktemp -d) python tests/cube/mutation_support.py 0 5000 out.jsonl 2

Known bugs: each class found is a strict xfail reproducer below (KNOWN_BUGS); the fuzzer
marks a mutant whose outcome matches a known class's precise predicate (`known_class`) as
xfail with the class's name, so the default budget passes on today's code and shows what is
left. When a class is fixed, its reproducer XPASSes (strict: a failure) -- move it to FIXED
(its reproducer then must be judged fine), and the fuzzer fails on any mutant of that class
still broken. The nine classes the first runs found are all in FIXED."""
from __future__ import annotations

import os
import random
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from mutation_support import (  # noqa: E402
    BUG_KINDS,
    CORPUS,
    HEADER,
    Outcome,
    Seed,
    kernel_text,
    make_mutant,
    run_mutant,
    run_source,
)

import cube as cb  # noqa: E402
from cube import Array, f32  # noqa: E402

SLOW = bool(os.environ.get("CUBE_SLOW"))
N_MUTANTS = int(os.environ.get("CUBE_FUZZ_MUTANTS", 1500 if SLOW else 120))
START = int(os.environ.get("CUBE_FUZZ_MUTANT_START",
                           random.randrange(10 ** 6) if SLOW else 0))
if SLOW:
    print(f"test_fuzz_mutations: mutants {START}..{START + N_MUTANTS - 1}")


# ---- the corpus is valid ------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_kernel_agrees(name):
    """Every unmutated kernel compiles and agrees with the simulator (or interp with cpu)."""
    o = run_source(HEADER + CORPUS[name].src, CORPUS[name], tag=f"seed_{name}")
    assert o.kind == "agree", f"{o.kind}: {o.detail}"


# ---- known bug classes --------------------------------------------------------------------
# Found by the large runs (mutants 1000..6999, 10000..12356 on 7c7d161, 20000..25999 on
# e0c04c2). Each:
# a name, a precise predicate on (Outcome, mutant source) that recognises the fuzzer's
# instances of it, a minimal reproducer (module source after HEADER, launched as the Seed
# says) and what it should do. The reproducers are strict xfails: a fix makes one XPASS
# (a failure), and then its entry moves to FIXED (a regression test whose reproducer must be
# judged fine), so the fuzzer checks that class again.

def _detail(pattern):
    return lambda o, src: re.search(pattern, o.detail) is not None


FIXED = [
    ("decorator_positional_argument",
     lambda o, src: o.kind == "internal" and
     o.key.startswith("AttributeError:cube/kernel.py:__call__"),
     '''
@cube(1, launch=True)
def kernel(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = x[i]
''', Seed(""),
     "`@cube(1, launch=True)` (a positional argument that is not the function) raises "
     "AttributeError: 'CubeFunction' object has no attribute '__name__' from "
     "CubeFunction.__call__ at import; it should be a CubeError/TypeError naming the "
     "decorator's arguments (cube(fn=None, *, launch=..., unchecked=..., nowrap=...))"),
    ("method_keyword_arguments_ignored",
     lambda o, src: o.kind == "sim-rejects" and
     re.search(r"\.(len|shape|stride|rank|__call__)\(\) got an unexpected keyword",
               o.detail) is not None,
     '''
@cube(launch=True)
def kernel(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < out.len(bogus=1):
        out[i] = x[i]
''', Seed(""),
     "keyword arguments to the array/tensor methods len(), shape(d), stride(d), rank() are "
     "dropped silently (`out.len(bogus=1)` compiles as `out.len()`; Python raises "
     "TypeError); it should be a located CompileError like `len() takes no arguments`"),
    ("helper_returns_none_and_a_value",
     lambda o, src: (o.kind == "sim-rejects" and "'NoneType'" in o.detail) or
     (o.kind == "mismatch" and re.search(r"return None", src) is not None),
     '''
@cube
def h(v):
    if v > 1.0:
        return None
    return v


@cube(launch=True)
def kernel(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < x.len():
        out[i] = h(x[i]) * 2.0
''', Seed(""),
     "a helper that returns None on one path and an f32 on another compiles: the IR reads "
     "the helper's result variable unassigned on the None path (interp stores 0.0, cpu "
     "another value; Python raises TypeError on None * 2.0). Falling off the end is already "
     "refused ('returns a value on some paths but can also reach the end'); an explicit "
     "`return None` (or bare `return`) beside `return v` should be the same located error"),
    ("yield_after_return_ignored",
     lambda o, src: o.kind == "sim-rejects" and "reversible" not in o.detail and
     re.search(r"'generator'|store a object value", o.detail) is not None,
     '''
@cube
def h(v):
    return v + 1.0
    yield v


@cube(launch=True)
def kernel(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < x.len():
        out[i] = h(x[i])
''', Seed(""),
     "statements after a `return` are never looked at, so a `yield` there is accepted; "
     "but it makes the helper a generator in Python (h(x) is a generator object: the "
     "simulator cannot store it). A yield anywhere in a @cube function should be the "
     "located 'yield ... not supported' error, reachable or not"),
    ("float_floordiv_of_infinity",
     _detail(r"got np\.float\d+\(-?inf\) want np\.float\d+\(nan\)"),
     '''
@cube(launch=True)
def kernel(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < x.len():
        v = x[i] * 1e30 * 1e30
        out[i] = v // 1.0
''', Seed(""),
     "docs/language.md: `//` follows Python; Python's and NumPy's inf // 1.0 is nan (and "
     "inf % 1.0 is nan, which the kernel gets right), but interp and cpu give inf (a bare "
     "floor(a / b))"),
    ("uninitialised_local_memory_differs",
     lambda o, src: o.kind == "mismatch" and o.key == "mismatch:cpu" and
     ("LocalArray" in src or "SharedMemory" in src),
     '''
@cube(launch=True)
def kernel(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < x.len():
        buf = cb.LocalArray(f32, 4)
        buf[0] = x[i]
        out[i] = buf[0] + buf[3]
''', Seed(""),
     "a LocalArray element read before any write is 0 in the simulator (documented: 'a "
     "fresh zeroed array per call') and the interpreter, NaN on cpu (shared memory read "
     "before a write: 0 on interp, garbage on cpu). Either zero local/shared memory on "
     "every target or document the contents as undefined (and have the simulator refuse "
     "such a read); the docs say neither"),
    ("range_bound_not_an_integer",
     _detail(r"range bounds must be integers|int\(\) argument must be a string"),
     '''
@cube(launch=True)
def kernel(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < x.len():
        s = 1.0
        for k in range((1, 2)):
            s += 1.0
        out[i] = s
''', Seed(""),
     "a tuple or list as a range bound (`range((1, 2))`, `cb.range(K, (1, 2), unroll=True)`, "
     "`cb.range([1, 2])`) compiles, to an empty loop; Python raises TypeError ('tuple' "
     "object cannot be interpreted as an integer). It should be a located CompileError"),
    ("bad_line_annotation_at_import",
     lambda o, src: o.kind == "internal" and "cube/lang.py:__class_getitem__" in o.key,
     '''
@cube(launch=True)
def kernel(x: Array[Line[()]], out: Array[f32]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = 1.0
''', Seed(""),
     "`Line[()]` (any Line[...] subscript that is a tuple of other than two items) raises "
     "ValueError: not enough values to unpack, from cube/lang.py Line.__class_getitem__, "
     "when the annotation is evaluated at import; it should be a TypeError/CubeError saying "
     "Line[T] or Line[T, n]"),
]

# every class the runs found is fixed (each reproducer stays, in FIXED); new ones go here
KNOWN_BUGS: list = []


def known_class(o: Outcome, src: str) -> str | None:
    """The name of the known bug class o (of the mutant source src) belongs to, or None."""
    for name, pred, _src, _seed, _why in KNOWN_BUGS:
        if pred(o, src):
            return name
    return None


def _reproduce(table, name):
    _n, _pred, src, seed, why = next(k for k in table if k[0] == name)
    seed = Seed(src, **{f: getattr(seed, f) for f in ("cube_count", "cube_dim", "n",
                                                       "values", "sim")})
    return run_source(HEADER + src, seed, tag=f"known_{name}"), HEADER + src, why


@pytest.mark.parametrize("name", [
    pytest.param(k[0], marks=pytest.mark.xfail(strict=True, reason=k[4])) for k in KNOWN_BUGS])
def test_known_bug_reproducer(name):
    o, src, why = _reproduce(KNOWN_BUGS, name)
    assert o.kind not in BUG_KINDS, f"{why}\n{o.kind}: {o.detail}"
    assert next(k for k in KNOWN_BUGS if k[0] == name)[1](o, src) is False


@pytest.mark.parametrize("name", [k[0] for k in FIXED])
def test_fixed_bug_stays_fixed(name):
    """A class the fuzzer found, fixed: its reproducer is a located error or agrees with the
    simulator (or is undefined behaviour the simulator refuses: an uninitialised read)."""
    o, _src, why = _reproduce(FIXED, name)
    assert o.kind not in BUG_KINDS, f"was: {why}\nnow {o.kind}: {o.detail}"


# ---- the fuzzer ---------------------------------------------------------------------------

@pytest.mark.parametrize("k", range(START, START + N_MUTANTS))
def test_mutant(k):
    m = make_mutant(k)
    o = run_mutant(m)
    if o.kind in BUG_KINDS:
        cls = known_class(o, m.src)
        report = (f"mutant {k} of '{m.seed}' ({'; '.join(m.mutations)}): {o.kind}\n"
                  f"{o.detail}\n--- kernel ---\n{kernel_text(m.src)}")
        if cls:
            pytest.xfail(f"known bug class {cls}: {report.splitlines()[0]}")
        pytest.fail(report, pytrace=False)


def test_huge_unroll_is_refused_quickly():
    """Each unrolled iteration is translated on its own (~7 us): 2**20 took ~7 s and the
    fuzzer's `cb.range(0, 2 ** 31, 1, unroll=True)` ran out of memory. Past MAX_UNROLL
    iterations a range is a located CompileError before any is unrolled."""
    from mutation_support import Timeout, _timed, load
    mod, path = load(HEADER + '''
@cube(launch=True)
def kernel(x: Array[f32], out: Array[f32]):
    for _q in cb.range(0, 2 ** 20, 1, unroll=True):
        pass
    out[ABSOLUTE_POS] = 1.0
''', "huge_unroll")
    try:
        _timed(lambda: mod.kernel.ir(x=Array[f32], out=Array[f32]), 3.0)
    except Timeout:
        pytest.fail("compiling a 2**20-iteration unrolled loop ran past 3 s")
    except cb.CompileError as e:
        assert Path(e.loc[0]) == path
    else:
        pytest.fail("compiled a 2**20-iteration unrolled loop")


def test_mutants_are_deterministic():
    """A mutant number is its reproducer: the same source every time."""
    assert make_mutant(12345).src == make_mutant(12345).src
    srcs = {make_mutant(k).src for k in range(40)}
    assert len(srcs) > 30
    assert all(re.search(r"def kernel\(", s) for s in srcs)

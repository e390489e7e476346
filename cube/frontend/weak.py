"""Names seeded by a literal take the type of the values they meet.

`total = 0` before `for a in range(n): total += a` (with `a` a u32) is Python's accumulator:
the literal has no type of its own, so the runtime variable `total` becomes when the loop
starts has none yet either. Its type is decided by the typed values it meets, as Rust infers
`let mut total = 0; total += a` to be u32:

- a *site* is a runtime variable created from a compile-time number (`total = 0`, `N`, a
  weak choice `1 if c else 0`, a helper's `return 0`): materialised at a runtime `if`/loop,
  first assigned inside one, or a helper's result;
- only a meeting that would otherwise be refused decides it: arithmetic (or a choice, a
  min/max, a comparison with a float) with a value of another kind or signedness, an
  assignment of a value of another type to it (or of it to a typed variable), a `return`
  of another type. Comparisons of two ints are already exact across signedness and decide
  nothing, so code that compiled before means what it meant;
- meeting an int type T, an int-seeded name takes T's signedness at 32 bits or more (a u8
  makes it u32, as an int literal alone is i32 and not i8); meeting a float it becomes f32
  (f64 for an f64), as Python's `0 + 0.5` is a float; a float-seeded name meeting an f64
  becomes f64;
- values computed from such a name and literals only (`off = pout * 2`) carry it: meeting
  a typed value decides the name.

The decision is made by translating again: a meeting raises `Retype` with the site and its
type, the kernel is translated again from the start with the site typed so (the hint), until
nothing changes. A second meeting with another type is refused with the usual "cannot mix"
message, naming where the first decided it. It is refused too, where the type cannot give
Python's meaning: a seed or an assigned literal the type cannot hold (`best = -1` meeting a
u32), and a name that becomes unsigned although it is decreased (`x - ...`, `x -= ...`,
`-x`): Python's int goes below 0 where a u32 wraps."""
from __future__ import annotations

from dataclasses import dataclass, field

from cube_ir import ir
from cube_ir.types import SCALARS, Scalar, f32, f64, i32

from .kinds import is_runtime

# at most this many re-translations of one kernel (one per name decided; a bound, never
# reached in practice: each adds a decision and a kernel has finitely many names)
MAX_RETRIES = 1000


class Retype(BaseException):
    """Internal: translate again with these sites typed (key -> Hint). A BaseException so
    that no handler of the translator's turns it into an error on its way out."""

    def __init__(self, hints: dict):
        super().__init__()
        self.hints = hints


@dataclass(frozen=True)
class Hint:
    elem: Scalar
    line: object  # where the name met the typed value that decided it
    met: Scalar


@dataclass
class Site:
    key: tuple
    name: str  # for messages: "'total'", "the result of 'find'"
    seed_is_float: bool
    literals: list = field(default_factory=list)  # (value, line) assigned while weak
    decreased: list = field(default_factory=list)  # lines subtracting from it / negating it
    hint: Hint | None = None

    def describe_seed(self) -> str:
        vals = []
        for v, line in self.literals:
            text = f"{v!r} (line {line})"
            if text not in vals:
                vals.append(text)
        if not vals:
            return f"{self.name} starts as a number"
        return f"{self.name} starts as the number {vals[0]}"


def target(site: Site, met: Scalar) -> Scalar | None:
    """The type a site takes when it meets a value of `met`'s element type (None: none)."""
    if met.is_bool:
        return None
    if site.seed_is_float:
        return f64 if met.is_float and met.bits == 64 else None
    if met.is_float:
        return f64 if met.bits == 64 else f32
    prefix = "u" if met.kind == "uint" else "i"
    return SCALARS[f"{prefix}{max(32, met.bits)}"]


class WeakNames:
    """The sites of one translation, the values they flow into, and the hints it runs
    with (kept across translations of one kernel)."""

    def __init__(self, hints: dict):
        self.hints = hints
        self.sites: dict[tuple, Site] = {}
        self._origins: dict[int, tuple] = {}  # id(value) -> (value, frozenset of keys)
        self._counts: dict[tuple, int] = {}

    # ---- sites and the values that carry them ------------------------------------------
    def new_site(self, base: tuple, name: str, seeds, line) -> Site:
        """A site for a variable created from the compile-time numbers `seeds`."""
        n = self._counts.get(base, 0)
        self._counts[base] = n + 1
        key = base + (n,)
        site = Site(key, name, any(isinstance(s, float) for s in seeds))
        site.literals.extend((s, line) for s in seeds)
        site.hint = self.hints.get(key)
        self.sites[key] = site
        return site

    def origin(self, v) -> frozenset:
        if not isinstance(v, ir.Var):
            return frozenset()
        entry = self._origins.get(id(v))
        return entry[1] if entry is not None and entry[0] is v else frozenset()

    def carry(self, result, keys) -> None:
        if isinstance(result, ir.Var) and keys:
            self._origins[id(result)] = (result, frozenset(keys))

    def tag(self, result, *operands) -> None:
        """`result` computed from `operands`: it carries their sites when every runtime
        operand carries some and has the result's element type (the rest are literals)."""
        if not isinstance(result, ir.Var):
            return
        keys: set = set()
        for x in operands:
            if not is_runtime(x):
                continue
            o = self.origin(x)
            if not o or x.type.elem != result.type.elem:
                return
            keys |= o
        self.carry(result, keys)

    def literal_assigned(self, var, value, line) -> None:
        for key in self.origin(var):
            self.sites[key].literals.append((value, line))

    # ---- meetings ----------------------------------------------------------------------
    def meet(self, x, y, line, message: str) -> None:
        """x and y (runtime) cannot be combined as they are typed (`message` says so).
        Where one side carries undecided sites that can take a type for the other, raise
        Retype; where a decided site is involved, refuse with `message` and why it has its
        type; else return (the caller's error stands)."""
        for a, other in ((x, y), (y, x)):
            self._decide(a, other.type.elem, line)
        for v in (x, y):
            note = self.explain_value(v)
            if note:
                raise _refusal(message + note)

    def meet_type(self, v, met: Scalar, line) -> None:
        """v (runtime) meets a literal or memory that needs `met`."""
        self._decide(v, met, line)

    def _decide(self, a, met: Scalar, line) -> None:
        keys = self.origin(a)
        if not keys:
            return
        sites = [self.sites[k] for k in sorted(keys, key=repr)]
        if any(s.hint is not None for s in sites):
            return
        want = {target(s, met) for s in sites}
        if len(want) != 1:
            return
        t = want.pop()
        if t is None or t == a.type.elem:
            return
        for s in sites:
            self._check_fits(s, t, met, line)
        raise Retype({s.key: Hint(t, line, met) for s in sites})

    def _check_fits(self, s: Site, t: Scalar, met: Scalar, line) -> None:
        if not t.is_int:
            return
        lo, hi = t.int_range
        for v, at in s.literals:
            if isinstance(v, int) and not lo <= v <= hi:
                raise _refusal(
                    f"{s.name} is assigned the number {v} (line {at}) and here meets a "
                    f"{met} value, so it would be {t}, which cannot hold {v}: cast the {met} "
                    f"value to a signed type where it meets it "
                    f"({'i64' if t.bits == 64 else 'i32'}(...))")
        if t.kind == "uint" and s.decreased:
            raise _refusal(self._decreased_message(s, t, met, line, s.decreased[0]))

    def decrease(self, v, line) -> None:
        """Something is subtracted from v (or v is negated)."""
        for key in self.origin(v):
            s = self.sites[key]
            s.decreased.append(line)
            if s.hint is not None and s.hint.elem.kind == "uint":
                raise _refusal(self._decreased_message(s, s.hint.elem, s.hint.met,
                                                       s.hint.line, line))

    def _decreased_message(self, s: Site, t, met, met_line, dec_line) -> str:
        return (f"{s.describe_seed()} and meets a {met} value at line {met_line}, so it "
                f"would be {t}, but line {dec_line} subtracts from it: below 0, where "
                f"Python's int goes negative, a {t} wraps. Keep it signed: cast the {met} "
                f"value where it meets it ({'i64' if t.bits == 64 else 'i32'}(...))")

    def explain(self, s: Site) -> str:
        h = s.hint
        return (f"{s.describe_seed()} and is {h.elem} because it meets a {h.met} value at "
                f"line {h.line}")

    def explain_value(self, v) -> str:
        """A note on why v has its type, if a decided site gave it ('' if none)."""
        for key in sorted(self.origin(v), key=repr):
            s = self.sites[key]
            if s.hint is not None:
                return f" ({self.explain(s)})"
        return ""


def _refusal(msg: str):
    from .arith import ArithError  # arith imports this module
    return ArithError(msg)


def default_type(seeds) -> Scalar:
    return f32 if any(isinstance(s, float) for s in seeds) else i32

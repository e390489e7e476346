"""Text builders: a module (declarations, helper functions) and a function body."""
from __future__ import annotations

from collections.abc import Callable

from .types import suffix


class Module:
    def __init__(self) -> None:
        self.decls: dict[str, str] = {}
        self.helpers: dict[str, str] = {}
        self.defs: list[str] = []
        self.meta: list[str] = []

    def loop_md(self, *props: str) -> str:
        """A distinct `!llvm.loop` node with the given properties (e.g. unroll.disable)."""
        n = len(self.meta)
        ids = [f"!{n + 1 + k}" for k in range(len(props))]
        self.meta.append(f"!{n} = distinct !{{{', '.join([f'!{n}', *ids])}}}")
        self.meta += [f'{i} = !{{!"{p}"}}' for i, p in zip(ids, props)]
        return f"!{n}"

    def declare(self, name: str, ret: str, args: list[str], attrs: str = "") -> str:
        if name not in self.decls:
            self.decls[name] = f"declare {ret} @{name}({', '.join(args)}){attrs}"
        return name

    def intrinsic(self, base: str, ll: str, nargs: int, extra: str = "") -> str:
        """`llvm.<base>.<suffix>` taking nargs operands of type ll and returning ll."""
        name = f"llvm.{base}.{suffix(ll)}{extra}"
        return self.declare(name, ll, [ll] * nargs)

    def helper(self, name: str, build: Callable[[str], str]) -> str:
        """An internal always-inline function, built once: build(name) returns its text."""
        if name not in self.helpers:
            self.helpers[name] = ""  # reserve (a builder may ask for other helpers)
            self.helpers[name] = build(name)
        return name

    def text(self, triple: str | None = None) -> str:
        parts = []
        if triple:
            parts.append(f'target triple = "{triple}"')
        parts += self.defs
        parts += [h for h in self.helpers.values() if h]
        parts += sorted(self.decls.values())
        if self.meta:
            parts.append("\n".join(self.meta))
        return "\n\n".join(parts) + "\n"


class Fn:
    """One function body. Instructions go to the current block; allocas to the entry."""

    def __init__(self, mod: Module) -> None:
        self.mod = mod
        self.lines: list[str] = []
        self.allocas: list[str] = []
        self.n = 0
        self.open = True

    def tmp(self, hint: str = "t") -> str:
        self.n += 1
        return f"%{hint}{self.n}"

    def label(self, hint: str = "b") -> str:
        self.n += 1
        return f"{hint}{self.n}"

    def _ensure_open(self) -> None:
        if not self.open:  # code after a jump: give it an (unreachable) block of its own
            self.lines.append(f"{self.label('dead')}:")
            self.open = True

    def op(self, text: str, hint: str = "t") -> str:
        self._ensure_open()
        name = self.tmp(hint)
        self.lines.append(f"  {name} = {text}")
        return name

    def do(self, text: str) -> None:
        self._ensure_open()
        self.lines.append(f"  {text}")

    def block(self, label: str) -> None:
        """Start block `label`, falling through into it from an open block."""
        if self.open:
            self.lines.append(f"  br label %{label}")
        self.lines.append(f"{label}:")
        self.open = True

    def br(self, label: str, loop_md: str | None = None) -> None:
        if self.open:
            md = f", !llvm.loop {loop_md}" if loop_md else ""
            self.lines.append(f"  br label %{label}{md}")
            self.open = False

    def cbr(self, cond: str, then: str, orelse: str) -> None:
        self._ensure_open()
        self.lines.append(f"  br i1 {cond}, label %{then}, label %{orelse}")
        self.open = False

    def ret(self, value: str = "void") -> None:
        self._ensure_open()
        self.lines.append(f"  ret {value}")
        self.open = False

    def alloca(self, ty: str, count: str | None = None, align: int = 16, hint: str = "a") -> str:
        self.n += 1
        name = f"%{hint}{self.n}"
        n = f", i64 {count}" if count else ""
        self.allocas.append(f"  {name} = alloca {ty}{n}, align {align}")
        return name

    def define(self, header: str, entry_lines: list[str] | None = None) -> str:
        body = ["entry:"] + self.allocas + (entry_lines or []) + self.lines
        return f"{header} {{\n" + "\n".join(body) + "\n}"

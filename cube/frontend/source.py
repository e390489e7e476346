"""Getting a function's AST with positions that point into the user's file.

The source is captured when `@cube` runs (`capture`), parsed later (`function_source`): a
file saved after import must not change what a kernel compiles to, nor the source lines its
errors show, so nothing here reads the file again after decoration."""
from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import linecache
import textwrap
from dataclasses import dataclass

from ..errors import CompileError


class CapturedSource:
    """A function's text as it was when decorated: linecache's list of the file's lines
    then (shared, never mutated: linecache replaces it when the file changes). The block
    and its hash are cut from it when first asked for, which keeps decoration cheap."""

    def __init__(self, filename: str, start: int, file_lines: list):
        self.filename = filename
        self.start = start  # file line of the first decorator (or the `def`)
        self.file_lines = file_lines

    @functools.cached_property
    def lines(self) -> tuple[str, ...] | None:
        """The decorators and body, by indentation (None if no `def` is found there)."""
        got = _block(self.file_lines, self.start)
        return tuple(got) if got is not None else None

    @functools.cached_property
    def sha256(self) -> str:
        return hashlib.sha256("".join(self.lines or ()).encode()).hexdigest()


@dataclass
class FunctionSource:
    filename: str
    first_line: int  # line of the first decorator (or `def`) in the file
    indent: int  # columns removed by dedent
    text: str  # the dedented source
    tree: ast.FunctionDef
    lines: tuple[str, ...] = ()  # the captured (undedented) lines, for error messages

    def loc(self, node) -> tuple | None:
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            return None
        line = self.first_line + lineno - 1
        col = getattr(node, "col_offset", 0) + self.indent
        src = self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""
        return (self.filename, line, col, src)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _block(all_lines: list, start: int) -> list[str] | None:
    """The decorators and body of the function starting at line `start`, by indentation:
    inspect.getsourcelines tokenizes (and compiles its regexes), which costs milliseconds on
    a cold start."""
    if not all_lines or start > len(all_lines):
        return None
    base = _indent(all_lines[start - 1])
    out, seen_def = [], False
    for line in all_lines[start - 1:]:
        stripped = line.strip()
        if seen_def and stripped and not stripped.startswith("#") and _indent(line) <= base:
            break
        if not seen_def and stripped.startswith(("def ", "async def ")):
            seen_def = True
        out.append(line)
    while out and (not out[-1].strip() or out[-1].strip().startswith("#")):
        out.pop()
    return out if seen_def else None


def capture(fn) -> CapturedSource | None:
    """fn's source now (at decoration), or None when there is no file to read it from (the
    REPL, exec'd strings: `function_source` then asks inspect, and fails clearly)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    filename = code.co_filename
    # a file edited since linecache last read it (an importlib.reload) is read afresh
    linecache.checkcache(filename)
    all_lines = linecache.getlines(filename, getattr(fn, "__globals__", None))
    if not all_lines:
        return None
    return CapturedSource(filename, code.co_firstlineno, all_lines)


def _parse(lines) -> tuple[str, int, ast.Module]:
    raw = "".join(lines)
    text = textwrap.dedent(raw)
    indent = _indent(lines[0]) if text != raw else 0
    return text, indent, ast.parse(text)


def function_source(fn, captured: CapturedSource | None = None) -> FunctionSource:
    """fn's AST, from the text captured at decoration when there is one."""
    lines = parsed = None
    if captured is not None:
        filename, start, lines = captured.filename, captured.start, captured.lines
        try:
            if lines is None:
                raise SyntaxError("no `def` at the function's first line")
            parsed = _parse(lines)
        except SyntaxError:
            # e.g. a string literal that leaves the indentation: tokenize the captured file
            try:
                lines = tuple(inspect.getblock(captured.file_lines[start - 1:]))
                parsed = _parse(lines)
            except (SyntaxError, IndexError) as e:
                raise CompileError(f"cannot parse the source of {fn.__qualname__}: "
                                   f"{e}") from None
    else:
        try:
            got, start = inspect.getsourcelines(fn)
            filename = inspect.getsourcefile(fn) or "<unknown>"
        except (OSError, TypeError) as e:
            raise CompileError(f"cannot read the source of {fn.__qualname__}: {e}") from None
        lines = tuple(got)
        parsed = _parse(lines)
    text, indent, module = parsed
    fdef = module.body[0] if module.body else None
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise CompileError(f"{fn.__qualname__} is not a function definition")
    # `start` is the first decorator line; ast line numbers count from there too
    return FunctionSource(filename, start, indent, text, fdef, lines)

"""Getting a function's AST with positions that point into the user's file."""
from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
from dataclasses import dataclass

from ..errors import CompileError


@dataclass
class FunctionSource:
    filename: str
    first_line: int  # line of the `def` (after decorators) in the file
    indent: int  # columns removed by dedent
    text: str  # the dedented source
    tree: ast.FunctionDef

    def loc(self, node) -> tuple | None:
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            return None
        line = self.first_line + lineno - 1
        col = getattr(node, "col_offset", 0) + self.indent
        return (self.filename, line, col, linecache.getline(self.filename, line))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _block_lines(fn) -> tuple[list[str], int] | None:
    """The decorators and body of fn by indentation, from linecache: inspect.getsourcelines
    tokenizes (and compiles its regexes), which costs milliseconds on a cold start."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    all_lines = linecache.getlines(code.co_filename, getattr(fn, "__globals__", None))
    start = code.co_firstlineno
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
    return (out, start) if seen_def else None


def _parse(lines: list[str]):
    raw = "".join(lines)
    text = textwrap.dedent(raw)
    indent = _indent(lines[0]) if text != raw else 0
    return text, indent, ast.parse(text)


def function_source(fn) -> FunctionSource:
    found = _block_lines(fn)
    parsed = None
    if found is not None:
        try:
            parsed = _parse(found[0])
        except SyntaxError:
            parsed = None  # e.g. a string literal that leaves the indentation: ask inspect
    if parsed is not None:
        start = found[1]
        filename = fn.__code__.co_filename
    else:
        try:
            lines, start = inspect.getsourcelines(fn)
            filename = inspect.getsourcefile(fn) or "<unknown>"
        except (OSError, TypeError) as e:
            raise CompileError(f"cannot read the source of {fn.__qualname__}: {e}") from None
        parsed = _parse(lines)
    text, indent, module = parsed
    fdef = module.body[0]
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise CompileError(f"{fn.__qualname__} is not a function definition")
    # `start` is the first decorator line; ast line numbers count from there too
    return FunctionSource(filename, start, indent, text, fdef)

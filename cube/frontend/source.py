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


def function_source(fn) -> FunctionSource:
    try:
        lines, start = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or "<unknown>"
    except (OSError, TypeError) as e:
        raise CompileError(f"cannot read the source of {fn.__qualname__}: {e}") from None
    raw = "".join(lines)
    text = textwrap.dedent(raw)
    first = lines[0]
    indent = len(first) - len(first.lstrip()) if text != raw else 0
    module = ast.parse(text)
    fdef = module.body[0]
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise CompileError(f"{fn.__qualname__} is not a function definition")
    # `start` is the first decorator line; ast line numbers count from there too
    return FunctionSource(filename, start, indent, text, fdef)

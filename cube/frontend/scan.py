"""Which local names a piece of code assigns.

A name assigned in straight-line code (or in an unrolled loop, or a compile-time `if`) just
binds its value: a compile-time Python value stays compile-time. The translator calls
`assigned_names` on the body of each *runtime* `if`/loop before emitting it: every name the
body assigns becomes a runtime variable there, seeded with its current value, so the value
flows across iterations and branches. Literals assigned to it become typed constants."""
from __future__ import annotations

import ast


class _Scan(ast.NodeVisitor):
    def __init__(self):
        self.names: set[str] = set()

    def _assign(self, target):
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            self.names.add(target.value.id)  # `v[k] = x` rewrites a line variable in place
        elif isinstance(target, ast.Name):
            self.names.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._assign(t)

    def visit_Assign(self, node):
        for t in node.targets:
            self._assign(t)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self._assign(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        self._assign(node.target)
        self.generic_visit(node)

    def visit_For(self, node):
        if not _unrolled(node.iter):  # an unrolled loop's counter is a compile-time value
            self._assign(node.target)
        self.generic_visit(node)

    def visit_FunctionDef(self, node):  # nested defs are rejected later
        pass


def _unrolled(it) -> bool:
    """`for` over a tuple/list or `range(..., unroll=True)`: unrolled at compile time."""
    if isinstance(it, (ast.Tuple, ast.List)):
        return True
    return isinstance(it, ast.Call) and any(
        k.arg == "unroll" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in it.keywords)


def assigned_names(stmts) -> set[str]:
    """Every name the statements assign (loop targets included), at any depth."""
    s = _Scan()
    for stmt in stmts:
        s.visit(stmt)
    return s.names


class _Locals(ast.NodeVisitor):
    """Names Python would treat as local to the function: every name bound anywhere in it."""

    def __init__(self):
        self.names: set[str] = set()

    def _bind(self, target):
        if isinstance(target, ast.Name):
            self.names.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._bind(t)

    def visit_Assign(self, node):
        for t in node.targets:
            self._bind(t)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self._bind(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        self._bind(node.target)
        self.generic_visit(node)

    def visit_For(self, node):
        self._bind(node.target)
        self.generic_visit(node)

    def visit_FunctionDef(self, node):
        pass


def local_names(fdef: ast.FunctionDef) -> frozenset[str]:
    """The function's parameters and every name its body binds."""
    s = _Locals()
    for stmt in fdef.body:
        s.visit(stmt)
    a = fdef.args
    params = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    params += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return frozenset(s.names | set(params))


def loop_exits(body) -> ast.stmt | None:
    """The first break or continue of this loop body's own (not of a nested loop), if any."""
    stack = list(reversed(body))
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Break, ast.Continue)):
            return n
        if isinstance(n, (ast.For, ast.While, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(n))))
    return None

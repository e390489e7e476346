"""Which local names are mutable (runtime variables) and which may hold compile-time values.

A name assigned once, outside any loop or `if`, binds whatever its value is (a compile-time
Python value stays compile-time). A name assigned more than once, or inside a loop or `if`,
is a runtime variable: literals assigned to it become typed constants."""
from __future__ import annotations

import ast


class _Scan(ast.NodeVisitor):
    def __init__(self):
        self.count: dict[str, int] = {}
        self.nested: set[str] = set()
        self.for_targets: set[str] = set()
        self.depth = 0

    def _assign(self, target):
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            # `v[k] = x` rewrites a line variable in place: it makes v mutable
            self.count[target.value.id] = self.count.get(target.value.id, 0) + 2
        if isinstance(target, ast.Name):
            self.count[target.id] = self.count.get(target.id, 0) + 1
            if self.depth:
                self.nested.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._assign(t)

    def visit_Assign(self, node):
        for t in node.targets:
            self._assign(t)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self._assign(node.target)
        self._assign(node.target)  # read-modify-write: always mutable
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        self._assign(node.target)
        self.generic_visit(node)

    def _nested(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    def visit_For(self, node):
        if isinstance(node.target, ast.Name):
            self.for_targets.add(node.target.id)
        self._nested(node)

    visit_While = visit_If = _nested

    def visit_FunctionDef(self, node):  # nested defs are rejected later
        pass


def mutable_names(fdef: ast.FunctionDef) -> set[str]:
    s = _Scan()
    for stmt in fdef.body:
        s.visit(stmt)
    return {n for n, c in s.count.items() if c > 1 or n in s.nested}

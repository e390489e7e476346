"""dl is layered one way (docs/dl.md, "Layers"): each module imports only its own layer and the
ones below it, the module import graph has no cycles, and no import hides inside a function
to break one.

The graph is built from the source with `ast` (module-level imports only: what runs when a
module is first imported), so the test needs no import of dl and sees exactly what a reader
sees."""
from __future__ import annotations

import ast
from pathlib import Path

DL = Path(__file__).resolve().parents[2] / "dl"

# Lowest first. A module belongs to the layer of its longest matching prefix.
LAYERS = [
    ("kernels", ("dl.kernels",)),  # the kernel library: @cube kernels and their launchers
    ("core", ("dl.dtypes", "dl.shapes", "dl.devices", "dl.io", "dl.io.host", "dl.tensor",
              "dl.io.dlpack")),  # Tensor: storage, views, dtypes, devices, host copies
    ("fusion", ("dl.fusion",)),  # lazy elementwise graphs, fused kernels
    ("autograd", ("dl.autograd",)),  # the tape (calls Tensor methods, never dl.ops)
    ("ops", ("dl.ops",)),  # tensor-level ops: they declare the Tensor method surface
    ("distributed", ("dl.distributed",)),  # collectives on tensors (MPI, NCCL)
    ("api", ("dl.nn", "dl.optim", "dl.io.safetensors", "dl.capture", "dl.utils")),
    ("package", ("dl",)),  # dl/__init__.py: the public names
]

# Imports inside a function, allowed only for an optional or heavy dependency: (module,
# imported module) -> why.
FUNCTION_IMPORTS_ALLOWED: dict[tuple[str, str], str] = {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(DL.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(DL.rglob("*.py"))}


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".")
    base = base if is_pkg else base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(mod: str, is_pkg: bool, node, known) -> list[str]:
    """The dl modules an import statement imports."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = _resolve(mod, is_pkg, node)
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                 for a in node.names]
    return [n for n in names if n in known]


def _type_checking(node) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _scan(tree: ast.AST):
    """(module-level import nodes, function-level import nodes with their function)."""
    top, inner = [], []

    def walk(node, func):
        for child in ast.iter_child_nodes(node):
            if _type_checking(child):
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                (inner if func else top).append((child, func))
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                walk(child, getattr(child, "name", "<lambda>"))
            else:
                walk(child, func)
    walk(tree, None)
    return top, inner


def import_graph():
    """{module: set of dl modules it imports at module level}, and the function-level imports
    as (module, function, imported module or statement)."""
    mods = _modules()
    graph, inner_imports = {}, []
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        top, inner = _scan(ast.parse(path.read_text(), str(path)))
        graph[mod] = {t for node, _ in top for t in _targets(mod, is_pkg, node, mods)} - {mod}
        for node, func in inner:
            names = _targets(mod, is_pkg, node, mods) or \
                [a.name for a in node.names] if isinstance(node, ast.Import) else \
                _targets(mod, is_pkg, node, mods) or [_resolve(mod, is_pkg, node)]
            inner_imports += [(mod, func, n) for n in names]
    return graph, inner_imports


def strongly_connected(graph: dict) -> list[list[str]]:
    """Tarjan's algorithm (iterative)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def layer_of(mod: str) -> int:
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (mod == p or mod.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    assert rank is not None, f"{mod} belongs to no layer: add it to LAYERS"
    return rank


def test_every_module_has_a_layer():
    for mod in _modules():
        layer_of(mod)


def test_no_import_cycles():
    graph, _ = import_graph()
    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    assert not cycles, f"import cycles among dl modules (largest {max(map(len, cycles))}): " + \
        "; ".join(" <-> ".join(c) for c in sorted(cycles, key=len, reverse=True))


def test_no_import_cycles_through_function_level_imports():
    """The imports a function makes when it runs count too: hiding one in a function is how
    a cycle was broken before (the allowed ones are outside dl)."""
    graph, inner = import_graph()
    for m, _, t in inner:
        if t in graph:
            graph[m] = graph[m] | {t}
    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    assert not cycles, f"import cycles among dl modules (largest {max(map(len, cycles))}): " + \
        "; ".join(" <-> ".join(c) for c in sorted(cycles, key=len, reverse=True))


def test_layers_import_downwards():
    graph, _ = import_graph()
    bad = [f"{m} ({LAYERS[layer_of(m)][0]}) imports {t} ({LAYERS[layer_of(t)][0]})"
           for m, ts in sorted(graph.items()) for t in sorted(ts) if layer_of(t) > layer_of(m)]
    assert not bad, "a lower layer imports a higher one:\n" + "\n".join(bad)


def test_no_function_level_imports():
    _, inner = import_graph()
    bad = [f"{m}.{f}() imports {t}" for m, f, t in inner
           if (m, t) not in FUNCTION_IMPORTS_ALLOWED]
    assert not bad, f"{len(bad)} imports inside functions (import at module level, or allow " \
        f"an optional dependency in FUNCTION_IMPORTS_ALLOWED with its reason):\n" + "\n".join(bad)


def test_the_checks_can_fail():
    """The graph walk and the cycle finder see a cycle and a function-level import."""
    assert sorted(map(sorted, strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"},
                                                   "d": {"a"}}))) == [["a", "b", "c"], ["d"]]
    top, inner = _scan(ast.parse("import os\ndef f():\n    from . import x\n"))
    assert len(top) == 1 and [f for _, f in inner] == ["f"]
    assert layer_of("dl.ops.elementwise") > layer_of("dl.autograd.tape") > \
        layer_of("dl.fusion.lazy") > layer_of("dl.tensor") > layer_of("dl.kernels.matmul")


# ---- the Tensor method surface, declared once ---------------------------------------------
SETS_TENSOR_ATTRIBUTES = {
    "dl.ops.registry": "the op registry: every op's methods and operators",
    "dl.fusion.lazy": "Tensor._compute and _share_out, how lazy tensors are computed",
}


def test_tensor_methods_are_set_in_one_place():
    """Outside the core class, only the registry (and fusion's `_compute`) add Tensor
    attributes: no method lists, no `Tensor.x = ...` beside an op."""
    bad = []
    for mod, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = node.targets if isinstance(node, ast.Assign) else []
            sets = any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and
                       t.value.id == "Tensor" for t in targets)
            sets |= isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "setattr" and isinstance(node.args[0], ast.Name) and \
                node.args[0].id == "Tensor"
            if sets and mod not in SETS_TENSOR_ATTRIBUTES:
                bad.append(f"{mod}:{node.lineno}")
    assert not bad, "Tensor attributes set outside dl/ops/registry.py: " + ", ".join(bad)


def test_each_elementwise_op_is_one_declaration():
    """Every op declared in dl/ops/elementwise.py is, from that one declaration, an op in the
    registry, a name in dl.ops and dl, a Tensor method (the op function itself: no
    forwarding per call) and, unless composed of other ops, an emitter of fused kernels."""
    import dl
    from dl.fusion.emit_ops import EMITTERS
    from dl.ops import OPS, elementwise
    composed = {"gelu", "square", "reciprocal", "clamp", "cast"}  # gelu: its two variants
    for name in elementwise.__all__:
        fn = getattr(elementwise, name)
        assert getattr(dl.ops, name) is fn and getattr(dl, name) is fn, name
        # where's method is PyTorch's x.where(cond, y), not where(cond, a, b)
        if name not in ("cast", "where"):
            assert OPS[name] is fn and getattr(dl.Tensor, name) is fn, name
        assert name in EMITTERS or name in composed, name
    assert dl.Tensor.__add__ is OPS["add"] and dl.Tensor.__matmul__ is OPS["matmul"]

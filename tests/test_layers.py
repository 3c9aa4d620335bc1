"""The layers point one way: models -> converters -> harness, and no module imports
itself back through others.

Read from the source (AST), every import counted, the ones inside functions
too: a lazy import is still a dependency, only a cheaper one.  A failure names
the importing module, the line and what it takes, so the fix starts there.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.utils import ROOT

LAYERS = ("core", "models", "converters", "harness")  # bottom to top
NAMESPACE = "dlbench."


def _modules() -> dict[str, Path]:
    found = {}
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _ours(name: str) -> str | None:
    """The module of ours an import names (longest known prefix), or None."""
    if not name.startswith(NAMESPACE):
        return None
    name = name[len(NAMESPACE) :]
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str, source: str | None = None) -> list[tuple[str, int]]:
    """(imported module of ours, line) for every import statement in ``module`` (its file,
    or ``source`` read as that module's text)."""
    path = MODULES[module]
    out = []
    text = path.read_text() if source is None else source
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = package[: len(package) - node.level + 1]
                stem = NAMESPACE + ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            # ``from P import x`` runs P (a package's __init__) before it takes x, even
            # when x is a submodule: P is a dependency of its own.
            names = [stem] + [f"{stem}.{a.name}" for a in node.names]
        else:
            continue
        # A child importing its parent package counts: the package's __init__ is a module
        # that may import anything, this child included (a circle the old filter hid).
        for target in dict.fromkeys(filter(None, map(_ours, names))):
            if target != module:
                out.append((target, node.lineno))
    return out


GRAPH = {m: imports(m) for m in MODULES}


def test_the_namespace_is_the_only_way_in():
    """Bare `import harness` / `import models` would collide with other packages' names."""
    bare = []
    for _module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            bare += [
                f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names if n.split(".")[0] in LAYERS
            ]
    assert not bare, "import through the dlbench namespace:\n" + "\n".join(bare)


def test_tests_and_benchmarks_import_through_the_namespace_too():
    """Code the tests run in child processes (strings passed to ``python -c``) included:
    a bare import there loads a second copy of the registry, with no models in it."""
    import re

    bare = re.compile(r"(?:^|[\"'; ])(?:from|import) (?:{})\b".format("|".join(LAYERS)), re.M)
    found = [
        f"{p.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
        for folder in ("tests", "benchmarks")
        for p in sorted((ROOT / folder).glob("*.py"))
        for text in [p.read_text()]
        for m in bare.finditer(text)
    ]
    assert not found, "bare imports of dlbench's layers:\n" + "\n".join(found)


def test_no_layer_imports_a_layer_above_it():
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    upward = [
        f"{MODULES[m].relative_to(ROOT)}:{line}: imports {t}"
        for m, targets in GRAPH.items()
        for t, line in targets
        if rank[t.split(".")[0]] > rank[m.split(".")[0]]
    ]
    assert not upward, "upward imports:\n" + "\n".join(upward)


def cycles(graph: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    edges = {m: sorted({t for t, _ in ts if t in graph}) for m, ts in graph.items()}
    for root in graph:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter[0]
                counter[0] += 1
                stack.append(v)
                on.add(v)
            if i < len(edges[v]):
                work.append((v, i + 1))
                w = edges[v][i]
                if w not in index:
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return out


def test_no_import_circles():
    found = cycles(GRAPH)
    assert not found, "modules that import each other (directly or around a circle):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_the_checks_catch_what_they_are_for():
    """The reader and the circle finder see a planted upward import and a planted circle."""
    assert cycles({"a": [("b", 1)], "b": [("c", 1)], "c": [("a", 1)], "d": [("a", 1)]}) == [["a", "b", "c"]]
    assert cycles({"a": [("b", 1)], "b": []}) == []
    # A child that takes a sibling through its package depends on the package's __init__,
    # which may import the child: the edge to the parent must be seen.
    assert imports("harness.data.cifar10", "from dlbench.harness.data import imageops\n") == [
        ("harness.data", 1),
        ("harness.data.imageops", 1),
    ]
    assert imports("harness.data.cifar10", "from . import imageops\n") == [
        ("harness.data", 1),
        ("harness.data.imageops", 1),
    ]
    assert imports("harness.data.cifar10", "import dlbench.harness.data.imageops as i\n") == [
        ("harness.data.imageops", 1)
    ]
    any_converter = next(m for m in MODULES if m.startswith("converters."))
    assert _ours("dlbench.harness.cli.main") == "harness.cli"
    assert _ours("numpy.linalg") is None
    assert all(t in MODULES for ts in GRAPH.values() for t, _ in ts)
    assert any_converter in GRAPH

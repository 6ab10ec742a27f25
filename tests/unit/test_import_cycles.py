"""No import cycles among streamjoin's modules, counting every import statement (a function's too: a cycle
that only works because one side imports late is still a knot). Read from the source (no import), < 1 s."""

from __future__ import annotations

import ast
from pathlib import Path

from streamjoin.core.plans import PROJECT_HOME

PACKAGE = PROJECT_HOME / "plugins" / "streamjoin"


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the package's modules it imports (``from a import b`` counts ``a.b`` when that is a module)."""
    files = {_module(p): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's package
                    anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            graph[name] |= {t for t in targets if t in files and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_streamjoin_has_no_import_cycles() -> None:
    graph = import_graph()
    assert {"streamjoin.airflow.launcher", "streamjoin.airflow.lifecycle"} <= set(graph)
    assert "streamjoin.airflow.launcher" in graph["streamjoin.airflow.lifecycle"]  # the graph sees imports
    knots = cycles(graph)
    assert not knots, "\n".join(
        " <-> ".join(c) + ": " + "; ".join(f"{v} -> {sorted(w for w in graph[v] if w in c)}" for v in c) for c in knots
    )


def test_a_cycle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []

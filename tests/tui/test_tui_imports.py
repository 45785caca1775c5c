"""The TUI's modules import each other in one direction: no cycle, counting imports inside functions
(a function-level import hides a cycle from the interpreter, not from the reader)."""

import ast
from pathlib import Path

import gputrace.tui

TUI = Path(gputrace.tui.__file__).parent


def _imports(path: Path) -> set[str]:
    """Names of the ``gputrace.tui`` modules that ``path`` imports anywhere (top level or in a function)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            if name.startswith("gputrace.tui.") and (TUI / f"{name.split('.')[2]}.py").is_file():
                out.add(name.split(".")[2])
    return out


def tui_graph() -> dict[str, set[str]]:
    return {p.stem: _imports(p) - {p.stem} for p in TUI.glob("*.py") if p.stem != "__init__"}


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` as a path that returns to its start, or [] (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str]:
        state[m] = 1
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (c := visit(n)):
                return c
        path.pop()
        state[m] = 2
        return []

    for m in sorted(graph):
        if m not in state and (c := visit(m)):
            return c
    return []


def test_find_cycle_finds_a_function_level_cycle():
    assert find_cycle({"index": {"activity_rows"}, "activity_rows": {"render"}, "render": {"index"}}) == [
        "activity_rows", "render", "index", "activity_rows"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []


def test_the_tui_has_no_import_cycle():
    graph = tui_graph()
    assert {"index", "render", "activity_rows", "gantt"} <= set(graph)
    assert find_cycle(graph) == []

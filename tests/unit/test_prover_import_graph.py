"""The prover's import graph has no cycle, counting imports inside functions (which hide cycles from Python).

A cycle hidden by a function-level import still ties its modules together: none of them can be understood,
tested or moved alone, and the import order decides whether a call works. grimp (import-linter's graph) reads
every import statement, wherever it sits.
"""

from __future__ import annotations

import pytest

grimp = pytest.importorskip("grimp")


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module (each a cycle or a knot of them)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_strongly_connected_finds_a_hidden_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert strongly_connected(edges) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_prover_has_no_import_cycle():
    graph = grimp.build_graph("gputrace", cache_dir=None)
    mods = {m for m in graph.modules if m == "gputrace.prover" or m.startswith("gputrace.prover.")}
    edges = {m: {t for t in graph.find_modules_directly_imported_by(m) if t in mods} for m in mods}
    cycles = strongly_connected(edges)
    detail = "\n".join(
        " <-> ".join(c) + ": " + "; ".join(f"{a} -> {b}" for a in c for b in sorted(edges[a]) if b in c)
        for c in cycles
    )
    assert not cycles, f"{len(cycles)} import cycle(s) in gputrace.prover:\n{detail}"

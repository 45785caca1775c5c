"""Import cycles over the whole package, function-level imports included (issue 23: the target is none).

A cycle is a strongly connected component of grimp's import graph of ``gputrace`` with more than one module (or a
module importing itself). grimp reads every ``import`` statement, also those inside functions, so a cycle hidden by
a deferred import counts: deferring an import hides the cycle from the interpreter, not from the reader of the code.

Run as a script for a report (``.venv/bin/python tests/unit/test_import_cycles.py``): one block per cycle, its
modules, and one shortest loop through it with the line of each import.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Iterable, Mapping
from itertools import pairwise

import pytest

grimp = pytest.importorskip("grimp")  # installed with import-linter (the ``test`` extra)


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of ``graph`` (node -> successors), iteratively (no recursion limit).

    Each component is sorted; the components come in no particular order. Successors that are not keys are
    treated as nodes without successors."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, succ = work[-1]
            for nxt in succ:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph.get(nxt, ()))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        comp.append(m)
                        if m == node:
                            break
                    out.append(sorted(comp))
    return out


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The components that form a cycle: more than one node, or one node with an edge to itself. Sorted."""
    found = [c for c in strongly_connected(graph) if len(c) > 1 or c[0] in set(graph.get(c[0], ()))]
    return sorted(found)


def shortest_loop(graph: Mapping[str, Iterable[str]], component: list[str]) -> list[str]:
    """One shortest closed walk inside ``component`` from its first node back to it (first node repeated last)."""
    members = set(component)
    start = component[0]
    prev: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph.get(node, ())):
            if nxt not in members:
                continue
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return [start, *reversed(path[:-1]), start] if node != start else [start, start]
            if nxt not in prev:
                prev[nxt] = node
                queue.append(nxt)
    raise ValueError(f"{component} is not a cycle")


def package_graph(package: str = "gputrace") -> tuple[object, dict[str, set[str]]]:
    g = grimp.build_graph(package, cache_dir=None)
    return g, {m: set(g.find_modules_directly_imported_by(m)) for m in g.modules}


def report(package: str = "gputrace") -> tuple[int, str]:
    """(number of cycles, a text naming each one's modules and one shortest loop with its import lines)."""
    g, graph = package_graph(package)
    found = cycles(graph)
    lines = [f"{len(found)} import cycle(s) in {package} (function-level imports included)"]
    for comp in found:
        lines.append(f"- {len(comp)} modules: {', '.join(comp)}")
        loop = shortest_loop(graph, comp)
        for a, b in pairwise(loop):
            where = ", ".join(f"l.{d['line_number']}" for d in g.get_import_details(importer=a, imported=b))
            lines.append(f"    {a} -> {b} ({where})")
    return len(found), "\n".join(lines)


# -- the finder itself, on graphs whose answer is known ------------------------------------------------------


def test_finds_each_cycle_once_and_nothing_else():
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},  # a -> b -> c -> a
        "d": {"e"},
        "e": set(),  # a chain below the cycle is no cycle
        "x": {"y"},
        "y": {"x"},  # a second one
        "s": {"s"},  # a module importing itself
    }
    assert cycles(graph) == [["a", "b", "c"], ["s"], ["x", "y"]]
    assert shortest_loop(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]
    assert shortest_loop(graph, ["s"]) == ["s", "s"]


def test_an_acyclic_graph_has_no_cycle():
    graph = {"a": {"b", "c"}, "b": {"c"}, "c": set(), "d": {"a"}}
    assert cycles(graph) == []


def test_a_deep_chain_does_not_recurse():
    n = 5 * sys.getrecursionlimit()
    graph = {f"m{i}": {f"m{i + 1}"} for i in range(n)}
    graph[f"m{n}"] = {"m0"}
    assert [len(c) for c in cycles(graph)] == [n + 1]


def test_the_loop_shown_is_a_shortest_one():
    # 0 -> 1 -> 2 -> 3 -> 0 and a shortcut 1 -> 3: the loop through the shortcut has 3 edges.
    graph = {"0": {"1"}, "1": {"2", "3"}, "2": {"3"}, "3": {"0"}}
    assert shortest_loop(graph, sorted(graph)) == ["0", "1", "3", "0"]


# -- the package ----------------------------------------------------------------------------------------------


def test_the_package_has_no_import_cycle():
    count, text = report()
    assert count == 0, text


if __name__ == "__main__":
    n, text = report(sys.argv[1] if len(sys.argv) > 1 else "gputrace")
    print(text)
    sys.exit(1 if n else 0)

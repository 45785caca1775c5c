"""``nest_parents`` skips rows alone in their cluster: the same parents as visiting every row."""

from __future__ import annotations

import numpy as np
import pytest

from gputrace.timeline.nesting import nest_parents


def _visit_every_row(start, end, group, tiebreak=None) -> np.ndarray:
    """The stack walk over every row, as it was before rows alone were skipped (the reference)."""
    n = len(start)
    parent = np.full(n, -1, dtype=np.int64)
    keys = [np.arange(n)] + ([np.asarray(tiebreak)] if tiebreak is not None else []) + [-end, start, group]
    stack: list[int] = []
    prev = None
    for i in np.lexsort(keys).tolist() if n else []:
        if group[i] != prev:
            stack.clear()
            prev = group[i]
        s, e = start[i], end[i]
        while stack and end[stack[-1]] <= s and not (start[stack[-1]] == s and end[stack[-1]] >= e):
            stack.pop()
        j = len(stack) - 1
        while j >= 0 and end[stack[j]] < e:
            j -= 1
        if j >= 0:
            parent[i] = stack[j]
        stack.append(i)
    return parent


@pytest.mark.parametrize("seed", range(6))
def test_same_parents_as_visiting_every_row(seed):
    """Random ranges: touching, nested, partly overlapping, zero-length at cluster edges, end before
    start, several groups, ties broken by ``tiebreak``."""
    rng = np.random.default_rng(seed)
    for trial in range(400):
        n = int(rng.integers(0, 50))
        scale = int(rng.choice([3, 10, 100]))
        start = rng.integers(0, scale, n)
        end = start + rng.integers(-1 if trial % 5 == 0 else 0, scale // 2 + 1, n)
        group = rng.integers(0, int(rng.choice([1, 2, 4])), n)
        tie = rng.integers(0, 3, n) if trial % 2 else None
        assert (nest_parents(start, end, group, tie) == _visit_every_row(start, end, group, tie)).all()


def test_zero_length_range_at_a_cluster_edge_keeps_its_parent():
    # [0, 5] then [5, 5] (zero-length at its end) then [5, 5]: same start as the row before, so no new
    # cluster: the second zero-length range nests in the first, as the stack walk has it.
    start, end, group = np.array([0, 5, 5]), np.array([5, 5, 5]), np.zeros(3, np.int64)
    assert nest_parents(start, end, group).tolist() == _visit_every_row(start, end, group).tolist() == [-1, -1, 1]


@pytest.mark.parametrize("piece", [1, 2, 3, 7])
def test_walk_in_pieces_gives_the_same_parents(monkeypatch, piece):
    """The walk is cut into pieces where a cluster starts: tiny pieces (many cuts, clusters longer
    than a piece) give the parents of the walk over every row."""
    import gputrace.timeline.nesting as nesting

    monkeypatch.setattr(nesting, "_PIECE", piece)
    rng = np.random.default_rng(100 + piece)
    for trial in range(300):
        n = int(rng.integers(0, 60))
        scale = int(rng.choice([3, 10, 100]))
        start = rng.integers(0, scale * 4, n)
        end = start + rng.integers(-1 if trial % 5 == 0 else 0, scale // 2 + 1, n)
        group = rng.integers(0, int(rng.choice([1, 2, 4])), n)
        tie = rng.integers(0, 3, n) if trial % 2 else None
        assert (nesting.nest_parents(start, end, group, tie) == _visit_every_row(start, end, group, tie)).all()

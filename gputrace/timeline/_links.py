"""Parent links of a Timeline's rows, found on the rows as read (before ``from_parts`` sorts them).

On the rows as read, a span's parent id is usually near its own (the spans of a request are written
together), so the binary searches hit the cache: 0.047 s for 1 M spans against 0.070 s on the sorted
rows (benchmarks/RESULTS.md, step 14). The links are then mapped to the sorted rows (``to_sorted``).
Pure numpy; one ``RowLinks`` per build.

The rule (the Timeline's contract, ``model``): a row's parent is the row with its
``parent_span_id`` as ``span_id`` and the same ``trace``; where several rows qualify (ids clash:
a broken or hostile writer), the one that comes first in the sorted Timeline; a row that names
itself is a root. Found here on unsorted rows, a clash is resolved by ``to_sorted`` once the sort
order is known, so the result never depends on the order the rows were read in.
"""

from __future__ import annotations

import numpy as np

from gputrace.timeline._rows import short_depths


class RowLinks:
    """Parent links of unsorted rows: ``link()``, then ``to_sorted`` once the sort order is known."""

    def __init__(self, span_id: np.ndarray, parent_span_id: np.ndarray, trace: np.ndarray) -> None:
        self.span_id, self.parent_span_id, self.trace = span_id, parent_span_id, trace
        self.parent: np.ndarray | None = None  # unsorted row -> unsorted parent row, -1
        self.clashes: list[tuple[int, np.ndarray]] = []  # (row, candidate rows) where the parent id repeats
        self.depth: np.ndarray | None = None  # unsorted depths, when no clash and every chain is short

    def link(self) -> RowLinks:
        try:
            self._link()
        finally:  # the joined id columns are freed once the caller has gathered its sorted copies too
            self.span_id = self.parent_span_id = self.trace = None  # type: ignore[assignment]
        return self

    def _link(self) -> None:
        ids, p_id, trace = self.span_id, self.parent_span_id, self.trace
        n = len(ids)
        parent = np.full(n, -1, dtype=np.int64)
        self.parent = parent
        if n == 0:
            self.depth = np.zeros(0, np.int16)
            return
        # Span ids are random 64-bit numbers (or counters), so search by id alone (one argsort + searchsorted,
        # O(n log n)) and check the trace; ids that occur more than once are left to to_sorted. Every row is
        # searched (nearly all have a parent id), and temporaries are dropped early.
        order = np.argsort(ids, kind="stable")
        s_id = ids[order]
        repeats = bool((s_id[1:] == s_id[:-1]).any())
        pos = np.searchsorted(s_id, p_id, side="left")
        np.minimum(pos, n - 1, out=pos)
        found = s_id[pos] == p_id
        found &= p_id != 0
        if repeats:
            nxt = np.minimum(pos + 1, n - 1)
            clash = found & (pos + 1 < n) & (s_id[nxt] == p_id)  # the parent id's run has several rows
            del nxt
            for r in np.flatnonzero(clash).tolist():
                lo = int(pos[r])
                hi = int(np.searchsorted(s_id, p_id[r], side="right"))
                rows = order[lo:hi]
                self.clashes.append((r, rows[trace[rows] == trace[r]]))
        del s_id
        cand = order[pos]
        del order, pos
        found &= trace[cand] == trace
        np.copyto(parent, cand, where=found)
        del cand, found
        if not self.clashes:
            parent[parent == np.arange(n)] = -1  # a span that names itself as parent is a root
            self.depth = short_depths(parent)

    def to_sorted(self, order: np.ndarray, inv: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """``(parent, depth)`` of the sorted rows (``order``: sorted row -> unsorted row, ``inv`` its
        inverse); ``depth`` is None when it is left to the caller (a clash, or a chain longer than
        ``short_depths`` follows)."""
        parent_u = self.parent
        assert parent_u is not None
        for row, cands in self.clashes:  # the candidate first in the sorted Timeline
            parent_u[row] = cands[np.argmin(inv[cands])] if len(cands) else -1
        pu = parent_u[order]
        parent = np.where(pu >= 0, inv[pu], -1)
        if self.clashes:
            parent[parent == np.arange(len(parent))] = -1
        depth = None if self.depth is None else self.depth[order]
        return parent, depth

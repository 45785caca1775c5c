"""Row order and parent chains of a Timeline (helpers of ``model.Timeline``; pure functions on numpy arrays)."""

from __future__ import annotations

import numpy as np


def row_order(lane: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The Timeline row order: ``np.lexsort((-end, start, lane))`` (stable: equal keys keep their
    input order), computed faster where possible.

    Where lane and ``start - min(start)`` fit together in 63 bits (``lane << s | start - min``; a
    trace's start times span far less than 2^(63 - lane bits) ns), one stable ``argsort`` of that
    key (about 4x faster than ``lexsort`` on 1 M rows); rows whose (lane, start) is shared with
    another row are then put in ``-end`` order inside their group by a stable ``lexsort`` of those
    rows only. Otherwise (or with a negative lane) ``lexsort`` itself."""
    n = len(start)
    if n == 0:
        return np.empty(0, np.int64)
    lane_bits = max(int(lane.max()).bit_length(), 1)
    lo = int(start.min())
    if int(lane.min()) < 0 or lane_bits > 62 or int(start.max()) - lo >= 1 << (63 - lane_bits):
        return np.lexsort((-end, start, lane))
    key = lane.astype(np.int64) << (63 - lane_bits)
    key |= start - lo
    order = np.argsort(key, kind="stable")
    ks = key[order]
    eq = ks[1:] == ks[:-1]
    if eq.any():
        tied = np.zeros(n, dtype=bool)  # positions (in ``order``) inside a group of equal keys
        tied[:-1] = eq
        tied[1:] |= eq
        pos = np.flatnonzero(tied)
        group = np.cumsum(~eq)[np.maximum(pos - 1, 0)] * (pos > 0)  # group number per tied position
        rows = order[pos]
        order[pos] = rows[np.lexsort((-end[rows], group))]
    return order


#: Parent chains at most this long are handled by ``short_depths`` (no chain that ends can be a cycle).
_SHORT_CHAIN = 64


def short_depths(parent: np.ndarray) -> np.ndarray | None:
    """Depth of each row (its number of ancestors) when every parent chain ends within
    ``_SHORT_CHAIN`` levels, else None (a longer chain or a cycle). Each pass follows one level for
    the rows whose chain has not ended yet."""
    depth = np.zeros(len(parent), dtype=np.int16)
    rows = np.flatnonzero(parent >= 0)
    anc = parent[rows]
    for _ in range(_SHORT_CHAIN):
        if not len(rows):
            return depth
        depth[rows] += 1
        anc = parent[anc]
        keep = anc >= 0
        rows, anc = rows[keep], anc[keep]
    return None if len(rows) else depth


def break_parent_cycles(parent: np.ndarray, start: np.ndarray) -> int:
    """Make every parent chain end at a root: in each cycle of parent links (A -> B -> A, written by a
    broken or hostile writer), the earliest-starting span becomes a root. In place; returns the number
    of cycles broken. Vectorised until only rows with chains longer than 64 remain, then one walk over
    those (O(rows on long chains))."""
    cur = parent.copy()
    for _ in range(64):
        m = cur >= 0
        if not m.any():
            return 0
        cur[m] = parent[cur[m]]
    state = np.zeros(len(parent), dtype=np.int8)  # 0 unseen, 1 on the current walk, 2 done
    broken = 0
    for r in np.flatnonzero(cur >= 0).tolist():
        path = []
        x = r
        while x >= 0 and state[x] == 0:
            state[x] = 1
            path.append(x)
            x = int(parent[x])
        if x >= 0 and state[x] == 1:  # the walk came back to itself: a cycle from x
            cycle = path[path.index(x):]
            root = min(cycle, key=lambda k: (int(start[k]), k))
            parent[root] = -1
            broken += 1
        state[path] = 2
    return broken

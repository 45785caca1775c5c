"""Parent rows by time containment: the nesting rule shared by the Chrome and Nsight importers.

Pure function; no threads.
"""

from __future__ import annotations

import numpy as np

__all__ = ["nest_parents"]


def nest_parents(start: np.ndarray, end: np.ndarray, group: np.ndarray,
                 tiebreak: np.ndarray | None = None) -> np.ndarray:
    """Parent row of each row by time containment within its group (-1 for roots).

    Rows are visited by (group, start, -end, tiebreak): of two ranges starting at the same instant
    the longer one is the parent; of two identical ranges the one with the smaller ``tiebreak``
    (then the smaller row number) is. A range that only partly overlaps the innermost open range is
    attached to the innermost open range that contains it. Python loop: O(n) with a stack (each row
    pushed and popped once), about 1 µs per row, over the rows that overlap another one only: a row
    that starts after every earlier row of its group has ended (and not at the same instant as the row
    before it) empties the stack,
    so a row alone between two such points is a root and is not visited (sequential kernels, isolated
    calls). Vectorising containment queries would need a segment tree and not be faster here.
    """
    n = len(start)
    parent = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return parent
    keys = [np.arange(n)]
    if tiebreak is not None:
        keys.append(np.asarray(tiebreak))
    start, end, group = np.asarray(start), np.asarray(end), np.asarray(group)
    keys += [-end, start, group]
    order = np.lexsort(keys)
    alone, first = _clusters(start[order], end[order], group[order])
    keep = ~alone
    visit = order[keep]
    del order
    # The walk runs over positions in ``visit`` (lists of the visited rows only, read in order), in
    # pieces of about _PIECE rows cut where a cluster starts (the stack is empty there), so the lists
    # of Python ints exist for one piece at a time.
    starts = np.flatnonzero(first[keep])
    at = np.searchsorted(starts, np.arange(_PIECE, len(visit), _PIECE))
    cuts = np.unique(starts[at[at < len(starts)]])
    bounds = [0, *cuts[cuts > 0].tolist(), len(visit)]
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        rows = visit[lo:hi]
        _walk(rows, start[rows].tolist(), end[rows].tolist(), group[rows].tolist(), parent)
    return parent


#: Rows of one piece of the walk (its lists cost ~100 bytes a row).
_PIECE = 1 << 16


def _walk(rows: np.ndarray, s_l: list, e_l: list, g_l: list, parent: np.ndarray) -> None:
    """The stack walk over rows in visiting order, starting with an empty stack; writes ``parent``.

    The stack holds the open ranges that can still be a parent, their ends strictly decreasing from bottom to
    top: a range pushed on top of ranges that end no later than it takes their place (every later range that
    one of them contains, it contains too, and it is the innermost). So the parent of a row (the innermost open
    range that contains it) is found by popping the ranges on top that end before it, each popped once: O(n)
    per piece, where scanning a stack of partly overlapping ranges (each starting inside and ending after the
    one before) was O(n) per row."""
    par = [-1] * len(rows)
    stack: list[int] = []
    prev = None
    for k, g in enumerate(g_l):
        if g != prev:
            stack.clear()
            prev = g
        s, e = s_l[k], e_l[k]
        while stack:  # pop what ended before s (unless it starts at s and holds this row) or ends before e
            top = stack[-1]
            te = e_l[top]
            if te < e or (te <= s and s_l[top] != s):
                stack.pop()
                continue
            par[k] = top
            if te == e:  # the same end: this range contains what that one contains, and is inner
                stack.pop()
            break
        stack.append(k)
    if len(rows):
        pos = np.asarray(par, dtype=np.int64)
        has = pos >= 0
        parent[rows[has]] = rows[pos[has]]


def _clusters(s: np.ndarray, e: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows in visiting order: (alone, first). ``first``: the row starts a cluster (its group's
    first row, or it starts after every earlier row of the group has ended and not at the same instant
    as the row before it, so the walk's stack is empty when it comes). ``alone``: it starts a cluster
    and the next row starts another one (a root whose visit changes nothing for the rows after it)."""
    n = len(s)
    first = np.ones(n, dtype=bool)
    if n > 1:
        bounds = np.flatnonzero(g[1:] != g[:-1]) + 1
        ran = np.empty(n, dtype=e.dtype)  # running max of the end, per group
        for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, n], strict=True):
            np.maximum.accumulate(e[lo:hi], out=ran[lo:hi])
        first[1:] = (g[1:] != g[:-1]) | ((s[1:] >= ran[:-1]) & (s[1:] != s[:-1]))
    last = np.ones(n, dtype=bool)
    last[:-1] = first[1:]
    return first & last, first

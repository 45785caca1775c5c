"""Who the host thread was while a phase's GPU sat idle: the launch-gap attribution of
:func:`gputrace.analysis.gpu_activity.launch_gaps`.

The launching thread of a phase is its own ``thread:`` lane, else its nearest ancestor's, else its host-side
children's. That thread's host spans are cut into *self* pieces (each span minus its children), made
disjoint, and paired with the phase's holes: pieces of other spans are named per phase, pieces of the phase
itself or its ancestors are unattributed host time. Pure numpy; any thread.
"""

from __future__ import annotations

import numpy as np

from gputrace.analysis._common import climb, offsets_from_counts, pair_overlaps, uncovered
from gputrace.timeline.model import Timeline


def thread_keys(tl: Timeline, act_mask: np.ndarray) -> np.ndarray:
    """Row -> launching-thread key (index of (host, pid, thread lane name)), or -1.

    A row on a ``thread:`` lane is on that thread; any other non-activity row (a phase on a
    ``stream:`` lane: its host interval is the thread executing it) takes its nearest ancestor's, or,
    with none, the thread of its host-side children (the recorder puts a phase's stream-less children on
    the thread that runs it)."""
    keys: dict[tuple, int] = {}
    lane_key = np.array([keys.setdefault((ln.host, ln.pid, ln.name), len(keys)) if ln.name.startswith("thread:") else -1
                         for ln in tl.lanes] or [-1], np.int64)
    c = tl.cols
    k = lane_key[c["lane"]] if tl.n else np.zeros(0, np.int64)
    k = np.where(act_mask & (c["kind"] != 2), -1, k)  # device work is not a host thread's time
    parent = c["parent"]
    todo = np.flatnonzero((k < 0) & ~act_mask)

    def take_thread(rows, anc):  # the nearest ancestor on a thread lane gives its key; the others climb on
        hit = lane_key[c["lane"][anc]] >= 0
        k[rows[hit]] = lane_key[c["lane"][anc[hit]]]
        return ~hit

    climb(todo, parent[todo], parent, take_thread)
    # A root phase on a stream lane (no thread above it) takes the thread of its host-side children.
    for _ in range(4):
        m = (parent >= 0) & (k >= 0) & ~act_mask
        m[m] &= k[parent[m]] < 0
        if not m.any():
            break
        k[parent[m]] = k[m]
    return k


def _is_self_or_ancestor(parent: np.ndarray, depth: np.ndarray, q: np.ndarray, p: np.ndarray) -> np.ndarray:
    """For pairs (q[i], p[i]): is row q[i] the row p[i] or one of its ancestors?"""
    up = p.copy()
    steps = depth[p].astype(np.int64) - depth[q].astype(np.int64)
    ok = steps >= 0
    for _ in range(int(steps.max(initial=0))):
        m = ok & (steps > 0)
        if not m.any():
            break
        up[m] = parent[up[m]]
        steps[m] -= 1
        ok &= up >= 0
    return ok & (up == q)


def host_in_holes(tl, tkey, act_mask, g_row, g_key, hg, hs, he, ng):
    """Per entry: exclusive host time per phase on its thread in its holes (CSR), and unattributed ns."""
    c = tl.cols
    hole_total = np.bincount(hg, weights=(he - hs).astype(np.float64), minlength=ng).astype(np.int64)
    z = np.zeros(0, np.int64)
    host = np.flatnonzero((tkey >= 0) & (~act_mask | (c["kind"] == 2)))
    if len(host) == 0 or len(hg) == 0:
        return np.zeros(ng + 1, np.int64), z, z, hole_total
    mask = np.zeros(tl.n, bool)
    mask[host] = True
    prow, ps, pe = uncovered(tl, mask, host)  # self pieces: a thread instant belongs to its innermost span
    pkey = tkey[prow]
    prow, ps, pe, pkey = _disjoint_per_thread(prow, ps, pe, pkey, c["kind"][prow] == 2)
    h_key = g_key[hg]
    pg_parts, ov_parts, row_parts = [], [], []
    for k in np.unique(h_key[h_key >= 0]).tolist():
        hi = np.flatnonzero(h_key == k)
        pj = np.flatnonzero(pkey == k)
        a, b = pair_overlaps(hs[hi], he[hi], ps[pj], pe[pj])
        if len(a) == 0:
            continue
        h, p = hi[a], pj[b]
        pg_parts.append(hg[h])
        ov_parts.append(np.minimum(he[h], pe[p]) - np.maximum(hs[h], ps[p]))
        row_parts.append(prow[p])
    if not pg_parts:
        return np.zeros(ng + 1, np.int64), z, z, hole_total
    pg, ov, qrow = (np.concatenate(x) for x in (pg_parts, ov_parts, row_parts))
    own = _is_self_or_ancestor(c["parent"], c["depth"], qrow, g_row[pg])
    named = ~own
    pg, ov, ph = pg[named], ov[named], c["phase"][qrow[named]].astype(np.int64)
    nph = max(len(tl.phases), 1)
    uk, inv = np.unique(pg * nph + ph, return_inverse=True)
    sums = np.bincount(inv.reshape(-1), weights=ov.astype(np.float64), minlength=len(uk)).astype(np.int64)
    ug, uph = uk // nph, uk % nph
    o = np.lexsort((-sums, ug))
    ug, uph, sums = ug[o], uph[o], sums[o]
    attributed = np.bincount(ug, weights=sums.astype(np.float64), minlength=ng).astype(np.int64)
    return offsets_from_counts(np.bincount(ug, minlength=ng)), uph, sums, np.maximum(hole_total - attributed, 0)


def _disjoint_per_thread(prow, ps, pe, pkey, prefer):
    """Self pieces of one thread made disjoint: siblings that overlap (an nsys sync span and the
    synchronising API call it belongs to, both children of the phase) would count one instant twice.
    An earlier piece keeps its time; at equal starts a ``prefer`` piece (a sync span) comes first."""
    o = np.lexsort((~prefer, ps, pkey))
    prow, ps, pe, pkey = prow[o], ps[o].copy(), pe[o], pkey[o]
    # Running max of the previous pieces' ends within each thread (few threads: a loop over them).
    prev = np.empty_like(pe)
    for k in np.unique(pkey).tolist():
        m = np.flatnonzero(pkey == k)
        pm = np.maximum.accumulate(pe[m])
        prev[m] = np.concatenate([[np.iinfo(np.int64).min], pm[:-1]])
    ps = np.maximum(ps, prev)
    keep = pe > ps
    return prow[keep], ps[keep], pe[keep], pkey[keep]

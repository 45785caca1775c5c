"""Which rows an OTLP JSON Lines file written from a Timeline holds where, and under which ids: the plan shared
by the writer (``write``, ``write_block``) and the read-back (``readback``) that computes what a read of the
file gives without reading it.

* ``groups``: rows grouped by (resource, host, pid), in file order; ``span_ids``: the span ids written;
  ``trace_codes``: which trace id a row is written with;
* ``COLUMN_KEYS``: the attributes written from the Timeline's columns; ``shared_dict_text``: the encoded text
  of a ``RowAttrs``'s shared dict, once per write.

Pure; runs on the caller's thread.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

import numpy as np
import orjson

from gputrace.otlp.encode import attributes_json
from gputrace.timeline.model import Timeline
from gputrace.timeline.row_attrs import RowAttrs

__all__ = ["COLUMN_KEYS", "Group", "Plan", "groups", "shared_dict_text", "span_ids", "trace_codes"]


def _trace_for(resource: dict) -> str:
    return hashlib.blake2b(orjson.dumps(resource, option=orjson.OPT_SORT_KEYS, default=str), digest_size=16).hexdigest()


class Group(NamedTuple):
    """The rows written under one resource (one or more lines), in file order."""

    rows: np.ndarray  # row numbers, ascending
    resource: dict  # the resource attributes as written
    fallback_trace: str  # the trace id of rows without one


def span_ids(tl: Timeline) -> np.ndarray:
    """Span ids as written: the row's, or for rows without one an id from the row number, above every
    id already present."""
    ids = tl.cols["span_id"].astype(np.uint64).copy()
    missing = ids == 0
    if missing.any():
        base = int(ids.max()) + 1 if tl.n else 1
        ids[missing] = np.arange(base, base + int(missing.sum()), dtype=np.uint64)
    return ids


def groups(tl: Timeline) -> list[Group]:
    """Rows grouped by (resource, host, pid), groups in order of their first row, rows in order: the
    order the file holds them in (``timeline_requests`` writes each group's rows in chunks)."""
    c = tl.cols
    n = tl.n
    # numpy: a Python pass over a million rows cost a second.
    hp: dict[tuple[str, int], int] = {}
    lane_hp = np.array([hp.setdefault((ln.host, ln.pid), len(hp)) for ln in tl.lanes] or [0], dtype=np.int64)
    hps = list(hp)
    key = c["resource"].astype(np.int64) * max(len(hps), 1) + lane_hp[c["lane"]] if n else np.empty(0, np.int64)
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(inv.reshape(-1), kind="stable")  # rows by group (group ids follow key order), then row
    bounds = np.searchsorted(inv.reshape(-1)[order], np.arange(len(first) + 1))
    out = []
    for g in np.argsort(first, kind="stable").tolist():
        rows = order[bounds[g]:bounds[g + 1]]
        r0 = int(rows[0])
        res_i = int(c["resource"][r0])
        host, pid = hps[int(lane_hp[c["lane"][r0]])]
        res = dict(tl.resources[res_i]) if 0 <= res_i < len(tl.resources) else {"service.name": "gputrace"}
        res["host.name"] = host
        if pid >= 0:
            res["process.pid"] = pid
        out.append(Group(rows, res, _trace_for(res)))
    return out


def trace_codes(tl: Timeline, trace: np.ndarray) -> np.ndarray:
    """Which trace id rows with these ``trace`` column values are written with: their own (an index into
    ``tl.trace_ids``) where it is a non-empty one, else ``len(tl.trace_ids)`` (their group's fallback)."""
    t = trace.astype(np.int64)
    ntids = len(tl.trace_ids)
    valid = np.array([bool(x) for x in tl.trace_ids] + [False], dtype=bool)
    inside = (t >= 0) & (t < ntids)
    return np.where(inside & valid[np.where(inside, t, ntids)], t, ntids)


Plan = tuple[list[Group], np.ndarray]  # (groups(tl), span_ids(tl))


COLUMN_KEYS = frozenset({"gputrace.lane", "gputrace.device", "gputrace.kind", "gputrace.circuit", "gputrace.batch",
                          "gputrace.bytes", "gputrace.gpu.start_ns", "gputrace.gpu.end_ns"})


def shared_dict_text(ra: RowAttrs, cache: dict) -> str | None:
    """The encoded attributes of a ``RowAttrs``'s shared dict (once per dict and overlay keys, for one write),
    or None where they could clash with the column attributes or the overlay (then the row is merged
    key by key). The bytes are the same either way: an attribute array's text is the join of its items'."""
    key = (id(ra.shared), ra.keys_)
    if key not in cache:
        over = set(ra.keys_)
        clash = len(over) != len(ra.keys_) or over & COLUMN_KEYS or ra.shared.keys() & (COLUMN_KEYS | over)
        cache[key] = None if clash else attributes_json(ra.shared)
    return cache[key]

"""Span-header columns (times, trace and span ids) from decoded spans, a batch at a time.

Hand-written hot path: C-level ``map``/``join``/``bytes.fromhex`` over the whole batch, with a
per-span Python loop only when some value is invalid (then ``mark(i, field, message)`` is called
for each bad span). Not thread-safe (uses the load's ``Interner``).
"""

from __future__ import annotations

from itertools import repeat

import numpy as np

from gputrace.otlp.ids import parse_id
from gputrace.timeline.formats.otlp_jsonl._interner import Interner


def int64_column(spans: list, getter, fld: str, mark) -> np.ndarray:
    try:
        return np.fromiter(map(getter, spans), np.int64, len(spans))
    except (OverflowError, TypeError, ValueError):
        vals = list(map(getter, spans))
        out = np.zeros(len(vals), dtype=np.int64)
        for i, v in enumerate(vals):
            if 0 <= v < (1 << 63):
                out[i] = v
            else:
                mark(i, fld, f"{v} is outside the int64 nanosecond range")
        return out

def trace_codes(tids: list[str], it: Interner, mark) -> np.ndarray:
    # First-appearance order (not set order, which follows the hash seed): the same file gives the same table.
    new = [t for t in dict.fromkeys(tids) if t not in it.trace_ix]
    badset = set()
    for t in new:
        try:
            h = f"{parse_id(t, 16):032x}"
        except ValueError:
            badset.add(t)
            continue
        if h == "0" * 32:
            badset.add(t)
            continue
        i = it.trace_ix.get(h)
        if i is None:
            i = it.trace_ix[h] = len(it.trace_ids)
            it.trace_ids.append(h)
        it.trace_ix[t] = i
    if badset:
        for i, t in enumerate(tids):
            if t in badset:
                mark(i, "traceId", f"expected 32 hex characters (not all zero), got {t!r}")
        return np.fromiter((it.trace_ix.get(t, -1) for t in tids), np.int32, len(tids))
    return np.fromiter(map(it.trace_ix.__getitem__, tids), np.int32, len(tids))


def id_column(ids: list[str], fld: str, mark, allow_empty: bool) -> np.ndarray:
    n = len(ids)
    orig = ids
    # Every id 16 characters (or empty, where allowed): lengths that only add up (15 + 17) would be cut at
    # the wrong places by the joined ``fromhex`` below.
    ok_lengths = set(map(len, ids)) <= ({0, 16} if allow_empty else {16})
    if allow_empty and ok_lengths:
        ids = list(map(str.zfill, ids, repeat(16)))  # "" -> 16 zeros, in C (lengths checked above)
    joined = "".join(ids)
    if ok_lengths and len(joined) == 16 * n:
        try:
            raw = bytes.fromhex(joined)
            if len(raw) == 8 * n:
                out = np.frombuffer(raw, dtype=">u8").astype(np.uint64)
                if allow_empty or out.all():
                    return out
        except ValueError:
            pass
    out = np.zeros(n, dtype=np.uint64)
    for i, s in enumerate(orig):
        if allow_empty and s == "":
            continue
        try:
            v = parse_id(s, 8)
        except ValueError as e:
            mark(i, fld, str(e))
            continue
        if v == 0 and not allow_empty:
            mark(i, fld, "an all-zero span id is invalid")
        out[i] = v
    return out

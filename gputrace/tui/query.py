"""The search / filter language: space-separated terms, all of which must match.

* ``word`` -- the span's phase or span name contains ``word`` (case-insensitive);
* ``key=value[,value...]`` -- a field equals one of the values. Fields: ``phase``,
  ``name``, ``device`` (an index, or ``host``/``cpu``), ``lane`` (substring), ``host``, ``kind``,
  ``circuit``, ``batch``, ``bytes``, ``trace``; any other key is looked up in the span
  attributes (with or without the ``gputrace.`` prefix) and compared as text;
* ``key>value`` / ``key<value`` on ``dur``/``duration`` (with a unit: ``10ms``, ``2s``,
  ``500us``, ``100ns``), ``bytes``, ``circuit``, ``batch``.

`match_mask` returns a bool per Timeline row. Pure and vectorised over the columns; only
attribute terms loop (over the rows that have attributes). Raises `QueryError` on a term
it cannot parse, naming the term.
"""

from __future__ import annotations

import re

import numpy as np

from gputrace.timeline.model import KIND_CODES, Timeline

_UNIT = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_TERM = re.compile(r"^([A-Za-z_][\w.\-]*)(=|>=|<=|>|<)(.*)$")
_INT_COLS = {"circuit": "circuit", "batch": "batch", "bytes": "nbytes", "trace": "trace"}


class QueryError(ValueError):
    pass


def parse_duration(text: str) -> int:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ns|us|µs|ms|s)?\s*", text)
    if not m:
        raise QueryError(f"not a duration: {text!r} (try 10ms, 2s, 500us)")
    return int(float(m.group(1)) * _UNIT[m.group(2) or "ns"])


def match_mask(tl: Timeline, query: str) -> np.ndarray:
    """Rows matching every term of ``query``; an empty query matches everything."""
    mask = np.ones(tl.n, dtype=bool)
    for term in query.split():
        mask &= _term(tl, term)
    return mask


def _names_matching(names: list[str], pred) -> np.ndarray:
    return np.array([i for i, n in enumerate(names) if pred(n)], dtype=np.int64)


def _term(tl: Timeline, term: str) -> np.ndarray:
    c = tl.cols
    m = _TERM.match(term)
    if not m:
        w = term.lower()
        ids = _names_matching(tl.phases, lambda n: w in n.lower())
        out = np.isin(c["phase"], ids)
        for r, name in tl.names.items():
            if w in name.lower():
                out[r] = True
        return out
    key, op, val = m.group(1).lower(), m.group(2), m.group(3)
    if key.startswith("gputrace."):
        key = key[len("gputrace."):]
    if op != "=":
        return _compare(tl, key, op, val, term)
    vals = [v for v in val.split(",") if v != ""]
    if not vals:
        raise QueryError(f"{term!r}: no value after '='")
    if key == "phase":
        ids = _names_matching(tl.phases, lambda n: n in vals)
        return np.isin(c["phase"], ids)
    if key == "name":
        ids = _names_matching(tl.phases, lambda n: n in vals)
        out = np.isin(c["phase"], ids)
        for r, name in tl.names.items():
            out[r] = name in vals
        return out
    if key == "device":
        nums = []
        for v in vals:
            if v.lower() in ("cpu", "host", "-1"):
                nums.append(-1)
            else:
                nums.append(_int(v, term))
        dev = np.where(c["device"] < 0, -1, c["device"])
        return np.isin(dev, nums)
    if key == "kind":
        codes = [KIND_CODES[v] for v in vals if v in KIND_CODES]
        if len(codes) != len(vals):
            raise QueryError(f"{term!r}: kind is one of {', '.join(KIND_CODES)}")
        return np.isin(c["kind"], codes)
    if key in ("lane", "host"):
        names = [(ln.name if key == "lane" else ln.host).lower() for ln in tl.lanes]
        ok = np.array([any(v.lower() in name for v in vals) for name in names] or [False])
        return ok[c["lane"]] if tl.n else np.zeros(0, bool)
    if key in _INT_COLS:
        return np.isin(c[_INT_COLS[key]], [_int(v, term) for v in vals])
    # Free-form attribute.
    out = np.zeros(tl.n, dtype=bool)
    keys = (key, "gputrace." + key)
    for r, attrs in tl.attrs.items():
        for k in keys:
            if k in attrs and str(attrs[k]) in vals:
                out[r] = True
                break
    return out


def _int(v: str, term: str) -> int:
    try:
        return int(v)
    except ValueError:
        raise QueryError(f"{term!r}: {v!r} is not an integer") from None


def _compare(tl: Timeline, key: str, op: str, val: str, term: str) -> np.ndarray:
    c = tl.cols
    if key in ("dur", "duration"):
        col, x = c["end"] - c["start"], parse_duration(val)
    elif key in _INT_COLS:
        col, x = c[_INT_COLS[key]], _int(val, term)
    else:
        raise QueryError(f"{term!r}: '{op}' works on dur, bytes, circuit, batch")
    return {">": col > x, "<": col < x, ">=": col >= x, "<=": col <= x}[op]

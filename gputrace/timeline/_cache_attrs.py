"""A Timeline's row attributes as the tables of a timeline cache entry, and back.

``_attr_tables`` (store): shared attribute dicts once, a ``RowAttrs`` / ``TemplateAttrs`` row as the index of
its shared dict plus its overlay key set and int64 overlay values in columns (any other Mapping as a plain
dict). ``_attrs`` (load): the row -> attributes dict rebuilt from those tables with object-array gathers, no
Python loop per row; None where the tables are inconsistent. A part of :mod:`gputrace.timeline.cache`.

Pure; raises nothing of its own (``_attrs`` may raise KeyError, TypeError, ValueError or IndexError on a
hostile entry, which ``cache.load`` turns into a miss). Any thread.
"""

from __future__ import annotations

from itertools import chain, repeat

import numpy as np

from gputrace.timeline.model import Timeline
from gputrace.timeline.row_attrs import RowAttrs, TemplateAttrs


def _attrs(meta: dict, arrays: dict) -> dict | None:
    """Row -> attributes: plain dicts (shared ones stored once) and ``RowAttrs`` rebuilt over their shared
    dict from the overlay keys and int64 values (a million kernel launches stay a few dicts). None if
    inconsistent."""
    dicts = meta["attr_dicts"]
    rows, ix, okey = arrays["attr_rows"], arrays["attr_ix"], arrays["attr_okeys"]
    vals = arrays["attr_ovals"]
    keys = [tuple(str(k) for k in ks) for ks in meta["overlay_keys"]]
    kinds = [_OVERLAID.get(str(c)) for c in meta["overlay_kinds"]]
    if len(ix) != len(rows) or len(okey) != len(rows) or (len(ix) and int(ix.max()) >= len(dicts)):
        return None
    if len(kinds) != len(keys) or None in kinds:
        return None
    table = np.empty(len(dicts), dtype=object)
    for j, d in enumerate(dicts):  # (one by one: a list of dicts could be read as nested sequences)
        table[j] = d
    objs = table[ix]  # object-array gathers and assignments: no Python loop per row
    over = np.flatnonzero(okey >= 0)
    if len(over):
        if int(okey.max()) >= len(keys):
            return None
        width = np.array([len(k) for k in keys], dtype=np.int64)[okey[over]]
        if int(width.sum()) != len(vals):
            return None
        start = np.zeros(len(over), np.int64)
        np.cumsum(width[:-1], out=start[1:])
        for k in np.unique(okey[over]).tolist():  # a few overlay key sets: one pass each
            sel = np.flatnonzero(okey[over] == k)
            w = len(keys[k])
            at = start[sel]
            shared = objs[over[sel]].tolist()
            cls = kinds[k]
            if cls is TemplateAttrs and not all(type(dicts[j]) is dict and set(keys[k]) <= dicts[j].keys()
                                                for j in np.unique(ix[over[sel]]).tolist()):
                return None  # a template is a dict holding every key of its rows
            values = zip(*(vals[at + j].tolist() for j in range(w)), strict=True) if w else repeat((), len(sel))
            made = map(cls, shared, repeat(keys[k]), values)
            objs[over[sel]] = np.fromiter(made, dtype=object, count=len(sel))
    elif len(vals):
        return None
    objs = objs.tolist()
    return dict(zip(rows.tolist(), objs, strict=True))


_AttrTables = tuple[list[dict], np.ndarray, np.ndarray, list[list[str]], list[str], np.ndarray]
#: The overlaid Mappings a cache entry rebuilds, by the name it stores for their key sets.
_OVERLAID: dict[str, type[RowAttrs]] = {"row": RowAttrs, "template": TemplateAttrs}
_KIND_OF = {v: k for k, v in _OVERLAID.items()}


def _attr_tables(tl: Timeline) -> _AttrTables:
    """(dicts, dict index per attribute row, overlay-key index per row (-1: a plain dict), overlay key
    sets, their kinds (``_OVERLAID``), overlay values): shared dicts once, a ``RowAttrs`` or
    ``TemplateAttrs`` with int64 overlay values as its shared dict plus those values (any other is stored
    as a plain dict)."""
    values = list(tl.attrs.values())  # dicts and RowAttrs
    return _attr_tables_int64(values) or _attr_tables_rowwise(values)


def _attr_tables_int64(values: list) -> _AttrTables | None:
    """``_attr_tables`` where every ``RowAttrs`` overlay holds int64 values (one check over all of them:
    a million kernel launches), else None."""
    dicts: list[dict] = []
    seen: dict[int, int] = {}  # id(dict) -> index: shared attribute dicts are stored once
    key_ix: dict[tuple, int] = {}
    ix: list[int] = []
    okey: list[int] = []
    overlays: list[tuple] = []
    for a in values:
        if type(a) in _KIND_OF:
            ks = (type(a), a.keys_)
            k = key_ix.get(ks)
            if k is None:
                k = key_ix[ks] = len(key_ix)
            okey.append(k)
            overlays.append(a.values_)
            a = a.shared
        else:
            okey.append(-1)
        d = seen.get(id(a))
        if d is None:
            d = seen[id(a)] = len(dicts)
            dicts.append(a if type(a) is dict else dict(a))  # other Mappings are stored as plain dicts
        ix.append(d)
    flat = list(chain.from_iterable(overlays))
    if flat and not (set(map(type, flat)) == {int} and -(1 << 63) <= min(flat) and max(flat) < (1 << 63)):
        return None
    return (dicts, np.array(ix, dtype=np.int32), np.array(okey, dtype=np.int32), [list(k) for _, k in key_ix],
            [_KIND_OF[c] for c, _ in key_ix], np.array(flat, dtype=np.int64))


def _attr_tables_rowwise(values: list) -> _AttrTables:
    """``_attr_tables`` deciding row by row (some overlay holds other values)."""
    dicts: list[dict] = []
    seen: dict[int, int] = {}
    key_ix: dict[tuple, int] = {}
    n = len(values)
    ix = np.empty(n, dtype=np.int32)
    okey = np.full(n, -1, dtype=np.int32)
    flat: list = []
    lo, hi = -(1 << 63), (1 << 63) - 1
    for j, a in enumerate(values):
        if type(a) in _KIND_OF and all(type(v) is int and lo <= v <= hi for v in a.values_):
            ks = (type(a), a.keys_)
            k = key_ix.get(ks)
            if k is None:
                k = key_ix[ks] = len(key_ix)
            okey[j] = k
            flat.extend(a.values_)
            a = a.shared
        d = seen.get(id(a))
        if d is None:
            d = seen[id(a)] = len(dicts)
            dicts.append(a if type(a) is dict else dict(a))  # other Mappings are stored as plain dicts
        ix[j] = d
    kinds = [_KIND_OF[c] for c, _ in key_ix]
    return dicts, ix, okey, [list(k) for _, k in key_ix], kinds, np.array(flat, dtype=np.int64)

"""The Timeline a read of a file written by ``write_otlp_jsonl`` gives, computed without reading it.

``gputrace import`` stores it as the columnar-cache entry of the file it just wrote, so the first
``view`` of the import is a cache re-open, not a JSON parse of the whole file. The entry must be what
an uncached ``read_any`` of the file returns (columns, dtypes, lanes and their order, phases,
resources, trace ids, attributes with their key order, load report); tests compare the two on many
Timelines. This module composes the writer's mapping (``gputrace.timeline.formats.otlp_jsonl.write``) with the reader's
(``gputrace.timeline.formats.otlp_jsonl.read``: phase = span name, sorted phase table; lanes from the resource's
``host.name``/``process.pid`` and the ``gputrace.device``/``gputrace.lane`` attributes; trace ids in
first-appearance order; columns from the ``gputrace.*`` attributes; other attributes in written order)
and builds the result with the reader's own ``Timeline.from_unsorted``.

Where the two could disagree, or the read would fail, it gives None (no cache entry; the first view
reads the file): a row attribute under a column key (``gputrace.lane``, ``gputrace.device``, ...),
attribute or resource values other than str, bool, int64, finite float and flat lists of those (tuples
read back as lists, so they are converted), a status code outside 0..2, times the reader refuses
(negative, or end before start), a device index beyond int16, trace ids that are not 32 hex digits,
and two resources equal but written in a different key order (whole and parallel reads number them
differently).

Pure; runs on the caller's thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from itertools import chain

import numpy as np
import orjson

from gputrace.otlp.ids import hex_id, parse_id
from gputrace.timeline.errors import LoadReport
from gputrace.timeline.formats.otlp_jsonl.plan import COLUMN_KEYS, Group, trace_codes
from gputrace.timeline.model import COLUMNS, KIND_NAMES, Lane, Timeline
from gputrace.timeline.row_attrs import RowAttrs, TemplateAttrs

__all__ = ["cache_entry", "readback_timeline", "store_cache_entry"]

_I64 = (-(1 << 63), (1 << 63) - 1)


class _Refuse(Exception):
    """The read-back cannot be predicted exactly (see the module doc)."""


def _scalar(v):
    t = type(v)
    if t is str or t is bool:
        return v
    if t is int:
        if not _I64[0] <= v <= _I64[1]:
            raise _Refuse
        return v
    if t is float:
        if v != v or v in (float("inf"), float("-inf")):
            raise _Refuse
        return v
    raise _Refuse


def _value(v):
    """The value a read gives back for ``v`` (tuples become lists); _Refuse where unsure."""
    t = type(v)
    if t is list or t is tuple:
        items = [_scalar(x) for x in v]
        return v if t is list and all(x is y for x, y in zip(items, v, strict=True)) else items
    return _scalar(v)


def _plain(d: Mapping, forbidden: frozenset = COLUMN_KEYS) -> dict:
    """``d`` as the reader's dict, or ``d`` itself if it already is one (no copy). Keys in ``forbidden``
    (span attributes: the column keys, which the reader takes into columns) refuse."""
    same = type(d) is dict
    out = {}
    for k, v in d.items():
        if type(k) is not str or k in forbidden:
            raise _Refuse
        w = _value(v)
        same = same and w is v
        out[k] = w
    return d if same else out  # type: ignore[return-value]


def _plain_template(t: dict, over: tuple) -> dict:
    """``_plain`` of a ``TemplateAttrs`` template: its placeholders (the keys in ``over``, every row's own)
    are not values and are kept as they are."""
    body = _plain({k: v for k, v in t.items() if k not in over})
    if all(body[k] is v for k, v in t.items() if k not in over):
        return t
    return {k: t[k] if k in over else body[k] for k in t}


def cache_entry(tl: Timeline, path: str | os.PathLike, lines: int, groups: list[Group],
                ids: np.ndarray, consume: bool = False) -> tuple[Timeline, dict] | None:
    """(the read-back of the file just written from ``tl``, the file's cache key as it is now) where the
    cache would keep the file (``cache.wanted``: enabled, at least ``cache.min_bytes()``) and the read-back
    can be predicted; else None. The read-back shares ``tl``'s attribute objects, not its columns, so the
    caller can drop ``tl`` before ``store_cache_entry``; ``consume``: see ``readback_timeline`` (``tl``'s
    columns may then be gone, whatever the result). Never raises (see ``store_cache_entry``)."""
    from gputrace.timeline import cache

    try:
        if not cache.wanted(path):
            return None
        key = cache.source_key(path)
        back = readback_timeline(tl, path, lines, groups, ids, consume)
        return None if back is None or key is None else (back, key)
    except Exception:  # noqa: BLE001 - see store_cache_entry
        return None


def store_cache_entry(path: str | os.PathLike, entry: tuple[Timeline, dict] | None) -> bool:
    """Store ``cache_entry``'s result as the columnar-cache entry of ``path`` (only if the file is still what
    it was); returns whether an entry was written. Never raises: a cache entry can only make the first read
    faster, and the file is already written (an error here must not fail the import)."""
    from gputrace.timeline import cache

    if entry is None:
        return False
    try:
        return cache.store(path, entry[0], entry[1])
    except Exception:  # noqa: BLE001 - see the docstring
        return False


def readback_timeline(tl: Timeline, path: str | os.PathLike, lines: int, groups: list[Group],
                      ids: np.ndarray, consume: bool = False) -> Timeline | None:
    """The Timeline ``read_any(path)`` gives for the file ``write_otlp_jsonl`` wrote from ``tl`` in
    ``lines`` lines (``groups``/``ids``: the writer's ``groups(tl)``/``span_ids(tl)``), or None where that
    cannot be predicted exactly (see the module doc). ``consume=True``: ``tl``'s columns are taken out of it
    as they are used (its caller is done with them), so both Timelines' columns are never held at once."""
    try:
        return _readback(tl, path, lines, groups, ids, consume)
    except _Refuse:
        return None


def _readback(tl: Timeline, path, lines: int, groups: list[Group], ids: np.ndarray, consume: bool) -> Timeline:
    """``readback_timeline``'s work; raises _Refuse where the read-back cannot be predicted exactly."""
    cols = tl.cols
    n = tl.n

    def col(k: str) -> np.ndarray:
        return cols.pop(k) if consume else cols[k]

    if consume:  # the columns the read-back does not use (span ids are in ``ids``)
        for k in ("depth", "device", "resource", "span_id"):
            cols.pop(k, None)

    rows = np.concatenate([g.rows for g in groups]) if groups else np.empty(0, np.int64)
    if len(rows) != n:
        raise _Refuse
    out: dict[str, np.ndarray] = {}
    start, end = col("start")[rows], col("end")[rows]
    if n and (int(start.min()) < 0 or bool((end < start).any())):
        raise _Refuse  # the reader refuses such spans
    out["start"], out["end"] = start, end

    resources, group_res = _resources(groups)
    sizes = [len(g.rows) for g in groups]
    out["resource"] = np.repeat(np.array(group_res or [0], np.int32)[:len(sizes)], sizes).astype(np.int32)
    out["device"], out["lane"], lanes = _lanes(tl, col("lane")[rows], out["resource"], resources)
    out["phase"], phases = _phases(tl, col("phase"), rows)
    _column_attrs(col, rows, out)

    # Ids: span ids as written; parent ids from the parent row's span id, else the column.
    out["span_id"] = ids[rows]
    par = col("parent")[rows]
    out["parent_span_id"] = np.where(par >= 0, ids[np.maximum(par, 0)], col("parent_span_id")[rows]).astype(np.uint64)

    out["trace"], trace_ids = _traces(tl, col("trace")[rows], groups, sizes)

    attrs = _attrs(tl, rows, n)
    back = Timeline.from_unsorted(out, phases, lanes, resources, trace_ids, attrs, consume=True)
    back.load_report = LoadReport(files=[str(path)], lines=lines, spans=n)
    return back


def _resources(groups: list[Group]) -> tuple[list[dict], list[int]]:
    """The resources as written (one per group), numbered as the reader does (the same text, one entry),
    and each group's resource number. Raises _Refuse for a value the reader would give back otherwise,
    and for two equal resources written in different key orders (whole and parallel reads number them
    differently)."""
    res_ix: dict[bytes, int] = {}
    resources: list[dict] = []
    group_res = []
    for g in groups:
        res = _plain(g.resource, frozenset())
        text = orjson.dumps(list(res.items()))
        if text not in res_ix:
            res_ix[text] = len(resources)
            resources.append(res)
        group_res.append(res_ix[text])
    if len({orjson.dumps(r, option=orjson.OPT_SORT_KEYS) for r in resources}) != len(resources):
        raise _Refuse  # equal resources in two key orders: whole and parallel reads number them differently
    return resources, group_res


def _lanes(tl: Timeline, lane: np.ndarray, resource: np.ndarray,
           resources: list[dict]) -> tuple[np.ndarray, np.ndarray, list[Lane]]:
    """The read-back's ``device`` (int16) and ``lane`` (int32) columns and its lanes, for file rows whose
    ``tl`` lane is ``lane`` and resource number ``resource``: a lane is (resource host, resource pid,
    ``gputrace.device``, ``gputrace.lane``), numbered in ascending (resource, ``tl`` lane) order. Raises
    _Refuse for a device beyond int16."""
    n = len(lane)
    dev_of_lane = np.array([ln.device for ln in tl.lanes] or [0], dtype=np.int64)
    if len(tl.lanes) and (dev_of_lane.max() > 32767):
        raise _Refuse
    device = np.where(dev_of_lane[lane] >= 0, dev_of_lane[lane], -1) if n else np.empty(0, np.int64)
    res_hp = []
    for rd in resources:
        pid = rd.get("process.pid", -1)
        res_hp.append((str(rd.get("host.name", "") or "unknown"), pid if type(pid) is int else -1))
    key = resource.astype(np.int64) * (len(tl.lanes) + 1) + lane
    ukeys, inv = np.unique(key, return_inverse=True)
    lanes: list[Lane] = []
    lane_ix: dict[Lane, int] = {}
    lane_map = np.empty(len(ukeys), dtype=np.int32)
    for j, k in enumerate(ukeys.tolist()):
        ri, li = divmod(k, len(tl.lanes) + 1)
        src = tl.lanes[li]
        host, pid = res_hp[ri]
        ln = Lane(host, pid, src.device if src.device >= 0 else -1, src.name)
        lane_map[j] = lane_ix.setdefault(ln, len(lanes))
        if lane_map[j] == len(lanes):
            lanes.append(ln)
    return device.astype(np.int16), lane_map[inv.reshape(-1)] if n else np.empty(0, np.int32), lanes


def _phases(tl: Timeline, phase: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """The read-back's ``phase`` column (of file rows ``rows``; ``phase``: ``tl``'s column, in ``tl``'s row
    order) and its phase table: span names (``tl.names`` where a row has one, else its phase's), sorted.
    Raises _Refuse for a name that is not a str."""
    n = len(rows)
    extra = list(dict.fromkeys(nm for nm in tl.names.values() if nm))
    code = phase.astype(np.int64)
    if extra:
        at = {nm: len(tl.phases) + j for j, nm in enumerate(extra)}
        for r, nm in tl.names.items():
            if nm:
                code[r] = at[nm]
    code = code[rows]
    used = np.unique(code) if n else np.empty(0, np.int64)
    table = list(tl.phases) + extra
    names = [table[i] for i in used.tolist()]
    if any(type(nm) is not str for nm in names):
        raise _Refuse
    phases = sorted(set(names))
    at_sorted = {nm: i for i, nm in enumerate(phases)}
    remap = np.zeros(len(table) or 1, dtype=np.int32)
    remap[used] = [at_sorted[nm] for nm in names]
    return remap[code] if n else np.empty(0, np.int32), phases


def _column_attrs(col: Callable[[str], np.ndarray], rows: np.ndarray, out: dict[str, np.ndarray]) -> None:
    """Put into ``out`` the column attributes of file rows ``rows`` as the writer writes them (absent: -1):
    kind, circuit, batch, nbytes, gpu_start, gpu_end (both or neither), status. ``col``: ``tl``'s column
    by name. Raises _Refuse for a status code above 2."""
    n = len(rows)
    kind = col("kind")[rows]
    out["kind"] = np.where(np.isin(kind, list(KIND_NAMES)), kind, 0).astype(np.int8)
    for name in ("circuit", "batch", "nbytes"):
        x = col(name)[rows]
        out[name] = np.where(x >= 0, x, -1).astype(COLUMNS[name])
    g0, g1 = col("gpu_start")[rows], col("gpu_end")[rows]
    both = (g0 >= 0) & (g1 >= 0)
    out["gpu_start"], out["gpu_end"] = np.where(both, g0, -1), np.where(both, g1, -1)
    status = np.maximum(col("status")[rows], 0)
    if n and int(status.max()) > 2:
        raise _Refuse
    out["status"] = status.astype(np.int8)


def _traces(tl: Timeline, trace: np.ndarray, groups: list[Group], sizes: list[int]) -> tuple[np.ndarray, list[str]]:
    """The read-back's ``trace`` column and trace ids, for file rows whose ``tl`` trace column is ``trace``:
    the row's id (normalised as the reader does), else its group's fallback; ids in first-appearance
    order. Raises _Refuse for an id that is not 32 hex digits, or is all zeros."""
    n = len(trace)
    tcode = trace_codes(tl, trace)
    ntids = len(tl.trace_ids)
    written = np.where(tcode < ntids, tcode, ntids + np.repeat(np.arange(len(groups)), sizes))  # row ids, then groups
    texts = list(tl.trace_ids) + [g.fallback_trace for g in groups]
    uniq, first, winv = np.unique(written, return_index=True, return_inverse=True)
    trace_ids: list[str] = []
    trace_ix: dict[str, int] = {}
    umap = np.empty(len(uniq), dtype=np.int32)
    for j in np.argsort(first, kind="stable").tolist():
        try:
            h = f"{parse_id(hex_id(texts[int(uniq[j])], 16), 16):032x}"
        except (ValueError, TypeError) as e:
            raise _Refuse from e
        if h == "0" * 32:
            raise _Refuse
        umap[j] = trace_ix.setdefault(h, len(trace_ids))
        if umap[j] == len(trace_ids):
            trace_ids.append(h)
    return umap[winv.reshape(-1)] if n else np.empty(0, np.int32), trace_ids


def _attrs(tl: Timeline, rows: np.ndarray, n: int) -> dict[int, Mapping]:
    """File row -> attributes as read back: a ``RowAttrs`` or ``TemplateAttrs`` stays one (its shared dict
    converted once, if needed); a dict is kept where it already is what the reader builds. Rows with none
    are left out."""
    src = tl.attrs
    if not src:
        return {}
    where = np.empty(n, dtype=np.int64)
    where[rows] = np.arange(len(rows), dtype=np.int64)
    pos = where[np.fromiter(src.keys(), dtype=np.int64, count=len(src))].tolist()  # file row of each, in order
    shared: dict[int, dict] = {}  # id(shared dict) -> its read-back dict
    keysets: set[tuple] = set()
    plain: dict[int, Mapping] = {}  # id(dict) -> read-back (dicts shared between rows are checked once)
    out: dict[int, Mapping] = {}
    overlays: list[tuple] = []
    values: Iterable[Mapping] = src.values()  # RowAttrs and TemplateAttrs are Mappings, not dicts
    for r, a in zip(pos, values, strict=True):
        if type(a) is RowAttrs or type(a) is TemplateAttrs:
            sh = a.shared
            s = shared.get(id(sh))
            if s is None:
                s = shared[id(sh)] = _plain(sh) if type(a) is RowAttrs else _plain_template(sh, a.keys_)
            ks = a.keys_
            if ks not in keysets:
                if len(set(ks)) != len(ks) or any(type(k) is not str or k in COLUMN_KEYS for k in ks):
                    raise _Refuse
                keysets.add(ks)
            if not ks and not s:
                continue
            if s is not sh:
                a = type(a)(s, ks, a.values_)
            out[r] = a
            overlays.append(a.values_)
        else:
            d = plain.get(id(a))
            if d is None:
                d = plain[id(a)] = _plain(a)
            if d:
                out[r] = d
    # Overlay values: one check over all of them (a million launches: ints); anything else row by row.
    vals = list(chain.from_iterable(overlays))
    if vals and not (set(map(type, vals)) == {int} and _I64[0] <= min(vals) and max(vals) <= _I64[1]):
        for r, a in out.items():
            if type(a) is RowAttrs or type(a) is TemplateAttrs:
                v = tuple(_value(x) for x in a.values_)
                if v != a.values_ or any(type(x) is not type(y) for x, y in zip(v, a.values_, strict=True)):
                    out[r] = type(a)(a.shared, a.keys_, v)
    return out

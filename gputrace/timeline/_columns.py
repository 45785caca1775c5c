"""Decoded OTLP spans -> Timeline columns, a batch at a time (the reader's hot path).

Hand-written because it is the hot path: every per-span step is a C-level ``map`` with
``operator.attrgetter`` or a numpy operation, never a Python loop over spans (a Python loop costs
~0.3 us per span per step on the CI box; the target is 2 us per span in total). Attributes are
flattened across the whole batch, their keys turned into integer codes, and each column
attribute gathered with one numpy ``flatnonzero``; only attributes that are not columns
(``attrs``) are walked in Python.

Not thread-safe: one ``Interner`` per load, used from one thread.
"""

from __future__ import annotations

import base64
from itertools import chain, repeat
from operator import attrgetter

import numpy as np

from gputrace.phases import phase_kind
from gputrace.timeline.model import KIND_CODES, Lane
from gputrace.timeline.otlp_schema import _NO_STATUS, STATUS_NAMES, AnyValue, py_value

# Column attributes: key -> (column, type). Types: "int" (intValue), "str" (stringValue).
COLUMN_ATTRS: dict[str, tuple[str, str]] = {
    "gputrace.device": ("device", "int"),
    "gputrace.circuit": ("circuit", "int"),
    "gputrace.batch": ("batch", "int"),
    "gputrace.bytes": ("nbytes", "int"),
    "gputrace.gpu.start_ns": ("gpu_start", "int"),
    "gputrace.gpu.end_ns": ("gpu_end", "int"),
    "gputrace.lane": ("lane", "str"),
    "gputrace.kind": ("kind", "str"),
}
_KEYS = list(COLUMN_ATTRS)
_KEY_CODE = {k: i for i, k in enumerate(_KEYS)}
_NKNOWN = len(_KEYS)
_INT_BOUNDS = {
    "device": (-(1 << 15), (1 << 15) - 1),
    "circuit": (-(1 << 31), (1 << 31) - 1),
    "batch": (-(1 << 31), (1 << 31) - 1),
    "nbytes": (-(1 << 63), (1 << 63) - 1),
    "gpu_start": (-(1 << 63), (1 << 63) - 1),
    "gpu_end": (-(1 << 63), (1 << 63) - 1),
}

_g_start = attrgetter("startTimeUnixNano")
_g_end = attrgetter("endTimeUnixNano")
_g_name = attrgetter("name")
_g_tid = attrgetter("traceId")
_g_sid = attrgetter("spanId")
_g_pid = attrgetter("parentSpanId")
_g_attrs = attrgetter("attributes")
_g_status = attrgetter("status")
_g_code = attrgetter("code")
_g_msg = attrgetter("message")
_g_key = attrgetter("key")
_g_value = attrgetter("value")
_g_int = attrgetter("intValue")
_g_str = attrgetter("stringValue")


class _KeyCodes(dict):
    """Attribute key -> column code (``_NKNOWN`` for non-column keys); misses fill in lazily so
    the hot ``map(__getitem__)`` stays in C. Bounded: cleared past 100k distinct keys."""

    instance: "_KeyCodes"

    def __missing__(self, key: str) -> int:
        if len(self) > 100_000:
            self.clear()
        c = self[key] = _KEY_CODE.get(key, _NKNOWN)
        return c


_KeyCodes.instance = _KeyCodes()


def parse_id(s: str, nbytes: int) -> int:
    """Hex (the spec) or base64 (old protobuf-JSON writers) id -> int. Raises ValueError."""
    if len(s) == 2 * nbytes:
        try:
            return int(s, 16)
        except ValueError:
            pass
    elif s and len(s) in (4 * ((nbytes + 2) // 3), (8 * nbytes + 5) // 6):
        try:
            raw = base64.b64decode(s + "=" * (-len(s) % 4), validate=True)
        except ValueError:
            raw = b""
        if len(raw) == nbytes:
            return int.from_bytes(raw, "big")
    raise ValueError(f"expected {2 * nbytes} hex characters, got {s!r}")


class Interner:
    """Shared tables of one load: phases, traces, resources, lanes (global indices)."""

    def __init__(self) -> None:
        self.phases: list[str] = []
        self.phase_ix: dict[str, int] = {}
        self.kind_by_phase = np.zeros(0, dtype=np.int8)
        self.trace_ids: list[str] = []
        self.trace_ix: dict[str, int] = {}  # raw id as written -> index
        self.resources: list[dict] = []
        self.resource_ix: dict[bytes, int] = {}
        self.res_host: list[str] = []
        self.res_pid: list[int] = []
        self.res_service: list[str] = []
        self.lanes: list[Lane] = []
        self.lane_ix: dict[Lane, int] = {}
        self.lane_name_ix: dict[str, int] = {}
        self.lane_names: list[str] = []

    def resource(self, key: bytes, attrs: dict) -> int:
        i = self.resource_ix.get(key)
        if i is None:
            i = self.resource_ix[key] = len(self.resources)
            self.resources.append(attrs)
            self.res_host.append(str(attrs.get("host.name", "") or "unknown"))
            pid = attrs.get("process.pid", -1)
            self.res_pid.append(pid if type(pid) is int else -1)
            self.res_service.append(str(attrs.get("service.name", "") or "unknown"))
        return i

    def phase_codes(self, names: list[str]) -> np.ndarray:
        new = set(names).difference(self.phase_ix)
        if new:
            for nm in sorted(new):
                self.phase_ix[nm] = len(self.phases)
                self.phases.append(nm)
            self.kind_by_phase = np.array([KIND_CODES[phase_kind(p)] for p in self.phases], dtype=np.int8)
        return np.fromiter(map(self.phase_ix.__getitem__, names), np.int32, len(names))

    def lane_name_code(self, name: str) -> int:
        c = self.lane_name_ix.get(name)
        if c is None:
            c = self.lane_name_ix[name] = len(self.lane_names)
            self.lane_names.append(name)
        return c


def spans_to_columns(spans: list, res: np.ndarray, it: Interner, fast: list | None = None):
    """Convert one batch. ``res``: resource index per span (int32).

    ``fast``: rows whose attributes were parsed by ``_fast.parse_attributes`` (their spans are
    ``_fast.LeanSpan``s), as ``(FastAttrs, span indices in it, batch rows)`` triples; all other
    rows are ``otlp_schema.Span``s with decoded attributes.

    Returns ``(cols, attrs, bad)``: column arrays for the good spans, ``attrs`` keyed by row in
    the returned columns, and ``bad`` = list of ``(batch_index, field_suffix, message)`` for
    spans dropped because a field is invalid (the caller raises or reports them).
    """
    n = len(spans)
    bad: dict[int, tuple[str, str]] = {}
    okmask = np.ones(n, dtype=bool)

    def mark(i: int, fld: str, msg: str) -> None:
        if i not in bad:
            bad[i] = (fld, msg)
            okmask[i] = False

    # ---- times
    start = _int64_column(spans, _g_start, "startTimeUnixNano", mark)
    end = _int64_column(spans, _g_end, "endTimeUnixNano", mark)
    for i in np.flatnonzero((end < start) & okmask).tolist():
        mark(i, "endTimeUnixNano", f"end {int(end[i])} is before startTimeUnixNano {int(start[i])}")

    # ---- names, ids
    phase = it.phase_codes(list(map(_g_name, spans)))
    trace = _trace_codes(list(map(_g_tid, spans)), it, mark)
    span_id = _id_column(list(map(_g_sid, spans)), "spanId", mark, allow_empty=False)
    parent_span_id = _id_column(list(map(_g_pid, spans)), "parentSpanId", mark, allow_empty=True)

    # ---- status
    statuses = list(map(_g_status, spans))
    attrs: dict[int, dict] = {}
    if statuses.count(_NO_STATUS) == n:  # no span has a status (identity first: C speed)
        status = np.zeros(n, dtype=np.int8)
        statuses = []
    try:
        if statuses:
            status = np.fromiter(map(_g_code, statuses), np.int64, n)
            if n and (status.min() < 0 or status.max() > 2):
                raise ValueError
            status = status.astype(np.int8)
    except (TypeError, ValueError, OverflowError):
        status = np.zeros(n, dtype=np.int8)
        for i, st in enumerate(statuses):
            c = st.code
            if type(c) is str:
                c = STATUS_NAMES.get(c, c)
                if type(c) is str and c.lstrip("-").isdigit():
                    c = int(c)
            if type(c) is not int or not 0 <= c <= 2:
                mark(i, "status.code", f"expected 0, 1 or 2 (or a STATUS_CODE_* name), got {st.code!r}")
            else:
                status[i] = c
    if any(map(_g_msg, statuses)):
        for i, st in enumerate(statuses):
            if st.message:
                attrs[i] = {"status.message": st.message}

    # ---- attributes, flattened over the batch
    cols = {
        "device": np.full(n, -1, np.int16),
        "circuit": np.full(n, -1, np.int32),
        "batch": np.full(n, -1, np.int32),
        "nbytes": np.full(n, -1, np.int64),
        "gpu_start": np.full(n, -1, np.int64),
        "gpu_end": np.full(n, -1, np.int64),
    }
    kind = it.kind_by_phase[phase]
    lane_code = np.full(n, -1, np.int64)
    if fast:
        gen = np.ones(n, dtype=bool)
        for _, _, brows in fast:
            gen[brows] = False
        gen_rows = np.flatnonzero(gen)
        attr_lists = [spans[i].attributes for i in gen_rows.tolist()]
        _fast_attrs(fast, cols, kind, lane_code, attrs, it)
    else:
        gen_rows = np.arange(n, dtype=np.int64)
        attr_lists = list(map(_g_attrs, spans))
    lens = np.fromiter(map(len, attr_lists), np.int64, len(attr_lists))
    flat = list(chain.from_iterable(attr_lists))
    if flat:
        # fromiter(dtype=object) skips the per-element sequence checks of ``arr[:] = list``.
        vals = np.fromiter(map(_g_value, flat), dtype=object, count=len(flat))
        codes = np.fromiter(map(_KeyCodes.instance.__getitem__, map(_g_key, flat)), np.int16, len(flat))
        rows = np.repeat(gen_rows, lens)
        first = np.zeros(n, dtype=np.int64)
        starts = np.zeros(len(lens), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        first[gen_rows] = starts
        present = np.bincount(codes, minlength=_NKNOWN + 1)
        for c in np.flatnonzero(present[:_NKNOWN]).tolist():
            key = _KEYS[c]
            colname, typ = COLUMN_ATTRS[key]
            idx = np.flatnonzero(codes == c)
            sel = vals[idx]  # object-array gather: C speed
            r = rows[idx]
            if typ == "int":
                v = _int_values(sel, idx, rows, first, colname, mark)
                cols[colname][r] = v
            else:
                strs = list(map(_g_str, sel))
                if None in strs:
                    for j, s in enumerate(strs):
                        if s is None:
                            p = int(idx[j])
                            pv = py_value(sel[j])
                            if colname == "lane" and type(pv) is int:  # lane written as a bare int
                                strs[j] = f"stream:{pv}"
                            else:
                                strs[j] = ""
                                mark(int(rows[p]), f"attributes[{p - int(first[rows[p]])}].value",
                                     f"expected stringValue for {key}, got {_describe(sel[j])}")
                if colname == "lane":
                    _set_lanes(lane_code, r, strs, it)
                else:
                    _set_kinds(kind, r, strs)
        if present[_NKNOWN]:
            idx = np.flatnonzero(codes == _NKNOWN)
            for p, r in zip(idx.tolist(), rows[idx].tolist()):
                d = attrs.get(r)
                if d is None:
                    d = attrs[r] = {}
                kv = flat[p]
                v = kv.value
                s = v.stringValue
                d[kv.key] = s if s is not None else py_value(v)

    # ---- lanes: (resource, device, lane name); missing names from thread.* or the service
    missing = np.flatnonzero(lane_code < 0)
    if len(missing):
        for r in missing.tolist():
            d = attrs.get(r)
            tn = None
            if d is not None:
                tn = d.get("thread.name") or d.get("thread.id")
            name = f"thread:{tn}" if tn not in (None, "") else f"span:{it.res_service[int(res[r])]}"
            lane_code[r] = it.lane_name_code(name)
    dev = cols["device"].astype(np.int64)
    key = (res.astype(np.int64) << 44) | ((dev + 1) << 28) | lane_code
    ukeys, inv = np.unique(key, return_inverse=True)
    lane_map = np.empty(len(ukeys), dtype=np.int32)
    for j, k in enumerate(ukeys.tolist()):
        ri, d, lc = k >> 44, ((k >> 28) & 0xFFFF) - 1, k & 0xFFFFFFF
        ln = Lane(it.res_host[ri], it.res_pid[ri], d, it.lane_names[lc])
        li = it.lane_ix.get(ln)
        if li is None:
            li = it.lane_ix[ln] = len(it.lanes)
            it.lanes.append(ln)
        lane_map[j] = li
    lane = lane_map[inv.reshape(-1)]

    out = dict(cols)
    out.update(
        start=start, end=end, phase=phase, lane=lane, kind=kind, status=status,
        resource=res.astype(np.int32), trace=trace, span_id=span_id, parent_span_id=parent_span_id,
    )
    if bad:
        keep = np.flatnonzero(okmask)
        out = {k: v[keep] for k, v in out.items()}
        newrow = np.full(n, -1, dtype=np.int64)
        newrow[keep] = np.arange(len(keep))
        attrs = {int(newrow[r]): d for r, d in attrs.items() if okmask[r]}
    return out, attrs, sorted((i, f, m) for i, (f, m) in bad.items())


def _set_lanes(lane_code: np.ndarray, r: np.ndarray, strs: list, it: Interner) -> None:
    for s in set(strs).difference(it.lane_name_ix):
        it.lane_name_code(s)
    lane_code[r] = np.fromiter(map(it.lane_name_ix.__getitem__, strs), np.int64, len(strs))


def _set_kinds(kind: np.ndarray, r: np.ndarray, strs: list) -> None:
    kc = {s: KIND_CODES.get(s, 0) for s in set(strs)}
    kind[r] = np.fromiter(map(kc.__getitem__, strs), np.int8, len(strs))


def _fast_attrs(fast: list, cols: dict, kind: np.ndarray, lane_code: np.ndarray, attrs: dict, it: Interner) -> None:
    """Apply attributes parsed by ``_fast.parse_attributes`` (values already checked there)."""
    for fa, gidx, brows in fast:
        st = fa.indptr[gidx]
        cnt = fa.indptr[gidx + 1] - st
        tot = int(cnt.sum())
        if not tot:
            continue
        base = np.zeros(len(cnt), dtype=np.int64)
        np.cumsum(cnt[:-1], out=base[1:])
        aidx = np.repeat(st - base, cnt) + np.arange(tot, dtype=np.int64)
        arow = np.repeat(brows, cnt)
        code = fa.code[aidx]
        present = np.bincount(code, minlength=_NKNOWN + 1)
        for c in np.flatnonzero(present).tolist():
            sel = np.flatnonzero(code == c)
            ai, r = aidx[sel], arow[sel]
            if c == _NKNOWN:
                for row, k, s, ivv in zip(r.tolist(), fa.key[ai].tolist(), fa.sval[ai].tolist(), fa.ival[ai].tolist()):
                    d = attrs.get(row)
                    if d is None:
                        d = attrs[row] = {}
                    d[k] = s if s is not None else ivv
                continue
            colname = COLUMN_ATTRS[_KEYS[c]][0]
            if colname == "lane" or colname == "kind":
                strs = fa.sval[ai].tolist()
                if colname == "lane":
                    _set_lanes(lane_code, r, strs, it)
                else:
                    _set_kinds(kind, r, strs)
            else:
                cols[colname][r] = fa.ival[ai]


def _describe(v: AnyValue) -> str:
    for f in AnyValue.__struct_fields__:
        x = getattr(v, f)
        if x is not None:
            return f"{f} {x!r}" if not isinstance(x, (list, tuple)) else f
    return "an empty value"


def _int64_column(spans: list, getter, fld: str, mark) -> np.ndarray:
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


def _int_values(sel: list, idx: np.ndarray, rows: np.ndarray, first: np.ndarray, colname: str, mark) -> np.ndarray:
    lo, hi = _INT_BOUNDS[colname]
    dt = np.int16 if colname == "device" else np.int32 if colname in ("circuit", "batch") else np.int64
    try:
        arr = np.fromiter(map(_g_int, sel), np.int64, len(sel))  # TypeError on None (not an intValue)
        if len(arr) and (arr.min() < lo or arr.max() > hi):
            raise OverflowError
        return arr.astype(dt)
    except (TypeError, OverflowError, ValueError):
        pass
    out = np.full(len(sel), -1, dtype=np.int64)
    for j, av in enumerate(sel):
        v = av.intValue
        if v is None and av.doubleValue is not None and float(av.doubleValue).is_integer():
            v = int(av.doubleValue)
        if v is None and av.stringValue is not None and av.stringValue.lstrip("-").isdigit():
            v = int(av.stringValue)
        if v is None or not lo <= v <= hi:
            p = int(idx[j])
            r = int(rows[p])
            why = f"expected intValue, got {_describe(av)}" if v is None else f"{v} is out of range"
            mark(r, f"attributes[{p - int(first[r])}].value", f"{why} ({_KEYS[_KEY_CODE[_col_key(colname)]]})")
        else:
            out[j] = v
    return out.astype(dt)


def _col_key(colname: str) -> str:
    for k, (c, _) in COLUMN_ATTRS.items():
        if c == colname:
            return k
    raise KeyError(colname)


def _trace_codes(tids: list[str], it: Interner, mark) -> np.ndarray:
    new = set(tids).difference(it.trace_ix)
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


def _id_column(ids: list[str], fld: str, mark, allow_empty: bool) -> np.ndarray:
    n = len(ids)
    orig = ids
    ok_lengths = sum(map(len, ids)) == 16 * (n - ids.count("")) if allow_empty else True
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

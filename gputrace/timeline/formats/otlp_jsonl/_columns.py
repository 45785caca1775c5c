"""Decoded OTLP spans -> Timeline columns, a batch at a time (the reader's hot path).

Hand-written because it is the hot path: every per-span step is a C-level ``map`` with
``operator.attrgetter`` or a numpy operation, never a Python loop over spans (a Python loop costs
~0.3 us per span per step on the CI box; the target is 2 us per span in total). Attributes are
flattened across the whole batch, their keys turned into integer codes, and each column
attribute gathered with one numpy ``flatnonzero``; only attributes that are not columns
(``attrs``) are walked in Python.


Split by responsibility: ``_interner`` (shared tables), ``_header_columns`` (times, ids),
``_attr_columns`` (``gputrace.*`` attributes); this module puts a batch together.

Not thread-safe: one ``Interner`` per load, used from one thread.
"""

from __future__ import annotations

from itertools import chain
from operator import attrgetter

import numpy as np

from gputrace.otlp.decode import py_value
from gputrace.otlp.ids import STATUS_NAMES
from gputrace.otlp.schema import NO_STATUS
from gputrace.timeline.formats.otlp_jsonl._attr_columns import (
    COLUMN_ATTRS,
    COLUMN_KEYS,
    N_COLUMN_KEYS,
    KeyCodes,
    apply_fast_attrs,
    describe_value,
    int_values,
    set_kinds,
    set_lanes,
)
from gputrace.timeline.formats.otlp_jsonl._header_columns import id_column, int64_column, trace_codes
from gputrace.timeline.formats.otlp_jsonl._interner import Interner
from gputrace.timeline.model import Lane

_g_key = attrgetter("key")
_g_value = attrgetter("value")
_g_str = attrgetter("stringValue")
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


def spans_to_columns(spans: list, res: np.ndarray, it: Interner, fast: list | None = None):
    """Convert one batch. ``res``: resource index per span (int32).

    ``fast``: rows whose attributes were parsed by ``_fast.parse_attributes`` (their spans are
    ``gputrace.otlp.schema.LeanSpan``s), as ``(FastAttrs, span indices in it, batch rows)`` triples; all other
    rows are ``gputrace.otlp.schema.Span``s with decoded attributes.

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
    start = int64_column(spans, _g_start, "startTimeUnixNano", mark)
    end = int64_column(spans, _g_end, "endTimeUnixNano", mark)
    for i in np.flatnonzero((end < start) & okmask).tolist():
        mark(i, "endTimeUnixNano", f"end {int(end[i])} is before startTimeUnixNano {int(start[i])}")

    # ---- names, ids
    phase = it.phase_codes(list(map(_g_name, spans)))
    trace = trace_codes(list(map(_g_tid, spans)), it, mark)
    span_id = id_column(list(map(_g_sid, spans)), "spanId", mark, allow_empty=False)
    parent_span_id = id_column(list(map(_g_pid, spans)), "parentSpanId", mark, allow_empty=True)

    attrs: dict[int, dict] = {}
    status = _status_column(spans, attrs, mark)
    kind = it.kind_by_phase[phase]
    lane_code = np.full(n, -1, np.int64)
    cols = _attribute_columns(spans, fast, kind, lane_code, attrs, it, mark)
    lane = _lane_column(res, cols["device"], lane_code, attrs, it)

    out = dict(cols)
    out.update(
        start=start, end=end, phase=phase, lane=lane, kind=kind, status=status,
        resource=res.astype(np.int32), trace=trace, span_id=span_id, parent_span_id=parent_span_id,
    )
    if bad:
        out, attrs = _drop_rows(out, attrs, okmask)
    return out, attrs, sorted((i, f, m) for i, (f, m) in bad.items())


def _status_column(spans: list, attrs: dict[int, dict], mark) -> np.ndarray:
    """The batch's ``status`` column (int8, 0..2). A span whose code is neither 0..2 nor a
    ``STATUS_CODE_*`` name (or its digits) is ``mark``-ed and given 0; a non-empty status message is
    put in ``attrs[row]["status.message"]`` (``attrs`` must hold no entry yet for such a row)."""
    n = len(spans)
    statuses = list(map(_g_status, spans))
    if statuses.count(NO_STATUS) == n:  # no span has a status (identity first: C speed)
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
    return status


def _attribute_columns(spans: list, fast: list | None, kind: np.ndarray, lane_code: np.ndarray,
                       attrs: dict[int, dict], it: Interner, mark) -> dict[str, np.ndarray]:
    """The optional attribute columns (device, circuit, batch, nbytes, gpu_start, gpu_end; -1 where
    absent) of the batch, flattened over it. Also writes, in place: ``kind`` (per row, from
    ``gputrace.kind``), ``lane_code`` (lane name code per row, -1 where the span names no lane) and
    ``attrs`` (the attributes that are not columns, by row). An invalid value is ``mark``-ed.
    ``fast``: as for ``spans_to_columns``."""
    n = len(spans)
    cols: dict[str, np.ndarray] = {
        "device": np.full(n, -1, np.int16),
        "circuit": np.full(n, -1, np.int32),
        "batch": np.full(n, -1, np.int32),
        "nbytes": np.full(n, -1, np.int64),
        "gpu_start": np.full(n, -1, np.int64),
        "gpu_end": np.full(n, -1, np.int64),
    }
    if fast:
        gen = np.ones(n, dtype=bool)
        for _, _, brows in fast:
            gen[brows] = False
        gen_rows = np.flatnonzero(gen)
        attr_lists = [spans[i].attributes for i in gen_rows.tolist()]
        apply_fast_attrs(fast, cols, kind, lane_code, attrs, it)
    else:
        gen_rows = np.arange(n, dtype=np.int64)
        attr_lists = list(map(_g_attrs, spans))
    lens = np.fromiter(map(len, attr_lists), np.int64, len(attr_lists))
    flat = list(chain.from_iterable(attr_lists))
    if not flat:
        return cols
    # fromiter(dtype=object) skips the per-element sequence checks of ``arr[:] = list``.
    vals = np.fromiter(map(_g_value, flat), dtype=object, count=len(flat))
    codes = np.fromiter(map(KeyCodes.instance.__getitem__, map(_g_key, flat)), np.int16, len(flat))
    rows = np.repeat(gen_rows, lens)
    first = np.zeros(n, dtype=np.int64)
    starts = np.zeros(len(lens), dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    first[gen_rows] = starts
    present = np.bincount(codes, minlength=N_COLUMN_KEYS + 1)
    for c in np.flatnonzero(present[:N_COLUMN_KEYS]).tolist():
        key = COLUMN_KEYS[c]
        colname, typ = COLUMN_ATTRS[key]
        idx = np.flatnonzero(codes == c)
        sel = vals[idx]  # object-array gather: C speed
        r = rows[idx]
        if typ == "int":
            v = int_values(sel, idx, rows, first, colname, mark)
            cols[colname][r] = v
            continue
        strs = list(map(_g_str, sel))
        if None in strs:
            _repair_strings(strs, sel, idx, rows, first, key, colname, mark)
        if colname == "lane":
            set_lanes(lane_code, r, strs, it)
        else:
            set_kinds(kind, r, strs)
    if present[N_COLUMN_KEYS]:
        _row_dict_attrs(flat, np.flatnonzero(codes == N_COLUMN_KEYS), rows, first, attrs, mark)
    return cols


def _repair_strings(strs: list, sel: np.ndarray, idx: np.ndarray, rows: np.ndarray, first: np.ndarray,
                    key: str, colname: str, mark) -> None:
    """Replace, in place, each None in ``strs`` (the ``stringValue``s of the values ``sel`` of the
    string column attribute ``key``, at flat positions ``idx``): a bare int lane becomes
    ``stream:<int>``, anything else "" with its row ``mark``-ed (``rows``/``first``: each flat
    position's row and each row's first flat position)."""
    for j, s in enumerate(strs):
        if s is None:
            p = int(idx[j])
            try:
                pv = py_value(sel[j])
            except ValueError:  # nested too deeply: not a lane/kind either
                pv = None
            if colname == "lane" and type(pv) is int:  # lane written as a bare int
                strs[j] = f"stream:{pv}"
            else:
                strs[j] = ""
                mark(int(rows[p]), f"attributes[{p - int(first[rows[p]])}].value",
                     f"expected stringValue for {key}, got {describe_value(sel[j])}")


def _row_dict_attrs(flat: list, idx: np.ndarray, rows: np.ndarray, first: np.ndarray, attrs: dict[int, dict],
                    mark) -> None:
    """Put the attributes at flat positions ``idx`` of ``flat`` (keys that are not columns) into
    ``attrs[row]``, as Python values; a value nested too deeply ``mark``s its row instead."""
    for p, r in zip(idx.tolist(), rows[idx].tolist(), strict=True):
        d = attrs.get(r)
        if d is None:
            d = attrs[r] = {}
        kv = flat[p]
        v = kv.value
        s = v.stringValue
        if s is None:
            try:
                s = py_value(v)
            except ValueError as e:  # ValueTooDeep: the span is dropped with a clear reason
                mark(r, f"attributes[{p - int(first[r])}].value", str(e))
                continue
        d[kv.key] = s


def _lane_column(res: np.ndarray, device: np.ndarray, lane_code: np.ndarray, attrs: dict[int, dict],
                 it: Interner) -> np.ndarray:
    """Each row's index in ``it.lanes`` (int32), by (resource, device, lane name); adds new lanes to
    ``it``. A row without a lane name (``lane_code`` < 0) is named from its ``thread.name`` or
    ``thread.id`` attribute, else from its resource's service (``lane_code`` is filled in place)."""
    missing = np.flatnonzero(lane_code < 0)
    if len(missing):
        for r in missing.tolist():
            d = attrs.get(r)
            tn = None
            if d is not None:
                tn = d.get("thread.name") or d.get("thread.id")
            name = f"thread:{tn}" if tn not in (None, "") else f"span:{it.res_service[int(res[r])]}"
            lane_code[r] = it.lane_name_code(name)
    triples, inv = _distinct_lanes(res.astype(np.int64), device.astype(np.int64), lane_code)
    lane_map = np.empty(len(triples), dtype=np.int32)
    for j, (ri, dv, lc) in enumerate(triples):
        ln = Lane(it.res_host[ri], it.res_pid[ri], dv, it.lane_names[lc])
        li = it.lane_ix.get(ln)
        if li is None:
            li = it.lane_ix[ln] = len(it.lanes)
            it.lanes.append(ln)
        lane_map[j] = li
    return lane_map[inv]


def _drop_rows(out: dict[str, np.ndarray], attrs: dict[int, dict],
               okmask: np.ndarray) -> tuple[dict[str, np.ndarray], dict[int, dict]]:
    """The columns and ``attrs`` of the rows where ``okmask`` is true, ``attrs`` re-keyed by their new rows."""
    keep = np.flatnonzero(okmask)
    out = {k: v[keep] for k, v in out.items()}
    newrow = np.full(len(okmask), -1, dtype=np.int64)
    newrow[keep] = np.arange(len(keep))
    return out, {int(newrow[r]): d for r, d in attrs.items() if okmask[r]}


#: Largest table of (resource, device, lane name) combinations indexed directly by ``_distinct_lanes``.
_DENSE_LANES = 1 << 16


def _distinct_lanes(res: np.ndarray, dev: np.ndarray,
                    name: np.ndarray) -> tuple[list[tuple[int, int, int]], np.ndarray]:
    """The distinct ``(resource, device, lane name code)`` triples of a batch, ascending, and each row's index
    among them: where their ranges are small, as in any real trace, by a lookup table (~0.1 ms per 32 k-span
    batch; ``np.unique`` of the triples packed into one int64 took ~1.3 ms, and the packing let a device below
    -1 spill into the resource bits), else ``np.unique`` of the rows."""
    if not len(res):
        return [], np.zeros(0, np.int64)
    lo = [int(res.min()), int(dev.min()), int(name.min())]
    span = [int(res.max()) - lo[0] + 1, int(dev.max()) - lo[1] + 1, int(name.max()) - lo[2] + 1]
    if span[0] * span[1] * span[2] <= _DENSE_LANES:
        key = ((res - lo[0]) * span[1] + (dev - lo[1])) * span[2] + (name - lo[2])
        present = np.zeros(span[0] * span[1] * span[2], dtype=bool)
        present[key] = True
        ukeys = np.flatnonzero(present)
        lut = np.empty(len(present), dtype=np.int64)
        lut[ukeys] = np.arange(len(ukeys), dtype=np.int64)
        inv = lut[key]
        triples = [(k // (span[1] * span[2]) + lo[0], k // span[2] % span[1] + lo[1], k % span[2] + lo[2])
                   for k in ukeys.tolist()]
        return triples, inv
    # Wide ranges (a hostile file): rows of the three, compared as rows.
    utrip, inv = np.unique(np.stack([res, dev, name], axis=1), axis=0, return_inverse=True)
    return [(int(r), int(d), int(c)) for r, d, c in utrip.tolist()], inv.reshape(-1)

"""Span texts of a block of Timeline rows, as ``gputrace.timeline.formats.otlp_jsonl.write`` writes them,
column by column.

The per-row path (``write._spans`` building a span dict, ``encode.span_json`` its text) costs about
7 us a row; an import of a million Nsight rows spent most of its time there. Here what repeats is
encoded once per block (a lane's and kind's attribute text, a phase's name, a trace id, a kernel's
shared attributes, an overlay's key layout, a ``TemplateAttrs`` template with its ids' places) and each
row gets one %-format of its own values: ids (hex of the whole block's ids at once), times, the column
attributes it has, its overlay values. Rows this does not cover exactly (plain dicts with values other than
ints and strings, overlays with values other than ints, keys that clash with the column attributes) are
written by the per-row path. The bytes are the same either way (tests/unit/test_otlp_block.py compares the
two on varied Timelines).

Hand-written because it is the import's hot path and no library encodes OTLP JSON from columns.
Pure; runs on the caller's thread.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from itertools import chain

import numpy as np

from gputrace.otlp.encode import attributes_json, json_string, span_json
from gputrace.otlp.ids import hex_id
from gputrace.timeline.formats.otlp_jsonl.plan import COLUMN_KEYS, shared_dict_text, trace_codes
from gputrace.timeline.model import KIND_NAMES, Timeline
from gputrace.timeline.row_attrs import RowAttrs, TemplateAttrs

__all__ = ["line_texts"]

_INT_ATTR = '{"key":%s,"value":{"intValue":"%%d"}}'


def _int_attr(key: str) -> str:
    return _INT_ATTR % json_string(key).replace("%", "%%")


_CIRCUIT, _BATCH, _BYTES = _int_attr("gputrace.circuit"), _int_attr("gputrace.batch"), _int_attr("gputrace.bytes")
_CIRCUIT, _BATCH, _BYTES = "," + _CIRCUIT, "," + _BATCH, "," + _BYTES
_GPU = "," + _int_attr("gputrace.gpu.start_ns") + "," + _int_attr("gputrace.gpu.end_ns")
_MISS = object()


def _template(ra: RowAttrs, shared_text: dict) -> tuple[str, str] | None:
    """What a row of ``ra``'s (shared dict, overlay keys) adds after the column attributes: a %-template of
    its overlay values and the shared dict's text (each with its leading comma, or empty); None where the
    per-row path must write it (clashing keys)."""
    shared = shared_dict_text(ra, shared_text)
    if shared is None:
        return None
    return "".join("," + _int_attr(k) for k in ra.keys_), "," + shared if shared else ""


def _template_format(ta: TemplateAttrs) -> tuple[str, tuple[int, ...] | None] | None:
    """What a row of ``ta``'s (template, overlay keys) adds after the column attributes: one %-format of
    the template's items in its order, the overlay's int values in their places, and the order in which
    to take the overlay values (None: as they are); None where the per-row path must write it (a
    template key clashing with the column attributes)."""
    t, over = ta.shared, ta.keys_
    if t.keys() & COLUMN_KEYS or len(set(over)) != len(over) or not set(over) <= t.keys():
        return None
    keys = list(t)
    order = tuple(sorted(range(len(over)), key=lambda j: keys.index(over[j])))
    return _items_format(t.items(), set(over)), None if order == tuple(range(len(over))) else order


def _items_format(items, int_keys) -> str:
    """A %-format of attribute ``items`` as ``attributes_json`` writes them, each after a comma: the value
    of a key in ``int_keys`` left as %d (the row's int), the others written out ('%' escaped)."""
    return "".join("," + (_int_attr(k) if k in int_keys else attributes_json({k: v}).replace("%", "%%"))
                   for k, v in items)


#: Distinct string values of one plain-dict layout baked into formats at most (then its rows go per row).
_MAX_BAKED = 4096


def _dict_layout(keys: tuple, types: tuple) -> tuple[tuple[int, ...], tuple[int, ...], dict] | None:
    """A plain attribute dict's layout (its keys in order, its values' types): (positions of its int
    values, positions of its str values, an empty cache of formats by str values); None where the
    per-row path must write it (a value of another type: a bool, float, list...; a non-str key; a key
    of the column attributes)."""
    if not set(types) <= {int, str} or not all(type(k) is str for k in keys) or not COLUMN_KEYS.isdisjoint(keys):
        return None
    return (tuple(j for j, t in enumerate(types) if t is int), tuple(j for j, t in enumerate(types) if t is str), {})


def _dict_format(keys: tuple, types: tuple, strs: tuple) -> str:
    """The %-format (``_items_format``) of a plain dict of this layout whose str values are ``strs``."""
    it = iter(strs)
    items = [(k, None if t is int else next(it)) for k, t in zip(keys, types, strict=True)]
    return _items_format(items, {k for k, t in zip(keys, types, strict=True) if t is int})


def _hex16(values: np.ndarray) -> list[str]:
    """16-digit lowercase hex of each uint64 (one ``bytes.hex`` for the block, then slices)."""
    h = values.astype(">u8").tobytes().hex()
    return [h[i:i + 16] for i in range(0, len(h), 16)]


def _where(n: int, idx, texts) -> list:
    """A list of ``n`` strings: ``texts`` at ``idx``, "" elsewhere (object-array assignment: no Python loop)."""
    out = np.full(n, "", dtype=object)
    if len(idx):
        out[idx] = texts if isinstance(texts, str) else np.fromiter(texts, dtype=object, count=len(idx))
    return out.tolist()


def _fields(tl: Timeline, rows: np.ndarray, ids: np.ndarray, fallback_trace: str, shared_text: dict,
            templates: dict, slow) -> tuple[list[list[str] | None], dict[int, str]]:
    """The variable text of each span of ``rows``, field by field (see ``_PIECES``; None: empty on every
    row), and the whole text of the spans written by the per-row path (row position -> text)."""
    n = len(rows)
    fields: list[list[str] | None] = [None] * len(_FIELD_AT)
    if n == 0:
        return fields, {}
    _id_fields(tl, rows, ids, fallback_trace, fields)
    _name_time_fields(tl, rows, fields)
    _column_attr_fields(tl, rows, fields)
    slow_rows = _row_attr_fields(tl, rows, shared_text, templates, fields)
    st = np.maximum(tl.cols["status"][rows], 0)
    idx = np.flatnonzero(st)
    if len(idx):
        fields[_STATUS] = _where(n, idx, (f',"status":{{"code":{x}}}' for x in st[idx].tolist()))
    slow_text = {}
    if slow_rows:
        slow_rows.sort()
        slow_text = dict(zip(slow_rows, map(span_json, slow(rows[slow_rows])), strict=True))
    return fields, slow_text


def _id_fields(tl: Timeline, rows: np.ndarray, ids: np.ndarray, fallback_trace: str,
               fields: list[list[str] | None]) -> None:
    """Fill ``fields``' span id, parent span id (pieces only where a row has a parent) and trace id (the
    row's, else ``fallback_trace``; each distinct one encoded once) for the non-empty ``rows``."""
    c = tl.cols
    n = len(rows)
    fields[_SID] = _hex16(ids[rows])
    par = c["parent"][rows]
    pval = np.where(par >= 0, ids[np.maximum(par, 0)], c["parent_span_id"][rows].astype(np.uint64))
    has = np.flatnonzero(pval != 0)
    if len(has):
        fields[_PPRE] = _where(n, has, ',"parentSpanId":"')
        fields[_PHEX] = _where(n, has, _hex16(pval[has]))
        fields[_PEND] = _where(n, has, '"')
    t = trace_codes(tl, c["trace"][rows])
    texts = list(tl.trace_ids) + [fallback_trace]
    ttxt = {k: hex_id(texts[k], 16) for k in np.unique(t).tolist()}
    fields[_TID] = list(map(ttxt.__getitem__, t.tolist()))


def _name_time_fields(tl: Timeline, rows: np.ndarray, fields: list[list[str] | None]) -> None:
    """Fill ``fields``' name (``tl.names`` where a row has one, else its phase's; each phase encoded once),
    start and end for ``rows``."""
    c = tl.cols
    ph = c["phase"][rows]
    ptxt = {k: json_string(tl.phases[k]) for k in np.unique(ph).tolist()}
    name = list(map(ptxt.__getitem__, ph.tolist()))
    if tl.names:
        for i, r in enumerate(rows.tolist()):
            v = tl.names.get(r)
            if v:
                name[i] = json_string(v)
    fields[_NAME] = name
    fields[_START] = list(map(str, c["start"][rows].tolist()))
    fields[_END] = list(map(str, c["end"][rows].tolist()))


def _column_attr_fields(tl: Timeline, rows: np.ndarray, fields: list[list[str] | None]) -> None:
    """Fill ``fields``' column attributes for ``rows``: lane (+ device) and kind, encoded once per
    (lane, kind) pair; circuit, batch, nbytes and the GPU times (both or neither) where set (>= 0)."""
    c = tl.cols
    n = len(rows)
    lane, kind = c["lane"][rows].astype(np.int64), c["kind"][rows].astype(np.int64)
    pair = lane * 256 + (kind & 255)
    lk = {}
    for p in np.unique(pair).tolist():
        ln = tl.lanes[p >> 8]
        k = p & 255
        a: dict = {"gputrace.lane": ln.name}
        if ln.device >= 0:
            a["gputrace.device"] = ln.device
        a["gputrace.kind"] = KIND_NAMES.get(k if k < 128 else k - 256, "host")
        lk[p] = attributes_json(a)
    fields[_COL] = list(map(lk.__getitem__, pair.tolist()))
    for at, name_, tmpl in ((_CIRC, "circuit", _CIRCUIT), (_BATCHF, "batch", _BATCH), (_BYTESF, "nbytes", _BYTES)):
        v = c[name_][rows]
        idx = np.flatnonzero(v >= 0)
        if len(idx):
            fields[at] = _where(n, idx, map(tmpl.__mod__, v[idx].tolist()))
    g0, g1 = c["gpu_start"][rows], c["gpu_end"][rows]
    idx = np.flatnonzero((g0 >= 0) & (g1 >= 0))
    if len(idx):
        fields[_GPUF] = _where(n, idx, map(_GPU.__mod__, zip(g0[idx].tolist(), g1[idx].tolist(), strict=True)))


def _row_attr_fields(tl: Timeline, rows: np.ndarray, shared_text: dict, templates: dict,
                     fields: list[list[str] | None]) -> list[int]:
    """Fill ``fields``' overlay and shared-dict texts of ``rows``' row attributes; returns the positions
    (in ``rows``, unsorted) of the rows the per-row path must write instead.

    A RowAttrs without clashes is its overlay values through a %-template per overlay key set (ints only:
    %d would also take a bool or a float) and its shared dict's text (one object); a TemplateAttrs one
    %-format of its template; a plain dict of ints and strings one %-format per layout and string values.
    ``templates`` caches all of these (``_MISS``: not looked at yet; None: per-row path)."""
    slow_rows: list[int] = []
    if not tl.attrs:
        return slow_rows
    n = len(rows)
    fi: list[int] = []
    ft: list[str] = []
    fv: list[tuple] = []
    fs: list[str] = []
    row_attrs: Mapping[int, Mapping] = tl.attrs  # RowAttrs and TemplateAttrs are Mappings, not dicts
    for i, ra in enumerate(map(row_attrs.get, rows.tolist())):
        if ra is None:
            continue
        if type(ra) is RowAttrs:
            key: tuple = (id(ra.shared), ra.keys_)
            tm = templates.get(key, _MISS)
            if tm is _MISS:
                tm = templates[key] = _template(ra, shared_text)
            if tm is None:
                slow_rows.append(i)
            else:
                fi.append(i)
                ft.append(tm[0])
                fv.append(ra.values_)
                fs.append(tm[1])
        elif type(ra) is TemplateAttrs:
            key = (id(ra.shared), ra.keys_, TemplateAttrs)
            tm = templates.get(key, _MISS)
            if tm is _MISS:
                tm = templates[key] = _template_format(ra)
            if tm is None:
                slow_rows.append(i)
            else:
                fi.append(i)
                ft.append(tm[0])
                fv.append(ra.values_ if tm[1] is None else tuple(map(ra.values_.__getitem__, tm[1])))
                fs.append("")
        elif type(ra) is dict and ra:
            vals = tuple(ra.values())
            sig = (tuple(ra), tuple(map(type, vals)))
            dm = templates.get(sig, _MISS)
            if dm is _MISS:
                dm = templates[sig] = _dict_layout(sig[0], sig[1])
            fmt = None
            if dm is not None:
                int_at, str_at, baked = dm
                strs = tuple(map(vals.__getitem__, str_at))
                fmt = baked.get(strs)
                if fmt is None and len(baked) < _MAX_BAKED:
                    fmt = baked[strs] = _dict_format(sig[0], sig[1], strs)
            if fmt is None:
                slow_rows.append(i)
            else:
                fi.append(i)
                ft.append(fmt)
                fv.append(tuple(map(vals.__getitem__, int_at)))
                fs.append("")
        elif ra:
            slow_rows.append(i)
    if fi and not set(map(type, chain.from_iterable(fv))) <= {int}:
        keep = [j for j, vals in enumerate(fv) if all(type(v) is int for v in vals)]
        slow_rows.extend(fi[j] for j in set(range(len(fi))).difference(keep))
        fi, ft, fv, fs = [fi[j] for j in keep], [ft[j] for j in keep], [fv[j] for j in keep], [fs[j] for j in keep]
    if fi:
        fields[_OVER] = _where(n, fi, map(str.__mod__, ft, fv))
        fields[_SHARED] = _where(n, fi, fs)
    return slow_rows


# A span's text is these pieces, the fields (None) filled by ``_fields``, then joined; spans are separated by
# the commas at piece 0.
_PIECES = ["", '{"traceId":"', None, '","spanId":"', None, '"', None, None, None, ',"name":', None,
           ',"kind":1,"startTimeUnixNano":"', None, '","endTimeUnixNano":"', None, '","attributes":[', None, None,
           None, None, None, None, None, "]", None, "}"]
_FIELD_AT = [i for i, p in enumerate(_PIECES) if p is None]
(_TID, _SID, _PPRE, _PHEX, _PEND, _NAME, _START, _END, _COL, _CIRC, _BATCHF, _BYTESF, _GPUF, _OVER, _SHARED,
 _STATUS) = range(len(_FIELD_AT))
_CONST_AT = [(i, p) for i, p in enumerate(_PIECES) if p is not None and i > 0]
_W = len(_PIECES)


def line_texts(tl: Timeline, rows: np.ndarray, ids: np.ndarray, fallback_trace: str, shared_text: dict,
               templates: dict, slow, head: str, tail: str, max_spans: int) -> list[str]:
    """The lines (no newline) holding ``rows`` (one group's rows, in order), ``max_spans`` spans a line,
    each ``head`` + its spans' texts joined by commas + ``tail``: the text ``span_json`` of ``slow(rows)``'s
    span dicts would give. ``slow``: the per-row path (rows -> span dicts), for the rows not covered
    here; ``shared_text``: the writer's cache of shared-dict texts (``plan.shared_dict_text``);
    ``templates``: this writer's cache of row-attribute templates (empty at first). Raises what
    ``span_json`` raises (a malformed trace id)."""
    fields, slow_text = _fields(tl, rows, ids, fallback_trace, shared_text, templates, slow)
    lines = []
    n = len(rows)
    slow_at = sorted(slow_text)
    for k in range(0, n, max_spans):
        m = min(max_spans, n - k)
        parts: list = [""] * (_W * m)  # one span's pieces after another, joined once
        parts[_W::_W] = [","] * (m - 1)
        for i, p in _CONST_AT:
            parts[i::_W] = [p] * m
        for i, f in zip(_FIELD_AT, fields, strict=True):
            if f is not None:
                parts[i::_W] = f[k:k + m]
        for i in slow_at[bisect_left(slow_at, k):bisect_left(slow_at, k + m)]:
            j = (i - k) * _W
            parts[j + 1:j + _W] = [slow_text[i]] + [""] * (_W - 2)
        lines.append(head + "".join(parts) + tail)
    return lines

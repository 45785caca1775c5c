"""Span texts of a block of Timeline rows, as ``gputrace.interop.otlp_file`` writes them, column by column.

The per-row path (``otlp_file._spans`` building a span dict, ``encode.span_json`` its text) costs about
7 us a row; an import of a million Nsight rows spent most of its time there. Here what repeats is
encoded once per block (a lane's and kind's attribute text, a phase's name, a trace id, a kernel's
shared attributes, an overlay's key layout) and each row gets one %-format of its own values: ids (hex
of the whole block's ids at once), times, the column attributes it has, its overlay values. Rows this
does not cover exactly (attributes in a plain dict, overlays with values other than ints, keys that
clash with the column attributes) are written by the per-row path. The bytes are the same either way
(tests/unit/test_otlp_block.py compares the two on varied Timelines).

Hand-written because it is the import's hot path and no library encodes OTLP JSON from columns.
Pure; runs on the caller's thread.
"""

from __future__ import annotations

from itertools import chain

import numpy as np

from gputrace.otlp.encode import attributes_json, json_string, span_json
from gputrace.otlp.ids import hex_id
from gputrace.timeline.model import KIND_NAMES, Timeline
from gputrace.timeline.row_attrs import RowAttrs

__all__ = ["span_texts"]

_SPAN = ('{"traceId":"%s","spanId":"%s"%s,"name":%s,"kind":1,"startTimeUnixNano":"%d","endTimeUnixNano":"%d",'
         '"attributes":[%s%s%s]%s}')
_INT_ATTR = '{"key":%s,"value":{"intValue":"%%d"}}'


def _int_attr(key: str) -> str:
    return _INT_ATTR % json_string(key).replace("%", "%%")


_CIRCUIT, _BATCH, _BYTES = _int_attr("gputrace.circuit"), _int_attr("gputrace.batch"), _int_attr("gputrace.bytes")
_CIRCUIT, _BATCH, _BYTES = "," + _CIRCUIT, "," + _BATCH, "," + _BYTES
_GPU = "," + _int_attr("gputrace.gpu.start_ns") + "," + _int_attr("gputrace.gpu.end_ns")
_MISS = object()


def _template(ra: RowAttrs, shared_text: dict) -> str | None:
    """The text a row of ``ra``'s (shared dict, overlay keys) adds after the column attributes, as a
    %-template of its overlay values; None where the per-row path must write it (clashing keys)."""
    from gputrace.interop.otlp_file import _shared_text

    shared = _shared_text(ra, shared_text)
    if shared is None:
        return None
    parts = [_int_attr(k) for k in ra.keys_]
    if shared:
        parts.append(shared.replace("%", "%%"))
    return "".join("," + p for p in parts)


def _hex16(values: np.ndarray) -> list[str]:
    """16-digit lowercase hex of each uint64 (one ``bytes.hex`` for the block, then slices)."""
    h = values.astype(">u8").tobytes().hex()
    return [h[i:i + 16] for i in range(0, len(h), 16)]


def span_texts(tl: Timeline, rows: np.ndarray, ids: np.ndarray, fallback_trace: str, shared_text: dict,
               templates: dict, slow) -> list[str]:
    """The span texts of ``rows`` (one group's rows, in order), as ``span_json`` of ``slow(rows)``'s span
    dicts would give them. ``slow``: the per-row path (rows -> span dicts), for the rows not covered
    here; ``shared_text``: the writer's cache of shared-dict texts (``otlp_file._shared_text``);
    ``templates``: this writer's cache of row-attribute templates (empty at first).
    Raises what ``span_json`` raises (a malformed trace id)."""
    c = tl.cols
    n = len(rows)
    if n == 0:
        return []

    # Ids.
    sid = _hex16(ids[rows])
    par = c["parent"][rows]
    pval = np.where(par >= 0, ids[np.maximum(par, 0)], c["parent_span_id"][rows].astype(np.uint64))
    phex = _hex16(pval)
    parent = [f',"parentSpanId":"{h}"' for h in phex]
    for i in np.flatnonzero(pval == 0).tolist():
        parent[i] = ""

    # Trace ids: the row's, else the group's; encoded once per distinct one.
    t = c["trace"][rows].astype(np.int64)
    ntids = len(tl.trace_ids)
    valid = np.array([bool(x) for x in tl.trace_ids] + [False], dtype=bool)
    inside = (t >= 0) & (t < ntids)
    t = np.where(inside & valid[np.where(inside, t, ntids)], t, ntids)
    texts = list(tl.trace_ids) + [fallback_trace]
    ttxt = {k: hex_id(texts[k], 16) for k in np.unique(t).tolist()}
    tid = list(map(ttxt.__getitem__, t.tolist()))

    # Names.
    ph = c["phase"][rows]
    ptxt = {k: json_string(tl.phases[k]) for k in np.unique(ph).tolist()}
    name = list(map(ptxt.__getitem__, ph.tolist()))
    if tl.names:
        for i, r in enumerate(rows.tolist()):
            v = tl.names.get(r)
            if v:
                name[i] = json_string(v)

    # Column attributes: lane (+ device) and kind once per pair, the optional ones where set.
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
    col = list(map(lk.__getitem__, pair.tolist()))
    opt = [""] * n
    for name_, tmpl in (("circuit", _CIRCUIT), ("batch", _BATCH), ("nbytes", _BYTES)):
        v = c[name_][rows]
        idx = np.flatnonzero(v >= 0).tolist()
        for i, x in zip(idx, v[idx].tolist(), strict=True):
            opt[i] += tmpl % x
    g0, g1 = c["gpu_start"][rows], c["gpu_end"][rows]
    idx = np.flatnonzero((g0 >= 0) & (g1 >= 0)).tolist()
    if idx:
        gpu = list(map(_GPU.__mod__, zip(g0[idx].tolist(), g1[idx].tolist(), strict=True)))
        for i, x in zip(idx, gpu, strict=True):
            opt[i] = opt[i] + x if opt[i] else x

    # Row attributes: a RowAttrs without clashes is a %-template per (shared dict, overlay keys), filled
    # with its overlay values (ints only: %d would also take a bool or a float).
    extra = [""] * n
    slow_rows: list[int] = []
    if tl.attrs:
        fi: list[int] = []
        ft: list[str] = []
        fv: list[tuple] = []
        for i, ra in enumerate(map(tl.attrs.get, rows.tolist())):
            if ra is None:
                continue
            if type(ra) is RowAttrs:
                key = (id(ra.shared), ra.keys_)
                tm = templates.get(key, _MISS)
                if tm is _MISS:
                    tm = templates[key] = _template(ra, shared_text)
                if tm is None:
                    slow_rows.append(i)
                else:
                    fi.append(i)
                    ft.append(tm)
                    fv.append(ra.values_)
            elif ra:
                slow_rows.append(i)
        if fi and not set(map(type, chain.from_iterable(fv))) <= {int}:
            keep = [j for j, vals in enumerate(fv) if all(type(v) is int for v in vals)]
            slow_rows.extend(fi[j] for j in set(range(len(fi))).difference(keep))
            fi, ft, fv = [fi[j] for j in keep], [ft[j] for j in keep], [fv[j] for j in keep]
        for i, text in zip(fi, map(str.__mod__, ft, fv), strict=True):
            extra[i] = text

    st = np.maximum(c["status"][rows], 0).tolist()
    status = [f',"status":{{"code":{s}}}' if s else "" for s in st]
    out = list(map(_SPAN.__mod__, zip(tid, sid, parent, name, c["start"][rows].tolist(), c["end"][rows].tolist(),
                                      col, opt, extra, status, strict=True)))
    if slow_rows:
        slow_rows.sort()
        for i, s in zip(slow_rows, slow(rows[slow_rows]), strict=True):
            out[i] = span_json(s)
    return out

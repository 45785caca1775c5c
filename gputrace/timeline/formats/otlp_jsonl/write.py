"""Write any Timeline (an nsys or Chrome import, a filtered view) as an OTLP JSON Lines trace file.

The file is what gputrace's own recorder writes and ``gputrace.timeline.read_trace`` reads back into
the same lanes: one ``ExportTraceServiceRequest`` per line, one resource per line, at most
``max_spans`` spans per line. Row -> span:

* name = ``Timeline.name_of(row)``; ids: the row's span id and parent span id (rows without one
  get an id from their row number); trace id: the row's, else one derived from its resource;
* resource = the row's resource attributes with ``host.name`` / ``process.pid`` set from its lane
  (the reader rebuilds lanes from them);
* attributes: ``gputrace.lane``, ``gputrace.device`` (the lane's GPU; omitted on CPU lanes),
  ``gputrace.kind``, ``gputrace.circuit`` / ``batch`` / ``bytes`` where set,
  ``gputrace.gpu.start_ns`` / ``gpu.end_ns`` where the row has device times, then ``attrs``;
* status: the row's status code.

Pure; runs on the caller's thread.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from gputrace.otlp.encode import REQUEST_TAIL, attributes_json, encode_request, request_head
from gputrace.timeline.formats.otlp_jsonl.plan import Group, Plan, groups, shared_dict_text, span_ids
from gputrace.timeline.formats.otlp_jsonl.write_block import line_texts
from gputrace.timeline.model import KIND_NAMES, Timeline
from gputrace.timeline.row_attrs import RowAttrs

__all__ = ["line_count", "reference_requests", "timeline_requests", "write_otlp_jsonl"]


def timeline_requests(tl: Timeline, max_spans: int = 512, scope_name: str = "gputrace.interop", *,
                      plan: Plan | None = None, lines: range | None = None) -> Iterator[bytes]:
    """Yield one encoded OTLP JSON request line (no newline) per resource chunk. ``plan``: the
    ``groups``/``span_ids`` of ``tl`` if the caller has them already; ``lines``: only these lines of the
    file (numbered from 0; see ``line_count``), for writers that split the work."""
    gs, ids = plan if plan is not None else (groups(tl), span_ids(tl))
    shared_text: dict[tuple[int, tuple], str | None] = {}  # see plan.shared_dict_text
    templates: dict = {}  # see write_block.line_texts
    block = max(1, BLOCK_ROWS // max_spans) * max_spans  # rows encoded together (whole lines)
    first = 0  # number of the group's first line
    for g in gs:
        g_first, first = first, first + -(-len(g.rows) // max_spans)
        lo, hi = 0, len(g.rows)
        if lines is not None:  # the group's rows within the lines asked for
            a, b = max(lines.start, g_first), min(lines.stop, first)
            if a >= b:
                continue
            lo, hi = (a - g_first) * max_spans, min((b - g_first) * max_spans, len(g.rows))
        head = request_head(g.resource, scope_name)
        for b0 in range(lo, hi, block):
            rows = g.rows[b0:min(b0 + block, hi)]
            lines_ = line_texts(tl, rows, ids, g.fallback_trace, shared_text, templates,
                                lambda sub, g=g: _spans(tl, sub, ids, g.fallback_trace, shared_text),
                                head, REQUEST_TAIL, max_spans)
            for text in lines_:
                yield text.encode()


def _middle_line(tl: Timeline, gs: list[Group], max_spans: int) -> int:
    """The line that splits the encoding work in two halves: a row with attributes costs ~2.75 times one
    without (measured: 4.4 against 1.6 us for Nsight kernels and API calls)."""
    has = np.zeros(tl.n, dtype=bool)
    if tl.attrs:
        has[np.fromiter(tl.attrs.keys(), dtype=np.int64, count=len(tl.attrs))] = True
    cost = []
    for g in gs:
        w = 1.0 + 1.75 * has[g.rows]
        cost.append(np.add.reduceat(w, np.arange(0, len(w), max_spans)) if len(w) else w)
    acc = np.cumsum(np.concatenate(cost)) if cost else np.zeros(0)
    return int(np.searchsorted(acc, acc[-1] / 2)) + 1 if len(acc) else 0


def line_count(gs: list[Group], max_spans: int) -> int:
    """How many lines ``timeline_requests`` writes for these groups."""
    return sum(-(-len(g.rows) // max_spans) for g in gs)


def reference_requests(tl: Timeline, max_spans: int = 512, scope_name: str = "gputrace.interop") -> Iterator[bytes]:
    """``timeline_requests`` row by row through span dicts and ``encode_request`` (slower): the
    definition the column-wise encoder (``write_block``) is tested against."""
    ids = span_ids(tl)
    shared_text: dict[tuple[int, tuple], str | None] = {}
    for g in groups(tl):
        for k in range(0, len(g.rows), max_spans):
            spans = _spans(tl, g.rows[k:k + max_spans], ids, g.fallback_trace, shared_text)
            yield encode_request(g.resource, spans, scope_name=scope_name)


#: Rows encoded at a time (their span texts are held until written: ~30 MB at 800 bytes a span).
BLOCK_ROWS = 32768


_COLUMNS = ("lane", "kind", "circuit", "batch", "nbytes", "gpu_start", "gpu_end", "trace", "parent",
            "parent_span_id", "start", "end", "status", "phase")


def _spans(tl: Timeline, rows: np.ndarray, span_ids: np.ndarray, fallback_trace: str,
           shared_text: dict) -> Iterator[dict]:
    """The span dicts of ``rows`` (one chunk: the columns are taken as Python lists once per chunk)."""
    c = tl.cols
    col = {k: c[k][rows].tolist() for k in _COLUMNS}
    sid = span_ids[rows].tolist()
    par = col["parent"]
    psid = span_ids[np.maximum(c["parent"][rows], 0)].tolist()
    lanes, phases, names, tids = tl.lanes, tl.phases, tl.names, tl.trace_ids
    attrs: Mapping[int, Mapping] = tl.attrs  # RowAttrs are Mappings, not dicts
    ntids = len(tids)
    for i, r in enumerate(rows.tolist()):
        lane = lanes[col["lane"][i]]
        a: dict = {"gputrace.lane": lane.name}
        if lane.device >= 0:
            a["gputrace.device"] = lane.device
        a["gputrace.kind"] = KIND_NAMES.get(col["kind"][i], "host")
        v = col["circuit"][i]
        if v >= 0:
            a["gputrace.circuit"] = v
        v = col["batch"][i]
        if v >= 0:
            a["gputrace.batch"] = v
        v = col["nbytes"][i]
        if v >= 0:
            a["gputrace.bytes"] = v
        g0, g1 = col["gpu_start"][i], col["gpu_end"][i]
        if g0 >= 0 and g1 >= 0:
            a["gputrace.gpu.start_ns"] = g0
            a["gputrace.gpu.end_ns"] = g1
        ra = attrs.get(r)
        text = None
        if type(ra) is RowAttrs:  # its overlay, then its shared dict (Mapping.items() is 4x slower)
            for k, v in zip(ra.keys_, ra.values_, strict=True):
                a.setdefault(k, v)
            shared = shared_dict_text(ra, shared_text)
            if shared is not None:
                text = attributes_json(a) + "," + shared if shared else attributes_json(a)
            ra = ra.shared
        if ra and text is None:
            for k, v in ra.items():
                a.setdefault(k, v)
        t = col["trace"][i]
        p = par[i]
        parent = psid[i] if p >= 0 else col["parent_span_id"][i]
        d = {
            "trace_id": tids[t] if 0 <= t < ntids and tids[t] else fallback_trace,
            "span_id": sid[i],
            "parent_span_id": parent or None,
            "name": names.get(r) or phases[col["phase"][i]],
            "start_ns": col["start"][i],
            "end_ns": col["end"][i],
            "status_code": max(0, col["status"][i]),  # -1 (a default-filled column) is unset
        }
        if text is None:
            d["attributes"] = a
        else:
            d["attributes_json"] = text
        yield d


def write_otlp_jsonl(tl: Timeline, path: str | Path, max_spans: int = 512, *, plan: Plan | None = None,
                     workers: int | None = None) -> int:
    """Write the Timeline to ``path`` as OTLP JSON Lines; returns the number of lines written.

    Written through ``gputrace.atomic_write`` (a private temporary file renamed over ``path``), so a
    reader never sees half a file, a failure leaves nothing behind and no symlink is followed.
    ``workers``: 2 encodes the second half of a big Timeline in a forked process
    (``write_split``); None decides by the CPUs free now; 1 writes in this process. The bytes are the same.
    """
    from gputrace.atomic_write import atomic_output
    from gputrace.timeline.formats.otlp_jsonl.write_split import split_workers, write_split

    plan = plan if plan is not None else (groups(tl), span_ids(tl))
    total = line_count(plan[0], max_spans)
    with atomic_output(path, "wb") as f:
        if (split_workers(tl.n) if workers is None else workers) > 1 and total > 1:
            write_split(f, Path(path), lambda r: timeline_requests(tl, max_spans, plan=plan, lines=r), total,
                        _middle_line(tl, plan[0], max_spans))
        else:
            for line in timeline_requests(tl, max_spans=max_spans, plan=plan):
                f.write(line)
                f.write(b"\n")
    return total

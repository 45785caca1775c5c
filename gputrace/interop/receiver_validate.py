"""What the OTLP receiver stores: only spans a strict read of the live file accepts.

``clean_request(d)`` takes a decoded ``ExportTraceServiceRequest`` (a dict: ``orjson.loads`` of an
OTLP/JSON body, or ``MessageToDict`` of a protobuf one with hex ids) and returns the JSON line to
store (without the spans that fail), the number kept and rejected, and the first problem, for the
OTLP partial-success answer. A request the strict reader accepts whole is stored as it is; otherwise,
per span, it applies the reader's own schema (``gputrace.otlp.schema.Span``:
integer times, string names, list attributes...) and the reader's column rules (times in int64,
end not before start, status code 0-2, attribute values nested at most ``MAX_VALUE_DEPTH``); a
resource with bad attributes costs its spans. The cleaned line is then read once more by the strict
reader (``TraceLoader``), so a rule not mirrored here still cannot put an unreadable line in the
file: that request is refused whole.

Raises ``ValueError`` (answered 400 / ``INVALID_ARGUMENT``) when the body is not a request at all, when
every span in it was rejected, or when it nests deeper than ``MAX_STORED_DEPTH`` anywhere (an ignored
extra key included: the stored line must be written back as JSON). Pure; safe from any thread.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from gputrace.otlp.decode import py_value
from gputrace.otlp.ids import STATUS_NAMES
from gputrace.otlp.schema import KeyValue, Span

__all__ = ["clean_request", "RequestRejected"]

_INT64_MAX = (1 << 63) - 1
_HEX = frozenset("0123456789abcdefABCDEF")
_ID_FIELDS = (("traceId", 16), ("spanId", 8), ("parentSpanId", 8))


class RequestRejected(ValueError):
    """Nothing in the request can be stored (a malformed body, or every span invalid)."""


def _span_problem(sp: Any) -> str | None:
    """Why the reader would refuse this span (field: reason), or None."""
    if not isinstance(sp, dict):
        return "not an object"
    for key, nbytes in _ID_FIELDS:
        v = sp.get(key)
        if key == "parentSpanId" and v in (None, ""):
            continue
        if not (isinstance(v, str) and len(v) == 2 * nbytes and _HEX.issuperset(v)):
            return f"{key}: expected {2 * nbytes} hex characters, got {v!r:.40}"
    try:
        s = msgspec.convert(sp, Span, strict=False)
    except msgspec.ValidationError as e:
        return str(e)
    for key, t in (("startTimeUnixNano", s.startTimeUnixNano), ("endTimeUnixNano", s.endTimeUnixNano)):
        if not 0 <= t <= _INT64_MAX:
            return f"{key}: {t} is outside 0..2^63-1 ns"
    if s.endTimeUnixNano < s.startTimeUnixNano:
        return "endTimeUnixNano: before startTimeUnixNano"
    code = s.status.code
    if isinstance(code, str):
        code = STATUS_NAMES.get(code, int(code) if code.lstrip("-").isdigit() else code)
    if not isinstance(code, int) or not 0 <= code <= 2:
        return f"status.code: expected 0, 1 or 2, got {s.status.code!r:.40}"
    try:
        for kv in s.attributes:
            py_value(kv.value)
    except ValueError as e:  # ValueTooDeep
        return f"attributes: {e}"
    return None


def _resource_problem(rs: dict) -> str | None:
    res = rs.get("resource") or {}
    if not isinstance(res, dict):
        return "resource: not an object"
    try:
        for kv in msgspec.convert(res.get("attributes") or [], list[KeyValue], strict=False):
            py_value(kv.value)
    except (msgspec.ValidationError, ValueError) as e:
        return f"resource.attributes: {e}"
    return None


def _count_spans(d: Any) -> int:
    """Spans in a request, after checking its containers (RequestRejected names the first bad one)."""
    if not isinstance(d, dict) or not isinstance(d.get("resourceSpans", []), list):
        raise RequestRejected("body is not an ExportTraceServiceRequest (no 'resourceSpans' list)")
    n = 0
    for i, rs in enumerate(d.get("resourceSpans", [])):
        if not isinstance(rs, dict):
            raise RequestRejected(f"resourceSpans[{i}] is not an object")
        for g in ("scopeSpans", "instrumentationLibrarySpans"):
            ss_list = rs.get(g, [])
            if not isinstance(ss_list, list):
                raise RequestRejected(f"resourceSpans[{i}].{g} is not a list")
            for j, ss in enumerate(ss_list):
                spans = ss.get("spans", []) if isinstance(ss, dict) else None
                if not isinstance(spans, list):
                    raise RequestRejected(f"resourceSpans[{i}].{g}[{j}].spans is not a list")
                n += len(spans)
    return n


def _all_ids_hex(d: dict) -> bool:
    """Every span's ids are hex of the right length (containers already checked by ``_count_spans``)."""
    for rs in d.get("resourceSpans", []):
        for g in ("scopeSpans", "instrumentationLibrarySpans"):
            for ss in rs.get(g, []):
                for sp in ss.get("spans", []):
                    if not isinstance(sp, dict):
                        return False
                    for key, nbytes in _ID_FIELDS:
                        v = sp.get(key)
                        if key == "parentSpanId" and v in (None, ""):
                            continue
                        if not (isinstance(v, str) and len(v) == 2 * nbytes and _HEX.issuperset(v)):
                            return False
    return True


def clean_request(d: Any) -> tuple[bytes, int, int, str]:
    """(line to store, spans kept, spans rejected, first problem or ''). See the module doc.

    Fast path: a request the strict reader accepts whole is stored as it came (one reader pass, no
    per-span Python work); only a request it refuses is split span by span."""
    total = _count_spans(d)
    line = _dumps(d)
    if total and _all_ids_hex(d):  # (the reader also takes base64 ids; the file format wants hex)
        try:
            _strict_read(line)
        except RequestRejected:
            pass
        else:
            return line, total, 0, ""
    kept = rejected = 0
    first = ""
    out_rs = []
    for i, rs in enumerate(d.get("resourceSpans", [])):
        groups = [(g, rs.get(g, [])) for g in ("scopeSpans", "instrumentationLibrarySpans") if g in rs]
        res_bad = _resource_problem(rs)
        new_groups = {}
        for g, ss_list in groups:
            new_ss = []
            for j, ss in enumerate(ss_list):
                good = []
                for k, sp in enumerate(ss.get("spans", [])):
                    why = res_bad or _span_problem(sp)
                    if why is None:
                        good.append(sp)
                    else:
                        rejected += 1
                        if not first:
                            first = f"resourceSpans[{i}].{g}[{j}].spans[{k}]: {why}" if not res_bad else \
                                f"resourceSpans[{i}].{why}"
                if good:
                    kept += len(good)
                    new_ss.append({**ss, "spans": good})
            if new_ss:
                new_groups[g] = new_ss
        if new_groups:
            out_rs.append({**{k: v for k, v in rs.items() if k not in ("scopeSpans", "instrumentationLibrarySpans")},
                           **new_groups})
    if rejected and not kept:
        raise RequestRejected(f"every span was rejected ({rejected}); first: {first}")
    line = _dumps({**d, "resourceSpans": out_rs})
    if kept:
        _strict_read(line)
    return line, kept, rejected, first


#: Deepest nesting a stored line may have: orjson writes at most 254 levels (its recursion limit), while
#: it reads up to 1,024; a request nested deeper than it can be written back is refused whole.
MAX_STORED_DEPTH = 254


def _dumps(d: Any) -> bytes:
    """The line to store; RequestRejected when the request (even an ignored extra key) nests too deep to
    be written as JSON again."""
    try:
        return orjson.dumps(d)
    except orjson.JSONEncodeError as e:  # (a TypeError: "Recursion limit reached")
        raise RequestRejected(f"request nested too deeply to store (at most {MAX_STORED_DEPTH} levels): {e}") from None


def _strict_read(line: bytes) -> None:
    """The reader's verdict on the line about to be stored; raises RequestRejected naming the field."""
    from gputrace.timeline.errors import TraceFormatError
    from gputrace.timeline.formats.otlp_jsonl._loader import TraceLoader

    loader = TraceLoader(lenient=False)
    try:
        loader.feed("request", 1, line, True)
        loader.flush()
    except TraceFormatError as e:
        raise RequestRejected(f"{e.field or 'request'}: {e.message}") from None
    except RecursionError:
        raise RequestRejected("request nested too deeply") from None

"""Lenient salvage of a line that the general decoder refused for a bad or missing field: the spans that are
valid are kept.

``_feed_salvage`` is ``TraceLoader._feed_salvage`` (bound in the class body, so ``self`` is the loader): it
parses the line with orjson, converts each resource's attributes and each span on its own with msgspec, reports
every part it drops in the loader's ``report``, and hands the rest to ``TraceLoader._add_request``. Called only
in lenient mode, from the loader's thread (a loader is not thread-safe); it raises nothing of its own: a line it
cannot take apart is counted as skipped with the decoder's error.
"""

from __future__ import annotations

import msgspec
import orjson

from gputrace.otlp.schema import KeyValue, Resource, ResourceSpans, ScopeSpans, Span, TraceRequest
from gputrace.timeline.errors import TraceFormatError
from gputrace.timeline.formats.otlp_jsonl._decode_errors import describe_msgspec_error


def _feed_salvage(self, path, line_no: int, line: bytes, err: TraceFormatError) -> None:
    """Lenient fallback for a line with a bad field: keep the spans that are valid."""
    try:
        obj = orjson.loads(line)
        rss = obj["resourceSpans"]
        assert isinstance(rss, list)
    except Exception:  # noqa: BLE001 - any failure here means the line is skipped
        self.report.add(err, line_skipped=True)
        return
    kept = dropped = 0
    good_rs = []
    for ri, rs in enumerate(rss):
        if not isinstance(rs, dict):
            dropped += 1
            continue
        res_obj = rs.get("resource") or {}
        try:
            kvs = msgspec.convert((res_obj or {}).get("attributes") or [], list[KeyValue], strict=False)
        except (msgspec.ValidationError, AttributeError):
            self.report.add(TraceFormatError(path, line_no, f"resourceSpans[{ri}].resource.attributes",
                                             "invalid resource attributes", "bad field"), line_skipped=False)
            continue
        good_groups = []
        for gname in ("scopeSpans", "instrumentationLibrarySpans"):
            for si, ss in enumerate(rs.get(gname) or []):
                spans = (ss or {}).get("spans") if isinstance(ss, dict) else None
                good = []
                for k, sp in enumerate(spans or []):
                    try:
                        good.append(msgspec.convert(sp, Span, strict=False))
                    except msgspec.ValidationError as e:
                        fld, msg, reason = describe_msgspec_error(e, orjson.dumps(sp))
                        base = f"resourceSpans[{ri}].{gname}[{si}].spans[{k}]"
                        where_ = f"{base}.{fld}" if fld else base
                        self.report.add(TraceFormatError(path, line_no, where_, msg, reason),
                                        line_skipped=False, spans=1)
                        dropped += 1
                kept += len(good)
                good_groups.append(good)
        good_rs.append((kvs, good_groups))
    if not kept:
        if not dropped:
            self.report.add(err, line_skipped=True)
        else:
            self.report.lines_skipped += 1
        return
    req = TraceRequest(resourceSpans=[
        ResourceSpans(resource=Resource(attributes=kvs), scopeSpans=[ScopeSpans(spans=g) for g in groups])
        for kvs, groups in good_rs
    ])
    self._add_request(path, line_no, req)

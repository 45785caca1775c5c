"""A protobuf ``ExportTraceServiceRequest`` as the OTLP JSON mapping the receiver stores.

:func:`request_to_dict` gives the request as a dict (camelCase, integer enums, 64-bit integers as strings, ids as
lowercase hex, as the OTLP file-exporter format wants); :func:`request_to_json` gives it as one JSON line and
its span count. Neither validates (the receiver stores ``receiver_validate.clean_request`` of the dict). Both
raise ValueError for an id of the wrong length. ``google.protobuf`` is imported on the first call, so importing
this module is cheap. Pure; any thread.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

from gputrace.otlp.ids import hex_id

__all__ = ["request_to_dict", "request_to_json"]


_ID_FIELDS = (("traceId", 16), ("spanId", 8), ("parentSpanId", 8))


def _b64_to_hex(v: str, nbytes: int) -> str:
    # hex_id checks the length (16-byte trace ids, 8-byte span ids) as the file spec wants.
    return hex_id(base64.b64decode(v), nbytes)


def request_to_json(req: Any) -> tuple[bytes, int]:
    """A protobuf ``ExportTraceServiceRequest`` -> (one OTLP JSON line without newline, span count),
    unvalidated (the receiver stores ``clean_request(request_to_dict(req))`` instead).
    Raises ValueError for an id of the wrong length."""
    d = request_to_dict(req)
    n = sum(len(ss.get("spans", ())) for rs in d.get("resourceSpans", ()) for ss in rs.get("scopeSpans", ()))
    return orjson.dumps(d), n


def request_to_dict(req: Any) -> dict:
    """A protobuf ``ExportTraceServiceRequest`` -> its OTLP JSON mapping as a dict.

    ``MessageToDict`` gives camelCase, integer enums and 64-bit ints as strings, as the OTLP JSON
    mapping wants, but base64 ids; ids (span, parent, link) are rewritten as lowercase hex.
    Raises ValueError for an id of the wrong length.
    """
    from google.protobuf.json_format import MessageToDict

    d = MessageToDict(req, use_integers_for_enums=True)
    for rs in d.get("resourceSpans", ()):
        for ss in rs.get("scopeSpans", ()):
            for span in ss.get("spans", ()):
                for key, nbytes in _ID_FIELDS:
                    if key in span:
                        span[key] = _b64_to_hex(span[key], nbytes)
                for link in span.get("links", ()):
                    for key, nbytes in _ID_FIELDS[:2]:
                        if key in link:
                            link[key] = _b64_to_hex(link[key], nbytes)
    return d

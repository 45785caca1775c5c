"""Old name of the OTLP JSON encoder, kept so that code written against it keeps working.

The codec is the package :mod:`gputrace.otlp` (``encode``, ``decode``, ``ids``, ``schema``); nothing in
gputrace imports this module (an import-linter contract). It re-exports the public names it had.
"""

from __future__ import annotations

from gputrace.otlp.decode import AnyValueError, decode_attributes, decode_value
from gputrace.otlp.encode import (
    REQUEST_TAIL,
    attr_value,
    encode_attributes,
    encode_request,
    encode_request_reference,
    encode_span,
    request_head,
    span_json,
)
from gputrace.otlp.ids import (
    SPAN_KIND_CLIENT,
    SPAN_KIND_CONSUMER,
    SPAN_KIND_INTERNAL,
    SPAN_KIND_PRODUCER,
    SPAN_KIND_SERVER,
    SPAN_KIND_UNSPECIFIED,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNSET,
    SpanDict,
    hex_id,
)

__all__ = [
    "SpanDict",
    "SPAN_KIND_INTERNAL",
    "STATUS_UNSET",
    "STATUS_OK",
    "STATUS_ERROR",
    "AnyValueError",
    "attr_value",
    "encode_attributes",
    "decode_value",
    "decode_attributes",
    "encode_span",
    "encode_request",
    "encode_request_reference",
    "request_head",
    "REQUEST_TAIL",
    "span_json",
    "hex_id",
    "SPAN_KIND_UNSPECIFIED",
    "SPAN_KIND_SERVER",
    "SPAN_KIND_CLIENT",
    "SPAN_KIND_PRODUCER",
    "SPAN_KIND_CONSUMER",
]

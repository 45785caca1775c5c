"""Typed msgspec schema of the OTLP JSON trace request, and the decoders built on it.

msgspec decodes straight into these Structs in C (about twice as fast as ``orjson.loads`` plus
walking dicts, and much smaller in memory), and its ``ValidationError`` names the JSON path of
a bad field, which the reader turns into a ``TraceFormatError``.

Two shapes of the same request:

* the **general** schema (``TraceRequest`` ... ``AnyValue``; ``request_decoder``, ``span_decoder``):
  every field decoded and validated;
* the **lean** schema (``LeanRequest`` ... ``LeanSpan``; ``lean_decoder``): the same names and
  defaults, but each span's ``attributes`` and each ``resource`` kept as raw JSON text, for the
  reader's fast path (``gputrace.timeline.formats.otlp_jsonl._fast`` parses the attributes of many spans at once;
  ``resource_decoder`` decodes each distinct resource once). A line the lean decoder refuses is
  read by the general one, so only speed depends on the difference.

Tolerance (``strict=False``): 64-bit integers may be JSON strings (as the spec says) or numbers;
``doubleValue`` may be "NaN"/"Infinity"; ``kind`` and ``status.code`` may be integers or enum
names (protobuf JSON allows both; the lean schema refuses names). Unknown fields (``flags``,
``droppedAttributesCount``, ``traceState``, ``events``, ``links``, ``schemaUrl``...) are ignored. The
pre-1.0 OTLP name ``instrumentationLibrarySpans`` is accepted alongside ``scopeSpans``.

The shared defaults (``NO_STATUS``, ``NO_SCOPE``, ``NO_RESOURCE``, ``EMPTY_VALUE``) are single
objects: a reader may test ``span.status is NO_STATUS``. Decoders are thread-safe.
"""

from __future__ import annotations

import msgspec

from gputrace.otlp.ids import STATUS_NAMES

__all__ = [
    "AnyValue", "ArrayValue", "KeyValueList", "KeyValue", "Status", "Span", "Scope", "ScopeSpans", "LibrarySpans",
    "Resource", "ResourceSpans", "TraceRequest",
    "LeanSpan", "LeanScopeSpans", "LeanLibrarySpans", "LeanResourceSpans", "LeanRequest",
    "EMPTY_VALUE", "NO_STATUS", "NO_SCOPE", "NO_RESOURCE", "STATUS_NAMES",
    "request_decoder", "span_decoder", "lean_decoder", "resource_decoder", "key_value_decoder",
]


class ArrayValue(msgspec.Struct, gc=False):
    values: list[AnyValue] = []


class KeyValueList(msgspec.Struct, gc=False):
    values: list[KeyValue] = []


class AnyValue(msgspec.Struct, frozen=True, gc=False):
    stringValue: str | None = None
    intValue: int | None = None
    doubleValue: float | None = None
    boolValue: bool | None = None
    arrayValue: ArrayValue | None = None
    kvlistValue: KeyValueList | None = None
    bytesValue: str | None = None


#: The empty ``AnyValue`` (a ``KeyValue`` without ``value``).
EMPTY_VALUE = AnyValue()


class KeyValue(msgspec.Struct, gc=False):
    key: str
    value: AnyValue = EMPTY_VALUE


class Status(msgspec.Struct, frozen=True, gc=False):
    code: int | str = 0
    message: str = ""


#: The default ``Status`` of a span without one (UNSET, no message).
NO_STATUS = Status()


class Span(msgspec.Struct, gc=False):
    traceId: str
    spanId: str
    name: str
    startTimeUnixNano: int
    endTimeUnixNano: int
    parentSpanId: str = ""
    kind: int | str = 0
    attributes: list[KeyValue] = []
    status: Status = NO_STATUS


class Scope(msgspec.Struct, frozen=True, gc=False):
    name: str = ""
    version: str = ""


#: The default ``Scope`` of a scope-spans group without one.
NO_SCOPE = Scope()


class ScopeSpans(msgspec.Struct, gc=False):
    spans: list[Span] = []
    scope: Scope = NO_SCOPE


class LibrarySpans(msgspec.Struct, gc=False):  # pre-1.0 OTLP (instrumentationLibrarySpans)
    spans: list[Span] = []
    instrumentationLibrary: Scope = NO_SCOPE


class Resource(msgspec.Struct, frozen=True, gc=False):
    attributes: list[KeyValue] = []


#: The default ``Resource`` of a resource-spans group without one.
NO_RESOURCE = Resource()


class ResourceSpans(msgspec.Struct, gc=False):
    resource: Resource = NO_RESOURCE
    scopeSpans: list[ScopeSpans] = []
    instrumentationLibrarySpans: list[LibrarySpans] = []


class TraceRequest(msgspec.Struct, gc=False):
    resourceSpans: list[ResourceSpans]  # required: a JSON object without it is not an OTLP request


# ---- lean schema: attributes and resources kept raw ---------------------------------------------
_EMPTY_RAW = msgspec.Raw(b"[]")
_EMPTY_RESOURCE_RAW = msgspec.Raw(b"{}")  # decodes to ``Resource()``, the general default


class LeanSpan(msgspec.Struct, gc=False):
    """``Span`` with ``attributes`` kept as raw JSON (same names, same defaults)."""

    traceId: str
    spanId: str
    name: str
    startTimeUnixNano: int
    endTimeUnixNano: int
    parentSpanId: str = ""
    # Stricter than the general schema (``Union[int, str]``; about 10 % of the decode): a line
    # with an enum-name kind fails the lean decode and is read by the general decoder.
    kind: int = 0
    attributes: msgspec.Raw = _EMPTY_RAW
    status: Status = NO_STATUS


class LeanScopeSpans(msgspec.Struct, gc=False):
    spans: list[LeanSpan] = []
    scope: Scope = NO_SCOPE


class LeanLibrarySpans(msgspec.Struct, gc=False):
    spans: list[LeanSpan] = []
    instrumentationLibrary: Scope = NO_SCOPE


class LeanResourceSpans(msgspec.Struct, gc=False):
    # Kept raw: a reader decodes each distinct resource once (``resource_decoder``).
    resource: msgspec.Raw = _EMPTY_RESOURCE_RAW
    scopeSpans: list[LeanScopeSpans] = []
    instrumentationLibrarySpans: list[LeanLibrarySpans] = []


class LeanRequest(msgspec.Struct, gc=False):
    resourceSpans: list[LeanResourceSpans]


#: Decodes one line (bytes) into a ``TraceRequest``. Raises msgspec.DecodeError / ValidationError.
request_decoder = msgspec.json.Decoder(TraceRequest, strict=False)

#: Decodes one span object (used by the lenient per-span fallback).
span_decoder = msgspec.json.Decoder(Span, strict=False)

#: Decodes one line into a ``LeanRequest``. Not the general schema: attributes and resources are
#: not validated here, and an enum-name ``kind`` is refused; read any line it refuses with
#: ``request_decoder``.
lean_decoder = msgspec.json.Decoder(LeanRequest, strict=False)

#: Decodes a raw ``resource`` object exactly as ``request_decoder`` decodes it inside a request.
resource_decoder = msgspec.json.Decoder(Resource, strict=False)

#: Decodes one ``KeyValue`` object, as inside a request.
key_value_decoder = msgspec.json.Decoder(KeyValue, strict=False)

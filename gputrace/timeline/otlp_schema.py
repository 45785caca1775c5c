"""Typed msgspec schema of the OTLP JSON trace request, for fast decoding of trace files.

msgspec decodes straight into these Structs in C (about twice as fast as ``orjson.loads`` plus
walking dicts, and much smaller in memory), and its ``ValidationError`` names the JSON path of
a bad field, which the reader turns into a ``TraceFormatError``.

Tolerance (``strict=False``): 64-bit integers may be JSON strings (as the spec says) or numbers;
``doubleValue`` may be "NaN"/"Infinity"; ``kind`` and ``status.code`` may be integers or enum
names (protobuf JSON allows both). Unknown fields (``flags``, ``droppedAttributesCount``,
``traceState``, ``events``, ``links``, ``schemaUrl``...) are ignored. The pre-1.0 OTLP name
``instrumentationLibrarySpans`` is accepted alongside ``scopeSpans``.
"""

from __future__ import annotations

from typing import Any

import msgspec


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


_EMPTY = AnyValue()


class KeyValue(msgspec.Struct, gc=False):
    key: str
    value: AnyValue = _EMPTY


class Status(msgspec.Struct, frozen=True, gc=False):
    code: int | str = 0
    message: str = ""


_NO_STATUS = Status()


class Span(msgspec.Struct, gc=False):
    traceId: str
    spanId: str
    name: str
    startTimeUnixNano: int
    endTimeUnixNano: int
    parentSpanId: str = ""
    kind: int | str = 0
    attributes: list[KeyValue] = []
    status: Status = _NO_STATUS


class Scope(msgspec.Struct, frozen=True, gc=False):
    name: str = ""
    version: str = ""


_NO_SCOPE = Scope()


class ScopeSpans(msgspec.Struct, gc=False):
    spans: list[Span] = []
    scope: Scope = _NO_SCOPE


class LibrarySpans(msgspec.Struct, gc=False):  # pre-1.0 OTLP (instrumentationLibrarySpans)
    spans: list[Span] = []
    instrumentationLibrary: Scope = _NO_SCOPE


class Resource(msgspec.Struct, frozen=True, gc=False):
    attributes: list[KeyValue] = []


_NO_RESOURCE = Resource()


class ResourceSpans(msgspec.Struct, gc=False):
    resource: Resource = _NO_RESOURCE
    scopeSpans: list[ScopeSpans] = []
    instrumentationLibrarySpans: list[LibrarySpans] = []


class TraceRequest(msgspec.Struct, gc=False):
    resourceSpans: list[ResourceSpans]  # required: a JSON object without it is not an OTLP request


STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}

#: Decodes one line (bytes) into a ``TraceRequest``. Thread-safe (msgspec decoders are).
request_decoder = msgspec.json.Decoder(TraceRequest, strict=False)

#: Decodes one span object (used by the lenient per-span fallback).
span_decoder = msgspec.json.Decoder(Span, strict=False)


#: Deepest nesting of array/kvlist attribute values read (OTLP writers nest a few levels; a
#: hostile line nesting thousands would otherwise exhaust the stack).
MAX_VALUE_DEPTH = 64


class ValueTooDeep(ValueError):
    """An attribute value nested deeper than ``MAX_VALUE_DEPTH`` levels."""


def py_value(v: AnyValue, _depth: int = 0) -> Any:
    """AnyValue Struct -> Python value (str, int, float, bool, bytes, list, dict or None).
    Raises ``ValueTooDeep`` for arrays/kvlists nested deeper than ``MAX_VALUE_DEPTH``."""
    s = v.stringValue
    if s is not None:
        return s
    if v.intValue is not None:
        return v.intValue
    if v.doubleValue is not None:
        return v.doubleValue
    if v.boolValue is not None:
        return v.boolValue
    if v.arrayValue is not None or v.kvlistValue is not None:
        if _depth >= MAX_VALUE_DEPTH:
            raise ValueTooDeep(f"attribute value nested deeper than {MAX_VALUE_DEPTH} levels")
        if v.arrayValue is not None:
            return [py_value(x, _depth + 1) for x in v.arrayValue.values]
        if v.kvlistValue is not None:
            return {kv.key: py_value(kv.value, _depth + 1) for kv in v.kvlistValue.values}
    if v.bytesValue is not None:
        import base64

        try:
            return base64.b64decode(v.bytesValue)
        except ValueError:
            return v.bytesValue
    return None

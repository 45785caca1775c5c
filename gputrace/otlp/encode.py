"""OTLP JSON encoding of trace requests: one ``ExportTraceServiceRequest`` per line.

This is the encoding the OpenTelemetry file-exporter spec and the OTLP/JSON mapping define:

* lowerCamelCase keys (``resourceSpans``, ``scopeSpans``, ``parentSpanId``, ...);
* ``traceId`` / ``spanId`` / ``parentSpanId`` as lowercase hex (32 / 16 / 16 characters), not base64;
* enums (``kind``, ``status.code``) as integers;
* 64-bit integers (``startTimeUnixNano``, ``endTimeUnixNano``, ``intValue``) as decimal strings;
* attribute values as ``AnyValue``: ``{"stringValue": s}``, ``{"intValue": "7"}``, ``{"doubleValue": 1.5}``,
  ``{"boolValue": true}``, ``{"arrayValue": {"values": [...]}}``, ``{"kvlistValue": {"values": [...]}}``,
  ``{"bytesValue": base64}``.

Fields with default values (empty ``parentSpanId``, ``status`` UNSET without message) are omitted, as
protobuf JSON printers do. ``encode_request`` returns one line without the trailing newline; a writer
appends ``b"\\n"``.

``encode_request`` writes the JSON text with f-strings and cached fragments (``encode_request_reference``
builds dicts for orjson: the executable definition it is tested against). The recorder's file sink does
not go through span dicts at all: ``gputrace.trace.sinks.phase_json`` writes the same text straight
from finished phases, reusing ``attributes_json`` and ``json_string``. ``attr_value`` dispatches on
exact types before falling back to ``isinstance`` checks. Everything here is pure and thread-safe.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from gputrace import __version__ as _gputrace_version
from gputrace.otlp.ids import SPAN_KIND_INTERNAL, STATUS_UNSET, hex_id

__all__ = [
    "attr_value",
    "attributes_json",
    "encode_attributes",
    "encode_span",
    "encode_request",
    "encode_request_reference",
    "json_string",
    "request_head",
    "REQUEST_TAIL",
    "span_json",
]


def _double(v: float) -> Any:
    # Protobuf JSON spells non-finite doubles as strings; orjson would write null.
    if math.isfinite(v):
        return v
    if math.isnan(v):
        return "NaN"
    return "Infinity" if v > 0 else "-Infinity"


def attr_value(v: Any) -> dict:
    """Python value -> OTLP ``AnyValue`` dict.

    str, bool, int (as a decimal string), float, bytes (base64), list/tuple (arrayValue) and
    Mapping (kvlistValue) map directly; numpy scalars map through ``.item()``; None becomes an
    empty AnyValue ``{}``; anything else is written as its ``str()``.
    """
    t = type(v)
    if t is str:
        return {"stringValue": v}
    if t is int:
        return {"intValue": str(v)}
    if t is float:
        return {"doubleValue": _double(v)}
    if t is bool:
        return {"boolValue": v}
    if v is None:
        return {}
    if isinstance(v, bool):
        return {"boolValue": bool(v)}
    if isinstance(v, int):
        return {"intValue": str(int(v))}
    if isinstance(v, float):
        return {"doubleValue": _double(float(v))}
    if isinstance(v, str):
        return {"stringValue": str(v)}
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"bytesValue": base64.b64encode(bytes(v)).decode("ascii")}
    if isinstance(v, (list, tuple)):
        return {"arrayValue": {"values": [attr_value(x) for x in v]}}
    if isinstance(v, Mapping):
        return {"kvlistValue": {"values": [{"key": str(k), "value": attr_value(x)} for k, x in v.items()]}}
    item = getattr(v, "item", None)  # numpy scalar
    if item is not None and callable(item):
        try:
            return attr_value(item())
        except (TypeError, ValueError):
            pass
    return {"stringValue": str(v)}


def encode_attributes(attrs: Mapping[str, Any] | None) -> list[dict]:
    """Mapping -> list of OTLP ``KeyValue`` dicts (insertion order kept)."""
    if not attrs:
        return []
    return [{"key": k, "value": attr_value(v)} for k, v in attrs.items()]



def _status(code: int, msg: str) -> dict:
    """OTLP ``Status`` dict: default fields (code UNSET, empty message) left out, as protobuf JSON does."""
    st: dict = {}
    if msg:
        st["message"] = msg
    if code:
        st["code"] = int(code)
    return st


def encode_span(s: Mapping[str, Any]) -> dict:
    """One span dict (``SpanDict`` keys) -> OTLP JSON ``Span`` dict. Raises ValueError on bad ids."""
    d: dict[str, Any] = {
        "traceId": hex_id(s["trace_id"], 16),
        "spanId": hex_id(s["span_id"], 8),
    }
    p = s.get("parent_span_id")
    if p:
        d["parentSpanId"] = hex_id(p, 8)
    d["name"] = s["name"]
    d["kind"] = s.get("kind", SPAN_KIND_INTERNAL)
    d["startTimeUnixNano"] = str(int(s["start_ns"]))
    d["endTimeUnixNano"] = str(int(s["end_ns"]))
    a = s.get("attributes")
    if a:
        d["attributes"] = [{"key": k, "value": attr_value(v)} for k, v in a.items()]
    elif s.get("attributes_json"):
        d["attributes"] = orjson.loads("[" + s["attributes_json"] + "]")
    code = s.get("status_code", STATUS_UNSET)
    msg = s.get("status_message", "")
    if code or msg:
        d["status"] = _status(code, msg)
    return d


# ---- fast path -------------------------------------------------------------------------------
# encode_request is called by the file sink's background thread for every span, so it writes the
# JSON text directly with f-strings (faster than building a dict per field for orjson) and caches
# the pieces that repeat: attribute keys, string-valued attributes, span names, trace ids.
# encode_span + orjson.dumps is the reference; tests check both give identical bytes.
# Caches are plain dicts (atomic under the GIL) bounded by clearing when they grow past _CACHE_MAX.
_CACHE_MAX = 1 << 16
_json_str_cache: dict[str, str] = {}
_str_kv_cache: dict[tuple[str, str], str] = {}
_trace_hex_cache: dict[Any, str] = {}
_list_kv_cache: dict[tuple[str, tuple], str] = {}  # short lists of exact ints -> their key/value text
_int_kv_cache: dict[tuple[str, int], str] = {}  # looked up only for exact ints (True == 1 would match)
_SMALL_INT = 1 << 40


def json_string(s: str) -> str:
    """JSON string literal for ``s`` (cached; TypeError if ``s`` is not a str). Thread-safe."""
    b = _json_str_cache.get(s)
    if b is None:
        if type(s) is not str:
            raise TypeError(f"expected str, got {type(s).__name__}")
        b = orjson.dumps(s).decode()
        if len(_json_str_cache) >= _CACHE_MAX:
            _json_str_cache.clear()
        _json_str_cache[s] = b
    return b


def _str_kv(k: str, v: str) -> str:
    b = f'{{"key":{json_string(k)},"value":{{"stringValue":{orjson.dumps(v).decode()}}}}}'
    if len(_str_kv_cache) >= _CACHE_MAX:
        _str_kv_cache.clear()
    _str_kv_cache[(k, v)] = b
    return b


def attributes_json(a: Mapping[str, Any]) -> str:
    """The text of an OTLP ``attributes`` array's elements (without the brackets) for a mapping, as
    :func:`encode_request` writes it. Thread-safe."""
    # Inlined type dispatch: this loop is about half of the encoder's time. (Cached %-templates per
    # key/type set were tried and measured slower: building and hashing the cache key costs more.)
    out: list[str] = []
    app = out.append
    jcache = _json_str_cache
    scache = _str_kv_cache
    icache = _int_kv_cache
    acache = _list_kv_cache
    for k, v in a.items():
        t = type(v)
        if t is str:
            b = scache.get((k, v))
            app(b if b is not None else _str_kv(k, v))
        elif t is int:
            if -_SMALL_INT < v < _SMALL_INT:  # ids, devices, sizes repeat; timestamps do not
                b = icache.get((k, v))
                if b is None:
                    b = f'{{"key":{jcache.get(k) or json_string(k)},"value":{{"intValue":"{v}"}}}}'
                    if len(icache) >= _CACHE_MAX:
                        icache.clear()
                    icache[(k, v)] = b
                app(b)
            else:
                jk = jcache.get(k) or json_string(k)
                app(f'{{"key":{jk},"value":{{"intValue":"{v}"}}}}')
        elif t is bool:
            app(f'{{"key":{json_string(k)},"value":{{"boolValue":{"true" if v else "false"}}}}}')
        elif t is list and len(v) <= 4 and all(type(x) is int for x in v):
            # short int lists repeat (a kernel's grid and block): cached by value like strings and small ints
            # (exact ints only: True == 1 and 1.0 == 1 would share a key and encode differently)
            key = (k, tuple(v))
            b = acache.get(key)
            if b is None:
                b = orjson.dumps({"key": k, "value": attr_value(v)}).decode()
                if len(acache) >= _CACHE_MAX:
                    acache.clear()
                acache[key] = b
            app(b)
        else:
            app(orjson.dumps({"key": k, "value": attr_value(v)}).decode())
    return ",".join(out)


def _trace_hex(v: Any) -> str:
    try:
        b = _trace_hex_cache.get(v)
    except TypeError:  # unhashable (bytearray, memoryview)
        return hex_id(v, 16)
    if b is None:
        b = hex_id(v, 16)
        if len(_trace_hex_cache) >= 4096:
            _trace_hex_cache.clear()
        _trace_hex_cache[v] = b
    return b


def _span_json(s: Mapping[str, Any]) -> str:
    tv = s["trace_id"]
    try:
        tid = _trace_hex_cache.get(tv)  # (inline: a call costs ~0.2 us on the CI box)
    except TypeError:  # unhashable (bytearray, memoryview)
        tid = None
    if tid is None:
        tid = _trace_hex(tv)
    v = s["span_id"]
    # int.to_bytes(...).hex() is faster than f"{v:016x}" (130 vs 220 ns on the CI box)
    sid = v.to_bytes(8, "big").hex() if type(v) is int and 0 < v < 0x10000000000000000 else hex_id(v, 8)
    if not sid:
        raise ValueError("span_id must not be empty or zero")
    p = s.get("parent_span_id")
    if p:
        if type(p) is int and 0 < p < 0x10000000000000000:
            parent = f',"parentSpanId":"{p.to_bytes(8, "big").hex()}"'
        else:
            parent = f',"parentSpanId":"{hex_id(p, 8)}"'
    else:
        parent = ""
    start, end = s["start_ns"], s["end_ns"]
    if type(start) is not int:
        start = int(start)
    if type(end) is not int:
        end = int(end)
    a = s.get("attributes")
    if a:
        attrs = f',"attributes":[{attributes_json(a)}]'
    else:  # a writer that encodes repeated attribute sets once gives their text (``attributes_json``)
        raw = s.get("attributes_json")
        attrs = f',"attributes":[{raw}]' if raw else ""
    code = s.get("status_code", STATUS_UNSET)
    msg = s.get("status_message", "")
    if code or msg:
        status = f',"status":{orjson.dumps(_status(code, msg)).decode()}'
    else:
        status = ""
    name = s["name"]
    jn = _json_str_cache.get(name) or json_string(name)
    kind = s.get("kind", SPAN_KIND_INTERNAL)
    if type(kind) is not int:
        kind = int(kind)
    return (
        f'{{"traceId":"{tid}","spanId":"{sid}"{parent},"name":{jn},"kind":{kind},'
        f'"startTimeUnixNano":"{start}","endTimeUnixNano":"{end}"{attrs}{status}}}'
    )


def span_json(s: Mapping[str, Any]) -> str:
    """One span dict (``SpanDict`` keys) -> the text of its OTLP JSON ``Span`` object, as it appears
    inside :func:`encode_request`'s output. Raises ValueError for malformed ids, TypeError for a non-str
    name. Thread-safe."""
    return _span_json(s)


def encode_request(
    resource: Mapping[str, Any],
    spans: Iterable[Mapping[str, Any]],
    scope_name: str = "gputrace",
    scope_version: str = _gputrace_version,
) -> bytes:
    """One ``ExportTraceServiceRequest`` (one resource, one scope) as one JSON line, no newline.

    ``resource`` is a plain attribute mapping (``{"service.name": "prover", ...}``); ``spans`` are
    ``SpanDict`` mappings. The bytes equal ``orjson.dumps`` of the dict built by ``encode_span``
    (tests check this). Raises ValueError for malformed ids, TypeError for a non-str name.
    Thread-safe.
    """
    head = request_head(resource, scope_name, scope_version)
    return (head + ",".join([_span_json(s) for s in spans]) + REQUEST_TAIL).encode()


#: What follows the last span of a request written as ``request_head(...) + spans + REQUEST_TAIL``.
REQUEST_TAIL = "]}]}]}"


def request_head(
    resource: Mapping[str, Any], scope_name: str = "gputrace", scope_version: str = _gputrace_version
) -> str:
    """The text of a request up to its first span: ``head + ",".join(span texts) + REQUEST_TAIL`` is what
    :func:`encode_request` returns (decoded). Writers with a fixed resource compute it once."""
    scope: dict = {"name": scope_name}
    if scope_version:
        scope["version"] = scope_version
    res = orjson.dumps({"attributes": encode_attributes(resource)}).decode()
    sc = orjson.dumps(scope).decode()
    return f'{{"resourceSpans":[{{"resource":{res},"scopeSpans":[{{"scope":{sc},"spans":['


def encode_request_reference(
    resource: Mapping[str, Any],
    spans: Iterable[Mapping[str, Any]],
    scope_name: str = "gputrace",
    scope_version: str = _gputrace_version,
) -> bytes:
    """Same output as :func:`encode_request`, built as dicts and serialised by orjson (slower; the
    executable definition the fast path is tested against)."""
    scope: dict = {"name": scope_name}
    if scope_version:
        scope["version"] = scope_version
    req = {
        "resourceSpans": [
            {
                "resource": {"attributes": encode_attributes(resource)},
                "scopeSpans": [{"scope": scope, "spans": [encode_span(s) for s in spans]}],
            }
        ]
    }
    return orjson.dumps(req)

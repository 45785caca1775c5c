"""The OTLP codec: OTLP/JSON trace requests, one definition shared by the recorder, the readers and the receiver.

Modules (each importable on its own; import public names only):

* :mod:`gputrace.otlp.ids`: span kinds, status codes, the ``SpanDict`` shape a writer takes, trace and
  span ids both ways (``hex_id`` writes them, ``parse_id`` reads hex or old base64 ids);
* :mod:`gputrace.otlp.encode`: span dicts -> one ``ExportTraceServiceRequest`` JSON line (the recorder's
  file sink and ``timeline.formats.otlp_jsonl.write``);
* :mod:`gputrace.otlp.schema`: msgspec Structs of a request (general, and lean with raw attributes)
  and their decoders (the readers and the receiver's validation);
* :mod:`gputrace.otlp.decode`: ``AnyValue`` -> Python values, from JSON objects or from the Structs.

The names below are also available from the package itself (``from gputrace.otlp import encode_request``),
loaded on first use: importing ``gputrace.otlp.encode`` alone (the recorder) does not import msgspec.
The package imports nothing else of gputrace (an import-linter contract).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, for type checkers (at run time __getattr__ loads them)
    from gputrace.otlp.decode import (
        MAX_VALUE_DEPTH as MAX_VALUE_DEPTH,
        AnyValueError as AnyValueError,
        ValueTooDeep as ValueTooDeep,
        decode_attributes as decode_attributes,
        decode_value as decode_value,
        py_value as py_value,
    )
    from gputrace.otlp.encode import (
        REQUEST_TAIL as REQUEST_TAIL,
        attr_value as attr_value,
        attributes_json as attributes_json,
        encode_attributes as encode_attributes,
        encode_request as encode_request,
        encode_request_reference as encode_request_reference,
        encode_span as encode_span,
        json_string as json_string,
        request_head as request_head,
        span_json as span_json,
    )
    from gputrace.otlp.ids import (
        SPAN_KIND_CLIENT as SPAN_KIND_CLIENT,
        SPAN_KIND_CONSUMER as SPAN_KIND_CONSUMER,
        SPAN_KIND_INTERNAL as SPAN_KIND_INTERNAL,
        SPAN_KIND_PRODUCER as SPAN_KIND_PRODUCER,
        SPAN_KIND_SERVER as SPAN_KIND_SERVER,
        SPAN_KIND_UNSPECIFIED as SPAN_KIND_UNSPECIFIED,
        STATUS_ERROR as STATUS_ERROR,
        STATUS_NAMES as STATUS_NAMES,
        STATUS_OK as STATUS_OK,
        STATUS_UNSET as STATUS_UNSET,
        SpanDict as SpanDict,
        hex_id as hex_id,
        parse_id as parse_id,
    )
    from gputrace.otlp.schema import (
        lean_decoder as lean_decoder,
        request_decoder as request_decoder,
        resource_decoder as resource_decoder,
        span_decoder as span_decoder,
    )

#: Public name -> the module of the package that defines it.
_HOME: dict[str, str] = {
    "SPAN_KIND_UNSPECIFIED": "ids",
    "SPAN_KIND_INTERNAL": "ids",
    "SPAN_KIND_SERVER": "ids",
    "SPAN_KIND_CLIENT": "ids",
    "SPAN_KIND_PRODUCER": "ids",
    "SPAN_KIND_CONSUMER": "ids",
    "STATUS_UNSET": "ids",
    "STATUS_OK": "ids",
    "STATUS_ERROR": "ids",
    "STATUS_NAMES": "ids",
    "SpanDict": "ids",
    "hex_id": "ids",
    "parse_id": "ids",
    "REQUEST_TAIL": "encode",
    "attr_value": "encode",
    "attributes_json": "encode",
    "encode_attributes": "encode",
    "encode_request": "encode",
    "encode_request_reference": "encode",
    "encode_span": "encode",
    "json_string": "encode",
    "request_head": "encode",
    "span_json": "encode",
    "AnyValueError": "decode",
    "decode_attributes": "decode",
    "decode_value": "decode",
    "py_value": "decode",
    "MAX_VALUE_DEPTH": "decode",
    "ValueTooDeep": "decode",
    "request_decoder": "schema",
    "span_decoder": "schema",
    "lean_decoder": "schema",
    "resource_decoder": "schema",
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (PEP 562)."""
    mod = _HOME.get(name)
    if mod is None:
        raise AttributeError(f"module 'gputrace.otlp' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"gputrace.otlp.{mod}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

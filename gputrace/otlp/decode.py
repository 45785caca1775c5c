"""OTLP JSON ``AnyValue`` / ``KeyValue`` -> Python values: the inverse of :func:`gputrace.otlp.encode.attr_value`.

Two inputs: plain JSON objects (``decode_value``, ``decode_attributes``: strict, errors are
:class:`AnyValueError` naming the offending sub-field) and the typed Structs of
:mod:`gputrace.otlp.schema` (``py_value``: already validated by msgspec, only the nesting depth is
checked). Pure and thread-safe.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the dict decoders need no msgspec; py_value only reads the Structs' fields
    from gputrace.otlp.schema import AnyValue

__all__ = ["AnyValueError", "decode_value", "decode_attributes", "py_value", "MAX_VALUE_DEPTH", "ValueTooDeep"]


class AnyValueError(ValueError):
    """An ``AnyValue`` that does not follow the OTLP JSON mapping; ``field`` is the sub-path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _int_of(x: Any, field: str) -> int:
    if type(x) is int:
        return x
    if type(x) is str:
        try:
            return int(x)
        except ValueError:
            pass
    if type(x) is float and x.is_integer():  # some writers emit 3.0 for an int64
        return int(x)
    raise AnyValueError(field, f"expected integer string, got {x!r}")


def _double_of(x: Any, field: str) -> float:
    if type(x) is float or type(x) is int:
        return float(x)
    if type(x) is str:
        if x in ("NaN", "Infinity", "-Infinity"):
            return float(x.replace("Infinity", "inf"))
        try:
            return float(x)
        except ValueError:
            pass
    raise AnyValueError(field, f"expected number, got {x!r}")


def decode_value(v: Any, field: str = "value") -> Any:
    """OTLP ``AnyValue`` dict -> Python value (inverse of :func:`attr_value`).

    intValue -> int (accepts a string or a JSON number), doubleValue -> float, bytesValue -> bytes,
    arrayValue -> list, kvlistValue -> dict, empty AnyValue -> None. Raises ``AnyValueError`` with the
    offending sub-field for anything else.
    """
    if type(v) is not dict:
        raise AnyValueError(field, f"expected AnyValue object, got {_short(v)}")
    if not v:
        return None
    if len(v) != 1:
        raise AnyValueError(field, f"expected exactly one of stringValue/intValue/... keys, got {sorted(v)}")
    (k, x), = v.items()
    if k == "stringValue":
        if type(x) is not str:
            raise AnyValueError(f"{field}.stringValue", f"expected string, got {_short(x)}")
        return x
    if k == "intValue":
        return _int_of(x, f"{field}.intValue")
    if k == "doubleValue":
        return _double_of(x, f"{field}.doubleValue")
    if k == "boolValue":
        if type(x) is not bool:
            raise AnyValueError(f"{field}.boolValue", f"expected true/false, got {_short(x)}")
        return x
    if k == "arrayValue":
        vals = x.get("values", []) if type(x) is dict else None
        if type(vals) is not list:
            raise AnyValueError(f"{field}.arrayValue", f"expected {{'values': [...]}}, got {_short(x)}")
        return [decode_value(e, f"{field}.arrayValue.values[{i}]") for i, e in enumerate(vals)]
    if k == "kvlistValue":
        vals = x.get("values", []) if type(x) is dict else None
        if type(vals) is not list:
            raise AnyValueError(f"{field}.kvlistValue", f"expected {{'values': [...]}}, got {_short(x)}")
        return decode_attributes(vals, f"{field}.kvlistValue.values")
    if k == "bytesValue":
        if type(x) is not str:
            raise AnyValueError(f"{field}.bytesValue", f"expected base64 string, got {_short(x)}")
        try:
            return base64.b64decode(x, validate=True)
        except ValueError:
            raise AnyValueError(f"{field}.bytesValue", f"expected base64 string, got {_short(x)}") from None
    raise AnyValueError(field, f"unknown AnyValue key {k!r}")


def decode_attributes(kvs: Any, field: str = "attributes") -> dict:
    """List of OTLP ``KeyValue`` dicts -> ``{key: python value}``. Raises ``AnyValueError``."""
    if kvs is None:
        return {}
    if type(kvs) is not list:
        raise AnyValueError(field, f"expected list of key/value objects, got {_short(kvs)}")
    out = {}
    for i, kv in enumerate(kvs):
        if type(kv) is not dict or type(kv.get("key")) is not str:
            raise AnyValueError(f"{field}[{i}]", f"expected {{'key': str, 'value': AnyValue}}, got {_short(kv)}")
        out[kv["key"]] = decode_value(kv.get("value", {}), f"{field}[{i}].value")
    return out


def _short(x: Any, n: int = 40) -> str:
    r = repr(x)
    return r if len(r) <= n else r[: n - 3] + "..."


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
        try:
            return base64.b64decode(v.bytesValue)
        except ValueError:
            return v.bytesValue
    return None

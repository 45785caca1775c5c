"""msgspec decode errors -> (field path, message, reason) for ``TraceFormatError``.

Pure functions; thread-safe.
"""

from __future__ import annotations

import re

import msgspec
import orjson

_PATH_RE = re.compile(r"\[(\d+)\]|\.?([A-Za-z_][A-Za-z0-9_]*)")
_TYPE_WORDS = {"int": "integer string", "str": "string", "float": "number", "bool": "true/false",
               "object": "object", "array": "array", "null": "null"}


def _value_at(obj, path: str):
    for m in _PATH_RE.finditer(path):
        if m.group(1) is not None:
            obj = obj[int(m.group(1))]
        else:
            obj = obj[m.group(2)]
    return obj


def _short(x, n: int = 60) -> str:
    r = repr(x)
    return r if len(r) <= n else r[: n - 3] + "..."


def describe_msgspec_error(e: Exception, line: bytes) -> tuple[str | None, str, str]:
    """msgspec error -> (field path, message, reason)."""
    msg = str(e)
    if isinstance(e, msgspec.ValidationError):
        text, _, at = msg.partition(" - at `")
        path = at.rstrip("`")
        path = path[2:] if path.startswith("$.") else ("" if path == "$" else path)
        m = re.match(r"Object missing required field `(\w+)`", text)
        if m:
            fld = f"{path}.{m.group(1)}" if path else m.group(1)
            if fld == "resourceSpans":
                return None, "not an OTLP trace request (no resourceSpans key)", "not OTLP"
            return fld, "missing required field", "missing field"
        m = re.match(r"Expected `(\w+)`, got `(\w+)`", text)
        if m:
            want = _TYPE_WORDS.get(m.group(1), m.group(1))
            try:
                got = _short(_value_at(orjson.loads(line), path)) if path else m.group(2)
            except Exception:  # noqa: BLE001 - best effort: the value is only for the message
                got = m.group(2)
            if not path:
                return None, f"expected a JSON object (an OTLP ExportTraceServiceRequest), got {m.group(2)}", "not OTLP"
            return path, f"expected {want}, got {got}", "bad field"
        return path or None, text[:1].lower() + text[1:], "bad field"
    if "truncated" in msg:
        return None, "truncated line (the JSON object is incomplete)", "truncated line"
    return None, f"not JSON ({msg})", "not JSON"

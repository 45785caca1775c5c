"""Is this (decompressed) head a Chrome Trace Event JSON file?"""

from __future__ import annotations

import re

__all__ = ["is_chrome"]

#: Top-level keys of a Chrome Trace Event object (the spec's, and those torch.profiler writes before its
#: ``traceEvents``: a trace of many GPUs or with a long ``metadata`` block puts that key far past the head).
CHROME_KEYS = frozenset((b"traceEvents", b"displayTimeUnit", b"systemTraceEvents", b"otherData", b"stackFrames",
                         b"samples", b"metadata", b"schemaVersion", b"deviceProperties", b"distributedInfo",
                         b"traceName", b"baseTimeNanoseconds"))
_FIRST_KEY = re.compile(rb'\{\s*"((?:[^"\\]|\\.){0,64})"\s*:')


def is_chrome(head: bytes) -> bool:
    """True for JSON whose first value is an array, or an object that is not an OTLP request: one whose first
    line does not carry ``resourceSpans`` near its start (that is an OTLP line, whatever its attributes hold)
    and that has ``traceEvents`` in the head, or starts with another Chrome/Kineto top-level key
    (``CHROME_KEYS``), or is spread over several lines (a pretty-printed document: not JSON Lines, so not
    OTLP JSON Lines either, unless its first key is ``resourceSpans``)."""
    text = head.lstrip()
    if text.startswith(b"["):
        return True
    if not text.startswith(b"{"):
        return False
    first_line = text.split(b"\n", 1)[0]
    if b'"resourceSpans"' in first_line[:200]:
        return False
    if b'"traceEvents"' in text:
        return True
    m = _FIRST_KEY.match(text)
    if m is None:
        return False
    key = m.group(1)
    if key == b"resourceSpans":
        return False
    return key in CHROME_KEYS or first_line.strip() == b"{"

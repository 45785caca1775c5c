"""Is this (decompressed) head a Chrome Trace Event JSON file?"""

from __future__ import annotations

__all__ = ["is_chrome"]


def is_chrome(head: bytes) -> bool:
    """True for JSON whose first value is an array, or an object with ``traceEvents`` near the top whose first
    line does not carry ``resourceSpans`` near its start (that is an OTLP line, whatever its attributes hold)."""
    text = head.lstrip()
    if text.startswith(b"["):
        return True
    if text.startswith(b"{"):
        if b'"resourceSpans"' in text.split(b"\n", 1)[0][:200]:
            return False
        return b'"traceEvents"' in text
    return False

"""Open a trace file of any supported format by its content, not its name.

* SQLite (``SQLite format 3`` magic): an Nsight Systems export -> :func:`gputrace.timeline.nsys.read_nsys`.
* JSON whose first value is an object with ``traceEvents`` or an array of events: Chrome Trace
  Event JSON (Perfetto, PyTorch profiler, our own ``export --format chrome``) ->
  :func:`gputrace.timeline.chrome.read_chrome`. Gzip is looked through.
* Anything else: OTLP JSON Lines -> :func:`gputrace.timeline.read_trace`.

Several paths are read one by one and merged with ``Timeline.concat``. Runs on the caller's thread.
"""

from __future__ import annotations

import gzip
import os
from typing import Sequence, Union

from gputrace.timeline.model import Timeline

__all__ = ["sniff", "read_any"]

PathLike = Union[str, "os.PathLike[str]"]


def sniff(path: PathLike) -> str:
    """``'nsys'``, ``'chrome'`` or ``'otlp'`` for one file (by its first bytes). Raises OSError."""
    with open(path, "rb") as f:
        head = f.read(4096)
    if head.startswith(b"SQLite format 3\x00"):
        return "nsys"
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as g:
                head = g.read(4096)
        except (OSError, EOFError):
            return "otlp"  # let the OTLP reader report the broken gzip stream
    text = head.lstrip()
    if text.startswith(b"["):
        return "chrome"
    if text.startswith(b"{"):
        first_line = text.split(b"\n", 1)[0]
        # OTLP lines start with resourceSpans; a Chrome object has traceEvents near the top.
        if b'"resourceSpans"' in first_line[:200]:
            return "otlp"
        if b'"traceEvents"' in text:
            return "chrome"
    return "otlp"


def read_any(paths: PathLike | Sequence[PathLike], lenient: bool = False) -> Timeline:
    """Read one or more trace files of any supported format into one Timeline.

    Errors are the format readers' own (``TraceFormatError``, ``NsysFormatError``,
    ``ChromeFormatError``; all ValueErrors naming the file) and OSError for unreadable paths.
    """
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    parts = []
    otlp: list = []
    for p in paths:
        kind = sniff(p)
        if kind == "nsys":
            from gputrace.timeline.nsys import read_nsys

            parts.append(read_nsys(p))
        elif kind == "chrome":
            from gputrace.timeline.chrome import read_chrome

            parts.append(read_chrome(p))
        else:
            otlp.append(p)
    if otlp:
        from gputrace.timeline import read_trace

        parts.append(read_trace(otlp, lenient=lenient))
    return Timeline.concat(parts)

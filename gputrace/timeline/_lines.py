"""Trace files as lines: open (plain or gzip, binary files refused) and split into lines.

Pure functions over a binary stream; thread-safe (one stream per caller).
"""

from __future__ import annotations

import gzip
import os
from typing import Iterator, Union

from gputrace.timeline.errors import TraceFormatError

PathLike = Union[str, "os.PathLike[str]"]

_CHUNK = 1 << 22
_GZIP_MAGIC = b"\x1f\x8b"


def open_trace_file(path: PathLike):
    """Open a trace file for binary reading, transparently gunzipping. Raises TraceFormatError
    for a binary (non-text, non-gzip) file and OSError if it cannot be opened."""
    f = open(path, "rb")
    head = f.read(4096)
    f.seek(0)
    if head[:2] == _GZIP_MAGIC:
        f.close()
        return gzip.open(path, "rb")
    nul = head.find(b"\x00")
    if nul >= 0:
        f.close()
        raise TraceFormatError(path, None, None, f"not a text file (binary data: NUL byte at offset {nul}); "
                               "expected OTLP JSON Lines", reason="binary file")
    return f


def iter_lines(f, chunk: int = _CHUNK) -> Iterator[tuple[bytes, bool, int]]:
    """Yield ``(line, terminated, bytes_consumed)`` from a binary stream, one line at a time.
    ``terminated`` is False only for a last line without a newline."""
    buf = b""
    consumed = 0
    while True:
        data = f.read(chunk)
        if not data:
            break
        lines = data.split(b"\n")  # the chunk is split as read: only the carried-over part is copied again
        if buf:
            lines[0] = buf + lines[0]
        buf = lines.pop()
        for ln in lines:
            consumed += len(ln) + 1
            yield ln, True, consumed
    if buf:
        consumed += len(buf)
        yield buf, False, consumed

"""Chrome Trace Event / Perfetto JSON writer: :func:`to_chrome`, :func:`write_chrome`.

The format rules (processes, threads, overlap sub-threads, flow arrows, Kineto categories) are described
in :mod:`gputrace.timeline.formats.chrome` (the package docstring); the writer itself is
:mod:`gputrace.timeline.formats.chrome.stream` (streamed in chunks, bounded memory). Pure functions; no threads.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import orjson

from gputrace.timeline.formats.chrome.stream import GENERATOR, chrome_chunks
from gputrace.timeline.model import Timeline

__all__ = ["GENERATOR", "to_chrome", "write_chrome"]


def to_chrome(tl: Timeline, flows: bool = True) -> dict:
    """The Timeline as a Chrome Trace Event JSON object (``{"traceEvents": [...], ...}``).

    ``flows``: draw an arrow (flow events ``s`` -> ``f``, binding to the enclosing slices) from each
    span to each child on another lane, e.g. from a host phase to the GPU work it launched. Builds
    the whole document in memory; files are written by :func:`write_chrome` without doing so.
    """
    return orjson.loads(b"".join(chrome_chunks(tl, flows=flows)))


def write_chrome(tl: Timeline, path: str | Path, flows: bool = True,
                 progress: Callable[[int, int], None] | None = None) -> int:
    """Stream the Chrome JSON of ``tl`` to ``path`` (gzip if it ends in ``.gz``; atomically, through
    ``gputrace.atomic_write``); returns the event count. ``progress(done_rows, total_rows)`` is
    called after each chunk. Raises OSError; a failed write leaves no partial file."""
    from gputrace.atomic_write import atomic_output

    counts: dict = {}
    p = Path(path)
    with atomic_output(p, "wb") as raw:
        f = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) if p.suffix == ".gz" else raw
        try:
            for chunk in chrome_chunks(tl, flows=flows, progress=progress, counts=counts):
                f.write(chunk)
        finally:
            if f is not raw:
                f.close()
    return counts["events"]

"""Segment folders: one OTLP JSON Lines file per writing process, joined into one trace.

Why (docs/trace-format.md, "Segment folders"): several processes appending to one file share its last
line. A process killed in the middle of a ``write`` (SIGKILL stops a write to a regular file part-way)
leaves a line without its newline, and the next process's whole line lands on it: one damaged line that
holds another, healthy process's batch. With one file per process a writer's death can only cut its own
last line, and a line without its newline at the end of a segment is exactly that cut (a whole line is
one ``write`` that ends with the newline).

Layout: a folder ``<trace>.d`` holding ``.record.lock`` (the marker; ``gputrace record`` holds an exclusive
``flock`` on it while the launch runs and writes its pid in it) and one ``<pid>-<n>.jsonl`` per writer
(``n`` counts the writers of one process, which can be several recorders in turn).

Contract: ``merge`` joins the segments into one file, leaves out each segment's unterminated last line
(counted in ``Segment.cut_bytes``), and counts the spans each segment holds (``"spanId":"`` occurs once per
span in an OTLP JSON span, nowhere else in a request: ``parentSpanId`` and escaped text do not match), and
among them the stack-sample batches (spans named ``gputrace.samples``).
Stdlib only; raises OSError from the file system.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

__all__ = ["LOCK_NAME", "SUFFIX", "Segment", "folder_of", "is_segment_folder", "segment_files", "merge",
           "count_spans", "segment_pid"]

#: The marker file of a segment folder (also ``record``'s lock).
LOCK_NAME = ".record.lock"
#: The folder of a trace file's segments: ``run.jsonl`` -> ``run.jsonl.d``.
SUFFIX = ".d"
_SEGMENT = re.compile(r"^(\d+)-(\d+)\.jsonl$")
_SPAN_KEY = b'"spanId":"'
#: The span a batch of Python stack samples is stored as (``gputrace.trace.stack_sampler``): counted apart.
_SAMPLES_NAME = b'"name":"gputrace.samples"'
_CHUNK = 1 << 23


@dataclass
class Segment:
    """One writer's file in a segment folder, as ``merge`` found it."""

    name: str
    pid: int
    spans: int = 0  # spans in its whole lines (stack-sample batches included)
    sample_batches: int = 0  # of which stack-sample batches (spans named ``gputrace.samples``)
    lines: int = 0  # whole lines
    bytes: int = 0  # bytes of whole lines
    cut_bytes: int = 0  # its unterminated last line (the writer died while writing it), left out


def folder_of(trace: str | os.PathLike) -> str:
    """The segment folder of a trace path."""
    return os.fspath(trace) + SUFFIX


def is_segment_folder(path: str | os.PathLike) -> bool:
    """True for a directory holding the marker ``LOCK_NAME``."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, LOCK_NAME))


def segment_pid(name: str) -> int | None:
    """The writer's pid of a segment file name, or None for a name that is not a segment's."""
    m = _SEGMENT.match(name)
    return int(m.group(1)) if m else None


def segment_files(folder: str | os.PathLike) -> list[str]:
    """The segment file names in ``folder``, by pid and writer number (regular files only)."""
    out = []
    for name in os.listdir(folder):
        m = _SEGMENT.match(name)
        if m and os.path.isfile(os.path.join(folder, name)) and not os.path.islink(os.path.join(folder, name)):
            out.append((int(m.group(1)), int(m.group(2)), name))
    return [name for _, _, name in sorted(out)]


def count_spans(data: bytes) -> int:
    """Spans in whole OTLP JSON lines ``data``."""
    return data.count(_SPAN_KEY)


def merge(folder: str | os.PathLike, out_fd: int) -> list[Segment]:
    """Append every segment's whole lines to ``out_fd`` (an open, writable descriptor), segment after
    segment; returns what each held. An unterminated last line is left out and counted in ``cut_bytes``.
    Raises OSError (a segment unreadable, the output not writable: a short write is retried, a failing one
    raises)."""
    segs = []
    for name in segment_files(folder):
        seg = Segment(name=name, pid=segment_pid(name) or 0)
        fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
        try:
            carry = b""
            while True:
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    break
                data = carry + chunk if carry else chunk
                end = data.rfind(b"\n") + 1
                whole, carry = data[:end], data[end:]
                if whole:
                    seg.spans += count_spans(whole)
                    seg.sample_batches += whole.count(_SAMPLES_NAME)
                    seg.lines += whole.count(b"\n")
                    seg.bytes += len(whole)
                    _write_all(out_fd, whole)
            seg.cut_bytes = len(carry)
        finally:
            os.close(fd)
        segs.append(seg)
    return segs


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(f"short write ({n} bytes)")
        view = view[n:]

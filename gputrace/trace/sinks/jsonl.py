"""``JsonlFileSink``: OTLP JSON Lines file, one ``ExportTraceServiceRequest`` per line.

The OTel file-exporter format (hex ids, camelCase, integer enums, 64-bit integers as strings). The
recorder hands this sink finished phases (``export_phases``), which ``phase_json.encode_phases`` turns
straight into span text; ``export`` takes span records and encodes them with
``gputrace.otlp.encode.encode_request``. Both write the same bytes for the same spans (tested). A
``JsonlFileSink`` subclass that overrides ``export`` gets span records. A batch becomes one line per
``max_spans_per_line`` spans so readers never meet a giant line. Runs on the exporter thread only.

Shared files and failures (docs/tracer.md "What a trace file guarantees"):

* The file is opened ``O_APPEND`` and every batch is written with one ``os.write`` of whole lines (no
  userspace buffer that could split a line across two writes). On a local filesystem an ``O_APPEND``
  write is atomic with respect to other appenders, so several processes (or several sinks) writing the
  same ``trace_file`` interleave whole lines and lose none; each process's lines carry its own resource
  (run id, pid), so a reader shows one run per process. NFS gives no such guarantee.
* Truncation at start happens only when no other writer holds the file: every sink holds a shared
  ``flock`` while open, and truncates only if it can take the exclusive lock first. A second process
  started on the same path therefore appends instead of erasing the first one's spans.
* ``exported`` counts spans whose line the kernel accepted completely; a failed or short write (full
  disk, quota, I/O error) counts the rest of the batch as ``dropped`` with an error naming the file, the
  reason and the number of spans lost, and a cut line is ended with a newline so the following lines
  (this process's or another's) stay readable. ``close`` fsyncs: if that fails, nothing is claimed as
  written (every exported span moves to dropped).
"""

from __future__ import annotations

import errno
import fcntl
import os
import weakref
from collections.abc import Mapping
from typing import Any

from gputrace.otlp.encode import REQUEST_TAIL, encode_request, request_head
from gputrace.trace.sinks.base import Sink
from gputrace.trace.sinks.phase_json import encode_phases

_TAIL_NL = REQUEST_TAIL + "\n"

#: Open sinks of this process: a forked child closes their descriptors (and so its share of their
#: flock), or a later run of the parent would see the file as busy and append instead of truncating.
_open_sinks: weakref.WeakSet[JsonlFileSink] = weakref.WeakSet()


def _close_inherited_fds() -> None:
    for sink in list(_open_sinks):
        sink._forget_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_inherited_fds)


def open_shared_append(path: str, truncate: bool) -> tuple[int, bool]:
    """Open ``path`` for appending (created 0666 & ~umask) and hold a shared flock on it.

    ``truncate``: empty the file first, but only when no other writer holds it (exclusive lock taken
    without waiting). Returns (fd, truncated). Raises OSError (the file cannot be opened or locked)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o666)
    truncated = False
    try:
        if truncate:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass  # another writer is active: append to its file
            else:
                os.ftruncate(fd, 0)
                truncated = True
        fcntl.flock(fd, fcntl.LOCK_SH)  # (converts an exclusive lock; other truncaters may wait)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):  # no flock on this filesystem
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | (os.O_TRUNC if truncate else 0)
            fd = os.open(path, flags, 0o666)
            return fd, truncate
        raise
    return fd, truncated


class JsonlFileSink(Sink):
    """Write spans to ``path`` (truncated at start unless ``append=True`` or another writer has it open:
    see the module doc).

    Raises OSError from the constructor if the file cannot be opened (bad directory, permissions).
    A write error later counts the spans not written as dropped and keeps the run going.
    """

    def __init__(self, path: str | os.PathLike, *, append: bool = False, max_spans_per_line: int = 2048) -> None:
        super().__init__()
        self.path = os.fspath(path)
        self.name = f"file:{self.path}"
        self.max_spans_per_line = max(1, int(max_spans_per_line))
        self._fd, self.truncated = open_shared_append(self.path, truncate=not append)
        self._closed = False
        _open_sinks.add(self)
        self._head = request_head({})
        # The recorder's fast path (phases -> JSON text, no span dicts) applies unless a subclass
        # changed what export() writes.
        self.takes_phases = type(self).export is JsonlFileSink.export

    def start(self, resource: Mapping[str, Any]) -> None:
        super().start(resource)
        self._head = request_head(self.resource)

    def update_resource(self, attrs: Mapping[str, Any]) -> None:
        super().update_resource(attrs)
        self._head = request_head(self.resource)

    def export_phases(self, phases: list, ids: Any, epoch_offset_ns: int) -> None:
        """Write finished phases (the recorder's fast path; same bytes as ``export`` of their records)."""
        if self._closed or not phases:
            if phases:
                self.stats.add(dropped=len(phases), error="file sink already closed")
            return
        step = self.max_spans_per_line
        head = self._head
        lines: list[bytes] = []
        counts: list[int] = []
        for i in range(0, len(phases), step):
            chunk = phases[i : i + step]
            try:
                texts = encode_phases(chunk, ids, epoch_offset_ns)
                # One join and one encode: every concatenation of a ~1 MB line would be another
                # allocation and copy.
                texts[0] = head + texts[0]
                texts[-1] += _TAIL_NL
                lines.append(",".join(texts).encode())
                counts.append(len(chunk))
            except (ValueError, TypeError) as e:
                self.stats.add(dropped=len(chunk), error=f"{type(e).__name__}: {e}")
        self._write_lines(lines, counts)

    def export(self, spans: list[dict]) -> None:
        if self._closed or not spans:
            if spans:
                self.stats.add(dropped=len(spans), error="file sink already closed")
            return
        step = self.max_spans_per_line
        lines: list[bytes] = []
        counts: list[int] = []
        for i in range(0, len(spans), step):
            chunk = spans[i : i + step]
            try:
                lines.append(encode_request(self.resource, chunk) + b"\n")
                counts.append(len(chunk))
            except (ValueError, TypeError) as e:
                self.stats.add(dropped=len(chunk), error=f"{type(e).__name__}: {e}")
        self._write_lines(lines, counts)

    def _write_lines(self, lines: list[bytes], counts: list[int]) -> None:
        """Append whole lines with as few ``os.write`` calls as possible (one unless a write comes back
        short); count each line's spans as exported only once all its bytes were accepted."""
        k = 0
        while k < len(lines):
            data = b"".join(lines[k:]) if k or len(lines) > 1 else lines[0]
            short = False
            try:
                n = os.write(self._fd, data)
                err = None if n == len(data) else f"short write ({n} of {len(data)} bytes)"
                short = 0 < n < len(data)  # e.g. the disk filled mid-write: retry the rest once more
            except OSError as e:
                n, err = 0, e.strerror or str(e)
            # Lines fully written, and whether one was cut.
            done = 0
            pos = 0
            while k + done < len(lines) and pos + len(lines[k + done]) <= n:
                pos += len(lines[k + done])
                done += 1
            if done:
                self.stats.add(exported=sum(counts[k : k + done]))
            k += done
            if err is None:
                continue
            if pos < n:
                # A cut line: end it, so the next line (ours or another writer's) starts on its own.
                self.stats.add(dropped=counts[k], error=self._lost(err, counts[k], "a cut line"))
                k += 1
                try:
                    os.write(self._fd, b"\n")
                except OSError:
                    pass
                continue  # retry the remaining whole lines: a short write may have been transient
            if short:
                continue
            lost = sum(counts[k:])
            self.stats.add(dropped=lost, error=self._lost(err, lost, "the rest of the batch"))
            return

    def _lost(self, why: str, n: int, what: str) -> str:
        return f"{self.path}: {why}: {n} spans not written ({what})"

    def flush(self) -> None:
        """Nothing to do: every export writes straight to the file (no userspace buffer)."""

    def close(self, timeout_s: float | None = None) -> None:
        """fsync and close. A failed fsync means nothing written is known to be on disk: every span
        counted as exported is moved to dropped, with the error."""
        if self._closed:
            return
        self._closed = True
        _open_sinks.discard(self)
        try:
            os.fsync(self._fd)
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.EROFS):  # special files (/dev/null, pipes) cannot fsync
                with self.stats._lock:
                    n = self.stats.exported
                    self.stats.exported = 0
                self.stats.add(
                    dropped=n, error=f"{self.path}: fsync: {e.strerror or e}: {n} spans not confirmed on disk"
                )
        try:
            os.close(self._fd)
        except OSError as e:
            self.stats.add(error=f"{self.path}: close: {e.strerror or e}")

    def _forget_after_fork(self) -> None:
        """In a forked child: close the inherited descriptor without writing (the parent owns the file)."""
        if not self._closed:
            self._closed = True
            try:
                os.close(self._fd)
            except OSError:
                pass

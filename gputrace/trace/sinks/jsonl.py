"""``JsonlFileSink``: OTLP JSON Lines file, one ``ExportTraceServiceRequest`` per line.

The OTel file-exporter format (hex ids, camelCase, integer enums, 64-bit integers as strings). The
recorder hands this sink finished phases (``export_phases``), which ``phase_json.encode_phases`` turns
straight into span text; ``export`` takes span records and encodes them with
``gputrace.otlp.encode.encode_request``. Both write the same bytes for the same spans (tested). A
``JsonlFileSink`` subclass that overrides ``export`` gets span records. A batch becomes one line per
``max_spans_per_line`` spans so readers never meet a giant line. Runs on the exporter thread only.

Shared files and failures (docs/tracer.md "What a trace file guarantees"):

* The trace descriptor is never the program's: a regular file is opened for each batch (``O_APPEND |
  O_CLOEXEC``), written with one ``os.write`` of whole lines and closed again, so a program that closes
  every descriptor and opens a file of its own cannot receive gputrace's lines, and no child inherits one.
  (Not a regular file, a pipe or ``/dev/stdout``: one descriptor is kept and its device and inode are
  compared with the opened file's before every write; a mismatch reopens the path.)
* On a local filesystem an ``O_APPEND`` write is atomic with respect to other appenders, so several
  processes (or several sinks) writing the same ``trace_file`` interleave whole lines; each process's lines
  carry its own resource (run id, pid), so a reader shows one run per process. NFS gives no such guarantee,
  and a writer killed in the middle of a write leaves a cut line that the next writer's line joins: for
  processes that may be killed, give each its own file (``gputrace record`` does: one segment per process,
  ``private=True``, ``gputrace.otlp.segments``).
* Truncation at start happens only when no other writer holds the file: every sink holds a shared
  ``flock`` while open (on a descriptor kept only for the lock, never written, closed only if it is still
  the file's), and truncates only if it can take the exclusive lock first. A second process started on the
  same path therefore appends instead of erasing the first one's spans.
* ``exported`` counts spans whose line the kernel accepted completely; a failed or short write (full
  disk, quota, I/O error) counts the rest of the batch as ``dropped`` with an error naming the file, the
  reason and the number of spans lost. A cut line is ended with a newline so the following lines (this
  process's or another's) stay readable; in a private file (``private=True``, no other writer) it is cut
  off instead, so the file holds whole lines only. ``close`` fsyncs: if that fails, nothing is claimed as
  written (every exported span moves to dropped).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
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


_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC


def _ident(fd: int) -> tuple[int, int] | None:
    """(device, inode) of an open descriptor, or None when it is not open."""
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def close_if_same(fd: int, ident: tuple[int, int] | None) -> None:
    """Close ``fd`` only while it still is the file ``ident`` names: a program that closed it may have got
    the same number back for a file of its own."""
    if ident is not None and _ident(fd) == ident:
        try:
            os.close(fd)
        except OSError:
            pass


def create_private(folder: str, pid: int | None = None) -> str:
    """Create a new, empty ``<pid>-<n>.jsonl`` in ``folder`` (the first free ``n``; ``O_EXCL``, so never a
    file another writer has) and return its path. Raises OSError (the folder is missing or not writable)."""
    pid = os.getpid() if pid is None else pid
    for n in range(1 << 16):
        path = os.path.join(folder, f"{pid}-{n}.jsonl")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return path
    raise OSError(errno.EEXIST, f"{folder}: no free segment name for pid {pid}")


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

    def __init__(self, path: str | os.PathLike, *, append: bool = False, max_spans_per_line: int = 2048,
                 private: bool = False) -> None:
        super().__init__()
        self.path = os.fspath(path)
        self.name = f"file:{self.path}"
        self.max_spans_per_line = max(1, int(max_spans_per_line))
        #: No other writer appends to this file: a cut line is cut off, not ended with a newline.
        self.private = private
        self._fd, self.truncated = open_shared_append(self.path, truncate=not append)
        self._ident = _ident(self._fd)
        # A regular file is opened per batch (the kept descriptor only holds the flock); anything else keeps
        # the descriptor, checked before each write.
        try:
            self._per_write = stat.S_ISREG(os.fstat(self._fd).st_mode)
        except OSError:
            self._per_write = True
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

    def _write_fd(self) -> int:
        """A descriptor to write this batch to: a fresh one for a regular file (the caller closes it), else
        the kept one once it is checked to be the file still (reopened if the program took its number)."""
        if self._per_write:
            # (a private file is never made again: gone, it was joined and removed, or replaced by another run's)
            return os.open(self.path, _APPEND if self.private else _APPEND | os.O_CREAT, 0o666)
        if _ident(self._fd) != self._ident:
            self._fd = os.open(self.path, _APPEND | os.O_CREAT, 0o666)
            self._ident = _ident(self._fd)
        return self._fd

    def _write_lines(self, lines: list[bytes], counts: list[int]) -> None:
        """Append whole lines with as few ``os.write`` calls as possible (one unless a write comes back
        short); count each line's spans as exported only once all its bytes were accepted."""
        try:
            fd = self._write_fd()
        except OSError as e:
            lost = sum(counts)
            self.stats.add(dropped=lost, error=self._lost(e.strerror or str(e), lost, "the batch"))
            return
        try:
            self._write_lines_to(fd, lines, counts)
        finally:
            if self._per_write:
                os.close(fd)

    def _write_lines_to(self, fd: int, lines: list[bytes], counts: list[int]) -> None:
        k = 0
        while k < len(lines):
            data = b"".join(lines[k:]) if k or len(lines) > 1 else lines[0]
            short = False
            try:
                n = os.write(fd, data)
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
                # A cut line: cut it off (a private file), else end it, so the next line (ours or another
                # writer's) starts on its own.
                self.stats.add(dropped=counts[k], error=self._lost(err, counts[k], "a cut line"))
                k += 1
                try:
                    if self.private:
                        os.ftruncate(fd, os.fstat(fd).st_size - (n - pos))
                    else:
                        os.write(fd, b"\n")
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
            fd = self._write_fd()
        except OSError as e:
            self.stats.add(error=f"{self.path}: reopen to fsync: {e.strerror or e}")
            fd = -1
        if fd >= 0:
            try:
                os.fsync(fd)
            except OSError as e:
                if e.errno not in (errno.EINVAL, errno.EROFS):  # special files (/dev/null, pipes) cannot fsync
                    with self.stats._lock:
                        n = self.stats.exported
                        self.stats.exported = 0
                    self.stats.add(
                        dropped=n, error=f"{self.path}: fsync: {e.strerror or e}: {n} spans not confirmed on disk"
                    )
            finally:
                if self._per_write:
                    os.close(fd)
        close_if_same(self._fd, self._ident)

    def _forget_after_fork(self) -> None:
        """In a forked child: close the inherited descriptor without writing (the parent owns the file)."""
        if not self._closed:
            self._closed = True
            close_if_same(self._fd, self._ident)

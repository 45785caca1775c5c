"""Progressive loading for viewers: draw before the whole file is read, follow a running writer.

``iter_load(path)`` reads a file in slices of about ``interval`` seconds of work and yields a
``LoadProgress`` after each; ``follow(path, stop_event)`` does the same and then keeps tailing
the file while a writer appends to it (a partial last line is held until its newline arrives;
a truncated or replaced file starts the load again, with ``LoadProgress.reset`` set).

Both are generators meant to run in a worker thread (e.g. a Textual ``@work(thread=True)``),
which posts each progress to the UI. ``LoadProgress.timeline`` builds the cumulative Timeline
lazily (an O(n log n) sort): a UI that only shows a progress bar never pays for it. They check
``stop_event`` between slices and return promptly once it is set. Errors are raised as
``TraceFormatError`` from the generator unless ``lenient`` (then counted in ``report``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass

from gputrace.timeline._lines import GzipStream, LineSplitter, is_gzip, open_trace_file
from gputrace.timeline.errors import LoadReport, TraceFormatError
from gputrace.timeline.formats.otlp_jsonl._feed import gzip_damage, try_whole_file
from gputrace.timeline.formats.otlp_jsonl._loader import TraceLoader
from gputrace.timeline.model import Timeline

__all__ = ["LoadProgress", "iter_load", "follow"]

_READ = 1 << 20


@dataclass
class LoadProgress:
    """One step of a progressive load. ``timeline`` is everything loaded so far (built lazily)."""

    path: str
    bytes_read: int
    bytes_total: int
    lines: int
    spans: int
    done: bool
    loader: TraceLoader
    reset: bool = False  # follow(): the file was truncated or replaced; the load started over
    idle: bool = False  # follow(): a heartbeat while the file is quiet (nothing new since the last progress)

    @property
    def timeline(self) -> Timeline:
        # The last progress of a finished load hands the loader's columns over (no more feeding).
        return self.loader.timeline(release=self.done)

    @property
    def report(self) -> LoadReport:
        return self.loader.report

    @property
    def fraction(self) -> float:
        return 1.0 if self.bytes_total <= 0 else min(1.0, self.bytes_read / self.bytes_total)


#: Bytes kept of the file's start and of the last data read, to tell a rewritten file from a grown one.
_MARK = 4096


class _Reader:
    """Line reader over a (possibly gzip) file that remembers a partial last line (linear in
    its length). A damaged gzip stream: the complete lines before the damage are returned,
    then ``read_lines`` raises EOFError/OSError once."""

    def __init__(self, path) -> None:
        self.path = path
        self.raw = open(path, "rb")
        head = self.raw.read(4096)
        self.raw.seek(0)
        self.gz = is_gzip(head)
        if not self.gz:
            try:
                open_trace_file(path).close()  # raises TraceFormatError for binary data
            except BaseException:
                self.raw.close()
                raise
        self.f = GzipStream(self.raw) if self.gz else self.raw
        self.split = LineSplitter()
        self.line_no = 0
        st = os.fstat(self.raw.fileno())
        self.ino = (st.st_dev, st.st_ino)
        self.head = head  # the file's first bytes and the last ones read: ``same_content`` checks them
        self.tail = b""

    def close(self) -> None:
        self.raw.close()

    @property
    def pos(self) -> int:
        return self.raw.tell()

    def read_lines(self, max_bytes: int) -> list[bytes] | None:
        """Complete lines from the next ``max_bytes``; None at end of data (partial line kept)."""
        data = self.f.read(max_bytes)
        if not data:
            return None
        if not self.gz:
            self.tail = (self.tail + data[-_MARK:])[-_MARK:]
        return self.split.push(data)

    def same_content(self) -> bool:
        """Whether the bytes read so far are still in the file: its first bytes (as first seen) and the last
        ones read are unchanged. False after a truncation and a rewrite in place, even one that grew the file
        past where this reader was between two polls (same inode, larger size: only the bytes tell)."""
        if self.gz:
            return True
        fd = self.raw.fileno()
        try:
            head_now = os.pread(fd, len(self.head), 0)
            tail_now = os.pread(fd, len(self.tail), self.pos - len(self.tail)) if self.tail else b""
        except OSError:
            return False
        return head_now == self.head and tail_now == self.tail


def _progress(r: _Reader, loader: TraceLoader, total: int, done: bool, reset: bool = False,
              idle: bool = False) -> LoadProgress:
    return LoadProgress(str(r.path), r.pos, total, loader.report.lines, loader.spans_loaded, done, loader, reset,
                        idle)


def _pump(r: _Reader, loader: TraceLoader, interval: float, stop_event) -> bool:
    """Feed lines for about ``interval`` seconds. Returns True when the data ran out (or a
    damaged gzip stream ended it: a ``bad gzip`` problem, raised unless lenient)."""
    t_end = time.perf_counter() + interval
    while True:  # at least one read per slice, however small the interval
        if stop_event is not None and stop_event.is_set():
            return False
        try:
            lines = r.read_lines(_READ)
        except (EOFError, OSError) as e:
            loader.resolve()  # problems of the lines before come first
            r.split.rest()  # the partial line at the damage is not a line
            err = gzip_damage(r.path, e)
            if not loader.lenient:
                raise err from None
            loader.report.add(err, line_skipped=False)
            loader.flush()
            return True
        if lines is None:
            loader.flush()
            return True
        for ln in lines:
            r.line_no += 1
            loader.feed(r.path, r.line_no, ln, True)
        if time.perf_counter() >= t_end:
            break
    loader.flush()
    return False


def iter_load(path, *, interval: float = 0.25, lenient: bool = False,
              stop_event: threading.Event | None = None) -> Generator[LoadProgress, None, None]:
    """Load ``path`` progressively, yielding a ``LoadProgress`` about every ``interval`` seconds of
    work and a last one with ``done=True`` (unless stopped). Same errors as ``read_trace``."""
    loader = TraceLoader(lenient=lenient)
    loader.report.files.append(str(path))
    r = _Reader(path)
    try:
        total = os.fstat(r.raw.fileno()).st_size
        if not r.gz and r.raw.readline(4096).strip() == b"{":  # one pretty-printed request (see read_trace)
            r.raw.seek(0)
            if try_whole_file(loader, path):
                loader.flush()
                r.raw.seek(0, os.SEEK_END)
                yield _progress(r, loader, total, True)
                return
        r.raw.seek(0)
        while True:
            if stop_event is not None and stop_event.is_set():
                return
            if _pump(r, loader, interval, stop_event):
                break
            yield _progress(r, loader, total, False)
        rest = r.split.rest()
        if rest.strip():  # last line without a newline
            r.line_no += 1
            loader.feed(r.path, r.line_no, rest, False)
        if loader.report.lines == 0 and not loader.report.reasons:
            err = TraceFormatError(path, None, None, "empty file (no trace data)", "empty file")
            if not lenient:
                raise err
            loader.report.add(err, line_skipped=False)
        loader.flush()
        yield _progress(r, loader, total, True)
    finally:
        r.close()


def follow(path, stop_event: threading.Event, *, interval: float = 0.25, poll: float = 0.2,
           lenient: bool = False) -> Iterator[LoadProgress]:
    """Tail ``path`` while a writer appends to it, until ``stop_event`` is set.

    Yields after each slice of new data (``done`` stays False: the file may grow). Waits for the
    file to appear if it does not exist yet. When the file shrinks (truncated), its inode changes
    (rotated/replaced) or the bytes already read changed (truncated and rewritten past the old size
    between two polls: its first 4 KiB or the last 4 KiB read differ), loading restarts from its
    beginning with a fresh loader and the next progress has ``reset=True``. Gzip files cannot grow
    meaningfully: they are loaded once.

    While the file is quiet it yields a heartbeat (``idle=True``, nothing new) every ``poll``
    seconds, so a consumer that batches updates can post what it holds once the writer stops
    (without it, the last lines of a run would wait for data that never comes).
    """
    reset = False
    while not stop_event.is_set():
        try:
            r = _Reader(path)
        except FileNotFoundError:
            stop_event.wait(poll)
            continue
        loader = TraceLoader(lenient=lenient)
        loader.report.files.append(str(path))
        try:
            while not stop_event.is_set():
                ran_out = _pump(r, loader, interval, stop_event)
                if loader.spans_loaded or reset or ran_out:
                    total = max(r.pos, _size(path))
                    yield _progress(r, loader, total, False, reset)
                    reset = False
                if not ran_out:
                    continue
                if r.gz:
                    while not stop_event.wait(poll):
                        yield _progress(r, loader, r.pos, False, idle=True)
                    return
                # Out of data: wait, then check for truncation or rotation.
                while not stop_event.wait(poll):
                    yield _progress(r, loader, max(r.pos, _size(path)), False, idle=True)
                    try:
                        st = os.stat(path)
                    except FileNotFoundError:
                        continue
                    if (st.st_dev, st.st_ino) != r.ino or st.st_size < r.pos or not r.same_content():
                        reset = True
                        break
                    if st.st_size > r.pos:
                        break
                if reset:
                    break
        finally:
            r.close()


def _size(path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0

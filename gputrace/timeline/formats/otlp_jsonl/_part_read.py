"""One process's share of a parallel read (``parallel``): part of the file read by one ``TraceLoader`` into a part.

``_read_range`` reads a byte range (a worker's piece, or a piece the caller reads in a worker's place);
``_read_front`` reads the pieces that the caller claims from the front of the ``ClaimBoard``, as one stream.
Both return a *part*: a plain dict of column chunks, attributes keyed by row, the loader's phase, lane,
resource and trace tables, the load report, and the range's line count (line numbers in it are local to the
range; ``parallel`` shifts them).

Runs in the process that reads: the caller's thread for its own share and for pieces read in a worker's
place, a worker process (``_workers``) for a worker's pieces; one loader per call, not shared between threads.
A ``TraceFormatError`` (strict mode) is not raised but returned in the part under ``"error"``, with the
range's full line count, so that the parent can raise the error with the lowest file line. Raised: ``OSError``
from reading the file, ``ClaimTimeout`` from the claim board (``_read_front``), and anything else
unexpected (a bug, KeyboardInterrupt).
"""

from __future__ import annotations

import numpy as np

from gputrace.timeline._lines import iter_line_blocks
from gputrace.timeline.errors import TraceFormatError
from gputrace.timeline.formats.otlp_jsonl._loader import TraceLoader
from gputrace.timeline.formats.otlp_jsonl._pieces import ClaimBoard

#: Bytes per read of the file.
_READ = 8 << 20


class _Bounded:
    """Reads of a binary file that stop ``left`` bytes on."""

    def __init__(self, f, left: int) -> None:
        self.f, self.left = f, left

    def read(self, n: int) -> bytes:
        if self.left <= 0:
            return b""
        data = self.f.read(min(n, self.left))
        self.left -= len(data)
        return data


class _FrontStream:
    """The caller's reads: the pieces it claims from the front of the board, as one stream (they follow
    each other in the file). A piece is claimed when the one before has been read; ``stop()`` claims no more."""

    def __init__(self, f, board: ClaimBoard) -> None:
        self.f, self.board = f, board
        self.left = 0
        self.end = 0  # end of the claimed pieces
        self.pieces = 0  # pieces claimed
        self.stopped = False

    def read(self, n: int) -> bytes:
        if self.left <= 0:
            i = None if self.stopped else self.board.claim_front()
            if i is None:
                self.stopped = True
                return b""
            a, b = self.board.piece(i)
            assert i == self.pieces and a == self.end, "the caller's pieces follow each other"
            self.left, self.end, self.pieces = b - a, b, i + 1
        data = self.f.read(min(n, self.left))
        self.left -= len(data)
        return data

    def stop(self) -> None:
        self.stopped = True


def _read_range(path: str, start: int, end: int, lenient: bool) -> dict:
    """Load lines in [start, end) of ``path``; line numbers local to the range."""
    with open(path, "rb") as f:
        f.seek(start)
        return _read_stream(path, _Bounded(f, end - start), start, lambda: end, lenient)


def _read_front(path: str, board: ClaimBoard, lenient: bool) -> dict:
    """The caller's share: the pieces it claims from the front, read in order by one loader."""
    with open(path, "rb") as f:
        stream = _FrontStream(f, board)
        res = _read_stream(path, stream, 0, lambda: stream.end, lenient, stream.stop)
    res["pieces"] = stream.pieces
    return res


def _read_stream(path: str, stream, start: int, end, lenient: bool, stop=None) -> dict:
    """Load the lines of ``stream`` (the file from ``start`` to ``end()``); on a strict error, ``stop()``
    is called and the lines up to ``end()`` are counted (the parent needs every part's line count)."""
    loader = TraceLoader(lenient=lenient)
    loader.report.files.append(path)
    line_no = 0
    error = None
    try:
        for line, block, terminated in iter_line_blocks(stream, _READ):
            if line is None:
                assert block is not None
                line_no = loader.feed_block(path, line_no, block)
            else:
                line_no += 1
                loader.feed(path, line_no, line, terminated)
        loader.flush()
    except TraceFormatError as e:
        error = e
        if stop is not None:
            stop()
        line_no = _count_lines(path, start, end())
    it = loader.it
    attrs: dict[int, dict] = {}
    chunks: list[dict[str, np.ndarray]] = []
    if error is None:
        chunks = [c for c in loader._chunks if len(c["start"])]
        for a in loader._chunk_attrs:  # keyed by row across the loader's chunks
            attrs.update(a)
    return {
        "nlines": line_no,
        "error": error,
        "report": loader.report,
        "chunks": chunks,  # column sets, rows in order; Timeline.from_parts joins them
        "rows": loader._rows if error is None else 0,
        "attrs": attrs,
        "phases": it.phases,
        "trace_ids": it.trace_ids,
        "resources": it.resources,
        "lanes": it.lanes,
    }


def _count_lines(path: str, start: int, end: int) -> int:
    n = 0
    with open(path, "rb") as f:
        f.seek(start)
        left = end - start
        last = b"\n"
        while left > 0:
            data = f.read(min(_READ, left))
            if not data:
                break
            left -= len(data)
            n += data.count(b"\n")
            last = data[-1:]
    return n + (last != b"\n")

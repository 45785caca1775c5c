"""Feeding a whole OTLP JSON Lines file (plain or gzip) to a ``TraceLoader``.

Used by the entrance (``gputrace.timeline.load``) for in-process reads and by ``incremental`` for
a single pretty-printed request. Runs on the caller's thread; one loader per thread.

A damaged gzip stream: every complete line before the damage is fed, then the damage is one
``bad gzip`` problem (raised unless the loader is lenient).
"""

from __future__ import annotations

from gputrace.json_depth import too_deep
from gputrace.otlp.schema import request_decoder
from gputrace.timeline._lines import PathLike, iter_line_blocks, open_trace_file
from gputrace.timeline.errors import TraceFormatError
from gputrace.timeline.formats.otlp_jsonl._loader import TraceLoader

__all__ = ["load_file_into", "try_whole_file", "gzip_damage"]

#: Largest single pretty-printed request read whole (a JSON Lines file has no such limit).
WHOLE_FILE_LIMIT = 1 << 30


def gzip_damage(path: PathLike, e: BaseException) -> TraceFormatError:
    """The problem reported for a truncated or corrupt gzip stream."""
    return TraceFormatError(path, None, None, f"corrupt or truncated gzip stream ({e})",
                            "bad gzip")


def load_file_into(loader: TraceLoader, path: PathLike) -> None:
    """Feed a whole file to ``loader``; handles empty files and single pretty-printed requests.

    Raises ``TraceFormatError`` (unless the loader is lenient: then recorded in its report),
    ``OSError`` when the file cannot be opened.
    """
    loader.report.files.append(str(path))
    try:
        f = open_trace_file(path)
    except TraceFormatError as e:
        if not loader.lenient:
            raise
        loader.report.add(e, line_skipped=False)
        return
    before = loader.report.lines
    problems_before = sum(loader.report.reasons.values())
    with f:
        try:
            line_no = 0
            for line, block, terminated in iter_line_blocks(f):
                if line is None:
                    assert block is not None
                    line_no = loader.feed_block(path, line_no, block)
                    continue
                line_no += 1
                if line_no == 1 and line.strip() == b"{" and try_whole_file(loader, path):
                    return  # one pretty-printed request, not JSON Lines
                loader.feed(path, line_no, line, terminated)
        except (EOFError, OSError) as e:
            if isinstance(e, FileNotFoundError):
                raise
            loader.resolve()  # problems of the lines before come first
            err = gzip_damage(path, e)
            if not loader.lenient:
                raise err from None
            loader.report.add(err, line_skipped=False)
    loader.resolve()  # this file's problems before the next file's
    if loader.report.lines == before and sum(loader.report.reasons.values()) == problems_before:
        err = TraceFormatError(path, None, None, "empty file (no trace data)", "empty file")
        if not loader.lenient:
            raise err
        loader.report.add(err, line_skipped=False)


def try_whole_file(loader: TraceLoader, path: PathLike) -> bool:
    """A file holding one pretty-printed request (not JSON Lines): accept it if it decodes."""
    try:
        with open_trace_file(path) as f:
            data = f.read(WHOLE_FILE_LIMIT)
        if too_deep(data):
            return False
        req = request_decoder.decode(data)
    except Exception:  # noqa: BLE001 - not a whole-file request either: report the line error
        return False
    loader.resolve()
    loader.report.lines += 1
    loader._add_request(path, 1, req)
    return True

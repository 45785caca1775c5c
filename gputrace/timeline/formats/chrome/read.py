"""Chrome Trace Event JSON reader: :func:`read_chrome`, :func:`read_chrome_head`, :func:`from_chrome`.

How events map onto lanes (gputrace's own exports round-trip; Kineto / ``chrome://tracing`` recordings
are mapped by ``args.device``/``args.stream`` and thread names) is described in
:mod:`gputrace.timeline.formats.chrome` (the package docstring). Pure functions; no threads: each call
reads on the caller's thread. Errors: :class:`ChromeFormatError` (a ValueError, defined in
:mod:`gputrace.timeline.formats.chrome.fields` and re-exported here) names the file and the event index;
OSError for a path that cannot be opened.

Streaming: ``read_chrome`` feeds event batches from :mod:`gputrace.timeline.formats.chrome.scan` into one
``_Events`` accumulator (:mod:`gputrace.timeline.formats.chrome.events`), which turns each event into column
values at once, so memory follows the Timeline, not the JSON document; batches of a gputrace export are
decoded into typed Structs and turned into columns with numpy (:mod:`gputrace.timeline.formats.chrome.typed`),
or, when their events have another shape, take a columnar path over dicts
(:mod:`gputrace.timeline.formats.chrome.batch`). A gputrace export must carry its
``otherData`` (lanes, epoch) before ``traceEvents``, as the writer puts it; older exports
(``otherData`` last), files the scanner cannot split, and malformed files are read whole, as
before (``from_chrome`` of the parsed document), which also names the problem.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from gputrace.timeline._gc import collector_paused
from gputrace.timeline.formats.chrome.events import _Events
from gputrace.timeline.formats.chrome.fields import ChromeFormatError
from gputrace.timeline.formats.chrome.foreign import decode_foreign
from gputrace.timeline.formats.chrome.stream import GENERATOR
from gputrace.timeline.formats.chrome.typed import Decode, decode_ours
from gputrace.timeline.model import Timeline

__all__ = ["ChromeFormatError", "read_chrome", "read_chrome_head", "from_chrome"]


def read_chrome(path: str | Path, host: str | None = None) -> Timeline:
    """Read a Chrome Trace Event JSON file (``.json`` or ``.json.gz``; object or array form), streamed
    (see the module docstring). Raises ChromeFormatError naming the file, OSError.

    The cyclic garbage collector is paused while reading (process-wide; re-enabled afterwards if it
    was on): the reader creates millions of objects and no cycles, and the collector's passes over
    the kept attribute dicts cost ~35 % of reading a PyTorch-profiler trace."""
    with collector_paused():
        try:
            return _read_chrome(path, host)
        except _MALFORMED as exc:
            raise _malformed(str(path), exc) from None


#: What a hostile shape the checks below do not name may still raise deep inside the reader; turned into a
#: ChromeFormatError naming the file (never a traceback for a user's file).
_MALFORMED = (TypeError, KeyError, AttributeError, IndexError, OverflowError, RecursionError, UnicodeError)


def _malformed(src: str, exc: BaseException) -> ChromeFormatError:
    if isinstance(exc, ChromeFormatError):
        return exc
    return ChromeFormatError(f"{src}: malformed Chrome trace ({type(exc).__name__}: {str(exc)[:200]})")


def _read_chrome(path: str | Path, host: str | None) -> Timeline:
    from gputrace.timeline.errors import TraceFormatError
    from gputrace.timeline.formats.chrome.scan import ScanError

    p = Path(path)
    host = host or p.name.split(".")[0]
    try:
        acc, _ = _streamed(p, host)
        if acc is not None:
            return acc.timeline()
    except (ScanError, EOFError, OSError, TraceFormatError) as e:
        if isinstance(e, (FileNotFoundError, PermissionError, IsADirectoryError)):
            raise
    return _read_whole(p, host)


def read_chrome_head(path: str | Path, max_events: int, host: str | None = None) -> Timeline | None:
    """The Timeline of the first whole batches of a Chrome trace holding at least ``max_events`` events
    (a ``B`` whose ``E`` lies beyond them closes at the last time seen), for a first screen while the
    whole file is read; None when the file has fewer events or its head cannot be read this way (the
    whole read then reports why). Raises only OSError (an unreadable path). Pauses the collector."""
    p = Path(path)
    with collector_paused():
        try:
            acc, whole = _streamed(p, host or p.name.split(".")[0], max_events)
        except (EOFError, ValueError):  # ScanError, ChromeFormatError, TraceFormatError, msgspec's errors
            return None
        return None if acc is None or whole else acc.timeline()


def _streamed(p: Path, host: str, max_events: int | None = None) -> tuple[_Events | None, bool]:
    """(the accumulator of the file's events as the scanner streams them, whether it holds all of them):
    all of them, or the first whole batches holding ``max_events``. None when the keys that decide the
    mapping came after the events (the caller reads the file whole). Raises ScanError, EOFError,
    OSError, ChromeFormatError, TraceFormatError."""
    from gputrace.timeline._lines import open_trace_file
    from gputrace.timeline.formats.chrome.scan import ScanError, scan_chrome

    with open_trace_file(p) as f:
        acc = None
        for what, value in scan_chrome(f, _decoder_for):
            if what == "head":
                acc = _Events.for_header(value, host, str(p))
            elif what == "events":
                if acc is None:  # the scanner yields the head first
                    raise ScanError("events before the header")
                acc.add(value)
                if max_events is not None and acc.idx >= max_events:
                    return acc, False
            elif _late_header(value):
                acc = None
    return acc, True


def _decoder_for(head: dict) -> Decode:
    """How the scanner decodes event batches: typed, as a gputrace export's or another tool's
    events (see ``_Events.add``)."""
    other = head.get("otherData")
    return decode_ours if isinstance(other, dict) and other.get("generator") == GENERATOR else decode_foreign


def _late_header(tail: dict) -> bool:
    other = tail.get("otherData")
    return "baseTimeNanoseconds" in tail or (isinstance(other, dict) and other.get("generator") == GENERATOR)


def _read_whole(p: Path, host: str) -> Timeline:
    from gputrace.timeline._lines import open_trace_file

    try:
        with open_trace_file(p) as f:
            raw = f.read()
    except (EOFError, OSError) as e:
        if isinstance(e, (FileNotFoundError, PermissionError, IsADirectoryError)):
            raise
        raise ChromeFormatError(f"{p}: corrupt or truncated gzip stream ({e})") from None
    except ValueError as e:  # a binary file (TraceFormatError)
        raise ChromeFormatError(str(e)) from None
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        # The array form may legally lack its closing bracket (a trace cut short).
        text = raw.strip()
        if text.startswith(b"[") and not text.endswith(b"]"):
            try:
                doc = orjson.loads(text.rstrip(b",\n\r\t ") + b"]")
            except orjson.JSONDecodeError:
                raise ChromeFormatError(f"{p}: not JSON: {exc}") from None
        else:
            raise ChromeFormatError(f"{p}: not JSON: {exc}") from None
    return from_chrome(doc, host=host, source=str(p))



def from_chrome(doc: Any, host: str = "chrome", source: str = "<chrome>", stats: dict | None = None) -> Timeline:
    """Build a Timeline from a parsed Chrome trace (dict with ``traceEvents`` or a bare list).

    ``stats`` (if given) receives ``events``, ``spans`` and ``skipped`` counts. Raises
    :class:`ChromeFormatError` naming ``source`` and the event index for malformed events.
    """
    if isinstance(doc, dict):
        events = doc.get("traceEvents")
        if not isinstance(events, list):
            raise ChromeFormatError(f"{source}: top-level object has no 'traceEvents' list")
        head = doc
    elif isinstance(doc, list):
        events, head = doc, {}
    else:
        raise ChromeFormatError(f"{source}: expected an object or an array at top level")
    try:
        acc = _Events.for_header(head, host, source)
        acc.add(events)
        return acc.timeline(stats)
    except _MALFORMED as exc:
        raise _malformed(source, exc) from None

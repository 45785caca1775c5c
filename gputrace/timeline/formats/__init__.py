"""Trace formats, one folder (or module) per format, each reading and/or writing itself, and the table that
says which functions do what for each format (as Perfetto keeps one importer per format behind a registry).

``FORMATS`` maps a format name to a ``Format`` row: how to recognise a file (``sniff``), read it (``read``),
read the first events of a big file (``read_head``), read it progressively (``read_steps``) and write a
Timeline as one (``write``). Each role is named by a dotted path (``"package.module:function"``) and imported
on first use (``Format.function``), so importing this table imports no format engine.

A new format is one folder (or module) here and one row below. Outside ``gputrace.timeline``, formats are
reached only through the entrance, ``gputrace.timeline.load`` (an import-linter contract); the commands may
import this table for the names and summaries of the formats (it is light: no numpy, no reader).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gputrace.timeline._lines import PathLike

__all__ = ["FORMATS", "NATIVE", "Format", "sniff", "sniff_head"]

_PKG = "gputrace.timeline.formats"


@dataclass(frozen=True)
class Format:
    """One trace format. Each role is ``"module:function"`` or None (the format does not do that).

    * ``sniff(head: bytes) -> bool``: the file's first bytes are this format; seen raw, or decompressed
      when ``sniff_gzip`` (a gzip file's content);
    * ``read(path, **read_options) -> Timeline`` (``read_many``: ``read(paths, ...)`` reads several files
      into one Timeline); ``read_head(path, max_events) -> Timeline | None``: the first events of a big
      file, for a first screen; ``read_steps(path, interval=, lenient=, stop_event=)``: progressive reads
      (``gputrace.timeline.formats.otlp_jsonl.incremental.iter_load``'s protocol);
    * ``write(tl, path, **write_options) -> int``; ``written``: what was written, a template of ``n`` (what
      ``write`` returned) and ``spans`` (the Timeline's spans);
    * ``convert(read: () -> Timeline, out, source) -> Converted``: only the native format, the import's output
      (read back by the strict reader, or refused with a reason).
    """

    name: str
    summary: str
    sniff: str | None = None
    sniff_gzip: bool = False
    read: str | None = None
    read_many: bool = False
    read_head: str | None = None
    read_steps: str | None = None
    read_options: tuple[str, ...] = ()
    write: str | None = None
    write_options: tuple[str, ...] = ()
    written: str = "{n} spans"
    convert: str | None = None

    def has(self, role: str) -> bool:
        return getattr(self, role) is not None

    def function(self, role: str) -> Callable[..., Any]:
        """The function of ``role`` (imported now). Raises ValueError when the format has none."""
        dotted = getattr(self, role)
        if dotted is None:
            raise ValueError(f"the {self.name} format has no {role.replace('_', ' ')}")
        module, _, name = dotted.partition(":")
        fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
        return fn


#: The format of files no other format claims, and the one ``gputrace import`` writes.
NATIVE = "otlp"

#: The formats, in sniffing order (the native format is the fallback, so it sniffs nothing).
FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("nsys", "Nsight Systems SQLite export (nsys export --type sqlite); .gz compresses",
           sniff=f"{_PKG}.nsys.sniff:is_nsys", sniff_gzip=True,
           read=f"{_PKG}.nsys.read:read_nsys", read_options=("host", "runtime", "correlation_ids")),
    Format("chrome", "Chrome Trace Event / Perfetto JSON (ui.perfetto.dev, chrome://tracing); .gz compresses",
           sniff=f"{_PKG}.chrome.sniff:is_chrome", sniff_gzip=True,
           read=f"{_PKG}.chrome.read:read_chrome", read_head=f"{_PKG}.chrome.read:read_chrome_head",
           read_options=("host",),
           write=f"{_PKG}.chrome.export:write_chrome", write_options=("flows",), written="{n} events"),
    Format("jaeger", "Jaeger JSON for Jaeger UI's 'Upload JSON' (no backend needed)",
           write=f"{_PKG}.jaeger:write_jaeger"),
    Format(NATIVE, "OTLP JSON Lines (gputrace's own trace format)",
           read=f"{_PKG}.otlp_jsonl.read:read_otlp", read_many=True, read_options=("lenient", "workers"),
           read_steps=f"{_PKG}.otlp_jsonl.incremental:iter_load",
           write=f"{_PKG}.otlp_jsonl.write:write_otlp_jsonl", written="{spans} spans in {n} lines",
           convert=f"{_PKG}.otlp_jsonl.convert:write_converted"),
)}


def sniff_head(raw: bytes, unzipped: Callable[[], bytes | None]) -> str:
    """The format of a file whose first bytes are ``raw``; ``unzipped()`` gives the first decompressed bytes
    of a gzip file (None where the gzip stream cannot be read: the native reader reports it)."""
    from gputrace.timeline._lines import is_gzip

    for f in FORMATS.values():
        if f.sniff is not None and not f.sniff_gzip and f.function("sniff")(raw):
            return f.name
    h: bytes | None = raw
    if is_gzip(raw):
        h = unzipped()
        if h is None:
            return NATIVE
    for f in FORMATS.values():
        if f.sniff is not None and f.sniff_gzip and f.function("sniff")(h):
            return f.name
    return NATIVE


def sniff(path: PathLike) -> str:
    """The format name of one file, by its first bytes (gzip looked through), never by its name. Raises OSError."""
    from gputrace.timeline._lines import GzipStream, head

    def unzipped() -> bytes | None:
        try:
            with GzipStream(open(path, "rb")) as g:
                return bytes(g.read(4096))
        except (OSError, EOFError):
            return None

    return sniff_head(head(path), unzipped)

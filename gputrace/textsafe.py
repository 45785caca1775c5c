"""Trace text rendered as inert text: the one place that decides how untrusted strings (span, phase,
lane, host and attribute names, resource values, file names from a command line, error messages that
quote any of them) are shown on a terminal, in rich/Textual markup, in SVG/XML and in error lines.

Contract (every function; pure, thread-safe, never raises for a ``str``; other objects go through ``str()``):

- :func:`visible` makes control characters visible: C0/C1 controls and DEL (ESC starts terminal
  escape sequences, CR/BS overwrite what was printed, newlines break one-line layouts), Unicode line and
  paragraph separators, bidirectional overrides/isolates (they reorder what the reader sees) and lone
  surrogates (they cannot be encoded) become ``\\xNN`` / ``\\uNNNN`` escapes. Everything else, including
  non-ASCII letters and emoji, is kept. A backslash is kept as is, so the escaped form is for reading,
  not for decoding back.
- :func:`markup` is :func:`visible` plus rich markup escaping (every ``[`` becomes ``\\[``, backslashes
  before it and at the end doubled: a value ending in a backslash shows it doubled when nothing follows
  it in the template), for interpolation into a rich markup string printed on a console
  from :func:`console` (emoji codes off, so ``:name:`` stays text). Textual's markup treats backslashes
  differently: in the TUI never interpolate trace text into markup; pass :func:`rich_text` instead.
- :func:`rich_text` is a ``rich.text.Text`` of the visible string: rich and Textual never parse it
  for markup or emoji codes. rich is imported lazily, so the read side may import this module.
- :func:`console` is a ``rich.console.Console`` for reports: emoji codes and highlighting off.
- :func:`xml` is :func:`visible` plus XML escaping of ``& < > " '``: safe in XML 1.0 text and attribute
  values (XML 1.0 forbids most control characters even as character references, hence visible first).

Hand-written: no library does "show this hostile string literally" for all four targets; rich's own
``escape`` covers markup only and ``html.escape`` XML only.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported lazily at run time (the read side imports this module)
    from rich.console import Console
    from rich.text import Text

# C0 controls, DEL, C1 controls; U+061C/U+200E/U+200F marks, U+2028/U+2029 separators, U+202A-U+202E
# embeddings/overrides, U+2066-U+2069 isolates; U+FEFF is kept (harmless); lone surrogates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
# Every '[' (rich.markup.escape only escapes tag-like ones, but rich unescapes '\[' anywhere, so
# escaping all is exact); backslashes just before it are doubled so they stay literal.
_MARKUP_OPEN = re.compile(r"(\\*)(\[)")


def _escape_char(m: re.Match) -> str:
    o = ord(m.group(0))
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


@lru_cache(maxsize=8192)
def _visible_str(s: str) -> str:
    return _UNSAFE.sub(_escape_char, s)


def visible(value: object) -> str:
    """``value`` as a string with every control/reordering character shown as an escape (see module doc)."""
    s = value if isinstance(value, str) else str(value)
    if _UNSAFE.search(s) is None:
        return s
    return _visible_str(s) if len(s) <= 512 else _UNSAFE.sub(_escape_char, s)


def markup(value: object) -> str:
    """``visible(value)`` safe to interpolate into rich or Textual markup (no tags, links or emoji codes)."""
    s = visible(value)
    if "[" in s:
        s = _MARKUP_OPEN.sub(lambda m: m.group(1) * 2 + "\\[", s)
    if s.endswith("\\"):
        # Trailing backslashes would escape the '[' of a tag that follows the value in the template.
        n = len(s) - len(s.rstrip("\\"))
        s += "\\" * n
    return s


def rich_text(value: object, style: str = "") -> Text:
    """A ``rich.text.Text`` of ``visible(value)``: shown literally, never parsed as markup."""
    from rich.text import Text

    return Text(visible(value), style=style)


def report_width(default: int = 160) -> int | None:
    """Width for a report Console: None (rich measures the terminal) when stdout is a terminal; else ``COLUMNS``
    when it holds a positive integer (``COLUMNS=100 gputrace report t.jsonl > r.txt``); else ``default``."""
    import os
    import sys

    if sys.stdout.isatty():
        return None
    cols = os.environ.get("COLUMNS", "").strip()
    return int(cols) if cols.isdigit() and int(cols) > 0 else default


def console(**kw) -> Console:
    """A rich Console for printing reports that contain trace text: emoji-code replacement and
    highlighting off (keyword arguments pass through). Trace text still goes in via :func:`markup`
    or :func:`rich_text`; rich does not escape control characters itself."""
    from rich.console import Console

    kw.setdefault("highlight", False)
    kw.setdefault("emoji", False)
    return Console(**kw)


def xml(value: object) -> str:
    """``visible(value)`` escaped for XML 1.0 text and attribute values."""
    s = visible(value)
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#39;"))


def error_line(message: object) -> str:
    """An error message (which may quote trace text or file names) as one inert line for stderr."""
    return visible(message)

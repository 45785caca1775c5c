"""Checks of one event's fields for the Chrome reader's per-event path, and the error they raise.

:class:`ChromeFormatError` (a ValueError) is the one error of the Chrome reader; the checks here (numbers, times
in microseconds -> nanoseconds, ``pid``/``tid``, ``args``) raise it with a message naming the file, the event
index and the field (``_where``). Pure functions; any thread.
"""

from __future__ import annotations

from typing import Any

from gputrace.timeline.formats.chrome.batch import MAX_TIME_US, ident_ok

__all__ = ["ChromeFormatError"]


class ChromeFormatError(ValueError):
    """A Chrome trace that breaks the format; the message names file, event index and field."""


def _where(ev: dict, src: str, idx: int) -> str:
    return f"{src}: traceEvents[{idx}] ({_short(ev.get('ph'))} {_short(ev.get('name'))})"


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _num(ev: dict, key: str, src: str, idx: int) -> float:
    v: Any = ev.get(key)
    if type(v) not in (int, float):
        raise ChromeFormatError(f"{_where(ev, src, idx)}: field {key!r} must be a number, got {_short(v)}")
    return v


def _ns(ev: dict, key: str, src: str, idx: int, default: Any = None) -> int:
    """Field ``key`` of an event (microseconds) in nanoseconds (``default`` where it is absent, if given)."""
    if default is not None and key not in ev:
        return round(default * 1000)
    return _us_ns(_num(ev, key, src, idx), f"{_where(ev, src, idx)}: field {key!r}")


def _us_ns(v: Any, what: str) -> int:
    """Microseconds -> nanoseconds; ChromeFormatError naming ``what`` unless a finite number below
    ``MAX_TIME_US`` (larger ones would leave int64 once added to a base time or a start)."""
    if type(v) not in (int, float) or not abs(v) < MAX_TIME_US:
        raise ChromeFormatError(f"{what} = {_short(v)} us: not a finite number below {MAX_TIME_US:.0e} us")
    return round(v * 1000)


def _ident(ev: dict, key: str, src: str, idx: int) -> Any:
    """``pid``/``tid``: a string, a 64-bit integer, a finite number or absent; else ChromeFormatError."""
    v = ev.get(key)
    if ident_ok(v):
        return v
    raise ChromeFormatError(f"{_where(ev, src, idx)}: field {key!r} must be a string or a 64-bit integer, "
                            f"got {_short(v)}")


def _args(ev: dict, src: str, idx: int) -> dict:
    a = ev.get("args")
    if a is None:
        return {}
    if type(a) is not dict:
        raise ChromeFormatError(f"{_where(ev, src, idx)}: field 'args' must be an object, got {_short(a)}")
    return a

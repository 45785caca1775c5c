"""The import: a Timeline read from another format's file, written as an OTLP JSON Lines file, with what a read
of that file gives stored as its columnar-cache entry (so the first ``gputrace view`` of it is a cache re-open).

Contract: every file written here is read back by the strict OTLP reader, or the import refuses with a reason
and leaves no file. Before writing, ``unwritable`` names what the reader is known to refuse (no spans, an
attribute under one of gputrace's column keys with a value of the wrong type or size, an integer beyond 64
bits); after writing, ``readback`` predicts what a read of the file gives (the cache entry, for big files);
a file whose read it cannot predict exactly is read back strictly, and removed if that read fails.

Runs on the caller's thread. Raises ValueError naming the input or the output (and what is wrong), OSError.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from itertools import chain
from pathlib import Path
from typing import Any, NamedTuple

from gputrace.timeline import cache
from gputrace.timeline.errors import TraceFormatError
from gputrace.timeline.formats.otlp_jsonl._attr_columns import _INT_BOUNDS, COLUMN_ATTRS
from gputrace.timeline.formats.otlp_jsonl.plan import Plan, groups, span_ids
from gputrace.timeline.formats.otlp_jsonl.read import read_otlp
from gputrace.timeline.formats.otlp_jsonl.readback import cache_entry, readback_timeline, store_cache_entry
from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl
from gputrace.timeline.model import Timeline
from gputrace.timeline.row_attrs import RowAttrs, TemplateAttrs

__all__ = ["Converted", "unwritable", "write_converted"]

_I64 = (-(1 << 63), (1 << 63) - 1)


class Converted(NamedTuple):
    """What an import wrote."""

    spans: int
    lanes: int
    gpus: int
    lines: int


def write_converted(read: Callable[[], Timeline], out: str | Path, source: str = "") -> Converted:
    """Call ``read()`` and write its Timeline to ``out``; then store the cache entry of ``out`` (big outputs;
    ``GPUTRACE_CACHE=0`` turns it off; storing never raises). The Timeline is read here, not passed in, so that
    its columns can move into the cache entry and the rest be freed before the entry is written. ``source``
    names the input in errors. Raises ValueError (nothing written) where the output would not read back."""
    tl = read()
    why = unwritable(tl)
    if why is not None:
        raise ValueError(f"{source or 'input'}: {why}; nothing written")
    plan = (groups(tl), span_ids(tl))
    lines = write_otlp_jsonl(tl, out, plan=plan)
    done = Converted(tl.n, len(tl.lanes), len({ln.device for ln in tl.lanes if ln.device >= 0}), lines)
    if cache.wanted(out):
        entry = cache_entry(tl, out, lines, *plan, consume=True)  # what a read of OUT gives (never raises)
        predicted = entry is not None
    else:  # no entry to store, but the prediction (far cheaper than a read) still vouches for OUT
        entry = None
        predicted = _predicted(tl, out, lines, plan)
    del tl, plan  # (its columns went into the entry's as they were built)
    if not predicted:  # not predicted exactly: the reader itself says whether it reads OUT
        try:
            read_otlp([out], workers=1)
        except TraceFormatError as exc:
            _remove(out)
            raise ValueError(f"{source or 'input'}: the OTLP reader would refuse the output ({exc}); "
                             "nothing written") from None
    store_cache_entry(out, entry)  # the first `view` of OUT re-opens it (never raises)
    return done


def _predicted(tl: Timeline, out: str | Path, lines: int, plan: Plan) -> bool:
    """Whether ``readback`` predicts exactly what a read of ``out`` gives (then the strict reader reads it)."""
    try:
        return readback_timeline(tl, out, lines, *plan, consume=True) is not None
    except Exception:  # noqa: BLE001 - a prediction that fails only means the file is read back to check it
        return False


def _remove(path: str | Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def unwritable(tl: Timeline) -> str | None:
    """Why the OTLP reader would refuse the file written from ``tl`` (one line naming a span and an attribute),
    or None as far as these checks see: no spans; an attribute under one of gputrace's column keys
    (``gputrace.device``, ``gputrace.lane``...) whose value is not of that column's type and size; an integer
    attribute value (or list item) beyond 64 bits. Shared attribute dicts are checked once each."""
    if tl.n == 0:
        return "no spans to import"
    seen: set[int] = set()
    overlay_keys: set[tuple] = set()
    overlay_values: list[tuple] = []
    rows: Mapping[int, Mapping] = tl.attrs  # RowAttrs and TemplateAttrs are Mappings, not dicts
    for row, a in rows.items():
        if type(a) is RowAttrs or type(a) is TemplateAttrs:
            overlay_keys.add(a.keys_)
            overlay_values.append(a.values_)
            shared: Mapping = a.shared
        else:
            shared = a
        if id(shared) in seen:
            continue
        seen.add(id(shared))
        why = _bad_items(shared.items())
        if why is not None:
            return f"span {_name(tl, row)!r} (row {row}): {why}"
    if overlay_values:
        flat = list(chain.from_iterable(overlay_values))
        column_keyed = any(k in COLUMN_ATTRS for ks in overlay_keys for k in ks)
        plain_ints = set(map(type, flat)) <= {int} and (not flat or (_I64[0] <= min(flat) and max(flat) <= _I64[1]))
        if column_keyed or not plain_ints:  # rare: look row by row for the one to name
            for row, a in rows.items():
                if type(a) is RowAttrs or type(a) is TemplateAttrs:
                    why = _bad_items(zip(a.keys_, a.values_, strict=True))
                    if why is not None:
                        return f"span {_name(tl, row)!r} (row {row}): {why}"
    return None


def _name(tl: Timeline, row: int) -> str:
    text = tl.name_of(row)
    return text if len(text) <= 60 else text[:57] + "..."


def _bad_items(items: Iterable[tuple[Any, Any]]) -> str | None:
    for k, v in items:
        col = COLUMN_ATTRS.get(k)
        if col is not None:
            name, typ = col
            lo, hi = _INT_BOUNDS.get(name, _I64)
            if typ == "int" and not (type(v) is int and lo <= v <= hi):
                return f"attribute {k} = {_short(v)} is not an integer from {lo} to {hi}"
            if typ == "str" and type(v) is not str:
                return f"attribute {k} = {_short(v)} is not a string"
        elif not _ints_fit(v):
            return f"attribute {_short(k)} = {_short(v)} holds an integer beyond 64 bits"
    return None


def _ints_fit(v: Any) -> bool:
    if type(v) is int:
        return _I64[0] <= v <= _I64[1]
    if type(v) in (list, tuple):
        return all(_ints_fit(x) for x in v)
    if type(v) is dict:
        return all(_ints_fit(x) for x in v.values())
    return True


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."

"""The import: a Timeline read from another format's file, written as an OTLP JSON Lines file, with what a read
of that file gives stored as its columnar-cache entry (so the first ``gputrace view`` of it is a cache re-open).

Runs on the caller's thread. Raises what the read and the write raise (ValueErrors naming the file, OSError).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from gputrace.timeline.formats.otlp_jsonl.plan import groups, span_ids
from gputrace.timeline.formats.otlp_jsonl.readback import cache_entry, store_cache_entry
from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl
from gputrace.timeline.model import Timeline

__all__ = ["Converted", "write_converted"]


class Converted(NamedTuple):
    """What an import wrote."""

    spans: int
    lanes: int
    gpus: int
    lines: int


def write_converted(read: Callable[[], Timeline], out: str | Path) -> Converted:
    """Call ``read()`` and write its Timeline to ``out``; then store the cache entry of ``out`` (big outputs;
    ``GPUTRACE_CACHE=0`` turns it off; storing never raises). The Timeline is read here, not passed in, so that
    its columns can move into the cache entry and the rest be freed before the entry is written."""
    tl = read()
    plan = (groups(tl), span_ids(tl))
    lines = write_otlp_jsonl(tl, out, plan=plan)
    done = Converted(tl.n, len(tl.lanes), len({ln.device for ln in tl.lanes if ln.device >= 0}), lines)
    entry = cache_entry(tl, out, lines, *plan, consume=True)  # what a read of OUT gives (never raises)
    del tl, plan  # (its columns went into the entry's as they were built)
    store_cache_entry(out, entry)  # the first `view` of OUT re-opens it (never raises)
    return done

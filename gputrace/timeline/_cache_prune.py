"""Keeping the timeline cache directory small: ``prune`` (after every store) and ``clear``.

``prune`` drops entries whose trace is gone or that are not of this cache format, temporary files left by a
store that died, then the least recently used entries past ``$GPUTRACE_CACHE_MAX_BYTES`` (default 4 GiB);
``clear`` removes every entry. A part of :mod:`gputrace.timeline.cache`; import these names from there.

Both swallow OSError (a file that cannot be removed stays) and return how many files they removed.
Thread-safe: several processes may prune at once (each removal is one unlink; a missing file is skipped).
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from gputrace.timeline._cache_file import _open_entry, _read_prefix
from gputrace.timeline._cache_key import _entry, _env_int, cache_dir

__all__ = ["clear", "prune"]


#: A temporary entry older than this is a leftover of a store that died (a live store takes seconds).
_STALE_TMP_S = 3600


def _source_of(entry: Path) -> str | None:
    """The trace path an entry was stored for, from its prefix; None where it is not a current entry."""
    try:
        f = _open_entry(entry)
        if f is None:
            return None
        with f:
            prefix = _read_prefix(f, os.fstat(f.fileno()).st_size)
    except (OSError, UnicodeError):
        return None
    return None if prefix is None else prefix[0]


def prune(d: Path | None = None) -> int:
    """Drop the entries whose trace is gone, those not of this format (an older gputrace's, damaged ones),
    temporary files left by a store that died, then the least recently used entries past
    ``$GPUTRACE_CACHE_MAX_BYTES``. Run after every store; returns how many files were removed."""
    d = cache_dir() if d is None else d
    removed = 0
    entries = []
    now = time.time()
    try:
        listing = list(d.iterdir())
    except OSError:
        return 0
    for p in listing:
        try:
            st = p.lstat()
            if p.name.startswith(".tmp-"):
                if now - st.st_mtime > _STALE_TMP_S:
                    p.unlink()
                    removed += 1
                continue
            if p.suffix != ".gtc":
                continue
            src = _source_of(p) if stat.S_ISREG(st.st_mode) else None
            if src is None or not os.path.isfile(src) or _entry(src).name != p.name:
                p.unlink()
                removed += 1
                continue
        except OSError:
            continue
        entries.append((st.st_mtime, st.st_size, p))
    limit = _env_int("GPUTRACE_CACHE_MAX_BYTES", 4 << 30)
    total = sum(s for _, s, _ in entries)
    for _, size, p in sorted(entries, key=lambda e: e[0]):
        if total <= limit:
            break
        try:
            p.unlink()
            total -= size
            removed += 1
        except OSError:
            pass
    return removed


def clear() -> int:
    """Remove every entry (and leftover temporary files); returns how many files were removed."""
    n = 0
    d = cache_dir()
    for p in list(d.glob("*.gtc")) + list(d.glob(".tmp-*")):
        try:
            p.unlink()
            n += 1
        except OSError:
            pass
    return n

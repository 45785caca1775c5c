"""The layout of a timeline cache entry file, and reading its prefix without trusting it.

Layout (little-endian throughout): magic | source path length (u32) | source path | header length (u64) |
CRC-32 of the header | CRC-32 of the body | msgpack header | columns, each 64-byte aligned. ``_open_entry``
opens an entry without following a symlink and without blocking (None for anything but a regular file);
``_read_prefix`` returns None for a prefix that is not ours or whose lengths do not fit the file. A part of
:mod:`gputrace.timeline.cache` (``load`` and ``store`` write and check the rest; ``prune`` reads prefixes).

Raises OSError (from ``_open_entry`` and reads of the open file); callers turn it into a miss. Thread-safe
(no shared state).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

# ---- the entry file ----------------------------------------------------------------------
# Layout: _MAGIC | source path length (u32) | source path (UTF-8, surrogateescape) | header length (u64) |
# CRC-32 of the header (u32) | CRC-32 of the body (u32) | header (msgpack) | body (the columns, 64-byte aligned).
# The source path comes first so that pruning reads a few bytes per entry; little-endian throughout.
_MAGIC = b"GPUTRC4\n"
_ALIGN = 64
_INDEX = ("phase", "lane", "resource", "trace")  # columns indexing a table: checked before use
_MAX_PATH = 1 << 16


def _pad(n: int) -> int:
    return -n % _ALIGN


def _open_entry(entry: Path):
    """The entry file opened for reading, or None where it is not a regular file (a FIFO, a directory, a
    symlink): opened without blocking and without following a symlink, then checked. Raises OSError."""
    fd = os.open(entry, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_prefix(f, size: int) -> tuple[str, int, int, int] | None:
    """(source path, header length, header CRC, body CRC) of an open entry of ``size`` bytes, positioned at
    its header; None where the prefix is not ours or its lengths do not fit in the file."""
    fixed = f.read(len(_MAGIC) + 4)
    if len(fixed) != len(_MAGIC) + 4 or fixed[:len(_MAGIC)] != _MAGIC:
        return None
    plen = int.from_bytes(fixed[len(_MAGIC):], "little")
    if plen > _MAX_PATH or len(_MAGIC) + 4 + plen + 16 > size:
        return None
    raw = f.read(plen)
    rest = f.read(16)
    if len(raw) != plen or len(rest) != 16:
        return None
    mlen = int.from_bytes(rest[:8], "little")
    if f.tell() + mlen > size:
        return None
    return (raw.decode("utf-8", "surrogateescape"), mlen, int.from_bytes(rest[8:12], "little"),
            int.from_bytes(rest[12:], "little"))

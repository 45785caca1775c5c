"""Where the timeline cache lives, whether a read uses it, and what identifies a trace's content.

Settings from the environment (``GPUTRACE_CACHE``, ``GPUTRACE_CACHE_DIR`` / ``XDG_CACHE_HOME``,
``GPUTRACE_CACHE_MIN_BYTES``), the source key of a trace (absolute path, size, mtime, ctime, inode, device and
a content fingerprint), the entry path of a trace and the cache format version. A part of
:mod:`gputrace.timeline.cache`, whose docstring states the design; import these names from there.

Raises nothing: ``source_key`` and ``wanted`` turn OSError into None / False (``_fingerprint`` alone raises
OSError, for ``source_key`` to catch). Thread-safe (no shared state).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

__all__ = ["EDGE_BYTES", "FORMAT", "FULL_HASH_BYTES", "SAMPLES", "SAMPLE_BYTES", "cache_dir", "enabled", "min_bytes",
           "source_key", "wanted"]

# 2: RowAttrs rows stored as (shared dict, overlay keys, int64 overlay values); 3: TemplateAttrs too; 4: the
# source path in front, CRC-32s of header and columns, ctime and a content fingerprint in the key
FORMAT = 4

#: Files up to this size are fingerprinted by a hash of all their bytes.
FULL_HASH_BYTES = 1 << 20
#: Bigger files: their first and last EDGE_BYTES, and SAMPLES blocks of SAMPLE_BYTES spread evenly between.
EDGE_BYTES = 64 << 10
SAMPLES = 16
SAMPLE_BYTES = 4096


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, ""))
    except ValueError:
        return default


def enabled() -> bool:
    return os.environ.get("GPUTRACE_CACHE", "1").strip().lower() not in ("0", "off", "no", "false")


def min_bytes() -> int:
    return _env_int("GPUTRACE_CACHE_MIN_BYTES", 16 << 20)


def cache_dir() -> Path:
    d = os.environ.get("GPUTRACE_CACHE_DIR")
    if d:
        return Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gputrace" / "timelines"


def source_key(path) -> dict | None:
    """What identifies the trace's content: absolute path, size, mtime, ctime, inode, device and a fingerprint
    of the bytes (see the module docstring; None: no regular file, or it cannot be read)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return None
        fingerprint = _fingerprint(path, st.st_size)
    except OSError:
        return None
    return {"path": os.path.abspath(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "ctime_ns": st.st_ctime_ns, "ino": st.st_ino, "dev": st.st_dev, "content": fingerprint}


def _fingerprint(path, size: int) -> str:
    """A hash of the file's bytes: all of them up to ``FULL_HASH_BYTES``, else its edges and evenly spread
    samples (cheap for a big file: about 200 KB read). Raises OSError."""
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        if size <= FULL_HASH_BYTES:
            h.update(f.read(FULL_HASH_BYTES + 1))
        else:
            h.update(f.read(EDGE_BYTES))
            span = size - 2 * EDGE_BYTES - SAMPLE_BYTES
            for i in range(SAMPLES):
                f.seek(EDGE_BYTES + max(span, 0) * (2 * i + 1) // (2 * SAMPLES))
                h.update(f.read(SAMPLE_BYTES))
            f.seek(max(size - EDGE_BYTES, 0))
            h.update(f.read(EDGE_BYTES))
    return h.hexdigest()


def wanted(path) -> bool:
    """Whether reads of ``path`` go through the cache (enabled, big enough, a regular file)."""
    if not enabled():
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size >= min_bytes()


def _entry(abspath: str) -> Path:
    digest = hashlib.blake2b(abspath.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
    return cache_dir() / (digest + ".gtc")


def _version() -> str:
    import gputrace

    return f"{FORMAT}:{gputrace.__version__}"


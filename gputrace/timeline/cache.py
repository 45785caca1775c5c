"""Columnar cache of read traces: the second open of a big trace loads numpy columns, not JSON.

Where: ``$GPUTRACE_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/gputrace/timelines``, else
``~/.cache/gputrace/timelines`` (created private, mode 0700). One file per trace,
``<hash of the trace's absolute path>.gtc``. Clear it with ``rm -rf ~/.cache/gputrace/timelines`` (or
``gputrace.timeline.cache.clear()``); ``GPUTRACE_CACHE=0`` turns it off.

What: a trace of at least ``min_bytes()`` (``$GPUTRACE_CACHE_MIN_BYTES``, default 16 MiB) read by the
entrance (``gputrace.timeline.load``: ``view``, ``report``, ``compare``, ``export``...) is stored after
it is read, as one file: a magic line, a msgpack header (the tables: phases, lanes, resources, trace ids,
attribute dicts (shared ones once; a ``RowAttrs`` or ``TemplateAttrs`` row as its shared dict plus int64
overlay values in columns), names, load report, and where each column lies) and the raw little-endian columns,
64-byte aligned. A load is one ``readinto`` and zero-copy ``np.frombuffer`` views (a zip of ``.npy``
files measured 1.5x slower: member CRCs and copies). No pickle: msgpack decodes only plain values, and the
entry is checked for consistency (sizes, lane offsets, table indices) before it is used.

Invalidation: an entry records the trace's absolute path, size, mtime and ctime (ns), inode and device as
they were *before* the read, a fingerprint of its content (a hash of the whole file up to
``FULL_HASH_BYTES``, else of its first and last ``EDGE_BYTES`` and ``SAMPLES`` blocks spread between them:
a few hundred KB read, however big the file), plus the cache format and gputrace version; any difference
is a miss (so a file that changed while it was read is read again next time, and one rewritten at the same
size with its old modification time restored, as ``cp --preserve=timestamps`` does, is not served stale:
its ctime and its content differ). ``gputrace import`` stores the entry of the
file it has just written, keyed to the file as written, with the Timeline a read of it gives
(``gputrace.timeline.formats.otlp_jsonl.readback``), so the first open of an import is a re-open. A strict read uses
only entries whose load had no problems. Entries are written to a temporary file in the cache directory
and renamed; each store then drops the entries whose trace is gone (or that an older gputrace wrote), and past
``$GPUTRACE_CACHE_MAX_BYTES`` (default 4 GiB) the least recently used entries.

Damaged entries: the header and the columns each carry a CRC-32, checked before anything is decoded, and the
sizes the entry states must add up to the entry file's size before any buffer is allocated; the entry is
opened without following a symlink and without blocking (a FIFO or a directory at its path is a miss). So a
flipped bit, a truncated or absurd entry is a miss, never a traceback, a hang, an out-of-memory or wrong data.

Every function swallows OSError and malformed entries (a miss, never a failed read): the cache can
only make a read faster. Thread-safe (no shared state; atomic renames).

This module holds ``load`` and ``store`` and re-exports the public names of its parts: ``_cache_key``
(settings, ``source_key``, ``wanted``, the entry path and format version), ``_cache_file`` (the entry file's
layout and prefix), ``_cache_attrs`` (row attributes as tables and back) and ``_cache_prune`` (``prune``,
``clear``). Import them from here.
"""

from __future__ import annotations

import os
import tempfile
import zlib

import msgspec
import numpy as np

from gputrace.timeline._cache_attrs import _attr_tables, _attrs
from gputrace.timeline._cache_file import _INDEX, _MAGIC, _MAX_PATH, _open_entry, _pad, _read_prefix
from gputrace.timeline._cache_key import (
    EDGE_BYTES as EDGE_BYTES,
    FORMAT as FORMAT,
    FULL_HASH_BYTES as FULL_HASH_BYTES,
    SAMPLE_BYTES as SAMPLE_BYTES,
    SAMPLES as SAMPLES,
    _entry,
    _version,
    cache_dir,
    enabled,
    min_bytes,
    source_key,
    wanted as wanted,
)
from gputrace.timeline._cache_prune import clear, prune
from gputrace.timeline.errors import LoadReport, TraceFormatError
from gputrace.timeline.model import COLUMNS, Lane, Timeline

__all__ = ["cache_dir", "enabled", "min_bytes", "source_key", "load", "store", "clear", "prune"]


# ---- load --------------------------------------------------------------------------------
def load(path, lenient: bool = False) -> Timeline | None:
    """The cached Timeline of ``path`` if a valid entry exists (strict reads: only entries whose
    load had no problems), else None."""
    key = source_key(path)
    if key is None:
        return None
    entry = _entry(key["path"])
    try:
        f = _open_entry(entry)
        if f is None:
            return None
        with f:
            size = os.fstat(f.fileno()).st_size
            prefix = _read_prefix(f, size)
            if prefix is None or prefix[0] != key["path"]:
                return None
            _, mlen, head_crc, body_crc = prefix
            head = f.read(mlen)
            if len(head) != mlen or zlib.crc32(head) != head_crc:
                return None
            meta = msgspec.msgpack.decode(head)
            if type(meta) is not dict or meta.get("version") != _version() or meta.get("source") != key:
                return None
            if not lenient and not meta["report"]["ok"]:
                return None
            nbody = meta["body"]
            if type(nbody) is not int or f.tell() + nbody != size:  # the file holds exactly what it says
                return None
            body = bytearray(nbody)
            if f.readinto(body) != nbody or f.read(1) or zlib.crc32(body) != body_crc:
                return None
        arrays = {name: np.frombuffer(body, dtype=np.dtype(dt), count=cnt, offset=off)
                  for name, dt, cnt, off in meta["arrays"]}
        tl = _timeline(meta, arrays)
        if tl is None:
            return None
        os.utime(entry)  # recently used (for eviction)
        return tl
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, OverflowError, RecursionError,
            msgspec.DecodeError):
        return None


def _timeline(meta: dict, arrays: dict) -> Timeline | None:
    """The Timeline of a decoded entry, or None if it is inconsistent."""
    cols = {k: arrays[k] for k in COLUMNS}
    n = len(cols["start"])
    offsets = arrays["lane_offsets"]
    lanes = [Lane(h, p, d, nm) for h, p, d, nm in meta["lanes"]]
    tables = {"phase": len(meta["phases"]), "lane": len(lanes), "resource": len(meta["resources"]),
              "trace": len(meta["trace_ids"])}
    if any(len(c) != n or c.dtype != COLUMNS[k] for k, c in cols.items()) or len(offsets) != len(lanes) + 1:
        return None
    if n and (int(offsets[-1]) != n or any(int(cols[k].max()) >= max(tables[k], 1) for k in _INDEX)):
        return None
    attrs = _attrs(meta, arrays)
    if attrs is None:
        return None
    names = {int(r): str(v) for r, v in meta["names"]}
    tl = Timeline(cols=cols, phases=list(meta["phases"]), lanes=lanes, lane_offsets=offsets,
                  resources=list(meta["resources"]), trace_ids=list(meta["trace_ids"]), attrs=attrs, names=names)
    r = meta["report"]
    rep = LoadReport(files=list(r["files"]), lines=r["lines"], spans=r["spans"], lines_skipped=r["lines_skipped"],
                     spans_skipped=r["spans_skipped"])
    rep.reasons.update(dict(r["reasons"]))
    rep.problems = [TraceFormatError(*p) for p in r["problems"]]
    tl.load_report = rep
    return tl


# ---- store -------------------------------------------------------------------------------
def store(path, tl: Timeline, key: dict | None) -> bool:
    """Write ``tl`` as the entry of ``path``, whose ``source_key`` taken *before* reading was ``key``.
    Returns whether an entry was written (False when the file changed since, or on any error)."""
    if key is None or not enabled() or source_key(path) != key:
        return False
    d = cache_dir()
    tmp = None
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        rows = np.fromiter(tl.attrs.keys(), dtype=np.int64, count=len(tl.attrs))
        dicts, ix, okey, overlay_keys, overlay_kinds, ovals = _attr_tables(tl)
        arrays = {**{k: np.ascontiguousarray(tl.cols[k], dtype=COLUMNS[k].newbyteorder("<")) for k in COLUMNS},
                  "lane_offsets": np.ascontiguousarray(tl.lane_offsets, dtype="<i8"), "attr_rows": rows.astype("<i8"),
                  "attr_ix": ix.astype("<i4"), "attr_okeys": okey.astype("<i4"), "attr_ovals": ovals.astype("<i8")}
        layout, off = [], 0
        for name, arr in arrays.items():
            layout.append([name, arr.dtype.str, len(arr), off])
            off += arr.nbytes + _pad(arr.nbytes)
        rep = tl.load_report if isinstance(tl.load_report, LoadReport) else LoadReport()
        meta = {
            "version": _version(), "source": key, "arrays": layout, "body": off,
            "phases": tl.phases, "lanes": [[ln.host, ln.pid, ln.device, ln.name] for ln in tl.lanes],
            "resources": tl.resources, "trace_ids": tl.trace_ids, "attr_dicts": dicts, "overlay_keys": overlay_keys,
            "overlay_kinds": overlay_kinds,
            "names": [[r, v] for r, v in tl.names.items()],
            "report": {"ok": rep.ok, "files": rep.files, "lines": rep.lines, "spans": rep.spans,
                       "lines_skipped": rep.lines_skipped, "spans_skipped": rep.spans_skipped,
                       "reasons": list(rep.reasons.items()),
                       "problems": [[p.path, p.line, p.field, p.message, p.reason] for p in rep.problems]},
        }
        head = msgspec.msgpack.encode(meta)
        body_crc = 0
        for arr in arrays.values():
            body_crc = zlib.crc32(b"\0" * _pad(arr.nbytes), zlib.crc32(arr.data.cast("B"), body_crc))
        src = key["path"].encode("utf-8", "surrogateescape")
        if len(src) > _MAX_PATH:
            return False
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".gtc", dir=d)
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC + len(src).to_bytes(4, "little") + src + len(head).to_bytes(8, "little")
                    + zlib.crc32(head).to_bytes(4, "little") + body_crc.to_bytes(4, "little") + head)
            for arr in arrays.values():
                f.write(arr.data.cast("B"))
                f.write(b"\0" * _pad(arr.nbytes))
        os.replace(tmp, _entry(key["path"]))
        tmp = None
        prune(d)
        return True
    except (OSError, TypeError, ValueError, OverflowError, msgspec.EncodeError):
        return False
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass

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
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import time
import zlib
from itertools import chain, repeat
from pathlib import Path

import msgspec
import numpy as np

from gputrace.timeline.errors import LoadReport, TraceFormatError
from gputrace.timeline.model import COLUMNS, Lane, Timeline
from gputrace.timeline.row_attrs import RowAttrs, TemplateAttrs

__all__ = ["cache_dir", "enabled", "min_bytes", "source_key", "load", "store", "clear", "prune"]

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


def _attrs(meta: dict, arrays: dict) -> dict | None:
    """Row -> attributes: plain dicts (shared ones stored once) and ``RowAttrs`` rebuilt over their shared
    dict from the overlay keys and int64 values (a million kernel launches stay a few dicts). None if
    inconsistent."""
    dicts = meta["attr_dicts"]
    rows, ix, okey = arrays["attr_rows"], arrays["attr_ix"], arrays["attr_okeys"]
    vals = arrays["attr_ovals"]
    keys = [tuple(str(k) for k in ks) for ks in meta["overlay_keys"]]
    kinds = [_OVERLAID.get(str(c)) for c in meta["overlay_kinds"]]
    if len(ix) != len(rows) or len(okey) != len(rows) or (len(ix) and int(ix.max()) >= len(dicts)):
        return None
    if len(kinds) != len(keys) or None in kinds:
        return None
    table = np.empty(len(dicts), dtype=object)
    for j, d in enumerate(dicts):  # (one by one: a list of dicts could be read as nested sequences)
        table[j] = d
    objs = table[ix]  # object-array gathers and assignments: no Python loop per row
    over = np.flatnonzero(okey >= 0)
    if len(over):
        if int(okey.max()) >= len(keys):
            return None
        width = np.array([len(k) for k in keys], dtype=np.int64)[okey[over]]
        if int(width.sum()) != len(vals):
            return None
        start = np.zeros(len(over), np.int64)
        np.cumsum(width[:-1], out=start[1:])
        for k in np.unique(okey[over]).tolist():  # a few overlay key sets: one pass each
            sel = np.flatnonzero(okey[over] == k)
            w = len(keys[k])
            at = start[sel]
            shared = objs[over[sel]].tolist()
            cls = kinds[k]
            if cls is TemplateAttrs and not all(type(dicts[j]) is dict and set(keys[k]) <= dicts[j].keys()
                                                for j in np.unique(ix[over[sel]]).tolist()):
                return None  # a template is a dict holding every key of its rows
            values = zip(*(vals[at + j].tolist() for j in range(w)), strict=True) if w else repeat((), len(sel))
            made = map(cls, shared, repeat(keys[k]), values)
            objs[over[sel]] = np.fromiter(made, dtype=object, count=len(sel))
    elif len(vals):
        return None
    objs = objs.tolist()
    return dict(zip(rows.tolist(), objs, strict=True))


_AttrTables = tuple[list[dict], np.ndarray, np.ndarray, list[list[str]], list[str], np.ndarray]
#: The overlaid Mappings a cache entry rebuilds, by the name it stores for their key sets.
_OVERLAID: dict[str, type[RowAttrs]] = {"row": RowAttrs, "template": TemplateAttrs}
_KIND_OF = {v: k for k, v in _OVERLAID.items()}


def _attr_tables(tl: Timeline) -> _AttrTables:
    """(dicts, dict index per attribute row, overlay-key index per row (-1: a plain dict), overlay key
    sets, their kinds (``_OVERLAID``), overlay values): shared dicts once, a ``RowAttrs`` or
    ``TemplateAttrs`` with int64 overlay values as its shared dict plus those values (any other is stored
    as a plain dict)."""
    values = list(tl.attrs.values())  # dicts and RowAttrs
    return _attr_tables_int64(values) or _attr_tables_rowwise(values)


def _attr_tables_int64(values: list) -> _AttrTables | None:
    """``_attr_tables`` where every ``RowAttrs`` overlay holds int64 values (one check over all of them:
    a million kernel launches), else None."""
    dicts: list[dict] = []
    seen: dict[int, int] = {}  # id(dict) -> index: shared attribute dicts are stored once
    key_ix: dict[tuple, int] = {}
    ix: list[int] = []
    okey: list[int] = []
    overlays: list[tuple] = []
    for a in values:
        if type(a) in _KIND_OF:
            ks = (type(a), a.keys_)
            k = key_ix.get(ks)
            if k is None:
                k = key_ix[ks] = len(key_ix)
            okey.append(k)
            overlays.append(a.values_)
            a = a.shared
        else:
            okey.append(-1)
        d = seen.get(id(a))
        if d is None:
            d = seen[id(a)] = len(dicts)
            dicts.append(a if type(a) is dict else dict(a))  # other Mappings are stored as plain dicts
        ix.append(d)
    flat = list(chain.from_iterable(overlays))
    if flat and not (set(map(type, flat)) == {int} and -(1 << 63) <= min(flat) and max(flat) < (1 << 63)):
        return None
    return (dicts, np.array(ix, dtype=np.int32), np.array(okey, dtype=np.int32), [list(k) for _, k in key_ix],
            [_KIND_OF[c] for c, _ in key_ix], np.array(flat, dtype=np.int64))


def _attr_tables_rowwise(values: list) -> _AttrTables:
    """``_attr_tables`` deciding row by row (some overlay holds other values)."""
    dicts: list[dict] = []
    seen: dict[int, int] = {}
    key_ix: dict[tuple, int] = {}
    n = len(values)
    ix = np.empty(n, dtype=np.int32)
    okey = np.full(n, -1, dtype=np.int32)
    flat: list = []
    lo, hi = -(1 << 63), (1 << 63) - 1
    for j, a in enumerate(values):
        if type(a) in _KIND_OF and all(type(v) is int and lo <= v <= hi for v in a.values_):
            ks = (type(a), a.keys_)
            k = key_ix.get(ks)
            if k is None:
                k = key_ix[ks] = len(key_ix)
            okey[j] = k
            flat.extend(a.values_)
            a = a.shared
        d = seen.get(id(a))
        if d is None:
            d = seen[id(a)] = len(dicts)
            dicts.append(a if type(a) is dict else dict(a))  # other Mappings are stored as plain dicts
        ix[j] = d
    kinds = [_KIND_OF[c] for c, _ in key_ix]
    return dicts, ix, okey, [list(k) for _, k in key_ix], kinds, np.array(flat, dtype=np.int64)


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

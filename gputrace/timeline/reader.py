"""Read OTLP JSON Lines trace files into a ``Timeline``.

Reads files written by gputrace, by the official ``opentelemetry-exporter-otlp-json-file``
package and by the OpenTelemetry Collector's file exporter: one ``ExportTraceServiceRequest`` per
line, lines in any order, any number of resources per line and files per load, gzip-compressed
files (detected by their magic bytes, whatever the name), blank lines ignored.

Span -> row mapping: lane = (resource ``host.name``, ``process.pid``, ``gputrace.device``
(absent: -1), ``gputrace.lane`` (absent: ``thread:<thread.name or thread.id>``, else
``span:<service.name>``)); phase = span name; columns from ``gputrace.*`` attributes; everything
else in ``Timeline.attrs``. See docs/trace-format.md.

Errors: ``TraceFormatError`` naming file, line and field. ``lenient=True`` skips what cannot be
read and records it in ``Timeline.load_report`` (a ``LoadReport``). Nothing from a trace is ever
executed or unpickled: it is parsed as JSON only.

``TraceLoader`` is the incremental core shared with ``iter_load``/``follow``; it is not
thread-safe (feed it from one thread).

Fast path (``_fast``): lines are first decoded with their span attributes kept as raw JSON, and
the attributes of many lines are checked and parsed together with numpy. Lines are queued and
*resolved* in order before anything observable happens (a column batch, an error, the next
file), so results, errors and their order are those of the general path; a line whose attributes
the fast parser declines is decoded again with the general decoder.
"""

from __future__ import annotations

import gzip
import operator
import os
import re
from typing import Iterable, Iterator, Sequence, Union

import msgspec
import numpy as np
import orjson

from gputrace.timeline._columns import Interner, spans_to_columns
from gputrace.timeline._fast import lean_decoder, parse_attributes
from gputrace.timeline.errors import LoadReport, TraceFormatError
from gputrace.timeline.model import COLUMNS, Timeline
from gputrace.timeline.otlp_schema import KeyValue, Span, TraceRequest, py_value, request_decoder

__all__ = ["read_trace", "TraceLoader", "TraceFormatError", "LoadReport", "open_trace_file"]

PathLike = Union[str, "os.PathLike[str]"]

#: Spans decoded before they are turned into columns (bounds the memory of decoded objects).
BATCH_SPANS = 32768
#: Queued fast-decoded spans parsed together (small enough for the numpy work to stay in cache).
FAST_GROUP_SPANS = 8192
#: After this many queued lines in a row declined by the fast parser, a loader stops trying it
#: (a foreign writer's layout: each line would otherwise be decoded twice).
FAST_GIVE_UP_LINES = 64
_CHUNK = 1 << 22
_g_attributes = operator.attrgetter("attributes")
_GZIP_MAGIC = b"\x1f\x8b"


def open_trace_file(path: PathLike):
    """Open a trace file for binary reading, transparently gunzipping. Raises TraceFormatError
    for a binary (non-text, non-gzip) file and OSError if it cannot be opened."""
    f = open(path, "rb")
    head = f.read(4096)
    f.seek(0)
    if head[:2] == _GZIP_MAGIC:
        f.close()
        return gzip.open(path, "rb")
    nul = head.find(b"\x00")
    if nul >= 0:
        f.close()
        raise TraceFormatError(path, None, None, f"not a text file (binary data: NUL byte at offset {nul}); "
                               "expected OTLP JSON Lines", reason="binary file")
    return f


def iter_lines(f, chunk: int = _CHUNK) -> Iterator[tuple[bytes, bool, int]]:
    """Yield ``(line, terminated, bytes_consumed)`` from a binary stream, one line at a time.
    ``terminated`` is False only for a last line without a newline."""
    buf = b""
    consumed = 0
    while True:
        data = f.read(chunk)
        if not data:
            break
        lines = data.split(b"\n")  # the chunk is split as read: only the carried-over part is copied again
        if buf:
            lines[0] = buf + lines[0]
        buf = lines.pop()
        for ln in lines:
            consumed += len(ln) + 1
            yield ln, True, consumed
    if buf:
        consumed += len(buf)
        yield buf, False, consumed


_PATH_RE = re.compile(r"\[(\d+)\]|\.?([A-Za-z_][A-Za-z0-9_]*)")
_TYPE_WORDS = {"int": "integer string", "str": "string", "float": "number", "bool": "true/false",
               "object": "object", "array": "array", "null": "null"}


def _value_at(obj, path: str):
    for m in _PATH_RE.finditer(path):
        if m.group(1) is not None:
            obj = obj[int(m.group(1))]
        else:
            obj = obj[m.group(2)]
    return obj


def _short(x, n: int = 60) -> str:
    r = repr(x)
    return r if len(r) <= n else r[: n - 3] + "..."


def _describe_msgspec_error(e: Exception, line: bytes) -> tuple[str | None, str, str]:
    """msgspec error -> (field path, message, reason)."""
    msg = str(e)
    if isinstance(e, msgspec.ValidationError):
        text, _, at = msg.partition(" - at `")
        path = at.rstrip("`")
        path = path[2:] if path.startswith("$.") else ("" if path == "$" else path)
        m = re.match(r"Object missing required field `(\w+)`", text)
        if m:
            fld = f"{path}.{m.group(1)}" if path else m.group(1)
            if fld == "resourceSpans":
                return None, "not an OTLP trace request (no resourceSpans key)", "not OTLP"
            return fld, "missing required field", "missing field"
        m = re.match(r"Expected `(\w+)`, got `(\w+)`", text)
        if m:
            want = _TYPE_WORDS.get(m.group(1), m.group(1))
            try:
                got = _short(_value_at(orjson.loads(line), path)) if path else m.group(2)
            except Exception:  # noqa: BLE001 - best effort: the value is only for the message
                got = m.group(2)
            if not path:
                return None, f"expected a JSON object (an OTLP ExportTraceServiceRequest), got {m.group(2)}", "not OTLP"
            return path, f"expected {want}, got {got}", "bad field"
        return path or None, text[:1].lower() + text[1:], "bad field"
    if "truncated" in msg:
        return None, "truncated line (the JSON object is incomplete)", "truncated line"
    return None, f"not JSON ({msg})", "not JSON"


class TraceLoader:
    """Builds a Timeline from OTLP JSON lines fed one at a time (incremental; one thread).

    ``feed(path, line_no, line, terminated)`` raises ``TraceFormatError`` unless ``lenient``
    (an error may surface at a later ``feed``, ``flush`` or ``timeline`` call, but always before
    anything that follows it in the input); ``timeline()`` returns everything fed so far
    (cached until more spans arrive). ``fast=False`` uses only the general decoder (same
    results, slower; for tests and benchmarks).
    """

    def __init__(self, lenient: bool = False, batch_spans: int = BATCH_SPANS, fast: bool = True) -> None:
        self.lenient = lenient
        self.batch_spans = batch_spans
        self.fast = fast
        self._lean: list[tuple] = []  # queued fast-decoded lines: (path, line_no, line, terminated, req, nspans)
        self._lean_spans = 0
        self._declined = 0  # queued lines declined in a row by the fast parser
        self.fast_lines = 0  # lines added through the fast path (for tests and benchmarks)
        self._pending_fast: list[tuple] = []  # per pending segment: (FastAttrs or None, first span index in it)
        self.report = LoadReport()
        self.it = Interner()
        self._pending: list[Span] = []
        self._pending_res: list[tuple[int, int]] = []  # (resource index, count)
        self._pending_where: list[tuple[int, str, int, int, str]] = []  # (start, path, line, count, field prefix)
        self._chunks: list[dict[str, np.ndarray]] = []
        self._chunk_attrs: list[dict[int, dict]] = []
        self._rows = 0
        self._cached: Timeline | None = None

    # ---- feeding ---------------------------------------------------------------------
    def feed(self, path: PathLike, line_no: int, line: bytes, terminated: bool = True) -> None:
        line = line.strip()
        if not line:
            return
        self.report.lines += 1
        if self.fast:
            try:
                req = lean_decoder.decode(line)
            except (msgspec.ValidationError, msgspec.DecodeError):
                pass  # the general decoder below names the problem
            else:
                ns = 0
                for rs in req.resourceSpans:
                    for ss in rs.scopeSpans:
                        ns += len(ss.spans)
                    for ls in rs.instrumentationLibrarySpans:
                        ns += len(ls.spans)
                self._lean.append((path, line_no, line, terminated, req, ns))
                self._lean_spans += ns
                if self._lean_spans >= FAST_GROUP_SPANS or len(self._pending) + self._lean_spans >= self.batch_spans:
                    self.resolve()
                return
            self.resolve()
        self._feed_general(path, line_no, line, terminated)

    def resolve(self) -> None:
        """Process queued fast-decoded lines in input order, exactly as the general path would:
        lines whose attributes the fast parser accepts are added with its result, the others are
        decoded again by the general decoder (which raises or reports their errors)."""
        lean = self._lean
        if not lean:
            return
        self._lean, self._lean_spans = [], 0
        raws: list = []
        for e in lean:
            for rs in e[4].resourceSpans:
                for ss in rs.scopeSpans:
                    raws.extend(map(_g_attributes, ss.spans))
                for ls in rs.instrumentationLibrarySpans:
                    raws.extend(map(_g_attributes, ls.spans))
        fa = None
        if raws:
            try:
                fa = parse_attributes(raws)
            except Exception:  # noqa: BLE001 - never expected; the general path then reads these lines
                fa = None
        k = 0
        for path, line_no, line, terminated, req, ns in lean:
            if ns == 0 or (fa is not None and fa.ok[k:k + ns].all()):
                self._declined = 0
                self.fast_lines += 1
                self._add_request(path, line_no, req, fa, k)
            else:
                self._declined += 1
                if self._declined >= FAST_GIVE_UP_LINES:
                    self.fast = False
                self._feed_general(path, line_no, line, terminated)
            k += ns

    def _feed_general(self, path: PathLike, line_no: int, line: bytes, terminated: bool) -> None:
        try:
            req = request_decoder.decode(line)
        except (msgspec.ValidationError, msgspec.DecodeError) as e:
            fld, msg, reason = _describe_msgspec_error(e, line)
            if reason == "truncated line" and not terminated:
                msg = "truncated last line (the file ends inside a JSON object; is a writer still running?)"
            err = TraceFormatError(path, line_no, fld, msg, reason)
            if not self.lenient:
                raise err from None
            if reason in ("bad field", "missing field"):
                self._feed_salvage(path, line_no, line, err)
            else:
                self.report.add(err, line_skipped=True)
            return
        self._add_request(path, line_no, req)

    def _add_request(self, path, line_no: int, req: TraceRequest, fa=None, k: int = 0) -> None:
        """Queue a decoded request's spans (``fa``/``k``: fast-parsed attributes of a
        ``LeanRequest``, whose first span is span ``k`` of ``fa``)."""
        for ri, rs in enumerate(req.resourceSpans):
            res = self._resource(path, line_no, ri, rs.resource.attributes)
            groups = [("scopeSpans", ss.spans) for ss in rs.scopeSpans]
            groups += [("instrumentationLibrarySpans", ls.spans) for ls in rs.instrumentationLibrarySpans]
            if res is None:
                k += sum(len(sp) for _, sp in groups)
                continue
            for si, (gname, spans) in enumerate(groups):
                if not spans:
                    continue
                prefix = f"resourceSpans[{ri}].{gname}[{si if gname == 'scopeSpans' else si - len(rs.scopeSpans)}].spans"
                self._pending_where.append((len(self._pending), str(path), line_no, len(spans), prefix))
                self._pending.extend(spans)
                self._pending_res.append((res, len(spans)))
                self._pending_fast.append((fa, k))
                k += len(spans)
        if len(self._pending) >= self.batch_spans:
            self._flush_pending()

    def _resource(self, path, line_no: int, ri: int, kvs: list[KeyValue]) -> int | None:
        attrs = {kv.key: py_value(kv.value) for kv in kvs}
        try:
            key = orjson.dumps(attrs, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=repr)
        except TypeError as e:  # pragma: no cover - py_value only yields JSON-able values
            err = TraceFormatError(path, line_no, f"resourceSpans[{ri}].resource", str(e))
            if not self.lenient:
                raise err from None
            self.report.add(err, line_skipped=False)
            return None
        return self.it.resource(key, attrs)

    def _feed_salvage(self, path, line_no: int, line: bytes, err: TraceFormatError) -> None:
        """Lenient fallback for a line with a bad field: keep the spans that are valid."""
        try:
            obj = orjson.loads(line)
            rss = obj["resourceSpans"]
            assert isinstance(rss, list)
        except Exception:  # noqa: BLE001 - any failure here means the line is skipped
            self.report.add(err, line_skipped=True)
            return
        kept = dropped = 0
        good_rs = []
        for ri, rs in enumerate(rss):
            if not isinstance(rs, dict):
                dropped += 1
                continue
            res_obj = rs.get("resource") or {}
            try:
                kvs = msgspec.convert((res_obj or {}).get("attributes") or [], list[KeyValue], strict=False)
            except (msgspec.ValidationError, AttributeError):
                self.report.add(TraceFormatError(path, line_no, f"resourceSpans[{ri}].resource.attributes",
                                                 "invalid resource attributes", "bad field"), line_skipped=False)
                continue
            good_groups = []
            for gname in ("scopeSpans", "instrumentationLibrarySpans"):
                for si, ss in enumerate(rs.get(gname) or []):
                    spans = (ss or {}).get("spans") if isinstance(ss, dict) else None
                    good = []
                    for k, sp in enumerate(spans or []):
                        try:
                            good.append(msgspec.convert(sp, Span, strict=False))
                        except msgspec.ValidationError as e:
                            fld, msg, reason = _describe_msgspec_error(e, orjson.dumps(sp))
                            base = f"resourceSpans[{ri}].{gname}[{si}].spans[{k}]"
                            self.report.add(TraceFormatError(path, line_no, f"{base}.{fld}" if fld else base, msg, reason),
                                            line_skipped=False, spans=1)
                            dropped += 1
                    kept += len(good)
                    good_groups.append(good)
            good_rs.append((kvs, good_groups))
        if not kept:
            if not dropped:
                self.report.add(err, line_skipped=True)
            else:
                self.report.lines_skipped += 1
            return
        from gputrace.timeline.otlp_schema import Resource, ResourceSpans, ScopeSpans

        req = TraceRequest(resourceSpans=[
            ResourceSpans(resource=Resource(attributes=kvs), scopeSpans=[ScopeSpans(spans=g) for g in groups])
            for kvs, groups in good_rs
        ])
        self._add_request(path, line_no, req)

    def flush(self) -> None:
        """Turn pending decoded spans into columns (validating ids, times and attributes).
        Queued fast-decoded lines are resolved first."""
        self.resolve()
        self._flush_pending()

    def _flush_pending(self) -> None:
        if not self._pending:
            return
        spans, res_counts, where = self._pending, self._pending_res, self._pending_where
        srcs = self._pending_fast
        self._pending, self._pending_res, self._pending_where, self._pending_fast = [], [], [], []
        counts = np.array([c for _, c in res_counts], dtype=np.int64)
        res = np.repeat(np.array([r for r, _ in res_counts], dtype=np.int32), counts)
        fast: dict[int, list] = {}
        for (fa, k), (s0, _, _, cnt, _) in zip(srcs, where):
            if fa is not None:
                fast.setdefault(id(fa), [fa, [], []])
                fast[id(fa)][1].append(np.arange(k, k + cnt, dtype=np.int64))
                fast[id(fa)][2].append(np.arange(s0, s0 + cnt, dtype=np.int64))
        groups = [(fa, np.concatenate(g), np.concatenate(r)) for fa, g, r in fast.values()] or None
        cols, attrs, bad = spans_to_columns(spans, res, self.it, groups)
        if bad:
            starts = [w[0] for w in where]
            for i, fld, msg in bad:
                k = int(np.searchsorted(starts, i, side="right")) - 1
                s0, p, ln, _, prefix = where[k]
                err = TraceFormatError(p, ln, f"{prefix}[{i - s0}].{fld}", msg, "bad field")
                if not self.lenient:
                    raise err
                self.report.add(err, line_skipped=False, spans=1)
        nrows = len(cols["start"])
        self._chunks.append(cols)
        self._chunk_attrs.append({self._rows + r: d for r, d in attrs.items()} if self._rows else attrs)
        self._rows += nrows
        self.report.spans += nrows
        self._cached = None

    # ---- results ---------------------------------------------------------------------
    @property
    def spans_loaded(self) -> int:
        return self._rows

    def timeline(self) -> Timeline:
        """Everything fed so far as a Timeline (pending spans are flushed first)."""
        self.flush()
        if self._cached is not None:
            return self._cached
        if self._chunks:
            cols = {k: np.concatenate([c[k] for c in self._chunks]) for k in COLUMNS if k in self._chunks[0]}
            if len(self._chunks) > 1:  # keep one merged chunk so the next snapshot concatenates less
                self._chunks = [cols]
                merged: dict[int, dict] = {}
                for a in self._chunk_attrs:
                    merged.update(a)
                self._chunk_attrs = [merged]
            attrs = self._chunk_attrs[0] if self._chunk_attrs else {}
        else:
            cols = {k: np.empty(0, dtype=d) for k, d in COLUMNS.items()}
            attrs = {}
        it = self.it
        tl = Timeline.from_unsorted(cols, it.phases, it.lanes, it.resources, it.trace_ids, attrs)
        tl.load_report = self.report
        self._cached = tl
        return tl


def _as_paths(paths: PathLike | Iterable[PathLike]) -> list:
    if isinstance(paths, (str, bytes, os.PathLike)):
        return [paths]
    return list(paths)


def read_trace(paths: PathLike | Sequence[PathLike], lenient: bool = False, workers: int | None = None) -> Timeline:
    """Read one or more OTLP JSON Lines files (plain or gzip) into one Timeline.

    Raises ``TraceFormatError`` (file, line, field) for unreadable input unless ``lenient``, in
    which case bad lines/spans are skipped and counted in ``timeline.load_report``. Raises
    ``OSError`` (e.g. FileNotFoundError) for files that cannot be opened. Runs on the calling
    thread; see ``gputrace.timeline.incremental`` for progressive loading.

    ``workers``: plain files of at least ``parallel.MIN_PARALLEL_BYTES`` are split over this many
    worker processes (default: ``parallel.default_workers()``; ``1`` reads everything in-process).
    """
    from gputrace.timeline import parallel

    nworkers = parallel.default_workers() if workers is None else max(1, int(workers))
    loader = TraceLoader(lenient=lenient)
    parts: list[Timeline] = []
    order: list[str] = []
    for p in _as_paths(paths):
        order.append(str(p))
        if nworkers > 1 and _parallel_ok(p, parallel.MIN_PARALLEL_BYTES):
            parts.append(parallel.timeline_parallel(p, lenient, nworkers))
        else:
            load_file_into(loader, p)
    if not parts:
        return loader.timeline()
    if loader.report.files:
        parts.append(loader.timeline())
    tl = Timeline.concat(parts)
    report = LoadReport(files=order)
    for part in parts:
        r = part.load_report
        report.lines += r.lines
        report.spans += r.spans
        report.lines_skipped += r.lines_skipped
        report.spans_skipped += r.spans_skipped
        report.reasons.update(r.reasons)
        report.problems.extend(r.problems)
    tl.load_report = report
    return tl


def _parallel_ok(path: PathLike, min_bytes: int) -> bool:
    """A large, plain, JSON Lines file (not gzip, not binary, not one pretty-printed object)."""
    try:
        if os.path.getsize(path) < min_bytes:
            return False
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return head[:2] != _GZIP_MAGIC and b"\x00" not in head and head.split(b"\n", 1)[0].strip() != b"{"


def load_file_into(loader: TraceLoader, path: PathLike) -> None:
    """Feed a whole file to ``loader``; handles empty files and single pretty-printed requests."""
    loader.report.files.append(str(path))
    try:
        f = open_trace_file(path)
    except TraceFormatError as e:
        if not loader.lenient:
            raise
        loader.report.add(e, line_skipped=False)
        return
    before = loader.report.lines
    problems_before = sum(loader.report.reasons.values())
    with f:
        try:
            for line_no, (line, terminated, _) in enumerate(iter_lines(f), 1):
                if line_no == 1 and line.strip() == b"{" and _try_whole_file(loader, path):
                    return  # one pretty-printed request, not JSON Lines
                loader.feed(path, line_no, line, terminated)
        except (EOFError, gzip.BadGzipFile, OSError) as e:
            if isinstance(e, FileNotFoundError):
                raise
            loader.resolve()  # problems of the lines before come first
            err = TraceFormatError(path, None, None, f"corrupt or truncated gzip stream ({e})", "bad gzip")
            if not loader.lenient:
                raise err from None
            loader.report.add(err, line_skipped=False)
    loader.resolve()  # this file's problems before the next file's
    if loader.report.lines == before and sum(loader.report.reasons.values()) == problems_before:
        err = TraceFormatError(path, None, None, "empty file (no trace data)", "empty file")
        if not loader.lenient:
            raise err
        loader.report.add(err, line_skipped=False)


def _try_whole_file(loader: TraceLoader, path) -> bool:
    """A file holding one pretty-printed request (not JSON Lines): accept it if it decodes."""
    try:
        with open_trace_file(path) as f:
            data = f.read(1 << 30)
        req = request_decoder.decode(data)
    except Exception:  # noqa: BLE001 - not a whole-file request either: report the line error
        return False
    loader.resolve()
    loader.report.lines += 1
    loader._add_request(path, 1, req)
    return True

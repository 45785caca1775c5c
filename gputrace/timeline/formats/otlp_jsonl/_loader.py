"""``TraceLoader``: the incremental core of the reader (decoded lines -> column batches).

Shared by ``reader.read_trace``, ``incremental.iter_load``/``follow`` and the worker processes of
``parallel``. Not thread-safe: feed one loader from one thread. See ``reader`` for the fast path; the lenient
salvage of a line with a bad field is ``_salvage``.
"""

from __future__ import annotations

import operator

import msgspec
import numpy as np
import orjson

from gputrace.json_depth import depth_scan_needed, too_deep
from gputrace.otlp.decode import py_value
from gputrace.otlp.schema import (
    KeyValue,
    Span,
    TraceRequest,
    lean_decoder,
    request_decoder,
    resource_decoder,
)
from gputrace.timeline._lines import PathLike, newline_offsets
from gputrace.timeline.errors import LoadReport, TraceFormatError
from gputrace.timeline.formats.otlp_jsonl._columns import Interner, spans_to_columns
from gputrace.timeline.formats.otlp_jsonl._decode_errors import describe_msgspec_error
from gputrace.timeline.formats.otlp_jsonl._fast import parse_attributes
from gputrace.timeline.formats.otlp_jsonl._interner import sort_phases
from gputrace.timeline.formats.otlp_jsonl._salvage import _feed_salvage
from gputrace.timeline.model import COLUMNS, Timeline

#: Spans decoded before they are turned into columns (bounds the memory of decoded objects).
BATCH_SPANS = 32768
#: Queued fast-decoded spans parsed together (small enough for the numpy work to stay in cache).
FAST_GROUP_SPANS = 8192
#: After this many queued lines in a row declined by the fast parser, a loader stops trying it
#: (a foreign writer's layout: each line would otherwise be decoded twice).
FAST_GIVE_UP_LINES = 64
#: Distinct raw resource texts remembered by a loader (cleared when full).
RESOURCE_CACHE_SIZE = 1024
_g_attributes = operator.attrgetter("attributes")


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
        self._lean: list[tuple] = []  # queued fast-decoded lines: (path, line_no, line, terminated, req, nspans, ress)
        self._lean_spans = 0
        self._declined = 0  # lines declined in a row by the lean decoder or the fast parser
        self._res_cache: dict[bytes, tuple[bytes, dict]] = {}  # raw resource text -> (key, attrs)
        self.fast_lines = 0  # lines added through the fast path (for tests and benchmarks)
        self._arrays_seen = False  # the last group parsed had array-valued attributes (parse_attributes)
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
        if self.fast and not too_deep(line):
            try:
                req = lean_decoder.decode(line)
            except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
                pass  # the general decoder below names the problem
            else:
                if self._queue_lean(path, line_no, line, terminated, req):
                    return
            self._decline()  # refused by the lean decoder: counts as declined (speed only)
        self._feed_general(path, line_no, line, terminated)

    def feed_block(self, path: PathLike, line_no: int, block: memoryview) -> int:
        """Feed the complete lines of ``block`` (each ends with a newline; the first is line
        ``line_no + 1``) and return the number of the last. Same effect as ``feed`` of each line
        (the equivalence is tested): the lines are lean-decoded by one ``decode_lines`` call and kept
        as views of ``block`` (copied only for the general decoder); a block with a blank line, or
        that the lean decoder refuses, or while the fast path is off, is fed line by line."""
        text = np.frombuffer(block, np.uint8)
        ends = newline_offsets(block)
        starts = [0] + [e + 1 for e in ends[:-1]]
        reqs = None
        # decode_lines skips blank lines and takes several values on one line: with every line
        # starting with "{" (none blank) and one value per line in all, each line is one request.
        if self.fast and ends and not depth_scan_needed() and bool((text[starts] == 123).all()):
            try:
                reqs = lean_decoder.decode_lines(block)
            except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
                reqs = None
        if reqs is None or len(reqs) != len(ends):
            for i, (s, e) in enumerate(zip(starts, ends, strict=True)):
                self.feed(path, line_no + 1 + i, bytes(block[s:e]), True)
            return line_no + len(ends)
        for i, (req, s, e) in enumerate(zip(reqs, starts, ends, strict=True)):
            self.report.lines += 1
            if self.fast:
                if self._queue_lean(path, line_no + 1 + i, block[s:e], True, req):
                    continue
                self._decline()
            self._feed_general(path, line_no + 1 + i, bytes(block[s:e]).strip(), True)
        return line_no + len(ends)

    def _queue_lean(self, path: PathLike, line_no: int, line: bytes | memoryview, terminated: bool, req) -> bool:
        """Queue a lean-decoded line for ``resolve``; False if its resources do not decode (the
        caller then declines it)."""
        ress = self._lean_resources(req)
        if ress is None:
            return False
        ns = 0
        for rs in req.resourceSpans:
            for ss in rs.scopeSpans:
                ns += len(ss.spans)
            for ls in rs.instrumentationLibrarySpans:
                ns += len(ls.spans)
        self._lean.append((path, line_no, line, terminated, req, ns, ress))
        self._lean_spans += ns
        held = len(self._pending) + self._lean_spans
        if self._lean_spans >= FAST_GROUP_SPANS or held >= self.batch_spans:
            self.resolve()
        return True

    def _decline(self) -> None:
        self.resolve()
        self._declined += 1
        if self._declined >= FAST_GIVE_UP_LINES:
            self.fast = False

    def _lean_resources(self, req) -> list | None:
        """``(key, attrs)`` of each raw resource of a lean request, as ``_resource`` computes them;
        each distinct resource text is decoded once per loader. None if one does not decode or
        has no key (the general decoder then reads the whole line and reports the problem)."""
        out = []
        cache = self._res_cache
        for rs in req.resourceSpans:
            raw = bytes(rs.resource)
            hit = cache.get(raw)
            if hit is None:
                try:
                    attrs = {kv.key: py_value(kv.value) for kv in resource_decoder.decode(raw).attributes}
                    key = orjson.dumps(attrs, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=repr)
                except (msgspec.ValidationError, msgspec.DecodeError, TypeError, ValueError, RecursionError):
                    return None
                if len(cache) >= RESOURCE_CACHE_SIZE:
                    cache.clear()
                hit = cache[raw] = (key, attrs)
            out.append(hit)
        return out

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
                fa = parse_attributes(raws, self._arrays_seen)
                self._arrays_seen = len(fa.ex_span) > 0
            except Exception:  # noqa: BLE001 - never expected; the general path then reads these lines
                fa = None
        k = 0
        for path, line_no, line, terminated, req, ns, ress in lean:
            if ns == 0 or (fa is not None and fa.ok[k:k + ns].all()):
                self._declined = 0
                self.fast_lines += 1
                self._add_request(path, line_no, req, fa, k, ress)
            else:
                self._declined += 1
                if self._declined >= FAST_GIVE_UP_LINES:
                    self.fast = False
                if type(line) is not bytes:  # a view of a block (feed_block): as feed would give it
                    line = bytes(line).strip()
                self._feed_general(path, line_no, line, terminated)
            k += ns

    def _feed_general(self, path: PathLike, line_no: int, line: bytes, terminated: bool) -> None:
        try:
            if too_deep(line):
                raise RecursionError
            req = request_decoder.decode(line)
        except RecursionError:  # msgspec's depth guard: a line nested deeper than the stack allows
            err = TraceFormatError(path, line_no, None, "JSON nested too deeply to read (a hostile or broken writer?)",
                                   "nested too deeply")
            if not self.lenient:
                raise err from None
            self.report.add(err, line_skipped=True)
            return
        except (msgspec.ValidationError, msgspec.DecodeError) as e:
            fld, msg, reason = describe_msgspec_error(e, line)
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

    def _add_request(self, path, line_no: int, req: TraceRequest, fa=None, k: int = 0, ress=None) -> None:
        """Queue a decoded request's spans (``fa``/``k``/``ress``: fast-parsed attributes of a
        ``LeanRequest``, whose first span is span ``k`` of ``fa``, and its resources' ``(key, attrs)``)."""
        for ri, rs in enumerate(req.resourceSpans):
            if ress is None:
                res = self._resource(path, line_no, ri, rs.resource.attributes)
            else:
                res = self.it.resource(*ress[ri])
            groups = [("scopeSpans", ss.spans) for ss in rs.scopeSpans]
            groups += [("instrumentationLibrarySpans", ls.spans) for ls in rs.instrumentationLibrarySpans]
            if res is None:
                k += sum(len(sp) for _, sp in groups)
                continue
            for si, (gname, spans) in enumerate(groups):
                if not spans:
                    continue
                gi = si if gname == "scopeSpans" else si - len(rs.scopeSpans)
                prefix = f"resourceSpans[{ri}].{gname}[{gi}].spans"
                self._pending_where.append((len(self._pending), str(path), line_no, len(spans), prefix))
                self._pending.extend(spans)
                self._pending_res.append((res, len(spans)))
                self._pending_fast.append((fa, k))
                k += len(spans)
        if len(self._pending) >= self.batch_spans:
            self._flush_pending()

    def _resource(self, path, line_no: int, ri: int, kvs: list[KeyValue]) -> int | None:
        try:
            attrs = {kv.key: py_value(kv.value) for kv in kvs}
            key = orjson.dumps(attrs, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=repr)
        except (TypeError, ValueError) as e:  # ValueTooDeep (orjson's TypeError: py_value yields JSON-able values)
            err = TraceFormatError(path, line_no, f"resourceSpans[{ri}].resource", str(e))
            if not self.lenient:
                raise err from None
            self.report.add(err, line_skipped=False)
            return None
        return self.it.resource(key, attrs)

    # Lenient fallback for a line with a bad field (``_salvage``): keep the spans that are valid.
    _feed_salvage = _feed_salvage

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
        for (fa, k), (s0, _, _, cnt, _) in zip(srcs, where, strict=True):
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

    def timeline(self, release: bool = False) -> Timeline:
        """Everything fed so far as a Timeline (pending spans are flushed first).

        ``release=True`` (the last call: nothing more will be fed) hands the loader's column chunks
        over to ``Timeline.from_parts``, which takes them apart column by column instead of copying
        them, so the peak is about one copy of the columns, not three (10 M spans: one copy is about
        0.9 GiB)."""
        self.flush()
        if self._cached is not None:
            return self._cached
        if self._chunks and release:
            chunks, self._chunks = self._chunks, []
            merged_attrs: dict[int, dict] = {}
            for a in self._chunk_attrs:
                merged_attrs.update(a)
            self._chunk_attrs = []
            it = self.it
            tl = sort_phases(Timeline.from_parts(chunks, it.phases, it.lanes, it.resources, it.trace_ids,
                                                 merged_attrs, consume=True))
            tl.load_report = self.report
            self._cached = tl
            return tl
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
        tl = sort_phases(Timeline.from_unsorted(cols, it.phases, it.lanes, it.resources, it.trace_ids, attrs))
        tl.load_report = self.report
        self._cached = tl
        return tl

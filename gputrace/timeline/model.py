"""The columnar `Timeline`: every span of one or more traces as numpy columns.

Contract (shared by readers, analysis, TUI and exporters):

* Rows are sorted by ``(lane, start, -end)``, so each lane's spans are one contiguous slice
  ``lane_offsets[k]:lane_offsets[k+1]`` and parents come before their children in a lane.
* Times are int64 epoch nanoseconds. ``gpu_start``/``gpu_end`` are -1 where a span has no
  device time (no CUDA events).
* Integer columns use -1 for "absent" (device, circuit, batch, nbytes, parent).
* ``parent`` is a row index into this Timeline (-1 for roots or a parent not in the data).
* Attributes other than the columns below live in ``attrs`` (row -> dict), only for rows
  that have any; ``resources[resource[row]]`` is the row's resource attribute dict.

A Timeline is immutable once built; loaders build a new one per batch (see ``concat``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gputrace.timeline._lane import Lane
from gputrace.timeline._links import RowLinks
from gputrace.timeline._rows import break_parent_cycles, chain_depths, row_order, short_depths
from gputrace.timeline.errors import LoadReport

KIND_CODES = {"host": 0, "gpu": 1, "sync": 2, "pin": 3}
KIND_NAMES = {v: k for k, v in KIND_CODES.items()}
STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2

#: Column name -> dtype. Every column has one entry per row.
COLUMNS: dict[str, np.dtype] = {
    "start": np.dtype(np.int64),
    "end": np.dtype(np.int64),
    "gpu_start": np.dtype(np.int64),
    "gpu_end": np.dtype(np.int64),
    "phase": np.dtype(np.int32),
    "lane": np.dtype(np.int32),
    "depth": np.dtype(np.int16),
    "parent": np.dtype(np.int64),
    "device": np.dtype(np.int16),
    "kind": np.dtype(np.int8),
    "status": np.dtype(np.int8),
    "circuit": np.dtype(np.int32),
    "batch": np.dtype(np.int32),
    "nbytes": np.dtype(np.int64),
    "resource": np.dtype(np.int32),
    "trace": np.dtype(np.int32),
    "span_id": np.dtype(np.uint64),
    "parent_span_id": np.dtype(np.uint64),
}


def _renumbered(d: Mapping[int, Any] | None, inv: np.ndarray, consume: bool = False) -> dict:
    """``{inv[row]: value}`` of ``d``, in ``d``'s order (one vectorised take, not an index per row).
    ``consume=True``: a dict ``d`` is emptied before the new one is built (the two never coexist, which
    matters at the peak of a big read: ~70 MiB per million rows)."""
    if not d:
        return {}
    rows = np.fromiter(d.keys(), np.int64, len(d))
    if consume and type(d) is dict:
        values = list(d.values())
        d.clear()
    else:
        values = d.values()  # type: ignore[assignment]
    return dict(zip(inv[rows].tolist(), values, strict=True))


@dataclass(repr=False)
class Timeline:
    """All spans as columns (see the module docstring for the contract)."""

    cols: dict[str, np.ndarray]
    phases: list[str]
    lanes: list[Lane]
    lane_offsets: np.ndarray  # int64, len(lanes) + 1
    resources: list[dict] = field(default_factory=list)
    trace_ids: list[str] = field(default_factory=list)
    attrs: dict[int, dict] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)  # row -> original span name if it differs from phase
    #: What the reader loaded and skipped (a ``gputrace.timeline.errors.LoadReport``), or None.
    load_report: LoadReport | None = field(default=None, repr=False, compare=False)
    _end_prefix_max: list[np.ndarray] | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        # A summary: the dataclass repr printed every column and attribute (seconds for a big trace, and
        # Textual names each worker after the repr of its arguments).
        return f"Timeline({self.n} spans, {len(self.lanes)} lanes, {len(self.phases)} phases)"

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def empty(cls) -> Timeline:
        return cls(
            cols={k: np.empty(0, dtype=d) for k, d in COLUMNS.items()},
            phases=[],
            lanes=[],
            lane_offsets=np.zeros(1, dtype=np.int64),
        )

    @classmethod
    def from_unsorted(
        cls,
        cols: Mapping[str, np.ndarray],
        phases: Sequence[str],
        lanes: Sequence[Lane],
        resources: Sequence[dict] = (),
        trace_ids: Sequence[str] = (),
        attrs: Mapping[int, Mapping] | None = None,
        names: Mapping[int, str] | None = None,
        consume: bool = False,
    ) -> Timeline:
        """Build from columns in any row order; ``parent`` may be -1 everywhere.

        ``consume=True``: ``cols`` is a dict the caller gives up; its arrays are taken out of it one
        at a time as they are sorted, so each unsorted column is freed once its sorted copy exists.

        ``parent`` and ``depth`` are recomputed from ``span_id``/``parent_span_id`` (ids are
        unique per trace in OTLP; a clash across traces is disambiguated by ``trace``).
        ``attrs`` and ``names`` keys refer to the unsorted row numbers and are remapped. Lanes are
        reordered by ``Lane.sort_key``.
        """
        return cls.from_parts([cols], phases, lanes, resources, trace_ids, attrs, names, consume)

    @classmethod
    def from_parts(
        cls,
        parts: Sequence[Mapping[str, np.ndarray]],
        phases: Sequence[str],
        lanes: Sequence[Lane],
        resources: Sequence[dict] = (),
        trace_ids: Sequence[str] = (),
        attrs: Mapping[int, Mapping] | None = None,
        names: Mapping[int, str] | None = None,
        consume: bool = False,
    ) -> Timeline:
        """``from_unsorted`` of the parts' columns one after the other (rows numbered across the parts, as
        ``attrs`` and ``names`` keys are): the parts are joined column by column, so a reader hands its
        chunks over without joining them first. ``consume=True``: the parts are dicts the caller gives up
        (each piece is freed once copied), and so are ``attrs`` and ``names`` (emptied once renumbered).
        Every part has ``start``; a column missing from a part is -1 (or 0) there."""
        given = consume and all(isinstance(p, MutableMapping) for p in parts)  # taken apart below
        parts = list(parts) or [{"start": np.empty(0, COLUMNS["start"])}]
        sizes = [len(p["start"]) for p in parts]
        n = sum(sizes)

        def take(i: int, k: str, dt: np.dtype) -> np.ndarray:
            p = parts[i]
            if k in p:
                return np.asarray(p.pop(k) if given else p[k], dtype=dt)  # type: ignore[attr-defined]
            return np.full(sizes[i], -1 if dt.kind == "i" else 0, dtype=dt)

        def joined(k: str) -> np.ndarray:
            dt = COLUMNS[k]
            if len(parts) == 1:
                return take(0, k, dt)
            if any(k in p for p in parts):
                return np.concatenate([take(i, k, dt) for i in range(len(parts))])
            return np.full(n, -1 if dt.kind == "i" else 0, dtype=dt)

        # Parent links from the id columns as read (_links), mapped to the sorted rows at the end.
        ids = {k: joined(k) for k in ("span_id", "parent_span_id", "trace")}
        links = RowLinks(ids["span_id"], ids["parent_span_id"], ids["trace"]).link()
        # Order lanes.
        lane_order = sorted(range(len(lanes)), key=lambda i: lanes[i].sort_key)
        remap = np.empty(max(len(lanes), 1), dtype=np.int32)
        remap[lane_order] = np.arange(len(lane_order), dtype=np.int32)
        sorted_lanes = [lanes[i] for i in lane_order]
        keys = {k: joined(k) for k in ("lane", "start", "end")}
        if n:
            keys["lane"] = remap[keys["lane"]]
        order = row_order(keys["lane"], keys["start"], keys["end"])
        inv = np.empty(n, dtype=np.int64)
        inv[order] = np.arange(n, dtype=np.int64)
        # Columns in COLUMNS order. The joined ones are gathered by the order; every other column is scattered
        # from its pieces to their sorted places (never joined: each piece is freed once placed). parent and
        # depth: placeholders that the links replace.
        full: dict[str, np.ndarray] = {}
        for k, dt in COLUMNS.items():
            if k in keys or k in ids:
                full[k] = np.take(keys.pop(k) if k in keys else ids.pop(k), order)
            elif k in ("parent", "depth"):
                full[k] = np.empty(0, dt)
            elif not any(k in p for p in parts):
                full[k] = np.full(n, -1 if dt.kind == "i" else 0, dtype=dt)
            elif len(parts) == 1:
                full[k] = np.take(take(0, k, dt), order)
            else:
                out = np.empty(n, dtype=dt)
                at = 0
                for i, m in enumerate(sizes):
                    out[inv[at:at + m]] = take(i, k, dt)
                    at += m
                full[k] = out
        new_attrs, new_names = _renumbered(attrs, inv, given), _renumbered(names, inv, given)
        counts = np.bincount(full["lane"], minlength=len(sorted_lanes)) if n else np.zeros(len(sorted_lanes), np.int64)
        offsets = np.zeros(len(sorted_lanes) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        parent, depth = links.to_sorted(order, inv)
        del order, inv
        if depth is None:  # a clash of ids, or a chain longer than short_depths follows (maybe a cycle)
            depth = short_depths(parent)
            if depth is None:
                break_parent_cycles(parent, full["start"])
                depth = chain_depths(parent)
        full["parent"], full["depth"] = parent, depth
        return cls(
            cols=full,
            phases=list(phases),
            lanes=sorted_lanes,
            lane_offsets=offsets,
            resources=list(resources),
            trace_ids=list(trace_ids),
            attrs=new_attrs,
            names=new_names,
        )

    @staticmethod
    def concat(parts: Sequence[Timeline]) -> Timeline:
        """Merge several Timelines (files, hosts, load batches) into one, re-sorted.

        Rows without a trace id (``trace`` -1: another tool's trace, whose span ids the reader numbered 1, 2, ...
        per file) link only to rows of their own part: their span and parent ids are moved past every id of
        the parts before (``_apart``), so two rank files read together never take each other's rows as
        parents (both number their events from 1; a kernel launched under rank 0's ``aten::mm`` landed under
        rank 1's row of the same id). Rows with a trace id keep theirs (a trace split over files links across)."""
        parts = [p for p in parts if p is not None]
        if not parts:
            return Timeline.empty()
        if len(parts) == 1:
            return parts[0]
        phases: list[str] = []
        phase_ix: dict[str, int] = {}
        lanes: list[Lane] = []
        lane_ix: dict[Lane, int] = {}
        resources: list[dict] = []
        trace_ids: list[str] = []
        trace_ix: dict[str, int] = {}
        cols: dict[str, list[np.ndarray]] = {k: [] for k in COLUMNS}
        attrs: dict[int, dict] = {}
        names: dict[int, str] = {}
        base = 0
        next_id = 0  # ids of trace-less rows below this are taken by the parts before
        for p in parts:
            ids, next_id = _apart(p.cols, next_id)
            pm = np.array([phase_ix.setdefault(name, len(phase_ix)) for name in p.phases] or [0], dtype=np.int32)
            for name in p.phases:
                if name not in phases:
                    phases.append(name)
            lm = np.array([lane_ix.setdefault(ln, len(lane_ix)) for ln in p.lanes] or [0], dtype=np.int32)
            for ln in p.lanes:
                if ln not in lanes:
                    lanes.append(ln)
            rm = np.arange(len(resources), len(resources) + max(len(p.resources), 1), dtype=np.int32)
            resources.extend(p.resources)
            tm = np.array([trace_ix.setdefault(t, len(trace_ix)) for t in p.trace_ids] or [0], dtype=np.int32)
            for t in p.trace_ids:
                if t not in trace_ids:
                    trace_ids.append(t)
            for k in COLUMNS:
                col = ids[k] if k in ids else p.cols[k]
                if k == "phase":
                    col = pm[col] if len(col) else col
                elif k == "lane":
                    col = lm[col] if len(col) else col
                elif k == "resource":
                    col = np.where(col >= 0, rm[np.maximum(col, 0)], -1).astype(np.int32) if len(col) else col
                elif k == "trace":
                    col = np.where(col >= 0, tm[np.maximum(col, 0)], -1).astype(np.int32) if len(col) else col
                cols[k].append(col)
            for r, a in p.attrs.items():
                attrs[base + r] = a
            for r, v in p.names.items():
                names[base + r] = v
            base += p.n
        merged = {k: np.concatenate(v) for k, v in cols.items()}
        return Timeline.from_unsorted(merged, phases, lanes, resources, trace_ids, attrs, names)

    # ---- basic properties ---------------------------------------------------------------
    @property
    def n(self) -> int:
        return int(len(self.cols["start"]))

    def __len__(self) -> int:
        return self.n

    def __getattr__(self, name: str) -> np.ndarray:
        # Columns as attributes: tl.start, tl.end, tl.phase, ...
        cols = self.__dict__.get("cols")
        if cols is not None and name in cols:
            return cols[name]
        raise AttributeError(name)

    @property
    def t0(self) -> int:
        if self.n == 0:
            return 0
        s = self.cols["start"]
        g = self.cols["gpu_start"]
        m = int(s.min())
        if (g >= 0).any():
            m = min(m, int(g[g >= 0].min()))
        return m

    @property
    def t1(self) -> int:
        if self.n == 0:
            return 0
        return int(max(self.cols["end"].max(), self.cols["gpu_end"].max()))

    def phase_id(self, name: str) -> int:
        """Index of a phase name, or -1 if no span has it."""
        try:
            return self.phases.index(name)
        except ValueError:
            return -1

    def lane_slice(self, lane: int) -> slice:
        return slice(int(self.lane_offsets[lane]), int(self.lane_offsets[lane + 1]))

    def lane_rows(self, lane: int) -> np.ndarray:
        return np.arange(self.lane_offsets[lane], self.lane_offsets[lane + 1])

    # ---- queries ------------------------------------------------------------------------
    def rows_in(self, lane: int, t0: int, t1: int) -> slice:
        """Rows of ``lane`` that may overlap [t0, t1): a slice, O(log n).

        Uses a running maximum of end times, so nested and overlapping spans are found.
        The slice can include a few rows ending before t0 (their successors' running max is
        large); callers that need exactness mask with ``end > t0``.
        """
        if self._end_prefix_max is None:
            self._end_prefix_max = []
            for k in range(len(self.lanes)):
                e = self.cols["end"][self.lane_slice(k)]
                self._end_prefix_max.append(np.maximum.accumulate(e) if len(e) else e)
        sl = self.lane_slice(lane)
        starts = self.cols["start"][sl]
        pm = self._end_prefix_max[lane]
        lo = int(np.searchsorted(pm, t0, side="right"))
        hi = int(np.searchsorted(starts, t1, side="left"))
        return slice(sl.start + lo, sl.start + max(lo, hi))

    def duration(self) -> np.ndarray:
        return self.cols["end"] - self.cols["start"]

    def gpu_duration(self) -> np.ndarray:
        g0, g1 = self.cols["gpu_start"], self.cols["gpu_end"]
        return np.where((g0 >= 0) & (g1 >= 0), g1 - g0, -1)

    def name_of(self, row: int) -> str:
        return self.names.get(row) or self.phases[int(self.cols["phase"][row])]

    def parent_chain(self, row: int) -> list[int]:
        """Rows from ``row``'s parent up to its root (nearest first)."""
        out: list[int] = []
        p = int(self.cols["parent"][row])
        while p >= 0 and len(out) < 256:
            out.append(p)
            p = int(self.cols["parent"][p])
        return out

    def path(self, row: int) -> str:
        """Slash-joined phase path from the root, e.g. ``prove/ntt/coset_ntt``."""
        chain = [row] + self.parent_chain(row)
        return "/".join(self.phases[int(self.cols["phase"][r])] for r in reversed(chain))

    def children(self, row: int) -> np.ndarray:
        return np.nonzero(self.cols["parent"] == row)[0]

    def span(self, row: int) -> dict:
        """Everything known about one row as a plain dict (for details panels and exports)."""
        c = self.cols
        d = {k: c[k][row].item() for k in COLUMNS}
        d["name"] = self.name_of(row)
        d["phase_name"] = self.phases[d["phase"]]
        d["kind_name"] = KIND_NAMES.get(d["kind"], "host")
        d["lane_obj"] = self.lanes[d["lane"]]
        d["attrs"] = dict(self.attrs.get(row, {}))
        d["resource_attrs"] = self.resources[d["resource"]] if 0 <= d["resource"] < len(self.resources) else {}
        d["trace_id"] = self.trace_ids[d["trace"]] if 0 <= d["trace"] < len(self.trace_ids) else ""
        return d

    def select(self, mask: np.ndarray) -> Timeline:
        """A new Timeline with only the rows where ``mask`` is true (parents re-linked)."""
        idx = np.nonzero(mask)[0]
        cols = {k: v[idx] for k, v in self.cols.items()}
        inv = {int(r): i for i, r in enumerate(idx)} if self.attrs or self.names else {}
        attrs = {inv[r]: a for r, a in self.attrs.items() if r in inv}
        names = {inv[r]: v for r, v in self.names.items() if r in inv}
        return Timeline.from_unsorted(cols, self.phases, self.lanes, self.resources, self.trace_ids, attrs, names)

    def iter_lanes(self) -> Iterator[tuple[int, Lane]]:
        return iter(enumerate(self.lanes))


def _apart(cols: Mapping[str, np.ndarray], next_id: int) -> tuple[dict[str, np.ndarray], int]:
    """(the ``span_id`` / ``parent_span_id`` columns of one part for ``Timeline.concat``, with the nonzero ids of
    its trace-less rows shifted up by ``next_id``; the first id free after them). ``{}`` (ids unchanged) when the
    part has no trace-less row or the shift would pass 2**64."""
    tr = cols["trace"]
    free = tr < 0
    if not free.any():
        return {}, next_id
    sid, psid = cols["span_id"], cols["parent_span_id"]
    top = max(int(sid[free].max()), int(psid[free].max())) if len(sid) else 0
    if next_id + top >= 1 << 64:
        return {}, next_id
    out = {}
    if next_id:
        off = np.uint64(next_id)
        out["span_id"] = np.where(free & (sid != 0), sid + off, sid).astype(np.uint64)
        out["parent_span_id"] = np.where(free & (psid != 0), psid + off, psid).astype(np.uint64)
    return out, next_id + top + 1

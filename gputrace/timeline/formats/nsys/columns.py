"""Column tools of the Nsight importer: SQLite values -> int64 columns, groups of equal keys, the
correlation-id index, and the row store the tables are appended to as blocks.

Why hand-written: an export has millions of rows of a few tables, and turning each row into Python
objects (the first importer) cost ~7 µs a row; here a table is a few numpy passes and Python runs
once per *distinct* value (kernel, thread, API name), not per row. Values are untrusted: a value of
the wrong type raises ``ValueError``/``TypeError``, one outside 64 bits ``OverflowError``, which
``nsys.read_nsys`` turns into an ``NsysFormatError`` naming the table. Not thread-safe (one read).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gputrace.timeline.model import KIND_CODES, Lane

_NONE = np.array(None, dtype=object)  # compares element-wise with an object array
_I64_MAX = (1 << 63) - 1
#: globalTid / globalPid -> the process part (bits 24..63), as nsys's own reports join them
PID_MASK = np.int64(~0xFFFFFF)


def nulls(col: np.ndarray) -> np.ndarray:
    """Where an object column (``NsysReport.arrays``) is NULL."""
    return np.equal(col, _NONE)


def ints(col: np.ndarray, fill: int | None = None) -> np.ndarray:
    """An object column as int64, NULLs given ``fill``; with ``fill=None`` a NULL is a bad value
    (``TypeError``, as ``int(None)``). Each value goes through ``int()`` semantics (numpy's)."""
    null = nulls(col)
    if null.any():
        if fill is None:
            raise TypeError("NULL where a number is required")
        col = col.copy()
        col[null] = fill
    if col.dtype != object:
        return np.asarray(col, dtype=np.int64)
    try:
        return col.astype(np.int64)
    except OverflowError:
        raise
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not an integer ({exc})") from None


class IntColumns:
    """Integer columns of one table, read block by block (``int_columns``): int64 values (NULL -> 0) and
    NULL masks, so no more than one block of a table is ever held as Python objects."""

    def __init__(self, values: dict[str, np.ndarray], null: dict[str, np.ndarray]) -> None:
        self.values, self._null = values, null

    def __len__(self) -> int:
        return len(next(iter(self.values.values()))) if self.values else 0

    def null(self, name: str) -> np.ndarray:
        return self._null[name]

    def int(self, name: str, fill: int | None = None) -> np.ndarray:
        """The column, NULLs given ``fill``; with ``fill=None`` a NULL is a bad value (``TypeError``)."""
        v, null = self.values[name], self._null[name]
        if null.any():
            if fill is None:
                raise TypeError(f"NULL in column {name}, where a number is required")
            v = np.where(null, np.int64(fill), v)
        return v


def int_columns(rep, table: str, wanted: list[str]) -> IntColumns:
    """``wanted`` columns of ``table`` (an ``NsysReport``'s) as an ``IntColumns``, converted one fetched
    block at a time. Raises ValueError/TypeError for a value that is not an integer, OverflowError past
    64 bits (as ``ints``)."""
    vals: dict[str, list[np.ndarray]] = {c: [] for c in wanted}
    null: dict[str, list[np.ndarray]] = {c: [] for c in wanted}
    for block in rep.blocks(table, wanted):
        for i, c in enumerate(wanted):
            col = block[:, i]
            n = nulls(col)
            null[c].append(n)
            vals[c].append(ints(col, 0) if n.any() else ints(col))
    return IntColumns({c: np.concatenate(v) if v else np.empty(0, np.int64) for c, v in vals.items()},
                      {c: np.concatenate(v) if v else np.empty(0, bool) for c, v in null.items()})


def shifted(t: np.ndarray, off: int) -> np.ndarray:
    """Times moved to the epoch clock (``+ off``); ``OverflowError`` past 64 bits (never wraps)."""
    if off and len(t) and int(t.max()) > _I64_MAX - off:
        raise OverflowError("time past the 64-bit range")
    return t + np.int64(off) if off else t


def groups(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows grouped by equal key tuples: (first row of each group, in order of first appearance;
    group of each row). Python then runs once per group. Each key column is factorised on its own
    (a 1-D sort) and the codes combined in one int64 (re-factorised before it could overflow): a
    row-wise ``np.unique(axis=0)`` sorts records and was 10x slower."""
    n = len(keys[0])
    if n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    code = np.zeros(n, np.int64)
    size = 1
    for c in keys:
        c = np.asarray(c)
        if c.dtype == bool:
            k, inv = 2, c.astype(np.int64)
        elif (c == c[0]).all():
            continue
        else:
            u, inv = np.unique(c, return_inverse=True)
            k, inv = len(u), inv.reshape(-1)
        if size * k >= 1 << 62:
            _, code = np.unique(code, return_inverse=True)
            code, size = code.reshape(-1), int(code.max()) + 1
        code = code * k + inv
        size *= k
    _, first, inv = np.unique(code, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return first[order], rank[inv.reshape(-1)]


class CorrIndex:
    """API-call rows by (process, correlation id); the last row of a repeated key wins (as a dict
    assignment would). ``find`` -> row or -1."""

    def __init__(self, proc: np.ndarray, corr: np.ndarray, rows: np.ndarray) -> None:
        order = np.lexsort((rows, corr, proc))
        p, c = proc[order], corr[order]
        last = np.ones(len(order), bool)
        last[:-1] = (p[1:] != p[:-1]) | (c[1:] != c[:-1])
        self.proc, self.corr, self.rows = p[last], c[last], rows[order][last]

    def find(self, proc: np.ndarray, corr: np.ndarray) -> np.ndarray:
        out = np.full(len(proc), -1, np.int64)
        if not len(self.rows) or not len(proc):
            return out
        for p in np.unique(proc).tolist():  # a report has a handful of processes
            lo, hi = np.searchsorted(self.proc, p, "left"), np.searchsorted(self.proc, p, "right")
            if lo == hi:
                continue
            q = np.flatnonzero(proc == p)
            keys = self.corr[lo:hi]
            pos = np.minimum(np.searchsorted(keys, corr[q]), hi - lo - 1)
            hit = keys[pos] == corr[q]
            out[q[hit]] = self.rows[lo:hi][pos[hit]]
        return out


class Rows:
    """The rows being built, one block of columns per table (or per batch of NVTX/sync rows), with the
    lane and phase tables they index. Row numbers are global, in the order blocks are added."""

    FIELDS = {"start": np.int64, "end": np.int64, "nbytes": np.int64, "gpu": bool, "kind": np.int8,
              "status": np.int8, "tie": np.int8, "lane": np.int32, "phase": np.int32, "device": np.int32,
              "proc": np.int64, "thread": np.int64}

    def __init__(self) -> None:
        self.blocks: list[dict[str, np.ndarray]] = []
        self.n = 0
        self.attrs: dict[int, Mapping] = {}  # row -> dict, or RowAttrs over a shared dict
        self.lanes: list[Lane] = []
        self.lane_ix: dict[Lane, int] = {}
        self.phases: list[str] = []
        self.phase_ix: dict[str, int] = {}
        self.tables: list[tuple[int, str]] = [(0, "?")]  # (first row, table) in the order read

    def lane(self, lane: Lane) -> int:
        k = self.lane_ix.get(lane)
        if k is None:
            k = self.lane_ix[lane] = len(self.lanes)
            self.lanes.append(lane)
        return k

    def phase(self, name: str) -> int:
        p = self.phase_ix.get(name)
        if p is None:
            p = self.phase_ix[name] = len(self.phases)
            self.phases.append(name)
        return p

    def block(self, table: str, **cols) -> int:
        """Append rows (``start``, ``end``, ``lane``, ``phase``, ``kind`` (a name), ``proc``, ``tie``; optional
        ``gpu``, ``nbytes`` (-1), ``device`` (-1), ``status`` (0), ``thread`` (-1)); scalars broadcast.
        Returns the first row's number. ``tie``: 0 NVTX, 1 API call, 2 device activity."""
        n = len(cols["start"])
        base = self.n
        if isinstance(cols["kind"], str):
            cols["kind"] = KIND_CODES[cols["kind"]]
        defaults = {"gpu": False, "nbytes": -1, "device": -1, "status": 0, "thread": -1}
        blk = {}
        for f, dt in self.FIELDS.items():
            v = cols.get(f, defaults.get(f))
            a = np.asarray(v, dtype=dt)
            blk[f] = np.full(n, a, dtype=dt) if a.ndim == 0 else a
        self.tables.append((base, table))
        self.blocks.append(blk)
        self.n += n
        return base

    def column(self, f: str) -> np.ndarray:
        parts = [b[f] for b in self.blocks]
        return np.concatenate(parts) if parts else np.empty(0, self.FIELDS[f])

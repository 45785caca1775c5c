"""Read access to an Nsight Systems SQLite export: the file check, tables, columns, enum tables, strings.

:mod:`gputrace.timeline.formats.nsys.read` maps the rows onto a Timeline; this module only knows the file. Errors
(:class:`NsysFormatError`) name the file and table. One :class:`NsysReport` wraps one sqlite
connection: use it on the thread that opened the connection.

The file is untrusted (``open_report``): opened read-only (``mode=ro``, ``query_only``) with
``trusted_schema`` off (no SQL functions with side effects from views or triggers), only base tables
are listed and read (a hostile view, e.g. a recursive one, is never queried), every query is a plain
``SELECT`` of named columns from one table, and a progress handler stops any query after
``OPS_PER_BYTE`` virtual-machine steps per byte of the file (a linear bound, far above what reading
every row costs). Every sqlite error, including a corrupt file, becomes an ``NsysFormatError``.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections.abc import Iterator
from itertools import chain
from pathlib import Path

import numpy as np

__all__ = ["NsysFormatError", "NsysReport", "is_nsys_sqlite", "open_report", "required_int", "session_start",
           "report_host_name"]

#: Work allowed per query, in SQLite VM steps per byte of the file (reading a row costs a few dozen steps).
OPS_PER_BYTE = 256
_OPS_MIN = 50_000_000
_CHECK_EVERY = 100_000
_BLOCK_ROWS = 65_536  # rows fetched at a time by ``NsysReport.arrays``

_SQLITE_MAGIC = b"SQLite format 3\x00"


class NsysFormatError(ValueError):
    """Not an nsys SQLite export, or a table in it breaks the schema; names file and table."""


def is_nsys_sqlite(path: str | Path) -> bool:
    """True if ``path`` is a SQLite file (nsys exports are; the reader checks the tables)."""
    try:
        with open(path, "rb") as f:
            return f.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


def open_report(path: Path) -> NsysReport:
    """Open an export read-only and untrusted (see the module docstring). Raises NsysFormatError."""
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise NsysFormatError(f"{path}: cannot open as SQLite ({exc})") from None
    try:
        conn.execute("PRAGMA query_only = ON")
        conn.execute("PRAGMA trusted_schema = OFF")
        return NsysReport(path, conn)
    except BaseException:
        conn.close()
        raise


class NsysReport:
    """The base tables, columns, enum tables and ``StringIds`` strings of one open export.

    ``table``: the table being read (for error messages). Raises NsysFormatError for sqlite errors.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path, self.conn = path, conn
        self.table = "sqlite_master"
        try:
            size = os.path.getsize(path)
        except OSError:
            size = 0
        self._budget = max(_OPS_MIN, OPS_PER_BYTE * size)
        self._ops = 0
        conn.set_progress_handler(self._progress, _CHECK_EVERY)
        self.tables = {str(r[0]) for r in self._run("SELECT name FROM sqlite_master WHERE type = 'table' "
                                                    "AND name NOT LIKE 'sqlite_%'", "sqlite_master")}
        self.strings: dict[int, str] = {}
        if "StringIds" in self.tables:
            self.table = "StringIds"
            self.strings = {int(i): str(v) for i, v in self._run("SELECT id, value FROM StringIds", "StringIds")
                            if i is not None}

    def _progress(self, _n=None) -> int:
        self._ops += _CHECK_EVERY
        return 1 if self._ops > self._budget else 0  # non-zero interrupts the query

    def _run(self, sql: str, table: str | None = None) -> Iterator[tuple]:
        """Rows of one query (started now, streamed); sqlite errors (corrupt pages, the work bound)
        -> NsysFormatError naming ``table`` (default: the table being read)."""
        table = table or self.table
        self._ops = 0
        try:
            cur = self.conn.execute(sql)
        except sqlite3.Error as exc:
            raise self._error(table, exc) from None
        return self._rows(cur, table)

    def _rows(self, cur, table: str) -> Iterator[tuple]:
        try:
            for row in cur:  # noqa: UP028 - not ``yield from``: closing this generator must not close the cursor late
                yield row
        except sqlite3.Error as exc:
            raise self._error(table, exc) from None

    def _error(self, table: str, exc: sqlite3.Error) -> NsysFormatError:
        msg = str(exc)
        if msg == "interrupted":
            msg = f"query stopped after {self._budget:,} steps (more work than a file of this size needs)"
        return NsysFormatError(f"{self.path}: table {table}: {msg}")

    def columns(self, table: str) -> set[str]:
        self.table = table
        return {str(r[1]) for r in self._run(f"PRAGMA table_info({_quote(table)})", table)}

    def select(self, table: str, wanted: list[str], where: str = "") -> tuple[list[str], Iterator[tuple]]:
        """Rows of ``table`` for the ``wanted`` columns the table has (missing ones come back None),
        streamed from the cursor (reports can hold millions of rows)."""
        have = self.columns(table)
        exprs = [_quote(c) if c in have else "NULL" for c in wanted]
        return wanted, self._run(f"SELECT {', '.join(exprs)} FROM {_quote(table)} {where}", table)

    def blocks(self, table: str, wanted: list[str]) -> Iterator[np.ndarray]:
        """The ``wanted`` columns of ``table`` as object arrays of up to ``_BLOCK_ROWS`` rows, shape (rows,
        len(wanted)) (the Python values SQLite gives; None for NULL and for columns the table lacks)."""
        have = self.columns(table)
        exprs = [_quote(c) if c in have else "NULL" for c in wanted]
        k = len(wanted)
        self._ops = 0
        try:
            cur = self.conn.execute(f"SELECT {', '.join(exprs)} FROM {_quote(table)}")
            while block := cur.fetchmany(_BLOCK_ROWS):
                yield np.fromiter(chain.from_iterable(block), dtype=object, count=len(block) * k).reshape(-1, k)
        except sqlite3.Error as exc:
            raise self._error(table, exc) from None

    def arrays(self, table: str, wanted: list[str]) -> dict[str, np.ndarray]:
        """The ``wanted`` columns of ``table`` as whole object arrays (for small tables; see ``blocks``)."""
        parts = list(self.blocks(table, wanted))
        data = np.concatenate(parts) if parts else np.empty((0, len(wanted)), dtype=object)
        return {c: data[:, i] for i, c in enumerate(wanted)}

    def _enum_rows(self, table: str, prefer: tuple[str, ...]) -> Iterator[tuple[int, str]]:
        """(id, value) rows of an ENUM_* table, the value from the first column of ``prefer`` it has. Raises
        NsysFormatError naming the table and column where it has no ``id`` column, none of ``prefer``, or an id
        that is not an integer (rows with a NULL id are skipped)."""
        cols = self.columns(table)
        if "id" not in cols:
            raise NsysFormatError(f"{self.path}: table {table}: no column id (an Nsight ENUM table maps id to name)")
        col = next((c for c in prefer if c in cols), None)
        if col is None:
            raise NsysFormatError(f"{self.path}: table {table}: no column {' or '.join(prefer)}")
        for i, v in self._run(f"SELECT id, {_quote(col)} FROM {_quote(table)}", table):
            if i is None:
                continue
            if type(i) is not int:
                raise NsysFormatError(f"{self.path}: table {table}: column id holds {type(i).__name__} "
                                      f"{str(i)[:40]!r}, not an integer")
            yield i, str(v)

    def enum(self, table: str) -> dict[int, str]:
        """id -> label (or name) from one of the report's ENUM_* tables; {} if absent. Raises NsysFormatError
        (naming the table and column) for a table without the columns an ENUM table has."""
        if table not in self.tables:
            return {}
        return dict(self._enum_rows(table, ("label", "name")))

    def enum_by_name(self, table: str) -> dict[int, str]:
        """id -> name (e.g. ``CUDA_MEMCPY_KIND_HTOD``), the label where the table has no name column; {} if absent.
        Raises NsysFormatError as ``enum``."""
        if table not in self.tables:
            return {}
        return dict(self._enum_rows(table, ("name", "label")))

    def enum_names(self, table: str) -> dict[str, int]:
        """name -> id; {} if the table is absent or has no name column. Raises NsysFormatError as ``enum``."""
        if table not in self.tables or "name" not in self.columns(table):
            return {}
        return {n: i for i, n in self._enum_rows(table, ("name",))}

    def text(self, text, text_id) -> str:
        if text is not None:
            return str(text)
        if text_id is not None:
            return self.strings.get(int(text_id), f"<string {text_id}>")
        return "<unnamed>"


def required_int(path, table, col, v) -> int:
    if v is None:
        raise NsysFormatError(f"{path}: table {table}: column {col} is NULL")
    return int(v)


def _quote(name: str) -> str:
    """An SQL identifier, quoted (names come from our own lists, checked against the file's tables)."""
    return '"' + name.replace('"', '""') + '"'


def session_start(rep: NsysReport) -> int | None:
    t = "TARGET_INFO_SESSION_START_TIME"
    if t in rep.tables and "utcEpochNs" in rep.columns(t):
        row = next(iter(rep._run(f"SELECT utcEpochNs FROM {t} LIMIT 1", t)), None)
        if row and row[0] is not None:
            return int(row[0])
    return None


def report_host_name(rep: NsysReport) -> str | None:
    t = "TARGET_INFO_SYSTEM_ENV"
    if t in rep.tables and {"name", "value"} <= rep.columns(t):
        row = next(iter(rep._run(f"SELECT value FROM {t} WHERE lower(name) = 'hostname' LIMIT 1", t)), None)
        if row and row[0]:
            return str(row[0])
    return None


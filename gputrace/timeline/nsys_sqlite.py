"""Read access to an Nsight Systems SQLite export: the file check, tables, columns, enum tables, strings.

:mod:`gputrace.timeline.nsys` maps the rows onto a Timeline; this module only knows the file. Errors
(:class:`NsysFormatError`) name the file and table. One :class:`NsysReport` wraps one sqlite
connection: use it on the thread that opened the connection.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterator

__all__ = ["NsysFormatError", "NsysReport", "is_nsys_sqlite", "required_int", "session_start", "report_host_name"]

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


class NsysReport:
    """The tables, columns, enum tables and ``StringIds`` strings of one open export."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path, self.conn = path, conn
        self.tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')")}
        self.strings: dict[int, str] = dict(conn.execute("SELECT id, value FROM StringIds")) if "StringIds" in self.tables else {}

    def columns(self, table: str) -> set[str]:
        return {r[1] for r in self.conn.execute(f"PRAGMA table_info({table})")}

    def select(self, table: str, wanted: list[str], where: str = "") -> tuple[list[str], Iterator[tuple]]:
        """Rows of ``table`` for the ``wanted`` columns the table has (missing ones come back None),
        streamed from the cursor (reports can hold millions of rows)."""
        have = self.columns(table)
        exprs = [c if c in have else "NULL" for c in wanted]
        try:
            cur = self.conn.execute(f"SELECT {', '.join(exprs)} FROM {table} {where}")
        except sqlite3.Error as exc:
            raise NsysFormatError(f"{self.path}: table {table}: {exc}") from None
        return wanted, cur

    def enum(self, table: str) -> dict[int, str]:
        """id -> label (or name) from one of the report's ENUM_* tables; {} if absent."""
        if table not in self.tables:
            return {}
        cols = self.columns(table)
        label = "label" if "label" in cols else "name"
        return {int(i): str(v) for i, v in self.conn.execute(f"SELECT id, {label} FROM {table}")}

    def enum_by_name(self, table: str) -> dict[int, str]:
        """id -> name (e.g. ``CUDA_MEMCPY_KIND_HTOD``), the label where the table has no name column; {} if absent."""
        if table not in self.tables:
            return {}
        cols = self.columns(table)
        col = "name" if "name" in cols else "label"
        return {int(i): str(v) for i, v in self.conn.execute(f"SELECT id, {col} FROM {table}")}

    def enum_names(self, table: str) -> dict[str, int]:
        if table not in self.tables or "name" not in self.columns(table):
            return {}
        return {str(n): int(i) for i, n in self.conn.execute(f"SELECT id, name FROM {table}")}

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


def session_start(rep: NsysReport) -> int | None:
    t = "TARGET_INFO_SESSION_START_TIME"
    if t in rep.tables and "utcEpochNs" in rep.columns(t):
        row = rep.conn.execute(f"SELECT utcEpochNs FROM {t}").fetchone()
        if row and row[0] is not None:
            return int(row[0])
    return None


def report_host_name(rep: NsysReport) -> str | None:
    t = "TARGET_INFO_SYSTEM_ENV"
    if t in rep.tables and {"name", "value"} <= rep.columns(t):
        row = rep.conn.execute(f"SELECT value FROM {t} WHERE lower(name) = 'hostname'").fetchone()
        if row and row[0]:
            return str(row[0])
    return None


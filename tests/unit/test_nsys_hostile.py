"""Hostile Nsight SQLite files: read-only, base tables only, bounded work, clean NsysFormatErrors."""

from __future__ import annotations

import sqlite3
import time

import pytest

from gputrace.timeline.load import read_any
from gputrace.timeline.formats.nsys.read import NsysFormatError, read_nsys
from tests.unit.test_nsys import MAIN, build_report


def _edit(p, *sql):
    con = sqlite3.connect(p)
    for s in sql:
        con.execute(s)
    con.commit()
    con.close()


def test_a_recursive_view_is_never_queried(tmp_path):
    p = build_report(tmp_path / "view.sqlite")
    # A view named like a table nsys writes, producing rows forever.
    _edit(p, "CREATE VIEW CUPTI_ACTIVITY_KIND_MEMSET AS WITH RECURSIVE r(start) AS (SELECT 0 UNION ALL "
          "SELECT start + 1 FROM r) SELECT start, start + 1 AS end, 0 AS deviceId, 1 AS streamId, 0 AS globalPid, "
          "NULL AS correlationId, 8 AS bytes, 0 AS memKind FROM r")
    t0 = time.monotonic()
    tl = read_nsys(p)
    assert time.monotonic() - t0 < 30
    assert not any(tl.phases[i] == "[CUDA memset]" for i in tl.cols["phase"].tolist())


def test_the_file_is_not_written(tmp_path):
    p = build_report(tmp_path / "ro.sqlite")
    before = p.read_bytes()
    read_nsys(p)
    assert p.read_bytes() == before
    assert not (tmp_path / "ro.sqlite-journal").exists() and not (tmp_path / "ro.sqlite-wal").exists()


def test_a_path_with_uri_characters_opens(tmp_path):
    p = build_report(tmp_path / "a?b#c%20.sqlite")
    assert read_nsys(p).n > 0


def test_a_corrupt_file_is_a_clean_error(tmp_path):
    p = build_report(tmp_path / "corrupt.sqlite")
    data = bytearray(p.read_bytes())
    for off in range(4096, len(data), 4096):  # garble every page after the first (the schema page stays)
        data[off + 8:off + 200] = b"\xa5" * 192
    p.write_bytes(bytes(data))
    with pytest.raises(NsysFormatError, match="corrupt.sqlite"):
        read_nsys(p)


def test_values_of_the_wrong_type_or_size_name_the_table(tmp_path):
    p = build_report(tmp_path / "types.sqlite")
    _edit(p, f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES ('soon','later',1,{MAIN},13,3,0,0)")
    with pytest.raises(NsysFormatError, match="types.sqlite: table CUPTI_ACTIVITY_KIND_RUNTIME: bad value"):
        read_nsys(p)
    q = build_report(tmp_path / "big.sqlite")
    _edit(q, f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (9223372036854775000,9223372036854775800,1,{MAIN},13,3,0,0)")
    with pytest.raises(NsysFormatError, match="big.sqlite: table CUPTI_ACTIVITY_KIND_RUNTIME: a value is outside"):
        read_nsys(q)


def test_rows_that_end_before_they_start_are_refused(tmp_path):
    p = build_report(tmp_path / "back.sqlite")
    _edit(p, "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start,end,deviceId,contextId,streamId,correlationId,globalPid,"
             "demangledName,shortName,registersPerThread,gridX,gridY,gridZ,blockX,blockY,blockZ,staticSharedMemory,"
             "dynamicSharedMemory) VALUES (9000,8000,0,1,7,99,0,6,7,40,1,1,1,1,1,1,0,0)")
    with pytest.raises(NsysFormatError, match="back.sqlite: table CUPTI_ACTIVITY_KIND_KERNEL: 1 row"):
        read_nsys(p)
    with pytest.raises(NsysFormatError):  # the entrance (view, report) gives the same error
        read_any([p])


def test_work_per_query_is_bounded(tmp_path, monkeypatch):
    import gputrace.timeline.formats.nsys.sqlite as ns

    p = build_report(tmp_path / "work.sqlite")
    monkeypatch.setattr(ns, "_OPS_MIN", 1)
    monkeypatch.setattr(ns, "OPS_PER_BYTE", 0)
    monkeypatch.setattr(ns, "_CHECK_EVERY", 1)
    with pytest.raises(NsysFormatError, match="query stopped after"):
        read_nsys(p)


@pytest.mark.parametrize("column, value, message", [
    ("gridY", "'wide'", "bad value"),
    ("correlationId", str(1 << 64), "a value is outside"),
    ("deviceId", "NULL", "column deviceId is NULL"),
    ("gridZ", "NULL", "bad value"),  # a grid with a NULL dimension
])
def test_bad_kernel_values_name_the_kernel_table(tmp_path, column, value, message):
    p = build_report(tmp_path / "k.sqlite")
    values = {"start": "9000", "end": "9500", "deviceId": "0", "contextId": "1", "streamId": "7",
              "correlationId": "99", "globalPid": "0", "demangledName": "6", "shortName": "7",
              "registersPerThread": "40", "gridX": "1", "gridY": "1", "gridZ": "1", "blockX": "1", "blockY": "1",
              "blockZ": "1", "staticSharedMemory": "0", "dynamicSharedMemory": "0", column: value}
    con = sqlite3.connect(p)  # the test schema says NOT NULL; a hostile file need not
    con.execute("CREATE TABLE k2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL")
    con.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    con.execute("ALTER TABLE k2 RENAME TO CUPTI_ACTIVITY_KIND_KERNEL")
    cols, vals = ", ".join(values), ", ".join(values.values())
    con.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL ({cols}) VALUES ({vals})")
    con.commit()
    con.close()
    with pytest.raises(NsysFormatError, match=f"k.sqlite: table CUPTI_ACTIVITY_KIND_KERNEL: {message}"):
        read_nsys(p)


@pytest.mark.parametrize("table", ["ENUM_CUDA_MEMCPY_OPER", "ENUM_CUDA_MEM_KIND", "ENUM_NSYS_EVENT_TYPE",
                                   "ENUM_CUPTI_SYNC_TYPE"])
def test_an_enum_table_without_an_id_column_names_the_table_and_column(tmp_path, table):
    p = build_report(tmp_path / "enum.sqlite")
    _edit(p, f"DROP TABLE IF EXISTS {table}", f"CREATE TABLE {table} (code INTEGER, name TEXT, label TEXT)",
          f"INSERT INTO {table} VALUES (1, 'X', 'x')",
          # a sync table, so that the sync types are read
          "CREATE TABLE IF NOT EXISTS CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER, end INTEGER, "
          "deviceId INTEGER, streamId INTEGER, globalPid INTEGER, correlationId INTEGER, syncType INTEGER, "
          "eventId INTEGER)")
    with pytest.raises(NsysFormatError, match=f"enum.sqlite: table {table}: no column id"):
        read_nsys(p)
    with pytest.raises(NsysFormatError, match=f"table {table}: no column id"):
        read_any([p])


def test_an_enum_id_that_is_not_an_integer_names_the_table(tmp_path):
    p = build_report(tmp_path / "enumtext.sqlite")
    _edit(p, "DROP TABLE ENUM_CUDA_MEM_KIND", "CREATE TABLE ENUM_CUDA_MEM_KIND (id, name TEXT, label TEXT)",
          "INSERT INTO ENUM_CUDA_MEM_KIND VALUES ('two', 'X', 'x')")
    with pytest.raises(NsysFormatError, match="table ENUM_CUDA_MEM_KIND: column id holds str 'two'"):
        read_nsys(p)


@pytest.mark.parametrize("command", [["import", "nsys"], ["report"]])
def test_import_and_report_of_such_a_file_print_one_line(tmp_path, command):
    import subprocess
    import sys

    p = build_report(tmp_path / "enum.sqlite")
    _edit(p, "DROP TABLE ENUM_CUDA_MEM_KIND", "CREATE TABLE ENUM_CUDA_MEM_KIND (code INTEGER, name TEXT)")
    out = subprocess.run([sys.executable, "-m", "gputrace.cli", *command, str(p)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr and "OperationalError" not in out.stderr
    assert "table ENUM_CUDA_MEM_KIND: no column id" in out.stderr


def test_a_report_without_the_cuda_api_table_reads_its_kernels(tmp_path):
    """``nsys export`` with the CUDA API trace off has no CUPTI_ACTIVITY_KIND_RUNTIME (issue 34: refused with a
    numpy IndexError naming the kernel table): the kernels, copies and ranges read, without launching calls."""
    from gputrace import activity as A

    full = read_nsys(build_report(tmp_path / "full.sqlite"))
    p = build_report(tmp_path / "no_api.sqlite")
    _edit(p, "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME")
    tl = read_nsys(p)
    kernels = [r for r, a in tl.attrs.items() if a.get(A.ACTIVITY) == "kernel"]
    want = [r for r, a in full.attrs.items() if a.get(A.ACTIVITY) == "kernel"]
    assert len(kernels) == len(want) > 0
    assert all(A.API not in tl.attrs[r] for r in kernels)
    assert not any(ln.name.startswith("api:") for ln in tl.lanes)

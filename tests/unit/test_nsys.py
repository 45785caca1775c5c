"""Nsight Systems SQLite import (gputrace.timeline.formats.nsys.read), against files built here to the export schema.

The CREATE TABLE statements follow the nsys SQLite export schema reference (StringIds, ThreadNames,
PROCESSES, NVTX_EVENTS, CUPTI_ACTIVITY_KIND_RUNTIME/_KERNEL/_MEMCPY, the ENUM_* tables and
TARGET_INFO_SESSION_START_TIME), including columns the reader does not use. Column lists and the
enum rows were checked against a real report: Nsight Systems 2025.3.1 (`nsys profile -t cuda,nvtx`
on an H200, exported with `nsys export --type sqlite`); see docs/nsight.md.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from gputrace.phases import phase_color
from gputrace.timeline import Lane
from gputrace.timeline.model import KIND_CODES
from gputrace.timeline.formats.nsys.read import NsysFormatError, read_nsys

EPOCH = 1_764_000_000_000_000_000
PID = 4321
MAIN, WORKER, HELPER = (PID << 24) | PID, (PID << 24) | (PID + 1), (PID << 24) | (PID + 2)
GPID = PID << 24

SCHEMA = """
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
  category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
  domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,
  int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData BLOB);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER,
  cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL,
  gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
  staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER,
  localMemoryTotal INTEGER, gridId INTEGER, sharedMemoryExecuted INTEGER, graphNodeId INTEGER,
  sharedMemoryLimitConfig INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER,
  srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER,
  graphNodeId INTEGER, virtualAddress INTEGER, copyCount INTEGER);
"""

# Event type ids as recent nsys versions number them; the reader must take them from the table.
EVENT_TYPES = [(33, "NvtxCategory"), (34, "NvtxMark"), (59, "NvtxPushPopRange"), (60, "NvtxStartEndRange"),
               (75, "NvtxDomainCreate")]
# As in the 2025.3.1 report (the reader must not rely on these numbers; see the shuffled variant).
MEMCPY_OPER = [(0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"), (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
               (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host")]
MEM_KIND = [(0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"), (1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"),
            (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"), (3, "CUDA_MEMOPR_MEMORY_KIND_ARRAY", "Array")]
STRINGS = {1: "MainThread", 2: "worker", 3: "cudaLaunchKernel_v7000", 4: "cudaMemcpyAsync_v3020",
           5: "cudaStreamSynchronize_v3020", 6: "void ntt_kernel<256>(Fr*, int)", 7: "ntt_kernel",
           8: "user range", 9: "python3"}


def build_report(path: Path, *, session=True, event_enum=True, mem_kind=MEM_KIND, types=None) -> Path:
    types = dict((n, i) for i, n in (types or EVENT_TYPES))
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.executemany("INSERT INTO StringIds VALUES (?,?)", STRINGS.items())
    con.executemany("INSERT INTO ThreadNames VALUES (?,?,?)", [(1, 0, MAIN), (2, 0, WORKER), (1, 0, HELPER)])
    con.execute("INSERT INTO PROCESSES VALUES (?,?,?)", (GPID, PID, "python3"))
    if event_enum:
        con.executemany("INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (?,?,?)", [(i, n, n) for n, i in types.items()])
    else:
        con.execute("DROP TABLE ENUM_NSYS_EVENT_TYPE")
    con.executemany("INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (?,?,?)", MEMCPY_OPER)
    con.executemany("INSERT INTO ENUM_CUDA_MEM_KIND VALUES (?,?,?)", mem_kind)
    if session:
        con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?,?,?)", (EPOCH, "", ""))
    else:
        con.execute("DROP TABLE TARGET_INFO_SESSION_START_TIME")
    PP, SE = types["NvtxPushPopRange"], types["NvtxStartEndRange"]
    nvtx = [  # start, end, eventType, category, color, text, globalTid, textId, domainId, uint64Value, int64Value
        (0, None, types["NvtxDomainCreate"], None, None, "gputrace", MAIN, None, 1, None, None),
        (0, None, types["NvtxCategory"], 1, None, "gpu 0", MAIN, None, 1, None, None),
        # synthesis is inserted before prove and starts at the same instant: prove must still be its parent.
        (1_000, 30_000, PP, None, phase_color("synthesis"), "synthesis", MAIN, None, 1, None, None),
        (1_000, 100_000, PP, None, phase_color("prove"), "prove", MAIN, None, 1, None, None),
        # The nvtx package sends integer payloads as int64 (seen in the real report).
        (40_000, 60_000, PP, 1, phase_color("ntt"), "ntt", MAIN, None, 1, None, 4096),
        (30_000, 39_000, SE, None, phase_color("pin"), "pin", WORKER, None, 1, 1 << 20, None),
        (61_000, 62_000, PP, None, None, None, MAIN, 8, 0, None, None),  # default domain, name via textId
        (70_000, None, PP, None, None, "never ended", MAIN, None, 1, None, None),
    ]
    con.executemany(
        "INSERT INTO NVTX_EVENTS (start,end,eventType,category,color,text,globalTid,textId,domainId,uint64Value,"
        "int64Value) VALUES (?,?,?,?,?,?,?,?,?,?,?)", nvtx)
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?,?)",
        [(41_000, 41_500, 1, MAIN, 10, 3, 0, 0), (42_000, 42_300, 1, MAIN, 11, 4, 0, 0),
         (59_000, 59_900, 1, MAIN, 12, 5, 0, 0), (63_000, 63_500, 1, HELPER, 13, 5, 0, 0)])
    con.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start,end,deviceId,contextId,streamId,correlationId,globalPid,"
        "demangledName,shortName,registersPerThread,gridX,gridY,gridZ,blockX,blockY,blockZ,staticSharedMemory,"
        "dynamicSharedMemory) VALUES (43000,55000,0,1,7,10,?,6,7,40,1024,1,1,256,1,1,0,0)", (GPID,))
    pinned = next(i for i, n, _ in mem_kind if n.endswith("PINNED"))
    device = next(i for i, n, _ in mem_kind if n.endswith("DEVICE"))
    pageable = next(i for i, n, _ in mem_kind if n.endswith("PAGEABLE"))
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start,end,deviceId,contextId,streamId,correlationId,globalPid,"
        "bytes,copyKind,srcKind,dstKind) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        [(42_500, 43_000, 0, 1, 7, 11, GPID, 4096, 1, pinned, device),
         (80_000, 90_000, 0, 1, 7, 99, GPID, 1 << 20, 2, device, pageable)])
    con.commit()
    con.close()
    return path


def _rows(tl) -> dict:
    return {tl.name_of(r): r for r in range(tl.n)}


def test_report_maps_to_lanes_times_and_parents(tmp_path):
    tl = read_nsys(build_report(tmp_path / "prove.sqlite"))
    r = _rows(tl)
    assert "never ended" not in r
    main = Lane("prove", PID, -1, "thread:MainThread")
    gpu = Lane("prove", PID, 0, "stream:7")
    assert tl.lanes[tl.lane[r["prove"]]] == main
    assert tl.lanes[tl.lane[r["pin"]]] == Lane("prove", PID, -1, "thread:worker")
    assert tl.nbytes[r["pin"]] == 1 << 20  # uint64 payload
    # Two threads named MainThread: the main one (tid == pid) keeps the name, the other gets its tid.
    # (That thread made only CUDA API calls, which have a lane of their own: api:NAME.)
    assert Lane("prove", PID, -1, f"api:MainThread ({PID + 2})") in tl.lanes
    assert tl.start[r["prove"]] == EPOCH + 1_000 and tl.end[r["prove"]] == EPOCH + 100_000
    # Same start instant: the longer range is the parent.
    assert tl.parent[r["synthesis"]] == r["prove"] and tl.depth[r["synthesis"]] == 1
    # gputrace ranges: device from the "gpu 0" category, bytes from the payload, kind from the phase.
    assert tl.lanes[tl.lane[r["ntt"]]] == Lane("prove", PID, 0, "thread:MainThread")  # under GPU 0
    assert tl.parent[r["ntt"]] == r["prove"]  # nesting is per OS thread, across its lanes
    assert tl.device[r["ntt"]] == 0 and tl.nbytes[r["ntt"]] == 4096 and tl.kind[r["ntt"]] == KIND_CODES["gpu"]
    assert tl.attrs[r["ntt"]]["nvtx.domain"] == "gputrace" and tl.attrs[r["ntt"]]["nvtx.category"] == "gpu 0"
    assert tl.attrs[r["ntt"]]["nvtx.color"] == "#%06x" % (phase_color("ntt") & 0xFFFFFF)
    assert tl.kind[r["pin"]] == KIND_CODES["pin"] and tl.attrs[r["pin"]]["nvtx.range"] == "start/end"
    assert tl.attrs[r["user range"]]["nvtx.domain"] == "default" and tl.kind[r["user range"]] == KIND_CODES["host"]
    # The kernel: on GPU 0 stream 7 at device time, child of the NVTX range around its launch call.
    k = r["ntt_kernel"]
    assert tl.lanes[tl.lane[k]] == gpu
    assert tl.gpu_start[k] == tl.start[k] == EPOCH + 43_000 and tl.gpu_end[k] == EPOCH + 55_000
    assert tl.parent[k] == r["ntt"]
    # GPU activity conventions (docs/trace-format.md): the same names as a CUPTI trace.
    assert tl.attrs[k]["cuda.api"] == "cudaLaunchKernel" and tl.attrs[k]["cuda.correlation_id"] == 10
    assert tl.attrs[k]["cuda.launch.api_start_ns"] == EPOCH + 41_000  # the launching call's start
    assert tl.attrs[k]["cuda.kernel.name"] == "void ntt_kernel<256>(Fr*, int)"
    assert tl.attrs[k]["cuda.grid"] == [1024, 1, 1] and tl.attrs[k]["cuda.registers_per_thread"] == 40
    assert tl.attrs[k]["gputrace.activity"] == "kernel" and tl.attrs[k]["gputrace.source"] == "nsys"
    assert tl.attrs[k]["cuda.stream"] == 7 and tl.attrs[k]["cuda.shared_memory.dynamic"] == 0
    assert "cuda.correlation_id" not in tl.attrs.get(r["cudaLaunchKernel"], {})  # API rows: only on request
    # API calls: version suffix dropped, nested under the NVTX range, sync calls are 'sync'.
    assert tl.parent[r["cudaLaunchKernel"]] == r["ntt"]
    assert tl.kind[r["cudaStreamSynchronize"]] == KIND_CODES["sync"]
    # Resources and traces: one per process, on the epoch clock.
    res = tl.resources[tl.resource[k]]
    assert res["service.name"] == "python3" and res["process.pid"] == PID and "nsys.clock" not in res
    assert len(tl.trace_ids) == 1 and len(tl.trace_ids[0]) == 32


def test_correlation_ids_on_request(tmp_path):
    tl = read_nsys(build_report(tmp_path / "c.sqlite"), correlation_ids=True)
    r = _rows(tl)
    assert tl.attrs[r["ntt_kernel"]]["cuda.correlation_id"] == 10
    assert tl.attrs[r["cudaLaunchKernel"]]["cuda.correlation_id"] == 10


def test_memcpy_kinds_come_from_the_enum_tables(tmp_path):
    tl = read_nsys(build_report(tmp_path / "a.sqlite"))
    r = _rows(tl)
    h2d = r["[CUDA memcpy HtoD]"]
    a = tl.attrs[h2d]
    assert (a["cuda.memcpy.kind"], a["cuda.memcpy.src_kind"], a["cuda.memcpy.dst_kind"]) == ("HtoD", "PINNED", "DEVICE")
    assert a["gputrace.activity"] == "memcpy" and a["cuda.api"] == "cudaMemcpyAsync"
    assert tl.nbytes[h2d] == 4096 and tl.parent[h2d] == r["ntt"]
    d2h = r["[CUDA memcpy DtoH]"]
    assert tl.attrs[d2h]["cuda.memcpy.dst_kind"] == "PAGEABLE" and tl.parent[d2h] == -1  # no launching call
    assert "cuda.launch.api_start_ns" not in tl.attrs[d2h]
    # Renumber the memory kinds: the labels follow the report's table, not fixed ids.
    shuffled = [(7, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"), (1, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"),
                (9, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned (page-locked)")]
    tl2 = read_nsys(build_report(tmp_path / "b.sqlite", mem_kind=shuffled))
    a2 = tl2.attrs[_rows(tl2)["[CUDA memcpy HtoD]"]]
    assert a2["cuda.memcpy.src_kind"] == "PINNED" and a2["cuda.memcpy.dst_kind"] == "DEVICE"
    # A report whose enum tables carry labels only still normalises ("Pinned (page-locked)" -> PINNED).
    p = build_report(tmp_path / "c.sqlite", mem_kind=shuffled)
    con = sqlite3.connect(p)
    con.execute("UPDATE ENUM_CUDA_MEM_KIND SET name = NULL")
    con.execute("CREATE TABLE m AS SELECT id, label FROM ENUM_CUDA_MEM_KIND")
    con.execute("DROP TABLE ENUM_CUDA_MEM_KIND")
    con.execute("ALTER TABLE m RENAME TO ENUM_CUDA_MEM_KIND")
    con.commit()
    con.close()
    tl3 = read_nsys(p)
    a3 = tl3.attrs[_rows(tl3)["[CUDA memcpy HtoD]"]]
    assert (a3["cuda.memcpy.src_kind"], a3["cuda.memcpy.dst_kind"]) == ("PINNED", "DEVICE")


def test_event_types_come_from_the_enum_table(tmp_path):
    # A report numbering its event types differently still reads (ids from ENUM_NSYS_EVENT_TYPE) ...
    odd = [(133, "NvtxCategory"), (134, "NvtxMark"), (159, "NvtxPushPopRange"), (160, "NvtxStartEndRange"),
           (175, "NvtxDomainCreate")]
    tl = read_nsys(build_report(tmp_path / "odd.sqlite", types=odd))
    assert {"prove", "synthesis", "ntt", "pin"} <= set(_rows(tl))
    # ... and an old report without the table uses the documented legacy ids.
    tl2 = read_nsys(build_report(tmp_path / "old.sqlite", event_enum=False))
    assert tl2.attrs[_rows(tl2)["ntt"]]["nvtx.domain"] == "gputrace"


def test_without_session_start_times_stay_relative(tmp_path):
    tl = read_nsys(build_report(tmp_path / "rel.sqlite", session=False), host="node7")
    r = _rows(tl)
    assert tl.start[r["prove"]] == 1_000
    assert tl.resources[0]["nsys.clock"] == "session" and tl.lanes[0].host == "node7"


def test_runtime_false_drops_api_calls_but_keeps_links(tmp_path):
    tl = read_nsys(build_report(tmp_path / "x.sqlite"), runtime=False)
    r = _rows(tl)
    assert not any(n.startswith("cuda") for n in r)
    assert tl.parent[r["ntt_kernel"]] == r["ntt"]


def test_bad_inputs_name_the_file(tmp_path):
    p = tmp_path / "notdb.sqlite"
    p.write_text("hello")
    with pytest.raises(NsysFormatError, match="notdb.sqlite.*not a SQLite"):
        read_nsys(p)
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(NsysFormatError, match="empty.sqlite: no Nsight Systems tables"):
        read_nsys(empty)
    rep = tmp_path / "r.nsys-rep"
    rep.write_bytes(b"x")
    with pytest.raises(NsysFormatError, match="nsys export --type sqlite"):
        read_nsys(rep)
    with pytest.raises(FileNotFoundError):
        read_nsys(tmp_path / "missing.sqlite")


def test_missing_required_column_value_names_table(tmp_path):
    p = build_report(tmp_path / "bad.sqlite")
    con = sqlite3.connect(p)
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (1,2,1,NULL,13,3,0,0)")
    con.commit()
    con.close()
    with pytest.raises(NsysFormatError, match="CUPTI_ACTIVITY_KIND_RUNTIME: column globalTid"):
        read_nsys(p)


def test_many_kernels_stay_linked(tmp_path):
    p = build_report(tmp_path / "many.sqlite")
    con = sqlite3.connect(p)
    n = 2000
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,1,?,?,3,0,0)",
                    [(40_000 + i * 10, 40_000 + i * 10 + 5, MAIN, 1000 + i) for i in range(n)])
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start,end,deviceId,contextId,streamId,correlationId,globalPid,"
        "demangledName,shortName,registersPerThread,gridX,gridY,gridZ,blockX,blockY,blockZ,staticSharedMemory,"
        "dynamicSharedMemory) VALUES (?,?,1,1,3,?,?,6,7,40,1,1,1,1,1,1,0,0)",
        [(100_000 + i * 100, 100_000 + i * 100 + 50, 1000 + i, GPID) for i in range(n)])
    con.commit()
    con.close()
    tl = read_nsys(p)
    lane = tl.lanes.index(Lane("many", PID, 1, "stream:3"))
    rows = tl.lane_rows(lane)
    assert len(rows) == n
    # Identical static attribute sets are one shared dict, not one per launch; the per-launch
    # correlation id and launch-call start ride on a small RowAttrs.
    assert len({id(tl.attrs[int(r)].shared) for r in rows}) == 1 and tl.attrs[int(rows[0])]["cuda.api"] == "cudaLaunchKernel"
    assert len({tl.attrs[int(r)]["cuda.correlation_id"] for r in rows}) == n
    ntt = _rows(tl)["ntt"]
    assert np.all(tl.parent[rows] == ntt)

"""One representation: the same GPU work read from an Nsight Systems export and from CUPTI activity
records gives the same Timeline rows (names, lanes, devices, kinds, times, bytes, parents and every
attribute but ``gputrace.source``).

The work is written once as CUPTI-like record dicts (gputrace.testing.activity_records); the nsys
side is an export built from those records with the tables and enum tables of a real report
(see tests/unit/test_nsys.py for the schema provenance), the CUPTI side goes through the reference
conversion and the OTLP reader.
"""

from __future__ import annotations

import sqlite3

import pytest

from gputrace.analysis.gpu_summary import gpu_summary
from gputrace.testing.activity_records import activity_timeline
from gputrace.timeline.formats.nsys.read import read_nsys
from test_nsys import GPID, MAIN, PID, SCHEMA

HOST = "node1"
T0 = 1_764_000_000_000_000_000  # session start (epoch ns)
NTT, MSM = 1, 2

SYNC_SCHEMA = """
CREATE TABLE ENUM_CUPTI_SYNC_TYPE (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  syncType INTEGER NOT NULL, eventId INTEGER NOT NULL, eventSyncId INTEGER);
"""
# Enum rows as a 2025 report numbers them (the reader looks them up; see test_nsys for renumbering).
MEMCPY_OPER = [(0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"), (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
               (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"), (8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device")]
MEM_KIND = [(0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"), (1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"),
            (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"), (4, "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "Managed")]
SYNC_TYPE = [(0, "UNKNOWN", "Unknown"), (1, "EVENT_SYNCHRONIZE", "Event synchronize"),
             (2, "STREAM_WAIT_EVENT", "Stream wait event"), (3, "STREAM_SYNCHRONIZE", "Stream synchronize"),
             (4, "CONTEXT_SYNCHRONIZE", "Context synchronize")]


def us(x: float) -> int:
    return T0 + int(x * 1000)


def kernel(name, s, e, dev, stream, corr, phase, regs=32):
    return {"kind": "KERNEL", "start": us(s), "end": us(e), "device_id": dev, "stream_id": stream, "correlation_id": corr,
            "name": f"void {name}<(int)4>(unsigned long const*, int)", "grid_x": 128, "grid_y": 2, "grid_z": 1,
            "block_x": 256, "block_y": 1, "block_z": 1, "registers_per_thread": regs, "static_shared_memory": 512,
            "dynamic_shared_memory": 4096, "phase": phase}


def api(name, s, corr):
    return {"kind": "RUNTIME", "start": us(s), "end": us(s + 2), "name": name, "correlation_id": corr}


RECORDS = [
    api("cudaLaunchKernel", 10, 1), kernel("ntt_fwd", 15, 40, 0, 7, 1, NTT),
    api("cudaLaunchKernel", 20, 2), kernel("ntt_twiddle", 45, 60, 0, 7, 2, NTT, regs=64),
    api("cudaMemcpyAsync", 61, 3),
    {"kind": "MEMCPY", "start": us(62), "end": us(70), "device_id": 0, "stream_id": 7, "correlation_id": 3,
     "copy_kind": "CUPTI_ACTIVITY_MEMCPY_KIND_HTOD", "src_kind": "CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE",
     "dst_kind": "CUPTI_ACTIVITY_MEMORY_KIND_DEVICE", "bytes": 1 << 20, "phase": NTT},
    api("cudaMemsetAsync", 71, 4),
    {"kind": "MEMSET", "start": us(72), "end": us(73), "device_id": 1, "stream_id": 9, "correlation_id": 4,
     "memory_kind": "CUPTI_ACTIVITY_MEMORY_KIND_DEVICE", "bytes": 4096, "phase": MSM},
    api("cudaLaunchKernel", 74, 5), kernel("msm_bucket", 80, 120, 1, 9, 5, MSM),
    api("cudaMemcpyAsync", 121, 6),
    {"kind": "MEMCPY", "start": us(125), "end": us(130), "device_id": 1, "stream_id": 9, "correlation_id": 6,
     "copy_kind": "CUPTI_ACTIVITY_MEMCPY_KIND_DTOH", "src_kind": "CUPTI_ACTIVITY_MEMORY_KIND_DEVICE",
     "dst_kind": "CUPTI_ACTIVITY_MEMORY_KIND_PINNED", "bytes": 65536, "phase": MSM},
    {"kind": "RUNTIME", "start": us(122), "end": us(131), "name": "cudaStreamSynchronize", "correlation_id": 7},
    {"kind": "SYNCHRONIZATION", "start": us(122), "end": us(131), "device_id": 1, "stream_id": 9,
     "type": "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "correlation_id": 7,
     "thread": "MainThread", "thread_id": PID, "phase": MSM},
]
PHASES = [("ntt", NTT, 5, 71, 0), ("msm_h", MSM, 71, 135, 1)]  # name, span id, start, end (µs), device


def nsys_report(path, records=RECORDS):
    """An nsys export of the work: NVTX ranges for the phases, API rows, activity rows."""
    con = sqlite3.connect(path)
    con.executescript(SCHEMA.replace("CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET", "CREATE TABLE _unused"))
    con.executescript(SYNC_SCHEMA)
    strings: dict[str, int] = {}

    def sid(text: str) -> int:
        if text not in strings:
            strings[text] = len(strings) + 1
            con.execute("INSERT INTO StringIds VALUES (?,?)", (strings[text], text))
        return strings[text]

    con.execute("INSERT INTO ThreadNames VALUES (?,?,?)", (sid("MainThread"), 0, MAIN))
    con.execute("INSERT INTO PROCESSES VALUES (?,?,?)", (GPID, PID, "python3"))
    con.executemany("INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (?,?,?)",
                    [(33, "NvtxCategory", ""), (59, "NvtxPushPopRange", ""), (75, "NvtxDomainCreate", "")])
    con.executemany("INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (?,?,?)", MEMCPY_OPER)
    con.executemany("INSERT INTO ENUM_CUDA_MEM_KIND VALUES (?,?,?)", MEM_KIND)
    con.executemany("INSERT INTO ENUM_CUPTI_SYNC_TYPE VALUES (?,?,?)", SYNC_TYPE)
    con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?,?,?)", (T0, "", ""))
    for name, _, s, e, _dev in PHASES:
        con.execute("INSERT INTO NVTX_EVENTS (start,end,eventType,text,globalTid,domainId) VALUES (?,?,59,?,?,0)",
                    (s * 1000, e * 1000, name, MAIN))
    enum = {n: i for i, n, _ in MEMCPY_OPER + MEM_KIND + SYNC_TYPE}
    short = lambda full: full.split("<")[0].split()[-1]  # noqa: E731 (what nsys stores as shortName)
    for r in records:
        k, s, e = r["kind"], r["start"] - T0, r["end"] - T0
        if k == "RUNTIME":
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,1,?,?,?,0,0)",
                        (s, e, MAIN, r["correlation_id"], sid(r["name"] + "_v3020")))
        elif k == "KERNEL":
            con.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start,end,deviceId,contextId,streamId,correlationId,globalPid,"
                "demangledName,shortName,registersPerThread,gridX,gridY,gridZ,blockX,blockY,blockZ,staticSharedMemory,"
                "dynamicSharedMemory) VALUES (?,?,?,1,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (s, e, r["device_id"], r["stream_id"], r["correlation_id"], GPID, sid(r["name"]), sid(short(r["name"])),
                 r["registers_per_thread"], r["grid_x"], r["grid_y"], r["grid_z"], r["block_x"], r["block_y"],
                 r["block_z"], r["static_shared_memory"], r["dynamic_shared_memory"]))
        elif k == "MEMCPY":
            ck = "CUDA_MEMCPY_KIND_" + r["copy_kind"].rsplit("_", 1)[1]
            mk = lambda v: "CUDA_MEMOPR_MEMORY_KIND_" + v.rsplit("KIND_", 1)[1]  # noqa: E731
            con.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start,end,deviceId,contextId,streamId,correlationId,globalPid,"
                "bytes,copyKind,srcKind,dstKind) VALUES (?,?,?,1,?,?,?,?,?,?,?)",
                (s, e, r["device_id"], r["stream_id"], r["correlation_id"], GPID, r["bytes"], enum[ck],
                 enum[mk(r["src_kind"])], enum[mk(r["dst_kind"])]))
        elif k == "MEMSET":
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?,?,?,1,NULL,?,?,?,0,?,NULL,?)",
                        (s, e, r["device_id"], r["stream_id"], r["correlation_id"], GPID, r["bytes"],
                         enum["CUDA_MEMOPR_MEMORY_KIND_" + r["memory_kind"].rsplit("KIND_", 1)[1]]))
        elif k == "SYNCHRONIZATION":
            st = r["type"].split("TYPE_", 1)[1]
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (?,?,?,1,NULL,?,?,?,?,?,NULL)",
                        (s, e, r["device_id"], r["stream_id"], r["correlation_id"], GPID, enum[st], 0xFFFFFFFF))
    con.commit()
    con.close()
    return path


def cupti_timeline(records=RECORDS):
    res = {"service.name": "python3", "host.name": HOST, "process.pid": PID}
    phases = [{"span_id": sid, "name": name, "start_ns": us(s), "end_ns": us(e),
               "attributes": {"gputrace.lane": "thread:MainThread"}} for name, sid, s, e, _ in PHASES]
    return activity_timeline(res, phases, records, source="cupti")


def activity_rows(tl) -> list[tuple]:
    """Every GPU activity row as comparable plain data, in (start, name) order."""
    out = []
    for r in range(tl.n):
        a = tl.attrs.get(r, {})
        if "gputrace.activity" not in a:
            continue
        ln = tl.lanes[int(tl.lane[r])]
        p = int(tl.parent[r])
        attrs = {k: v for k, v in dict(a).items() if k != "gputrace.source"}
        out.append((int(tl.start[r]), tl.name_of(r), ln.name, ln.device, ln.pid, int(tl.device[r]), int(tl.kind[r]),
                    int(tl.end[r]), int(tl.gpu_start[r]), int(tl.gpu_end[r]), int(tl.nbytes[r]),
                    tl.name_of(p) if p >= 0 else None, sorted(attrs.items())))
    return sorted(out, key=lambda x: (x[0], x[1]))


def test_nsys_and_cupti_give_the_same_activity_rows(tmp_path):
    nsys = read_nsys(nsys_report(tmp_path / "work.sqlite"), host=HOST)
    cupti = cupti_timeline()
    a, b = activity_rows(nsys), activity_rows(cupti)
    assert len(a) == 7  # 3 kernels, 2 copies, 1 memset, 1 sync
    for x, y in zip(a, b):
        assert x == y
    assert a == b
    srcs = {nsys.attrs[r]["gputrace.source"] for r in range(nsys.n) if "gputrace.activity" in nsys.attrs.get(r, {})}
    assert srcs == {"nsys"}


def test_the_analysis_agrees_on_both(tmp_path):
    nsys = read_nsys(nsys_report(tmp_path / "work.sqlite"), host=HOST)
    s1, s2 = gpu_summary(nsys), gpu_summary(cupti_timeline())
    for key in ("devices", "copies", "kernels"):
        assert s1[key] == s2[key], key
    lg = lambda s: [(r["phase"], r["device"], r["busy_ns"], r["kernel_ns"], r["kernels"]) for r in s["launch_gaps"]]  # noqa: E731
    assert lg(s1) == lg(s2) and len(lg(s1)) == 2
    w1 = [{k: v for k, v in w.items() if k != "row"} for w in s1["sync_waits"]]
    w2 = [{k: v for k, v in w.items() if k != "row"} for w in s2["sync_waits"]]
    assert w1 == w2 and w1[0]["gpu_busy_ns"] == 5_000 and w1[0]["type"] == "stream"


@pytest.mark.parametrize("field,value", [("registers_per_thread", 33), ("stream_id", 8), ("bytes", 1 << 19)])
def test_the_comparison_can_fail(tmp_path, field, value):
    """A difference in one field of one record shows up as a differing row."""
    changed = [dict(r) for r in RECORDS]
    i = next(i for i, r in enumerate(changed) if field in r and r["kind"] in ("KERNEL", "MEMCPY"))
    changed[i][field] = value
    nsys = read_nsys(nsys_report(tmp_path / "work.sqlite"), host=HOST)
    assert activity_rows(nsys) != activity_rows(cupti_timeline(changed))


# ---- against the CUPTI collector's own record -> span conversion (gputrace.trace.cupti_join) -----------
OFF = T0 - 5_000_000  # CUPTI timestamp + OFF = epoch ns
_KINDS = {"KERNEL": "CONCURRENT_KERNEL"}


def plain_records(records=RECORDS) -> list[dict]:
    """The work as the collector's plain records (CUPTI field names, enum member names, CUPTI clock),
    with the EXTERNAL_CORRELATION records that the phases' pushed external ids give."""
    out = []
    for r in records:
        p = {k: v for k, v in r.items() if k not in ("phase", "thread")}
        p["kind"] = _KINDS.get(r["kind"], r["kind"])
        p["start"], p["end"] = r["start"] - OFF, r["end"] - OFF
        if r["kind"] == "RUNTIME":
            p.update(thread_id=PID, process_id=PID)
        else:
            p["context_id"] = r.get("device_id", 0) + 1
        for f in ("copy_kind", "src_kind", "dst_kind", "memory_kind"):
            if f in p:
                p[f] = p[f].rsplit("KIND_", 1)[1]
        if "type" in p:
            p["type"] = p["type"].split("TYPE_", 1)[1]
            p["cuda_event_id"] = 0xFFFFFFFF
        out.append(p)
        if r.get("phase") is not None and r.get("correlation_id") is not None:
            out.append({"kind": "EXTERNAL_CORRELATION", "correlation_id": r["correlation_id"],
                        "external_id": 100 + r["phase"], "external_kind": "CUSTOM0"})
    return out


def collector_timeline(records=RECORDS):
    from gputrace.otlp.encode import encode_request
    from gputrace.timeline.formats.otlp_jsonl._loader import TraceLoader
    from gputrace.trace.cupti_join import ActivityJoin
    from gputrace.trace.records import IdSource

    trace = 0x0123456789ABCDEF0123456789ABCDEF
    j = ActivityJoin(IdSource(3), thread_name={PID: "MainThread"}.get)
    j.offset_ns = OFF
    phases = []
    for name, sid, s, e, _ in PHASES:
        j.register_phase(100 + sid, trace, sid, us(s))
        phases.append({"trace_id": trace, "span_id": sid, "name": name, "start_ns": us(s), "end_ns": us(e),
                       "attributes": {"gputrace.lane": "thread:MainThread"}})
    spans = j.add(plain_records(records)) + j.take(final=True)
    res = {"service.name": "python3", "host.name": HOST, "process.pid": PID}
    loader = TraceLoader()
    loader.feed("<collector>", 1, encode_request(res, phases + spans))
    return loader.timeline()


def test_nsys_and_the_cupti_collector_give_the_same_activity_rows(tmp_path):
    nsys = read_nsys(nsys_report(tmp_path / "work.sqlite"), host=HOST)
    a, b = activity_rows(nsys), activity_rows(collector_timeline())
    assert len(a) == 7
    for x, y in zip(a, b):
        assert x == y
    assert a == b


def test_the_collector_comparison_can_fail(tmp_path):
    changed = [dict(r) for r in RECORDS]
    i = next(i for i, r in enumerate(changed) if r["kind"] == "MEMCPY")
    changed[i]["src_kind"] = "CUPTI_ACTIVITY_MEMORY_KIND_PINNED"
    nsys = read_nsys(nsys_report(tmp_path / "work.sqlite"), host=HOST)
    assert activity_rows(nsys) != activity_rows(collector_timeline(changed))


def test_a_synchronising_call_with_a_sync_record_is_not_a_second_wait(tmp_path):
    from gputrace.analysis import host_waits

    nsys = read_nsys(nsys_report(tmp_path / "work.sqlite"), host=HOST)
    w = host_waits(nsys)
    names = [nsys.name_of(int(r)) for r in w.row]
    assert names == ["[CUDA sync stream]"]  # not also cudaStreamSynchronize


def test_host_time_in_launch_gaps_is_counted_once_per_instant(tmp_path):
    """The sync span and its cudaStreamSynchronize call cover the same instants on one thread: the
    launch-gap attribution names the sync span once, and never more host time than the gaps hold."""
    from gputrace.analysis.gpu_activity import launch_gaps

    nsys = read_nsys(nsys_report(tmp_path / "work.sqlite"), host=HOST)
    g = launch_gaps(nsys)
    for i in range(len(g)):
        e = g.entry(i)
        named = sum(a["ns"] for a in e["host_activity"])
        assert named + e["unattributed_ns"] == e["gap_ns"], e
        assert "cudaStreamSynchronize" not in {a["phase"] for a in e["host_activity"]}

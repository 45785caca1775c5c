"""Chrome Trace Event / Perfetto JSON export and import (gputrace.timeline.formats.chrome)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from gputrace.timeline import Lane, Timeline
from gputrace.timeline.formats.chrome.read import ChromeFormatError, from_chrome, read_chrome
from gputrace.timeline.nesting import nest_parents
from gputrace.timeline.formats.chrome.export import to_chrome, write_chrome
from gputrace.timeline.model import KIND_CODES

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
T0 = 1_764_000_000_000_000_000  # epoch ns
TRACE = "5b8aa5a2d2c872e8321cf37308d69df2"


def sample_timeline() -> Timeline:
    """One prove on a host thread; GPU work on two devices with device times; a pinning span."""
    lanes = [
        Lane("node1", 4242, -1, "thread:MainThread"),
        Lane("node1", 4242, 0, "stream:7"),
        Lane("node1", 4242, 1, "stream:9"),
    ]
    phases = ["prove", "synthesis", "pin", "ntt", "coset_ntt", "msm_h"]
    #        start   end    gpu0    gpu1  phase lane dev  kind   sid pid  nbytes circuit
    rows = [
        (0, 1000_000, -1, -1, 0, 0, -1, "host", 1, 0, -1, 3),
        (10_000, 400_000, -1, -1, 1, 0, -1, "host", 2, 1, -1, 3),
        (400_000, 480_500, -1, -1, 2, 0, -1, "pin", 3, 1, 1 << 30, 3),
        (480_000, 490_000, 500_000, 700_000, 3, 1, 0, "gpu", 4, 1, -1, 3),
        (481_000, 482_000, 510_000, 600_000, 4, 1, 0, "gpu", 5, 4, -1, 3),
        (483_000, 484_250, 520_000, 980_000, 5, 2, 1, "gpu", 6, 1, 4096, 3),
    ]
    a = np.array([r[:7] for r in rows], dtype=np.int64)
    cols = {
        "start": T0 + a[:, 0],
        "end": T0 + a[:, 1],
        "gpu_start": np.where(a[:, 2] >= 0, T0 + a[:, 2], -1),
        "gpu_end": np.where(a[:, 3] >= 0, T0 + a[:, 3], -1),
        "phase": a[:, 4],
        "lane": a[:, 5],
        "device": a[:, 6],
        "kind": np.array([KIND_CODES[r[7]] for r in rows]),
        "span_id": np.array([r[8] for r in rows], dtype=np.uint64),
        "parent_span_id": np.array([r[9] for r in rows], dtype=np.uint64),
        "nbytes": np.array([r[10] for r in rows]),
        "circuit": np.array([r[11] for r in rows]),
        "trace": np.zeros(len(rows), np.int32),
        "resource": np.zeros(len(rows), np.int32),
        "status": np.array([0, 0, 2, 0, 0, 1]),
    }
    res = [{"service.name": "prover", "host.name": "node1", "process.pid": 4242, "gputrace.config.pin": True}]
    attrs = {5: {"gputrace.kernel": "msm_bucket_acc", "gputrace.windows": 17}}
    return Timeline.from_unsorted(cols, phases, lanes, res, [TRACE], attrs)


# ---- the format's rules -------------------------------------------------------------------
_META = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}


def validate_chrome(doc: dict) -> None:
    """Check a Chrome Trace Event JSON object against the format's rules (raises AssertionError)."""
    # Strict JSON: no NaN/Infinity constants.
    json.loads(json.dumps(doc), parse_constant=lambda c: (_ for _ in ()).throw(AssertionError(c)))
    assert isinstance(doc["traceEvents"], list)
    assert doc.get("displayTimeUnit", "ms") in ("ms", "ns")
    procs, threads, used = set(), set(), set()
    flows: dict = {}
    by_thread: dict[tuple, list] = {}
    for ev in doc["traceEvents"]:
        assert isinstance(ev["pid"], int) and isinstance(ev["tid"], int)
        if ev["ph"] == "M":
            assert ev["name"] in _META, ev
            if ev["name"].endswith("_name"):
                assert isinstance(ev["args"]["name"], str) and ev["args"]["name"]
            else:
                assert isinstance(ev["args"]["sort_index"], int)
            if ev["name"] == "process_name":
                procs.add(ev["pid"])
            if ev["name"] == "thread_name":
                threads.add((ev["pid"], ev["tid"]))
        elif ev["ph"] in ("s", "f"):
            flows.setdefault(ev["id"], []).append(ev)
        else:
            assert ev["ph"] == "X", ev
            assert isinstance(ev["name"], str) and isinstance(ev["cat"], str)
            assert isinstance(ev["ts"], (int, float)) and ev["ts"] >= 0
            assert isinstance(ev["dur"], (int, float)) and ev["dur"] >= 0
            assert isinstance(ev["args"], dict)
            used.add((ev["pid"], ev["tid"]))
            by_thread.setdefault((ev["pid"], ev["tid"]), []).append((ev["ts"], ev["ts"] + ev["dur"]))
    assert used <= threads, f"threads without thread_name: {used - threads}"
    for fid, pair in flows.items():  # one start, one finish, each inside a slice of its thread
        assert sorted(e["ph"] for e in pair) == ["f", "s"], fid
        for e in pair:
            assert (e["pid"], e["tid"]) in threads and isinstance(e["ts"], (int, float))
            assert e["ph"] == "s" or e["bp"] == "e"
            assert any(s <= e["ts"] <= t for s, t in by_thread.get((e["pid"], e["tid"]), [])), f"flow {fid} outside a slice"
    assert {p for p, _ in threads} <= procs
    for key, spans in by_thread.items():  # X events on one thread nest
        stack: list[float] = []
        for s, e in sorted(spans, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1] <= s:
                stack.pop()
            assert not stack or e <= stack[-1] + 1e-9, f"misnested X event on {key}: [{s}, {e}] in {stack[-1]}"
            stack.append(e)


def test_export_follows_the_format_and_maps_processes():
    doc = to_chrome(sample_timeline())
    validate_chrome(doc)
    meta = [e for e in doc["traceEvents"] if e["ph"] == "M"]
    pnames = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    assert sorted(pnames.values()) == ["node1 CPU", "node1 GPU 0", "node1 GPU 1"]
    # GPUs sort before the CPU process, as in the TUI.
    order = {e["pid"]: e["args"]["sort_index"] for e in meta if e["name"] == "process_sort_index"}
    gpu0 = next(p for p, n in pnames.items() if n == "node1 GPU 0")
    cpu = next(p for p, n in pnames.items() if n == "node1 CPU")
    assert order[gpu0] < order[cpu]
    xs = {e["name"]: e for e in doc["traceEvents"] if e["ph"] == "X"}
    # Device-time spans sit on GPU tracks at device time, in microseconds from t0.
    assert xs["ntt"]["pid"] == gpu0
    assert xs["ntt"]["ts"] == 500.0 and xs["ntt"]["dur"] == 200.0
    assert xs["ntt"]["args"]["host.ts_us"] == 480.0 and xs["ntt"]["args"]["host.dur_us"] == 10.0
    assert xs["pin"]["ts"] == 400.0 and xs["pin"]["dur"] == 80.5 and xs["pin"]["cat"] == "pin"
    assert xs["pin"]["args"]["bytes"] == 1 << 30 and xs["pin"]["args"]["status"] == "error"
    assert "status" not in xs["prove"]["args"] and xs["msm_h"]["args"]["status"] == "ok"
    assert xs["msm_h"]["args"]["gputrace.windows"] == 17
    assert xs["coset_ntt"]["args"]["parent_span_id"] == "0000000000000004"
    assert xs["prove"]["args"]["trace_id"] == TRACE and xs["prove"]["args"]["color"].startswith("#")
    assert doc["otherData"]["t0_epoch_ns"] == str(T0)
    # Arrows from the host phase to the GPU work under it (children on other lanes only).
    starts = {e["id"]: e for e in doc["traceEvents"] if e["ph"] == "s"}
    ends = {e["id"]: e for e in doc["traceEvents"] if e["ph"] == "f"}
    assert len(starts) == 2  # prove -> ntt (GPU 0), prove -> msm_h (GPU 1); coset_ntt shares ntt's lane
    assert {(ends[i]["pid"], ends[i]["ts"]) for i in starts} == {(xs["ntt"]["pid"], 500.0), (xs["msm_h"]["pid"], 520.0)}
    assert all(s["pid"] == cpu and s["tid"] == xs["prove"]["tid"] for s in starts.values())
    assert not any(e["ph"] in "sf" for e in to_chrome(sample_timeline(), flows=False)["traceEvents"])


def test_export_matches_golden(tmp_path):
    out = tmp_path / "chrome.json"
    n = write_chrome(sample_timeline(), out)
    got = json.loads(out.read_text())
    assert len(got["traceEvents"]) == n
    golden = GOLDEN / "chrome_sample.json"
    if os.environ.get("GPUTRACE_UPDATE_GOLDEN"):
        golden.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert got == json.loads(golden.read_text())


def test_partial_overlaps_go_to_overlap_threads():
    lanes = [Lane("h", 1, 0, "stream:1")]
    cols = {
        "start": np.array([0, 50, 60, 100]) * 1000,
        "end": np.array([100, 150, 70, 120]) * 1000,
        "phase": np.zeros(4, int),
        "lane": np.zeros(4, int),
        "span_id": np.arange(1, 5, dtype=np.uint64),
    }
    doc = to_chrome(Timeline.from_unsorted(cols, ["msm_h"], lanes))
    validate_chrome(doc)
    names = sorted(e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name")
    assert names == ["stream:1", "stream:1 (overlap 1)"]
    # Every span survives, and reading the file back puts them on one lane again.
    back = from_chrome(doc)
    assert back.n == 4 and len(back.lanes) == 1 and back.lanes[0] == lanes[0]


def test_round_trip_restores_the_timeline(tmp_path):
    tl = sample_timeline()
    path = tmp_path / "t.json.gz"
    write_chrome(tl, path)
    back = read_chrome(path)
    assert back.lanes == tl.lanes
    assert [back.phases[p] for p in back.phase] == [tl.phases[p] for p in tl.phase]
    for k in ("start", "end", "gpu_start", "gpu_end", "lane", "device", "kind", "nbytes", "status",
              "circuit", "span_id", "parent_span_id", "parent", "depth", "resource"):
        np.testing.assert_array_equal(back.cols[k], tl.cols[k], err_msg=k)
    assert back.trace_ids == [TRACE] and back.resources == tl.resources
    assert back.attrs == tl.attrs


def test_nest_parents_longer_first_and_groups():
    start = np.array([0, 0, 0, 5, 20, 0])
    end = np.array([10, 30, 10, 8, 25, 30])
    group = np.array([0, 0, 0, 0, 0, 1])
    p = nest_parents(start, end, group)
    # [0,30) is the root; the first [0,10) is its child, the identical second one nests in it.
    assert p.tolist() == [1, -1, 0, 2, 1, -1]
    # Tiebreak decides between identical ranges.
    p2 = nest_parents(start[:3], end[:3], group[:3], tiebreak=np.array([0, 0, -1]))
    assert p2.tolist() == [2, -1, 1]


KINETO = {
    "schemaVersion": 1,
    "baseTimeNanoseconds": 1_700_000_000_000_000_000,
    "traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 321, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "thread_name", "pid": 321, "tid": 321, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        {"ph": "X", "cat": "user_annotation", "name": "ntt", "pid": 321, "tid": 321, "ts": 10.0, "dur": 100.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 321, "tid": 321, "ts": 10.0, "dur": 40.0,
         "args": {"External id": 3}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 321, "tid": 321, "ts": 20.0,
         "dur": 5.0, "args": {"correlation": 77}},
        {"ph": "X", "cat": "kernel", "name": "vectorized_elementwise_kernel", "pid": 0, "tid": 7, "ts": 30.5,
         "dur": 2.25, "args": {"device": 0, "stream": 7, "correlation": 77, "registers per thread": 24}},
        {"ph": "i", "name": "marker", "pid": 321, "tid": 321, "ts": 11.0, "s": "t"},
        {"ph": "B", "name": "sync", "pid": 321, "tid": 321, "ts": 60.0},
        {"ph": "E", "pid": 321, "tid": 321, "ts": 75.0},
    ],
}


def test_pytorch_profiler_trace_imports():
    stats: dict = {}
    tl = from_chrome(KINETO, host="trainer", stats=stats)
    assert stats == {"events": 10, "spans": 5, "skipped": 1}
    names = {tl.name_of(r): r for r in range(tl.n)}
    k = names["vectorized_elementwise_kernel"]
    lane = tl.lanes[tl.lane[k]]
    assert lane == Lane("trainer", 321, 0, "stream:7")
    base = KINETO["baseTimeNanoseconds"]
    assert tl.start[k] == base + 30_500 and tl.end[k] == base + 32_750
    assert tl.gpu_start[k] == base + 30_500
    # A kernel's parent is the innermost phase around its launch (an annotation), not the operator.
    assert tl.name_of(int(tl.parent[k])) == "ntt"
    assert tl.name_of(int(tl.parent[names["aten::mul"]])) == "ntt"  # same start: longer is parent
    assert tl.attrs[k]["registers per thread"] == 24 and tl.attrs[k]["gputrace.activity"] == "kernel"
    s = names["sync"]
    assert tl.end[s] - tl.start[s] == 15_000 and tl.kind[s] == KIND_CODES["sync"]
    assert tl.lanes[tl.lane[s]].name == "thread:python3"


def test_array_form_without_closing_bracket(tmp_path):
    p = tmp_path / "cut.json"
    p.write_text('[{"ph":"X","name":"a","pid":1,"tid":2,"ts":1,"dur":2},\n{"ph":"B","name":"b","pid":1,"tid":2,"ts":5},\n')
    tl = read_chrome(p)
    assert tl.n == 2
    b = [r for r in range(tl.n) if tl.name_of(r) == "b"][0]
    assert tl.attrs[b]["unterminated"] is True


@pytest.mark.parametrize(
    "events, match",
    [
        ([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": "x", "dur": 1}], r"traceEvents\[0\].*'ts'"),
        ([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": -1}], r"traceEvents\[0\].*negative"),
        ([1], r"traceEvents\[0\] is not an object"),
    ],
)
def test_bad_events_name_the_event(events, match):
    with pytest.raises(ChromeFormatError, match=match):
        from_chrome({"traceEvents": events}, source="bad.json")

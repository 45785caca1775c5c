"""No estimated saving exceeds its documented bound on any committed trace (issue 32, "savings that can be won"):
every trace the repository holds (tests/data, the Kineto/Nsight/record fixtures and rank pairs, the golden traces,
benchmarks/traces, the H200 real-program traces, the seed story's A/B traces) is analysed; each finding keeps
``0 <= saving_ns <= bound_ns``, and each bound is checked against a figure recomputed here from the Timeline's
own rows, by other code than the analysis (a union of intervals in plain Python), so a wrong bound cannot pass by
agreeing with itself:

* gpu-idle-host: at most the device's busy time (its GPU activity rows, else its ``gpu`` spans' device times,
  merged), plus, for a gap blocked in one call, the time in CUDA API calls;
* sync-wait: at most the sum over that phase's syncs of min(wait, the host's time until the thread's next sync);
* exposed-comm: at most the rank's compute kernels (not NCCL), merged;
* pageable-copy: at most the pageable copies' time on that device;
* launch-bound: at most the extent of each instance of the phase with its GPU work;
* straggler: at most the other ranks' communication (NCCL kernels, else collective calls), merged per rank;
* pinning-loss: at most the pin and unpin phases' time; unattributed: at most its phase's time;
* every finding: at most the wall time, and the findings together too.
"""

from __future__ import annotations

import tarfile
from collections import defaultdict
from pathlib import Path

import pytest

from gputrace import activity as A
from gputrace.analysis.activity_index import KERNEL, MEMCPY, SYNC, activity_index
from gputrace.analysis.collectives import is_collective_name, is_comm_kernel, rank_of
from gputrace.analysis.findings import BOUND_FILL
from gputrace.analysis.report import analyse_timeline
from gputrace.timeline.load import read_any, read_as
from gputrace.timeline.model import KIND_CODES

GPU_KIND = KIND_CODES["gpu"]

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
PLAIN = sorted([*DATA.glob("*.jsonl"), *DATA.glob("*.jsonl.gz"), *(ROOT / "benchmarks" / "traces").glob("*.jsonl.gz"),
                *(DATA / "foreign").glob("train_*.gz")])
#: the golden files that are traces we read (our writers' bytes), with their format; jaeger_sample.json is written
#: only, kineto_mapped.json and kineto_report_figures.json are figures, not traces
GOLDEN = [("chrome_sample.json", "chrome"), ("trace_writer.jsonl", "otlp")]
ARCHIVES = [ROOT / "benchmarks" / "real_programs" / "h200-2026-12-01" / "traces.tar.gz",
            *sorted((ROOT / "examples" / "seed_story").rglob("*.tgz")),
            *sorted((ROOT / "examples" / "seed_story").rglob("*.txz"))]
#: rank files of one job, read together
PAIRS = [[p, p.with_name(p.name.replace("_rank0", "_rank1"))]
         for p in sorted((ROOT / "tests" / "data" / "foreign").glob("*_rank0.json.gz"))]


def _union(pairs) -> int:
    tot, end = 0, None
    for a, b in sorted(pairs):
        if end is None or a > end:
            tot += b - a
            end = b
        elif b > end:
            tot += b - end
            end = b
    return tot


def _check(tl) -> int:
    a = analyse_timeline(tl)
    d = a.to_dict()
    got = d["findings"]
    wall = d["wall_ns"]
    assert sum(f["saving_ns"] for f in got) <= wall
    c = tl.cols
    idx = activity_index(tl)
    work = idx.what != SYNC
    busy: dict[int, list] = defaultdict(list)  # per device: its activity rows, else its gpu spans (CUDA events)
    events: dict[int, list] = defaultdict(list)
    work = set(idx.rows[idx.what != SYNC].tolist())
    for r in range(tl.n):
        dev, g0, g1 = int(c["device"][r]), int(c["gpu_start"][r]), int(c["gpu_end"][r])
        if dev < 0 or not (g1 >= g0 >= 0 or int(c["kind"][r]) == GPU_KIND):
            continue
        iv = (g0, g1) if g1 >= g0 >= 0 else (int(c["start"][r]), int(c["end"][r]))
        (busy if r in work else events)[dev].append(iv)
    for dev, ivs in events.items():
        if dev not in busy:
            busy[dev] = ivs
    for f in got:  # (busy: kernels, copies and memsets, every row the activity index holds but syncs)
        assert 0 <= f["saving_ns"] <= f["bound_ns"] and f["bound"], f
        assert f["saving_ns"] <= wall
        if f["rule"] == "gpu-idle-host":  # the GPU's work, plus (blocked in one call) the time in CUDA API calls
            dev = int(f["where"].split()[1])
            calls = 0 if f["bound"] == BOUND_FILL else sum(int(c["end"][r] - c["start"][r]) for r in range(tl.n)
                                                            if tl.name_of(r).startswith(("cu", "hip")))
            assert f["saving_ns"] <= _union(busy[dev]) + calls, f
        elif f["rule"] == "sync-wait":
            assert f["saving_ns"] <= _sync_room(tl, idx, f["where"]), f
        elif f["rule"] == "exposed-comm":
            assert f["saving_ns"] <= _compute(tl, idx, int(f["where"].split()[1])), f
        elif f["rule"] == "pageable-copy":
            phase, dev = f["where"].rsplit(" GPU ", 1)
            rows = [int(r) for r, w in zip(idx.rows.tolist(), idx.what.tolist(), strict=True) if w == MEMCPY
                    and int(c["device"][r]) == int(dev)
                    and "PAGEABLE" in (tl.attrs.get(r, {}).get(A.MEMCPY_SRC), tl.attrs.get(r, {}).get(A.MEMCPY_DST))]
            assert f["saving_ns"] <= sum(int(c["end"][r] - c["start"][r]) for r in rows), f
        elif f["rule"] == "straggler":  # at most the other ranks' time in collective calls or NCCL kernels
            assert f["saving_ns"] <= _others_comm(tl, idx, int(f["where"].split()[1])), f
        elif f["rule"] == "pinning-loss":  # at most the pin and unpin phases' time
            assert f["saving_ns"] <= sum(int(c["end"][r] - c["start"][r]) for r in range(tl.n)
                                         if tl.name_of(r) in ("pin", "unpin")), f
        elif f["rule"] == "unattributed":  # at most the time of the path's last phase, all instances
            last = f["where"].rsplit("/", 1)[-1]
            assert f["saving_ns"] <= sum(int(c["end"][r] - c["start"][r]) for r in range(tl.n)
                                         if tl.name_of(r) == last), f
        elif f["rule"] == "launch-bound":  # at most the extent of the phase's kernels, per instance
            phase = f["where"].rsplit(" GPU ", 1)[0]
            assert f["saving_ns"] <= _kernel_extents(tl, idx, phase), f
    return len(got)


def _blocks(tl, r: int) -> bool:
    """A sync in which the host blocked (not a poll such as cudaEventQuery, nor cudaStreamWaitEvent)."""
    a = tl.attrs.get(int(r), {})
    return (a.get(A.SYNC_TYPE, "unknown") in A.BLOCKING_SYNC_TYPES
            and A.sync_type_of_api(a.get(A.API)) not in ("poll", "stream_wait_event"))


def _sync_room(tl, idx, phase: str) -> int:
    """Sum over the blocking syncs of min(wait, host time until the next one on its lane or the lane's end)."""
    c = tl.cols
    rows = [(int(r), int(s), int(e)) for r, s, e, w in zip(idx.rows.tolist(), idx.start.tolist(), idx.end.tolist(),
                                                            idx.what.tolist(), strict=True)
            if w == SYNC and _blocks(tl, r)]
    by_lane: dict[int, list] = defaultdict(list)
    for r, s, e in rows:
        by_lane[int(c["lane"][r])].append((s, e, r))
    lane_end: dict[int, int] = defaultdict(int)
    for r in range(tl.n):
        ln = int(c["lane"][r])
        if ln in by_lane:
            lane_end[ln] = max(lane_end[ln], int(c["end"][r]))
    room = 0
    for ln, ws in by_lane.items():
        ws.sort()
        for i, (s, e, _r) in enumerate(ws):
            nxt = ws[i + 1][0] if i + 1 < len(ws) else lane_end[ln]
            room += min(e - s, max(nxt - e, 0))
    return room  # (all phases: a finding's syncs are some of them)


def _kernel_extents(tl, idx, phase: str) -> int:
    """Sum over the instances of ``phase`` (the nearest ancestor of that name) of their GPU work's extent:
    first start to last end of the kernels, copies and memsets under it, or of the instance itself if longer."""
    c = tl.cols
    ext: dict[int, list[int]] = {}
    for r, s, e, w in zip(idx.rows.tolist(), idx.start.tolist(), idx.end.tolist(), idx.what.tolist(), strict=True):
        if w == SYNC:
            continue
        p = int(c["parent"][r])
        while p >= 0 and tl.name_of(p) != phase:
            p = int(c["parent"][p])
        if p >= 0:
            v = ext.setdefault(p, [int(c["start"][p]), int(c["end"][p])])
            v[0], v[1] = min(v[0], s), max(v[1], e)
    return sum(b - a for a, b in ext.values())


def _others_comm(tl, idx, straggler: int) -> int:
    """Sum over the ranks other than ``straggler`` of their communication: NCCL kernels, else collective calls."""
    c = tl.cols
    per: dict[int, list] = defaultdict(list)
    calls: dict[int, list] = defaultdict(list)
    kern = {int(r) for r, w in zip(idx.rows.tolist(), idx.what.tolist(), strict=True) if w == KERNEL}
    for r in range(tl.n):
        rk = rank_of(tl.resources[int(c["resource"][r])])
        if rk is None or rk == straggler:
            continue
        name = tl.name_of(r)
        if r in kern and is_comm_kernel(str(tl.attrs.get(r, {}).get(A.KERNEL_NAME, name))):
            per[rk].append((int(c["start"][r]), int(c["end"][r])))
        elif r not in kern and is_collective_name(name):
            calls[rk].append((int(c["start"][r]), int(c["end"][r])))
    return sum(_union(per[rk] or calls[rk]) for rk in set(per) | set(calls))


def _compute(tl, idx, rank: int) -> int:
    c = tl.cols
    pairs = []
    for r, s, e, w in zip(idx.rows.tolist(), idx.start.tolist(), idx.end.tolist(), idx.what.tolist(), strict=True):
        if w != KERNEL or rank_of(tl.resources[int(c["resource"][r])]) != rank:
            continue
        if not is_comm_kernel(str(tl.attrs.get(r, {}).get(A.KERNEL_NAME, tl.name_of(r)))):
            pairs.append((s, e))
    return _union(pairs)


@pytest.mark.parametrize("path", PLAIN, ids=lambda p: p.name)
def test_committed_trace(path):
    _check(read_any(path))


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p[0].name)
def test_committed_rank_pairs(pair):
    _check(read_any(pair))


@pytest.mark.parametrize(("name", "kind"), GOLDEN)
def test_golden_traces(name, kind):
    _check(read_as(ROOT / "tests" / "golden" / name, kind))


@pytest.mark.parametrize("archive", ARCHIVES, ids=lambda p: p.parent.name + "/" + p.name)
def test_committed_trace_archives(archive, tmp_path):
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path, filter="data")
    traces = sorted(p for p in tmp_path.rglob("*") if p.suffix in (".jsonl", ".json") and p.stat().st_size > 1000
                    and not p.name.endswith(("report.json", "bench.json", "manifest.json", "replicates.json")))
    assert traces
    checked = 0
    for p in traces:
        try:
            tl = read_any(p)
        except ValueError:
            continue  # a JSON file that is not a trace (a benchmark's own figures)
        _check(tl)
        checked += 1
    assert checked

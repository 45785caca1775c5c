"""GPU activity analysis (gputrace.analysis.gpu_activity / gpu_transfers) on a hand-built trace.

The work (µs from T0; device 0 unless said):

    thread:main   prove [0, 1000] ........................................................
                    (ntt runs on stream:1 with CUDA events [100, 500], host [100, 450])
                    prep [200, 260] (child of ntt, on thread:main)
                    sync stream 1 [600, 700]
    stream:1      k1 [150, 200]  k2 [300, 350]  HtoD pageable 4 KiB [400, 420]   k3 [550, 650]
    stream:2      k4 [600, 690]                  msm_h bracket [700, 800] (events, no kernels)

so ntt's bracket is 400 µs, its device work 120 µs, its gap 280 µs of which prep covers 60 µs and
the rest is ntt's own host time (unattributed).
"""

from __future__ import annotations

import pytest

from gputrace import activity as A
from gputrace.analysis.gpu_activity import activity_index, bracket_only_phases, device_busy, launch_gaps
from gputrace.analysis.gpu_summary import gpu_summary
from gputrace.analysis.gpu_transfers import copy_table, kernel_table, sync_waits
from gputrace.testing.activity_records import activity_timeline

T0 = 1_767_225_600_000_000_000
US = 1_000


def t(us: float) -> int:
    return T0 + int(us * US)


RES = {"service.name": "prover", "host.name": "h", "process.pid": 7, "gputrace.run_id": "r1", "gputrace.config.b1": True}
PROVE, NTT, PREP, MSM = 1, 2, 3, 4


def phases(pin: bool = True) -> list[dict]:
    return [
        {"span_id": PROVE, "name": "prove", "start_ns": t(0), "end_ns": t(1000), "attributes": {"gputrace.lane": "thread:main"}},
        {"span_id": NTT, "parent_span_id": PROVE, "name": "ntt", "start_ns": t(100), "end_ns": t(450),
         "attributes": {"gputrace.lane": "stream:1", "gputrace.device": 0, "gputrace.kind": "gpu",
                        "gputrace.gpu.start_ns": t(100), "gputrace.gpu.end_ns": t(500)}},
        {"span_id": PREP, "parent_span_id": NTT, "name": "prep", "start_ns": t(200), "end_ns": t(260),
         "attributes": {"gputrace.lane": "thread:main"}},
        {"span_id": MSM, "parent_span_id": PROVE, "name": "msm_h", "start_ns": t(700), "end_ns": t(800),
         "attributes": {"gputrace.lane": "stream:2", "gputrace.device": 0, "gputrace.kind": "gpu",
                        "gputrace.gpu.start_ns": t(700), "gputrace.gpu.end_ns": t(800)}},
    ]


def kernel(name, s, e, stream, corr, phase):
    return {"kind": "KERNEL", "start": t(s), "end": t(e), "device_id": 0, "stream_id": stream, "correlation_id": corr,
            "name": f"void {name}<256>(Fr*, int)", "grid_x": 64, "grid_y": 1, "grid_z": 1, "block_x": 256,
            "block_y": 1, "block_z": 1, "registers_per_thread": 40, "static_shared_memory": 0,
            "dynamic_shared_memory": 1024, "phase": phase}


RECORDS = [
    {"kind": "RUNTIME", "start": t(140), "end": t(145), "name": "cudaLaunchKernel", "correlation_id": 1},
    kernel("ntt_a", 150, 200, 1, 1, NTT),
    kernel("ntt_b", 300, 350, 1, 2, NTT),
    {"kind": "MEMCPY", "start": t(400), "end": t(420), "device_id": 0, "stream_id": 1, "correlation_id": 3,
     "copy_kind": "CUPTI_ACTIVITY_MEMCPY_KIND_HTOD", "src_kind": "CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE",
     "dst_kind": "CUPTI_ACTIVITY_MEMORY_KIND_DEVICE", "bytes": 4096, "phase": NTT},
    kernel("tail", 550, 650, 1, 4, PROVE),
    kernel("other", 600, 690, 2, 5, PROVE),
    {"kind": "SYNCHRONIZATION", "start": t(600), "end": t(700), "device_id": 0, "stream_id": 1,
     "type": "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "correlation_id": 6, "thread": "main",
     "phase": PROVE},
]


@pytest.fixture(scope="module")
def tl():
    return activity_timeline(RES, phases(), RECORDS)


def _entry(g, tl, name, device=0):
    for i in range(len(g)):
        if tl.phases[int(g.phase[i])] == name and int(g.device[i]) == device:
            return g.entry(i)
    raise AssertionError(f"no launch-gap entry for {name}")


def test_activity_index_finds_every_kind(tl):
    idx = activity_index(tl)
    assert sorted(idx.what.tolist()) == [0, 0, 0, 0, 1, 3]
    assert activity_index(tl) is idx  # cached per Timeline


def test_device_busy_is_a_union_and_says_kernels(tl):
    (d,) = device_busy(tl)
    assert d.basis == "kernels" and d.device == 0
    assert d.window_ns == 1000 * US
    # 50 + 50 + 20 + union([550, 650], [600, 690]) = 260 µs, not the 290 µs sum.
    assert d.busy_ns == 260 * US and d.kernel_ns == 240 * US and d.idle_ns == 740 * US
    assert (d.kernels, d.copies, d.memsets) == (4, 1, 0)


def test_device_busy_falls_back_to_brackets_without_activity():
    tl = activity_timeline(RES, phases(), [])
    (d,) = device_busy(tl)
    assert d.basis == "brackets" and d.busy_ns == 500 * US  # ntt [100, 500] + msm_h [700, 800]


def test_launch_gaps_of_a_phase(tl):
    g = launch_gaps(tl)
    e = _entry(g, tl, "ntt")
    assert e["bracket"] == "cuda events" and e["bracket_ns"] == 400 * US
    assert e["busy_ns"] == 120 * US and e["kernel_ns"] == 100 * US and e["kernels"] == 2
    assert e["gap_ns"] == 280 * US and e["holes"] == 4
    assert e["host_activity"] == [{"phase": "prep", "ns": 60 * US}]
    assert e["unattributed_ns"] == 220 * US
    i = [k for k in range(len(g)) if tl.phases[int(g.phase[k])] == "ntt"][0]
    hs, he = g.holes_of(i)
    assert [(int(a - T0) // US, int(b - T0) // US) for a, b in zip(hs, he)] == [(100, 150), (200, 300), (350, 400), (420, 500)]


def test_launch_gaps_of_the_root_count_sub_phase_work(tl):
    e = _entry(launch_gaps(tl), tl, "prove")
    assert e["bracket"] == "host" and e["window_ns"] == 1000 * US
    assert e["busy_ns"] == 260 * US and e["gap_ns"] == 740 * US and e["kernels"] == 4
    # The sync span on thread:main is named host activity inside prove's holes: [690, 700] (stream 2
    # is busy until 690); the holes [700, 1000] and others are prove's own time.
    names = {a["phase"]: a["ns"] for a in e["host_activity"]}
    assert names["[CUDA sync stream]"] == 10 * US
    assert e["unattributed_ns"] == e["gap_ns"] - sum(names.values())


def test_by_phase_totals_and_bracket_only(tl):
    g = launch_gaps(tl)
    rows = {r["phase"]: r for r in g.by_phase()}
    assert rows["ntt"]["gap_ns"] == 280 * US and rows["ntt"]["instances"] == 1 and rows["ntt"]["basis"] == "kernels"
    # Largest gap first, but the root (its gaps are the GPU's idle time of the whole run) after the phases.
    assert list(rows) == ["ntt", "prove"] and rows["prove"]["root"] and not rows["ntt"]["root"]
    assert rows["prove"]["gap_ns"] > rows["ntt"]["gap_ns"]
    (b,) = bracket_only_phases(tl, g)
    assert b == {"phase": "msm_h", "device": 0, "basis": "brackets", "instances": 1, "bracket_ns": 100 * US}


def test_copy_table_flags_pageable_when_pinning_was_asked(tl):
    (c,) = copy_table(tl)
    assert (c["phase"], c["kind"], c["src_kind"], c["dst_kind"]) == ("ntt", "HtoD", "PAGEABLE", "DEVICE")
    assert c["bytes"] == 4096 and c["ns"] == 20 * US and c["gbps"] == pytest.approx(4096 / 20_000)
    assert c["pageable"] and c["pin_asked"] and c["flag"]
    res = dict(RES, **{"gputrace.config.b1": False})
    (c2,) = copy_table(activity_timeline(res, phases(), RECORDS))
    assert c2["pageable"] and not c2["flag"]


def test_sync_wait_measures_the_waited_stream_only(tl):
    (w,) = sync_waits(tl)
    assert w["type"] == "stream" and w["stream"] == 1 and w["wait_ns"] == 100 * US
    # Only k3 (stream 1) counts, clipped to the wait: [600, 650]; 'other' on stream 2 does not.
    assert w["gpu_busy_ns"] == 50 * US and w["work"] == 1 and w["after_gpu_ns"] == 50 * US
    assert w["kernels"] == [{"name": "tail", "ns": 50 * US}] and w["phase"] == "prove"


def test_kernel_table_per_phase(tl):
    rows = {(r["phase"], r["kernel"]): r for r in kernel_table(tl)}
    assert rows[("ntt", "ntt_a")]["total_ns"] == 50 * US and rows[("prove", "tail")]["count"] == 1
    assert rows[("prove", "tail")]["max_ns"] == 100 * US


def test_activity_attributes_follow_the_conventions(tl):
    idx = activity_index(tl)
    k = [int(r) for r, w in zip(idx.rows, idx.what) if w == 0 and tl.name_of(int(r)) == "ntt_a"][0]
    a = tl.attrs[k]
    assert a[A.KERNEL_NAME] == "void ntt_a<256>(Fr*, int)" and a[A.GRID] == [64, 1, 1]
    assert a[A.LAUNCH_API_START] == t(140) and a[A.API] == "cudaLaunchKernel" and a[A.STREAM] == 1
    assert tl.lanes[int(tl.lane[k])].name == "stream:1" and int(tl.parent[k]) >= 0
    assert tl.name_of(int(tl.parent[k])) == "ntt"


def test_summary_is_plain_data(tl):
    import orjson

    s = gpu_summary(tl)
    assert s["activity_spans"] == 6 and s["devices"][0]["basis"] == "kernels"
    assert orjson.loads(orjson.dumps(s)) == s


def test_no_activity_gives_empty_tables():
    tl = activity_timeline(RES, phases(), [])
    g = launch_gaps(tl)
    assert len(g) == 0 and g.by_phase() == []
    assert copy_table(tl) == [] and sync_waits(tl) == [] and kernel_table(tl) == []


def test_idle_gaps_use_kernel_truth_where_it_exists(tl):
    from gputrace.analysis import gpu_idle_gaps

    g = gpu_idle_gaps(tl)
    # Busy = the union of kernels and copies (260 µs), not the ntt/msm_h brackets (500 µs).
    assert int(g.busy_ns.sum()) == 260 * US
    holes = {(int(s - T0) // US, int(e - T0) // US) for s, e in zip(g.start, g.end)}
    assert (200, 300) in holes and (690, 1000) in holes  # inside ntt's bracket, and after the last kernel
    # Without activity spans the brackets still count (and say so in device_busy's basis).
    g2 = gpu_idle_gaps(activity_timeline(RES, phases(), []))
    assert int(g2.busy_ns.sum()) == 500 * US


def test_critical_path_walks_phases_not_kernels(tl):
    from gputrace.analysis.critical_path import critical_path

    cp = critical_path(tl)
    names = {tl.name_of(int(r)) for r in cp.row}
    assert "ntt" in names and not names & {"ntt_a", "ntt_b", "tail", "other", "[CUDA memcpy HtoD]"}


def test_launch_gaps_are_per_phase_never_per_python_frame_or_operator(tmp_path):
    """A torch.profiler trace with Python frames (``with_stack``) nests its annotations inside them
    (``<string>(1): <module>`` > ``ProfilerStep#6`` > ``aten::mm`` > the launch): launch gaps and the
    launch-bound finding belong to the annotation, not to the frames and operators around it."""
    import json

    from gputrace.analysis.gpu_activity import launch_gaps
    from gputrace.commands.report import analyse
    from gputrace.timeline import read_any

    ev = [
        {"ph": "X", "cat": "python_function", "name": "<string>(1): <module>", "pid": 9, "tid": 9, "ts": 0.0,
         "dur": 5000.0},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#6", "pid": 9, "tid": 9, "ts": 10.0,
         "dur": 4900.0},
    ]
    for i in range(40):  # 40 short kernels, each launched from an operator, 100 µs apart: launch-bound
        t = 20.0 + 100.0 * i
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 9, "tid": 9, "ts": t, "dur": 8.0})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": t + 1,
                   "dur": 5.0, "args": {"correlation": i + 1}})
        ev.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t + 10, "dur": 4.0,
                   "args": {"device": 0, "stream": 7, "correlation": i + 1}})
    p = tmp_path / "k.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    tl = read_any(p)
    lg = launch_gaps(tl)
    named = {tl.phases[int(ph)] for ph in lg.phase}
    assert named == {"ProfilerStep#6"}
    bound = [f for f in analyse(tl)["findings"] if f["rule"] == "launch-bound"]
    assert [f["title"].split(" is launch-bound")[0] for f in bound] == ["ProfilerStep#6"]


def test_by_phase_counts_holes_longer_than_a_launch_exactly():
    """``by_phase`` gives the holes over LONG_HOLE_NS (1 ms) as an exact sum and count per phase (``intervals`` is
    coarsened past MAX_INTERVALS, so the launch-bound rule cannot read them there): a phase launching 6 kernels of
    10 µs with gaps of 100 µs, 2 ms, 100 µs, 3 ms, 100 µs has 2 long holes, 5 ms."""
    from gputrace.analysis.gpu_activity import LONG_HOLE_NS

    step = {"span_id": 1, "name": "step", "start_ns": t(0), "end_ns": t(6000), "attributes": {"gputrace.lane": "thread:main"}}
    recs, at = [], 0.0
    for i, gap in enumerate((100, 2000, 100, 3000, 100, 0)):
        recs.append(kernel(f"k{i}", at, at + 10, 1, i + 1, 1))
        at += 10 + gap
    [d] = [x for x in launch_gaps(activity_timeline(RES, [step], recs)).by_phase() if x["phase"] == "step"]
    assert LONG_HOLE_NS == 1_000_000 and d["long_gaps"] == 2 and d["long_gap_ns"] == 5_000_000, d

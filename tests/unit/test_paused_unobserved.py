"""Paused CUDA collection is unobserved, not idle (gputrace/analysis/unobserved.py).

``record_control.pause()`` leaves an interval with no GPU records and a ``gputrace.record.paused`` span. A GPU
busy, then paused 500 ms, then busy again: with the span, no finding claims the 500 ms, the GPU idle table says
500 ms unobserved and the span is not a phase; without it, the same 500 ms are GPU idle and ``gpu-idle-host``
fires (the rule can fire: it is the span that silences it)."""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console

from gputrace.analysis.findings import Finding, account
from gputrace.analysis.gaps import gpu_idle_gaps
from gputrace.analysis.gpu_activity import device_busy, launch_gaps
from gputrace.analysis.report import analyse_timeline
from gputrace.analysis.unobserved import unobserved
from gputrace.commands.report import render
from gputrace.testing.synth import make_timeline
from gputrace.timeline import read_trace
from gputrace.timeline.load import write_as

MS = 1_000_000
KERNEL = {"gputrace.activity": "kernel"}
PAUSED = "gputrace.record.paused"


def _kernels(t0_ms: int, parent: str, n: int = 30, every_ms: int = 10, dur_ms: int = 10, device: int = 0,
             pid: int = 1, resource: int = 0) -> list[dict]:
    out = []
    for k in range(n):
        t = (t0_ms + every_ms * k) * MS
        out.append({"name": "gemm", "start": t, "end": t + dur_ms * MS, "gpu_start": t, "gpu_end": t + dur_ms * MS,
                    "device": device, "kind": "gpu", "attrs": KERNEL, "parent": parent, "pid": pid,
                    "resource": resource})
    return out


def _paused(start_ms: int, end_ms: int, parent: str = "root", pid: int = 1, resource: int = 0) -> dict:
    return {"name": PAUSED, "start": start_ms * MS, "end": end_ms * MS, "parent": parent, "pid": pid,
            "resource": resource, "lane": f"thread:{PAUSED}", "attrs": {PAUSED: True, "gputrace.source": "gputrace"}}


def busy_paused_busy(paused: bool = True, pauses=((300, 800),)):
    """Root 0..1100 ms; train_step phases 0..300 (kernels back to back), 300..800 (no GPU records) and
    800..1100 (kernels back to back); with ``paused``, a paused span over each of ``pauses``."""
    res = {"service.name": "python train.py", "process.pid": 1, "gputrace.run_id": "r"}
    spans = [{"id": "root", "name": "python train.py", "start": 0, "end": 1100 * MS},
             {"id": "s0", "name": "train_step", "start": 0, "end": 300 * MS, "parent": "root"},
             {"id": "s1", "name": "train_step", "start": 300 * MS, "end": 800 * MS, "parent": "root"},
             {"id": "s2", "name": "train_step", "start": 800 * MS, "end": 1100 * MS, "parent": "root"},
             *_kernels(0, "s0"), *_kernels(800, "s2")]
    if paused:
        spans += [_paused(a, b) for a, b in pauses]
        iv = [t * MS for a, b in pauses[:1] for t in (a, b)]  # the resource keeps only the first: read the spans
        res |= {"gputrace.record.paused_count": len(pauses), "gputrace.record.paused_ns": iv,
                "gputrace.record.paused_total_ns": sum(b - a for a, b in pauses) * MS}
    return make_timeline(spans, resources=[res], trace_id="5eed" * 8)


def test_paused_interval_is_no_gpu_idle_finding_and_is_reported_unobserved():
    d = analyse_timeline(busy_paused_busy()).to_dict()
    assert not [f for f in d["findings"] if f["rule"] in ("gpu-idle-host", "launch-bound")]
    assert d["findings"] == []  # nothing else claims the paused 500 ms either
    [dev] = d["gpu_idle"]["per_device"]
    assert dev["unobserved_ns"] == 500 * MS
    assert dev["idle_ns"] == 0 and dev["busy_ns"] == 600 * MS and dev["idle_share"] == 0.0  # of the observed 600 ms
    assert d["gpu_idle"]["gaps"] == 0 and not [s for s in d["stalls"] if s["category"] == "idle"]
    assert d["unobserved"]["ns"] == 500 * MS and d["unobserved"]["intervals"] == [[300 * MS, 800 * MS]]
    [busy] = d["gpu_activity"]["devices"]
    assert busy["window_ns"] == 600 * MS and busy["idle_ns"] == 0 and busy["unobserved_ns"] == 500 * MS
    assert PAUSED not in {p["phase"] for p in d["phases"]}  # bookkeeping, not a phase


def test_without_the_paused_span_the_same_500_ms_are_gpu_idle():
    d = analyse_timeline(busy_paused_busy(paused=False)).to_dict()
    [idle] = [f for f in d["findings"] if f["rule"] == "gpu-idle-host"]
    assert idle["saving_ns"] == 500 * MS and "train_step" in idle["title"]
    [dev] = d["gpu_idle"]["per_device"]
    assert dev["idle_ns"] == 500 * MS and dev.get("unobserved_ns", 0) == 0  # (passes before the change too)
    assert not d.get("unobserved")


def test_the_idle_table_says_how_much_was_unobserved():
    out = io.StringIO()
    render(analyse_timeline(busy_paused_busy()).to_dict(), Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    assert "unobserved" in text and "500 ms" in text and "collection was paused" in text
    out = io.StringIO()
    render(analyse_timeline(busy_paused_busy(paused=False)).to_dict(), Console(file=out, width=200,
                                                                              color_system=None))
    assert "unobserved" not in out.getvalue()


def test_intervals_come_from_the_spans_not_the_truncated_resource_attribute():
    tl = busy_paused_busy(pauses=((300, 500), (600, 800)))
    u = unobserved(tl)
    [(key, (s, e))] = u.by_device.items()
    assert key[1] == 0 and s.tolist() == [300 * MS, 600 * MS] and e.tolist() == [500 * MS, 800 * MS]
    gaps = gpu_idle_gaps(tl)
    assert [(int(a), int(b)) for a, b in zip(gaps.start, gaps.end, strict=True)] == [(500 * MS, 600 * MS)]
    [dev] = analyse_timeline(tl).to_dict()["gpu_idle"]["per_device"]
    assert dev["idle_ns"] == 100 * MS and dev["unobserved_ns"] == 400 * MS


def test_launch_gaps_leave_the_paused_interval_out():
    # One phase launching kernels 10 ms apart (5 ms each) before and after the pause: its launch gaps are the
    # 5 ms holes, never the paused 500 ms.
    def tl(paused):
        spans = [{"id": "root", "name": "python train.py", "start": 0, "end": 1100 * MS},
                 {"id": "loop", "name": "loop", "start": 0, "end": 1100 * MS, "parent": "root"},
                 *_kernels(0, "loop", dur_ms=5), *_kernels(800, "loop", dur_ms=5)]
        return make_timeline(spans + ([_paused(300, 800)] if paused else []), resources=[{"process.pid": 1}])

    def loop_gap(t):
        g = launch_gaps(t)
        [i] = [i for i in range(len(g)) if g.phases[int(g.phase[i])] == "loop"]
        return int(g.gap_ns[i])

    # The 1100 ms window less 60 kernels of 5 ms: 800 ms of holes, 500 ms of them the paused interval.
    assert loop_gap(tl(False)) == 800 * MS
    assert loop_gap(tl(True)) == 300 * MS
    assert [b.unobserved_ns for b in device_busy(tl(True))] == [500 * MS]


def test_another_process_s_gpu_stays_observed():
    # Process 1 (GPU 0) pauses 300..800 ms; process 2 (GPU 1) collects all along and idles then: its idle is
    # real and still a finding; the wall time is not unobserved (GPU 1 was observed).
    res = [{"service.name": f"python job.py {p}", "process.pid": p, "gputrace.run_id": "job"} for p in (1, 2)]
    spans = []
    for i, p in enumerate((1, 2)):
        spans += [{"id": f"root{p}", "name": "python job.py", "start": 0, "end": 1100 * MS, "pid": p, "resource": i},
                  {"id": f"a{p}", "name": "step", "start": 0, "end": 300 * MS, "parent": f"root{p}", "pid": p,
                   "resource": i},
                  {"id": f"b{p}", "name": "step", "start": 800 * MS, "end": 1100 * MS, "parent": f"root{p}",
                   "pid": p, "resource": i},
                  *_kernels(0, f"a{p}", device=i, pid=p, resource=i),
                  *_kernels(800, f"b{p}", device=i, pid=p, resource=i)]
    spans.append(_paused(300, 800, parent="root1", pid=1, resource=0))
    d = analyse_timeline(make_timeline(spans, resources=res)).to_dict()
    per = {r["device"]: r for r in d["gpu_idle"]["per_device"]}
    assert per[0]["unobserved_ns"] == 500 * MS and per[0]["idle_ns"] == 0
    assert per[1]["unobserved_ns"] == 0 and per[1]["idle_ns"] == 500 * MS
    assert d["unobserved"]["intervals"] == []
    idle = [f for f in d["findings"] if f["rule"] == "gpu-idle-host"]
    assert [f["where"] for f in idle] == ["GPU 1"] and idle[0]["saving_ns"] == 500 * MS


def test_account_never_claims_unobserved_wall_time():
    inside = Finding("unattributed", "t", "e", 500 * MS, "python train.py", ((300 * MS, 800 * MS),))
    half = Finding("gpu-idle-host", "t", "e", 400 * MS, "GPU 0", ((100 * MS, 500 * MS),))
    scalar = Finding("pageable-copy", "t", "e", 300 * MS, "h2d GPU 0")  # no intervals: claims first, 300 ms
    got = {f.rule: f for f in account([inside, half, scalar], wall_ns=1100 * MS, unobserved=[(300 * MS, 800 * MS)])}
    assert "unattributed" not in got
    assert got["gpu-idle-host"].saving_ns == 200 * MS and "CUDA collection paused" in got["gpu-idle-host"].evidence
    assert got["pageable-copy"].saving_ns == 300 * MS
    # A finding without intervals gets at most the observed wall time: 1100 - 500 ms.
    [big] = account([replace(scalar, saving_ns=900 * MS)], wall_ns=1100 * MS, unobserved=[(300 * MS, 800 * MS)])
    assert big.saving_ns == 600 * MS


def test_paused_span_survives_the_otlp_file_and_is_labelled_in_the_tui(tmp_path):
    from gputrace.tui.index import TimelineIndex
    from gputrace.tui.rows import PAUSED_LABEL, build_rows

    path = tmp_path / "paused.jsonl"
    write_as(busy_paused_busy(), path, "otlp")
    tl = read_trace(path)
    d = analyse_timeline(tl).to_dict()
    assert d["gpu_idle"]["per_device"][0]["unobserved_ns"] == 500 * MS and d["findings"] == []
    labels = [r.label.strip() for r in build_rows(TimelineIndex.build(tl))]
    assert PAUSED_LABEL in labels

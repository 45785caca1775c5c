"""Savings that can be won (docs/findings.md, "What bounds each saving"): each rule's saving is at most what its fix
can physically recover, carried as ``Finding.bound_ns`` / ``bound``. Per rule, a case where the old estimate
exceeded the bound and the saving now equals the bound; then a trace built as a user's program would be (no phase
named for our analysis) where the GPU-idle bound comes from the timeline itself."""

from __future__ import annotations

from gputrace.analysis.findings import (
    BOUND_BLOCKED,
    BOUND_COMM,
    BOUND_FILL,
    BOUND_PINNING,
    BOUND_STRAGGLER,
    BOUND_SYNC,
    RULES,
    Context,
    findings,
)
from gputrace.analysis.report import analyse_timeline
from gputrace.testing.synth import make_timeline
from tests.unit.test_findings import MS, WALL, doc


def run(name, data, comm=None):
    return next(r for r in RULES if r.name == name).check(Context(data, comm or {}, WALL, WALL // 100))


def idle(lost, fill, device_busy, text="GPU 0 idle 50 ms x 4 (200 ms) while mostly preprocess ran on the host"):
    return {"category": "idle", "text": text, "lost_ns": lost, "device": 0, "count": 4, "fill_ns": fill,
            "device_busy_ns": device_busy}


def test_gpu_idle_saving_is_at_most_the_gpu_work_that_could_fill_it():
    [f] = run("gpu-idle-host", doc(stalls=[idle(200 * MS, 30 * MS, 40 * MS)]))
    assert f.saving_ns == f.bound_ns == 30 * MS and f.bound == BOUND_FILL  # was 200 ms
    assert "at most 30 ms: the GPU work that could fill it" in f.evidence
    # Two stalls of one device: each at most its fill, together at most the device's busy time (one GPU's work
    # fills one gap once): 30 + 35 ms -> 40 ms.
    two = [idle(200 * MS, 30 * MS, 40 * MS),
           idle(100 * MS, 35 * MS, 40 * MS, "GPU 0 idle 25 ms x 4 (100 ms) while mostly decode ran on the host")]
    [f] = run("gpu-idle-host", doc(stalls=two))
    assert f.saving_ns == f.bound_ns == 40 * MS
    # Where the GPU work is enough, the idle time is the saving, and the bound says what it would be.
    [f] = run("gpu-idle-host", doc(stalls=[idle(200 * MS, 300 * MS, 300 * MS)]))
    assert f.saving_ns == 200 * MS and f.bound_ns == 200 * MS and "at most" not in f.evidence
    # Below the listing threshold once bounded: not listed.
    assert run("gpu-idle-host", doc(stalls=[idle(200 * MS, 5 * MS, 5 * MS)])) == []


def test_gpu_idle_in_an_older_document_is_bounded_by_the_device_busy_time():
    stall = {"category": "idle", "text": "GPU 0 idle 200 ms while preprocess ran on the host", "lost_ns": 200 * MS,
             "device": 0, "count": 1}
    [f] = run("gpu-idle-host", doc(stalls=[stall], gpu_idle={"per_device": [{"device": 0, "busy_ns": 20 * MS}]}))
    assert f.saving_ns == f.bound_ns == 20 * MS


def test_gpu_idle_blocked_in_one_call_is_at_most_the_time_in_that_call():
    # A profiler window opened before any CUDA work: context creation in one call of 29.9 s within a 30.5 s gap
    # (HTA's public alexnet trace). Warming up takes the call out of the timed work: at most the call's 29.9 s.
    text = "GPU 0 idle 30.5 s (leading) while cudaDeviceGetStreamPriorityRange and aten::uniform_ ran on the host"
    stall = {**idle(30_500 * MS, 1 * MS, 1 * MS, text), "largest_ns": 30_500 * MS, "count": 1}
    calls = [{"api": "cudaDeviceGetStreamPriorityRange", "count": 11, "total_ns": 29_927 * MS, "max_ns": 29_927 * MS}]
    [f] = run("gpu-idle-host", doc(stalls=[stall], api_calls=calls))
    assert "blocked in one" in f.title and f.saving_ns == f.bound_ns == 29_927 * MS and f.bound == BOUND_BLOCKED
    # Two gaps blocked in the same API share its time once.
    two = [stall, {**stall, "text": text.replace("30.5 s (leading)", "30.5 s")}]
    [f] = run("gpu-idle-host", doc(stalls=two, api_calls=calls))
    assert f.saving_ns == f.bound_ns == 29_927 * MS


def test_sync_wait_is_at_most_the_host_work_that_could_move_into_it():
    # .item() waits 40 ms x 5 for the GPU's work; the host has 3 ms of its own before the next sync each time.
    waits = [{"phase": "loss_sync", "type": "stream", "wait_ns": 40 * MS, "gpu_busy_ns": 40 * MS,
              "start": i * 100 * MS, "host_next_ns": 3 * MS} for i in range(5)]
    [f] = run("sync-wait", doc(gpu={"sync_waits": waits}))
    assert f.saving_ns == f.bound_ns == 15 * MS and f.bound == BOUND_SYNC  # was 200 ms: the GPU's own work
    # A host with more to do than the wait: the wait is the saving.
    [f] = run("sync-wait", doc(gpu={"sync_waits": [{**w, "host_next_ns": 60 * MS} for w in waits]}))
    assert f.saving_ns == f.bound_ns == 200 * MS


def comm(exposed, compute, overlap=0):
    return {"ranks": [{"rank": 0, "source": "nccl kernels", "comm_ns": exposed + overlap, "overlap_ns": overlap,
                       "exposed_ns": exposed, "calls": 8, "compute_ns": compute}],
            "collectives": [], "stragglers": []}


def test_exposed_comm_is_at_most_the_compute_that_could_hide_it():
    # 165 ms exposed, 20 ms of compute kernels, 0 of them already overlapping: at most 20 ms.
    [f] = run("exposed-comm", doc(), comm(165 * MS, 20 * MS))
    assert f.saving_ns == f.bound_ns == 20 * MS and f.bound == BOUND_COMM
    # Compute that already hides communication cannot hide it twice: 50 ms compute, 30 ms of it overlapping.
    [f] = run("exposed-comm", doc(), comm(165 * MS, 50 * MS, overlap=30 * MS))
    assert f.saving_ns == f.bound_ns == 20 * MS
    assert run("exposed-comm", doc(), comm(165 * MS, 5 * MS)) == []  # 5 ms: under the threshold


def test_straggler_is_at_most_the_others_time_in_collectives():
    c = {"ranks": [{"rank": 0, "comm_ns": 60 * MS, "overlap_ns": 0, "exposed_ns": 60 * MS, "calls": 4},
                   {"rank": 1, "comm_ns": 5 * MS, "overlap_ns": 0, "exposed_ns": 5 * MS, "calls": 4}],
         "collectives": [], "stragglers": [{"rank": 1, "last": 4, "of": 4, "caused_ns": 200 * MS,
                                             "median_wait_ns": 50 * MS}]}
    [f] = run("straggler", doc(), c)
    assert f.saving_ns == f.bound_ns == 60 * MS and f.bound == BOUND_STRAGGLER  # rank 0 spent 60 ms in them


def test_pinning_loss_is_at_most_the_pinning_time():
    p = {"device": None, "net_ns": -500 * MS, "overhead_ns": 80 * MS, "text": "pin+unpin 80 ms"}
    [f] = run("pinning-loss", doc(pinning=[p]))
    assert f.saving_ns == f.bound_ns == 80 * MS and f.bound == BOUND_PINNING


def test_pageable_copy_is_at_most_the_copy_time():
    # A pinned bandwidth slower than nothing cannot make the saving exceed the copy time itself.
    c = {"phase": "h2d", "device": 0, "kind": "HtoD", "src_kind": "PAGEABLE", "dst_kind": "DEVICE", "count": 4,
         "bytes": 1 << 30, "ns": 100 * MS, "gbps": (1 << 30) / (100 * MS), "pageable": True, "flag": False}
    [f] = run("pageable-copy", doc(gpu={"copies": [c]}))
    assert 0 < f.saving_ns == f.bound_ns <= 100 * MS


def test_every_finding_carries_a_bound_it_keeps():
    d = doc(stalls=[idle(200 * MS, 30 * MS, 40 * MS)],
            unattributed=[{"path": "train/step", "unattributed_ns": 50 * MS, "duration_ns": 60 * MS, "count": 1}],
            gpu={"launch_gaps": [{"phase": "optimizer", "device": 0, "instances": 4, "bracket_ns": 32 * MS,
                                  "busy_ns": 2 * MS, "gap_ns": 30 * MS, "kernels": 64, "unattributed_ns": 0,
                                  "host_activity": []}]})
    got = findings(d, comm(165 * MS, 20 * MS))
    assert {f.rule for f in got} == {"gpu-idle-host", "unattributed", "launch-bound", "exposed-comm"}
    assert all(0 <= f.saving_ns <= f.bound_ns and f.bound for f in got)
    assert all(set(f.to_dict()) >= {"bound_ns", "bound"} for f in got)


# A user's program: a loop whose host preprocessing (80 ms) leaves the GPU idle, then forward launching 8 small
# kernels (1 ms each): overlapping the preprocessing with GPU work wins at most the 8 ms of GPU work per step.
def training_loop(steps=4, prep=80, kernels=8):
    res = [{"service.name": "python train.py", "process.pid": 1}]
    spans, t = [], 0
    for i in range(steps):
        spans.append({"id": f"p{i}", "name": "preprocess", "start": t * MS, "end": (t + prep) * MS})
        t += prep
        spans.append({"id": f"f{i}", "name": "forward", "start": t * MS, "end": (t + kernels + 1) * MS})
        for k in range(kernels):
            spans.append({"name": "gemm", "start": (t + k) * MS, "end": (t + k + 1) * MS, "gpu_start": (t + k) * MS,
                          "gpu_end": (t + k + 1) * MS, "device": 0, "kind": "gpu", "parent": f"f{i}",
                          "attrs": {"gputrace.activity": "kernel"}})
        t += kernels + 1
    return make_timeline(spans, resources=res)


def _largest_idle(d: dict) -> dict:
    return max((s for s in d["stalls"] if s["category"] == "idle"), key=lambda s: s["lost_ns"])


def test_gpu_idle_on_a_training_loop_is_bounded_by_its_kernels():
    a = analyse_timeline(training_loop())
    d = a.to_dict()
    [f] = [f for f in d["findings"] if f["rule"] == "gpu-idle-host"]
    busy = 4 * 8 * MS
    s = _largest_idle(d)
    assert s["lost_ns"] >= 3 * 80 * MS > busy  # the old estimate: the idle time
    assert s["fill_ns"] == s["device_busy_ns"] == busy  # nothing of it runs under preprocess
    assert f["saving_ns"] == f["bound_ns"] == busy and "preprocess" in f["title"]


def test_gpu_work_already_under_the_host_work_named_does_not_fill_it_again():
    # The same loop, but each forward's kernels run on while the next preprocess starts (launched ahead): the
    # part of the GPU work that preprocess already hides cannot fill its idle gap a second time.
    a = analyse_timeline(training_loop())
    s = _largest_idle(a.to_dict())
    res = [{"service.name": "python train.py", "process.pid": 1}]
    spans, t = [], 0
    for i in range(4):
        spans.append({"id": f"f{i}", "name": "forward", "start": t * MS, "end": (t + 1) * MS})
        for k in range(8):  # 8 ms of kernels: 1 ms under forward, 7 ms under the next preprocess
            spans.append({"name": "gemm", "start": (t + k) * MS, "end": (t + k + 1) * MS, "gpu_start": (t + k) * MS,
                          "gpu_end": (t + k + 1) * MS, "device": 0, "kind": "gpu", "parent": f"f{i}",
                          "attrs": {"gputrace.activity": "kernel"}})
        spans.append({"id": f"p{i}", "name": "preprocess", "start": (t + 1) * MS, "end": (t + 81) * MS})
        t += 81
    d = analyse_timeline(make_timeline(spans, resources=res)).to_dict()
    s2 = _largest_idle(d)
    assert "preprocess" in s2["text"]
    assert s2["device_busy_ns"] == 32 * MS and s2["fill_ns"] == 4 * 1 * MS  # only the 1 ms under forward is free
    assert s["fill_ns"] == 32 * MS  # (the first loop: all of it)


# torch.profiler (Kineto) traces as a user's loop writes them: no gputrace import, the profiler's own categories.
def _kineto(path, rank, events):
    import json

    doc: dict = {"schemaVersion": 1, "baseTimeNanoseconds": 1_700_000_000_000_000_000}
    if rank is not None:  # (before the events: the reader takes the header first)
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    path.write_text(json.dumps(doc | {"traceEvents": events}))
    return path


def _x(cat, name, ts_ms, dur_ms, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts_ms * 1000, "dur": dur_ms * 1000,
            "args": args}


def test_sync_wait_on_a_loop_that_waits_for_its_own_gpu_work(tmp_path):
    # Each step: `loss.item()` launches a 40 ms kernel and waits for it (cudaStreamSynchronize), then 3 ms of host
    # code until the next step. The 40 ms waits are the GPU's own work: dropping the sync lets 3 ms run meanwhile.
    from gputrace.timeline.load import read_any

    ev = []
    for i in range(5):
        t = i * 50
        ev += [_x("user_annotation", "loss_sync", t, 45),
               _x("cuda_runtime", "cudaLaunchKernel", t + 1, 1, correlation=2 * i + 1),
               _x("kernel", "void gemm<1>(float*)", t + 2, 40, tid=7, device=0, stream=7, correlation=2 * i + 1),
               _x("cuda_runtime", "cudaStreamSynchronize", t + 2, 40, correlation=2 * i + 2),
               _x("user_annotation", "host_code", t + 45, 3)]
    d = analyse_timeline(read_any(_kineto(tmp_path / "t.json", None, ev))).to_dict()
    waits = d["gpu_activity"]["sync_waits"]
    # 10 ms from each wait's end to the next one's start (3 ms of host code, then the next step's launch); the
    # last: 6 ms to the thread's last span end
    assert len(waits) == 5 and sorted(w["host_next_ns"] for w in waits) == [6 * MS] + [10 * MS] * 4
    [f] = [f for f in d["findings"] if f["rule"] == "sync-wait"]
    # old estimate: 200 ms of waits, the GPU's own work; the bound: what the host had to do before its next sync
    assert sum(w["wait_ns"] for w in waits) == 200 * MS
    assert f["saving_ns"] == f["bound_ns"] == 46 * MS


def test_exposed_comm_on_two_ranks_with_little_compute(tmp_path):
    # Two NCCL ranks: 2 ms of compute, then a 38 ms all-reduce nothing overlaps (both arrive together: no straggler).
    # 38 ms exposed per rank, 2 ms of compute to hide it: the saving is 2 ms, not 38.
    from gputrace.analysis.collectives import collectives
    from gputrace.timeline.load import read_any

    ar = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    paths = [_kineto(tmp_path / f"r{r}.json", r, [
        _x("kernel", "void gemm<1>(float*)", 0, 2, tid=7, device=0, stream=7, correlation=1),
        _x("kernel", ar, 2, 38, tid=9, device=0, stream=9, correlation=2)]) for r in (0, 1)]
    tl = read_any(paths)
    c = collectives(tl)
    assert [(r["exposed_ns"], r["compute_ns"]) for r in c["ranks"]] == [(38 * MS, 2 * MS)] * 2
    got = findings(analyse_timeline(tl).to_dict(), c, min_ns=100_000)
    exposed = [f for f in got if f.rule == "exposed-comm"]
    assert exposed and all(f.bound_ns == 2 * MS and f.saving_ns <= 2 * MS for f in exposed)

"""analysis/findings.py: every rule in RULES fires on evidence it is meant for and stays silent otherwise.

The rules read the ``report --json`` document (and the collectives of a multi-rank trace); each test gives
the sections a rule reads, once where it must fire and once where it must not."""

from __future__ import annotations

import pytest

from gputrace.analysis.findings import ASSUMED_PINNED_GBPS, RULES, Context, findings

MS = 1_000_000
WALL = 1000 * MS  # 1 s: the listing threshold is 10 ms


def doc(**sections) -> dict:
    gpu = sections.pop("gpu", {})
    base = {"wall_ns": WALL, "stalls": [], "phases": [], "unattributed": [], "pinning": [],
            "gpu_activity": {"launch_gaps": [], "copies": [], "sync_waits": [], **gpu}}
    base.update(sections)
    return base


def rule(name):
    return next(r for r in RULES if r.name == name)


def run(name, data, comm=None):
    return rule(name).check(Context(data, comm or {}, WALL, max(100_000, WALL // 100)))


def idle(lost, text="GPU 0 idle 50 ms x 4 (200 ms) while mostly preprocess ran on the host"):
    return {"category": "idle", "text": text, "lost_ns": lost, "device": 0, "count": 4}


def launch(phase="optimizer", kernels=64, busy=2 * MS, gap=30 * MS, host=()):
    return {"phase": phase, "device": 0, "instances": 4, "bracket_ns": busy + gap, "busy_ns": busy, "gap_ns": gap,
            "kernels": kernels, "unattributed_ns": 0, "host_activity": list(host)}


def copy(src, nbytes, ns, kind="HtoD", count=4, phase="h2d"):
    return {"phase": phase, "device": 0, "kind": kind, "src_kind": src, "dst_kind": "DEVICE", "count": count,
            "bytes": nbytes, "ns": ns, "gbps": nbytes / ns, "pageable": src == "PAGEABLE", "flag": False}


def test_every_rule_is_documented_and_named_once():
    names = [r.name for r in RULES]
    assert len(names) == len(set(names)) == 10
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "findings.md").read_text()
    assert all(f"`{n}`" in text for n in names)


def test_gpu_idle_host():
    [f] = run("gpu-idle-host", doc(stalls=[idle(200 * MS)]))
    assert "preprocess" in f.title and f.saving_ns == 200 * MS
    assert run("gpu-idle-host", doc(stalls=[idle(5 * MS)])) == []  # below 1 % of the wall time
    assert run("gpu-idle-host", doc(stalls=[{**idle(200 * MS), "category": "launch"}])) == []


def test_gpu_idle_while_the_host_is_mostly_untraced_asks_for_phases():
    text = "GPU 0 idle 5.57 s while preprocess and cudaMalloc ran on the host (host busy 1% of it)"
    [f] = run("gpu-idle-host", doc(stalls=[{**idle(5570 * MS, text), "host_busy_ns": 56 * MS}]))
    assert f.title.startswith("GPU 0 idle while the host is mostly untraced: add phases to see what it does")
    assert "(1% in spans: preprocess and cudaMalloc)" in f.title and f.saving_ns == 5570 * MS
    # half or more of the gap in recorded spans: that work is what to overlap
    [f] = run("gpu-idle-host", doc(stalls=[{**idle(200 * MS), "host_busy_ns": 100 * MS}]))
    assert f.title == "GPU 0 idle while the host runs preprocess: overlap it with GPU work"
    # not measured (-1, or a document written before the field): the title names the host work as before
    for extra in ({"host_busy_ns": -1}, {}):
        [f] = run("gpu-idle-host", doc(stalls=[{**idle(200 * MS), **extra}]))
        assert "overlap it with GPU work" in f.title


def test_gpu_idle_while_the_host_is_blocked_in_one_cuda_call():
    """A torch.profiler window that starts before any CUDA work: the first call creates the context (alexnet:
    one cudaDeviceGetStreamPriorityRange of 29.9 s in a 30.5 s idle gap). Not work to overlap."""
    text = "GPU 0 idle 30.5 s (leading) while cudaDeviceGetStreamPriorityRange and aten::uniform_ ran on the host"
    stall = {**idle(30_500 * MS, text), "largest_ns": 30_500 * MS, "count": 1}
    calls = [{"api": "cudaDeviceGetStreamPriorityRange", "count": 11, "total_ns": 29_927 * MS, "max_ns": 29_927 * MS}]
    [f] = run("gpu-idle-host", doc(stalls=[stall], api_calls=calls))
    assert f.title.startswith("GPU 0 idle while the host is blocked in one cudaDeviceGetStreamPriorityRange call "
                              "(29.9 s): CUDA context creation or module loading at first use")
    # calls that each took a small part of the gap are launches among other work: the host work is named
    short = [{**calls[0], "max_ns": 2 * MS}]
    [f] = run("gpu-idle-host", doc(stalls=[stall], api_calls=short))
    assert f.title.startswith("GPU 0 idle while the host runs cudaDeviceGetStreamPriorityRange and aten::uniform_")


def test_idle_stalls_carry_the_hosts_recorded_time_in_their_gaps():
    from gputrace.analysis.gaps import gpu_idle_gaps
    from gputrace.analysis.stalls import idle_stalls
    from gputrace.testing.synth import make_timeline

    def busy_in_gap(spans):
        tl = make_timeline([
            {"name": "k1", "start": 0, "end": 10 * MS, "gpu_start": 0, "gpu_end": 10 * MS, "device": 0},
            *spans,
            {"name": "k2", "start": 500 * MS, "end": 510 * MS, "gpu_start": 500 * MS, "gpu_end": 510 * MS, "device": 0},
        ])
        [s] = idle_stalls(gpu_idle_gaps(tl))
        assert s.lost_ns == 490 * MS and s.to_dict()["host_busy_ns"] == s.host_busy_ns
        return s.host_busy_ns

    assert busy_in_gap([{"name": "prep", "start": 10 * MS, "end": 30 * MS}]) == 20 * MS
    assert busy_in_gap([{"name": "main", "start": 0, "end": 510 * MS}]) == 490 * MS  # a root covers it all


def test_gpu_idle_before_the_first_gpu_work_in_no_phase_is_start_up():
    # As in a `record` run of a training script: the GPU idles from the start until the first kernel while the
    # process's root span runs outside any phase (imports, CUDA context); that is start-up, not work to overlap.
    root = {"path": "python train.py", "count": 1, "duration_ns": WALL, "unattributed_ns": 900 * MS, "fraction": 0.9}
    lead = idle(400 * MS, "GPU 0 idle 400 ms (leading) while python train.py and probe ran on the host")
    [f] = run("gpu-idle-host", doc(stalls=[lead], unattributed=[root]))
    assert "start-up" in f.title and "before its first GPU work" in f.title and "overlap it" not in f.title
    assert f.saving_ns == 400 * MS and f.evidence == lead["text"]
    # Not start-up: a leading gap under a phase of the program (host work before the first kernel) ...
    under_phase = {**lead, "text": "GPU 0 idle 400 ms (leading) while preprocess and python train.py ran on the host"}
    [g] = run("gpu-idle-host", doc(stalls=[under_phase], unattributed=[root]))
    assert "start-up" not in g.title and "overlap it with GPU work" in g.title
    # ... a gap between GPU work under the root, or a root only named after a phase (prefix, not a name)
    between = {**lead, "text": "GPU 0 idle 400 ms while python train.py and probe ran on the host"}
    [h] = run("gpu-idle-host", doc(stalls=[between], unattributed=[root]))
    assert "start-up" not in h.title
    other = {**lead, "text": "GPU 0 idle 400 ms (leading) while python train.pyc ran on the host"}
    [k] = run("gpu-idle-host", doc(stalls=[other], unattributed=[root]))
    assert "start-up" not in k.title


def test_launch_bound():
    [f] = run("launch-bound", doc(gpu={"launch_gaps": [launch()]}))
    assert f.saving_ns == 30 * MS and "optimizer" in f.title
    silent = [launch(busy=40 * MS),  # GPU busy most of the time
              launch(kernels=8),  # 2 kernels a run: a wait, not launch overhead
              launch(kernels=16, gap=400 * MS),  # 25 ms per kernel: a wait
              launch(host=[{"phase": "preprocess", "ns": 20 * MS}])]  # another phase filled the gaps
    phases = [{"phase": "preprocess"}, {"phase": "optimizer"}]
    for r in silent:
        assert run("launch-bound", doc(phases=phases, gpu={"launch_gaps": [r]})) == [], r


def test_launch_bound_leaves_out_holes_longer_than_a_launch():
    """One 500 ms stall among 527 kernels is host work or a wait, not launch overhead: without it the phase's
    GPU was busy nearly all the time, so it is not launch-bound (the GPU-idle finding reports the stall)."""
    small = [(k * MS, k * MS + 500_000) for k in range(40)]  # 40 holes of 0.5 ms: 20 ms of launch gaps
    stall = [(100 * MS, 600 * MS)]
    r = {**launch(kernels=527, busy=493 * MS, gap=520 * MS), "intervals": [list(p) for p in small + stall]}
    assert run("launch-bound", doc(gpu={"launch_gaps": [r]})) == []
    # the same holes around little GPU work: launch-bound, saving = the short holes only, the stall named
    r = {**launch(kernels=64, busy=5 * MS, gap=520 * MS), "intervals": [list(p) for p in small + stall]}
    [f] = run("launch-bound", doc(gpu={"launch_gaps": [r]}))
    assert f.saving_ns == 20 * MS and f.intervals == tuple(small)
    assert "launch gaps 20 ms" in f.evidence and "1 hole(s) over 1 ms (500 ms) left out" in f.evidence


def test_pageable_copy_uses_the_pinned_bandwidth_of_the_trace():
    pageable = copy("PAGEABLE", 400 << 20, 40 * MS)  # 10.5 GB/s
    pinned = copy("PINNED", 400 << 20, 16 * MS)  # 26 GB/s
    [f] = run("pageable-copy", doc(gpu={"copies": [pageable, pinned]}))
    assert f.saving_ns == pytest.approx(40 * MS - (400 << 20) / ((400 << 20) / (16 * MS)), rel=1e-6)
    assert "pinned copies in this trace" in f.evidence
    # no large pinned copy: the assumed pinned bandwidth, said so
    [g] = run("pageable-copy", doc(gpu={"copies": [pageable, copy("PINNED", 4096, 10_000)]}))
    assert g.saving_ns == int(40 * MS - (400 << 20) / ASSUMED_PINNED_GBPS) and "assumed" in g.evidence
    assert run("pageable-copy", doc(gpu={"copies": [pinned]})) == []
    assert run("pageable-copy", doc(gpu={"copies": [copy("PAGEABLE", 1 << 20, 100_000), pinned]})) == []  # tiny


def test_sync_wait():
    w = {"phase": "loss_sync", "type": "stream", "wait_ns": 30 * MS, "gpu_busy_ns": 29 * MS}
    [f] = run("sync-wait", doc(gpu={"sync_waits": [w]}))
    assert f.saving_ns == 30 * MS and "loss_sync" in f.title
    assert run("sync-wait", doc(gpu={"sync_waits": [{**w, "wait_ns": MS}]})) == []


def test_unattributed():
    u = {"path": "train/backward", "count": 4, "duration_ns": 60 * MS, "unattributed_ns": 50 * MS, "fraction": 0.83}
    [f] = run("unattributed", doc(unattributed=[u]))
    assert f.where == "train/backward" and f.saving_ns == 50 * MS
    assert run("unattributed", doc(unattributed=[{**u, "unattributed_ns": MS}])) == []


def test_exposed_comm():
    r = {"rank": 1, "source": "nccl kernels", "comm_ns": 100 * MS, "overlap_ns": 20 * MS, "exposed_ns": 80 * MS,
         "calls": 9}
    [f] = run("exposed-comm", doc(), {"ranks": [r]})
    assert f.saving_ns == 80 * MS and "20%" in f.evidence
    assert run("exposed-comm", doc(), {"ranks": [{**r, "overlap_ns": 100 * MS, "exposed_ns": 0}]}) == []
    assert run("exposed-comm", doc(), {}) == []  # one process: no ranks


def test_straggler():
    s = {"rank": 1, "last": 4, "of": 5, "caused_ns": 200 * MS, "median_wait_ns": 50 * MS}
    [f] = run("straggler", doc(), {"stragglers": [s]})
    assert f.where == "rank 1" and "50 ms" in f.evidence
    assert run("straggler", doc(), {"stragglers": [{**s, "last": 2}]}) == []  # not last at most collectives
    assert run("straggler", doc(), {"stragglers": []}) == []


def test_pinning_loss():
    p = {"device": 0, "net_ns": -40 * MS, "text": "pinning 1 GiB cost 60 ms; copies won 20 ms"}
    [f] = run("pinning-loss", doc(pinning=[p]))
    assert f.saving_ns == 40 * MS and "GPU 0" in f.title
    assert run("pinning-loss", doc(pinning=[{**p, "net_ns": 40 * MS}])) == []  # pays
    assert run("pinning-loss", doc(pinning=[{**p, "net_ns": float("nan")}])) == []  # unknown


def test_findings_are_ranked_by_saving():
    d = doc(stalls=[idle(200 * MS)], gpu={"launch_gaps": [launch()], "sync_waits": [
        {"phase": "loss_sync", "type": "stream", "wait_ns": 90 * MS, "gpu_busy_ns": 0}]})
    got = findings(d)
    assert [f.rule for f in got] == ["gpu-idle-host", "sync-wait", "launch-bound"]
    assert findings(doc()) == []


def test_launch_bound_counts_long_holes_exactly_when_intervals_are_coarsened():
    """A phase run 456 times (a CNN's forward) has more holes than ``intervals`` keeps (MAX_INTERVALS): its merged
    windows are all longer than a launch. The analysis's exact ``long_gap_ns`` decides what is left out, so the
    phase is still launch-bound (it was silent: every coarse window read as a long hole)."""
    from gputrace.analysis._common import MAX_INTERVALS

    coarse = [[k * 10 * MS, k * 10 * MS + 3 * MS] for k in range(MAX_INTERVALS)]  # 3 ms windows
    r = {**launch(kernels=5928, busy=27 * MS, gap=312 * MS), "intervals": coarse, "long_gap_ns": 7 * MS,
         "long_gaps": 4}
    [f] = run("launch-bound", doc(gpu={"launch_gaps": [r]}))
    assert f.saving_ns == 305 * MS and "4 hole(s) over 1 ms (7 ms) left out" in f.evidence
    assert len(f.intervals) == MAX_INTERVALS  # the coarse windows, all of them: they hold the short holes
    # an older document without the exact figures reads its intervals as before
    old = {k: v for k, v in r.items() if k not in ("long_gap_ns", "long_gaps")}
    assert run("launch-bound", doc(gpu={"launch_gaps": [old]})) == []


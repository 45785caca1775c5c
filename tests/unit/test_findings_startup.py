"""Start-up counted once (analysis/startup.py + findings.py) on small synthetic traces, and straggler /
exposed-comm not double counted: each second of lost time is in at most one finding."""

from __future__ import annotations

from gputrace.analysis.findings import RULES, Context, findings
from gputrace.analysis.report import analyse_timeline
from gputrace.analysis.startup import startup_intervals
from gputrace.testing.synth import make_timeline

MS = 1_000_000
KERNEL = {"gputrace.activity": "kernel"}


def kernel(t, pid=1, dur=MS, resource=0):
    return {"name": "gemm", "start": t, "end": t + dur, "gpu_start": t, "gpu_end": t + dur, "device": 0,
            "kind": "gpu", "pid": pid, "resource": resource, "attrs": KERNEL}


def train_run():
    """A `record` run of a training script: 400 ms of imports and CUDA context in the root alone, a probe
    phase, then four steps with one kernel each; the run's wall is 1 s."""
    spans = [{"id": "root", "name": "python train.py", "start": 0, "end": 1000 * MS}]
    spans.append({"name": "probe", "start": 400 * MS, "end": 401 * MS, "parent": "root"})
    for i in range(4):
        t = 450 * MS + i * 120 * MS
        spans.append({"id": f"s{i}", "name": "step", "start": t, "end": t + 100 * MS, "parent": "root"})
        spans.append(kernel(t + 90 * MS, dur=10 * MS))
    return make_timeline(spans)


def test_startup_is_counted_once():
    # steps=False: the start-up rule on its own (with its four steps found, the run's start-up is part of its
    # warm-up finding: tests/unit/test_steps.py)
    a = analyse_timeline(train_run(), steps=False)
    [s] = a.startup
    assert (s["start_ns"], s["end_ns"], s["ends_at"], s["launcher"]) == (0, 400 * MS, "first phase probe", False)
    got = a.to_dict()["findings"]
    [st] = [f for f in got if f["rule"] == "startup"]
    assert st["saving_ns"] == 400 * MS and "first phase probe" in st["evidence"]
    root = [f for f in got if f["rule"] == "unattributed" and f["where"] == "python train.py"]
    for f in root:  # what is left of the root, if listed, is after start-up
        assert f["saving_ns"] <= 600 * MS and "start-up (400 ms) excluded" in f["evidence"]
    # No second's double counting: the findings' savings add up to at most the wall.
    assert sum(f["saving_ns"] for f in got) <= a.wall_ns
    # Without the startup section (an older document), the root keeps its start-up and no startup finding.
    d = a.to_dict()
    d.pop("startup")
    assert not [f for f in findings(d, a.comm) if f.rule == "startup"]


def test_an_idle_gap_inside_startup_is_not_listed_separately():
    a = analyse_timeline(train_run(), steps=False)
    lead = [s for s in a.to_dict()["stalls"] if s["category"] == "idle" and "(leading)" in s["text"]]
    assert lead and lead[0]["lost_ns"] >= 500 * MS  # the analysis sees the gap ...
    got = a.findings()
    assert not [f for f in got if f.rule == "gpu-idle-host" and "(leading)" in f.evidence]  # ... listed once:
    [st] = [f for f in got if f.rule == "startup"]
    assert "GPU 0 idle until its first work" in st.evidence
    # A gap that only overlaps start-up keeps its part after it, and says so.
    d = {"wall_ns": 1000 * MS, "startup": a.startup, "stalls": [
        {"category": "idle", "text": "GPU 0 idle 300 ms while prep ran on the host", "lost_ns": 300 * MS,
         "device": 0, "start": 300 * MS, "end": 600 * MS}]}
    [g] = [f for f in findings(d) if f.rule == "gpu-idle-host"]
    assert g.saving_ns == 200 * MS and "100 ms of it in start-up" in g.evidence


def torchrun_run():
    """`record -- torchrun`: the agent (pid 10) runs no GPU work and starts rank 0 (pid 11), which imports for
    300 ms and then runs two steps with kernels."""
    res = [{"service.name": "python torchrun", "process.pid": 10},
           {"service.name": "python ddp.py", "process.pid": 11, "process.parent_pid": 10, "gputrace.rank": 0}]
    spans = [{"id": "agent", "name": "python torchrun", "start": 0, "end": 1000 * MS, "pid": 10},
             {"id": "r0", "name": "python ddp.py", "start": 200 * MS, "end": 950 * MS, "pid": 11, "resource": 1}]
    for i in range(2):
        t = 500 * MS + i * 200 * MS
        spans.append({"name": "step", "start": t, "end": t + 150 * MS, "parent": "r0", "pid": 11, "resource": 1})
        spans.append(kernel(t + 100 * MS, pid=11, dur=50 * MS, resource=1))
    return make_timeline(spans, resources=res)


def test_a_launcher_without_gpu_work_is_not_blamed():
    tl = torchrun_run()
    st = {d["process"]: d for d in startup_intervals(tl)}
    assert st["python torchrun"]["launcher"] and st["python torchrun"]["end_ns"] == 500 * MS
    assert not st["python ddp.py"]["launcher"] and st["python ddp.py"]["duration_ns"] == 300 * MS
    got = analyse_timeline(tl).findings()
    assert not [f for f in got if f.rule == "gpu-idle-host" and "python torchrun" in f.title]
    [s] = [f for f in got if f.rule == "startup"]
    assert s.saving_ns == 500 * MS and "launcher, no GPU work" in s.evidence  # the union, counted once
    # Gaps after start-up that name the launcher: it is not the host work; under the launcher alone, not listed.
    d = {"wall_ns": 1000 * MS, "startup": startup_intervals(tl), "stalls": [
        {"category": "idle", "text": f"GPU 0 idle 100 ms (trailing) while {who} ran on the host", "lost_ns": 100 * MS,
         "device": 0, "start": 900 * MS, "end": 1000 * MS} for who in ("python torchrun and python ddp.py",
                                                                        "python torchrun")]}
    [g] = [f for f in findings(d) if f.rule == "gpu-idle-host"]
    assert "runs python ddp.py:" in g.title and "launcher python torchrun not counted" in g.evidence
    # A process without GPU work that starts nothing with work is no launcher and has no start-up.
    alone = make_timeline([{"name": "python tool.py", "start": 0, "end": 100 * MS}])
    assert startup_intervals(alone) == []


def ctx(comm):
    return Context({"wall_ns": 1000 * MS}, comm, 1000 * MS, 10 * MS)


def comm(exposed0):
    return {"ranks": [{"rank": 0, "source": "host calls", "comm_ns": exposed0, "overlap_ns": 0,
                       "exposed_ns": exposed0, "calls": 4}],
            "collectives": [{"name": "all_reduce", "index": i, "last_rank": 1, "wait_ns": 50 * MS,
                             "waits": {"0": 50 * MS}} for i in range(4)],
            "matched": 4,
            "stragglers": [{"rank": 1, "last": 4, "of": 4, "caused_ns": 200 * MS, "median_wait_ns": 50 * MS}]}


def test_straggler_and_exposed_comm_are_not_double_counted():
    rules = tuple(r for r in RULES if r.name in ("straggler", "exposed-comm"))
    # Rank 0's exposed communication is its waits for rank 1: one finding, the straggler's.
    got = findings({"wall_ns": 1000 * MS}, comm(205 * MS), min_ns=10 * MS, rules=rules)
    assert [f.rule for f in got] == ["straggler"] and got[0].saving_ns == 200 * MS
    # More exposed than the waits: the rest stays, and cites the straggler.
    got = findings({"wall_ns": 1000 * MS}, comm(300 * MS), min_ns=10 * MS, rules=rules)
    [e] = [f for f in got if f.rule == "exposed-comm"]
    assert e.saving_ns == 100 * MS and "waiting for straggler rank 1" in e.evidence
    # No straggler: exposed-comm keeps all of it (int rank keys, as collectives() returns them, work too).
    c = comm(205 * MS) | {"stragglers": []}
    [e] = next(r for r in RULES if r.name == "exposed-comm").check(ctx(c))
    assert e.saving_ns == 205 * MS
    c = comm(205 * MS)
    c["collectives"] = [x | {"waits": {0: 50 * MS}} for x in c["collectives"]]
    assert next(r for r in RULES if r.name == "exposed-comm").check(ctx(c)) == []


def test_gpu_idle_while_waiting_for_the_straggler_is_the_straggler_finding():
    stall = {"category": "idle", "text": "GPU 0 idle 52 ms x 3 (156 ms) while mostly all_reduce ran on the host",
             "lost_ns": 156 * MS, "device": 0, "start": 0, "end": 0}
    rules = tuple(r for r in RULES if r.name in ("straggler", "gpu-idle-host"))
    got = findings({"wall_ns": 1000 * MS, "stalls": [stall]}, comm(205 * MS), min_ns=10 * MS, rules=rules)
    assert [f.rule for f in got] == ["straggler"]  # the 156 ms are within the 200 ms of waits it counts
    # More idle than the waits: the rest stays and cites the straggler; without a straggler all of it stays.
    big = {**stall, "lost_ns": 300 * MS}
    got = findings({"wall_ns": 1000 * MS, "stalls": [big]}, comm(205 * MS), min_ns=10 * MS, rules=rules)
    [g] = [f for f in got if f.rule == "gpu-idle-host"]
    assert g.saving_ns == 100 * MS and "waiting for the straggler (rank 1)" in g.evidence
    got = findings({"wall_ns": 1000 * MS, "stalls": [stall]}, comm(205 * MS) | {"stragglers": []},
                   min_ns=10 * MS, rules=rules)
    assert [(f.rule, f.saving_ns) for f in got] == [("gpu-idle-host", 156 * MS)]


def test_startup_rule_fires_and_stays_silent():
    rule = next(r for r in RULES if r.name == "startup")
    st = [{"process": "python a.py", "host": "h", "pid": 1, "start_ns": 0, "end_ns": 300 * MS,
           "duration_ns": 300 * MS, "ends_at": "first phase x", "launcher": False},
          {"process": "python a.py", "host": "h", "pid": 2, "start_ns": 100 * MS, "end_ns": 350 * MS,
           "duration_ns": 250 * MS, "ends_at": "first phase x", "launcher": False}]
    [f] = rule.check(Context({"startup": st}, {}, 1000 * MS, 10 * MS))
    assert f.saving_ns == 350 * MS and f.where == "start-up"  # overlapping processes: the wall time, once
    assert rule.check(Context({"startup": [st[0] | {"end_ns": 5 * MS}]}, {}, 1000 * MS, 10 * MS)) == []
    assert rule.check(Context({}, {}, 1000 * MS, 10 * MS)) == []


def test_a_profiler_window_has_no_start_up(tmp_path):
    """A torch.profiler trace records a window of a running program: an annotation around all of it
    (sglang's ``execute_...``) is a step, not a process from its start, so nothing before its first inner
    phase is start-up. The same shape recorded by gputrace (a process root) is."""
    import json

    from gputrace.analysis.startup import startup_intervals
    from gputrace.timeline import read_any

    ev = [{"ph": "X", "cat": "user_annotation", "name": "execute_15", "pid": 5, "tid": 5, "ts": 0.0, "dur": 1000.0},
          {"ph": "X", "cat": "user_annotation", "name": "step", "pid": 5, "tid": 5, "ts": 500.0, "dur": 400.0},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": 5, "ts": 510.0,
           "dur": 5.0, "args": {"correlation": 1}},
          {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 520.0, "dur": 100.0,
           "args": {"device": 0, "stream": 7, "correlation": 1}}]
    p = tmp_path / "k.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    assert startup_intervals(read_any(p)) == []
    plain = tmp_path / "c.json"  # the same rows in a plain Chrome trace (no Kineto category): a root, a start-up
    plain.write_text(json.dumps({"traceEvents": [{k: v for k, v in e.items() if k != "cat"} for e in ev[:2]]}))
    [s] = startup_intervals(read_any(plain))
    assert s["duration_ns"] == 500_000 and s["ends_at"] == "first phase step"

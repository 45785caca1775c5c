"""Each second of wall time in at most one finding (analysis/findings.py, `account`): savings measured on the
job's one timeline, so processes running in parallel count a moment once; GPU idle once per device; a
warm-up step in one finding. Small synthetic traces, and the committed ddp trace of a 2-rank job."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from gputrace.analysis.findings import Finding, account, findings
from gputrace.analysis.report import analyse_timeline
from gputrace.testing.synth import make_timeline

MS = 1_000_000
KERNEL = {"gputrace.activity": "kernel"}
TRACES = Path(__file__).resolve().parents[2] / "benchmarks" / "real_programs" / "h200-2026-12-01" / "traces.tar.gz"


def kernel(t, pid=1, dur=MS, resource=0, parent=None):
    k = {"name": "gemm", "start": t, "end": t + dur, "gpu_start": t, "gpu_end": t + dur, "device": 0,
         "kind": "gpu", "pid": pid, "resource": resource, "attrs": KERNEL}
    return k | ({"parent": parent} if parent is not None else {})


def two_processes(kernels_at=((900,), (900,)), run_id=None):
    """Two processes (pids 1 and 2, separate runs unless ``run_id``) in parallel on one host for the same
    second, both on GPU 0: each a root with a 1 ms probe, then host code no phase explains, then kernels."""
    res = [{"service.name": f"python job.py {p}", "process.pid": p} | ({"gputrace.run_id": run_id} if run_id else {})
           for p in (1, 2)]
    spans = []
    for i, (pid, ks) in enumerate(zip((1, 2), kernels_at, strict=True)):
        root = f"root{pid}"
        spans.append({"id": root, "name": "python job.py", "start": 0, "end": 1000 * MS, "pid": pid, "resource": i})
        spans.append({"name": "probe", "start": 0, "end": MS, "parent": root, "pid": pid, "resource": i})
        for t in ks:
            spans.append({"id": f"s{pid}{t}", "name": "step", "start": t * MS, "end": (t + 60) * MS, "parent": root,
                          "pid": pid, "resource": i})
            spans.append(kernel(t * MS, pid=pid, dur=50 * MS, resource=i, parent=f"s{pid}{t}"))
    return make_timeline(spans, resources=res)


def test_parallel_processes_savings_are_bounded_by_the_wall():
    a = analyse_timeline(two_processes())
    d = a.to_dict()
    assert a.wall_ns == 1000 * MS  # the job's extent: the two processes ran in the same second
    # Per process, about 0.9 s each of root time no phase explains: 1.8 s summed over the two processes.
    [root] = [u for u in d["unattributed"] if u["path"] == "python job.py"]
    assert root["unattributed_ns"] > 1000 * MS
    got = d["findings"]
    assert got and sum(f["saving_ns"] for f in got) <= 1000 * MS
    assert all(f["saving_ns"] <= 1000 * MS for f in got)


def test_account_claims_in_order_and_caps_at_the_wall():
    iv = Finding("gpu-idle-host", "t", "e", 600 * MS, "GPU 0", ((0, 600 * MS),))
    same = Finding("unattributed", "t", "e", 900 * MS, "python job.py", ((0, 450 * MS), (0, 500 * MS)))
    out = {f.rule: f for f in account([iv, same], wall_ns=1000 * MS)}
    assert out["gpu-idle-host"].saving_ns == 600 * MS
    assert "unattributed" not in out  # a root's host time in no phase: all of it the idle GPU's, claimed first
    # A finding without intervals (a pageable copy) is bounded by the wall the others leave, and vice versa.
    scalar = Finding("pageable-copy", "t", "e", 800 * MS, "h2d GPU 0")
    got = account([iv, same, scalar], wall_ns=1000 * MS)
    assert sum(f.saving_ns for f in got) == 1000 * MS
    out = {f.rule: f for f in got}
    assert out["pageable-copy"].saving_ns == 800 * MS
    assert out["gpu-idle-host"].saving_ns == 200 * MS and "capped" in out["gpu-idle-host"].evidence
    # Overlapping instances (two processes at once) count their wall time once.
    [u] = account([same], wall_ns=1000 * MS)
    assert u.saving_ns == 500 * MS and "processes in parallel counted once" in u.evidence


@pytest.mark.parametrize("run_id", [None, "job-1"])
def test_one_gpu_shared_by_two_processes_is_one_idle_finding(run_id):
    # Process 1 runs kernels at 300 ms, process 2 at 500 ms: GPU 0 is idle only when neither runs anything.
    a = analyse_timeline(two_processes(((300,), (500,)), run_id=run_id))
    idle = [f for f in a.findings() if f.rule == "gpu-idle-host"]
    assert len(idle) == 1 and idle[0].where == "GPU 0"
    busy = 100 * MS  # 300..350 and 500..550 ms
    assert idle[0].saving_ns <= a.wall_ns - busy
    assert [d.device for d in a.devices] == [0]  # the GPU idle table: one row, not one per process
    assert a.devices[0].idle_ns == a.wall_ns - busy


def warmup_run():
    """One process: a root, a probe, four steps whose forward launches 40 small kernels; the first forward
    (the warm-up) takes 30 ms, the others 10 ms. The GPU idles between the kernels while forward runs."""
    spans = [{"id": "root", "name": "python train.py", "start": 0, "end": 400 * MS},
             {"name": "probe", "start": 0, "end": MS, "parent": "root"}]
    for i in range(4):
        t = 10 * MS + i * 90 * MS
        width = (30 if i == 0 else 10) * MS
        spans.append({"id": f"st{i}", "name": "step", "start": t, "end": t + width + 5 * MS, "parent": "root"})
        spans.append({"id": f"fw{i}", "name": "forward", "start": t, "end": t + width, "parent": f"st{i}"})
        for k in range(40):
            spans.append(kernel(t + k * width // 40, dur=20_000, parent=f"fw{i}"))
    return make_timeline(spans)


def test_warm_up_step_is_counted_in_one_finding():
    a = analyse_timeline(warmup_run())
    got = a.findings()
    forward = 60 * MS  # the forwards' wall time: 30 + 3 x 10 ms
    mine = [f for f in got if (f.rule == "launch-bound" and f.where.startswith("forward"))
            or (f.rule == "unattributed" and f.where.endswith("/forward"))]
    assert mine, "the forwards' gaps are a finding"
    assert len(mine) == 1  # launch-bound or unattributed, not both
    assert sum(f.saving_ns for f in mine) <= forward
    assert sum(f.saving_ns for f in got) <= a.wall_ns


@pytest.fixture(scope="module")
def ddp(tmp_path_factory):
    if not TRACES.exists():
        pytest.skip("no committed traces")
    out = tmp_path_factory.mktemp("real")
    with tarfile.open(TRACES) as tar:
        tar.extract("./ddp.jsonl", out, filter="data")
    from gputrace.timeline.load import read_any

    return read_any([out / "ddp.jsonl"])


def test_committed_ddp_trace_savings_add_up_to_at_most_the_wall(ddp):
    a = analyse_timeline(ddp)
    d = a.to_dict()
    got = d["findings"]
    assert sum(f["saving_ns"] for f in got) <= a.wall_ns
    assert len([f for f in got if f["rule"] == "gpu-idle-host" and f["where"] == "GPU 0"]) <= 1
    # The two ranks' unattributed root time (4.8 s each, in parallel) is not listed above the wall.
    assert all(f["saving_ns"] <= a.wall_ns for f in got)
    # The same document read back gives the same table (the intervals travel in it).
    assert [f.to_dict() for f in findings(d, a.comm)] == got


def test_wall_is_the_union_of_the_runs_extents():
    from gputrace.analysis.stats import wall_ns

    parallel = two_processes()
    assert wall_ns(parallel) == 1000 * MS  # in parallel: their shared second counted once
    res = [{"service.name": "a", "process.pid": 1}, {"service.name": "b", "process.pid": 2}]
    one_after_other = make_timeline([{"name": "python a.py", "start": 0, "end": 100 * MS, "pid": 1, "resource": 0},
                                     {"name": "python b.py", "start": 500 * MS, "end": 600 * MS, "pid": 2,
                                      "resource": 1}], resources=res)
    assert wall_ns(one_after_other) == 200 * MS  # not the 400 ms between them


def test_merged_pairs_close_the_shortest_holes_beyond_the_cap():
    from gputrace.analysis._common import merged_pairs

    s = [0, 10, 12, 30, 31]
    e = [5, 11, 20, 30, 40]  # [30, 30) is empty; [12, 20) and [10, 11) are apart by 1
    assert merged_pairs(s, e) == [[0, 5], [10, 11], [12, 20], [31, 40]]
    assert merged_pairs(s, e, cap=2) == [[0, 20], [31, 40]]  # the longest hole (20..31) kept open
    assert merged_pairs([], []) == []

"""Many ranks, processes and findings (issue 34): the wall-time account, start-up per process and the per-(run,
host) extents stay linear, and the report's per-rank text stays readable. Correctness is checked against plain
references; the ``timeout`` marks are hang guards far above today's cost (the quadratic versions took minutes at
these sizes), never speed targets (those are in benchmarks/bench_scaling.py)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from gputrace.analysis._common import host_run_extents, run_extents
from gputrace.analysis.findings_account import CLAIM_ORDER, SAME_TIME_NAMES, Finding, account, merge_spans
from gputrace.analysis.startup import startup_intervals
from gputrace.testing.synth import kineto_pids_trace, make_timeline
from gputrace.timeline.model import Lane, Timeline


def _minus(a, b):
    out = []
    for s, e in a:
        cur = s
        for bs, be in b:
            if be <= cur or bs >= e:
                continue
            if bs > cur:
                out.append((cur, bs))
            cur = max(cur, be)
        if cur < e:
            out.append((cur, e))
    return out


def _length(iv):
    return sum(b - a for a, b in iv)


def _reference_savings(found, wall):
    """Each finding's saving by the module docstring's rule, the plain way: claim in CLAIM_ORDER, a finding keeps
    what no earlier finding claimed, the rest is capped by the wall time left."""
    order = sorted(range(len(found)), key=lambda i: account.__globals__["_claim_key"](found[i]))
    claimed, scalar, out = [], 0, {}
    for i in order:
        f = found[i]
        left = max(0, wall - _length(claimed) - scalar)
        saving = f.saving_ns
        if f.intervals:
            own = _minus(merge_spans(f.intervals), claimed)
            saving = min(saving, _length(own))
            claimed = merge_spans([*claimed, *own])
        saving = min(saving, left)
        if not f.intervals:
            scalar += saving
        out[i] = saving
    return [out[i] for i in range(len(found))]


def test_account_keeps_the_documented_rule_on_random_findings():
    rules = [*CLAIM_ORDER[:-1], "other"]
    for trial in range(300):
        r = random.Random(trial)
        found = []
        for j in range(r.randint(1, 15)):
            iv = tuple((a, a + r.randint(0, 30)) for a in (r.randint(0, 100) for _ in range(r.randint(0, 4))))
            found.append(Finding(r.choice(rules), f"t{j}", "ev", r.randint(1, 120), r.choice(["", "GPU 0", "a/b"]), iv))
        wall = r.choice([0, 60, 1000])
        got = {f.title: f.saving_ns for f in account(found, wall)}
        want = _reference_savings(found, wall if wall else 10**9)
        assert got == {f.title: s for f, s in zip(found, want, strict=True) if s > 0}, trial


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_thousands_of_ranks_idle_at_once_are_one_saving_and_a_short_evidence():
    n, ms = 4_000, 1_000_000
    found = [Finding("gpu-idle-host", f"GPU 0 idle (h{r})", "idle", 30 * ms, f"GPU 0 (h{r})",
                     ((0, 10 * ms), (20 * ms, 40 * ms))) for r in range(n)]
    found += [Finding("exposed-comm", f"rank {r}", "comm", 5 * ms, f"rank {r}", ((40 * ms + r, 45 * ms + r),))
              for r in range(n)]
    out = account(found, wall_ns=100 * ms)
    idle = [f for f in out if f.rule == "gpu-idle-host"]
    assert len(idle) == 1 and idle[0].saving_ns == 30 * ms  # the others idled at the same moments: counted once
    assert f"and {n - 1 - SAME_TIME_NAMES:,} more" in idle[0].evidence and len(idle[0].evidence) < 400
    comm = sum(f.saving_ns for f in out if f.rule == "exposed-comm")
    assert comm == 5 * ms + n - 1  # the ranks' exposed windows overlap but for their 1 ns offsets


def test_host_run_extents_keeps_only_the_pairs_present():
    tl = make_timeline([{"name": "a", "start": 10 * i, "end": 10 * i + 5 + i, "host": f"h{i % 3}", "pid": i}
                        for i in range(9)])
    run = np.arange(tl.n, dtype=np.int64)  # every row its own run
    host = np.array([int(tl.lanes[ln].host[1:]) for ln in tl.cols["lane"]], np.int64)
    ext = host_run_extents(tl, run, host, 3)
    assert len(ext.keys) == tl.n  # not runs x hosts
    lo, hi = ext.of(run, host)
    rmin, rmax = run_extents(tl, run, tl.n)
    assert lo.tolist() == rmin.tolist() and hi.tolist() == rmax.tolist()


def _processes(n: int) -> Timeline:
    """n processes, each a root span over one phase; process k's phase starts k ns after its root."""
    rows = 2 * n
    start = np.empty(rows, np.int64)
    end = np.empty(rows, np.int64)
    start[0::2], end[0::2] = 0, 10**6
    start[1::2], end[1::2] = np.arange(1, n + 1), 10**6
    sid = np.arange(1, rows + 1, dtype=np.uint64)
    psid = np.zeros(rows, np.uint64)
    psid[1::2] = sid[0::2]
    cols = {"start": start, "end": end, "lane": np.repeat(np.arange(n, dtype=np.int32), 2),
            "phase": np.tile(np.array([0, 1], np.int32), n), "span_id": sid, "parent_span_id": psid,
            "trace": np.zeros(rows, np.int32)}
    lanes = [Lane("h", 1000 + k, -1, "thread:main") for k in range(n)]
    return Timeline.from_unsorted(cols, ["python job.py", "synthesis"], lanes, [{}], [""])


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_start_up_of_forty_thousand_processes():
    n = 40_000
    got = startup_intervals(_processes(n))
    assert len(got) == n
    assert sorted(d["duration_ns"] for d in got) == list(range(1, n + 1))
    assert all(d["ends_at"] == "first phase synthesis" for d in got)


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_kineto_trace_of_forty_thousand_pids(tmp_path):
    """One CPU op per pid and one kernel each (issue 34: over 60 s in startup_intervals before): a profiler
    window has no start-up, and saying so costs a pass over the processes, not one over the trace per pid."""
    import json

    from gputrace.timeline.load import read_any

    n = 40_000
    path = tmp_path / "pids.json"
    path.write_text(json.dumps(kineto_pids_trace(n)))
    tl = read_any([path])
    assert len({ln.pid for ln in tl.lanes}) > n
    assert startup_intervals(tl) == []


def test_the_per_rank_table_prints_the_ranks_that_matter_and_counts_the_rest():
    import io

    from gputrace.commands.report import render_comm
    from gputrace.commands.report_gpu import ROW_CAP
    from gputrace.textsafe import console

    n = 500
    ranks = [{"rank": r, "source": "nccl kernels", "calls": 4, "comm_ns": 10**6, "overlap_ns": 0,
              "exposed_ns": 10**6 + (r * 7919) % 1000} for r in range(n)]
    out = io.StringIO()
    render_comm({"ranks": ranks}, console(file=out, width=120))
    text = out.getvalue()
    shown = [int(line.split("│")[1]) for line in text.splitlines() if line.startswith("│")]
    top = sorted(ranks, key=lambda r: -r["exposed_ns"])[:ROW_CAP]
    assert shown == sorted(r["rank"] for r in top)  # the most exposed, in rank order
    assert f"{n - ROW_CAP:,} more ranks not shown" in text

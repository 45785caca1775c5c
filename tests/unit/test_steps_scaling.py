"""Steps over many processes (issue 34): what depends on a process's device activity alone is found once per
activity group (a Kineto trace's pid-less streams are one group per host, shared by all its pids), and the
start-up entries are grouped by process once, so ``steps_report`` stays linear in processes. The ``timeout``
mark is a hang guard far above today's cost (the per-process scans took minutes at that size), not a speed
target (that is benchmarks/bench_scaling.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gputrace.analysis.steps import _activity_in, breakdown, detect_steps, steps_report
from gputrace.testing.synth import kineto_pids_trace, make_timeline

MS = 1_000_000
KERNEL = {"gputrace.activity": "kernel"}


class _CountingDict(dict):
    """A start-up entry that counts the reads of its keys."""

    reads = 0

    def get(self, k, default=None):
        type(self).reads += 1
        return super().get(k, default)

    def __getitem__(self, k):
        type(self).reads += 1
        return super().__getitem__(k)


def _ranks(n: int):
    """n processes on 2 hosts, each a root over six ``train_step`` ranges (the first 30 ms, the others 10 ms: one
    warm-up step) after 5 ms of start-up; process k's ranges start k µs later."""
    spans = []
    for k in range(n):
        pid, host, t = 1000 + k, f"h{k % 2}", 5 * MS + k * 1000
        root = f"root{k}"
        body = []
        for w in (30, 10, 10, 10, 10, 10):
            body.append({"name": "train_step", "start": t, "end": t + w * MS, "parent": root, "host": host,
                         "pid": pid})
            t += w * MS
        spans.append({"id": root, "name": "python train.py", "start": 0, "end": t + MS, "host": host, "pid": pid})
        spans += body
    return make_timeline(spans)


def test_start_up_entries_are_read_once_each_not_once_per_process():
    n = 300
    tl = _ranks(n)
    plain = [{"host": f"h{k % 2}", "pid": 1000 + k, "start_ns": 0, "end_ns": 5 * MS} for k in range(n)]
    _CountingDict.reads = 0
    counted = [_CountingDict(d) for d in plain]
    got = steps_report(tl, counted).to_dict()
    reads = _CountingDict.reads
    assert got == steps_report(tl, plain).to_dict()
    assert len(got["series"]) == n
    # each series counts its own process's start-up only (another pid of the same host overlaps it too)
    assert all(d["warmup"]["steps"] == 1 and d["warmup"]["startup_ns"] == 5 * MS for d in got["series"])
    assert reads <= 8 * n, reads  # per series over every entry: n * n reads


def _shared_streams(pids: int, steps: int = 8):
    """A Kineto-shaped trace: ``pids`` processes of one CPU op each, and the host's kernels on a stream of no pid
    (-1): ``steps`` repeats of gemm, relu, sgd, each after a 2 ms idle gap (the host loading a batch)."""
    spans = [{"name": "aten::mm", "start": k * 1000, "end": k * 1000 + 500, "pid": 1000 + k, "kind": "host"}
             for k in range(pids)]
    t = MS
    for _ in range(steps):
        t += 2 * MS
        for name, d in (("gemm", 3), ("relu", 1), ("sgd", 2)):
            spans.append({"name": name, "start": t, "end": t + d * MS, "gpu_start": t, "gpu_end": t + d * MS,
                          "device": 0, "kind": "gpu", "pid": -1, "attrs": KERNEL})
            t += d * MS
    return make_timeline(spans)


def test_processes_sharing_their_hosts_streams_get_the_steps_one_process_alone_gets():
    [alone] = detect_steps(_shared_streams(1))
    tl = _shared_streams(5)
    many = detect_steps(tl)
    assert [s.pid for s in many] == [1000, 1001, 1002, 1003, 1004]
    assert alone.method == "kernels" and len(alone.start) == 8
    for s in many:
        assert (s.method, s.name) == (alone.method, alone.name)
        assert s.start.tolist() == alone.start.tolist() and s.end.tolist() == alone.end.tolist()
        assert s.gpu_busy.tolist() == alone.gpu_busy.tolist()
    many[0].start[:] = 0  # each series owns its arrays (found once, not shared)
    assert many[1].start.tolist() == alone.start.tolist()
    a, b = int(alone.start[2]), int(alone.end[2])
    assert breakdown(tl, many[3], a, b) == breakdown(_shared_streams(1), alone, a, b)
    assert breakdown(tl, many[3], a, b)["kernel gemm"] == 3 * MS


def test_activity_in_a_window_is_what_a_scan_of_all_of_it_finds():
    rng = np.random.default_rng(7)
    for trial in range(300):
        n = int(rng.integers(0, 40))
        st = np.sort(rng.integers(0, 1000, n))
        en = st + rng.integers(0, 300 if trial % 3 else 5, n)
        ix = rng.permutation(n).astype(np.int64) * 3  # positions in the activity index, any order by time
        by_time = (ix, st, en, np.maximum.accumulate(en) if n else en)
        a = int(rng.integers(-50, 1100))
        b = a + int(rng.integers(1, 400))
        want = np.sort(ix[(st < b) & (en > a)])
        assert _activity_in(by_time, a, b).tolist() == want.tolist(), trial


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_steps_of_a_kineto_trace_of_twenty_thousand_pids(tmp_path):
    """bench_scaling.py's ``pids`` trace: one CPU op per pid and one kernel each, on pid 0's stream. Every pid
    shares the host's kernels; looking for a kernel period in them once per pid took 65 s at 10k pids."""
    from gputrace.timeline.load import read_any

    n = 20_000
    path = tmp_path / "pids.json"
    path.write_text(json.dumps(kineto_pids_trace(n)))
    tl = read_any([path])
    assert len({ln.pid for ln in tl.lanes}) > n
    st = steps_report(tl)
    assert st.series == [] and st.to_dict() == {"series": [], "warmup": None}  # one kernel name: no period

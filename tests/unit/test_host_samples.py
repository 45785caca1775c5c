"""Host stack samples: the format's round trip, hostile sample arrays, and the analysis that attaches samples
to GPU idle gaps (gputrace.timeline.samples, gputrace.analysis.host_samples, the findings that name lines)."""

from __future__ import annotations

import json

import pytest

from gputrace import activity as A
from gputrace.analysis.findings import findings
from gputrace.analysis.host_samples import headline, process_sites, sites_in
from gputrace.analysis.report import analyse_timeline
from gputrace.testing.synth import make_timeline, sample_span
from gputrace.timeline.load import read_any, write_as
from gputrace.timeline.model import Timeline
from gputrace.timeline.samples import host_samples

MS = 1_000_000
U, L, S = A.FILE_USER, A.FILE_LIBRARY, A.FILE_STDLIB
SLEEP = (("/job/ddp_plain.py", 63, "load_batch", U), ("/job/ddp_plain.py", 99, "main", U))
BACKWARD = (("/v/site-packages/torch/autograd/graph.py", 825, "_engine_run_backward", L),
            ("/job/ddp_plain.py", 104, "main", U))
PARKED = (("/usr/lib/python3.11/threading.py", 327, "Condition.wait", S),
          ("/v/site-packages/torch/utils/data/_utils/worker.py", 300, "_worker_loop", L),
          ("/job/ddp_plain.py", 93, "main", U))
COMPUTE = (("/job/ddp_plain.py", 101, "main", U),)


def _steps(n: int = 6, period: int = 100 * MS, idle: int = 50 * MS, every: int = 5 * MS) -> Timeline:
    """A GPU busy ``period - idle`` then idle ``idle`` per step; rank 1 (pid 2) samples in load_batch while
    the GPU idles and in compute otherwise; a DataLoader worker (pid 3) parked all along; samples every ``every``."""
    spans: list[dict] = []
    s1, s3 = [], []
    for k in range(n):
        t = k * period
        spans.append({"name": "fwd", "start": t, "end": t + period - idle, "gpu_start": t,
                      "gpu_end": t + period - idle, "device": 0, "kind": "gpu", "pid": 2})
        for j in range(0, period, every):
            s1.append((t + j + 1, SLEEP if j >= period - idle else COMPUTE))
            s3.append((t + j + 2, PARKED))
    root = {"name": "python ddp_plain.py", "start": 0, "end": n * period, "pid": 2, "kind": "host", "id": "r"}
    worker = {"name": "fork: python ddp_plain.py", "start": 0, "end": n * period, "pid": 3, "kind": "host"}
    return make_timeline([root, worker, *spans, sample_span(s1, pid=2, hz=200), sample_span(s3, pid=3, hz=200)],
                         trace_id="ab" * 16)


def test_samples_decode_into_a_side_table():
    tl = _steps()
    hs = host_samples(tl)
    assert len(hs) == 2 * 6 * 20 and hs.skipped == 0 and hs.batches == 2
    assert list(hs.t_ns) == sorted(hs.t_ns)
    assert {p[1] for p in hs.procs} == {2, 3}
    names = {f.func for f in hs.frames}
    assert {"load_batch", "main", "Condition.wait", "_engine_run_backward"} - names == {"_engine_run_backward"}
    assert host_samples(tl) is hs  # decoded once per Timeline


def test_round_trip_through_the_otlp_file(tmp_path):
    tl = _steps(n=2)
    p = tmp_path / "t.jsonl"
    write_as(tl, p, "otlp")
    back = host_samples(read_any(p))
    hs = host_samples(tl)
    assert back.t_ns.tolist() == hs.t_ns.tolist()
    assert [back.frames[back.stacks[s][0]] for s in back.stack] == [hs.frames[hs.stacks[s][0]] for s in hs.stack]


def test_idle_gaps_name_the_line_the_host_ran_not_the_parked_worker():
    tl = _steps()
    a = analyse_timeline(tl)
    idle = [s for s in a.stalls if s.category == "idle" and s.samples]
    assert idle, a.stalls
    top = idle[0].samples[0]
    assert top.user is not None and (top.user.func, top.user.line) == ("load_batch", 63) and top.pid == 2
    assert top.library is None and not top.parked
    parked = [s for s in idle[0].samples if s.parked]
    assert parked and parked[0].pid == 3 and parked[0].count >= top.count  # as many samples, ranked after
    doc = a.to_dict()
    [f] = [f for f in doc["findings"] if f["rule"] == "gpu-idle-host"]
    assert "ddp_plain.py:63 in load_batch" in f["title"], f
    s0 = next(s for s in doc["stalls"] if s.get("samples"))
    assert s0["samples"][0]["user"] == {"file": "/job/ddp_plain.py", "line": 63, "func": "load_batch"}
    json.dumps(doc)  # plain data


def test_without_samples_the_findings_and_document_keep_their_shape():
    tl = make_timeline([{"name": "fwd", "start": k * 100 * MS, "end": k * 100 * MS + 50 * MS, "gpu_start": k * 100 * MS,
                         "gpu_end": k * 100 * MS + 50 * MS, "device": 0, "kind": "gpu"} for k in range(4)])
    doc = analyse_timeline(tl).to_dict()
    assert "host_samples" not in doc and all("samples" not in s for s in doc["stalls"])


def test_sites_in_a_window_and_two_ranks_named():
    both = make_timeline([sample_span([(t, SLEEP) for t in range(0, 10 * MS, MS)], pid=2),
                          sample_span([(t, BACKWARD) for t in range(0, 10 * MS, MS)], pid=1)],
                         resources=[{"gputrace.rank": 1}], )
    sites = sites_in(both, [(0, 5 * MS)])
    assert sum(s.count for s in sites) == 10
    assert {s.label() for s in sites} == {"ddp_plain.py:63 in load_batch",
                                          "ddp_plain.py:104 in main > torch/autograd/graph.py:825 in "
                                          "_engine_run_backward"}
    names = headline(sites)
    assert len(names) == 2 and any("load_batch" in n for n in names)  # one line per process, both ranks
    assert headline([s.to_dict() for s in sites]) == names  # from a --json document too
    assert sites_in(both, [(20 * MS, 30 * MS)]) == []


def test_process_sites_leave_parked_threads_out():
    tl = _steps(n=2)
    ps = {p.pid: p for p in process_sites(tl)}
    assert ps[3].sites == () and ps[3].samples == 40
    assert ps[2].sites[0].user.func == "main" or ps[2].sites[0].user.func == "load_batch"


def test_launch_gaps_and_sync_waits_get_samples():
    from gputrace.analysis.host_samples import attach_gpu_activity

    tl = _steps(n=2)
    gpu = {"launch_gaps": [{"phase": "fwd", "intervals": [[50 * MS, 100 * MS]]}],
           "sync_waits": [{"phase": "step", "type": "stream", "start": 150 * MS, "wait_ns": 50 * MS}]}
    attach_gpu_activity(tl, gpu)
    assert gpu["launch_gaps"][0]["samples"][0]["user"]["func"] == "load_batch"
    [w] = gpu["sync_wait_samples"]
    assert (w["phase"], w["type"]) == ("step", "stream") and w["samples"][0]["user"]["func"] == "load_batch"
    doc = {"wall_ns": 200 * MS, "gpu_activity": {
        "sync_waits": [{"phase": "step", "type": "stream", "wait_ns": 50 * MS, "gpu_busy_ns": 0, "start": 150 * MS}],
        "sync_wait_samples": gpu["sync_wait_samples"]}}
    [f] = [f for f in findings(doc) if f.rule == "sync-wait"]
    assert "at ddp_plain.py:63 in load_batch" in f.title


# ---- hostile sample arrays: skipped with a count and a reason, never a traceback ---------------------------
def _bad(field: str, value) -> Timeline:
    sp = sample_span([(0, SLEEP), (MS, SLEEP)], pid=2)
    sp["attrs"] = {**sp["attrs"], field: value}
    good = sample_span([(5 * MS, COMPUTE)], pid=2)
    return make_timeline([sp, good])


@pytest.mark.parametrize("field,value", [
    (A.SAMPLES_DT, "0,1"),
    (A.SAMPLES_DT, [0, -5]),
    (A.SAMPLES_DT, [0, "x"]),
    (A.SAMPLES_DT, [0, 1.5]),
    (A.SAMPLES_DT, [0, 1 << 70]),
    (A.SAMPLES_STACK, [0, 9]),
    (A.SAMPLES_STACK, [0]),
    (A.SAMPLES_THREAD, [0, -1]),
    (A.SAMPLES_STACK_LEN, [99]),
    (A.SAMPLES_STACK_FRAMES, [0, 1, 99]),
    (A.SAMPLES_FRAME_FILE, [7, 0]),
    (A.SAMPLES_FRAME_LINE, [1]),
    (A.SAMPLES_FRAME_FUNC, [1, 2]),
    (A.SAMPLES_FILE_KIND, [9]),
    (A.SAMPLES_FILES, None),
    (A.SAMPLES_THREAD_NAMES, ["a", "b"]),
    (A.SAMPLES_HZ, "fast"),
    (A.SAMPLES_HZ, -1.0),
    (A.SAMPLES_DROPPED, -1),
])
def test_hostile_sample_arrays_are_skipped_and_counted(field, value):
    tl = _bad(field, value)
    hs = host_samples(tl)
    assert hs.skipped == 1 and hs.batches == 1 and len(hs) == 1  # the good batch stays
    # (a stack table whose lengths disagree with its frames is named by the frames' field)
    assert (field in hs.problems[0] or A.SAMPLES_STACK_FRAMES in hs.problems[0]) and "pid 2" in hs.problems[0]
    doc = analyse_timeline(tl).to_dict()
    assert "skipped" in doc["host_samples"]["note"]


def test_hostile_names_stay_data(tmp_path):
    evil = (("/job/\x1b[31mevil[red].py", 1, "f\x07[bold]", U),)
    tl = make_timeline([sample_span([(0, evil)], pid=2)])
    [p] = process_sites(tl)
    assert p.sites[0].user.func == "f\x07[bold]"  # as recorded: escaped where shown (commands/report.py)
    from io import StringIO

    from gputrace.commands.report import render_host_samples
    from gputrace.textsafe import console

    buf = StringIO()
    render_host_samples(analyse_timeline(tl).to_dict(), console(file=buf, width=200))
    out = buf.getvalue()
    assert "\x1b" not in out and "\x07" not in out and "evil[red].py:1" in out


def test_unattributed_time_names_the_line_the_host_ran():
    root = {"name": "python train.py", "start": 0, "end": 1000 * MS, "kind": "host", "id": "r", "pid": 2}
    step = {"name": "step", "start": 0, "end": 200 * MS, "kind": "host", "parent": "r", "pid": 2}
    s = [(t, SLEEP) for t in range(300 * MS, 900 * MS, 10 * MS)] + [(t, COMPUTE) for t in range(0, 200 * MS, 10 * MS)]
    tl = make_timeline([root, step, sample_span(s, pid=2)], trace_id="ef" * 16)
    doc = analyse_timeline(tl).to_dict()
    [u] = [u for u in doc["unattributed"] if u["path"] == "python train.py"]
    assert u["samples"][0]["user"]["func"] == "load_batch"  # in the 800 ms no phase covers, not in step's 200 ms
    assert all(x["user"]["line"] != 101 for x in u["samples"])
    [f] = [f for f in doc["findings"] if f["rule"] == "unattributed"]
    assert "mostly ddp_plain.py:63 in load_batch" in f["title"], f

"""Steps and warm-up (gputrace/analysis/steps.py) and the steady-state findings (analysis/report.py,
findings.py): steps found by numbered spans, a repeating range and a repeating kernel sequence, on synthetic
timelines and on the committed profiler fixtures; the warm-up found and kept out of the other findings."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from gputrace.analysis.findings import default_min_ns, findings
from gputrace.analysis.report import analyse_timeline
from gputrace.analysis.steps import _warmup_count, detect_steps, diff, steady_timeline, steps_report
from gputrace.testing.synth import make_timeline
from gputrace.testing.train_synth import train_loop_timeline

ROOT = Path(__file__).resolve().parents[2]
FOREIGN = ROOT / "tests" / "data" / "foreign"
MS = 1_000_000
KERNEL = {"gputrace.activity": "kernel"}


def kernel(t, dur, name="gemm"):
    return {"name": name, "start": t, "end": t + dur, "gpu_start": t, "gpu_end": t + dur, "device": 0,
            "kind": "gpu", "attrs": KERNEL}


def loop(walls_ms, gap_ms=0, name="train_step", root=True):
    """A root and one ``name`` range per wall (ms), back to back (``gap_ms`` apart), each with a kernel of half
    its wall at its end."""
    spans = []
    t = 100 * MS
    for w in walls_ms:
        d = int(w * MS)
        spans.append({"name": name, "start": t, "end": t + d, "parent": "root" if root else None})
        spans.append(kernel(t + d - d // 2, d // 2))
        t += d + gap_ms * MS
    if root:
        spans.insert(0, {"id": "root", "name": "python train.py", "start": 0, "end": t + MS})
    return make_timeline(spans)


# ---- detection ---------------------------------------------------------------------------------------------


def test_a_repeating_range_makes_the_steps():
    tl = loop([10, 10, 12, 10, 10], gap_ms=2)
    [s] = detect_steps(tl)
    assert (s.method, s.name, len(s.start)) == ("range", "train_step", 5)
    # a step runs from one range's start to the next's (the 2 ms between them is in the step); the last to its end
    assert s.wall.tolist() == [12 * MS, 12 * MS, 14 * MS, 12 * MS, 10 * MS]
    assert s.gpu_busy.tolist() == [5 * MS, 5 * MS, 6 * MS, 5 * MS, 5 * MS]
    assert s.warmup == 0 and s.first_ns == 0 and s.process == "python train.py"


def test_sibling_ranges_start_the_step_where_the_body_starts():
    """The torch capture's shape: no range around a step, ``dataloader.next``, ``forward``, ``backward`` and
    ``optimizer.step`` under the root; the steps start at the first of them and the last ends with the last."""
    spans = [{"id": "root", "name": "python train.py", "start": 0, "end": 200 * MS}]
    t = 10 * MS
    for _ in range(4):
        for nm, d in (("dataloader.next", 3), ("forward", 5), ("backward", 9), ("optimizer.step", 2)):
            spans.append({"name": nm, "start": t, "end": t + d * MS, "parent": "root"})
            t += d * MS
    spans.append({"name": "save", "start": t + 5 * MS, "end": t + 50 * MS, "parent": "root"})  # once, after
    [s] = detect_steps(make_timeline(spans))
    assert s.name == "dataloader.next" and len(s.start) == 4
    assert s.start[0] == 10 * MS and s.wall.tolist() == [19 * MS] * 4  # the last ends with its optimizer.step


@pytest.mark.parametrize("names", [[f"ProfilerStep#{i}" for i in range(3, 8)], [f"step{i}" for i in range(5)],
                                   [f"iteration {i}" for i in range(1, 6)]])
def test_numbered_spans_make_the_steps(names):
    spans = []
    for i, nm in enumerate(names):
        spans.append({"name": nm, "start": i * 20 * MS, "end": i * 20 * MS + 18 * MS})
        spans.append({"name": "work", "start": i * 20 * MS + MS, "end": i * 20 * MS + 17 * MS})  # repeats too
    [s] = detect_steps(make_timeline(spans))
    assert s.method == ("profiler-step" if names[0].startswith("Profiler") else "numbered")
    assert len(s.start) == 5 and s.start[1] == 20 * MS


def test_numbered_names_that_are_not_steps_are_not_steps():
    spans = [{"name": f"layer{i}", "start": i * 10 * MS, "end": i * 10 * MS + 5 * MS} for i in range(5)]
    assert detect_steps(make_timeline(spans)) == []  # five distinct names, no step word, no repeated name


def test_a_repeating_kernel_sequence_makes_the_steps_without_ranges():
    tl = train_loop_timeline(ranges=False, steps=12, slow_step=None)
    [s] = detect_steps(tl)
    assert s.method == "kernels" and len(s.start) == 14  # 2 warm-up steps + 12
    assert s.warmup >= 1
    steady = s.wall[s.warmup:]
    assert np.ptp(steady[:-1]) < 0.1 * np.median(steady)  # one period each (the last ends with its last kernel)
    # a step starts after the longest GPU wait of the period: the batch loading before the first forward kernel
    assert s.name == "fwd_gemm_0"


def test_a_layer_loop_inside_a_step_is_not_the_step():
    """Four identical layers (3 kernels each) then a 5-kernel tail per step: the period is the step (17
    kernels), not the layer (3)."""
    spans = [{"id": "root", "name": "python x.py", "start": 0, "end": 10_000 * MS}]
    t = 10 * MS
    for _ in range(6):
        t += 5 * MS  # data loading: the GPU idle
        for _ in range(4):
            for k in ("conv", "bn", "relu"):
                spans.append(kernel(t, 100_000, k))
                t += 150_000
        for k in ("loss", "bwd_a", "bwd_b", "adam", "zero"):
            spans.append(kernel(t, 100_000, k))
            t += 150_000
    [s] = detect_steps(make_timeline(spans))
    assert len(s.start) == 6 and s.name == "conv"
    assert np.all(s.wall[:-1] == s.wall[0])


def test_ranges_at_the_end_of_a_run_are_not_its_loop():
    """A run of pipelined proofs (overlapping, not steps) ending with three ``verify`` calls: the calls are
    disjoint and repeat, but hold little of the run's work."""
    spans = [{"id": "root", "name": "python prove.py", "start": 0, "end": 2000 * MS}]
    for i in range(6):
        spans.append({"name": "prove", "start": 100 * MS + i * 200 * MS, "end": 500 * MS + i * 200 * MS,
                      "parent": "root"})
    for i in range(3):
        spans.append({"name": "verify", "start": 1900 * MS + i * 20 * MS, "end": 1910 * MS + i * 20 * MS,
                      "parent": "root"})
    assert detect_steps(make_timeline(spans)) == []


def test_kineto_fixtures_steps():
    from gputrace.timeline.load import read_any

    [s] = detect_steps(read_any(FOREIGN / "train_kineto.json.gz"))
    assert (s.method, s.name, len(s.start)) == ("numbered", "step", 4)  # step0 .. step3 under `train`
    assert s.has_gpu and np.all(s.gpu_busy > 0) and np.all(s.gpu_busy < s.wall)
    both = read_any([FOREIGN / "dist_rank0.json.gz", FOREIGN / "dist_rank1.json.gz"])
    ser = detect_steps(both)
    assert [(x.host, len(x.start)) for x in ser] == [("dist_rank0", 5), ("dist_rank1", 5)]
    # rank 1 waits ~1.1 s for rank 0 at its first all-reduce: its first step is warm-up
    assert ser[1].warmup == 1 and ser[1].wall[0] > 10 * np.median(ser[1].wall)
    assert detect_steps(read_any(FOREIGN / "train_kineto_cpu.json.gz")) == []  # two steps only


def test_nsys_fixture_warmup_loop_outside_the_numbered_steps():
    """train_nsys: 3 iterations as top-level ranges, then 4 inside `train` / `stepN`: 7 steps of the range that
    starts each (`preprocess`), not the 4 numbered ones, so the warm-up is the first (cuBLAS set-up) alone."""
    from gputrace.timeline.load import read_any

    tl = read_any(FOREIGN / "train_nsys.sqlite.gz")
    [s] = detect_steps(tl)
    assert (s.method, s.name, len(s.start), s.warmup) == ("range", "preprocess", 7, 1)
    [again] = detect_steps(steady_timeline(tl, {(s.host, s.pid): s.cut}))  # the steady state alone: stable
    assert (again.name, len(again.start), again.warmup, again.warmup_ns) == ("preprocess", 6, 0, 0)


# ---- warm-up, breakdowns ----------------------------------------------------------------------------------


def test_warmup_count():
    assert _warmup_count(np.array([300, 18, 10, 10, 9, 10, 11, 10.0])) == 2
    assert _warmup_count(np.array([10, 10, 10, 10.0])) == 0
    assert _warmup_count(np.array([12, 10, 10, 10.0])) == 0  # 20 % above: not warm-up (MAD 0)
    assert _warmup_count(np.array([10, 10, 50, 10, 10.0])) == 0  # slow in the middle: not from the start
    assert _warmup_count(np.array([90, 80, 10, 10, 10, 10.0])) == 2


def test_slowest_step_against_the_median_says_why():
    st = steps_report(train_loop_timeline())
    [s] = st.doc["series"]
    slow = s["slowest"]
    assert slow["index"] == 2 + 12  # the steady step whose batch loaded 25 ms longer
    top = {x["what"]: x["delta_ns"] for x in slow["why"][:2]}
    assert set(top) == {"span data", "GPU idle"} and all(24 * MS < v < 27 * MS for v in top.values())
    assert "span data +25" in slow["text"]
    assert s["warmup"]["steps"] == 2 and s["count"] == 22 and s["steady_count"] == 20


def test_diff_keeps_the_increases_first():
    got = diff({"a": 5, "b": 10, "c": 1}, {"a": 5, "b": 4, "c": 3})
    assert [(x["what"], x["delta_ns"]) for x in got] == [("b", 6)]
    assert [x["what"] for x in diff({"a": 1}, {"a": 4, "b": 1})] == ["a", "b"]  # no increase: largest change


def test_steady_timeline_cuts_before_and_clips_across():
    tl = loop([40, 10, 10, 10, 10])
    st = steps_report(tl)
    [s] = st.series
    assert s.warmup == 1 and st.cuts == {("h", 1): s.cut} and s.cut == 140 * MS
    cut = steady_timeline(tl, st.cuts)
    assert cut.n == tl.n - 2  # the first step and its kernel
    assert int(cut.cols["start"].min()) == s.cut  # the root now starts at the cut
    assert [d["process"] for d in analyse_timeline(cut).startup] == []  # it starts with a phase: no start-up


# ---- the findings of the steady state ---------------------------------------------------------------------


def _steady_findings(d):
    return {(f["rule"], f["where"]): f["saving_ns"] for f in d["findings"] if f["rule"] != "warm-up"}


def test_steady_findings_are_the_same_with_the_warmup_cut_from_the_trace():
    """The target: a training loop with start-up, module loading and two slow first steps, against the same
    loop recorded from its first steady step: the same rules and places, savings within 5 %."""
    full = analyse_timeline(train_loop_timeline()).to_dict()
    cut = analyse_timeline(train_loop_timeline(warmup=False)).to_dict()
    got, want = _steady_findings(full), _steady_findings(cut)
    assert want and set(got) == set(want)
    for k, v in want.items():
        assert abs(got[k] - v) <= 0.05 * v, (k, got[k], v)
    assert not [f for f in cut["findings"] if f["rule"] == "warm-up"]
    # ... and the warm-up is one finding, last, with its time and what it held
    [w] = [f for f in full["findings"] if f["rule"] == "warm-up"]
    assert full["findings"][-1] == w and full["findings"][0]["rule"] != "warm-up"
    assert w["saving_ns"] == full["steps"]["warmup"]["ns"] > 3_000 * MS
    assert "start-up 2" in w["evidence"] and "2 first step(s)" in w["evidence"]
    assert not [f for f in full["findings"] if f["rule"] == "startup"]  # start-up is part of the warm-up


def test_the_threshold_is_one_percent_of_the_steady_wall():
    a = analyse_timeline(train_loop_timeline())
    d = a.to_dict()
    steady_wall = d["steady"]["wall_ns"]
    assert steady_wall < a.wall_ns // 5
    small = [f for f in d["findings"] if f["saving_ns"] < default_min_ns(a.wall_ns)]
    assert small  # listed: above 1 % of the steady state, under 1 % of the whole trace
    assert all(f["saving_ns"] >= default_min_ns(steady_wall) for f in d["findings"])
    # the TUI's path gives the same table, and the document reads back to it
    assert [f.to_dict() for f in a.findings()] == d["findings"]
    assert [f.to_dict() for f in findings(d, a.comm)] == d["findings"]
    # savings add up to at most the wall: the steady ones to the steady wall, the warm-up to its own time
    assert sum(f["saving_ns"] for f in d["findings"] if f["rule"] != "warm-up") <= steady_wall
    assert sum(f["saving_ns"] for f in d["findings"]) <= a.wall_ns


def test_without_a_warmup_nothing_is_cut():
    b = analyse_timeline(loop([10, 10, 10, 10], root=False))  # a profiler window: the loop from its start
    assert b.steady_state() is None and b.steps["warmup"] is None and len(b.steps["series"]) == 1
    assert not [f for f in b.to_dict()["findings"] if f["rule"] == "warm-up"]


def test_report_shows_the_steps_and_json_has_them():
    from gputrace.commands.report import analyse, render
    from gputrace.textsafe import console

    d = analyse(train_loop_timeline())
    [s] = d["steps"]["series"]
    assert {"process", "method", "name", "count", "median_ns", "p90_ns", "slowest", "warmup", "steps"} <= set(s)
    assert s["steps"][0]["warmup"] and not s["steps"][2]["warmup"]
    buf = io.StringIO()
    render(d, console(file=buf, width=200))
    out = buf.getvalue()
    assert "Steps" in out and "22 of train_step (range)" in out and "slow step(s)" in out


def test_with_steps_the_startup_is_part_of_the_warmup():
    from tests.unit.test_findings_startup import train_run

    d = analyse_timeline(train_run()).to_dict()
    [w] = [f for f in d["findings"] if f["rule"] == "warm-up"]
    assert w["saving_ns"] == 450 * MS and "start-up 400 ms" in w["evidence"]  # to the first step, at 450 ms
    assert not [f for f in d["findings"] if f["rule"] == "startup"]
    [g] = [f for f in d["findings"] if f["rule"] == "gpu-idle-host"]  # the steady state's idle GPU only
    assert g["saving_ns"] <= d["steady"]["wall_ns"] == 550 * MS


def test_steps_split_over_epochs_but_not_a_sub_loop_of_each_batch():
    def run(fill):
        spans = []
        for e in range(2):
            t0 = e * 100 * MS
            spans.append({"id": f"e{e}", "name": "epoch", "start": t0, "end": t0 + 90 * MS})
            at = t0 + (0 if fill else 80 * MS)
            for i in range(4):
                d = (20 if fill else 2) * MS
                spans.append({"name": "step", "start": at + i * d, "end": at + (i + 1) * d - MS, "parent": f"e{e}"})
        return make_timeline(spans)

    [s] = detect_steps(run(fill=True))
    assert len(s.start) == 8  # the steps of both epochs
    assert detect_steps(run(fill=False)) == []  # four short calls at the end of each batch: not the loop


def test_the_steady_timeline_reuses_the_attribute_scan_renumbered():
    from gputrace.analysis import activity_index as ai

    tl = train_loop_timeline(steps=6, slow_step=None)
    [s] = detect_steps(tl)
    cut = steady_timeline(tl, {(s.host, s.pid): s.cut})
    seeded = ai.attr_scan(cut)  # renumbered from tl's scan ...
    ai._SCANS.pop(id(cut))
    fresh = ai.attr_scan(cut)  # ... and the pass over the attributes agree
    for f in ("act_rows", "act_what", "act_stream", "api", "profiler", "tagged", "paused"):
        assert np.array_equal(getattr(seeded, f), getattr(fresh, f)), f
    assert len(fresh.act_rows) > 0


def test_a_launcher_stays_one_in_the_steady_state():
    """torchrun's process (no work of its own, the parent of the workers) is not named as the GPU's host work
    in the steady state either, where its start-up is empty."""
    spans = [{"id": "L", "name": "python torchrun", "start": 0, "end": 1000 * MS, "pid": 1, "resource": 0},
             {"id": "W", "name": "python worker.py", "start": 10 * MS, "end": 990 * MS, "pid": 2, "resource": 1}]
    t = 400 * MS
    for _ in range(8):
        spans.append({"name": "step", "start": t, "end": t + 60 * MS, "parent": "W", "pid": 2, "resource": 1})
        spans.append({**kernel(t + 50 * MS, 10 * MS), "pid": 2, "resource": 1})
        t += 70 * MS
    tl = make_timeline(spans, resources=[{"service.name": "torchrun"},
                                         {"service.name": "worker", "process.parent_pid": 1}])
    a = analyse_timeline(tl)
    assert [d["process"] for d in a.startup if d["launcher"]] == ["python torchrun"]
    d = a.to_dict()
    [g] = [f for f in d["findings"] if f["rule"] == "gpu-idle-host"]
    assert "torchrun" not in g["title"]
    assert [x["process"] for x in d["steady"]["startup"] if x["launcher"]] == ["python torchrun"]


# ---- the coarsest period, and the loop's thread in a steady-state trace ------------------------------------


def _sibling_loop(pattern, iterations, t0=10 * MS):
    """A root and, per iteration, the ranges of ``pattern`` (name, ms) back to back under it (the torch
    capture's shape: no range around a step)."""
    spans = [{"id": "root", "name": "python train.py", "start": 0, "end": 0}]
    t = t0
    for _ in range(iterations):
        for nm, d in pattern:
            spans.append({"name": nm, "start": t, "end": t + int(d * MS), "parent": "root"})
            t += int(d * MS)
    spans[0]["end"] = t + MS
    return spans


def test_a_name_called_twice_per_iteration_does_not_make_the_step():
    """cnn_step.py's shape: the model's and the loss module's ``forward`` (2 per iteration, the most time),
    then ``backward`` and ``optimizer.step`` once: a step per iteration, from its first ``forward``."""
    pat = [("forward", 5), ("forward", 1), ("backward", 4), ("optimizer.step", 1)]
    [s] = detect_steps(make_timeline(_sibling_loop(pat, 6)))
    assert (s.name, len(s.start)) == ("forward", 6)
    assert s.start.tolist() == [10 * MS + i * 11 * MS for i in range(6)]
    assert s.wall.tolist() == [11 * MS] * 6  # the last ends with its optimizer.step
    # a loader first: the steps start at it, whatever is called twice after it
    [s] = detect_steps(make_timeline(_sibling_loop([("dataloader.next", 1)] + pat, 5)))
    assert (s.name, len(s.start), s.wall.tolist()) == ("dataloader.next", 5, [12 * MS] * 5)


def test_micro_batches_make_one_step_but_a_periodic_validation_does_not():
    """Gradient accumulation (4 forward/backward per ``optimizer.step``): one step per optimizer step; a
    ``validate`` every 10 iterations (more than MAX_PER_STEP) is no step."""
    acc = [("forward", 2), ("backward", 3)] * 4 + [("optimizer.step", 1)]
    [s] = detect_steps(make_timeline(_sibling_loop(acc, 5)))
    assert (s.name, len(s.start), s.wall.tolist()) == ("forward", 5, [21 * MS] * 5)
    spans = _sibling_loop([("forward", 2), ("backward", 3), ("optimizer.step", 1)], 30)
    t = spans[0]["end"]
    for i in range(3):  # validate after every 10th iteration: shift what follows
        at = 10 * MS + (i + 1) * 10 * 6 * MS + i * 4 * MS
        for sp in spans[1:]:
            if sp["start"] >= at:
                sp["start"] += 4 * MS
                sp["end"] += 4 * MS
        spans.append({"name": "validate", "start": at, "end": at + 4 * MS, "parent": "root"})
    spans[0]["end"] = t + 20 * MS
    [s] = detect_steps(make_timeline(spans))
    assert (s.name, len(s.start)) == ("forward", 30)


def _ddp_rank(warm_ms=400.0, steps=12):
    """A DDP rank as ``record`` sees it: the root on the main thread with ``dataloader.next``, ``forward``,
    ``backward`` and ``optimizer.step`` per step (the first step ``warm_ms`` slower), and DDP's reducer thread
    whose bucket all-reduces (3 per step, in flight together, each most of the step: this rank waits for a late
    one) sum to more than the root's time once the warm-up is cut."""
    spans = [{"id": "root", "name": "python ddp.py", "start": 0, "end": 0}]
    t = 2000 * MS  # start-up
    for i in range(steps):
        s0 = t
        for nm, d in (("dataloader.next", 1), ("forward", 2 + (warm_ms if i == 0 else 0)), ("backward", 55),
                      ("optimizer.step", 1)):
            spans.append({"name": nm, "start": t, "end": t + int(d * MS), "parent": "root"})
            t += int(d * MS)
        for b in range(3):
            spans.append({"name": "all_reduce", "start": s0 + (3 + b) * MS, "end": t - MS, "lane": "thread:Dummy-1"})
    spans[0]["end"] = t + MS
    return make_timeline(spans)


def test_the_loop_thread_is_the_roots_in_the_steady_state_too():
    tl = _ddp_rank()
    [s] = detect_steps(tl)
    assert (s.name, len(s.start), s.warmup) == ("dataloader.next", 12, 1)
    cut = steady_timeline(tl, {(s.host, s.pid): s.cut})
    [c] = detect_steps(cut)  # the reducer thread's overlapping waits (2.2x its wall) are not the loop's thread
    assert (c.name, c.method, c.warmup) == ("dataloader.next", "range", 0)
    assert c.start.tolist() == s.start[1:].tolist() and c.end.tolist() == s.end[1:].tolist()


@pytest.mark.slow
def test_record_traces_from_the_h200_steps_and_steady_cut():
    """The H200 ``record`` traces of benchmarks/real_programs (2026-12-04): cnn_step.py (2 ``forward`` per
    iteration) has its 230 iterations as steps (30 untimed + 200 timed; the program's median 3.97 ms), and
    ddp_plain.py's steady findings are the same with the warm-up cut from the trace (bench_steady_cut.py)."""
    import sys

    from gputrace.timeline.load import read_any

    [s] = detect_steps(read_any(ROOT / "benchmarks" / "real_programs" / "h200-2026-12-04" / "cnn.jsonl.gz"))
    assert (s.name, len(s.start)) == ("forward", 230)
    assert 3.5 * MS < np.median(s.wall[s.warmup:]) < 4.5 * MS
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_steady_cut import cut_at, steady

    tl = read_any(FOREIGN / "ddp_plain_record.jsonl.gz")
    full = analyse_timeline(tl).to_dict()
    cuts = {(x["host"], int(x["pid"])): int(x["steady_from_ns"]) for x in full["steps"]["series"] if x.get("warmup")}
    assert len(cuts) == 2
    got, want = steady(full), steady(analyse_timeline(cut_at(tl, cuts)).to_dict())
    assert want and set(got) == set(want)
    for k, v in want.items():
        assert abs(got[k] - v) <= 0.05 * v, (k, got[k], v)

"""benchmarks/real_programs/bench_record_overhead.py without torch: the paired design (four runs per repeat in a
rotated order, per-repeat ratios, their median and interval, the A/A control), the budget, the --json output, and
summary.py still reading its BENCH line and table."""

from __future__ import annotations

import importlib.util
import json
import re
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "real_programs" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def perf_counter(self):
        return self.t


def _fake_runs(bench, monkeypatch, drift, per_run_s=10.0):
    """run_once replaced: step ms = a drifting machine speed (per repeat) x the mode's true cost."""
    cost = {"plain": 1.0, "plain_aa": 1.0, "record": 1.02, "profiler": 1.10}
    clock = FakeClock()
    monkeypatch.setattr(bench, "time", clock)
    calls = []

    def run_once(cmd, timeout):
        clock.t += per_run_s
        mode = "record" if "record" in cmd else "profiler" if "--profile" in cmd else "plain"
        calls.append(mode)
        return 10.0 * drift[(len(calls) - 1) // 4] * cost[mode], "cpu", "none"

    monkeypatch.setattr(bench, "run_once", run_once)
    return calls


def test_paired_ratios_cancel_a_drifting_machine_and_summary_reads_the_output(tmp_path, monkeypatch, capsys):
    bench = _load("bench_record_overhead")
    drift = [1.0, 1.3, 0.8, 1.15, 0.9, 1.25, 1.05, 0.85]  # run-to-run spread far above the 2 % to find
    calls = _fake_runs(bench, monkeypatch, drift)
    rc = bench.main(["--repeats", "8", "--work", str(tmp_path / "w"), "--json", str(tmp_path / "b.json")])
    out = capsys.readouterr().out
    assert rc == 0
    # four runs per repeat, the order rotating: every mode takes every position twice in 8 repeats
    orders = [tuple(calls[i:i + 4]) for i in range(0, 32, 4)]
    assert orders[0] == ("plain", "record", "profiler", "plain") and orders[1] == ("record", "profiler", "plain",
                                                                                     "plain")
    assert [bench.order_of(r) for r in range(4)] == [bench.MODES[r:] + bench.MODES[:r] for r in range(4)]
    d = json.loads((tmp_path / "b.json").read_text())
    assert d["design"] == "paired" and d["repeats"] == 8 and len(d["per_repeat"]) == 8
    # the per-repeat ratios see through the drift exactly; an unpaired median of medians would not
    assert all(abs(x - 1.02) < 1e-12 for x in d["paired"]["record"]["ratios"])
    assert abs(d["ratio_to_plain"]["record"] - 1.02) < 1e-12 and abs(d["ratio_to_plain"]["profiler"] - 1.10) < 1e-12
    assert d["ratio_to_plain"]["plain_aa"] == 1.0 and d["paired"]["plain_aa"]["spread"] == 0.0
    assert d["record_within_3pct"] and d["record_within_3pct_resolved"] and d["record_below_profiler"]
    lo, hi = d["ratio_ci95"]["record"]
    assert lo <= 1.02 <= hi
    for key in ("device", "ranges", "steps", "median_step_ms", "runs_ms", "failed_runs", "wall_s"):
        assert key in d  # (the keys the unpaired version wrote are still there)
    assert "repeat 3 ratios (order plain_aa plain record profiler): record=1.020 profiler=1.100 plain_aa=1.000" in out
    assert "noise floor (A/A, plain_aa / plain)" in out
    bench_line = [ln for ln in out.splitlines() if ln.startswith("BENCH ")][-1]
    assert bench_line.startswith("BENCH record_x=1.020 profiler_x=1.100 record_within_3pct=1 "
                                 "record_below_profiler=1 failed_runs=0 ")
    # summary.py reads the log as run_all.sh leaves it
    (tmp_path / "bench.log").write_text(out)
    lines = _load("summary").lines(tmp_path)
    assert lines[1] == bench_line
    assert re.fullmatch(r"bench median step ms: plain [0-9.]+ 1\.000 \| record [0-9.]+ 1\.020 \| "
                        r"profiler [0-9.]+ 1\.100", lines[2]), lines[2]


def test_noise_shows_in_the_interval_and_the_a_a_control(tmp_path, monkeypatch, capsys):
    bench = _load("bench_record_overhead")
    import random

    rng = random.Random(3)
    clock = FakeClock()
    monkeypatch.setattr(bench, "time", clock)

    def run_once(cmd, timeout):
        clock.t += 1.0
        mode = "record" if "record" in cmd else "profiler" if "--profile" in cmd else "plain"
        return 10.0 * {"plain": 1.0, "record": 1.02, "profiler": 1.1}[mode] * rng.uniform(0.9, 1.1), "cpu", "none"

    monkeypatch.setattr(bench, "run_once", run_once)
    bench.main(["--repeats", "6", "--work", str(tmp_path), "--json", str(tmp_path / "b.json")])
    d = json.loads((tmp_path / "b.json").read_text())
    aa = d["paired"]["plain_aa"]
    assert aa["spread"] > 0.02 and len(aa["ratios"]) == 6  # the noise floor is visible ...
    lo, hi = d["ratio_ci95"]["record"]
    assert lo < 1.03 < hi and not d["record_within_3pct_resolved"]  # ... and 3 % is then not resolved
    assert "NOT resolved" in capsys.readouterr().out


def test_budget_stops_starting_repeats_and_a_failed_run_is_left_out(tmp_path, monkeypatch, capsys):
    bench = _load("bench_record_overhead")
    calls = _fake_runs(bench, monkeypatch, [1.0] * 10, per_run_s=10.0)  # 40 s per repeat
    real = bench.run_once

    def failing(cmd, timeout):
        if len(calls) == 5:  # repeat 1's second run (profiler)
            calls.append("x")
            raise RuntimeError("boom")
        return real(cmd, timeout)

    monkeypatch.setattr(bench, "run_once", failing)
    rc = bench.main(["--repeats", "10", "--budget-s", "100", "--work", str(tmp_path), "--json",
                     str(tmp_path / "b.json")])
    out = capsys.readouterr().out
    assert rc == 1 and "FAILED: boom" in out
    assert "budget of 100 s: stopping after 2 repeats" in out  # a third would have ended at 120 s
    d = json.loads((tmp_path / "b.json").read_text())
    assert d["repeats"] == 2 and d["repeats_asked"] == 10 and d["failed_runs"] == ["profiler"]
    assert len(d["paired"]["record"]["ratios"]) == 2 and len(d["paired"]["profiler"]["ratios"]) == 1


def test_inprocess_runs_are_reported_beside_the_process_level_table(tmp_path, monkeypatch, capsys):
    bench = _load("bench_record_overhead")
    _fake_runs(bench, monkeypatch, [1.0, 1.2])
    figures = iter([(1.012, 1.004, 1.021), (1.018, 1.009, 1.026), (1.010, 1.001, 1.019)])
    cmds = []

    def run_toggle(cmd, timeout):
        cmds.append(cmd)
        r, lo, hi = next(figures)
        return {"on_median_ms": 10.0 * r, "off_median_ms": 10.0, "ratio": r, "pairs": 12, "ci95": [lo, hi]}

    monkeypatch.setattr(bench, "run_toggle", run_toggle)
    rc = bench.main(["--repeats", "2", "--inprocess", "--inprocess-runs", "3", "--inprocess-steps", "240",
                     "--toggle-blocks", "10", "--work", str(tmp_path), "--json", str(tmp_path / "b.json")])
    out = capsys.readouterr().out
    assert rc == 0 and len(cmds) == 3
    cmd = cmds[0]
    assert cmd[1:4] == ["-m", "gputrace", "record"] and cmd[cmd.index("--") + 2].endswith("train_step.py")
    assert cmd[-5:] == ["--steps", "240", "--quiet", "--toggle-blocks", "10"]
    d = json.loads((tmp_path / "b.json").read_text())
    ip = d["inprocess"]
    assert ip["ratio"] == 1.012 and ip["envelope95"] == [1.001, 1.026] and len(ip["runs"]) == 3
    assert ip["within_3pct"] and ip["resolved_3pct"] and ip["k"] == 10 and ip["steps"] == 240
    assert d["design"] == "paired" and "ratio_to_plain" in d  # the process-level keys stay
    assert "in-process collection cost (3 runs" in out and "resolved (every run's interval" in out
    bench_line = [ln for ln in out.splitlines() if ln.startswith("BENCH ")][-1]
    assert bench_line.startswith("BENCH record_x=")
    assert bench_line.endswith("inprocess_x=1.0120 inprocess_ci=1.0010-1.0260 inprocess_runs=3 "
                               "inprocess_within_3pct=1 inprocess_resolved_3pct=1")
    assert out.rstrip().splitlines()[-1] == bench_line  # still last


def test_inprocess_summary_is_not_resolved_when_a_run_straddles_the_target():
    bench = _load("bench_record_overhead")
    runs = [{"ratio": 1.02, "ci95": [1.01, 1.03]}, {"ratio": 1.025, "ci95": [1.015, 1.04]}]
    s = bench.summarize_inprocess(runs)
    assert s["within_3pct"] and not s["resolved_3pct"] and s["envelope95"] == [1.01, 1.04]
    s = bench.summarize_inprocess([{"ratio": 1.05, "ci95": [1.04, 1.06]}])
    assert not s["within_3pct"] and s["resolved_3pct"] and "pooled" not in s


def test_summarize_inprocess_pools_the_runs_pairs_when_the_lines_carry_them():
    bench = _load("bench_record_overhead")
    runs = [{"ratio": 1.01, "ci95": [1.0, 1.02], "pair_ms": [(101.0, 100.0), (100.5, 100.0), (101.5, 100.0)]},
            {"ratio": 1.01, "ci95": [1.0, 1.03], "pair_ms": [(101.0, 100.0), (102.0, 100.0), (100.0, 100.0)]}]
    s = bench.summarize_inprocess(runs)
    pool = s["pooled"]
    assert pool["pairs"] == 6 and abs(pool["mean_ratio"] - 606.0 / 600.0) < 1e-9
    assert pool["mean_within_3pct"] and pool["mean_resolved_3pct"] and pool["mean_ci95"][1] < 1.03


def test_run_toggle_reads_the_toggle_line_and_refuses_unavailable():
    import sys

    import pytest

    bench = _load("bench_record_overhead")
    line = "TOGGLE on_median_ms=10.100 off_median_ms=10.000 ratio=1.0100 pairs=4 ci95=1.0000-1.0200 k=5 steps=40"
    got = bench.run_toggle([sys.executable, "-c", f"print('STEPS x'); print({line!r})"], 60)
    assert got["ratio"] == 1.01 and got["pairs"] == 4 and got["ci95"] == [1.0, 1.02]
    with pytest.raises(RuntimeError, match="toggling unavailable"):
        bench.run_toggle([sys.executable, "-c", "print('TOGGLE unavailable (not under gputrace record)')"], 60)


def _toggle_figures(true_ratio, seed, pairs=30, noise=0.02):
    """What run_toggle returns for one run whose 'on' steps cost ``true_ratio`` (pair sums of 10 steps of ~10 ms)."""
    import random

    rng = random.Random(seed)
    pair_ms = [(100.0 * true_ratio * (1 + rng.gauss(0, noise)), 100.0 * (1 + rng.gauss(0, noise)))
               for _ in range(pairs)]
    r = statistics.median(a / b for a, b in pair_ms)
    return {"on_median_ms": 10.0 * true_ratio, "off_median_ms": 10.0, "ratio": r, "pairs": pairs,
            "ci95": [r - 0.01, r + 0.01], "mean_ratio": sum(a for a, _ in pair_ms) / sum(b for _, b in pair_ms),
            "mean_ci95": [r - 0.01, r + 0.01], "pair_ms": pair_ms}


def _fake_toggles(bench, monkeypatch, rec=1.02, prof=1.10, fail_profiler_run=None):
    cmds = []

    def run_toggle(cmd, timeout):
        cmds.append(cmd)
        tool = "profiler" if "--toggle-profiler" in cmd else "record"
        if tool == "profiler" and len([c for c in cmds if "--toggle-profiler" in c]) - 1 == fail_profiler_run:
            raise RuntimeError("TOGGLE refused")
        return _toggle_figures(rec if tool == "record" else prof, seed=len(cmds))

    monkeypatch.setattr(bench, "run_toggle", run_toggle)
    return cmds


def test_inprocess_profiler_runs_alternate_with_record_and_are_compared(tmp_path, monkeypatch, capsys):
    bench = _load("bench_record_overhead")
    _fake_runs(bench, monkeypatch, [1.0, 1.2])
    cmds = _fake_toggles(bench, monkeypatch, rec=1.02, prof=1.10)
    rc = bench.main(["--repeats", "1", "--inprocess-profiler", "--inprocess-runs", "4", "--inprocess-steps", "600",
                     "--toggle-blocks", "10", "--work", str(tmp_path), "--json", str(tmp_path / "b.json")])
    out = capsys.readouterr().out
    assert rc == 0 and len(cmds) == 8
    tools = ["profiler" if "--toggle-profiler" in c else "record" for c in cmds]
    assert tools == ["record", "profiler"] * 4  # interleaved: drift hits both
    p = cmds[1]
    assert "gputrace" not in p and p[1].endswith("train_step.py")  # the profiler runs are not under record
    assert p[2:] == ["--steps", "600", "--quiet", "--toggle-blocks", "10", "--toggle-profiler"]
    assert cmds[0][1:4] == ["-m", "gputrace", "record"]
    d = json.loads((tmp_path / "b.json").read_text())
    ip = d["inprocess"]
    assert len(ip["runs"]) == 4 and len(ip["profiler"]["runs"]) == 4 and "within_3pct" in ip
    assert "within_3pct" not in ip["profiler"] and "mean_within_3pct" not in ip["profiler"]["pooled"]
    assert abs(ip["profiler"]["pooled"]["mean_ratio"] - 1.10) < 0.01
    c = ip["record_vs_profiler"]
    want = 1.02 / 1.10
    assert abs(c["ratio"] - want) < 0.01 and c["ci95"][0] <= want <= c["ci95"][1] < 1.0
    assert c["record_below_profiler"] and c["resolved"] and c["runs"] == [4, 4]
    assert abs(c["record"] - ip["pooled"]["mean_ratio"]) < 1e-12
    assert "in-process torch.profiler cost (4 runs" in out
    assert "record < profiler: resolved" in out
    bench_line = [ln for ln in out.splitlines() if ln.startswith("BENCH ")][-1]
    assert out.rstrip().splitlines()[-1] == bench_line
    f = dict(kv.split("=", 1) for kv in bench_line.split()[1:])
    assert f["prof_runs"] == "4" and abs(float(f["prof_mean_x"]) - 1.10) < 0.01
    assert abs(float(f["rec_vs_prof"]) - want) < 0.01 and f["rec_below_prof"] == "1"
    assert f["rec_below_prof_resolved"] == "1" and float(f["rec_vs_prof_ci"].split("-")[1]) < 1.0
    for key in ("record_x", "profiler_x", "inprocess_x", "inprocess_mean_x", "inprocess_pooled_ci"):
        assert key in f  # the existing fields stay
    (tmp_path / "bench.log").write_text(out)
    assert _load("summary").lines(tmp_path)[1] == bench_line


def test_inprocess_profiler_not_resolved_when_the_tools_cost_the_same(tmp_path, monkeypatch, capsys):
    bench = _load("bench_record_overhead")
    _fake_runs(bench, monkeypatch, [1.0])
    _fake_toggles(bench, monkeypatch, rec=1.05, prof=1.05)
    bench.main(["--repeats", "1", "--inprocess-profiler", "--inprocess-runs", "3", "--work", str(tmp_path),
                "--json", str(tmp_path / "b.json")])
    out = capsys.readouterr().out
    c = json.loads((tmp_path / "b.json").read_text())["inprocess"]["record_vs_profiler"]
    assert c["ci95"][0] <= 1.0 <= c["ci95"][1] and not c["resolved"]
    assert "record < profiler: NOT resolved" in out and " rec_below_prof_resolved=0" in out


def test_inprocess_profiler_budget_counts_rounds_and_a_failed_profiler_run_is_left_out(tmp_path, monkeypatch,
                                                                                        capsys):
    bench = _load("bench_record_overhead")
    _fake_runs(bench, monkeypatch, [1.0] * 2, per_run_s=10.0)  # one repeat: 40 s
    clock = bench.time
    cmds = _fake_toggles(bench, monkeypatch, fail_profiler_run=1)
    fake = bench.run_toggle

    def timed(cmd, timeout):
        clock.t += 20.0  # each in-process run 20 s: a round of two 40 s
        return fake(cmd, timeout)

    monkeypatch.setattr(bench, "run_toggle", timed)
    rc = bench.main(["--repeats", "1", "--inprocess-profiler", "--inprocess-runs", "5", "--budget-s", "170",
                     "--work", str(tmp_path), "--json", str(tmp_path / "b.json")])
    out = capsys.readouterr().out
    assert rc == 1 and "inprocess_profiler run 1 FAILED: TOGGLE refused" in out
    assert "budget of 170 s: stopping after 3 in-process rounds (record, profiler)" in out  # 40 + 3 x 40 = 160 s
    assert len(cmds) == 6
    d = json.loads((tmp_path / "b.json").read_text())
    assert d["failed_runs"] == ["inprocess_profiler"]
    ip = d["inprocess"]
    assert [r["run"] for r in ip["runs"]] == [0, 1, 2] and [r["run"] for r in ip["profiler"]["runs"]] == [0, 2]
    assert ip["record_vs_profiler"]["runs"] == [3, 2]


def test_inprocess_without_the_profiler_flag_runs_no_profiler(tmp_path, monkeypatch, capsys):
    bench = _load("bench_record_overhead")
    _fake_runs(bench, monkeypatch, [1.0])
    cmds = _fake_toggles(bench, monkeypatch)
    bench.main(["--repeats", "1", "--inprocess", "--inprocess-runs", "2", "--work", str(tmp_path), "--json",
                str(tmp_path / "b.json")])
    out = capsys.readouterr().out
    assert len(cmds) == 2 and not any("--toggle-profiler" in c for c in cmds)
    assert "profiler" not in json.loads((tmp_path / "b.json").read_text())["inprocess"]
    assert " prof_x=" not in out and "torch.profiler cost" not in out

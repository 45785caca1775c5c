"""The experiment runner with a synthetic runner (no prover): interleaving, manifest,
one-at-a-time and factorial attribution of an injected regression."""

import json
import math

import pytest

from gputrace.analysis.ab.abtest import analyse
from gputrace.analysis.ab.design import factorial, one_at_a_time, opt_sets
from gputrace.analysis.ab.experiment import MANIFEST, Experiment, ExperimentError, run_experiment
from gputrace.testing.synth import switch_run
from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl

# The seed's story in miniature: B1 adds pinning time, A2 slows synthesis, D4 speeds msm_a
# alone but loses it (and more) when B1 is on.
EFFECTS = {"a2": {"synthesis": 0.15}, "d4": {"msm_a": -0.3}, "b1*d4": {"msm_a": 0.8}}
EXTRA = {"b1": ("pin", 1.5)}


def synthetic_runner():
    counter = {"n": 0}

    def run_variant(switches, path):
        counter["n"] += 1
        write_otlp_jsonl(switch_run(switches, 10_000 + counter["n"], effects=EFFECTS, extra=EXTRA), path)

    return run_variant, counter


def test_runner_interleaves_and_keeps_every_trace(tmp_path):
    run_variant, counter = synthetic_runner()
    order = []
    vs = opt_sets(["none", "all"], ("a2", "b1", "d4"))
    exp = run_experiment(run_variant, vs, runs=3, out_dir=tmp_path / "x", warmup=1,
                         progress=lambda i, n, v, w: order.append((v.name, w)))
    assert order == [("none", True), ("all", True)] + [("none", False), ("all", False)] * 3
    assert counter["n"] == 8
    doc = json.loads((tmp_path / "x" / MANIFEST).read_text())
    assert len(doc["runs"]) == 8 and doc["runs"][0]["path"] == "none/warmup-000.jsonl"
    again = Experiment.load(tmp_path / "x")
    assert [p.name for p in again.traces(again.baseline)] == ["run-000.jsonl", "run-001.jsonl", "run-002.jsonl"]
    m = again.measures()
    assert [len(v) for v in m.values()] == [3, 3]
    with pytest.raises(ValueError, match="already holds an experiment"):
        run_experiment(run_variant, vs, runs=1, out_dir=tmp_path / "x")


def test_failing_run_is_recorded(tmp_path):
    def bad(switches, path):
        raise RuntimeError("GPU fell off the bus")

    with pytest.raises(ExperimentError, match="variant none, round 0.*GPU fell off the bus"):
        run_experiment(bad, opt_sets(["none", "all"], ("b1",)), runs=1, out_dir=tmp_path / "y")
    exp = Experiment.load(tmp_path / "y")
    assert exp.records[0].error == "RuntimeError: GPU fell off the bus"


def test_one_at_a_time_names_the_culprits(tmp_path):
    u = ("a2", "b1", "d4")
    run_variant, _ = synthetic_runner()
    exp = run_experiment(run_variant, one_at_a_time(u), runs=6, out_dir=tmp_path / "oat", design="one-at-a-time", switches=u)
    # 6 runs per variant cannot call a row across ~20 rows (smallest p 0.002 > 0.05/20); this
    # test is about naming switches and interactions, so each row is judged alone.
    rep = analyse(exp.measures(), exp.design, exp.switches, correction="none", equivalence=0.0)
    assert rep.comparisons[0][0] == "all vs none"
    assert rep.conclusions[0].startswith("all vs none: (prove) +") and "slower" in rep.conclusions[0]
    by = {f.switch: f for f in rep.switch_findings}
    assert by["b1"].hurts and "prove/pin" in by["b1"].text
    assert by["a2"].hurts and "prove/synthesis" in by["a2"].text
    # d4 alone is faster (msm_a -30 %) but with b1 on it is slower: flagged as an interaction.
    assert by["d4"].interaction and "interaction" in by["d4"].text
    assert "prove/msm_a" in by["d4"].text
    d = rep.to_dict()
    assert d["switch_findings"][0]["switch"] == "a2" and d["comparisons"][0]["label"] == "all vs none"


def test_factorial_names_the_interaction(tmp_path):
    u = ("a2", "b1", "d4")
    run_variant, _ = synthetic_runner()
    exp = run_experiment(run_variant, factorial(u, "full"), runs=3, out_dir=tmp_path / "fac", design="factorial", switches=u, shuffle=True, seed=3)
    rep = analyse(exp.measures(), exp.design, exp.switches)
    fr = rep.factorial
    terms = {c.term for c in fr.culprits}
    assert {"b1", "a2", "b1*d4"} <= terms
    inter = [c for c in fr.culprits if c.term == "b1*d4"][0]
    assert inter.phases[0].path == "prove/msm_a"
    assert any("the interaction b1 x d4 makes the run" in line for line in rep.conclusions)
    # d4's main effect on msm_a averages x0.7 (b1 off) and x0.7 x 1.8 (b1 on): 0.7 sqrt(1.8) - 1 = -6.1 %; its effect
    # with b1 off is the main effect less half the interaction (x_b1 = -1), log 0.7.
    msm_a = {e.term: e for e in fr.for_key("prove/msm_a")}
    assert msm_a["d4"].significant and abs(msm_a["d4"].rel - (0.7 * math.sqrt(1.8) - 1)) < 0.03
    assert abs(msm_a["d4"].estimate - msm_a["b1*d4"].estimate / 2 - math.log(0.7)) < 0.05
    # End to end that average is a wash (msm_a is a small share of the run), so d4 is no helper there.
    assert not any(h.term == "d4" for h in fr.helpers)
    # The conclusions say once that a main effect is an average: on the first main effect's line.
    noted = [line for line in rep.conclusions if "on average over the other switches' settings" in line]
    assert len(noted) == 1 and noted[0].startswith("b1 makes the run +")


def test_prime_runs_come_first_and_stay_out_of_the_analysis(tmp_path):
    seen = []

    def runner(switches, path):
        seen.append((sorted(switches), path.name))
        write_otlp_jsonl(switch_run(switches, 20_000 + len(seen), effects=EFFECTS, extra=EXTRA), path)

    variants = opt_sets(["none", "all"], ("a2", "b1", "d4"))
    run_experiment(runner, variants, 2, tmp_path / "x", prime=2)
    assert seen[:2] == [([], "prime-000.jsonl"), ([], "prime-001.jsonl")] and len(seen) == 6
    back = Experiment.load(tmp_path / "x")
    assert [r.round for r in back.records[:2]] == [-1, -2] and all(r.warmup for r in back.records[:2])
    assert [len(v) for v in back.measures().values()] == [2, 2]
    with pytest.raises(ValueError, match="prime"):
        run_experiment(runner, variants, 1, tmp_path / "y", prime=-1)


def test_deadline_stops_the_schedule_and_keeps_an_analysable_experiment(tmp_path, monkeypatch):
    """With a deadline, no run starts that would end after it (predicted from earlier runs); the manifest says
    the schedule stopped there, and the runs made are analysed (here: two full rounds of four)."""
    import gputrace.analysis.ab.experiment as ex

    clock = {"t": 0.0}
    monkeypatch.setattr(ex.time, "perf_counter", lambda: clock["t"])

    def runner(switches, path):
        clock["t"] += 10.0  # every run takes 10 s of the fake clock
        write_otlp_jsonl(switch_run(switches, 30_000 + int(clock["t"]), effects=EFFECTS, extra=EXTRA), path)

    variants = factorial(("a2", "b1"), "full")
    exp = run_experiment(runner, variants, 5, tmp_path / "x", deadline_s=85.0)
    assert exp.stopped == "deadline" and len(exp.records) == 8  # the 9th would end at 90 s
    back = Experiment.load(tmp_path / "x")
    assert back.stopped == "deadline" and len(back.records) == 8
    rep = analyse(back.measures(), "factorial", ("a2", "b1"))
    assert rep.factorial is not None and rep.factorial.df > 0
    assert run_experiment(runner, variants, 1, tmp_path / "y", deadline_s=1000.0).stopped is None

"""examples/seed_story/replicates.py: each complete round of a factorial experiment fitted alone; an injected
effect is found in the right phase in every round, a null switch in none, and a round cut short is left out."""

import json
import subprocess
import sys
from pathlib import Path

from gputrace.analysis.ab.design import factorial
from gputrace.analysis.ab.experiment import run_experiment
from gputrace.testing.synth import switch_run
from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "seed_story" / "replicates.py"
EFFECTS = {"slow": {"msm_a": 1.5}}  # +150 % on msm_a: about +10 % of the run
EXTRA = {"pin": ("pin", 0.8)}  # a new phase worth a good share of the run


def test_rounds_as_repeated_experiments(tmp_path):
    n = {"k": 0}

    def runner(switches, path):
        n["k"] += 1
        write_otlp_jsonl(switch_run(switches, 40_000 + n["k"], effects=EFFECTS, extra=EXTRA), path)

    u = ("pin", "slow", "null", "other")
    variants = factorial(u, "full")
    exp = run_experiment(runner, variants, 3, tmp_path / "x", design="factorial", switches=u)
    exp.records = exp.records[:-2]  # the last round cut short (as a --deadline does)
    exp.save()
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "x"), "--expect", "pin=pin", "--expect",
                        "slow=msm_a", "--null", "null", "--json", str(tmp_path / "r.json")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = {t["switch"]: t for t in json.loads((tmp_path / "r.json").read_text())["switches"]}
    assert json.loads((tmp_path / "r.json").read_text())["rounds"] == 2
    assert doc["pin"]["found"] == doc["pin"]["rounds"] == 2
    assert doc["slow"]["found"] == 2
    assert doc["null"]["called"] == 0 and doc["other"]["called"] == 0
    assert "| null | control (must not be called) | 0 / 2 |" in r.stdout
    # Each round has one all-on and one no-switch run; with no interaction of three switches the round's sum of
    # terms accounts for its measured all vs none, and so does the pooled fit.
    dec = json.loads((tmp_path / "r.json").read_text())["decomposition"]
    assert dec["rounds"] == 2 and dec["accounts"] == 2 and [d["round"] for d in dec["per_round"]] == [0, 1]
    assert all(d["low"] <= d["measured"] <= d["high"] for d in dec["per_round"])
    assert dec["pooled"]["verdict"] == "accounts" and {dec["pooled"]["n_all"], dec["pooled"]["n_none"]} <= {2, 3}
    assert ("decomposition accounts for the measured total in 2 of 2 rounds; pooled: all vs none, (prove): measured +"
            in r.stdout)


def test_a_three_way_interaction_is_left_out_of_the_decomposition(tmp_path):
    """msm_a five times as long only when a, b and c are all on: the model of main effects and two-way interactions
    cannot carry it, so the pooled decomposition does not account for the measured all vs none."""
    n = {"k": 0}

    def runner(switches, path):
        n["k"] += 1
        write_otlp_jsonl(switch_run(switches, 50_000 + n["k"], effects={"a*b*c": {"msm_a": 4.0}}), path)

    u = ("a", "b", "c")
    run_experiment(runner, factorial(u, "full"), 6, tmp_path / "x", design="factorial", switches=u)
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "x"), "--json", str(tmp_path / "r.json")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    dec = json.loads((tmp_path / "r.json").read_text())["decomposition"]
    assert dec["pooled"]["verdict"] == "does not" and dec["pooled"]["remainder_low"] > 0
    assert dec["rounds"] == len(dec["per_round"]) == 6  # one run per variant and round: 8 runs, 7 parameters, 1 df
    assert 0 <= dec["accounts"] <= 6 and dec["accounts"] == sum(d["verdict"] == "accounts" for d in dec["per_round"])
    assert f"decomposition accounts for the measured total in {dec['accounts']} of 6 rounds; pooled:" in r.stdout
    assert "does not account for the measured total; the interactions of three or more switches" in r.stdout


def test_bad_expect_is_refused(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--expect", "b1"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "SWITCH=PHASE" in r.stderr


def _load_replicates():
    import importlib.util

    spec = importlib.util.spec_from_file_location("seed_replicates", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class body runs
    spec.loader.exec_module(mod)
    return mod


def test_a_phase_counts_as_moved_on_its_gpu_evidence_not_on_launch_gaps():
    """A pageable key upload: ``load_bases``' host bracket shrinks while its copies and GPU busy time grow; the
    phase is found through that evidence. Launch gaps in ``b_g2`` (waiting elsewhere) do not count."""
    from gputrace.analysis.ab.effects import Effect, FactorialResult

    mod = _load_replicates()

    def eff(path, clock, ns, sig=True, term="pageable"):
        return Effect(path, None, clock, term, "log", 0.1, 0.05, 0.15, 0.1, 0.05, 0.15, ns, ns / 2, ns * 2, 1e-9, sig)

    effects = [eff("(prove)", "host", 170e6), eff("prove/load_bases", "host", -188e6),
               eff("prove/b_g2", "launch gaps", 90e6), eff("prove/msm_l", "kernels", 5e6, sig=False)]
    fr = FactorialResult(("pageable",), ["pageable"], "main effects", 10, 0.95, effects, "(prove)")
    assert mod._phase_hits(fr, "pageable", 1.0) == set()
    fr.effects.append(eff("prove/load_bases", "copy HtoD PAGEABLE", 328e6))
    assert mod._phase_hits(fr, "pageable", 1.0) == {"load_bases"}
    fr.effects[-1] = eff("prove/load_bases", "gpu busy", 282e6)
    assert mod._phase_hits(fr, "pageable", 1.0) == {"load_bases"}
    assert mod._phase_hits(fr, "pageable", -1.0) == {"load_bases"}  # the host bracket moved the other way
    fr.effects.append(eff("prove/msm_l", "kernels", 9e6, term="windows"))
    assert mod._phase_hits(fr, "windows", 1.0) == {"msm_l"}

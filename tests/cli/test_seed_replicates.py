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


def test_bad_expect_is_refused(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--expect", "b1"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "SWITCH=PHASE" in r.stderr

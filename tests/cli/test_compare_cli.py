"""`gputrace compare` in a subprocess: verdicts, JSON, the regression gate, environment
warnings and "N too small"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputrace.testing.synth import synthetic_run
from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl

ROOT = Path(__file__).resolve().parents[2]


def gputrace(*args):
    return subprocess.run([sys.executable, "-m", "gputrace", *map(str, args)], capture_output=True, text=True, cwd=ROOT, timeout=120)


def _write(d: Path, name: str, seed: int, slow=None, commit="c0", b1=False):
    res = {"gputrace.run_id": name, "service.name": "t", "gputrace.git.commit": commit, "gputrace.config.b1": b1}
    p = d / f"{name}.jsonl"
    write_otlp_jsonl(synthetic_run(seed, circuits=2, devices=2, slow=slow, resource=res), p)
    return p


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    d = tmp_path_factory.mktemp("cmp")
    base = [_write(d, f"base{i}", i) for i in range(8)]
    same = [_write(d, f"same{i}", 100 + i) for i in range(8)]
    slow = [_write(d, f"slow{i}", 200 + i, slow={"msm_h": 0.3}, b1=True) for i in range(8)]
    other = [_write(d, f"other{i}", 300 + i, commit="c1") for i in range(8)]
    return base, same, slow, other


@pytest.mark.slow
def test_injected_regression_trips_gate(sets):
    base, _, slow, _ = sets
    r = gputrace("compare", *base, "--vs", *slow, "--fail-on-regression", "5%", "--top", "100")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "REGRESSION prove/msm_h (all, host)" in r.stdout
    assert "REGRESSION prove/synthesis" not in r.stdout
    r = gputrace("compare", *base, "--vs", *slow, "--only-changed")
    assert "prove/msm_h" in r.stdout and "prove/synthesis " not in r.stdout and "rows hidden" in r.stdout
    assert "configuration: b1: False -> True" in r.stdout
    assert "WARNING" not in r.stderr


@pytest.mark.slow
def test_noise_only_passes_gate_and_json(sets):
    base, same, _, _ = sets
    r = gputrace("compare", *base, "--vs", *same, "--fail-on-regression", "5%", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads(r.stdout)
    assert d["regressions"] == [] and d["environment"]["ok"]
    assert len(d["base_runs"]) == 8 and d["confidence"] == 0.95
    rows = {(x["path"], x["device"], x["clock"]): x for x in d["rows"]}
    row = rows[("prove/msm_h", None, "host")]
    assert row["verdict"] in ("inconclusive", "unchanged", "slower", "faster")
    assert len(row["base_values"]) == 8 and row["rel_low"] <= row["rel"] <= row["rel_high"]
    assert ("prove/msm_h", None, "device") in rows and ("(run)", None, "host") in rows


@pytest.mark.slow
def test_environment_difference_warns_loudly(sets):
    base, _, _, other = sets
    r = gputrace("compare", *base, "--vs", *other)
    assert r.returncode == 0
    assert "WARNING: the runs' environments differ" in r.stdout
    assert "gputrace.git.commit is 'c0' in the baseline but 'c1' in the variant" in r.stderr
    r = gputrace("compare", *base, "--vs", *other, "--ignore-env", "gputrace.git.commit")
    assert "WARNING" not in r.stdout + r.stderr


@pytest.mark.slow
def test_too_few_runs_and_warmup(sets):
    base, _, slow, _ = sets
    r = gputrace("compare", *base[:3], "--vs", *slow[:3], "--fail-on-regression", "5%")
    assert r.returncode == 4  # the gate cannot decide: its own exit code, and how many runs would
    assert "N too small to decide" in r.stdout and "too few runs" in r.stdout
    assert "UNDECIDED" in r.stdout and "runs per side would" in r.stdout
    r = gputrace("compare", *base[:3], "--vs", *slow[:3], "--fail-on-regression", "5%", "--allow-undecided", "--json")
    assert r.returncode == 0
    g = json.loads(r.stdout)["gate"]
    assert g["state"] == "undecided" and g["runs_needed_per_side"] >= 4
    r = gputrace("compare", *base, "--vs", *slow, "--warmup", "1", "--json")
    d = json.loads(r.stdout)
    assert d["warmup_dropped"] == ["base0.jsonl", "slow0.jsonl"] and len(d["variant_runs"]) == 7
    r = gputrace("compare", *base, "--vs", *slow, "--warmup", "8")
    assert r.returncode == 1 and "discard all" in r.stderr


def test_bad_arguments(sets, tmp_path):
    base, _, slow, _ = sets
    r = gputrace("compare", *base, "--vs", *slow, "--confidence", "1.5")
    assert r.returncode == 2 and "confidence" in r.stderr
    r = gputrace("compare", *base, "--vs", tmp_path / "nope.jsonl")
    assert r.returncode == 1 and "nope.jsonl" in r.stderr


@pytest.mark.slow
def test_ab_analyze_existing_folder(tmp_path):
    """`gputrace ab --analyze` on an experiment folder written by a synthetic runner."""
    from gputrace.analysis.ab.design import one_at_a_time
    from gputrace.analysis.ab.experiment import run_experiment
    from gputrace.testing.synth import switch_run

    u = ("a2", "b1")
    n = {"k": 0}

    def run_variant(switches, path):
        n["k"] += 1
        write_otlp_jsonl(switch_run(switches, n["k"], effects={"a2": {"synthesis": 0.2}}, extra={"b1": ("pin", 1.0)}), path)

    run_experiment(run_variant, one_at_a_time(u), runs=5, out_dir=tmp_path / "exp", design="one-at-a-time", switches=u, warmup=1)
    r = gputrace("ab", "--analyze", tmp_path / "exp", "--fail-on-regression", "5%")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "all vs none: (prove) +" in r.stdout and "One switch at a time" in r.stdout
    assert "a2: with all others on it changes the run" in r.stdout and "prove/synthesis" in r.stdout
    assert "REGRESSION (prove)" in r.stdout
    r = gputrace("ab", "--analyze", tmp_path / "exp", "--json")
    assert r.returncode == 0
    d = json.loads(r.stdout)
    assert d["design"] == "one-at-a-time" and {f["switch"] for f in d["switch_findings"]} == {"a2", "b1"}
    r = gputrace("ab", "--analyze", tmp_path / "missing")
    assert r.returncode == 1 and "manifest.json" in r.stderr


@pytest.mark.slow
def test_ab_runs_the_prover(tmp_path):
    """A tiny real experiment: the CPU prover, two sets, two runs each after one warm-up."""
    r = gputrace("ab", "--opt-sets", "none", "b1", "--runs", "2", "--constraints", "2^6", "--out", tmp_path / "ab")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "b1 vs none: (prove)" in r.stdout and "prove/pin" in r.stdout
    man = json.loads((tmp_path / "ab" / "manifest.json").read_text())
    assert [x["variant"] for x in man["runs"]] == ["none", "b1"] * 3
    assert all((tmp_path / "ab" / x["path"]).stat().st_size > 0 for x in man["runs"])
    r = gputrace("ab", "--switches", "A1,ZZ", "--out", tmp_path / "ab2")
    assert r.returncode == 1 and "unknown switch 'zz'" in r.stderr


@pytest.mark.slow
def test_paired_flag(sets):
    base, _, slow, _ = sets
    # 8 paired rounds: smallest signed-rank p 0.008 > 0.05 / 42, so each row is judged alone here.
    r = gputrace("compare", *base, "--vs", *slow, "--paired", "--correction", "none", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["paired_rounds"] == 8
    rows = {(x["path"], x["device"], x["clock"]): x for x in d["rows"]}
    assert rows[("prove/msm_h", None, "host")]["verdict"] == "slower"
    r = gputrace("compare", *base, "--vs", *slow[:5], "--paired")
    assert r.returncode == 1 and "--paired needs as many" in r.stderr


@pytest.mark.slow
def test_lenient_says_what_each_file_skipped(sets, tmp_path):
    """`compare --lenient` names what the reader skipped and in which file, as `report --lenient`
    does; the damaged line's text (an escape sequence here) never reaches the terminal raw."""
    base, same, _, _ = sets
    bad = tmp_path / "base-damaged.jsonl"
    bad.write_bytes(Path(base[0]).read_bytes() + b"{not json \x1b[31mred\n")
    r = gputrace("compare", bad, *base[1:], "--vs", *same, "--lenient", "--json")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "--lenient skipped" in ln]
    assert len(lines) == 1 and lines[0].startswith("gputrace compare: base-damaged.jsonl: --lenient skipped 1 line")
    assert "\x1b" not in r.stderr
    assert len(json.loads(r.stdout)["base_runs"]) == 8  # the damaged file's run is kept
    r = gputrace("compare", bad, "--vs", *same)  # without --lenient the damaged line is an error
    assert r.returncode == 1 and "base-damaged.jsonl" in r.stderr

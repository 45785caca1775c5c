"""``gputrace prove`` / ``gputrace verify`` in a subprocess."""

import json
import subprocess
import sys

import pytest


def _gt(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gputrace", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=240)


@pytest.fixture(scope="module")
def proved(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli")
    r = _gt("prove", "--challenges", "1", "--depth", "2", "--batch", "2", "--devices", "1", "--backend", "auto",
            "--opt", "all", "--out", str(out), "--key-dir", str(tmp_path_factory.getbasetemp() / "prover-keys"),
            "--trace", str(out / "run.jsonl"), "--quiet")
    return out, r


def test_prove_writes_verified_proofs_trace_and_table(proved):
    out, r = proved
    assert r.returncode == 0, r.stderr
    assert "verified 2/2" in r.stdout
    for phase in ("synthesis", "msm_h", "b_g2", "intt_abc", "pin"):
        assert phase in r.stdout
    assert "CPU thread:cpu-worker-0" in r.stdout  # the lane names of report and the TUI (analysis.lanes)
    assert "cpu:0" not in r.stdout
    try:
        import cupy  # noqa: F401
    except ImportError:
        assert "using the CPU backend" in r.stderr  # auto fell back with a one-line notice
    assert (out / "vk.json").exists() and (out / "proof-0.json").exists() and (out / "proof-1.json").exists()
    lines = (out / "run.jsonl").read_text().splitlines()
    assert lines and all(json.loads(line)["resourceSpans"] for line in lines)


def test_verify_ok_and_tampered(proved, tmp_path):
    out, _ = proved
    r = _gt("verify", "--vk", str(out / "vk.json"), str(out / "proof-0.json"), str(out / "proof-1.json"))
    assert r.returncode == 0 and "2/2 proofs verified" in r.stdout
    doc = json.loads((out / "proof-0.json").read_text())
    doc["public_inputs"][0] = str(int(doc["public_inputs"][0]) + 1)
    bad = tmp_path / "proof-bad.json"
    bad.write_text(json.dumps(doc))
    r = _gt("verify", "--vk", str(out / "vk.json"), str(bad))
    assert r.returncode == 1 and "FAILED" in r.stdout and "pairing check failed" in r.stdout
    doc["c"] = "zz"
    bad.write_text(json.dumps(doc))
    r = _gt("verify", "--vk", str(out / "vk.json"), str(bad))
    assert r.returncode == 1 and str(bad) in r.stdout and "'c'" in r.stdout


@pytest.mark.slow
def test_bad_arguments(tmp_path):
    r = _gt("prove", "--opt", "a9", "--out", str(tmp_path))
    assert r.returncode == 2 and "unknown switch 'a9'" in r.stderr
    r = _gt("prove", "--constraints", "2^x", "--out", str(tmp_path))
    assert r.returncode == 2 and "--constraints" in r.stderr
    r = _gt("prove", "--constraints", "2^10", "--depth", "3", "--out", str(tmp_path))
    assert r.returncode == 2 and "either --constraints" in r.stderr
    r = _gt("prove", "--synthesis-workers", "0", "--out", str(tmp_path))
    assert r.returncode == 2 and "--synthesis-workers must be >= 1, got 0" in r.stderr
    r = _gt("verify", "--vk", str(tmp_path / "missing.json"), str(tmp_path / "p.json"))
    assert r.returncode == 2 and "missing.json" in r.stderr
    r = _gt("prove", "--challenges", "1", "--depth", "2", "--out", str(tmp_path), "--trace",
            str(tmp_path / "no" / "such" / "dir" / "run.jsonl"), "--backend", "cpu")
    assert r.returncode == 2 and "run.jsonl" in r.stderr and "Traceback" not in r.stderr


def test_cuda_backend_without_gpu_is_a_clear_error(tmp_path):
    try:
        import cupy  # noqa: F401

        pytest.skip("CuPy present")
    except ImportError:
        pass
    r = _gt("prove", "--challenges", "1", "--depth", "2", "--backend", "cuda", "--out", str(tmp_path))
    assert r.returncode == 2 and "--backend cuda: CUDA backend unavailable" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_synthesis_workers_split_one_circuit(tmp_path):
    r = _gt("prove", "--challenges", "3", "--depth", "2", "--batch", "1", "--backend", "cpu", "--synthesis-workers",
            "3", "--out", str(tmp_path), "--trace", str(tmp_path / "run.jsonl"), "--quiet")
    assert r.returncode == 0, r.stderr
    parts = []
    for line in (tmp_path / "run.jsonl").read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    if sp["name"] == "synthesis":
                        parts += [a["value"] for a in sp["attributes"] if a["key"] == "parts"]
    assert parts == [{"intValue": "3"}]


def test_impossible_sizes_are_errors():
    """2^40 constraints used to prove a 7,352-constraint circuit without a word."""
    from gputrace.cli import build_parser
    from gputrace.commands.prove import options_from_args

    parse = build_parser().parse_args
    with pytest.raises(ValueError, match=r"at most 2\^32.*'2\^40'"):
        options_from_args(parse(["prove", "--constraints", "2^40"]))
    assert options_from_args(parse(["prove", "--constraints", "2^32"])).constraints == 1 << 32


@pytest.mark.slow
def test_placement_flags_reach_the_recorded_config(tmp_path):
    r = _gt("prove", "--challenges", "1", "--depth", "2", "--backend", "cpu", "--synthesis", "host", "--b-g2", "host",
            "--out", str(tmp_path), "--trace", str(tmp_path / "run.jsonl"), "--quiet")
    assert r.returncode == 0, r.stderr
    cfg = {}
    for line in (tmp_path / "run.jsonl").read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            cfg.update({a["key"]: a["value"] for a in rs["resource"]["attributes"] if a["key"].startswith("gputrace.config.")})
    assert cfg["gputrace.config.synthesis"] == {"stringValue": "host"}
    assert cfg["gputrace.config.b_g2"] == {"stringValue": "host"}
    r = _gt("prove", "--challenges", "1", "--depth", "2", "--backend", "cpu", "--synthesis", "device",
            "--out", str(tmp_path / "dev"), "--quiet")
    assert r.returncode != 0 and "synthesis='device'" in r.stderr and "Traceback" not in r.stderr
    r = _gt("ab", "--help")
    assert "--synthesis" in r.stdout and "--b-g2" in r.stdout


@pytest.mark.slow
def test_prove_and_ab_refuse_impossible_counts(tmp_path):
    """Exit at once with the flag named, instead of proving 100000 circuits (or lanes) for hours."""
    r = _gt("prove", "--constraints", "2^6", "--backend", "cpu", "--batch", "100000", "--out", str(tmp_path / "p"))
    assert r.returncode == 2 and "error: --batch: circuits per device must be between 1 and 1024, got 100000" in r.stderr
    r = _gt("prove", "--constraints", "2^6", "--backend", "cpu", "--devices", "100000", "--out", str(tmp_path / "p"))
    assert r.returncode == 2 and "error: --devices: the CPU backend runs at most" in r.stderr
    assert not (tmp_path / "p").exists()
    r = _gt("ab", "--opt-sets", "none", "b1", "--devices", "100000", "--out", str(tmp_path / "ab"))
    assert r.returncode == 1 and "gputrace ab: --devices: the CPU backend runs at most" in r.stderr
    r = _gt("ab", "--opt-sets", "none", "b1", "--batch", "0", "--out", str(tmp_path / "ab"))
    assert r.returncode == 1 and "gputrace ab: --batch: circuits per device must be between 1" in r.stderr
    assert not (tmp_path / "ab").exists()

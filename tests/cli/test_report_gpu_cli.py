"""`gputrace report` on a trace with GPU activity (tests/data/sample_kernels.jsonl, written by
gputrace.testing.activity_synth.write_activity_run(kernels=60, gpus=2, kernels_per_phase=6, seed=1)):
the GPU activity tables, and the same figures in --json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "data" / "sample_kernels.jsonl"


def gputrace(*args):
    return subprocess.run([sys.executable, "-m", "gputrace", *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def test_the_committed_sample_is_what_the_generator_writes(tmp_path):
    from gputrace.testing.activity_synth import write_activity_run

    out = tmp_path / "s.jsonl"
    write_activity_run(out, kernels=60, gpus=2, kernels_per_phase=6, seed=1)
    assert out.read_bytes() == SAMPLE.read_bytes()


def test_report_json_has_gpu_truth():
    r = gputrace("report", SAMPLE, "--json")
    assert r.returncode == 0, r.stderr
    g = json.loads(r.stdout)["gpu_activity"]
    assert g["activity_spans"] == 60 + 4 + 10 + 1  # kernels, copies, memsets, the sync
    devs = {d["device"]: d for d in g["devices"]}
    assert set(devs) == {0, 1} and all(d["basis"] == "kernels" and d["kernels"] == 30 for d in devs.values())
    assert all(d["busy_ns"] + d["idle_ns"] == d["window_ns"] for d in devs.values())
    gaps = {(r["phase"], r["device"]): r for r in g["launch_gaps"]}
    ntt = gaps[("ntt", 0)]
    assert ntt["bracket"] == "cuda events" and ntt["kernels"] == 6 and ntt["gap_ns"] > 0 and ntt["busy_ns"] > 0
    flagged = [c for c in g["copies"] if c["flag"]]
    assert len(flagged) == 2 and all(c["src_kind"] == "PAGEABLE" for c in flagged)
    assert g["sync_waits"][0]["type"] == "stream" and g["sync_waits"][0]["wait_ns"] == 50_000


def test_report_tables_show_launch_gaps_and_pageable_copies():
    r = gputrace("report", SAMPLE)
    assert r.returncode == 0, r.stderr
    for text in ("GPU busy", "Launch gaps", "cuda events", "Copies by memory kind", "PAGEABLE although pinning was",
                 "Sync waits", "Kernels per phase", "ntt_radix"):
        assert text in r.stdout, text


def test_report_says_when_only_brackets_exist():
    r = gputrace("report", ROOT / "tests" / "data" / "sample_2gpu.jsonl")
    assert r.returncode == 0, r.stderr
    assert "brackets" in r.stdout and "event brackets only" in r.stdout

"""benchmarks/real_programs/bench_attach_cost.py without a GPU: the ATTACH lines read back (a line as the H200
printed it), per-pair deltas, pairs from different machine states left out, the median with its interval, the
attached fraction of a step, and the pair order with a failing process."""

from __future__ import annotations

import importlib.util
import math
import statistics
import sys
from pathlib import Path

PROGS = Path(__file__).resolve().parents[2] / "benchmarks" / "real_programs"


def _load():
    """The script as it runs (``python bench_attach_cost.py``: its folder first on sys.path, for ``_toggle``)."""
    sys.path.insert(0, str(PROGS))
    try:
        spec = importlib.util.spec_from_file_location("bench_attach_cost", PROGS / "bench_attach_cost.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(PROGS))
    return mod


B = _load()

# As attach_cost.py printed them on the H200 (benchmarks/real_programs/h200-2026-12-01-c/5-*.log).
PLAIN = ("ATTACH mode=plain launch_ns=7774.8 nvtx_ns=469.3 repeats=5 calls=20000 launch_min_ns=7289.1 "
         "launch_max_ns=8256.5 chunk_p50_ns=8281.6 chunk_p90_ns=8970.6 chunk_max_ns=9993.7\n"
         "GC mode=plain gen0_n=0 gen0_ms=0.0\n")
RECORDED = ("ATTACH mode=on launch_ns=11925.2 nvtx_ns=440.0 repeats=5 calls=20000\n"
            "GC mode=on gen0_n=266\n"
            "ATTACH mode=paused launch_ns=8014.3 nvtx_ns=257.0 repeats=5 calls=20000\n")


def test_attach_lines_are_read_back():
    assert B.parse(PLAIN) == {"plain": {"launch": 7774.8, "nvtx": 469.3}}
    got = B.parse(RECORDED)
    assert got["paused"] == {"launch": 8014.3, "nvtx": 257.0} and got["on"]["launch"] == 11925.2


def test_a_pair_whose_processes_ran_in_different_states_is_flagged():
    p = B.pair_figures(B.parse(PLAIN), B.parse(RECORDED), 0.25)
    assert abs(p["d_launch_ns"] - 239.5) < 1e-9 and not p["same_state"]  # NVTX 469 vs 257 ns: two states
    q = B.pair_figures({"plain": {"launch": 7000.0, "nvtx": 260.0}}, {"paused": {"launch": 8800.0, "nvtx": 280.0}},
                       0.25)
    assert q["same_state"] and q["d_launch_ns"] == 1800.0 and q["d_nvtx_ns"] == 20.0


def _pairs(deltas, bad=()):
    out = []
    for i, d in enumerate(deltas):
        plain = {"plain": {"launch": 7000.0, "nvtx": 260.0}}
        nv = 520.0 if i in bad else 280.0
        out.append(B.pair_figures(plain, {"paused": {"launch": 7000.0 + d, "nvtx": nv}}, 0.25))
    return out


def test_the_median_delta_and_the_step_fraction_with_their_intervals():
    deltas = [1500.0, 1700.0, 1800.0, 1900.0, 2100.0, 1750.0, 1850.0, 9000.0]
    s = B.summarize(_pairs(deltas, bad={7}), launches=47, ranges=7, step_ms=7.2)
    assert (s["pairs"], s["kept"]) == (8, 7)  # the pair in another machine state is left out
    assert s["d_launch_ns"] == 1800.0 and s["d_nvtx_ns"] == 20.0
    lo, hi = s["d_launch_ci"]
    assert 1500.0 <= lo <= 1800.0 <= hi <= 2100.0
    assert abs(s["step_frac"] - (1800.0 * 47 + 20.0 * 7) / 7.2e6) < 1e-12
    assert s["step_frac_ci"][0] <= s["step_frac"] <= s["step_frac_ci"][1]
    text = B.line(s)
    assert text.startswith("ATTACHBENCH pairs=8 kept=7 d_launch_ns=1800.0") and " step_frac=0.0118 " in text
    none = B.summarize([])
    assert none["kept"] == 0 and math.isnan(none["d_launch_ns"]) and "step_frac" not in none


def test_pairs_alternate_their_order_and_a_failed_process_drops_its_pair(tmp_path):
    calls = []

    def runner(cmd, timeout):
        mode = "recorded" if "record" in cmd else "plain"
        calls.append(mode)
        if mode == "recorded" and len(calls) == 3:  # pair 1's first process (recorded) fails
            raise RuntimeError("exited 1")
        return B.parse(RECORDED if mode == "recorded" else PLAIN.replace("nvtx_ns=469.3", "nvtx_ns=250.0"))

    pairs, failed = B.run_pairs(3, 5, tmp_path, 0.25, 60, runner=runner)
    assert calls == ["plain", "recorded", "recorded", "plain", "plain", "recorded"]
    assert failed == ["pair 1 recorded"] and [p["pair"] for p in pairs] == [0, 2]
    assert all(p["same_state"] for p in pairs)


def test_every_pair_is_also_summarised_without_the_state_filter():
    deltas = [1500.0, 1700.0, 1800.0, 1900.0, 2100.0, 1750.0, 1850.0, 9000.0]
    s = B.summarize(_pairs(deltas, bad={6, 7}), launches=47, ranges=7, step_ms=7.2)
    assert s["kept"] == 6 and s["d_launch_ns"] == 1775.0
    assert s["d_launch_all_ns"] == statistics.median(deltas)
    assert s["d_launch_all_ci"][1] >= s["d_launch_all_ns"]
    assert s["step_frac_all"] > s["step_frac"]
    assert " | all pairs: d_launch_ns=1825.0 " in B.line(s)


def test_pin_reaches_both_commands(tmp_path):
    cmds = B.commands(3, tmp_path / "t.jsonl", pin=5)
    for c in cmds.values():
        assert c[-2:] == ["--pin", "5"]
    assert "--pin" not in B.commands(3, tmp_path / "t.jsonl")["plain"]

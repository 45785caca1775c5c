"""benchmarks/real_programs/_toggle.py (train_step.py --toggle-blocks) without torch: the on/off plan, pairs,
the per-pair ratio with its bootstrap interval on synthetic step times, and the TOGGLE line."""

from __future__ import annotations

import importlib.util
import math
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("_toggle", ROOT / "benchmarks" / "real_programs" / "_toggle.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


T = _load()


def _run(plan, k, true_ratio, seed=1, drift=0.0, noise=0.03):
    """Synthetic timed blocks: a base step of 10 ms that drifts by ``drift`` (relative) over the run, noise of
    ``noise`` (relative, normal), and the collection cost ``true_ratio`` on 'on' steps."""
    rng = random.Random(seed)
    n = len(plan) * k
    blocks = []
    for b, on in enumerate(plan):
        ts = []
        for s in range(k):
            base = 10.0 * (1 + drift * (b * k + s) / n)
            ts.append(base * (true_ratio if on else 1.0) * (1 + rng.gauss(0, noise)))
        blocks.append((on, ts))
    return blocks


def test_plan_has_one_on_and_one_off_block_per_pair_in_a_seeded_order():
    p = T.plan(40, seed=24)
    assert len(p) == 80
    pairs = [tuple(p[i:i + 2]) for i in range(0, 80, 2)]
    assert set(pairs) == {(True, False), (False, True)}  # both orders occur
    firsts = sum(1 for a, _ in pairs if a)
    assert 10 <= firsts <= 30  # randomised, not alternating or fixed
    assert T.plan(40, seed=24) == p and T.plan(40, seed=25) != p
    assert T.plan(0) == [] and T.pairs_for(240, 10) == 12 and T.pairs_for(239, 10) == 11 and T.pairs_for(5, 0) == 0


def test_a_five_percent_cost_is_recovered_within_its_interval():
    k = 10
    s = T.summarize(_run(T.plan(12), k, 1.05, drift=0.3))
    lo, hi = s["ci95"]
    assert s["pairs"] == 12 and len(s["ratios"]) == 12
    assert lo <= 1.05 <= hi and hi - lo < 0.05
    assert abs(s["ratio"] - 1.05) < 0.02
    assert lo > 1.0  # resolved: the interval excludes 'no cost'
    assert s["on_median_ms"] > s["off_median_ms"]


def test_no_cost_gives_an_interval_around_one_despite_drift():
    s = T.summarize(_run(T.plan(12), 10, 1.0, seed=3, drift=0.5))
    lo, hi = s["ci95"]
    assert lo <= 1.0 <= hi and abs(s["ratio"] - 1.0) < 0.02


def test_pairs_that_are_not_one_on_one_off_or_empty_are_left_out():
    blocks = [(True, [11.0]), (False, [10.0]), (True, [11.0]), (True, [11.0]), (False, []), (True, [1.0]),
              (False, [10.0])]  # the last block has no partner
    s = T.summarize(blocks)
    assert s["pairs"] == 1 and s["ratios"] == [1.1] and math.isnan(s["ci95"][0])


def test_line_round_trips_and_unavailable_parses_to_none():
    s = T.summarize(_run(T.plan(6), 5, 1.05))
    text = "step 0 ms=1\nSTEPS median_ms=10 n=60 device=cuda ranges=nvtx profile=0\n" + T.line(s, 5) + "\n"
    got = T.parse(text)
    assert got["pairs"] == 6 and abs(got["ratio"] - s["ratio"]) < 1e-4
    assert abs(got["ci95"][0] - s["ci95"][0]) < 1e-4 and abs(got["on_median_ms"] - s["on_median_ms"]) < 1e-3
    assert " k=5 steps=60 mean_ratio=" in T.line(s, 5)
    assert abs(got["mean_ratio"] - s["mean_ratio"]) < 1e-4 and len(got["pair_ms"]) == 6
    assert all(abs(a - c) < 1e-3 and abs(b - d) < 1e-3 for (a, b), (c, d) in zip(got["pair_ms"], s["pair_ms"], strict=True))
    old = "TOGGLE on_median_ms=10.100 off_median_ms=10.000 ratio=1.0100 pairs=4 ci95=1.0000-1.0200 k=5 steps=40"
    assert "mean_ratio" not in T.parse(old) and T.parse(old)["pairs"] == 4  # lines without the mean still read


def test_mean_ratio_counts_rare_stalls_that_the_median_ratio_ignores():
    k = 10
    blocks = _run(T.plan(12), k, 1.0, seed=5, noise=0.01)
    for on, ts in blocks:  # one step in five of every 'on' block stalls by 4 ms (a 40 % step)
        if on:
            for i in range(0, len(ts), 5):
                ts[i] += 4.0
    s = T.summarize(blocks)
    assert abs(s["ratio"] - 1.0) < 0.01  # the medians do not see it
    assert abs(s["mean_ratio"] - 1.08) < 0.01  # the time paid: 2 stalls of 4 ms per 100 ms block
    lo, hi = s["mean_ci95"]
    assert 1.0 < lo <= 1.08 <= hi


def test_pooled_runs_give_a_two_level_interval_narrower_than_one_run():
    runs = []
    for seed in range(4):
        s = T.summarize(_run(T.plan(30), 10, 1.02, seed=seed, noise=0.03))
        runs.append(s["pair_ms"])
    one = T.summarize(_run(T.plan(30), 10, 1.02, seed=0, noise=0.03))
    got = T.pooled(runs)
    assert got["pairs"] == 120
    assert got["ci95"][0] <= 1.02 <= got["ci95"][1] and got["mean_ci95"][0] <= 1.02 <= got["mean_ci95"][1]
    assert got["ci95"][1] - got["ci95"][0] < one["ci95"][1] - one["ci95"][0]
    assert math.isnan(T.pooled([runs[0]])["ci95"][0]) and T.pooled([])["pairs"] == 0
    assert T.parse(T.UNAVAILABLE) is None
    empty = T.summarize([])
    assert empty["pairs"] == 0 and T.parse(T.line(empty))["pairs"] == 0


class LoggingControl:
    def __init__(self):
        self.on = True
        self.calls = []

    def pause(self, drain=False):
        assert drain  # the on block's export work is done before the off block starts
        self.calls.append("pause")
        self.on = False
        return True

    def resume(self):
        self.calls.append("resume")
        self.on = True
        return True


def test_blocks_switch_collection_at_block_starts_and_time_each_step_in_its_block():
    ctl = LoggingControl()
    b = T.Blocks(ctl, steps=45, k=10, seed=7)  # 2 pairs; steps 40-44 outside any block, collection on
    seen = []
    for j in range(45):
        b.before(j)
        seen.append(ctl.on)
        b.after(j, 10.0 if not ctl.on else 10.5)
    assert b.states == T.plan(2, 7) and len(b.blocks) == 4
    assert seen[:40] == [s for s in b.states for _ in range(10)] and all(seen[40:])
    assert [on for on, _ in b.blocks] == b.states and all(len(ts) == 10 for _, ts in b.blocks)
    assert len(ctl.calls) == 5  # one switch per block, one resume after the last pair
    s = b.finish()
    assert ctl.on and ctl.calls[-1] == "resume"
    assert s["pairs"] == 2 and s["ratio"] == 1.05


def test_find_control_is_none_outside_record():
    from gputrace.trace import recorder

    recorder.shutdown()
    assert T.find_control() is None


class FakeProfiler:
    """A stand-in for torch.profiler.profile: logs its sessions' enter/exit (and the device syncs) in ``log``."""

    made = 0

    def __init__(self, log):
        FakeProfiler.made += 1
        self.n = FakeProfiler.made
        self.log = log

    def __enter__(self):
        self.log.append(("enter", self.n))
        return self

    def __exit__(self, *exc):
        assert exc == (None, None, None)
        self.log.append(("exit", self.n))
        return False


def _profiler_toggle(log):
    FakeProfiler.made = 0
    return T.ProfilerToggle(lambda: FakeProfiler(log), sync=lambda: log.append(("sync",)))


def test_profiler_blocks_open_one_session_per_on_block_and_none_in_off_blocks():
    log = []
    ctl = _profiler_toggle(log)
    steps, k, seed = 80, 10, 3
    b = T.Blocks(ctl, steps=steps, k=k, seed=seed)
    states = T.plan(4, seed)
    # the last block is 'on' (its session is still open when the loop ends), and blocks 3 and 4 (two pairs) are
    # both 'on': a session each
    assert states == [True, False, False, True, True, False, False, True]
    open_at = []
    for j in range(steps):
        b.before(j)
        open_at.append(ctl.on)
        b.after(j, 11.0 if ctl.on else 10.0)
    assert open_at == [s for s in states for _ in range(k)]  # a session open in every 'on' step, none in 'off'
    on_blocks = sum(states)
    assert ctl.sessions == on_blocks and ctl.on
    s = b.finish()
    assert not ctl.on and log[-1] == ("exit", on_blocks)  # finish() closed the last session
    # sessions strictly one after another, each synced before it stops, and none left open
    expect = []
    for n in range(1, on_blocks + 1):
        expect += [("enter", n), ("sync",), ("exit", n)]
    assert log == expect
    assert s["pairs"] == 4 and s["ratio"] == 1.1 and abs(s["mean_ratio"] - 1.1) < 1e-12
    ctl.close()
    assert log == expect  # a second close does nothing


def test_profiler_blocks_with_an_off_last_block_and_a_tail():
    log = []
    ctl = _profiler_toggle(log)
    seed = 10
    assert T.plan(2, seed) == [False, True, True, False]
    b = T.Blocks(ctl, steps=45, k=10, seed=seed)  # 2 pairs, then 5 steps outside any block (profiled)
    for j in range(45):
        b.before(j)
        assert ctl.on == (T.plan(2, seed)[j // 10] if j < 40 else True)
        b.after(j, 10.0)
    b.finish()
    assert not ctl.on and ctl.sessions == 3  # two 'on' blocks and the tail
    assert [e for e in log if e[0] != "sync"] == [("enter", 1), ("exit", 1), ("enter", 2), ("exit", 2),
                                                   ("enter", 3), ("exit", 3)]


def test_profiler_toggle_closes_a_session_whose_sync_raises_and_counts_switch_time():
    log = []
    t = iter(range(100))
    FakeProfiler.made = 0
    ctl = T.ProfilerToggle(lambda: FakeProfiler(log), sync=lambda: 1 / 0, clock=lambda: next(t) / 1e3)
    ctl.sync = None
    ctl.resume()
    assert ctl.resume() and ctl.sessions == 2 and log == [("enter", 1), ("exit", 1), ("enter", 2)]
    ctl.sync = lambda: 1 / 0
    import pytest

    with pytest.raises(ZeroDivisionError):
        ctl.pause(drain=True)
    assert not ctl.on and log[-1] == ("exit", 2)  # closed in finally
    ctl.close()
    assert log[-1] == ("exit", 2) and len(log) == 4
    assert ctl.switch_ms == 4.0  # 1 ms per open and per close on the fake clock


def _pairs(true_ratio, n, seed, noise=0.03, base=100.0):
    rng = random.Random(seed)
    return [(base * true_ratio * (1 + rng.gauss(0, noise)), base * (1 + rng.gauss(0, noise))) for _ in range(n)]


def test_pooled_ratio_ci_recovers_a_known_ratio_of_two_tools_costs():
    rec = [_pairs(1.02, 30, seed) for seed in range(4)]
    prof = [_pairs(1.10, 30, 100 + seed) for seed in range(4)]
    got = T.pooled_ratio_ci(rec, prof)
    want = 1.02 / 1.10
    lo, hi = got["ci95"]
    assert abs(got["a"] - T.pooled(rec)["mean_ratio"]) < 1e-12 and abs(got["b"] - T.pooled(prof)["mean_ratio"]) < 1e-12
    assert abs(got["ratio"] - got["a"] / got["b"]) < 1e-12
    assert lo <= want <= hi and hi < 1.0 and hi - lo < 0.03  # resolved: record below the profiler
    assert abs(got["ratio"] - want) < 0.01 and got["runs"] == [4, 4]
    # one tool against itself (other noise draws): the interval holds 1
    same = T.pooled_ratio_ci(rec, [_pairs(1.02, 30, 200 + s) for s in range(4)])
    assert same["ci95"][0] <= 1.0 <= same["ci95"][1]
    # no noise: every resample gives the exact answer
    exact = T.pooled_ratio_ci([[(102.0, 100.0)] * 5] * 3, [[(110.0, 100.0)] * 5] * 2)
    assert abs(exact["ratio"] - want) < 1e-12 and abs(exact["ci95"][0] - want) < 1e-12 and \
        abs(exact["ci95"][1] - want) < 1e-12


def test_pooled_ratio_ci_needs_two_runs_of_each_tool_for_an_interval():
    one = T.pooled_ratio_ci([_pairs(1.02, 10, 1)], [_pairs(1.1, 10, 2), _pairs(1.1, 10, 3)])
    assert one["ratio"] == one["ratio"] and math.isnan(one["ci95"][0])
    none = T.pooled_ratio_ci([], [_pairs(1.1, 10, 2), []])
    assert math.isnan(none["ratio"]) and none["runs"] == [0, 1]

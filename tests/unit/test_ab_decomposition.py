"""The factorial model's all-on-vs-none total (in effect coding the sum of the main effects: the two-way interactions
cancel between the corners) with an interval, checked against the measured all vs none: it accounts for it without a
three-way interaction and says it does not with a large one."""

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from gputrace.analysis.ab.abtest import analyse
from gputrace.analysis.ab.design import factorial
from gputrace.analysis.ab.effects import fit_effects
from gputrace.analysis.ab.measures import PROVE_PATH, RunMeasures

U = ("a", "b", "c")
LOG_EFFECTS = {"a": math.log(1.20), "b": math.log(0.90), "c": math.log(1.05), "a*b": math.log(1.10)}
TRUE_TOTAL = 1.20 * 0.90 * 1.05 * 1.10 - 1.0  # +24.7 %


def _runs(rounds, three=0.0, sigma=0.02, seed=0, fraction="full"):
    """Round r runs every variant once; log time = the terms that are on + ``three`` when a, b and c are all on +
    noise (sd ``sigma``) + a round effect."""
    rng = np.random.default_rng(seed)
    runs = {}
    for r in range(rounds):
        drift = rng.normal(0, 0.05)
        for v in factorial(U, fraction):
            x = sum(e for t, e in LOG_EFFECTS.items() if all(p in v.switches for p in t.split("*")))
            x += three if v.switches == frozenset(U) else 0.0
            ns = 1e8 * math.exp(x + drift + rng.normal(0, sigma))
            runs.setdefault(v, []).append(RunMeasures(f"{v.name}-{r}", r, {}, {(PROVE_PATH, None, "host"): {(-1, -1): ns}},
                                                      round=r))
    return runs


def _drift0(seed: int) -> float:
    """Round 0's drift in `_runs` (its first draw)."""
    return float(np.random.default_rng(seed).normal(0, 0.05))


def test_without_a_three_way_interaction_the_interval_holds_the_measured_total():
    for seed in range(10):
        d = fit_effects(_runs(3, seed=seed), U).decomposition
        assert d is not None and d.path == PROVE_PATH and (d.terms, d.cancelled) == (3, 3)
        assert d.n_all == 3 and d.n_none == 3
        assert d.verdict == "accounts" and d.low <= d.measured <= d.high
        assert d.rel_low < TRUE_TOTAL < d.rel_high
        assert "the decomposition accounts for the measured total" in d.describe()
    # The total is the sum of the main effects in the table (with noise too: it is the same contrast).
    fr = fit_effects(_runs(3, seed=2), U)
    mains = [e for e in fr.for_key(PROVE_PATH) if "*" not in e.term]
    assert len(mains) == 3 and fr.decomposition.estimate == pytest.approx(sum(e.estimate for e in mains), abs=1e-12)


def test_noise_free_total_is_the_sum_of_the_main_effects_exactly():
    """No noise (round drift only, which the blocks absorb): each main effect is the switch's log change averaged over
    the other two switches' four settings, their sum is the all-on-vs-none total exactly, and the two-way
    interaction a*b, which is in both corners, adds nothing to it."""
    fr = fit_effects(_runs(2, sigma=0.0, seed=1), U)
    by = {e.term: e for e in fr.for_key(PROVE_PATH)}
    # a: log 1.20 with b off, log 1.20 + log 1.10 with b on -> mean log 1.20 + log(1.10) / 2; b likewise; c alone.
    main = {"a": math.log(1.20) + math.log(1.10) / 2, "b": math.log(0.90) + math.log(1.10) / 2, "c": math.log(1.05)}
    for s, want in main.items():
        assert by[s].estimate == pytest.approx(want, abs=1e-12)
    assert by["a*b"].estimate == pytest.approx(math.log(1.10), abs=1e-12)
    d = fr.decomposition
    assert d.estimate == pytest.approx(sum(main.values()), abs=1e-12) == pytest.approx(math.log1p(TRUE_TOTAL))
    assert d.rel == pytest.approx(TRUE_TOTAL, abs=1e-12) and d.measured_rel == pytest.approx(TRUE_TOTAL, abs=1e-12)
    assert d.ns == pytest.approx(1e8 * math.exp(_drift0(1)) * TRUE_TOTAL, rel=1e-9)  # at round 0's all-off level


def test_a_large_three_way_interaction_is_what_the_decomposition_misses():
    for seed in range(5):
        d = fit_effects(_runs(8, three=math.log(1.5), seed=seed), U).decomposition
        assert d.verdict == "does not" and not d.low <= d.measured <= d.high
        # Fitted with two-way terms only, the model soaks up 3/4 of a three-way term confined to one corner of
        # 2^3; the rest (log 1.5 / 4, about +10.7 %) is the remainder, and its interval says so.
        assert 0.0 < d.remainder_low < math.log(1.5) / 4 < d.remainder_high
        text = d.describe()
        assert "does not account for the measured total" in text and "three or more switches" in text
    # Without noise: the three-way term T confined to the all-on corner is T/8 x_a x_b x_c + lower terms in +-1
    # coding; x_a x_b x_c is +1 at all-on and -1 at none, so the model's total misses exactly 2 T / 8 = T / 4.
    fr = fit_effects(_runs(4, three=math.log(1.5), sigma=0.0), U)
    d = fr.decomposition
    assert d.verdict == "does not" and d.remainder == pytest.approx(math.log(1.5) / 4, abs=1e-12)
    assert d.measured == pytest.approx(math.log1p(TRUE_TOTAL) + math.log(1.5), abs=1e-12)
    mains = sum(e.estimate for e in fr.for_key(PROVE_PATH) if "*" not in e.term)
    assert d.estimate == pytest.approx(mains, abs=1e-12) and d.remainder_low > 0


def test_the_interval_narrows_with_more_rounds():
    def width(rounds):
        return float(np.median([(lambda d: d.high - d.low)(fit_effects(_runs(rounds, seed=s), U).decomposition)
                                for s in range(5)]))
    assert width(12) < 0.6 * width(3)


def test_corners_missing_or_no_residual_df_are_said():
    d = fit_effects(_runs(3, fraction="half"), U).decomposition  # 2^(3-1): 'all' runs, 'none' does not
    assert d.verdict == "not measured" and d.n_all == 3 and d.n_none == 0 and math.isnan(d.measured)
    assert math.isfinite(d.low) and "no run with every switch off" in d.describe()
    d = fit_effects(_runs(1), U).decomposition  # one round of 2^3: 8 runs, 7 parameters, 1 df
    assert d.verdict in ("accounts", "does not") and fit_effects(_runs(1), U).df == 1
    one = {v: rs for v, rs in _runs(1).items() if v.switches != frozenset("c")}  # 7 runs, 7 parameters
    d = fit_effects(one, U, interactions=True).decomposition
    assert d.verdict == "no interval" and "unknown" in d.describe()
    # On the linear scale (ns) the line gives times.
    d = replace(fit_effects(_runs(3), U).decomposition, scale="linear", estimate=2e6, low=1e6, high=3e6, measured=5e6)
    assert "measured +5 ms (means of 3 and 3 runs)" in d.describe() and "+2 ms [+1 ms, +3 ms]" in d.describe()


def test_ab_report_prints_and_carries_the_decomposition():
    rep = analyse(_runs(4, seed=3), "factorial", U)
    assert rep.conclusions[0].startswith("all vs none: (prove) +")
    assert rep.conclusions[1].startswith("all vs none, (prove): measured +") and "(geometric means of 4 and 4 runs)" \
        in rep.conclusions[1] and ("model (sum of the 3 main effects, every run pooled; the 3 two-way interactions "
                                   "cancel between the corners) +") in rep.conclusions[1]
    doc = json.loads(json.dumps(rep.to_dict(), allow_nan=False))
    dec = doc["factorial"]["decomposition"]
    for k in ("rel", "rel_low", "rel_high", "ns", "ns_low", "ns_high", "measured_rel", "measured_ns", "remainder_low",
              "remainder_high", "n_all", "n_none", "terms", "cancelled", "verdict", "text"):
        assert k in dec
    assert dec["verdict"] == "accounts" and dec["n_all"] == 4 and dec["rel_low"] < dec["measured_rel"] < dec["rel_high"]
    half = analyse(_runs(3, fraction="half"), "factorial", U).to_dict()["factorial"]["decomposition"]
    assert half["verdict"] == "not measured" and half["measured_rel"] is None and half["n_none"] == 0

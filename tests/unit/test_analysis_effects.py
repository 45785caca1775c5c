"""Experimental designs and factorial effects: an injected interaction is found."""

import numpy as np
import pytest

from gputrace.analysis.ab.design import factorial, one_at_a_time, opt_sets, parse_switches, schedule
from gputrace.analysis.ab.effects import fit_effects
from gputrace.analysis.ab.measures import run_measures
from gputrace.testing.synth import switch_run


def test_designs():
    u = ("a1", "b1", "d4")
    assert [v.name for v in one_at_a_time(u)] == ["none", "a1", "b1", "d4", "all", "b1+d4", "a1+d4", "a1+b1"]
    full = factorial(u, "full")
    assert len(full) == 8 and len({v.switches for v in full}) == 8
    half = factorial(("a", "b", "c", "d", "e"))  # auto -> half for k = 5
    assert len(half) == 16
    # Resolution V: every main effect and two-way interaction column is orthogonal in +-1 coding.
    X = np.array([[1 if s in v.switches else -1 for s in "abcde"] for v in half])
    cols = [X[:, i] for i in range(5)] + [X[:, i] * X[:, j] for i in range(5) for j in range(i + 1, 5)]
    G = np.array(cols) @ np.array(cols).T
    assert np.allclose(G, 16 * np.eye(15))
    with pytest.raises(ValueError):
        factorial(("a",))
    assert [v.name for v in opt_sets(["none", "all", "a1,b1"], u)] == ["none", "all", "a1+b1"]
    with pytest.raises(ValueError, match="unknown switch 'zz'"):
        opt_sets(["none", "zz"], u)
    assert parse_switches("A1, B1") == ("a1", "b1")
    sch = schedule(opt_sets(["none", "all"], u), runs=3, warmup=1)
    assert [(r, v.name, w) for r, v, w in sch] == [
        (0, "none", True), (0, "all", True), (1, "none", False), (1, "all", False),
        (2, "none", False), (2, "all", False), (3, "none", False), (3, "all", False)]
    shuffled = schedule(full, runs=2, shuffle=True, seed=7)
    assert sorted(v.name for _, v, _ in shuffled[:8]) == sorted(v.name for v in full)


EFFECTS = {
    "c": {"synthesis": 0.20},           # c alone slows synthesis
    "a*b": {"msm_l": 0.60},             # only a and b together slow msm_l
    "b": {"msm_a": -0.25},              # b alone speeds msm_a
}


def _fit(seed, reps=3):
    u = ("a", "b", "c")
    runs = {}
    k = 0
    for v in factorial(u, "full"):
        runs[v] = []
        for _ in range(reps):
            k += 1
            runs[v].append(run_measures(switch_run(v.switches, seed * 1000 + k, effects=EFFECTS, extra={"b": ("pin", 0.5)})))
    return fit_effects(runs, u)


def test_injected_interaction_found():
    found_inter = found_c = wrong = 0
    seeds = range(4)
    for seed in seeds:
        res = _fit(seed)
        assert res.model == "main effects and two-way interactions" and res.df == 24 - 7
        ab = res.for_key("prove/msm_l")
        by = {e.term: e for e in ab}
        found_inter += by["a*b"].significant and 0.4 < by["a*b"].rel < 0.8
        wrong += sum(by[t].significant for t in ("a", "c", "a*c", "b*c"))
        syn = {e.term: e for e in res.for_key("prove/synthesis")}
        found_c += syn["c"].significant and 0.1 < syn["c"].rel < 0.3
        # pin exists only with b: fitted on the linear scale, b adds ~0.5 ms per circuit.
        pin = {e.term: e for e in res.for_key("prove/pin")}
        assert pin["b"].scale == "linear" and pin["b"].significant and 0.8e6 < pin["b"].ns < 1.2e6
        culprits = {c.term: c for c in res.culprits}
        assert "c" in culprits and culprits["c"].phases[0].path == "prove/synthesis"
        assert "a*b" in culprits and culprits["a*b"].phases[0].path == "prove/msm_l"
        assert "the interaction a x b makes the run" in culprits["a*b"].describe()
        msm_a = {e.term: e for e in res.for_key("prove/msm_a")}
        assert msm_a["b"].significant and -0.35 < msm_a["b"].rel < -0.15
    assert found_inter == len(seeds) and found_c == len(seeds)
    assert wrong <= 2  # 4 null terms x 4 seeds at 95 %


def test_half_fraction_too_small_falls_back():
    u = ("a", "b", "c")
    runs = {v: [run_measures(switch_run(v.switches, i * 10 + j, effects=EFFECTS)) for j in range(2)] for i, v in enumerate(factorial(u, "half"))}
    res = fit_effects(runs, u)
    assert res.model.startswith("main effects only") and res.terms == ["a", "b", "c"]
    with pytest.raises(ValueError, match="cannot separate"):
        fit_effects({v: rs for v, rs in list(runs.items())[:2]}, u)


def test_factorial_terms_held_together_by_holm():
    """Three terms with p = 0.001, 0.03, 0.04: each alone is significant at 95 %, Holm over the
    three calls only the first (0.03 > 0.05 / 2)."""
    from scipy import stats

    from gputrace.analysis.ab.effects import _holm_terms

    df = 200
    se = np.array([1.0, 0.01, 0.01, 0.01])
    beta = np.r_[0.0, [stats.t.isf(p / 2, df) * 0.01 for p in (0.001, 0.03, 0.04)]]
    assert _holm_terms(se, beta, df, 4, 0.95).tolist() == [True, False, False]
    assert _holm_terms(se, beta, df, 4, 0.90).tolist() == [True, True, True]
    assert _holm_terms(se, beta, 0, 4, 0.95).tolist() == [False, False, False]  # no residual df: nothing called

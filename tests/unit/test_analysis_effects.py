"""Experimental designs and factorial effects: an injected interaction is found; main effects in effect coding are
the average of the switch's conditional effects and are estimated more tightly than 0/1-coded coefficients."""

import math

import numpy as np
import pytest

from gputrace.analysis.ab.design import factorial, one_at_a_time, opt_sets, parse_switches, schedule
from gputrace.analysis.ab.effects import design_matrix, fit_effects
from gputrace.analysis.ab.measures import PROVE_PATH, RunMeasures, run_measures
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
# Effect coding: a's main effect on msm_l is its log change averaged over b's two levels, 0 with b off and log 1.6
# with b on, so exp(log(1.6) / 2) - 1 = +26.5 % (and b's the same); the interaction y11 - y10 - y01 + y00 is log 1.6.
MAIN_MSM_L = math.exp((0.0 + math.log(1.6)) / 2) - 1.0


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
        for t in ("a", "b"):
            assert by[t].significant and abs(by[t].rel - MAIN_MSM_L) < 0.1
        wrong += sum(by[t].significant for t in ("c", "a*c", "b*c"))
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
    assert wrong <= 2  # 3 null terms x 4 seeds at 95 %


def _noise_free(effects, u=("a", "b", "c"), fraction="full", reps=1, sigma=0.0, seed=0):
    """Runs whose log time is the sum of the active terms' log changes (a term is active when all its switches are
    on), plus noise of sd ``sigma``; variant -> runs, and variant -> its noise-free log time."""
    rng = np.random.default_rng(seed)
    runs, truth = {}, {}
    for v in factorial(u, fraction):
        x = sum(e for t, e in effects.items() if all(p in v.switches for p in t.split("*")))
        truth[v.switches] = x
        runs[v] = [RunMeasures(f"{v.name}-{r}", r, {}, {(PROVE_PATH, None, "host"): {(-1, -1): 1e8 * math.exp(
            x + rng.normal(0, sigma))}}) for r in range(reps)]
    return runs, truth


def test_main_effect_is_the_average_of_the_conditional_effects():
    """With a and b interacting, a's main effect is the mean of its effect with b off and with b on (over c's
    levels too); the interaction is the difference of those two; ns is at the all-off level."""
    effects = {"a": math.log(1.20), "b": math.log(0.90), "c": math.log(1.05), "a*b": math.log(1.10)}
    runs, y = _noise_free(effects)
    by = {e.term: e for e in fit_effects(runs, ("a", "b", "c")).for_key(PROVE_PATH)}
    on = [frozenset(s) for s in ("", "c")]
    b_off = np.mean([y[s | {"a"}] - y[s] for s in on])  # log(1.20)
    b_on = np.mean([y[s | {"a", "b"}] - y[s | {"b"}] for s in on])  # log(1.20 * 1.10)
    assert b_off == pytest.approx(math.log(1.20)) and b_on == pytest.approx(math.log(1.32))
    assert by["a"].estimate == pytest.approx((b_off + b_on) / 2, abs=1e-12)
    assert by["a"].rel == pytest.approx(1.20 * math.sqrt(1.10) - 1, abs=1e-12)
    assert by["a"].ns == pytest.approx(1e8 * (1.20 * math.sqrt(1.10) - 1), rel=1e-9)
    assert by["a*b"].estimate == pytest.approx(b_on - b_off, abs=1e-12) and by["a*b"].rel == pytest.approx(0.10)
    # b's main effect averages its 0.90 with a off and 0.90 * 1.10 with a on; c interacts with nothing.
    assert by["b"].rel == pytest.approx(0.90 * math.sqrt(1.10) - 1, abs=1e-12)
    assert by["c"].rel == pytest.approx(0.05, abs=1e-12) and by["a*c"].rel == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(("u", "fraction", "ratio"), [(("a", "b", "c"), "full", math.sqrt(3)),
                                                      (("a", "b", "c", "d", "e", "f"), "half", math.sqrt(6))])
def test_effect_coding_narrows_the_main_effects(u, fraction, ratio):
    """Same data, same residual variance: the 0/1-coded coefficient of a switch (its effect with every other switch
    off) carries the variance of its k - 1 interaction columns, so its standard error is sqrt(k) times that of the
    +-1-coded main effect in an orthogonal design (2^3: sqrt 3; 2^(6-1), as in the H200 experiment: sqrt 6)."""
    runs, _ = _noise_free({u[0]: 0.1, f"{u[0]}*{u[1]}": 0.05}, u, fraction, reps=3, sigma=0.05, seed=4)
    fr = fit_effects(runs, u)
    assert fr.model == "main effects and two-way interactions"
    from scipy import stats

    tq = stats.t.ppf(0.975, fr.df)
    se_effect = {e.term: (e.high - e.low) / (2 * tq) for e in fr.for_key(PROVE_PATH)}
    # The 0/1 fit, by hand.
    coded = np.array([[s in v.switches for s in u] for v, rs in runs.items() for _ in rs], np.float64)
    y = np.log([r.values[(PROVE_PATH, None, "host")][(-1, -1)] for rs in runs.values() for r in rs])
    X01 = np.column_stack([np.ones(len(coded))] + [coded[:, i] for i in range(len(u))]
                          + [coded[:, i] * coded[:, j] for i in range(len(u)) for j in range(i + 1, len(u))])
    beta01, *_ = np.linalg.lstsq(X01, y, rcond=None)
    s2 = float(np.sum((y - X01 @ beta01) ** 2)) / fr.df
    se01 = np.sqrt(np.diag(np.linalg.inv(X01.T @ X01)) * s2)
    X, _ = design_matrix(coded.astype(np.int64), u, True)
    assert np.allclose(X @ np.linalg.lstsq(X, y, rcond=None)[0], X01 @ beta01)  # same fit, other parameters
    for i, s in enumerate(u):
        assert se_effect[s] < se01[1 + i]
        assert se01[1 + i] / se_effect[s] == pytest.approx(ratio, rel=1e-9)
    # Interactions mean the same in both codings: same estimate, same standard error.
    k = len(u) + 1
    assert {e.term: e for e in fr.for_key(PROVE_PATH)}[f"{u[0]}*{u[1]}"].estimate == pytest.approx(beta01[k])
    assert se_effect[f"{u[0]}*{u[1]}"] == pytest.approx(se01[k], rel=1e-9)


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


def test_a_term_with_no_host_phase_is_named_through_its_gpu_evidence():
    """A pageable key upload: load_bases' host bracket shrinks while its pageable copies grow; the culprit line
    names the copies (one clock per phase, the largest), not 'no single phase'."""
    from gputrace.analysis.ab.effects import Culprit, Effect, _phase_list

    def eff(path, clock, ns, sig=True):
        return Effect(path, None, clock, "pageable", "log", 0.1, 0.05, 0.15, 0.1, 0.05, 0.15, ns, ns, ns, 1e-9, sig)

    e2e = eff("(prove)", "host", 169e6)
    effects = [e2e, eff("prove/load_bases", "host", -188e6), eff("prove/load_bases", "copy HtoD PAGEABLE", 329e6),
               eff("prove/load_bases", "gpu busy", 282e6), eff("prove", "gpu busy", 280e6),
               eff("prove/b_g2", "launch gaps", 90e6), eff("prove/msm_l", "copy DtoH PAGEABLE", 9e6, sig=False)]
    via = _phase_list(effects, {"(prove)", "(run)"}, 1.0)
    assert [(e.path, e.clock) for e in via] == [("prove/load_bases", "copy HtoD PAGEABLE")]
    assert "through prove/load_bases copy HtoD PAGEABLE +329 ms" in Culprit("pageable", e2e, via).describe()
    effects.append(eff("prove/sync", "host", 40e6))  # a host phase moving with the run is preferred
    assert [(e.path, e.clock) for e in _phase_list(effects, {"(prove)", "(run)"}, 1.0)] == [("prove/sync", "host")]

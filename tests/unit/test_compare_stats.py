"""Comparison statistics: exact rank machinery, verdict rates over many random seeds,
instance alignment, warm-up and outliers, environment checks."""

import itertools

import numpy as np
import pytest
from scipy import stats

from gputrace.analysis.ab.compare import compare_measures, compare_sets, compare_values
from gputrace.analysis.ab.environment import check_environment
from gputrace.analysis.ab.measures import RunMeasures, path_ids, run_measures
from gputrace.analysis.ab.ranks import hl_interval, k_for, min_two_sided_p, u_null_cdf
from gputrace.testing.synth import make_timeline, synthetic_run


@pytest.mark.parametrize("n1,n2", [(1, 1), (2, 3), (4, 5), (6, 6)])
def test_u_null_distribution_matches_enumeration(n1, n2):
    counts = np.zeros(n1 * n2 + 1)
    for c in itertools.combinations(range(n1 + n2), n1):
        counts[sum(c) - n1 * (n1 - 1) // 2] += 1
    assert np.allclose(u_null_cdf(n1, n2), np.cumsum(counts) / counts.sum())


def test_k_table_and_too_few():
    # Classical two-sided 5 % critical values of the rank-sum test: U <= 23 at 10 vs 10, U <= 2 at 5 vs 5.
    assert k_for(10, 10, 0.95) == 24 and k_for(5, 5, 0.95) == 3
    assert k_for(3, 3, 0.95) == 0 and k_for(4, 4, 0.95) == 1
    assert min_two_sided_p(3, 3) == pytest.approx(0.1)
    # Large samples use the normal approximation and stay close to the exact value.
    assert abs(k_for(150, 150, 0.95) - (150 * 150 / 2 - 1.96 * np.sqrt(150 * 150 * 301 / 12))) <= 1


def test_hl_interval_brute_force():
    x, y = [1.0, 2.0, 4.0, 7.0, 11.0], [3.0, 5.0, 6.0, 9.0, 15.0]
    est = hl_interval(x, y, 0.9)
    d = sorted(b - a for a in x for b in y)
    k = k_for(5, 5, 0.9)
    assert est.estimate == np.median(d) and (est.low, est.high) == (d[k - 1], d[-k])
    assert est.p_value == pytest.approx(stats.mannwhitneyu(y, x).pvalue)
    with pytest.raises(ValueError):
        hl_interval([], [1.0])
    with pytest.raises(ValueError):
        hl_interval([1.0], [1.0], confidence=1.0)


def test_verdict_rates_over_seeds():
    """At 95 %: clean noise is called slower/faster at most ~5 % of the time (the interval's
    coverage), a 15 % slowdown under 3 % noise with 8 runs a side is found nearly always."""
    rng = np.random.default_rng(12345)
    false_calls = found = 0
    trials = 400
    for _ in range(trials):
        x = 1e9 * rng.lognormal(0, 0.03, 8)
        y = 1e9 * rng.lognormal(0, 0.03, 8)
        if compare_values(x, y)["verdict"] in ("slower", "faster"):
            false_calls += 1
        z = 1.15e9 * rng.lognormal(0, 0.03, 8)
        if compare_values(x, z)["verdict"] == "slower":
            found += 1
    assert false_calls / trials <= 0.08
    assert found / trials >= 0.97


def test_unchanged_needs_tight_interval_and_too_few_runs():
    rng = np.random.default_rng(3)
    x, y = 1e9 * rng.lognormal(0, 0.002, 20), 1e9 * rng.lognormal(0, 0.002, 20)
    assert compare_values(x, y, equivalence=0.02)["verdict"] == "unchanged"
    assert compare_values(x[:3], y[:3] * 2)["verdict"] == "too few runs"
    assert compare_values([0, 0, 0, 0], [5, 6, 7, 8])["verdict"] == "new"
    assert compare_values([5, 6, 7, 8], [0, 0, 0, 0])["verdict"] == "gone"
    r = compare_values([1e6, 1.1e6, 0.9e6, 1e6, 1.05e6], [2e6, 2.1e6, 1.9e6, 2.2e6, 2e6])
    assert r["scale"] == "log" and r["verdict"] == "slower" and r["rel_low"] > 0.7 and r["rel"] == pytest.approx(1.0, abs=0.1)


@pytest.mark.slow  # 160 synthetic runs compared in 10 sets (about 5 s here)
def test_injected_phase_found_at_timeline_level():
    """Synthetic prover runs, msm_l 40 % slower on the variant, 8 vs 8 (6 vs 6 cannot pass Holm over ~40 rows): over many seeds msm_l (and the
    whole run) come out slower every time and untouched phases are rarely called changed."""
    reps, wrong, total_noise_rows, total_slower = 10, 0, 0, 0
    for rep in range(reps):
        base = [synthetic_run(1000 * rep + s, circuits=2, devices=2) for s in range(8)]
        var = [synthetic_run(1000 * rep + 500 + s, circuits=2, devices=2, slow={"msm_l": 0.4}) for s in range(8)]
        res = compare_sets(base, var)
        assert res.find("prove/msm_l").verdict == "slower"
        assert 0.3 < res.find("prove/msm_l").rel < 0.5
        assert res.find("prove/msm_l", clock="device").verdict == "slower"
        assert res.total.verdict != "faster"
        total_slower += res.total.verdict == "slower"
        for row in res.rows:
            if "msm_l" in row.path or row.path in ("(run)", "(prove)", "prove") or row.device is not None:
                continue
            total_noise_rows += 1
            wrong += row.verdict in ("slower", "faster")
    assert wrong / total_noise_rows <= 0.10
    assert total_slower >= 8  # msm_l is 1/12 of the run: +3.3 % end to end under ~1 % noise


def _rm(label, start, vals, res=None):
    return RunMeasures(label=label, start_ns=start, resource=res or {}, values=vals)


def test_instances_aligned_warmup_and_outliers():
    key = ("prove/msm_a", None, "host")
    base = [_rm(f"b{i}", i, {key: {(0, 0): 100.0 + i, (1, 0): 100.0}}) for i in range(6)]
    # Variant runs also proved circuit 2: only circuits 0 and 1 are compared.
    var = [_rm(f"v{i}", 10 + i, {key: {(0, 0): 100.0 + i, (1, 0): 100.0, (2, 0): 500.0}}) for i in range(6)]
    var[5] = _rm("v5", 15, {key: {(0, 0): 900.0, (1, 0): 100.0, (2, 0): 500.0}})
    r = compare_measures(base, var, warmup=1)
    row = r.find("prove/msm_a")
    assert row.instances == 2 and row.instances_dropped == 1
    assert row.n_base == 5 and row.base_values == (201.0, 202.0, 203.0, 204.0, 205.0)
    assert r.warmup_dropped == ["b0", "v0"]
    assert [o["run"] for o in r.outliers] == ["v5"]
    with pytest.raises(ValueError, match="discard all"):
        compare_measures(base, var, warmup=6)


def test_path_ids_and_measures():
    tl = make_timeline(
        [
            {"id": "p", "name": "prove", "start": 0, "end": 100, "circuit": 0},
            {"id": "n", "name": "ntt", "start": 10, "end": 50, "parent": "p", "device": 0, "kind": "gpu", "gpu_start": 12, "gpu_end": 40, "circuit": 0},
            {"name": "coset_ntt", "start": 10, "end": 30, "parent": "n", "device": 0, "kind": "gpu", "circuit": 0},
            {"name": "ntt", "start": 60, "end": 70, "circuit": 0},  # a root ntt: a different path
        ]
    )
    pid, names = path_ids(tl)
    assert sorted(names) == ["ntt", "prove", "prove/ntt", "prove/ntt/coset_ntt"]
    m = run_measures(tl)
    assert m.values[("prove/ntt", None, "host")] == {(0, -1): 40.0}
    assert m.values[("prove/ntt", 0, "device")] == {(0, -1): 28.0}
    assert m.values[("ntt", -1, "host")] == {(0, -1): 10.0}
    assert m.wall_ns == 100


def test_environment_check_names_fields():
    a = {"gputrace.config.b1": False, "gputrace.gpu.0.model": "H200", "gputrace.git.commit": "abc", "process.pid": 1}
    b = {"gputrace.config.b1": True, "gputrace.gpu.0.model": "H200", "gputrace.git.commit": "def", "process.pid": 2}
    chk = check_environment([a, a], [b, b])
    assert "gputrace.config.b1" in chk.config_diffs
    assert list(chk.differences) == ["gputrace.git.commit"]
    assert len(chk.warnings) == 1 and "gputrace.git.commit" in chk.warnings[0] and "'abc'" in chk.warnings[0]
    chk2 = check_environment([a, dict(a, **{"gputrace.config.b1": True})], [b])
    assert any("baseline runs differ among themselves in gputrace.config.b1" in w for w in chk2.warnings)
    assert check_environment([a], [a]).ok


def test_signed_rank_table_and_paired_power():
    from gputrace.analysis.ab.ranks import hl_paired, k_signed, w_null_cdf

    # Two-sided 5 % critical values of the signed-rank test: T <= 0, 2, 3, 5, 8 for n = 6..10.
    assert [k_signed(n, 0.95) for n in range(5, 11)] == [0, 1, 3, 4, 6, 9]
    counts = np.zeros(11)
    for signs in itertools.product((0, 1), repeat=4):
        counts[sum(i + 1 for i, s in enumerate(signs) if s)] += 1
    assert np.allclose(w_null_cdf(4), np.cumsum(counts) / 16)
    d = [0.1, 0.2, 0.15, 0.05, 0.12, 0.3, 0.11]
    est = hl_paired(d)
    walsh = sorted((a + b) / 2 for i, a in enumerate(d) for b in d[i:])
    assert est.estimate == np.median(walsh) and (est.low, est.high) == (walsh[2], walsh[-3])
    # Load that drifts between rounds (x3 spread) swamps an unpaired test; pairing by round
    # finds the 8 % slowdown.
    rng = np.random.default_rng(5)
    found_p = found_u = false_p = 0
    for _ in range(100):
        load = rng.uniform(1.0, 3.0, 8)
        x = 1e9 * load * rng.lognormal(0, 0.02, 8)
        y = 1.08e9 * load * rng.lognormal(0, 0.02, 8)
        z = 1e9 * load * rng.lognormal(0, 0.02, 8)
        found_p += compare_values(x, y, paired=True)["verdict"] == "slower"
        found_u += compare_values(x, y)["verdict"] == "slower"
        false_p += compare_values(x, z, paired=True)["verdict"] in ("slower", "faster")
    assert found_p >= 90 and found_u <= 20 and false_p <= 10


def test_compare_measures_pairs_by_round():
    key = ("prove", None, "host")
    base = [_rm(f"b{i}", 2 * i, {key: {(0, 0): 100.0 * (1 + i)}}) for i in range(6)]
    var = [_rm(f"v{i}", 2 * i + 1, {key: {(0, 0): 110.0 * (1 + i)}}) for i in range(6)]
    assert not compare_measures(base, var).paired
    for i, (a, b) in enumerate(zip(base, var)):
        a.round = b.round = i
    assert not compare_measures(base, var).paired  # auto pairs from 8 rounds
    r = compare_measures(base, var, paired=True)
    assert r.paired_rounds == 6 and r.find("prove").verdict == "slower"
    assert r.find("prove").rel == pytest.approx(0.10)
    assert not compare_measures(base, var, paired=False).paired
    with pytest.raises(ValueError, match="paired comparison needs"):
        compare_measures(base[:5], var[:5], paired=True)


@pytest.mark.slow
def test_familywise_holds_across_rows():
    """10 pure-noise phases, 10 vs 10 runs: per-row 95 % (correction "none") calls something in
    ~40 % of the repetitions; the default (Benjamini-Hochberg) and Holm keep 'any row called'
    near 5 %."""
    rng = np.random.default_rng(77)
    keys = [(f"prove/p{i}", None, "host") for i in range(10)]
    any_row = any_fw = any_fdr = 0
    reps = 30
    for rep in range(reps):
        def runs(tag):
            return [_rm(f"{tag}{j}", j, {k: {(0, 0): 1e6 * rng.lognormal(0, 0.05)} for k in keys}) for j in range(10)]
        b, v = runs("b"), runs("v")
        plain = compare_measures(b, v, correction="none")
        fdr = compare_measures(b, v, correction="fdr")
        fw = compare_measures(b, v)  # the default: Holm (familywise=True is the same)
        assert fw.thresholds == pytest.approx({"end-to-end": 0.005, "phase": 0.005})  # no end-to-end rows here
        assert fdr.correction == "fdr" and fw.correction == "holm" and fdr.tested_rows == 10
        assert compare_measures(b, v, familywise=True).correction == "holm"
        any_row += any(r.verdict in ("slower", "faster") for r in plain.rows)
        any_fw += any(r.verdict in ("slower", "faster") for r in fw.rows)
        any_fdr += any(r.verdict in ("slower", "faster") for r in fdr.rows)
    assert any_row / reps >= 0.2 and any_fw / reps <= 0.15 and any_fdr / reps <= 0.15


def test_linear_scale_with_zero_baseline_median():
    # pin ran in only 2 of 5 baseline runs (median 0) but in every variant run.
    r = compare_values([0, 0, 0, 5e6, 6e6], [9e6, 9.5e6, 10e6, 9e6, 11e6])
    assert r["scale"] == "linear" and r["verdict"] == "slower" and r["diff_low_ns"] > 0


def test_emulated_costs_listed_apart_from_environment():
    def side(tag, emulated):
        res = {"gputrace.run_id": tag, "service.name": "t"} | ({"gputrace.emulated.pin_share": "0.084"} if emulated else {})
        return [run_measures(synthetic_run(i + (100 if emulated else 0), resource=res | {"gputrace.run_id": f"{tag}{i}"}))
                for i in range(4)]

    res = compare_measures(side("b", False), side("v", True))
    assert res.emulated == {"base": {}, "variant": {"gputrace.emulated.pin_share": ["0.084"]}}
    assert res.environment.ok  # an injected cost is not an environment difference
    assert res.to_dict()["emulated"]["variant"]


def test_partial_phase_is_labelled_not_gone():
    """A phase that ran only in the cold first run (key_save) is 'partial', never 'gone' or a regression."""
    keys = [("prove/msm", None, "host"), ("setup/key_save", None, "host")]

    def runs(tag, first_has_setup):
        out = []
        for j in range(8):
            vals = {keys[0]: {(0, 0): 1e6 * (1 + 0.01 * j)}}
            if first_has_setup and j == 0:
                vals[keys[1]] = {(0, 0): 5e8}
            out.append(_rm(f"{tag}{j}", j, vals))
        return out

    res = compare_measures(runs("b", True), runs("v", False))
    row = res.find("setup/key_save")
    assert row.verdict == "partial" and (row.present_base, row.present_variant) == (1, 0)
    assert res.regressions(0.0) == [] and res.find("prove/msm").verdict != "partial"


def test_fdr_and_holm_step_procedures():
    from gputrace.analysis.ab.family import adjusted_p, bh_reject, holm_reject

    p = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216]
    # BH at 5 %: the largest k with p_(k) <= k * 0.05 / 10 is k = 2.
    assert bh_reject(p, 0.05).tolist() == [True, True] + [False] * 8
    # Holm: 0.001 <= 0.005, 0.008 > 0.05 / 9: stops after one.
    assert holm_reject(p, 0.05).tolist() == [True] + [False] * 9
    q = adjusted_p(p, "fdr")
    assert q[0] == pytest.approx(0.01) and q[1] == pytest.approx(0.04) and np.all(np.diff(q) >= -1e-12)
    assert (q <= 0.05).tolist() == bh_reject(p, 0.05).tolist()
    assert adjusted_p(p, "holm")[0] == pytest.approx(0.01)


def test_within_margin_is_never_called():
    """A real 1 % shift with tiny noise is statistically clear but inside the 2 % margin."""
    rng = np.random.default_rng(5)
    key = ("prove/h2d", None, "host")
    b = [_rm(f"b{j}", j, {key: {(0, 0): 1e6 * rng.lognormal(0, 0.001)}}) for j in range(10)]
    v = [_rm(f"v{j}", j, {key: {(0, 0): 1.01e6 * rng.lognormal(0, 0.001)}}) for j in range(10)]
    row = compare_measures(b, v).find("prove/h2d")
    assert row.significant and row.verdict == "within margin"
    assert compare_measures(b, v, equivalence=0.005).find("prove/h2d").verdict == "slower"


def test_holm_answers_the_end_to_end_question_first():
    """5 vs 5 runs over 12 rows: a phase would need p <= 0.05/10 (impossible: the smallest is
    0.0079), but the end-to-end rows are their own family at 0.05/2, so "the run is 16 % slower"
    is still called; the phases stay undecided and the result says so."""
    rng = np.random.default_rng(3)
    e2e = [("(run)", None, "host"), ("(prove)", None, "host")]
    phases = [(f"prove/p{i}", None, "host") for i in range(10)]

    def side(tag, factor):
        return [_rm(f"{tag}{j}", j, {k: {(0, 0): 1e6 * (factor if k in e2e else 1.0) * rng.lognormal(0, 0.01)}
                                     for k in e2e + phases}) for j in range(5)]

    res = compare_measures(side("b", 1.0), side("v", 1.16))
    assert res.correction == "holm" and res.tested_rows == 12
    assert res.find("(run)").verdict == "slower" and res.find("(prove)").verdict == "slower"
    assert not res.undecidable and res.phases_undecidable
    assert not any(r.verdict in ("slower", "faster") for r in res.rows if r.path.startswith("prove/"))
    # Benjamini-Hochberg over all 12 rows calls no phase either.
    assert not any(r.significant for r in compare_measures(side("b", 1.0), side("v", 1.16), correction="fdr").rows
                   if r.path.startswith("prove/"))


def test_runs_needed_follows_the_noise_and_the_level():
    from gputrace.analysis.ab.family import runs_needed

    # Log values with median absolute residual 0.02 (robust sigma 3 %): for +5 % at 95 %, 80 %
    # power, 2 * ((1.96 + 0.84) * 0.0297 / ln 1.05)^2 / (3 / pi) = 6.1 -> 7 runs a side.
    r = np.array([-0.04, -0.02, 0.0, 0.02, 0.04])
    x, y = np.exp(r), np.exp(r + 0.01)
    assert runs_needed(x, y, 0.05, 0.95) == 7
    assert runs_needed(x, y, 0.10, 0.95) == 4  # at least the N whose most extreme ranking reaches p <= 0.05 (4 vs 4: 0.029)
    assert runs_needed(x, y, 0.05, 0.95, alpha=0.0125) > 7
    assert runs_needed([1.0], [2.0], 0.05, 0.95) is None


@pytest.mark.slow
def test_one_slowed_phase_is_found_alone_across_rows():
    """The issue's case: 8 vs 8 synthetic prover runs (42 rows), 3 % noise, msm_l +15 %. Each row
    alone at 95 % also called unchanged phases in most comparisons; decided together (the
    default) msm_l is found every time and, its own rows and ancestors aside, alone in at least
    9 of 10 (benchmarks/bench_ab_calls.py: 99 % over 200)."""
    own = {"(run)", "(prove)", "prove", "prove/msm_l"}
    found = alone = alone_none = 0
    for rep in range(10):
        base = [synthetic_run(7000 + 100 * rep + s, circuits=2, devices=2) for s in range(8)]
        var = [synthetic_run(7050 + 100 * rep + s, circuits=2, devices=2, slow={"msm_l": 0.15}) for s in range(8)]
        res = compare_sets(base, var)
        called = [r for r in res.rows if r.verdict in ("slower", "faster")]
        hit = res.find("prove/msm_l").verdict == "slower"
        found += hit
        alone += hit and all(r.path in own for r in called)
        per_row = compare_sets(base, var, correction="none", equivalence=0.0)
        alone_none += all(r.path in own for r in per_row.rows if r.verdict in ("slower", "faster"))
    assert found == 10 and alone >= 9
    assert alone_none <= 7  # the old per-row verdicts call something else in some comparisons


def test_per_run_cupti_clock_figures_are_not_environment_differences():
    """Each process measures its own CUPTI clock offset and makes its own number of records; a changed CUPTI
    version or dropped records are still named."""
    def res(off, rec, ver="13.0", dropped=0):
        return {"gputrace.cupti.clock_offset_ns": off, "gputrace.cupti.clock_offset_first_ns": off,
                "gputrace.cupti.clock_bracket_ns": off * 3, "gputrace.cupti.clock_max_drift_ns": off // 2,
                "gputrace.cupti.records": rec, "gputrace.cupti.version": ver, "gputrace.cupti.dropped": dropped}

    assert check_environment([res(119, 7000), res(114, 7100)], [res(117, 9000), res(110, 9050)]).ok
    chk = check_environment([res(119, 7000)], [res(117, 7000, ver="13.1", dropped=5)])
    assert set(chk.differences) == {"gputrace.cupti.version", "gputrace.cupti.dropped"}


def test_environment_warnings_print_one_per_line():
    """The warning panel breaks its lines for real; a control character inside a value stays escaped."""
    from rich.console import Console

    from gputrace.commands.compare import environment_panel

    a = {"gputrace.git.commit": "abc", "host.name": "x"}
    b = {"gputrace.git.commit": "de\nf", "host.name": "y"}
    env = check_environment([a], [b])
    con = Console(width=200, record=True, force_terminal=False)
    con.print(environment_panel(env.warnings))
    lines = [ln for ln in con.export_text().splitlines() if "environment differs" in ln]
    assert len(lines) == 2 and "\\x0a" not in lines[0] + lines[1].split("de")[0]
    assert any("de\\x0af" in ln or "de\\nf" in ln for ln in lines)

"""Kernel evidence of factorial verdicts (``gputrace ab --cuda-activity``) on synthetic CUPTI-like runs: a switch
that makes kernels slower is called ``kernels``; one that only lengthens the host's launch gaps is called ``host
timing`` through its launch gaps; a null switch moves nothing and is called nowhere; copies carry GB/s."""

from __future__ import annotations

import pytest

from gputrace.analysis.ab.abtest import analyse
from gputrace.analysis.ab.design import factorial
from gputrace.analysis.ab.evidence import HOST_TIMING, KERNELS, NO_DATA, PhaseEvidence, classify, evidence_table
from gputrace.analysis.ab.measures import COPY_CLOCK, GAP_CLOCK, KERNEL_CLOCK, SYNC_CLOCK, run_measures
from gputrace.testing.activity_synth import activity_run_timeline

U = ("kern", "gaps", "null")


def _runs(reps: int = 3, seed: int = 0):
    runs = {}
    k = 0
    for v in factorial(U, "full"):
        runs[v] = []
        for r in range(reps):
            k += 1
            tl = activity_run_timeline(kernels=200, kernels_per_phase=20, seed=seed * 1000 + k,
                                       launch_gap_ns=90_000 if "gaps" in v.switches else 30_000,
                                       kernel_scale={"msm_bucket": 4.0} if "kern" in v.switches else None)
            m = run_measures(tl, f"{v.name}/{r}")
            m.round = r
            runs[v].append(m)
    return runs


def test_measures_carry_the_evidence_clocks():
    m = run_measures(activity_run_timeline(kernels=200, kernels_per_phase=20, seed=3))
    clocks = {k[2] for k in m.values if k[0] == "prove/msm_h" and k[1] is None}
    assert {KERNEL_CLOCK, GAP_CLOCK, "host", "gpu busy"} <= clocks
    copies = {k[2] for k in m.values if k[0] == "prove/h2d" and k[1] is None and k[2].startswith(COPY_CLOCK)}
    assert copies == {"copy HtoD PINNED", "copy HtoD PAGEABLE"}
    # bandwidth from bytes and copy time: the generator's 25 GB/s pinned and 6 GB/s pageable copies
    for kind, gbps in (("copy HtoD PINNED", 25.0), ("copy HtoD PAGEABLE", 6.0)):
        key = ("prove/h2d", None, kind)
        assert m.copy_bytes[key] / m.values[key].total() == pytest.approx(gbps, rel=0.01)
    assert ("prove", None, SYNC_CLOCK) in m.values  # the batch's stream synchronisation, under the root


@pytest.mark.parametrize("seed", [0, 1])
def test_verdicts_carry_kernel_evidence(seed):
    runs = _runs(seed=seed)
    rep = analyse(runs, "factorial", U)
    fr = rep.factorial
    assert fr is not None and rep.evidence
    by = {(pe.term, pe.path): pe for pe in rep.evidence}
    kern = [pe for (t, p), pe in by.items() if t == "kern" and p.startswith("prove/msm")]
    assert kern and all(pe.verdict == KERNELS and pe.kernels.ns > 0 for pe in kern)
    gaps = [pe for (t, p), pe in by.items() if t == "gaps" and p.startswith("prove/")]
    assert gaps and all(pe.verdict == HOST_TIMING for pe in gaps)
    assert all(pe.kernels is None or not pe.kernels.significant for pe in gaps)
    assert any(b.startswith("launch gaps +") for pe in gaps for b in pe.because)
    assert not [pe for pe in rep.evidence if pe.term == "null"]  # the null switch is called nowhere
    assert not [e for e in fr.effects if e.term == "null" and e.significant and e.clock == "host"]
    assert any(line.startswith("kernel evidence: kern:") for line in rep.conclusions)
    doc = rep.to_dict()["kernel_evidence"]
    assert {d["verdict"] for d in doc} <= {KERNELS, HOST_TIMING, NO_DATA}


def test_copies_report_bandwidth_on_and_off():
    runs = _runs(reps=2)
    rep = analyse(runs, "factorial", U)
    from gputrace.analysis.ab.evidence import phase_evidence

    pe = phase_evidence(rep.factorial, runs, "gaps", "prove/h2d")
    assert pe is not None
    kinds = {c.kind: c for c in pe.copies}
    assert set(kinds) == {"HtoD PINNED", "HtoD PAGEABLE"}
    assert kinds["HtoD PINNED"].gbps_off == pytest.approx(25.0, rel=0.01)
    assert kinds["HtoD PAGEABLE"].gbps_on == pytest.approx(6.0, rel=0.01)
    assert "GB/s" in kinds["HtoD PAGEABLE"].describe()


def test_classify_without_activity_and_host_timing_without_cause():
    from gputrace.analysis.ab.effects import Effect

    def eff(ns, sig):
        return Effect("p", None, "host", "s", "log", 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, ns, ns, ns, 0.01, sig)

    pe = PhaseEvidence("s", "prove/pin", eff(5e6, True), None, None, None)
    classify(pe)
    assert pe.verdict == NO_DATA
    pe = PhaseEvidence("s", "prove/msm_a", eff(5e6, True), eff(1e3, False), eff(2e3, False), None)
    classify(pe)
    assert (pe.verdict, pe.because) == (HOST_TIMING, [])
    pe = PhaseEvidence("s", "prove/msm_a", eff(5e6, True), eff(4e6, True), eff(2e3, False), eff(3e6, True))
    classify(pe)
    assert pe.verdict == KERNELS
    assert evidence_table(analyse(_runs(reps=2), "factorial", U).factorial, {}) is not None


def test_opt_sets_lines_carry_the_kernel_line():
    """Without a factorial, each comparison's sentence ends with the kernel evidence of the ``prove`` root: slower
    kernels read ``-> kernels``, longer launch delays ``-> host timing``."""
    from gputrace.analysis.ab.design import opt_sets

    runs = {}
    for v in opt_sets(["none", "kern", "gaps"], U):
        runs[v] = [run_measures(activity_run_timeline(
            kernels=200, kernels_per_phase=20, seed=50 + r, launch_gap_ns=90_000 if "gaps" in v.switches else 30_000,
            kernel_scale={"msm_bucket": 4.0} if "kern" in v.switches else None)) for r in range(10)]
    rep = analyse(runs, "opt-sets", U)
    lines = {ln.split(":")[0]: ln for ln in rep.conclusions}
    assert lines["kern vs none"].endswith("-> kernels")
    assert lines["gaps vs none"].endswith("-> host timing") and "launch gaps +" in lines["gaps vs none"]


def test_a_tiny_kernel_change_is_not_the_cause_and_copies_can_be():
    """CUPTI kernel times are nearly noise-free, so a 0.9 ms kernel change is significant under a bracket that moved
    by 188 ms, and still not its cause; a pageable upload's +329 ms of copies is."""
    from gputrace.analysis.ab.effects import Effect
    from gputrace.analysis.ab.evidence import COPIES, MATERIAL, CopyEvidence

    def eff(ns, sig=True):
        return Effect("p", None, "host", "s", "log", 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, ns, ns, ns, 0.01, sig)

    pe = PhaseEvidence("b1", "prove/msm_h", eff(43.8e6), eff(-0.242e6), eff(30.9e6), None)
    classify(pe)
    assert pe.verdict == HOST_TIMING and pe.because == ["launch gaps +30.9 ms", "kernels -242 µs"]
    copies = [CopyEvidence("HtoD PAGEABLE", eff(329e6), None, 7.4), CopyEvidence("HtoD PINNED", eff(-51.3e6), 47.2, None)]
    pe = PhaseEvidence("pageable", "prove/load_bases", eff(-188e6), eff(-0.886e6), eff(-97.8e6), eff(-28.2e6), copies)
    classify(pe)
    assert pe.verdict == COPIES and pe.because == ["copies HtoD PAGEABLE +329 ms", "copies HtoD PINNED -51.3 ms"]
    assert pe.describe().endswith("-> copies (copies HtoD PAGEABLE +329 ms, copies HtoD PINNED -51.3 ms)")
    pe = PhaseEvidence("s", "prove/msm_a", eff(10e6), eff(MATERIAL * 10e6), None, None)
    classify(pe)
    assert pe.verdict == KERNELS  # at the bar exactly

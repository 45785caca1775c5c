"""Analysis of an A/B experiment: the headline comparison, per-design breakdowns, and plain
sentences naming which switch (or interaction) explains the end-to-end change and through
which phases.

* opt-sets: every set against the first.
* one-at-a-time: each switch alone against none, and all against all-but-that-switch
  (leave-one-out). A switch that hurts only in the presence of the others (alone not slower,
  leave-one-out slower) is flagged as acting through an interaction.
* factorial: `effects.fit_effects` (main effects, averaged over the other switches' settings,
  and two-way interactions per phase; effect coding), and whether the model's all-on-vs-none
  total (the sum of the main effects) accounts for the measured one (`decomposition.Decomposition`).

Pure numpy/scipy over `RunMeasures`; any thread.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gputrace.analysis._common import fmt_ns
from gputrace.analysis.ab.compare import ComparisonResult, PhaseComparison, compare_measures
from gputrace.analysis.ab.design import Variant
from gputrace.analysis.ab.effects import CODING, FactorialResult, fit_effects
from gputrace.analysis.ab.evidence import PhaseEvidence, evidence_table, has_activity
from gputrace.analysis.ab.measures import COPY_CLOCK, GAP_CLOCK, KERNEL_CLOCK, PROVE_PATH, RUN_PATH, RunMeasures

E2E_PATHS = (PROVE_PATH, RUN_PATH)


def e2e_row(res: ComparisonResult) -> PhaseComparison | None:
    """The ``(prove)`` row when the runs have prove roots, else ``(run)``."""
    return res.find(PROVE_PATH) or res.find(RUN_PATH)


def moved_phases(res: ComparisonResult, verdict: str = "slower", min_share: float = 0.05) -> list[PhaseComparison]:
    """Phases (all devices, host clock) with this verdict, largest time change first; a path
    is left out when a listed descendant carries at least half of its change, or when its
    change is under ``min_share`` of the end-to-end change (real but not an explanation)."""
    e2e = e2e_row(res)
    floor = min_share * abs(e2e.diff_ns) if e2e is not None and math.isfinite(e2e.diff_ns) else 0.0
    cand = [r for r in res.rows if r.verdict == verdict and r.device is None and r.clock == "host"
            and r.path not in E2E_PATHS and r.path != "prove" and abs(r.diff_ns) >= floor]
    extra = {"slower": "new", "faster": "gone"}.get(verdict)
    cand += [r for r in res.rows
             if r.verdict == extra and r.device is None and r.clock == "host" and abs(r.diff_ns) >= floor]
    cand.sort(key=lambda r: -abs(r.diff_ns))
    keep = []
    for r in cand:
        if any(d.path.startswith(r.path + "/") and abs(d.diff_ns) >= 0.5 * abs(r.diff_ns) for d in cand):
            continue
        keep.append(r)
    return keep


def _via(rows: Sequence[PhaseComparison]) -> str:
    parts = []
    for r in rows[:5]:
        sign = "+" if r.diff_ns >= 0 else "-"
        if r.verdict in ("new", "gone"):
            tag = f" ({r.verdict})"
        else:
            tag = f" ({r.rel:+.0%})" if math.isfinite(r.rel) else ""
        parts.append(f"{r.path} {sign}{fmt_ns(abs(r.diff_ns))}{tag}")
    return ", ".join(parts) if parts else "no single phase"


def describe_change(label: str, res: ComparisonResult) -> str:
    """'all vs none: (prove) +19.1% [+17.0%, +21.3%] slower, through prove/pin +8.6 s (new), ...'"""
    row = e2e_row(res)
    if row is None:
        return f"{label}: no end-to-end measurement"
    iv = f" [{row.rel_low:+.1%}, {row.rel_high:+.1%}]" if math.isfinite(row.rel_low) else ""
    text = f"{label}: {row.path} {row.rel:+.1%}{iv} {row.verdict}"
    if row.verdict in ("slower", "faster"):
        text += ", through " + _via(moved_phases(res, row.verdict))
    else:
        moved = moved_phases(res, "slower", 0.0) + moved_phases(res, "faster", 0.0)
        moved.sort(key=lambda r: -abs(r.diff_ns))
        if moved:
            text += "; phases that did move: " + _via(moved)
    ev = kernel_line(res)
    if ev:
        text += "; " + ev
    return text


def kernel_line(res: ComparisonResult) -> str | None:
    """'kernel evidence: kernels +15.3 ms (too few runs), launch gaps +509 ms (...), copies HtoD PAGEABLE ...
    -> host timing' for a comparison whose runs carry CUDA activity (None otherwise): the ``prove`` root's kernel
    time and launch gaps and the largest change of any copy kind; when the end-to-end change is decided (slower or
    faster), ``host timing`` if the kernels carry under a quarter of it, else ``kernels``."""
    e2e = e2e_row(res)
    k = res.find("prove", None, KERNEL_CLOCK)
    if e2e is None or k is None or not math.isfinite(e2e.diff_ns):
        return None
    parts = [f"kernels {_sgn(k.diff_ns)} ({k.verdict})"]
    g = res.find("prove", None, GAP_CLOCK)
    if g is not None:
        parts.append(f"launch gaps {_sgn(g.diff_ns)} ({g.verdict})")
    copies = [r for r in res.rows if r.device is None and r.clock.startswith(COPY_CLOCK) and math.isfinite(r.diff_ns)]
    if copies:
        c = max(copies, key=lambda r: abs(r.diff_ns))
        parts.append(f"{c.clock.replace(COPY_CLOCK, 'copies ')} in {c.path} {_sgn(c.diff_ns)} ({c.verdict})")
    text = "kernel evidence: " + ", ".join(parts)
    if e2e.verdict in ("slower", "faster"):
        text += " -> host timing" if abs(k.diff_ns) < 0.25 * abs(e2e.diff_ns) else " -> kernels"
    return text


def _sgn(ns: float) -> str:
    return ("+" if ns >= 0 else "-") + fmt_ns(abs(ns))


@dataclass
class SwitchFinding:
    """One-at-a-time result for one switch: ``alone`` (switch alone vs none) and ``loo``
    (all vs all-but-this) comparisons, their end-to-end rows, and a sentence."""

    switch: str
    alone: ComparisonResult | None
    loo: ComparisonResult | None
    text: str
    hurts: bool
    interaction: bool


@dataclass
class ABReport:
    """Everything `analyse` found. ``comparisons``: (label, ComparisonResult), the headline
    first when there is one; ``switch_findings`` (one-at-a-time), ``factorial`` (factorial);
    ``conclusions``: the sentences to print, most important first."""

    design: str
    switches: tuple[str, ...]
    comparisons: list[tuple[str, ComparisonResult]] = field(default_factory=list)
    switch_findings: list[SwitchFinding] = field(default_factory=list)
    factorial: FactorialResult | None = None
    conclusions: list[str] = field(default_factory=list)
    evidence: list[PhaseEvidence] = field(default_factory=list)  # factorial with GPU activity (``evidence.py``)

    def to_dict(self) -> dict:
        def row(res: ComparisonResult | None) -> dict | None:
            r = e2e_row(res) if res is not None else None
            return r.to_dict() if r is not None else None

        d: dict[str, object] = {
            "design": self.design,
            "switches": list(self.switches),
            "conclusions": self.conclusions,
            "comparisons": [{"label": lab, **res.to_dict()} for lab, res in self.comparisons],
            "switch_findings": [
                {"switch": f.switch, "text": f.text, "hurts": f.hurts, "interaction": f.interaction,
                 "alone": row(f.alone), "leave_one_out": row(f.loo)}
                for f in self.switch_findings
            ],
        }
        if self.factorial is not None:
            fr = self.factorial
            d["factorial"] = {
                "model": fr.model, "coding": CODING, "df": fr.df, "terms": fr.terms, "e2e": fr.e2e_path,
                "culprits": [c.describe() for c in fr.culprits], "helpers": [c.describe() for c in fr.helpers],
                "decomposition": fr.decomposition.to_dict() if fr.decomposition is not None else None,
                "effects": [{k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                             for k, v in e.__dict__.items()} for e in fr.effects],
            }
        if self.evidence:
            d["kernel_evidence"] = [pe.to_dict() for pe in self.evidence]
        return d


def _find(runs: Mapping[Variant, Sequence[RunMeasures]],
          on: frozenset[str]) -> tuple[Variant, Sequence[RunMeasures]] | None:
    for v, rs in runs.items():
        if v.switches == on and rs:
            return v, rs
    return None


def analyse(
    runs: Mapping[Variant, Sequence[RunMeasures]],
    design: str,
    switches: Sequence[str],
    *,
    confidence: float = 0.95,
    equivalence: float = 0.02,
    familywise: bool = False,
    correction: str | None = None,
) -> ABReport:
    """Analyse measured runs per variant (warm-ups already excluded; the first variant is
    the baseline for opt-sets). Raises ValueError for an unknown design or a variant
    without runs."""
    if design not in ("opt-sets", "one-at-a-time", "factorial"):
        raise ValueError(f"unknown design {design!r}")
    empty = [v.name for v, rs in runs.items() if not rs]
    if empty:
        raise ValueError(f"no successful runs for variant(s) {', '.join(empty)}")
    u = tuple(switches)
    rep = ABReport(design, u)
    kw: dict[str, Any] = dict(confidence=confidence, equivalence=equivalence, familywise=familywise,
                              correction=correction)
    none, allv = _find(runs, frozenset()), _find(runs, frozenset(u))
    if design == "opt-sets":
        items = list(runs.items())
        bv, brs = items[0]
        for v, rs in items[1:]:
            res = compare_measures(brs, rs, **kw)
            rep.comparisons.append((f"{v.name} vs {bv.name}", res))
            rep.conclusions.append(describe_change(f"{v.name} vs {bv.name}", res))
        return rep
    if none and allv and none[0] != allv[0]:
        res = compare_measures(none[1], allv[1], **kw)
        rep.comparisons.append(("all vs none", res))
        rep.conclusions.append(describe_change("all vs none", res))
    if design == "one-at-a-time":
        for s in u:
            alone = _find(runs, frozenset([s]))
            drop = _find(runs, frozenset(u) - {s})
            a_res = compare_measures(none[1], alone[1], **kw) if none and alone and alone[0] != none[0] else None
            l_res = compare_measures(drop[1], allv[1], **kw) if drop and allv and drop[0] != allv[0] else None
            if a_res is not None:
                rep.comparisons.append((f"{s} alone vs none", a_res))
            if l_res is not None and l_res is not a_res:
                rep.comparisons.append((f"all vs all without {s}", l_res))
            rep.switch_findings.append(_oat_finding(s, a_res, l_res))
        hurt = [f for f in rep.switch_findings if f.hurts]
        rep.conclusions += [f.text for f in hurt] + [f.text for f in rep.switch_findings if not f.hurts]
        return rep
    fr = fit_effects(runs, u, confidence)
    rep.factorial = fr
    if not rep.conclusions:
        rep.conclusions.append(fr.predicted_line())  # a fraction without both corners
    elif (head := e2e_row(rep.comparisons[0][1])) is not None and head.verdict == "too few runs":
        # Too few runs of those two corners alone; the model pools every run.
        rep.conclusions[0] = fr.predicted_line()
    else:
        rep.conclusions.insert(1, fr.predicted_line())  # does the decomposition add up to the measured total?
    rep.conclusions += fr.summary_lines()
    if has_activity(fr):
        rep.evidence = evidence_table(fr, runs)
        rep.conclusions += ["kernel evidence: " + pe.describe() for pe in rep.evidence
                            if any(c.term == pe.term for c in fr.culprits + fr.helpers)]
    return rep


def _oat_finding(s: str, a_res: ComparisonResult | None, l_res: ComparisonResult | None) -> SwitchFinding:
    a = e2e_row(a_res) if a_res else None
    lo = e2e_row(l_res) if l_res else None
    a_v = a.verdict if a else "not run"
    l_v = lo.verdict if lo else "not run"
    hurts = l_v == "slower" or a_v == "slower"
    interaction = (l_v in ("slower", "faster") and a_v in ("unchanged", "inconclusive")) or (
        a_v in ("slower", "faster") and l_v in ("unchanged", "inconclusive")) or (
        a_v in ("slower", "faster") and l_v in ("slower", "faster") and a_v != l_v)
    parts = [s + ":"]
    if lo is not None:
        parts.append(f"with all others on it changes the run {lo.rel:+.1%} ({l_v})")
        if l_v in ("slower", "faster") and l_res is not None:
            parts.append("through " + _via(moved_phases(l_res, l_v)))
    if a is not None:
        parts.append(f"; alone {a.rel:+.1%} ({a_v})")
        if a_v in ("slower", "faster") and l_v not in ("slower", "faster") and a_res is not None:
            parts.append("through " + _via(moved_phases(a_res, a_v)))
    if interaction:
        parts.append("; the two disagree: an interaction with the other switches, or noise at this N "
                     "(--design factorial separates them and names the partner)")
    return SwitchFinding(s, a_res, l_res, " ".join(parts).replace(" ;", ";"), hurts, interaction)

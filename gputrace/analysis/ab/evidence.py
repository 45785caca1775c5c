"""Kernel evidence for a factorial experiment's verdicts (``gputrace ab --cuda-activity``).

For one model term (a switch, or an interaction) and one phase path whose host bracket the term moves, the
evidence is the same term's fitted effect on that phase's GPU activity (``measures``' evidence clocks): the
kernels it enqueued, the launch gaps inside it, the host's sync waits in it and its copies per direction and host
memory kind, with the copies' bandwidth with the switch on and off. The verdict:

* ``kernels``: the kernel time moved significantly, by at least ``MATERIAL`` of the bracket's change (the GPU did
  different work);
* ``copies``: not the kernels, but the copy time moved significantly, by at least ``MATERIAL`` of the bracket's
  change (the GPU moved bytes differently: a pageable upload, a new copy);
* ``host timing``: the bracket moved but neither the kernels nor the copies did, materially; ``because`` names
  what did (launch gaps, sync waits, small kernel or copy changes), or is empty when nothing on the GPU side moved
  (host code, waits on other threads). CUPTI kernel times are nearly noise-free, so a kernel change of a few
  microseconds under a bracket that moved by milliseconds is significant and still not the cause;
* ``no kernel data``: the runs carry no GPU activity for that phase (a host phase, or CUPTI was off).

Pure Python over ``effects.FactorialResult``; any thread.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gputrace.analysis._common import fmt_ns
from gputrace.analysis.ab.design import Variant
from gputrace.analysis.ab.effects import Effect, FactorialResult
from gputrace.analysis.ab.measures import (
    COPY_CLOCK,
    GAP_CLOCK,
    KERNEL_CLOCK,
    PROVE_PATH,
    RUN_PATH,
    SYNC_CLOCK,
    RunMeasures,
)

KERNELS, COPIES, HOST_TIMING, NO_DATA = "kernels", "copies", "host timing", "no kernel data"
#: The share of the bracket's change that the kernels' (or the copies') change must reach to be named the cause.
MATERIAL = 0.25


@dataclass
class CopyEvidence:
    """One copy kind's effect in a phase: ``kind`` ("HtoD PAGEABLE"), its time ``effect``, and GB/s in the runs
    with the term's switches all on (``gbps_on``) and all off (``gbps_off``); None where no bytes moved."""

    kind: str
    effect: Effect
    gbps_off: float | None
    gbps_on: float | None

    def describe(self) -> str:
        bw = ""
        if self.gbps_off is not None or self.gbps_on is not None:
            bw = f", {_gbps(self.gbps_off)} -> {_gbps(self.gbps_on)} GB/s"
        return f"copies {self.kind} {_signed(self.effect.ns)}{bw}"


@dataclass
class PhaseEvidence:
    """A term's effect on one phase path: ``bracket`` (host clock), the evidence effects (None where the runs have
    no such measurement), ``verdict`` and ``because`` (the evidence that moved, for ``copies`` and ``host timing``)."""

    term: str
    path: str
    bracket: Effect
    kernels: Effect | None
    gaps: Effect | None
    syncs: Effect | None
    copies: list[CopyEvidence] = field(default_factory=list)
    verdict: str = NO_DATA
    because: list[str] = field(default_factory=list)

    def describe(self) -> str:
        parts = [f"{self.path} bracket {_signed(self.bracket.ns)}"]
        for name, e in (("kernels", self.kernels), ("launch gaps", self.gaps), ("sync waits", self.syncs)):
            if e is not None:
                parts.append(f"{name} {_signed(e.ns)}{'' if e.significant else ' (n.s.)'}")
        parts += [c.describe() + ("" if c.effect.significant else " (n.s.)") for c in self.copies]
        verdict = self.verdict + (f" ({', '.join(self.because)})" if self.because else "")
        return f"{self.term}: " + "; ".join(parts) + f" -> {verdict}"

    def to_dict(self) -> dict:
        def eff(e: Effect | None) -> dict | None:
            if e is None:
                return None
            return {"ns": _finite(e.ns), "ns_low": _finite(e.ns_low), "ns_high": _finite(e.ns_high),
                    "rel": _finite(e.rel), "significant": e.significant}

        return {"term": self.term, "path": self.path, "bracket": eff(self.bracket), "kernels": eff(self.kernels),
                "launch_gaps": eff(self.gaps), "sync_waits": eff(self.syncs), "verdict": self.verdict,
                "because": self.because,
                "copies": [{"kind": c.kind, **(eff(c.effect) or {}), "gbps_off": c.gbps_off, "gbps_on": c.gbps_on}
                           for c in self.copies]}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _gbps(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _signed(ns: float) -> str:
    if not math.isfinite(ns):
        return "?"
    return ("+" if ns >= 0 else "-") + fmt_ns(abs(ns))


def has_activity(fr: FactorialResult) -> bool:
    """True when the experiment's runs carried GPU activity (any kernel evidence was fitted)."""
    return any(e.clock == KERNEL_CLOCK for e in fr.effects)


def _bandwidth(runs: Mapping[Variant, Sequence[RunMeasures]], term: str,
               key: tuple) -> tuple[float | None, float | None]:
    """GB/s (bytes per ns) of the copies under ``key`` in the runs with every switch of ``term`` off, and on."""
    names = term.split("*")
    acc = {False: [0.0, 0.0], True: [0.0, 0.0]}
    for v, rs in runs.items():
        on = all(s in v.switches for s in names)
        off = not any(s in v.switches for s in names)
        if not (on or off):
            continue
        for r in rs:
            nb = r.copy_bytes.get(key)
            t = r.values.get(key)
            if nb is None or t is None:
                continue
            acc[on][0] += nb
            acc[on][1] += t.total()
    return tuple(a[0] / a[1] if a[1] > 0 else None for a in (acc[False], acc[True]))  # type: ignore[return-value]


def phase_evidence(fr: FactorialResult, runs: Mapping[Variant, Sequence[RunMeasures]], term: str,
                   path: str) -> PhaseEvidence | None:
    """The evidence of ``term`` on ``path`` (all devices); None when the term has no host effect fitted there."""
    mine = {e.clock: e for e in fr.effects if e.term == term and e.path == path and e.device is None}
    bracket = mine.get("host")
    if bracket is None:
        return None
    pe = PhaseEvidence(term, path, bracket, mine.get(KERNEL_CLOCK), mine.get(GAP_CLOCK), mine.get(SYNC_CLOCK))
    # Sync waits of the phase's sub-phases count too (a ``sync`` child span holds them in the stream flow).
    if pe.syncs is None or not pe.syncs.significant:
        kids = [e for e in fr.effects if e.term == term and e.device is None and e.clock == SYNC_CLOCK
                and e.path.startswith(path + "/") and e.significant]
        if kids:
            pe.syncs = max(kids, key=lambda e: abs(e.ns))
    for clock, e in sorted(mine.items()):
        if clock.startswith(COPY_CLOCK):
            off, on = _bandwidth(runs, term, (path, None, clock))
            pe.copies.append(CopyEvidence(clock[len(COPY_CLOCK):], e, off, on))
    classify(pe)
    return pe


def classify(pe: PhaseEvidence) -> None:
    """Set ``verdict`` and ``because`` from the evidence effects (module doc)."""
    if pe.kernels is None and pe.gaps is None and not pe.copies and pe.syncs is None:
        pe.verdict, pe.because = NO_DATA, []
        return
    floor = MATERIAL * abs(pe.bracket.ns)
    if pe.kernels is not None and pe.kernels.significant and abs(pe.kernels.ns) >= floor:
        pe.verdict = KERNELS
        pe.because = []
        return
    moved = [c for c in pe.copies if c.effect.significant]
    if moved and abs(sum(c.effect.ns for c in moved)) >= floor:
        pe.verdict = COPIES
        pe.because = [f"copies {c.kind} {_signed(c.effect.ns)}" for c in moved]
        return
    pe.verdict = HOST_TIMING
    why = []
    if pe.gaps is not None and pe.gaps.significant:
        why.append(f"launch gaps {_signed(pe.gaps.ns)}")
    if pe.syncs is not None and pe.syncs.significant:
        why.append(f"sync waits {_signed(pe.syncs.ns)}")
    if pe.kernels is not None and pe.kernels.significant:
        why.append(f"kernels {_signed(pe.kernels.ns)}")
    why += [f"copies {c.kind} {_signed(c.effect.ns)}" for c in moved]
    pe.because = why


def term_evidence(fr: FactorialResult, runs: Mapping[Variant, Sequence[RunMeasures]], term: str,
                  limit: int = 4) -> list[PhaseEvidence]:
    """Evidence for the phases through which ``term`` significantly moves host brackets (all devices), largest
    first, nesting de-duplicated as in the culprit lists; at most ``limit``."""
    cand = [e for e in fr.effects if e.term == term and e.device is None and e.clock == "host" and e.significant
            and e.path not in (PROVE_PATH, RUN_PATH, "prove")]
    cand.sort(key=lambda e: -abs(e.ns))
    keep: list[Effect] = []
    for e in cand:
        if any(d.path.startswith(e.path + "/") and abs(d.ns) >= 0.5 * abs(e.ns) for d in cand):
            continue
        keep.append(e)
    out = []
    for e in keep[:limit]:
        pe = phase_evidence(fr, runs, term, e.path)
        if pe is not None:
            out.append(pe)
    return out


def evidence_table(fr: FactorialResult, runs: Mapping[Variant, Sequence[RunMeasures]],
                   limit: int = 4) -> list[PhaseEvidence]:
    """Evidence for every main effect and every significant end-to-end interaction, switch order."""
    terms = list(fr.switches) + [c.term for c in fr.culprits + fr.helpers if "*" in c.term]
    out: list[PhaseEvidence] = []
    for t in terms:
        out += term_evidence(fr, runs, t, limit)
    return out

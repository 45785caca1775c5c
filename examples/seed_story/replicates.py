"""Each round of a factorial ``gputrace ab`` experiment as a repeated experiment: is every injected effect found?

A round of an interleaved factorial experiment runs every variant once, so it is a complete replicate of the
design. This script fits the factorial model (``effects.fit_effects``: main effects and two-way interactions, effect
coding, so a main effect is the switch's change averaged over the other switches' settings) on each complete round
alone and, per switch, counts the rounds in which its main effect on ``(prove)`` is called (Holm, as ``ab`` does)
with the expected sign *and* its expected phase is among the phases the term significantly moves. A control switch
(``--null``) must be called in none. The pooled fit over every round is reported beside. Each round also holds one
all-on and one no-switch run (when the design has both corners), so each round's model total (the sum of the main
effects) is checked against its own measured all vs none (``decomposition.Decomposition``); a line after the table
counts the rounds in which the decomposition accounts for the measured total.

    python examples/seed_story/replicates.py EXPERIMENT_DIR --expect b1=pin,unpin --expect reload=load_bases,sync \\
        --null null [--json OUT.json]

``--expect SWITCH=PHASE[,PHASE]``: the switch's effect counts as found in the right phase when any listed phase
name (the last part of a path, ``prove/pin`` -> ``pin``) is among the phases it significantly moves with the e2e
effect's sign, on the host bracket or, with ``ab --cuda-activity``, on the phase's GPU busy time, kernels, sync waits
or copies (``_PHASE_CLOCKS``). Prints a Markdown table; exit 0 (the numbers are the result, not a gate).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gputrace.analysis.ab.design import Variant
from gputrace.analysis.ab.effects import CODING, FactorialResult, fit_effects
from gputrace.analysis.ab.experiment import Experiment
from gputrace.analysis.ab.measures import COPY_CLOCK, KERNEL_CLOCK, PROVE_PATH, RUN_PATH, SYNC_CLOCK, RunMeasures


@dataclass
class SwitchTally:
    """Per switch: rounds fitted, rounds in which the e2e main effect was called slower (``called``), and called
    with an expected phase among its significant phases (``found``); the median e2e effect over rounds."""

    switch: str
    expect: list[str]
    rounds: int = 0
    called: int = 0
    found: int = 0
    effects: list[float] = field(default_factory=list)  # e2e relative effect per round


@dataclass
class RoundDecomposition:
    """One complete round's all vs none: ``verdict`` (``accounts``, ``does not``, ``not measured``, ``no interval``:
    `effects.Decomposition`), the measured total and the model's total with its interval (fractions; NaN when
    absent)."""

    round: int
    verdict: str
    measured: float
    model: float
    low: float
    high: float


def decomposition_counts(per_round: Sequence[RoundDecomposition]) -> tuple[int, int]:
    """(rounds whose decomposition accounts for the measured total, rounds where that could be decided)."""
    decided = [d for d in per_round if d.verdict in ("accounts", "does not")]
    return sum(d.verdict == "accounts" for d in decided), len(decided)


def _round_decomposition(k: int, fr: FactorialResult) -> RoundDecomposition:
    d = fr.decomposition
    if d is None:
        return RoundDecomposition(k, "not measured", *(4 * [float("nan")]))
    if d.scale == "log":
        return RoundDecomposition(k, d.verdict, d.measured_rel, d.rel, d.rel_low, d.rel_high)
    return RoundDecomposition(k, d.verdict, d.measured, d.estimate, d.low, d.high)  # ns (linear scale)


def by_round(runs: Mapping[Variant, Sequence[RunMeasures]]) -> dict[int, dict[Variant, list[RunMeasures]]]:
    """Complete rounds only (every variant measured in it), round -> variant -> its runs of that round."""
    rounds: dict[int, dict[Variant, list[RunMeasures]]] = {}
    for v, rs in runs.items():
        for r in rs:
            if r.round is not None:
                rounds.setdefault(r.round, {}).setdefault(v, []).append(r)
    return {k: d for k, d in sorted(rounds.items()) if len(d) == len(runs)}


#: Clocks on which a phase counts as moved: its host bracket, and (``ab --cuda-activity``) the GPU work it
#: enqueued, its kernels, its sync waits and its copies. A pageable upload made on the loader's stream shows as
#: copy time and GPU busy time in ``load_bases`` while the host bracket shrinks (the driver's copy returns early).
#: Launch gaps are left out: idle time moves wherever the host waits, not where the cause is.
_PHASE_CLOCKS = ("host", "gpu busy", KERNEL_CLOCK, SYNC_CLOCK)


def _phase_hits(fr: FactorialResult, term: str, sign: float) -> set[str]:
    """Last path parts of the phases ``term`` significantly moves with ``sign`` on a ``_PHASE_CLOCKS`` clock or a
    copy clock (``copy HtoD PAGEABLE``...)."""
    return {e.path.rsplit("/", 1)[-1] for e in fr.effects
            if e.term == term and e.device is None and (e.clock in _PHASE_CLOCKS or e.clock.startswith(COPY_CLOCK))
            and e.significant and e.ns * sign > 0 and e.path not in (PROVE_PATH, RUN_PATH, "prove")}


def tally(fr: FactorialResult, tallies: dict[str, SwitchTally]) -> None:
    """Add one fitted replicate to ``tallies`` (switch -> SwitchTally)."""
    e2e = {e.term: e for e in fr.for_key(fr.e2e_path)}
    for s, t in tallies.items():
        e = e2e.get(s)
        if e is None:
            continue
        t.rounds += 1
        t.effects.append(e.rel if e.scale == "log" else e.ns)
        if not e.significant:
            continue
        t.called += 1
        sign = 1.0 if e.ns > 0 else -1.0
        if not t.expect or (_phase_hits(fr, s, sign) & set(t.expect)):
            t.found += 1


def replicates(exp_dir: Path, expect: Mapping[str, list[str]], confidence: float = 0.95
               ) -> tuple[dict[str, SwitchTally], FactorialResult, int, list[RoundDecomposition]]:
    """(tallies per switch, the pooled fit over every measured run, number of complete rounds fitted, each round's
    all-vs-none decomposition against its own all-on and no-switch runs)."""
    exp = Experiment.load(exp_dir)
    if exp.design != "factorial":
        raise ValueError(f"{exp_dir}: a {exp.design} experiment; replicates need a factorial one")
    runs = exp.measures()
    tallies = {s: SwitchTally(s, list(expect.get(s, []))) for s in exp.switches}
    rounds = by_round(runs)
    per_round = []
    for k, one in rounds.items():
        fr = fit_effects(one, exp.switches, confidence)
        tally(fr, tallies)
        per_round.append(_round_decomposition(k, fr))
    pooled = fit_effects({v: rs for v, rs in runs.items() if rs}, exp.switches, confidence)
    return tallies, pooled, len(rounds), per_round


def decomposition_line(per_round: Sequence[RoundDecomposition], pooled: FactorialResult) -> str:
    """'decomposition accounts for the measured total in K of N rounds; pooled: <the pooled fit's all vs none>'."""
    k, n = decomposition_counts(per_round)
    text = f"decomposition accounts for the measured total in {k} of {n} rounds"
    undecided = len(per_round) - n
    if undecided:
        why = sorted({d.verdict for d in per_round if d.verdict not in ("accounts", "does not")})
        text += f" ({undecided} more could not be checked: {', '.join(why)})"
    return text + "; pooled: " + pooled.predicted_line()


def markdown(tallies: Mapping[str, SwitchTally], pooled: FactorialResult, nrounds: int, null: Sequence[str]) -> str:
    e2e = {e.term: e for e in pooled.for_key(pooled.e2e_path)}
    out = [f"{nrounds} complete rounds, each fitted alone (main effects and two-way interactions, Holm at "
           f"{pooled.confidence:.0%}; {CODING}); pooled fit over every run: {pooled.df} residual df.", "",
           "| switch | expected phase | called / rounds | found in the right phase | median effect per round "
           "| pooled effect [interval] |",
           "| --- | --- | --- | --- | --- | --- |"]
    for s, t in tallies.items():
        med = sorted(t.effects)[len(t.effects) // 2] if t.effects else float("nan")
        e = e2e.get(s)
        pooled_s = "-" if e is None else (f"{e.rel:+.1%} [{e.rel_low:+.1%}, {e.rel_high:+.1%}]"
                                          + (" called" if e.significant else ""))
        role = "control (must not be called)" if s in null else ", ".join(t.expect) or "-"
        out.append(f"| {s} | {role} | {t.called} / {t.rounds} | {t.found} / {t.rounds} | {med:+.1%} | {pooled_s} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("experiment", type=Path)
    ap.add_argument("--expect", action="append", default=[], metavar="SWITCH=PHASE[,PHASE]")
    ap.add_argument("--null", action="append", default=[], metavar="SWITCH", help="a control switch")
    ap.add_argument("--confidence", type=float, default=0.95)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    expect: dict[str, list[str]] = {}
    for item in args.expect:
        name, _, phases = item.partition("=")
        if not name or not phases:
            print(f"replicates: --expect {item!r}: give SWITCH=PHASE[,PHASE]", file=sys.stderr)
            return 2
        expect[name.strip().lower()] = [p.strip() for p in phases.split(",") if p.strip()]
    try:
        tallies, pooled, n, per_round = replicates(args.experiment, expect, args.confidence)
    except (OSError, ValueError) as exc:
        print(f"replicates: {exc}", file=sys.stderr)
        return 1
    print(markdown(tallies, pooled, n, [s.lower() for s in args.null]))
    print()
    print(decomposition_line(per_round, pooled))
    if args.json is not None:
        k, decided = decomposition_counts(per_round)
        dec = {"accounts": k, "rounds": decided, "per_round": [_finite(asdict(d)) for d in per_round],
               "pooled": pooled.decomposition.to_dict() if pooled.decomposition is not None else None}
        args.json.write_text(json.dumps({"rounds": n, "switches": [asdict(t) for t in tallies.values()],
                                         "decomposition": dec}, indent=1))
    return 0


def _finite(d: dict) -> dict:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


if __name__ == "__main__":
    raise SystemExit(main())

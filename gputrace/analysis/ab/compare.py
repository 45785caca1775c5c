"""Noise-aware comparison of two sets of runs, per phase path, device and clock.

For every measurement key (see `measures`), each side gives one value per run (instances
aligned: only ``(circuit, batch)`` instances present in every run are summed, so runs with
different batch contents still compare like with like). The shift variant - baseline is
estimated by Hodges–Lehmann with its distribution-free Mann–Whitney interval (`ranks`), on
log durations when every value is positive (timing noise is multiplicative, so the interval
is one for the *ratio*), else on nanoseconds. Rows are decided together (`family`: false
calls controlled across rows, Holm by default, and the equivalence margin). Verdicts:

* ``slower`` / ``faster``: called different across the rows *and* beyond ``±equivalence``
  (default 2 %);
* ``within margin``: called different, but the estimated change is inside the margin;
* ``unchanged``: the row's interval lies inside ``±equivalence``;
* ``inconclusive``: none of the above;
* ``too few runs``: no interval can reach the confidence with these N (3 vs 3 at 95 %);
* ``new`` / ``gone``: the phase ran in every run of one side and no run of the other;
* ``partial``: the phase ran in only some runs of a side (cold-start or setup work such as
  ``setup/key_save``): not tested, and never a regression.

Runs of an interleaved experiment (tagged with their ``round``) are paired by round when
there are enough rounds: the per-round differences then cancel load that drifts between
rounds (one-sample HL with the Wilcoxon signed-rank interval).

Warm-up runs (the first ``warmup`` per side, by start time) are discarded and listed;
outliers (more than 5 robust standard deviations and 10 % from their side's median) are
reported, never dropped.
Pure numpy/scipy; any thread. The per-key statistics live in :mod:`gputrace.analysis.ab.compare_stats`
(``compare_values`` and ``aligned_values`` are re-exported here).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from gputrace.analysis.ab.compare_stats import (
    OUTLIER_MIN_REL,
    OUTLIER_Z,
    aligned_values,
    compare_values,
    outlier_runs,
)
from gputrace.analysis.ab.environment import EnvironmentCheck, check_environment
from gputrace.analysis.ab.family import DEFAULT_CORRECTION, decide
from gputrace.analysis.ab.measures import PROVE_PATH, RUN_PATH, RunMeasures, run_measures
from gputrace.analysis.ab.ranks import k_signed, min_two_sided_p
from gputrace.analysis.lanes import device_name
from gputrace.timeline.model import Timeline

__all__ = [
    "VERDICTS",
    "OUTLIER_Z",
    "OUTLIER_MIN_REL",
    "AUTO_PAIR_MIN",
    "PhaseComparison",
    "ComparisonResult",
    "aligned_values",
    "compare_values",
    "compare_measures",
    "compare_sets",
]

VERDICTS = ("slower", "faster", "within margin", "unchanged", "inconclusive", "too few runs", "new", "gone", "partial")
AUTO_PAIR_MIN = 8  # rounds from which compare_measures(paired=None) pairs by round


@dataclass(frozen=True)
class PhaseComparison:
    """One row of a comparison (a phase path on a device and clock).

    * ``path``: ``prove/ntt/coset_ntt``, ``(run)`` (whole trace) or ``(prove)`` (extent of the
      ``prove`` roots); ``device``: GPU index,
      -1 host-only spans, ``None`` all devices together; ``clock``: ``host``, ``device`` or ``gpu busy``
      (kernel truth: the union of the device work the phase enqueued; see ``measures``).
    * ``n_base``/``n_variant``: runs per side; ``base_values``/``variant_values``: per-run ns.
    * ``base_median_ns``/``variant_median_ns``; ``diff_ns`` (variant - base, HL estimate) with
      ``diff_low_ns``/``diff_high_ns``; ``rel``/``rel_low``/``rel_high``: the same as a
      fraction of the baseline (+0.10 = 10 % slower). NaN bounds when undecidable.
    * ``p_value`` (two-sided Mann–Whitney), ``verdict`` (see module doc), ``scale``
      (``log`` or ``linear``), ``instances`` aligned and ``instances_dropped``.
    * ``q_value``: the p-value adjusted across rows (BH q, or Holm); ``significant``: called
      different across rows; ``interval_confidence``: the confidence of the interval shown
      (higher than the comparison's for rows called different: see `family`).
    * ``present_base``/``present_variant``: runs per side in which the phase ran.
    """

    path: str
    device: int | None
    clock: str
    n_base: int
    n_variant: int
    base_median_ns: float
    variant_median_ns: float
    diff_ns: float
    diff_low_ns: float
    diff_high_ns: float
    rel: float
    rel_low: float
    rel_high: float
    p_value: float
    verdict: str
    scale: str
    instances: int
    instances_dropped: int
    base_values: tuple[float, ...]
    variant_values: tuple[float, ...]
    q_value: float = float("nan")
    significant: bool = False
    interval_confidence: float = 0.0
    present_base: int = -1
    present_variant: int = -1

    @property
    def device_label(self) -> str:
        return device_name(self.device)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["base_values"], d["variant_values"] = list(self.base_values), list(self.variant_values)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


@dataclass
class ComparisonResult:
    """Everything `compare_sets` found; the TUI compare view and the CLI draw from it.

    * ``rows``: one `PhaseComparison` per key, ``(run)`` and ``(prove)`` first, then by time.
    * ``confidence``, ``equivalence``: as requested; ``row_confidence``: the confidence of the
      intervals of rows not called different (= ``confidence``; rows called different carry
      their own ``interval_confidence``); ``min_p``: the smallest p-value these N allow.
    * ``correction``, ``tested_rows``, ``called_rows``, ``thresholds``: how the rows were decided
      together (`family.decide`); ``undecidable`` / ``phases_undecidable``: no row / no phase row
      can be called with these N.
    * ``emulated``: ``{"base": {...}, "variant": {...}}``, the ``gputrace.emulated.*`` attributes.
    * ``base_labels``/``variant_labels``: runs used; ``warmup_dropped``: labels discarded.
    * ``base_representative``/``variant_representative``: index (into the runs used) of the
      run whose end-to-end time is closest to its side's median (for side-by-side timelines).
    * ``outliers``: ``{"side", "run", "path", "device", "clock", "value_ns", "median_ns", "z"}``.
    * ``environment``: the `EnvironmentCheck`.
    * ``paired_rounds``: number of rounds when runs were paired by experiment round (0: unpaired).
    """

    rows: list[PhaseComparison]
    confidence: float
    equivalence: float
    min_p: float
    base_labels: list[str]
    variant_labels: list[str]
    warmup_dropped: list[str] = field(default_factory=list)
    base_representative: int = 0
    variant_representative: int = 0
    outliers: list[dict] = field(default_factory=list)
    environment: EnvironmentCheck = field(default_factory=EnvironmentCheck)
    paired_rounds: int = 0
    row_confidence: float = 0.0
    correction: str = "holm"
    tested_rows: int = 0
    called_rows: int = 0
    thresholds: dict = field(default_factory=dict)  # `family.decide`: p a single row needs, per family
    emulated: dict = field(default_factory=dict)  # side -> {gputrace.emulated.* key: values}

    def __post_init__(self) -> None:
        if not self.row_confidence:
            self.row_confidence = self.confidence

    @property
    def paired(self) -> bool:
        return self.paired_rounds > 0

    @property
    def total(self) -> PhaseComparison | None:
        """The end-to-end ``(run)`` row."""
        for r in self.rows:
            if r.path == RUN_PATH:
                return r
        return None

    def find(self, path: str, device: int | None = None, clock: str = "host") -> PhaseComparison | None:
        for r in self.rows:
            if r.path == path and r.device == device and r.clock == clock:
                return r
        return None

    @property
    def smallest_threshold(self) -> float:
        """The largest p-value with which some row can still be called different: ``alpha``
        for ``none`` and ``fdr`` (BH calls all m rows when all have p <= alpha), the
        end-to-end family's first step for ``holm``."""
        alpha = 1.0 - self.confidence
        if self.correction == "holm":
            return self.thresholds.get("end-to-end", alpha / max(self.tested_rows, 1))
        return alpha

    @property
    def undecidable(self) -> bool:
        """True when no row can be called different with these N (the smallest possible
        p-value exceeds `smallest_threshold`)."""
        return self.min_p > self.smallest_threshold

    @property
    def phases_undecidable(self) -> bool:
        """True when no phase row can be called with these N, even after the end-to-end rows
        were (the smallest possible p-value exceeds the phase family's first step)."""
        return self.min_p > self.thresholds.get("phase", 1.0 - self.confidence)

    def regressions(self, threshold: float, min_base_ns: float = 0.0) -> list[PhaseComparison]:
        """Rows slower beyond ``threshold`` (0.05 = 5 %) with the stated confidence: verdict
        ``slower`` (called across rows) and the lower bound of the relative change above
        ``threshold``. Rows whose baseline median is under ``min_base_ns`` are skipped. A
        ``new`` phase has no relative change; its cost shows in its parents and in ``(run)``;
        a ``partial`` phase is never a regression."""
        out = []
        for r in self.rows:
            if r.verdict == "slower" and r.rel_low > threshold and r.base_median_ns >= min_base_ns:
                out.append(r)
        return out

    def to_dict(self) -> dict:
        return {
            "confidence": self.confidence,
            "row_confidence": self.row_confidence,
            "equivalence": self.equivalence,
            "min_p": self.min_p,
            "paired_rounds": self.paired_rounds,
            "correction": self.correction,
            "tested_rows": self.tested_rows,
            "called_rows": self.called_rows,
            "thresholds": self.thresholds,
            "phases_undecidable": self.phases_undecidable,
            "undecidable": self.undecidable,
            "emulated": self.emulated,
            "base_runs": self.base_labels,
            "variant_runs": self.variant_labels,
            "warmup_dropped": self.warmup_dropped,
            "base_representative": self.base_representative,
            "variant_representative": self.variant_representative,
            "environment": self.environment.to_dict(),
            "outliers": self.outliers,
            "rows": [r.to_dict() for r in self.rows],
        }

def _drop_warmup(runs: list[RunMeasures], warmup: int, side: str) -> tuple[list[RunMeasures], list[str]]:
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    runs = sorted(runs, key=lambda r: r.start_ns)
    if warmup >= len(runs):
        raise ValueError(f"{side}: {len(runs)} run(s) given but --warmup {warmup} would discard all of them")
    return runs[warmup:], [r.label for r in runs[:warmup]]


def _representative(runs: Sequence[RunMeasures]) -> int:
    w = np.array([r.wall_ns for r in runs])
    return int(np.argmin(np.abs(w - np.median(w)))) if len(w) else 0


def compare_measures(
    base: Sequence[RunMeasures],
    variant: Sequence[RunMeasures],
    *,
    confidence: float = 0.95,
    equivalence: float = 0.02,
    warmup: int = 0,
    ignore_env: Sequence[str] = (),
    paired: bool | None = None,
    familywise: bool = False,
    correction: str | None = None,
) -> ComparisonResult:
    """Compare measured runs (see module doc). Raises ValueError for an empty side, a bad
    confidence, an unknown correction, or a warm-up count that leaves no run.

    ``correction``: how rows are decided together (`family`): ``"holm"`` (default: the chance
    of any false call under 1 - confidence, end-to-end rows first; ``familywise=True`` is the
    same), ``"fdr"`` (Benjamini–Hochberg) or ``"none"`` (each row alone at the confidence).

    ``paired``: None (default) pairs runs by ``round`` when every run has one and at least
    ``AUTO_PAIR_MIN`` (8) rounds are common to both sides; True pairs whenever a signed-rank
    interval can reach the confidence (6 rounds at 95 %; ValueError otherwise); False never
    pairs."""
    if not base or not variant:
        raise ValueError("compare: both the baseline and the variant need at least one run")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    b, bd = _drop_warmup(list(base), warmup, "baseline")
    v, vd = _drop_warmup(list(variant), warmup, "variant")
    rounds = _pairing(b, v, confidence, paired)
    if rounds:
        bi = {r.round: r for r in b}
        vi = {r.round: r for r in v}
        b = [bi[k] for k in rounds]
        v = [vi[k] for k in rounds]
    everything = b + v
    keys = sorted({k for r in everything for k in r.values}, key=lambda k: (k[0], -9 if k[1] is None else k[1], k[2]))
    # Per-device rows only where a path ran on more than one device (else "all" says it).
    devs: dict[tuple, set] = {}
    for k in keys:
        if k[1] is not None:
            devs.setdefault((k[0], k[2]), set()).add(k[1])
    keys = [k for k in keys if k[1] is None or len(devs.get((k[0], k[2]), ())) > 1]
    correction = correction or ("holm" if familywise else DEFAULT_CORRECTION)
    rows, outliers = [], []
    for key in keys:
        x, n_inst, dropped = aligned_values(b, everything, key)
        y, _, _ = aligned_values(v, everything, key)
        st = compare_values(x, y, confidence, equivalence, paired=bool(rounds))
        pb, pv = int((x > 0).sum()), int((y > 0).sum())
        if 0 < pb < len(x) or 0 < pv < len(y):
            st["verdict"] = "partial"
        rows.append(
            PhaseComparison(
                path=key[0], device=key[1], clock=key[2], n_base=len(x), n_variant=len(y),
                instances=n_inst, instances_dropped=dropped,
                base_values=tuple(x.tolist()), variant_values=tuple(y.tolist()), **st,
                interval_confidence=confidence, present_base=pb, present_variant=pv,
            )
        )
        if st["verdict"] != "partial":
            outliers += outlier_runs(b, v, key, x, y)
    rows, tested, called, thresholds = decide(rows, compare_values, confidence=confidence, equivalence=equivalence,
                                              correction=correction, paired=bool(rounds))
    row_conf = confidence
    rows.sort(key=lambda r: (r.path not in (RUN_PATH, PROVE_PATH), r.path != RUN_PATH, r.clock != "host",
                             -max(r.base_median_ns, r.variant_median_ns), r.path))
    return ComparisonResult(
        rows=rows,
        confidence=confidence,
        equivalence=equivalence,
        min_p=min(1.0, 2.0 / 2 ** len(rounds)) if rounds else min_two_sided_p(len(b), len(v)),
        base_labels=[r.label for r in b],
        variant_labels=[r.label for r in v],
        warmup_dropped=bd + vd,
        base_representative=_representative(b),
        variant_representative=_representative(v),
        outliers=outliers,
        environment=check_environment([r.resource for r in b], [r.resource for r in v], ignore_env),
        paired_rounds=len(rounds),
        row_confidence=row_conf,
        correction=correction,
        tested_rows=tested,
        called_rows=called,
        thresholds=thresholds,
        emulated={"base": emulated_costs(b), "variant": emulated_costs(v)},
    )


EMULATED_PREFIX = "gputrace.emulated."


def emulated_costs(runs: Sequence[RunMeasures]) -> dict:
    """``{key: sorted distinct values}`` of the ``gputrace.emulated.*`` resource attributes
    (injected or emulated costs a run recorded about itself) over ``runs``."""
    out: dict[str, set] = {}
    for r in runs:
        for k, val in (r.resource or {}).items():
            if str(k).startswith(EMULATED_PREFIX):
                out.setdefault(str(k), set()).add(str(val))
    return {k: sorted(vs) for k, vs in sorted(out.items())}


def _pairing(b: Sequence[RunMeasures], v: Sequence[RunMeasures], confidence: float, paired: bool | None) -> list:
    """Rounds to pair on (sorted), or [] for an unpaired comparison."""
    if paired is False:
        return []
    ok = all(r.round is not None for r in list(b) + list(v))
    rb = [int(r.round) for r in b if r.round is not None]
    rv = [int(r.round) for r in v if r.round is not None]
    unique = ok and len(set(rb)) == len(rb) and len(set(rv)) == len(rv)
    common = sorted(set(rb) & set(rv)) if unique else []
    enough = len(common) > 0 and k_signed(len(common), confidence) >= 1
    if paired is None and len(common) < AUTO_PAIR_MIN:
        # At the edge (6 rounds at 95 %) the signed-rank interval is the range of the Walsh
        # averages: weaker than the unpaired test unless load drifts a lot. Auto-pair from 8.
        return []
    if paired is True and not enough:
        raise ValueError(f"paired comparison needs runs tagged with distinct rounds, at least "
                         f"{next(n for n in range(1, 400) if k_signed(n, confidence) >= 1)} common to both sides")
    return common if enough else []


def compare_sets(
    base: Sequence[Timeline],
    variant: Sequence[Timeline],
    *,
    base_labels: Sequence[str] | None = None,
    variant_labels: Sequence[str] | None = None,
    **settings,
) -> ComparisonResult:
    """Compare two sets of runs, one Timeline per run (see `measures.split_runs` to cut a
    merged Timeline). Labels default to each run's ``gputrace.run_id``. ``settings``: the keyword
    arguments of `compare_measures` (``confidence``, ``equivalence``, ``warmup``, ``ignore_env``,
    ``paired``, ``familywise``, ``correction``), with its defaults. Raises ValueError as
    `compare_measures` does (TypeError for an unknown setting)."""
    bl = list(base_labels) if base_labels is not None else [""] * len(base)
    vl = list(variant_labels) if variant_labels is not None else [""] * len(variant)
    bm = [run_measures(t, lab) for t, lab in zip(base, bl, strict=True)]
    vm = [run_measures(t, lab) for t, lab in zip(variant, vl, strict=True)]
    return compare_measures(bm, vm, **settings)

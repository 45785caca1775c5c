"""Switch effects from a factorial experiment: main effects and two-way interactions per
phase by least squares, and which term explains the end-to-end change, through which phases.

Model per measurement key (phase path, device, clock), one row per run::

    y = b0 + sum_i a_i x_i + sum_{i<j} c_ij x_i x_j + e,   x_i = 1 if switch i is on, else 0

with ``y = log(time)`` when every run has the phase (effects are ratios: ``a_i`` is the log
ratio of switch i alone against the baseline, ``c_ij`` the extra log ratio when i and j are
both on) and ``y = time`` in ns when some variants lack the phase (``pin`` exists only with
pinning on). With 0/1 coding, all-on versus all-off is exactly the sum of the terms, so the
end-to-end change splits into named pieces; on the end-to-end key that sum gets its own interval
(the contrast of every term) and is checked against the all-on and no-switch runs measured
(`decomposition.Decomposition`): when the measured total falls outside the interval, interactions of three or
more switches, which the model leaves out, carry the difference. Intervals are t intervals from the residual
variance (replicate runs give the degrees of freedom); a term is *significant* when its
interval excludes zero. If the design cannot separate the interactions (rank deficient), only
main effects are fitted and ``model`` says so. Pure numpy/scipy; any thread.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from gputrace.analysis._common import fmt_ns
from gputrace.analysis.ab.compare import aligned_values
from gputrace.analysis.ab.decomposition import Decomposition, decomposition
from gputrace.analysis.ab.design import Variant
from gputrace.analysis.ab.measures import PROVE_PATH, RUN_PATH, RunMeasures


def _signed_ns(ns: float) -> str:
    return ("+" if ns >= 0 else "-") + fmt_ns(abs(ns))


@dataclass(frozen=True)
class Effect:
    """One model term on one key.

    * ``path``/``device``/``clock``: the key; ``term``: ``"b1"`` or ``"b1*d4"``.
    * ``scale``: ``log`` or ``linear``; ``estimate``/``low``/``high``: the coefficient and its
      interval on that scale (NaN bounds without residual degrees of freedom).
    * ``rel``/``rel_low``/``rel_high``: as a fraction (log scale only: exp(x) - 1; NaN on linear).
    * ``ns``/``ns_low``/``ns_high``: in nanoseconds at the baseline level (all switches off).
    * ``p_value``: two-sided t test of the coefficient; ``significant``: called by Holm over the
      terms of this key at ``1 - confidence`` (the interval is the term's own).
    """

    path: str
    device: int | None
    clock: str
    term: str
    scale: str
    estimate: float
    low: float
    high: float
    rel: float
    rel_low: float
    rel_high: float
    ns: float
    ns_low: float
    ns_high: float
    p_value: float
    significant: bool

    def describe(self) -> str:
        if self.scale == "log":
            iv = f"[{self.rel_low:+.1%}, {self.rel_high:+.1%}]" if math.isfinite(self.rel_low) else "[no interval]"
            return f"{self.term}: {self.path} {self.rel:+.1%} {iv} ({_signed_ns(self.ns)})"
        iv = f"[{fmt_ns(self.ns_low)}, {fmt_ns(self.ns_high)}]" if math.isfinite(self.ns_low) else "[no interval]"
        return f"{self.term}: {self.path} {_signed_ns(self.ns)} {iv}"


@dataclass
class Culprit:
    """A term that significantly changes the end-to-end time, and the phases it acts through."""

    term: str
    e2e: Effect
    phases: list[Effect]

    def describe(self) -> str:
        via = ", ".join(f"{p.path} {_signed_ns(p.ns)}" for p in self.phases[:5]) or "no single phase"
        word = "slower" if self.e2e.ns > 0 else "faster"
        what = "the interaction " + self.term.replace("*", " x ") if "*" in self.term else self.term
        return f"{what} makes the run {self.e2e.rel:+.1%} {word} ({_signed_ns(self.e2e.ns)}), through {via}"


@dataclass
class FactorialResult:
    """All fitted effects. ``switches``: the factors; ``terms``: fitted term names; ``model``:
    ``"main effects and two-way interactions"`` or ``"main effects only (...)"``; ``df``:
    residual degrees of freedom; ``effects``: every (key, term); ``e2e_path``: the key used
    for the end-to-end attribution; ``culprits``/``helpers``: significant terms slowing /
    speeding the end-to-end time, largest first; ``decomposition``: the end-to-end key's
    all-on-vs-none total, model against measured (None when that key was not fitted)."""

    switches: tuple[str, ...]
    terms: list[str]
    model: str
    df: int
    confidence: float
    effects: list[Effect]
    e2e_path: str
    culprits: list[Culprit] = field(default_factory=list)
    helpers: list[Culprit] = field(default_factory=list)
    decomposition: Decomposition | None = None

    def for_key(self, path: str, device: int | None = None, clock: str = "host") -> list[Effect]:
        return [e for e in self.effects if e.path == path and e.device == device and e.clock == clock]

    def for_term(self, term: str) -> list[Effect]:
        return [e for e in self.effects if e.term == term]

    def predicted_line(self) -> str:
        """All switches on against none on the end-to-end key: the model's total (the sum of every
        term, exact with 0/1 coding) with its interval, the measured total, and whether the first
        accounts for the second (`Decomposition.describe`)."""
        if self.decomposition is None:
            return "all vs none (model): no end-to-end measurement"
        return self.decomposition.describe()

    def summary_lines(self) -> list[str]:
        out = [c.describe() for c in self.culprits]
        out += [c.describe() for c in self.helpers]
        if not out:
            out.append(f"no switch or interaction changes {self.e2e_path} significantly at {self.confidence:.0%} "
                       "confidence")
        return out


def design_matrix(coded: np.ndarray, names: Sequence[str], interactions: bool) -> tuple[np.ndarray, list[str]]:
    """Columns: intercept, one per switch, and (optionally) one per pair (products)."""
    cols = [np.ones(len(coded))]
    terms = ["(baseline)"]
    for i, s in enumerate(names):
        cols.append(coded[:, i].astype(np.float64))
        terms.append(s)
    if interactions:
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                cols.append((coded[:, i] * coded[:, j]).astype(np.float64))
                terms.append(f"{names[i]}*{names[j]}")
    return np.stack(cols, axis=1), terms


def _phase_list(effects: list[Effect], e2e_paths: set[str], sign: float, floor_ns: float = 0.0) -> list[Effect]:
    """Significant same-sign phase effects (all devices, host clock) of at least ``floor_ns``,
    nesting de-duplicated: a path is dropped when a listed descendant carries at least half
    its time."""
    cand = [e for e in effects if e.significant and e.device is None and e.clock == "host" and e.path not in e2e_paths
            and e.path != "prove" and e.ns * sign > 0 and abs(e.ns) >= floor_ns]
    cand.sort(key=lambda e: -abs(e.ns))
    keep = []
    for e in cand:
        desc = [d for d in cand if d.path.startswith(e.path + "/")]
        if any(abs(d.ns) >= 0.5 * abs(e.ns) for d in desc):
            continue
        keep.append(e)
    return keep


def fit_effects(
    runs: Mapping[Variant, Sequence[RunMeasures]],
    switches: Sequence[str],
    confidence: float = 0.95,
    interactions: bool = True,
) -> FactorialResult:
    """Fit the model for every key measured in the runs (see module doc).

    ``runs``: variant -> its measured runs (warm-ups already removed). Raises ValueError when
    there are fewer distinct variants than main-effect parameters.
    """
    from scipy import stats

    names = tuple(switches)
    allruns: list[RunMeasures] = []
    coded_rows: list[tuple[int, ...]] = []
    for v, rs in runs.items():
        for r in rs:
            allruns.append(r)
            coded_rows.append(v.coded(names))
    coded = np.array(coded_rows, np.int64).reshape(len(allruns), len(names))
    distinct = len({tuple(r) for r in coded.tolist()})
    if distinct < len(names) + 1:
        raise ValueError(f"{distinct} distinct variants cannot separate {len(names)} switches (need {len(names) + 1})")
    X, terms = design_matrix(coded, names, interactions)
    model = "main effects and two-way interactions" if interactions else "main effects only"
    if np.linalg.matrix_rank(X) < X.shape[1]:
        X, terms = design_matrix(coded, names, False)
        model = "main effects only (the design aliases the two-way interactions)"
    p_terms = X.shape[1]
    rounds = [r.round for r in allruns]
    if all(r is not None for r in rounds) and len(set(rounds)) > 1:
        # Interleaved rounds: one fixed effect per round soaks up load that drifts between
        # rounds (a randomised complete block design), if the design stays estimable.
        levels = sorted({int(r) for r in rounds if r is not None})[1:]
        blocks = np.array([[1.0 if r == lv else 0.0 for lv in levels] for r in rounds])
        Xb = np.hstack([X, blocks])
        if np.linalg.matrix_rank(Xb) == Xb.shape[1] and Xb.shape[0] > Xb.shape[1]:
            X = Xb
            model += ", blocked by round"
    n, p = X.shape
    df = n - p
    xtx_inv = np.linalg.pinv(X.T @ X)
    tq = stats.t.ppf(0.5 + confidence / 2, df) if df > 0 else float("nan")
    keys = sorted({k for r in allruns for k in r.values}, key=lambda k: (k[0], -9 if k[1] is None else k[1], k[2]))
    devs: dict[tuple, set] = {}
    for k in keys:
        if k[1] is not None:
            devs.setdefault((k[0], k[2]), set()).add(k[1])
    keys = [k for k in keys if k[1] is None or len(devs.get((k[0], k[2]), ())) > 1]
    effects: list[Effect] = []
    nan = float("nan")
    e2e = PROVE_PATH if any(k[0] == PROVE_PATH for k in keys) else RUN_PATH
    dec = None
    for key in keys:
        y, _, _ = aligned_values(allruns, allruns, key)
        if np.all(y == 0):
            continue
        log = bool(np.all(y > 0))
        yy = np.log(y) if log else y
        beta, *_ = np.linalg.lstsq(X, yy, rcond=None)
        resid = yy - X @ beta
        if df > 0:
            s2 = float(resid @ resid) / df
            se = np.sqrt(np.maximum(np.diag(xtx_inv) * s2, 0.0))
        else:
            s2, se = nan, np.full(p, nan)
        if key == (e2e, None, "host"):
            dec = decomposition(e2e, log, X, yy, beta, xtx_inv, s2, df, tq, p_terms, coded.astype(bool), confidence)
        base = math.exp(beta[0]) if log else beta[0]
        called = _holm_terms(se, beta, df, p_terms, confidence)
        for t in range(1, p_terms):
            est = float(beta[t])
            lo, hi = (est - tq * se[t], est + tq * se[t]) if df > 0 else (nan, nan)
            if df > 0 and se[t] > 0:
                pv = float(2 * stats.t.sf(abs(est) / se[t], df))
            elif df > 0:
                pv = 0.0 if est != 0 else 1.0
            else:
                pv = nan
            sig = bool(called[t - 1])
            if log:
                rel, rl, rh = math.expm1(est), math.expm1(lo), math.expm1(hi)
                ns, nl, nh = base * rel, base * rl, base * rh
            else:
                rel = rl = rh = nan
                ns, nl, nh = est, lo, hi
            effects.append(Effect(key[0], key[1], key[2], terms[t], "log" if log else "linear", est, lo, hi,
                                  rel, rl, rh, ns, nl, nh, pv, bool(sig)))
    res = FactorialResult(names, terms[1:], model, df, confidence, effects, e2e, decomposition=dec)
    e2e_paths = {RUN_PATH, PROVE_PATH}
    for e in res.for_key(e2e):
        if not e.significant:
            continue
        sign = 1.0 if e.ns > 0 else -1.0
        c = Culprit(e.term, e, _phase_list(res.for_term(e.term), e2e_paths, sign, 0.05 * abs(e.ns)))
        (res.culprits if sign > 0 else res.helpers).append(c)
    res.culprits.sort(key=lambda c: -c.e2e.ns)
    res.helpers.sort(key=lambda c: c.e2e.ns)
    return res


def _holm_terms(se: np.ndarray, beta: np.ndarray, df: int, p_terms: int, confidence: float) -> np.ndarray:
    """Which of one key's terms are significant: Holm over their two-sided t tests at
    ``1 - confidence`` (the chance that any null term of the key is called stays under it; with
    15 terms each at 95 %, about one would be called on noise alone)."""
    from scipy import stats

    from gputrace.analysis.ab.family import holm_reject

    k = p_terms - 1
    if df <= 0 or k <= 0:
        return np.zeros(max(k, 0), bool)
    b, s = beta[1:p_terms], se[1:p_terms]
    with np.errstate(divide="ignore", invalid="ignore"):
        pv = np.where(s > 0, 2 * stats.t.sf(np.abs(b) / np.where(s > 0, s, 1.0), df), np.where(b != 0, 0.0, 1.0))
    return holm_reject(pv, 1.0 - confidence)


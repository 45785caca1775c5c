"""Switch effects from a factorial experiment: main effects and two-way interactions per
phase by least squares, and which term explains the end-to-end change, through which phases.

Model per measurement key (phase path, device, clock), one row per run, in effect coding (the
usual one in design of experiments)::

    y = b0 + sum_i b_i x_i + sum_{i<j} b_ij x_i x_j + e,   x_i = +1 if switch i is on, else -1

with ``y = log(time)`` when every run has the phase (effects are ratios) and ``y = time`` in ns
when some variants lack the phase (``pin`` exists only with pinning on). What is reported per
term (`Effect`) is on the scale of a change, not the coefficient:

* a switch's *main effect* is ``2 b_i``: its change when it goes off -> on, averaged over
  the design's settings of the other switches (not its effect with every other switch off);
* a two-way *interaction* is ``4 b_ij = y11 - y10 - y01 + y00``: the extra change when both are
  on beyond their two separate changes (the same number the 0/1-coded coefficient gives).

Scaling leaves t statistics and p-values alone; ``ns`` values are at the model's prediction for
the all-off row. With +-1 columns each main effect is estimated from every run (in a full or
resolution V design the columns are orthogonal), so its interval is narrower than that of a
0/1-coded coefficient, which carries its interaction columns' variance. All switches on against
none is the contrast ``x_all - x_none``: the two-way columns are +1 in both corners and cancel, so
the model's total is the sum of the main effects; on the end-to-end key it gets its own interval
and is checked against the all-on and no-switch runs measured (`decomposition.Decomposition`):
when the measured total falls outside the interval, interactions of three or more switches, which
the model leaves out, carry the difference. Intervals are t intervals from the residual variance
(replicate runs give the degrees of freedom); a term is *significant* when Holm over the key's
terms calls it. If the design cannot separate the interactions (rank deficient), only main
effects are fitted and ``model`` says so. Pure numpy/scipy; any thread.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from gputrace.analysis._common import fmt_ns
from gputrace.analysis.ab.compare import aligned_values
from gputrace.analysis.ab.decomposition import Decomposition, decomposition, on_scales
from gputrace.analysis.ab.design import Variant
from gputrace.analysis.ab.measures import PROVE_PATH, RUN_PATH, RunMeasures

CODING = "main effects averaged over the other switches' settings (effect coding)"


def _signed_ns(ns: float) -> str:
    return ("+" if ns >= 0 else "-") + fmt_ns(abs(ns))


def term_scale(term: str) -> int:
    """What the +-1-coded coefficient of ``term`` is multiplied by to report it as a change: 2 for a main
    effect (off -> on is a step of 2 in x), 4 for a two-way interaction (``y11 - y10 - y01 + y00``)."""
    return 2 ** (term.count("*") + 1)


@dataclass(frozen=True)
class Effect:
    """One model term on one key.

    * ``path``/``device``/``clock``: the key; ``term``: ``"b1"`` or ``"b1*d4"``.
    * ``scale``: ``log`` or ``linear``; ``estimate``/``low``/``high``: the effect and its interval
      on that scale (NaN bounds without residual degrees of freedom): ``2 b`` for a main effect
      (the average off -> on change over the other switches' settings), ``4 b`` for a two-way
      interaction (``y11 - y10 - y01 + y00``), ``b`` the +-1-coded coefficient (module doc).
    * ``rel``/``rel_low``/``rel_high``: as a fraction (log scale only: exp(x) - 1; NaN on linear).
    * ``ns``/``ns_low``/``ns_high``: in nanoseconds at the baseline level (all switches off: the
      model's prediction for that row, first round when blocked).
    * ``p_value``: two-sided t test of the coefficient (the scaling leaves it alone);
      ``significant``: called by Holm over the terms of this key at ``1 - confidence`` (the
      interval is the term's own).
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

    def describe(self, note: bool = False) -> str:
        """'b1 makes the run +8.1% slower (+1.9 s), through prove/pin +1.8 s, ...'; ``note`` adds, for a main
        effect, that it is an average over the other switches' settings (said once per report)."""
        via = ", ".join(f"{p.path}{'' if p.clock == 'host' else ' ' + p.clock} {_signed_ns(p.ns)}"
                        for p in self.phases[:5]) or "no single phase"
        word = "slower" if self.e2e.ns > 0 else "faster"
        what = "the interaction " + self.term.replace("*", " x ") if "*" in self.term else self.term
        avg = " on average over the other switches' settings" if note and "*" not in self.term else ""
        return f"{what} makes the run {self.e2e.rel:+.1%} {word}{avg} ({_signed_ns(self.e2e.ns)}), through {via}"


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
        """All switches on against none on the end-to-end key: the model's total (the sum of the main
        effects; the two-way interactions cancel between the corners) with its interval, the measured
        total, and whether the first accounts for the second (`Decomposition.describe`)."""
        if self.decomposition is None:
            return "all vs none (model): no end-to-end measurement"
        return self.decomposition.describe()

    def summary_lines(self) -> list[str]:
        """The culprits' then the helpers' sentences; the first main effect among them says it is an average."""
        out: list[str] = []
        noted = False
        for c in self.culprits + self.helpers:
            note = not noted and "*" not in c.term
            noted |= note
            out.append(c.describe(note))
        if not out:
            out.append(f"no switch or interaction changes {self.e2e_path} significantly at {self.confidence:.0%} "
                       "confidence")
        return out


def design_matrix(coded: np.ndarray, names: Sequence[str], interactions: bool) -> tuple[np.ndarray, list[str]]:
    """Effect-coded columns from 0/1 ``coded`` (rows: runs, columns: switches on): intercept, one per
    switch (``x = 2c - 1``, +-1) and (optionally) one per pair (products of those, +-1)."""
    x = 2.0 * np.asarray(coded, np.float64).reshape(len(coded), len(names)) - 1.0
    cols = [np.ones(len(x))]
    terms = ["(baseline)"]
    for i, s in enumerate(names):
        cols.append(x[:, i])
        terms.append(s)
    if interactions:
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                cols.append(x[:, i] * x[:, j])
                terms.append(f"{names[i]}*{names[j]}")
    return np.stack(cols, axis=1), terms


def _corner(names: Sequence[str], interactions: bool, on: int, width: int) -> np.ndarray:
    """The design row with every switch ``on`` (1) or off (0), padded with zeros to ``width`` (round blocks)."""
    row = design_matrix(np.full((1, len(names)), on), names, interactions)[0][0]
    return np.r_[row, np.zeros(width - len(row))]


#: Clocks of GPU evidence a term acts through when no host bracket moves with it (``ab --cuda-activity``): a
#: pageable key upload made on a loader stream grows ``load_bases``' copy and GPU time while its bracket shrinks.
_EVIDENCE_VIA = ("gpu busy", "copy ")


def _phase_list(effects: list[Effect], e2e_paths: set[str], sign: float, floor_ns: float = 0.0) -> list[Effect]:
    """Significant same-sign phase effects (all devices, host clock) of at least ``floor_ns``,
    nesting de-duplicated: a path is dropped when a listed descendant carries at least half
    its time. When no host phase qualifies, the same from the GPU evidence (GPU busy time and copies per
    phase), largest first."""
    out = _nested(effects, e2e_paths, sign, floor_ns, lambda c: c == "host")
    return out or _nested(effects, e2e_paths, sign, floor_ns, lambda c: c.startswith(_EVIDENCE_VIA))


def _nested(effects: list[Effect], e2e_paths: set[str], sign: float, floor_ns: float, clock_ok) -> list[Effect]:
    cand = [e for e in effects if e.significant and e.device is None and clock_ok(e.clock) and e.path not in e2e_paths
            and e.path != "prove" and e.ns * sign > 0 and abs(e.ns) >= floor_ns]
    cand.sort(key=lambda e: -abs(e.ns))
    keep, seen = [], set()
    for e in cand:
        desc = [d for d in cand if d.path.startswith(e.path + "/")]
        if e.path in seen or any(abs(d.ns) >= 0.5 * abs(e.ns) for d in desc):
            continue
        seen.add(e.path)  # one clock per phase: its largest
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
    X, terms, model, interactions, p_terms = _design(coded, names, interactions, [r.round for r in allruns])
    n, p = X.shape
    df = n - p
    # The two corners as rows of X (round blocks at the reference round, 0): the baseline level for ``ns``
    # and the all-on-vs-none contrast.
    x_none, x_all = (_corner(names, interactions, on, p) for on in (0, 1))
    xtx_inv = np.linalg.pinv(X.T @ X)
    tq = stats.t.ppf(0.5 + confidence / 2, df) if df > 0 else float("nan")
    scale = np.array([1.0] + [float(term_scale(t)) for t in terms[1:]])
    keys = _fitted_keys(allruns)
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
            dec = decomposition(e2e, log, X, yy, beta, xtx_inv, s2, df, tq, x_none, x_all, coded.astype(bool),
                                confidence)
        base = math.exp(float(x_none @ beta)) if log else nan
        called = _holm_terms(se, beta, df, p_terms, confidence)
        effects.extend(_key_effects(key, terms, p_terms, scale, beta, se, called, df, tq, log, base))
    res = FactorialResult(names, terms[1:], model, df, confidence, effects, e2e, decomposition=dec)
    _attribute(res)
    return res


def _design(coded: np.ndarray, names: tuple[str, ...], interactions: bool,
            rounds: list) -> tuple[np.ndarray, list[str], str, bool, int]:
    """(design matrix, term names, model description, whether interactions are fitted, number of model
    terms before any round blocks) for runs coded ``coded`` in rounds ``rounds`` (None: not
    interleaved). Interactions are dropped where the design aliases them; with interleaved rounds, one
    fixed effect per round after the first is appended where the design stays estimable."""
    X, terms = design_matrix(coded, names, interactions)
    model = "main effects and two-way interactions" if interactions else "main effects only"
    if np.linalg.matrix_rank(X) < X.shape[1]:
        interactions = False
        X, terms = design_matrix(coded, names, False)
        model = "main effects only (the design aliases the two-way interactions)"
    p_terms = X.shape[1]
    if all(r is not None for r in rounds) and len(set(rounds)) > 1:
        # Interleaved rounds: one fixed effect per round soaks up load that drifts between
        # rounds (a randomised complete block design), if the design stays estimable.
        levels = sorted({int(r) for r in rounds if r is not None})[1:]
        blocks = np.array([[1.0 if r == lv else 0.0 for lv in levels] for r in rounds])
        Xb = np.hstack([X, blocks])
        if np.linalg.matrix_rank(Xb) == Xb.shape[1] and Xb.shape[0] > Xb.shape[1]:
            X = Xb
            model += ", blocked by round"
    return X, terms, model, interactions, p_terms


def _fitted_keys(allruns: list[RunMeasures]) -> list[tuple]:
    """The measurement keys (path, device, clock) to fit, in report order: every key measured in a run,
    except per-device keys of a (path, clock) measured on one device only."""
    keys = sorted({k for r in allruns for k in r.values}, key=lambda k: (k[0], -9 if k[1] is None else k[1], k[2]))
    devs: dict[tuple, set] = {}
    for k in keys:
        if k[1] is not None:
            devs.setdefault((k[0], k[2]), set()).add(k[1])
    return [k for k in keys if k[1] is None or len(devs.get((k[0], k[2]), ())) > 1]


def _key_effects(key: tuple, terms: list[str], p_terms: int, scale: np.ndarray, beta: np.ndarray, se: np.ndarray,
                 called: np.ndarray, df: int, tq: float, log: bool, base: float) -> list[Effect]:
    """The ``Effect`` of each model term after the intercept among the first ``p_terms`` (``called``: Holm's
    verdicts on them) of one key's fit (``beta``/``se``: coefficients and standard errors; ``log``: fitted on
    log times, ``base`` then the all-off level in ns; ``tq``: the t quantile of the interval, ``df`` its
    degrees of freedom)."""
    from scipy import stats

    nan = float("nan")
    out = []
    for t in range(1, p_terms):
        est, sd = float(scale[t] * beta[t]), float(scale[t] * se[t])
        lo, hi = (est - tq * sd, est + tq * sd) if df > 0 else (nan, nan)
        if df > 0 and sd > 0:
            pv = float(2 * stats.t.sf(abs(est) / sd, df))
        elif df > 0:
            pv = 0.0 if est != 0 else 1.0  # noise-free fit
        else:
            pv = nan
        sig = bool(called[t - 1])
        rel, rl, rh, ns, nl, nh = on_scales(est, lo, hi, log, base)
        out.append(Effect(key[0], key[1], key[2], terms[t], "log" if log else "linear", est, lo, hi,
                          rel, rl, rh, ns, nl, nh, pv, bool(sig)))
    return out


def _attribute(res: FactorialResult) -> None:
    """Fill ``res.culprits``/``res.helpers``: each term significant on the end-to-end key, with the phases
    it acts through (``_phase_list``), largest first."""
    e2e_paths = {RUN_PATH, PROVE_PATH}
    for e in res.for_key(res.e2e_path):
        if not e.significant:
            continue
        sign = 1.0 if e.ns > 0 else -1.0
        c = Culprit(e.term, e, _phase_list(res.for_term(e.term), e2e_paths, sign, 0.05 * abs(e.ns)))
        (res.culprits if sign > 0 else res.helpers).append(c)
    res.culprits.sort(key=lambda c: -c.e2e.ns)
    res.helpers.sort(key=lambda c: c.e2e.ns)


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


"""Decisions across the rows of a comparison: false-call control and the equivalence margin.

A comparison tests ~40 rows (phase paths x devices x clocks) at once. Testing each at 5 %
calls some unchanged row slower or faster in most comparisons. Rows are therefore decided
together:

* **Which rows differ (statistically)**: ``"holm"`` (default): Holm's step-down procedure over
  the rows' two-sided rank p-values: the chance that any unchanged row is called different
  stays under ``alpha = 1 - confidence`` whatever else changed (valid under any dependence).
  ``"fdr"``: Benjamini–Hochberg at level ``alpha``: among the rows called different, the
  expected share of false calls is at most ``alpha``; when no row really changed this is also
  the chance of any false call. BH holds for independent and positively dependent tests
  (Benjamini & Yekutieli 2001; nested rows such as ``prove`` and its children are positively
  dependent); it calls more rows, but a false call can ride along with many true ones.
  ``"none"``: each row at ``alpha``.
* **End-to-end first** (Holm): the ``(run)``/``(prove)`` rows form their own family, tested at
  ``alpha / 2``; the phase rows get the whole ``alpha`` when every end-to-end row was called,
  else ``alpha / 2`` (a fallback gate, `_holm_gatekept`; the family-wise error stays under
  ``alpha``). "Is the run slower?" is then answerable with fewer runs than "which phase?".
* **Intervals of the rows called different** are recomputed at ``1 - R * alpha / m`` (``R``
  rows called out of ``m`` tested: false-coverage-rate intervals, Benjamini & Yekutieli 2005)
  for ``fdr``, at ``1 - level / family size`` (Bonferroni) for Holm, so a selected row's
  interval keeps its promise; other rows show their own ``confidence`` interval.
* **Which differences matter (practically)**: a row is called ``slower``/``faster`` only when
  it is statistically different *and* its estimated change is beyond the equivalence margin
  (default 2 %); a real but smaller change is ``within margin``. ``unchanged`` still means
  the row's own interval lies inside the margin.

Pure; any thread.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import numpy.typing as npt

CORRECTIONS = ("fdr", "holm", "none")
#: Holm by default. With one phase really slower, its ~10 true rows (the phase on each device and
#: clock, and its ancestors) raise Benjamini-Hochberg's bar for the rest, so an unchanged row was
#: called along with it in 12.5 % of comparisons (8 vs 8 runs, 42 rows; Holm: 1 %;
#: benchmarks/bench_ab_calls.py). Holm keeps the chance of any false call under alpha whatever
#: else changed, and still found a 5 % change at 16 vs 16 every time. Its price: the first call
#: needs p <= alpha / rows, so ~40 rows need at least 7 runs a side (8 in practice).
DEFAULT_CORRECTION = "holm"
# Verdicts of rows in the family (a "too few runs" row is a question asked that these N cannot
# answer: it counts in m, and is never called, its p being above every threshold).
TESTED = ("slower", "faster", "unchanged", "inconclusive", "too few runs")


def bh_reject(p_values: npt.ArrayLike, alpha: float) -> np.ndarray:
    """Benjamini–Hochberg step-up: mask of rejected hypotheses at FDR ``alpha``."""
    p = np.asarray(p_values, np.float64)
    m = len(p)
    if m == 0:
        return np.zeros(0, bool)
    o = np.argsort(p, kind="stable")
    ok = p[o] <= alpha * np.arange(1, m + 1) / m
    out = np.zeros(m, bool)
    if ok.any():
        out[o[: int(np.flatnonzero(ok).max()) + 1]] = True
    return out


def holm_reject(p_values: npt.ArrayLike, alpha: float) -> np.ndarray:
    """Holm step-down: mask of rejected hypotheses with family-wise error ``alpha``."""
    p = np.asarray(p_values, np.float64)
    m = len(p)
    o = np.argsort(p, kind="stable")
    out = np.zeros(m, bool)
    for k, i in enumerate(o):
        if p[i] > alpha / (m - k):
            break
        out[i] = True
    return out


def adjusted_p(p_values: npt.ArrayLike, correction: str) -> np.ndarray:
    """BH q-values (``fdr``), Holm-adjusted p (``holm``) or ``p`` itself (``none``)."""
    p = np.asarray(p_values, np.float64)
    m = len(p)
    if m == 0 or correction == "none":
        return p.copy()
    o = np.argsort(p, kind="stable")
    ps = p[o]
    if correction == "fdr":
        adj = np.minimum.accumulate((ps * m / np.arange(1, m + 1))[::-1])[::-1]
    else:
        adj = np.maximum.accumulate(ps * (m - np.arange(m)))
    out = np.empty(m)
    out[o] = np.minimum(adj, 1.0)
    return out


E2E_PATHS = ("(run)", "(prove)")


def _holm_gatekept(p: np.ndarray, primary: np.ndarray, alpha: float):
    """Holm in two families with a fallback gate: the end-to-end rows (``primary``) at
    ``alpha / 2``; the phase rows at ``alpha`` when every end-to-end row was called, else at
    ``alpha / 2``. Returns (rejected mask, per-row family level, per-row family size).

    Family-wise error <= alpha: if some end-to-end row is truly unchanged, a false call needs a
    false call among the end-to-end rows (<= alpha/2) or among the phases at alpha/2; if every
    end-to-end row truly changed, no false call is possible there and the phases are tested at
    alpha. The gate lets "is the run slower?" be answered with fewer runs than a phase needs."""
    rej = np.zeros(len(p), bool)
    level = np.full(len(p), alpha)
    size = np.zeros(len(p), np.int64)
    prim, sec = np.flatnonzero(primary), np.flatnonzero(~primary)
    a_sec = alpha
    if len(prim):
        rej[prim] = holm_reject(p[prim], alpha / 2)
        level[prim], size[prim] = alpha / 2, len(prim)
        a_sec = alpha if rej[prim].all() else alpha / 2
    if len(sec):
        rej[sec] = holm_reject(p[sec], a_sec)
        level[sec], size[sec] = a_sec, len(sec)
    return rej, level, size


def decide(rows: list, compare_values, *, confidence: float, equivalence: float, correction: str, paired: bool):
    """Return (rows with family verdicts, rows tested ``m``, rows called different ``R``,
    ``thresholds``: the p-value a single row needs, ``{"end-to-end": .., "phase": ..}`` with
    the phase threshold for the case the end-to-end rows were called).

    ``rows``: `PhaseComparison` rows whose fields came from ``compare_values`` at the
    marginal ``confidence``. Rows without a usable test (new, gone, partial, too few runs)
    keep their verdict and are not in the family. Raises ValueError on an unknown correction."""
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {', '.join(CORRECTIONS)}, got {correction!r}")
    alpha = 1.0 - confidence
    idx = [i for i, r in enumerate(rows) if r.verdict in TESTED and math.isfinite(r.p_value)]
    m = len(idx)
    if m == 0:
        return list(rows), 0, 0, {"end-to-end": alpha, "phase": alpha}
    p = np.array([rows[i].p_value for i in idx])
    primary = np.array([rows[i].path in E2E_PATHS for i in idx])
    if correction == "holm":
        rej, level, size = _holm_gatekept(p, primary, alpha)
        n_p, n_s = int(primary.sum()), int((~primary).sum())
        phase_t = alpha / max(n_s, 1)
        thresholds = {"end-to-end": alpha / 2 / n_p if n_p else phase_t, "phase": phase_t}
        # Holm-adjusted p within each family, scaled to the family's level.
        adj = np.ones(m)
        for fam in (primary, ~primary):
            if fam.any():
                adj[fam] = np.minimum(adjusted_p(p[fam], "holm") * alpha / level[fam][0], 1.0)
        sel_conf = 1.0 - level / np.maximum(size, 1)
    else:
        rej = bh_reject(p, alpha) if correction == "fdr" else p <= alpha
        adj = adjusted_p(p, correction)
        n_rej = int(rej.sum())
        sel_conf = np.full(m, 1.0 - n_rej * alpha / m if correction == "fdr" else confidence)
        bar = alpha / m if correction == "fdr" else alpha
        thresholds = {"end-to-end": bar, "phase": bar}
    out = list(rows)
    for j, i in enumerate(idx):
        r = out[i]
        if rej[j]:
            if sel_conf[j] > confidence:
                st = compare_values(np.asarray(r.base_values), np.asarray(r.variant_values), float(sel_conf[j]),
                                    equivalence, paired=paired)
                if st["verdict"] != "too few runs":
                    r = replace(r, **{k: st[k] for k in ("diff_low_ns", "diff_high_ns", "rel_low", "rel_high")},
                                interval_confidence=float(sel_conf[j]))
            beyond = abs(r.rel) > equivalence if math.isfinite(r.rel) else True
            verdict = ("slower" if r.diff_ns > 0 else "faster") if beyond else "within margin"
        elif r.verdict == "too few runs":
            verdict = r.verdict
        else:
            inside = math.isfinite(r.rel_low) and -equivalence <= r.rel_low and r.rel_high <= equivalence
            verdict = "unchanged" if inside else "inconclusive"
        out[i] = replace(r, verdict=verdict, q_value=float(adj[j]), significant=bool(rej[j]))
    return out, m, int(rej.sum()), thresholds


def runs_needed(values_base, values_variant, effect: float, confidence: float, power: float = 0.8,
                alpha: float | None = None) -> int | None:
    """Runs per side for a two-sided rank test at level ``alpha`` (default ``1 - confidence``;
    the comparison passes its end-to-end family's threshold) to detect a ``effect`` relative
    change with ``power``, from the noise of these (positive) per-run values: normal-theory
    size on log times, divided by the Wilcoxon-Mann-Whitney efficiency 3/pi (0.955), and at
    least the N whose most extreme ranking reaches the confidence. None when the noise cannot
    be estimated (fewer than 2 runs per side, or non-positive values)."""
    from scipy import stats

    from gputrace.analysis.ab.ranks import min_two_sided_p

    x, y = np.asarray(values_base, np.float64), np.asarray(values_variant, np.float64)
    if len(x) < 2 or len(y) < 2 or effect <= 0 or np.any(x <= 0) or np.any(y <= 0):
        return None
    res = np.concatenate([np.log(x) - np.median(np.log(x)), np.log(y) - np.median(np.log(y))])
    sigma = max(1.4826 * float(np.median(np.abs(res))), float(np.std(res, ddof=1)) * 0.5, 1e-6)
    alpha = 1 - confidence if alpha is None else alpha
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    n = math.ceil(2 * (z * sigma / math.log1p(effect)) ** 2 / (3 / math.pi))
    n = max(n, 2)
    while min_two_sided_p(n, n) > alpha:
        n += 1
    return n

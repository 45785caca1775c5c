"""Rank-based two-sample statistics: Hodges–Lehmann shift with its Mann–Whitney interval.

Why rank-based: run times are few (3 to 30 per side), skewed and outlier-prone; the
Hodges–Lehmann (HL) estimate of the shift (median of all pairwise differences) and its
distribution-free confidence interval (Lehmann 1963; Hollander & Wolfe ch. 4) keep their
stated coverage under a location-shift model whatever the noise distribution, and an
outlier run moves them little. The interval is ``[d_(k), d_(m+1-k)]`` of the ``m = n1*n2``
sorted differences, ``k`` from the exact null distribution of the Mann–Whitney U statistic
(computed here from the Gaussian-binomial generating function; scipy has no public
function for it) for ``n1*n2 <= EXACT_MAX``, else its normal approximation. When even the
most extreme ranking cannot reach the confidence (``k == 0``, e.g. 3 runs against 3 at
95 %), the data cannot decide and `hl_interval` says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

# scipy.stats is imported inside the functions that need it: it costs ~0.5-2 s to import,
# and `gputrace report` (which imports this package) never needs it.

EXACT_MAX = 40_000


@lru_cache(maxsize=256)
def u_null_cdf(n1: int, n2: int) -> np.ndarray:
    """P(U <= u) for u = 0..n1*n2 under the null (no ties), exact.

    The counts of U are the coefficients of the Gaussian binomial [n1+n2 choose n1]_q =
    prod_{i=1..n1} (1 - q^(n2+i)) / (1 - q^i); multiply by the numerator terms and divide
    by ``1 - q^i`` with a strided cumulative sum (vectorised). Floats: the counts reach
    1e29 at 50 vs 50 and only their ratios matter.
    """
    m = n1 * n2
    poly = np.zeros(m + 1, np.float64)
    poly[0] = 1.0
    for i in range(1, n1 + 1):
        sh = n2 + i
        if sh <= m:
            poly[sh:] = poly[sh:] - poly[:-sh].copy()
        # divide by (1 - q^i): poly[k] += poly[k - i] in increasing k == cumsum per residue.
        pad = (-len(poly)) % i
        p2 = np.concatenate([poly, np.zeros(pad)]).reshape(-1, i)
        poly = np.cumsum(p2, axis=0).reshape(-1)[: m + 1]
    poly = np.maximum(poly, 0.0)
    cdf = np.cumsum(poly)
    return cdf / cdf[-1]


def min_two_sided_p(n1: int, n2: int) -> float:
    """Smallest two-sided Mann–Whitney p-value possible with these sample sizes."""
    if n1 < 1 or n2 < 1:
        return 1.0
    return float(min(1.0, 2.0 / _comb(n1 + n2, n1)))


def _comb(n: int, k: int) -> float:
    from math import comb

    return float(comb(n, k))


def k_for(n1: int, n2: int, confidence: float) -> int:
    """Rank ``k`` (1-based) of the lower HL bound, or 0 when no interval reaches ``confidence``."""
    alpha = 1.0 - confidence
    m = n1 * n2
    if n1 < 1 or n2 < 1:
        return 0
    if m <= EXACT_MAX:
        cdf = u_null_cdf(n1, n2)
        # largest k with P(U <= k - 1) <= alpha / 2
        k = int(np.searchsorted(cdf, alpha / 2 + 1e-12, side="right"))
        return min(k, (m + 1) // 2)
    from scipy import stats

    z = stats.norm.ppf(1 - alpha / 2)
    k = int(np.floor(m / 2 - z * np.sqrt(m * (n1 + n2 + 1) / 12.0)))
    return max(0, min(k, (m + 1) // 2))


@dataclass(frozen=True)
class ShiftEstimate:
    """HL shift of ``y`` relative to ``x`` (y - x) with its interval.

    ``estimate``: median of pairwise differences; ``low``/``high``: the interval at
    ``confidence`` (NaN when ``decidable`` is False: too few samples for that confidence);
    ``p_value``: two-sided Mann–Whitney p (scipy, exact for small samples without ties).
    """

    estimate: float
    low: float
    high: float
    confidence: float
    p_value: float
    decidable: bool


def hl_interval(x, y, confidence: float = 0.95) -> ShiftEstimate:
    """Hodges–Lehmann shift y - x and its distribution-free confidence interval.

    Raises ValueError when a sample is empty or the confidence is not in (0, 1).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    if len(x) == 0 or len(y) == 0:
        raise ValueError("hl_interval: both samples need at least one value")
    d = np.sort((y[None, :] - x[:, None]).reshape(-1))
    est = float(np.median(d))
    k = k_for(len(x), len(y), confidence)
    constant = bool(np.all(x == x[0]) and np.all(y == y[0]) and x[0] == y[0]) if len(x) and len(y) else False
    if len(x) >= 1 and len(y) >= 1 and (len(x) + len(y)) > 2 and not constant:
        from scipy import stats

        p = float(stats.mannwhitneyu(y, x, alternative="two-sided").pvalue)
    else:
        p = 1.0
    if k < 1:
        return ShiftEstimate(est, float("nan"), float("nan"), confidence, p, False)
    return ShiftEstimate(est, float(d[k - 1]), float(d[len(d) - k]), confidence, p, True)


# ---- paired samples (runs interleaved in rounds: one difference per round) ----------------


@lru_cache(maxsize=256)
def w_null_cdf(n: int) -> np.ndarray:
    """P(T+ <= t) for t = 0..n(n+1)/2: the Wilcoxon signed-rank statistic's exact null
    distribution, from the coefficients of prod_{i=1..n} (1 + q^i)."""
    m = n * (n + 1) // 2
    poly = np.zeros(m + 1, np.float64)
    poly[0] = 1.0
    for i in range(1, n + 1):
        poly[i:] = poly[i:] + poly[:-i].copy()
    cdf = np.cumsum(poly)
    return cdf / cdf[-1]


def k_signed(n: int, confidence: float) -> int:
    """Rank ``k`` of the lower bound among the Walsh averages, 0 when undecidable (n < 6 at 95 %)."""
    if n < 1:
        return 0
    alpha = 1.0 - confidence
    m = n * (n + 1) // 2
    if n <= 300:
        k = int(np.searchsorted(w_null_cdf(n), alpha / 2 + 1e-12, side="right"))
        return min(k, (m + 1) // 2)
    from scipy import stats

    z = stats.norm.ppf(1 - alpha / 2)
    k = int(np.floor(m / 2 - z * np.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)))
    return max(0, min(k, (m + 1) // 2))


def hl_paired(d, confidence: float = 0.95) -> ShiftEstimate:
    """One-sample Hodges–Lehmann estimate of the centre of paired differences ``d`` (the
    median of the Walsh averages) with the Wilcoxon signed-rank interval. Pairing by round
    removes load that drifts between rounds, which an unpaired comparison counts as noise.
    Raises ValueError on empty input or a confidence outside (0, 1)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    d = np.asarray(d, np.float64)
    n = len(d)
    if n == 0:
        raise ValueError("hl_paired: need at least one difference")
    i, j = np.triu_indices(n)
    w = np.sort((d[i] + d[j]) / 2.0)
    est = float(np.median(w))
    if np.any(d != 0):
        from scipy import stats

        p = float(stats.wilcoxon(d, alternative="two-sided").pvalue)
    else:
        p = 1.0
    k = k_signed(n, confidence)
    if k < 1:
        return ShiftEstimate(est, float("nan"), float("nan"), confidence, p, False)
    return ShiftEstimate(est, float(w[k - 1]), float(w[len(w) - k]), confidence, p, True)

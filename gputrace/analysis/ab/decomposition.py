"""Does the factorial model's decomposition add up? All switches on against none on the end-to-end key: the model's
contrast between those two corners, ``c = x_all - x_none`` over the design's columns, with its interval, beside the
total measured from the all-on and the no-switch runs, and the verdict (`Decomposition`). In the effect (+-1) coding
of `effects` a two-way column is +1 in both corners and cancels, so the total is the sum of the switches' main
effects (``2 b_i`` each). Interactions of three or more switches are left out of the model; when the measured total
falls outside the model total's interval, they carry the difference. Called by `effects.fit_effects` for the
end-to-end key only. Pure numpy; any thread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gputrace.analysis._common import fmt_ns


def _signed_ns(ns: float) -> str:
    return ("+" if ns >= 0 else "-") + fmt_ns(abs(ns))


@dataclass(frozen=True)
class Decomposition:
    """All switches on against none on the end-to-end key: the model's total (the sum of the
    switches' main effects; the two-way interactions cancel between the corners) with its
    interval, beside the total measured from the all-on and the no-switch runs.

    * ``path``: the key; ``scale``: ``log`` or ``linear`` (as its `Effect` rows); ``terms``: how
      many terms the total sums, i.e. the columns that differ between the two corners (the main
      effects); ``cancelled``: fitted terms equal in both corners, which drop out (the two-way
      interactions; 0 for a main-effects-only model). Round blocks and the intercept are not terms.
    * ``estimate``/``low``/``high``: the model total on the fitted scale, its interval from the
      contrast ``c'beta`` (variance ``c'(X'X)^-1 c s^2``, t with the residual df; NaN without
      residual df); ``rel``/``rel_low``/``rel_high`` as fractions (log scale only, else NaN);
      ``ns``/``ns_low``/``ns_high`` in ns at the model's baseline level (its prediction for the
      all-off row, first round when blocked).
    * ``n_all``/``n_none``: all-on and no-switch runs measured (0 when the design lacks that
      corner); ``measured``: their difference on the fitted scale (mean log difference, i.e. the
      ratio of geometric means; or the difference of means in ns); ``measured_rel``,
      ``measured_ns`` (at the none runs' geometric mean); NaN when a corner is missing.
    * ``remainder``/``remainder_low``/``remainder_high``: measured minus model on the fitted
      scale, with its own interval (``d'y``, ``d = a - X(X'X)^-1 c``): what the interactions of
      three or more switches that the model leaves out carry, plus noise.
    * ``verdict``: ``accounts`` (the measured total lies inside the model total's interval),
      ``does not``, ``not measured`` (a corner missing) or ``no interval`` (no residual df).
    """

    path: str
    scale: str
    terms: int
    cancelled: int
    confidence: float
    estimate: float
    low: float
    high: float
    rel: float
    rel_low: float
    rel_high: float
    ns: float
    ns_low: float
    ns_high: float
    n_all: int
    n_none: int
    measured: float
    measured_rel: float
    measured_ns: float
    remainder: float
    remainder_low: float
    remainder_high: float
    verdict: str

    def _fmt(self, x: float, lo: float | None = None, hi: float | None = None) -> str:
        """A value (and its interval when given) on the line's scale: a ratio on the log scale, ns on the linear."""
        one = (lambda v: f"{math.expm1(v):+.1%}") if self.scale == "log" else _signed_ns
        if lo is None or hi is None:
            return one(x)
        return one(x) + (f" [{one(lo)}, {one(hi)}]" if math.isfinite(lo) and math.isfinite(hi) else " [no interval]")

    def describe(self) -> str:
        """'all vs none, (prove): measured +30.1% (geometric means of 3 and 3 runs); model (sum of the 3 main effects,
        every run pooled; the 3 two-way interactions cancel between the corners) +29.4% [+25.0%, +33.9%]: the
        decomposition accounts for the measured total'."""
        what = f"sum of the {self.terms} main effects, every run pooled"
        if self.cancelled:
            what += f"; the {self.cancelled} two-way interactions cancel between the corners"
        model = f"model ({what}) {self._fmt(self.estimate, self.low, self.high)}"
        if self.verdict == "not measured":
            miss = " and ".join(w for w, n in (("no all-on run", self.n_all), ("no run with every switch off",
                                                                                  self.n_none)) if not n)
            return (f"all vs none, {self.path}: {model}; not measured (the design has {miss}), so the decomposition "
                    "cannot be checked against a measured total")
        mean = "geometric means" if self.scale == "log" else "means"
        head = (f"all vs none, {self.path}: measured {self._fmt(self.measured)} ({mean} of {self.n_all} and "
                f"{self.n_none} runs); {model}")
        if self.verdict == "no interval":
            return head + ": no residual degrees of freedom, so whether the decomposition accounts for it is unknown"
        if self.verdict == "accounts":
            return head + ": the decomposition accounts for the measured total"
        rest = self._fmt(self.remainder, self.remainder_low, self.remainder_high)
        return (head + ": the decomposition does not account for the measured total; the interactions of three or "
                f"more switches that the model leaves out carry {rest}")

    def to_dict(self) -> dict:
        """Every field (non-finite floats as None) and ``text``: the sentence."""
        d: dict[str, object] = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                                for k, v in self.__dict__.items()}
        d["text"] = self.describe()
        return d


def on_scales(est: float, lo: float, hi: float, log: bool, base: float) -> tuple[float, ...]:
    """(rel, rel_low, rel_high, ns, ns_low, ns_high) of an estimate and its interval: on log times the
    fractions exp(x) - 1 and those times ``base`` (the baseline level in ns); on linear times NaN fractions
    and the values themselves as ns."""
    if log:
        rel, rl, rh = math.expm1(est), math.expm1(lo), math.expm1(hi)
        return rel, rl, rh, base * rel, base * rl, base * rh
    nan = float("nan")
    return nan, nan, nan, est, lo, hi


def decomposition(path: str, log: bool, X: np.ndarray, yy: np.ndarray, beta: np.ndarray, xtx_inv: np.ndarray,
                  s2: float, df: int, tq: float, x_none: np.ndarray, x_all: np.ndarray, coded: np.ndarray,
                  confidence: float) -> Decomposition:
    """The model's all-on-vs-none total for one key and the measured one from the all-on and all-off rows of
    ``coded``. ``x_none``/``x_all``: the two corners as rows of ``X`` (column 0 the intercept; round-block columns
    0, so the contrast leaves the blocks out and ``x_none`` is the first round's baseline)."""
    nan = float("nan")
    c = x_all - x_none
    terms = int(np.count_nonzero(c))
    cancelled = int(np.count_nonzero((c[1:] == 0) & (x_all[1:] != 0)))
    g = xtx_inv @ c
    est = float(c @ beta)
    if df > 0:
        half = tq * math.sqrt(max(float(c @ g) * s2, 0.0))
        lo, hi = est - half, est + half
    else:
        lo = hi = nan
    on, off = coded.all(axis=1), ~coded.any(axis=1)
    n_all, n_none = int(on.sum()), int(off.sum())
    meas = rem = rlo = rhi = meas_rel = meas_ns = nan
    if n_all and n_none:
        a = on / n_all - off / n_none
        meas = float(a @ yy)
        rem = meas - est
        if df > 0:
            d = a - X @ g  # measured minus model is d'y
            rhalf = tq * math.sqrt(max(float(d @ d) * s2, 0.0))
            rlo, rhi = rem - rhalf, rem + rhalf
        if log:
            meas_rel = math.expm1(meas)
            meas_ns = math.exp(float(yy[off].mean())) * meas_rel
        else:
            meas_ns = meas
    rel, rl, rh, ns, nl, nh = on_scales(est, lo, hi, log, math.exp(float(x_none @ beta)) if log else nan)
    if not (n_all and n_none):
        verdict = "not measured"
    elif df <= 0:
        verdict = "no interval"
    else:
        verdict = "accounts" if lo <= meas <= hi else "does not"
    return Decomposition(path, "log" if log else "linear", terms, cancelled, confidence, est, lo, hi, rel, rl, rh, ns,
                         nl, nh, n_all, n_none, meas, meas_rel, meas_ns, rem, rlo, rhi, verdict)

"""Statistics of one measurement key for a comparison: instance alignment, the shift estimate with its
interval and verdict, and outlier runs.

:mod:`gputrace.analysis.ab.compare` applies these to every key of two sets of runs and re-exports
:func:`compare_values` and :func:`aligned_values`. Pure numpy/scipy; any thread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from gputrace.analysis.ab.measures import RunMeasures
from gputrace.analysis.ab.ranks import hl_interval, hl_paired

__all__ = ["OUTLIER_Z", "OUTLIER_MIN_REL", "aligned_values", "compare_values", "outlier_runs"]

OUTLIER_Z = 5.0
OUTLIER_MIN_REL = 0.10  # ... and more than 10 % from it: a run within 10 % is not worth a line


def aligned_values(side_runs: Sequence[RunMeasures], all_runs: Sequence[RunMeasures],
                   key) -> tuple[np.ndarray, int, int]:
    """Per-run values for ``key`` summed over the instances common to every run.

    Returns (values of ``side_runs``, instances used, instances dropped). When the phase is
    missing from some runs, or no instance is common to all, every instance is summed (a
    missing phase counts 0)."""
    present = [r.values[key] for r in all_runs if key in r.values and len(r.values[key])]
    union = np.unique(np.concatenate([p.codes for p in present])) if present else np.zeros(0, np.int64)
    common = None
    if present and len(present) == len(all_runs):
        common = present[0].codes
        for p in present[1:]:
            common = np.intersect1d(common, p.codes, assume_unique=True)
        if len(common) == 0:
            common = None
    vals = []
    for r in side_runs:
        inst = r.values.get(key)
        vals.append(0.0 if inst is None else inst.total(None if common is None else common))
    n_inst = len(common) if common is not None else len(union)
    dropped = len(union) - len(common) if common is not None else 0
    return np.asarray(vals, np.float64), n_inst, dropped


def _verdict(lo: float, hi: float, equivalence: float) -> str:
    if lo > 0:
        return "slower"
    if hi < 0:
        return "faster"
    if -equivalence <= lo and hi <= equivalence:
        return "unchanged"
    return "inconclusive"


def compare_values(x: np.ndarray, y: np.ndarray, confidence: float = 0.95, equivalence: float = 0.02,
                   paired: bool = False) -> dict:
    """Statistics of one key: ``x`` baseline and ``y`` variant per-run values (ns).

    ``paired``: ``x[i]`` and ``y[i]`` come from the same round of an interleaved experiment;
    the shift is then the one-sample HL estimate of the per-round differences with the
    Wilcoxon signed-rank interval (needs 6 rounds at 95 %).

    Returns the numeric fields of `PhaseComparison` (diff, rel with bounds, p_value, verdict,
    scale). Raises ValueError on empty input.
    """
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    if len(x) == 0 or len(y) == 0:
        raise ValueError("compare_values: each side needs at least one run")
    nan = float("nan")
    bm, vm = float(np.median(x)), float(np.median(y))
    out: dict[str, Any] = dict(base_median_ns=bm, variant_median_ns=vm, p_value=nan, scale="linear")
    if np.all(x == 0) and np.all(y == 0):
        out.update(diff_ns=0.0, diff_low_ns=0.0, diff_high_ns=0.0, rel=0.0, rel_low=0.0, rel_high=0.0,
                   verdict="unchanged", p_value=1.0)
        return out
    if np.all(x == 0) or np.all(y == 0):
        est = hl_interval(x, y, confidence)
        out.update(diff_ns=est.estimate, diff_low_ns=est.low, diff_high_ns=est.high, p_value=est.p_value)
        out.update(rel=nan, rel_low=nan, rel_high=nan, verdict="new" if np.all(x == 0) else "gone")
        return out
    if paired and len(x) != len(y):
        raise ValueError(f"compare_values: paired samples need equal lengths ({len(x)} vs {len(y)})")
    if np.all(x > 0) and np.all(y > 0):
        est = hl_paired(np.log(y) - np.log(x), confidence) if paired else hl_interval(np.log(x), np.log(y), confidence)
        g = math.exp(float(np.median(np.log(x))))
        rel, lo, hi = math.expm1(est.estimate), math.expm1(est.low), math.expm1(est.high)
        out.update(scale="log", rel=rel, rel_low=lo, rel_high=hi, diff_ns=g * rel, diff_low_ns=g * lo,
                   diff_high_ns=g * hi)
    else:
        est = hl_paired(y - x, confidence) if paired else hl_interval(x, y, confidence)
        ref = bm if bm > 0 else nan
        out.update(diff_ns=est.estimate, diff_low_ns=est.low, diff_high_ns=est.high)
        out.update(rel=est.estimate / ref, rel_low=est.low / ref, rel_high=est.high / ref)
    out["p_value"] = est.p_value
    if not est.decidable:
        out["verdict"] = "too few runs"
    elif out["scale"] == "linear" and not math.isfinite(out["rel_low"]):
        # Baseline median 0 (the phase ran in only some baseline runs): judge the ns interval.
        out["verdict"] = "slower" if est.low > 0 else "faster" if est.high < 0 else "inconclusive"
    else:
        out["verdict"] = _verdict(out["rel_low"], out["rel_high"], equivalence)
    return out


def _residuals(v: np.ndarray) -> np.ndarray:
    r = v - np.median(v)
    if len(v) % 2:  # the median run itself has residual 0 by construction: leave it out
        r = np.delete(r, int(np.argmin(np.abs(r))))
    return r


def outlier_runs(b: Sequence[RunMeasures], v: Sequence[RunMeasures], key, x: np.ndarray, y: np.ndarray) -> list[dict]:
    """Runs far from their side's median: |value - median| > OUTLIER_Z robust standard
    deviations and > OUTLIER_MIN_REL of the median. The scale is 1.4826 x the median absolute
    residual pooled over both sides (pooling keeps it stable at small N). Needs at least 5
    runs per side."""
    # A side where the phase never ran (all zeros: B1's pin in the baseline) says nothing
    # about spread; pool only sides with data.
    sides = [v for v in (x, y) if len(v) >= 5 and not np.all(v == 0)]
    if not sides or len(x) < 5 or len(y) < 5:
        return []
    scale = 1.4826 * float(np.median(np.abs(np.concatenate([_residuals(s) for s in sides]))))
    if scale <= 0:
        return []
    out = []
    for side, runs, vals in (("baseline", b, x), ("variant", v, y)):
        if np.all(vals == 0):
            continue
        med = float(np.median(vals))
        z = (vals - med) / scale
        far = (np.abs(z) > OUTLIER_Z) & (np.abs(vals - med) > OUTLIER_MIN_REL * abs(med))
        for i in np.flatnonzero(far):
            out.append({"side": side, "run": runs[int(i)].label, "path": key[0], "device": key[1], "clock": key[2],
                        "value_ns": float(vals[i]), "median_ns": med, "z": float(z[i])})
    return out

"""Comparisons of several runs: per-run measurements (`measures`), rank statistics (`ranks`),
the per-row statistics and verdicts (`compare_stats`, `compare`), environment checks,
experimental designs, the experiment runner, factorial effects and whether their decomposition adds up
to the measured all vs none (`decomposition`).

Builds on the single-run package (`gputrace.analysis`), never the reverse (an import-linter
contract in pyproject.toml). Pure numpy/scipy; any thread.
"""

from gputrace.analysis.ab.compare import ComparisonResult, PhaseComparison, compare_measures, compare_sets

__all__ = ["ComparisonResult", "PhaseComparison", "compare_measures", "compare_sets"]

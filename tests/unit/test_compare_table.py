"""The compare/ab table's columns agree with the medians they sit beside (issue: h2d 3.65 ms ->
7.31 ms shown as +9.0 %): ``diff`` and ``change`` are the medians' difference and ratio, and the
Hodges-Lehmann estimate the verdict uses is shown, labelled, in its own column."""

from __future__ import annotations

import io
from types import SimpleNamespace

from gputrace.commands.compare import COLUMNS, LEGEND, median_change, table_cells

NAMES = [c for c, _ in COLUMNS[:7]] + ["HL shift", "interval"] + [c for c, _ in COLUMNS[7:8]]


def _row(**kw):
    # The figures of the report: medians double while the estimator says +9 %.
    d = dict(path="prove/h2d", device=1, clock="host", base_median_ns=3.65e6, variant_median_ns=7.31e6,
             diff_ns=0.09 * 3.65e6, diff_low_ns=-1e5, diff_high_ns=8e6, rel=0.09, rel_low=-0.03, rel_high=1.2,
             p_value=0.2, verdict="inconclusive")
    return SimpleNamespace(**(d | kw))


def test_change_column_is_the_ratio_of_the_medians():
    cells = dict(zip(NAMES, table_cells(_row()), strict=True))
    assert cells["baseline"] == "3.65 ms" and cells["variant"] == "7.31 ms"
    assert cells["change"] == "+100.3%"  # not the +9.0 % of the estimator
    assert cells["diff"] == "+3.66 ms"
    assert cells["HL shift"] == "+9.0%" and cells["interval"] == "[-3.0%, +120.0%]"
    assert cells["device"] == "GPU 1" and table_cells(_row(device=-1))[1] == "CPU"


def test_change_is_undefined_without_a_baseline_median():
    assert median_change(_row(base_median_ns=0.0)) != median_change(_row(base_median_ns=0.0))  # NaN
    cells = dict(zip(NAMES, table_cells(_row(base_median_ns=0.0, verdict="new", rel=float("nan"))), strict=True))
    assert cells["change"] == "-" and cells["HL shift"].startswith("+")


def test_rendered_table_labels_the_estimator():
    from rich.console import Console

    from gputrace.analysis.ab.compare import PhaseComparison
    from gputrace.commands.compare import render_comparison

    assert "Hodges-Lehmann" in LEGEND and "median" in LEGEND
    row = PhaseComparison(path="prove/h2d", device=1, clock="host", n_base=5, n_variant=5, base_median_ns=3.65e6,
                          variant_median_ns=7.31e6, diff_ns=3.3e5, diff_low_ns=-1e5, diff_high_ns=8e6, rel=0.09,
                          rel_low=-0.03, rel_high=1.2, p_value=0.2, verdict="inconclusive", scale="log", instances=1,
                          instances_dropped=0, base_values=(3.65e6,) * 5, variant_values=(7.31e6,) * 5)
    env = SimpleNamespace(warnings=[], config_diffs=[])
    res = SimpleNamespace(environment=env, base_labels=["a"] * 5, variant_labels=["b"] * 5, confidence=0.95,
                          paired=False, warmup_dropped=[], correction="holm", tested_rows=1, called_rows=0,
                          equivalence=0.02, undecidable=False, phases_undecidable=False, emulated={},
                          row_confidence=0.95, rows=[row], outliers=[])
    out = io.StringIO()
    render_comparison(res, Console(file=out, width=250))
    text = out.getvalue()
    line = next(ln for ln in text.splitlines() if "prove/h2d" in ln)
    assert "+100.3%" in line and "+9.0%" in line and line.index("+100.3%") < line.index("+9.0%")
    assert "HL shift" in text and "Hodges-Lehmann" in text

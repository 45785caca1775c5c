"""Report tables are capped, with a line saying how many rows were left out (1M distinct span names made
``report`` print a million-row phase table); ``--json`` keeps every row."""

from __future__ import annotations

import io

from rich.console import Console

from gputrace.analysis.stats import PhaseStat, phase_stats, phase_table
from gputrace.commands.report import PHASE_ROWS, analyse, render
from gputrace.testing.synth import make_timeline


def _many(n):
    return make_timeline([{"name": "prove", "id": -1, "start": 0, "end": 10 * n}]
                         + [{"name": f"op{i:04d}", "parent": -1, "start": 10 * i, "end": 10 * i + 1 + i % 7}
                            for i in range(n)])


def test_phase_table_is_capped_with_a_line_naming_what_was_left_out():
    data = analyse(_many(100))
    assert len(data["phases"]) == 101  # --json: all
    out = io.StringIO()
    render(data, Console(file=out, width=200))
    text = out.getvalue()
    table = text[text.index("Phases"):text.index("more phase rows")]
    shown = [ln for ln in table.splitlines() if "│ op" in ln or "│ prove" in ln]
    assert len(shown) == PHASE_ROWS == 40
    assert "61 more phase rows not shown" in text and "--json for all" in text
    out = io.StringIO()
    render(data, Console(file=out, width=200), phase_rows=200)
    assert "more phase rows" not in out.getvalue()


def test_phase_table_is_a_sequence_of_the_same_rows():
    tl = _many(30)
    table = phase_table(tl)
    rows = phase_stats(tl)
    same = repr  # (NaN fields: compare the reprs)
    assert len(table) == len(rows) == 31 and same(list(table)) == same(rows)
    assert same(table[0]) == same(rows[0]) and same(table[-1]) == same(rows[-1])
    assert isinstance(rows[0], PhaseStat) and same(table[2:4]) == same(rows[2:4])
    assert same(table.to_dicts()) == same([r.to_dict() for r in rows])
    assert same(table.to_dicts(3)) == same([r.to_dict() for r in rows[:3]])
    assert rows[0].phase == "prove" and [r.total_ns for r in rows] == sorted((r.total_ns for r in rows), reverse=True)


def test_empty_timeline_has_an_empty_table():
    from gputrace.timeline.model import Timeline

    t = phase_table(Timeline.empty())
    assert len(t) == 0 and list(t) == [] and t.to_dicts() == []


def test_critical_path_table_says_how_many_phases_it_left_out():
    data = analyse(_many(30))
    assert len(data["critical_path"]) == 31
    out = io.StringIO()
    render(data, Console(file=out, width=200))
    assert "21 more phases on the path not shown (--json for all)" in out.getvalue()


def test_gpu_tables_say_how_many_rows_the_cut_left_out():
    from gputrace.commands.report_gpu import render_gpu

    g = {"devices": [], "activity_spans": 5, "launch_gaps": [], "bracket_only": [], "copies": [], "sync_waits": [],
         "kernels": [{"phase": "msm", "kernel": f"k{i}", "device": 0, "count": 1, "total_ns": 1, "mean_ns": 1,
                      "max_ns": 1} for i in range(3)], "left_out": {"kernels": 7}}
    out = io.StringIO()
    render_gpu(g, Console(file=out, width=200), str)
    assert "7 more rows not shown (--top N)" in out.getvalue()


def test_gpu_summary_counts_the_rows_its_cut_left_out():
    from gputrace.analysis.gpu_summary import gpu_summary
    from gputrace.testing.activity_synth import activity_run_timeline

    tl = activity_run_timeline(kernels=400, gpus=2, seed=1)
    full = gpu_summary(tl, top=10_000)
    cut = gpu_summary(tl, top=1)
    assert full["left_out"] == {} and len(full["kernels"]) > 1
    assert cut["left_out"]["kernels"] == len(full["kernels"]) - 1 and len(cut["kernels"]) == 1

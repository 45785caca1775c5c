"""A trace of many distinct span names (issue 34: 100k names took 45.8 s to open, 1M did not open in 120 s):
the summary table holds its first SUMMARY_ROWS rows (built from the columns, not one object per name), the
legend lays out only what its two lines show, and both say how many more there are."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from gputrace.analysis.stats import phase_table
from gputrace.testing.synth import make_timeline
from gputrace.tui.legend import Legend, legend_keys, legend_size, legend_text
from gputrace.tui.panels import SUMMARY_COLUMNS, SUMMARY_ROWS, SummaryPanel, sort_stats, top_stats


def _names_timeline(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    spans, t = [], 0
    for _ in range(n):
        d = int(rng.integers(1, 50)) * 1000
        spans.append({"name": f"op_{int(rng.integers(0, n // 2)):06d}", "start": t, "end": t + d})
        t += d + 100
    return make_timeline(spans)


def test_top_rows_of_the_phase_table_are_the_sorted_rows():
    table = phase_table(_names_timeline(400))
    for column in SUMMARY_COLUMNS:
        want = [(s.phase, s.device, s.count, s.total_ns) for s in sort_stats(list(table), column)[:37]]
        got = [(s.phase, s.device, s.count, s.total_ns) for s in top_stats(table, column, 37)]
        assert got == want, column


@pytest.mark.parametrize("width", [20, 78, 160])
def test_two_lines_from_the_first_keys_read_as_from_all_of_them(width):
    names = [f"name_{i}" for i in range(5000)] + ["[CUDA memcpy HtoD]"]
    full = legend_text(legend_keys(names), width)
    part = legend_text(legend_keys(names, limit=2 * width // 3 + 1), width, total=legend_size(names))
    assert part[0].plain == full[0].plain and part[1] == full[1] > 0


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_viewer_opens_a_trace_of_twenty_thousand_names(tmp_path):
    from gputrace.tui.app import GputraceApp

    n = 20_000
    base = 1_700_000_000_000_000_000
    spans = [{"traceId": "ab" * 16, "spanId": f"{i + 1:016x}", "name": f"step {i:05d}", "kind": 1,
              "startTimeUnixNano": str(base + i * 2000), "endTimeUnixNano": str(base + i * 2000 + 1000)}
             for i in range(n)]
    path = tmp_path / "names.jsonl"
    path.write_text(json.dumps({"resourceSpans": [{"resource": {"attributes": []},
                                                    "scopeSpans": [{"spans": spans}]}]}) + "\n")

    async def go():
        app = GputraceApp([str(path)])
        async with app.run_test(size=(160, 48)) as pilot:
            await app.wait_ready(60)
            await pilot.pause()
            summary = app.query_one(SummaryPanel)
            assert len(summary.stats) == n and summary.row_count == SUMMARY_ROWS + 1
            assert f"+{n - SUMMARY_ROWS:,} more" in str(summary.get_row_at(SUMMARY_ROWS)[0])
            legend = app.query_one(Legend)
            assert legend.hidden_entries > n - 100 and legend._keys is None  # every key never built

    asyncio.run(go())

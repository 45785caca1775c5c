"""Pure layout maths: durations, the view window, half-cells, axis ticks, interval packing."""

import numpy as np
import pytest

from gputrace.tui.axis import axis_lines
from gputrace.tui.layout import (
    View,
    axis_scale,
    axis_ticks,
    elide_middle,
    format_bandwidth,
    format_bytes,
    format_duration,
    nice_step,
    pack_levels,
)


@pytest.mark.parametrize(
    "ns,text",
    [
        (0, "0 ns"),
        (1, "1 ns"),
        (999, "999 ns"),
        (999.6, "1.00 µs"),  # rounding carries into the next unit
        (1234, "1.23 µs"),
        (56_700_000, "56.7 ms"),
        (999_996, "1.00 ms"),
        (2_100_000_000, "2.10 s"),
        (-1_500, "-1.50 µs"),
        (12_345_678_901, "12.3 s"),
    ],
)
def test_format_duration_adaptive_units(ns, text):
    assert format_duration(ns) == text


def test_format_bytes_and_bandwidth():
    assert format_bytes(-1) == "-"
    assert format_bytes(512) == "512 B"
    assert format_bytes(3 << 30) == "3.00 GiB"
    assert format_bandwidth(25_000_000_000, 1_000_000_000) == "25.00 GB/s"
    assert format_bandwidth(1_000_000, 1_000_000_000) == "1.00 MB/s"
    assert format_bandwidth(100, 0) == "-"


def test_fit_shows_whole_range_with_margin():
    v = View.fit(1_000, 101_000, 100)
    assert v.t0 < 1_000
    assert v.t1(100) > 101_000
    assert v.cell_of(1_000) == pytest.approx(1, abs=0.05)
    assert v.ns_per_cell == pytest.approx(100_000 * 1.02 / 100)


def test_zoom_keeps_anchor_column():
    v = View(0.0, 1000.0)
    anchor = 37_250.0
    col = v.cell_of(anchor)
    z = v.zoom(4, anchor)
    assert z.ns_per_cell == 250.0
    assert z.cell_of(anchor) == pytest.approx(col)
    back = z.zoom(0.25, anchor)
    assert back.t0 == pytest.approx(v.t0) and back.ns_per_cell == pytest.approx(v.ns_per_cell)


def test_zoom_is_clamped_at_one_ns_per_cell():
    v = View(0.0, 4.0).zoom(1000, 10.0)
    assert v.ns_per_cell == 1.0


def test_pan_moves_by_cells():
    v = View(100.0, 10.0).pan(-5)
    assert v.t0 == 50.0 and v.ns_per_cell == 10.0


def test_ensure_visible_pans_only_when_needed():
    v = View(0.0, 10.0)
    assert v.ensure_visible(100, 200, 100) is v
    moved = v.ensure_visible(5_000, 5_100, 100)
    assert moved.ns_per_cell == 10.0
    assert moved.t0 <= 5_000 < moved.t1(100)


def test_nice_step_is_1_2_5_and_wide_enough():
    for npc in (0.3, 1, 7, 130, 2.5e6, 8e9):
        step = nice_step(npc, 12)
        assert step >= npc * 12
        mant = step / 10 ** np.floor(np.log10(step))
        assert round(mant, 6) in (1.0, 2.0, 5.0, 10.0)
        assert step < npc * 12 * 5.01


def test_axis_ticks_are_evenly_spaced_with_units():
    v = View.fit(0, 1_000_000_000, 100)  # ~1 s over 100 cells
    ticks = axis_ticks(v, 100, 0.0)
    cols = [c for c, _ in ticks]
    assert cols == sorted(cols) and all(0 <= c < 100 for c in cols)
    gaps = np.diff(cols)
    assert gaps.min() >= 11 and gaps.max() - gaps.min() <= 1
    assert ticks[0][1] == "0ms" and ticks[1][1] == "200ms"


def test_axis_labels_for_microseconds():
    v = View.fit(0, 500_000, 100)
    labels = [t for _, t in axis_ticks(v, 100, 0.0)]
    assert labels[:3] == ["0µs", "100µs", "200µs"]


def test_axis_lines_place_labels_and_cursor():
    v = View(0.0, 1e6)  # 1 ms per cell
    top, marks = axis_lines(v, 60, 10, cursor_t=25.5e6)
    assert len(top) == 70 and len(marks) == 70
    assert marks[10 + 25] == "▼"
    assert top[10:13] == "0ms"
    assert marks[9] == "│"
    # Counting from the first span: a view starting 5 ms after it labels its ticks from 5 ms on.
    top, _ = axis_lines(View(5e6, 1e6), 60, 10, cursor_t=None, zero=0.0)
    assert top[10 + 15 : 10 + 19] == "20ms"  # 20 ms after the first span is 15 cells in
    top0, _ = axis_lines(View(5e6, 1e6), 60, 10, cursor_t=None, zero=5e6)
    assert top0[10:13] == "0ms"


def test_pack_levels_fast_path_sequential():
    s = np.array([0, 10, 20, 30])
    e = np.array([10, 20, 25, 40])
    assert pack_levels(s, e).tolist() == [0, 0, 0, 0]


def test_pack_levels_overlaps_never_share_a_level():
    rng = np.random.default_rng(3)
    s = np.sort(rng.integers(0, 1000, 200))
    e = s + rng.integers(1, 60, 200)
    lv = pack_levels(s, e, max_levels=64)
    for level in np.unique(lv):
        m = lv == level
        ss, ee = s[m], e[m]
        assert np.all(ss[1:] >= ee[:-1]), f"overlap on level {level}"
    # First fit: a span only goes up a level when every lower level is busy at its start.
    assert lv.max() <= 20


def test_pack_levels_caps_levels():
    s = np.zeros(10, np.int64)
    e = np.full(10, 5, np.int64)
    lv = pack_levels(s, e, max_levels=3)
    assert lv.max() == 2 and (lv == 2).sum() == 8


def test_axis_far_into_a_long_trace_uses_offsets_from_an_anchor():
    """Zoomed to 1 µs per cell 1.4979 s into the trace: no ``1497933µs`` labels; offsets from an
    anchor that the name column shows."""
    v = View(1_497_933_560.0, 1_000.0)
    anchor, ticks = axis_scale(v, 100, 0.0)
    assert anchor is not None and abs(anchor - 1_497_940_000) < 20_000
    labels = [t for _, t in ticks]
    assert labels[0] == "+0" and labels[1] == "+20µs" and all(len(t) <= 7 for t in labels)
    top, _ = axis_lines(v, 100, 24, cursor_t=None)
    assert top.startswith("@ 1.49794") and top.split()[2] == "s"
    # Near the start the plain labels stay.
    assert axis_scale(View(0.0, 1_000.0), 100, 0.0)[0] is None


@pytest.mark.parametrize("npc", [1.0, 37.0, 1e3, 4.2e4, 1e6, 3.3e7, 1e9])
@pytest.mark.parametrize("t0", [0.0, 1.5e9, 7.2e11])
def test_axis_labels_stay_short_at_every_zoom(npc, t0):
    _, ticks = axis_scale(View(t0, npc), 120, 0.0)
    assert ticks and all(len(t) <= 8 for _, t in ticks)


def test_cursor_readout_on_the_axis():
    _, marks = axis_lines(View(0.0, 1e3), 60, 20, cursor_t=12_345.0)
    assert marks.startswith("▼ +12.3")


def test_elide_middle_keeps_both_ends():
    out = elide_middle("   thread:synth-worker-12 [4711]", 23)
    assert len(out) == 23 and out.startswith("   thread:") and out.endswith("[4711]") and "…" in out
    assert elide_middle("short", 10) == "short"

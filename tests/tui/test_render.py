"""Row sampling and glyphs: exact counts/coverage, half-cell edges, labels, density, marks."""

import numpy as np
import pytest

from gputrace.tui.index import IntervalIndex
from gputrace.tui.layout import View
from gputrace.tui.palette import Palette, blend, luminance
from gputrace.tui.keys import BG, DIM, INK, SEL, UNATTR
from gputrace.tui.render import cells_to_runs, row_cells


def idx(spans, keys=None):
    s = [a for a, _ in spans]
    e = [b for _, b in spans]
    k = keys if keys is not None else [0] * len(spans)
    return IntervalIndex.of(s, e, k, np.arange(len(spans)))


def brute_sample(spans, t0, npc, width):
    """Reference: per cell count of overlapping spans and covered fraction (non-overlapping)."""
    count, cover = [], []
    for c in range(width):
        lo, hi = t0 + c * npc, t0 + (c + 1) * npc
        ov = [(max(a, lo), min(b, hi)) for a, b in spans if a < hi and b > lo]
        count.append(len(ov))
        cover.append(sum(y - x for x, y in ov) / npc)
    return np.array(count), np.array(cover)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sample_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    # Sequential spans with random gaps (one depth level never overlaps itself).
    t, spans = 0, []
    for _ in range(300):
        t += int(rng.integers(0, 50))
        d = int(rng.integers(1, 80))
        spans.append((t, t + d))
        t += d
    ii = idx(spans)
    for t0, npc, w in ((0.0, 100.0, 120), (-500.0, 7.3, 90), (3000.5, 1.0, 64)):
        smp = ii.sample(t0, npc, w)
        count, cover = brute_sample(spans, t0, npc, w)
        assert smp.count.tolist() == count.tolist()
        np.testing.assert_allclose(smp.cover, np.clip(cover, 0, 1), atol=1e-9)
        # Half-cell centres: covered exactly when some span contains the centre.
        centres = t0 + (np.arange(2 * w) + 0.5) * npc / 2
        for j, c in enumerate(centres):
            hit = [i for i, (a, b) in enumerate(spans) if a <= c < b]
            assert smp.sub[j] == (hit[0] if hit else -1)


def test_sample_works_with_epoch_scale_relative_offsets():
    # Relative times keep integer precision (the index is built relative to the trace start).
    base = 10**13
    ii = idx([(base, base + 3), (base + 3, base + 5)])
    smp = ii.sample(base, 1.0, 6)
    assert smp.sub[0::2].tolist() == [0, 0, 0, 1, 1, -1]


def test_full_bar_half_cell_edges_and_label():
    ii = idx([(25, 95)], keys=[4])  # cells of 10 ns: starts mid-cell 2, ends mid-cell 9
    cells = row_cells(ii, View(0.0, 10.0), 12, label_fn=lambda i: "msm")
    assert cells.text == "  ▐ msm  ▌  "
    assert cells.chars[2] == "▐" and cells.fg[2] == 4 and cells.bg[2] == BG
    assert cells.chars[9] == "▌" and cells.fg[9] == 4
    assert all(cells.bg[3:9] == 4)
    assert "".join(cells.chars[4:7]) == "msm" and all(cells.fg[4:7] == INK)
    assert cells.chars[0] == " " and cells.bg[0] == BG


def test_label_truncated_with_ellipsis_or_omitted():
    ii = idx([(0, 60)])
    c = row_cells(ii, View(0.0, 10.0), 8, label_fn=lambda i: "synthesis")
    assert "".join(c.chars[1:5]) == "syn…"
    tiny = row_cells(idx([(0, 30)]), View(0.0, 10.0), 8, label_fn=lambda i: "synthesis")
    assert "s" not in tiny.text


def test_two_phases_meeting_inside_a_cell():
    ii = idx([(0, 15), (15, 40)], keys=[1, 2])  # boundary at 15: left half of cell 1 is phase 1
    c = row_cells(ii, View(0.0, 10.0), 4)
    assert c.chars[1] == "▌" and c.fg[1] == 1 and c.bg[1] == 2


def test_same_phase_neighbours_get_a_separator():
    ii = idx([(0, 15), (15, 40)], keys=[3, 3])
    c = row_cells(ii, View(0.0, 10.0), 4)
    assert c.chars[1] == "▏" and c.bg[1] == 3 and c.fg[1] == BG


def test_dense_cells_are_shaded_by_coverage():
    # 10 spans of 1 ns in cell 0 (10 % covered), 5 of 15 ns in cell 1 (75 %).
    spans = [(i * 10, i * 10 + 1) for i in range(10)] + [(100 + i * 20, 115 + i * 20) for i in range(5)]
    c = row_cells(idx(spans), View(0.0, 100.0), 3)
    assert c.chars[0] == "░"
    assert c.chars[1] == "▓"
    assert c.chars[2] == " "


def test_sub_half_cell_span_is_still_visible():
    c = row_cells(idx([(41, 43)]), View(0.0, 100.0), 3)
    assert c.chars[0] == "░" and c.fg[0] == 0


def test_thin_device_row_uses_lower_blocks():
    c = row_cells(idx([(5, 35)], keys=[7]), View(0.0, 10.0), 5, thin=True)
    assert c.text == "▗▄▄▖ "
    assert c.fg[1] == 7 and c.bg[1] == BG


def test_selection_and_dimming_keys():
    ii = idx([(0, 20), (20, 40)], keys=[1, 2])
    c = row_cells(ii, View(0.0, 10.0), 4, selected_row=1)
    assert c.bg[2] == SEL and c.bg[0] == 1
    dim = np.array([True, False])
    c = row_cells(ii, View(0.0, 10.0), 4, dim_rows=dim)
    assert c.bg[0] == 1 + DIM and c.bg[2] == 2


def test_marks_draw_over_bars():
    ii = idx([(0, 40)], keys=[5])
    mark = IntervalIndex.of([20], [40], UNATTR)
    c = row_cells(ii, View(0.0, 10.0), 4, marks=[(mark, "┄", UNATTR)])
    assert c.text == "  ┄┄"
    assert c.fg[2] == UNATTR and c.bg[2] == 5


def test_runs_group_equal_styles():
    ii = idx([(0, 20), (20, 40)], keys=[1, 2])
    runs = cells_to_runs(row_cells(ii, View(0.0, 10.0), 6))
    assert [(t, bg) for t, _, bg, _ in runs] == [("  ", 1), ("  ", 2), ("  ", BG)]
    assert sum(len(t) for t, *_ in runs) == 6


def test_palette_uses_phase_colours_and_contrast_ink():
    pal = Palette(["synthesis", "my_phase"], background="#000000")
    assert pal.colour(0) == "#4e79a7"
    assert pal.colour(1).startswith("#") and pal.colour(1) == pal.colour(1)
    assert pal.colour(0 + DIM) == blend("#4e79a7", "#000000", 0.7)
    st = pal.style(INK, 0)
    assert st.color.get_truecolor().hex == "#ffffff"  # white on a dark blue bar
    assert luminance("#ffffff") == pytest.approx(1.0)
    assert pal.style(INK, SEL).color.get_truecolor().hex == "#000000"  # black on the white selection

"""The loop's steps in the TUI's stalls panel (tui/overlays.step_items): the slowest steady step and the
warm-up, each zooming to its own time, after the findings and before the stalls."""

from __future__ import annotations

from gputrace.analysis.report import analyse_timeline
from gputrace.testing.train_synth import train_loop_timeline
from gputrace.tui.overlays import compute_overlays, step_items


def test_slowest_step_and_warmup_rows_zoom_to_their_time():
    tl = train_loop_timeline()
    a = analyse_timeline(tl, critical=False)
    [s] = a.steps["series"]
    slow, warm = step_items(a.steps)
    st = s["steps"][s["slowest"]["index"]]
    assert (slow.category, slow.start, slow.end) == ("step", st["start_ns"], st["start_ns"] + st["wall_ns"])
    assert "span data +25" in slow.text and slow.amount_ns == s["slowest"]["wall_ns"] - s["slowest"]["median_wall_ns"]
    assert (warm.category, warm.start, warm.end, warm.amount_ns) == (
        "warm-up", s["warmup"]["start_ns"], s["warmup"]["end_ns"], s["warmup"]["ns"])
    ov = compute_overlays(tl, tl.t0, a)
    cats = [it.category for it in ov.items]
    assert cats.index("step") > max(i for i, c in enumerate(cats) if c == "finding")
    assert cats.index("warm-up") < min(i for i, c in enumerate(cats) if c not in ("finding", "step", "warm-up"))


def test_no_steps_no_rows():
    assert step_items({}) == [] and step_items({"series": [], "warmup": None}) == []

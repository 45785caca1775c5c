"""The legend (issue 26): the overlay glyphs first, then phases, then GPU activity names; an entry is
never split; what does not fit in two lines ends with a visible ``… +N more (g)``, and ``g`` shows it all."""

import asyncio
import os
import re

from gputrace.timeline import read_trace
from gputrace.tui.activity_rows import activity_phases
from gputrace.tui.app import GputraceApp
from gputrace.tui.legend import OVERLAY_KEYS, Legend, legend_keys, legend_text

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
H200 = os.path.join(ROOT, "benchmarks", "traces", "multi-2_20-2gpu.jsonl.gz")  # the demo's own GPU screen
H200_PHASES = ["assemble", "b_g2", "batch_add", "coset_ntt", "d2h", "h2d", "h_eval", "intt_abc", "intt_h", "key_load",
               "load_bases", "msm_a", "msm_b_g1", "msm_h", "msm_l", "ntt", "pin", "prove", "setup",
               "setup_fingerprint", "sync", "synthesis", "unpin", "verify"]


def entries(line: str) -> list[str]:
    """The labels of one legend line (entries are a glyph, a space, a label; two spaces between them)."""
    return [e.split(" ", 1)[1] for e in line.split("  ") if " " in e and not e.startswith("…")]


def test_overlays_first_then_phases_then_activity_names():
    keys = legend_keys(["[CUDA memcpy HtoD]", "msm_bucket", "ntt", "prove"], activity=["[CUDA memcpy HtoD]",
                                                                                        "msm_bucket"])
    labels = [k.label for k in keys]
    assert labels[:3] == ["GPU idle", "unattributed", "host wait"]
    assert labels[3:6] == ["launch gap", "pinned copy", "pageable copy"]  # a copy is present
    assert labels[6:] == ["ntt", "prove", "[CUDA memcpy HtoD]", "msm_bucket"]


def test_two_lines_cut_with_a_visible_more_and_the_overlays_kept():
    for width in (78, 134):  # the legend's width at 80x24 and at 200 columns
        text, hidden = legend_text(legend_keys(H200_PHASES), width)
        lines = text.plain.split("\n")
        assert len(lines) <= 2 and all(len(ln) <= width for ln in lines)
        assert lines[0].startswith("█ GPU idle  ┄ unattributed  ╍ host wait")
        shown = [lab for ln in lines for lab in entries(ln)]
        assert shown == [k.label for k in legend_keys(H200_PHASES)][:len(shown)]  # whole entries, in order
        if hidden:
            assert re.search(rf"… \+{hidden} more \(g\)$", lines[-1])
            assert len(shown) + hidden == len(OVERLAY_KEYS) + len(H200_PHASES)
    full, hidden = legend_text(legend_keys(H200_PHASES), 78, None)
    assert hidden == 0 and [lab for ln in full.plain.split("\n") for lab in entries(ln)][-1] == "verify"


def test_an_entry_wider_than_the_line_is_cut_with_an_ellipsis():
    name = "void msm_bucket_accumulate<bls12_381::g1, 13, 256>(" + "x" * 200
    text, _ = legend_text(legend_keys([name]), 60, None)
    last = text.plain.split("\n")[-1]
    assert len(last) == 60 and last.endswith("…") and last.startswith("■ void msm_bucket")


def _legend_lines(app):
    lg = app.query_one(Legend)
    return ["".join(s.text for s in lg.render_line(y)).rstrip() for y in range(lg.size.height)]


def test_h200_screen_explains_gpu_idle_at_200_columns_and_at_80x24():
    """The demo's H200 screen: before, the legend's two lines ended inside the phases and 'GPU idle' was cut."""

    async def go(size):
        app = GputraceApp([H200], focus="prove")
        async with app.run_test(size=size) as pilot:
            await app.wait_ready(60)
            await pilot.pause()
            lines = _legend_lines(app)
            assert len(lines) == 2 and "█ GPU idle" in lines[0], lines
            lg = app.query_one(Legend)
            if lg.hidden_entries:
                assert lines[-1].endswith(f"… +{lg.hidden_entries} more (g)")
                await pilot.press("g")
                await pilot.pause()
                lines = _legend_lines(app)
                assert lg.expanded and len(lines) > 2 and "verify" in " ".join(lines)
            await pilot.press("g")
            await pilot.pause()
            assert not lg.display

    for size in ((200, 50), (80, 24)):
        asyncio.run(go(size))


def test_cupti_kernel_names_come_after_the_phases(sample_kernels):
    tl = read_trace(sample_kernels)
    act = {tl.phases[i] for i in activity_phases(tl)}
    assert "msm_bucket" in act and "[CUDA memcpy HtoD]" in act and "msm_h" not in act

    async def go():
        app = GputraceApp([sample_kernels])
        async with app.run_test(size=(150, 44)) as pilot:
            await app.wait_ready(60)
            await pilot.pause()
            labels = [k.label for k in app.query_one(Legend).keys]
            first_kernel = min(labels.index(n) for n in act)
            assert all(labels.index(p) < first_kernel for p in ("msm_h", "ntt", "prove", "h2d"))
            assert labels[0] == "GPU idle"

    asyncio.run(go())

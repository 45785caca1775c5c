"""The TUI shows hostile trace text (escape sequences, markup, bidi overrides, wide characters) as inert
text: in the Gantt rows, span labels, title, details, summary and stalls panels, the compare view, and
the --screenshot SVG (which stays well-formed XML)."""

from __future__ import annotations

import asyncio
import re
from xml.dom import minidom

import pytest

from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl
from gputrace.testing.synth import make_timeline
from gputrace.tui.app import GputraceApp, screenshot_svg
from gputrace.tui.gantt import Gantt
from gputrace.tui.panels import DetailsPanel, StallsPanel, SummaryPanel



def text_of(widget) -> str:
    """Plain text of what a Static shows."""
    import io

    from rich.console import Console

    console = Console(width=200, file=io.StringIO(), record=True)
    console.print(widget.content)
    return console.export_text()

MS = 1_000_000
TITLE = "\x1b]0;pwned\x07"
NAMES = [TITLE, "[/]", "[link=http://evil.example]x[/link]", "a\rb\x1b[2J", "x\u202eyz", "宽宽宽宽"]


def _raw_controls(s: str) -> list[str]:
    return [c for c in s if (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f or c == "\u202e"]


@pytest.fixture(scope="module")
def hostile_trace(tmp_path_factory):
    spans = [{"id": "p", "name": "prove", "start": 0, "end": 100 * MS, "host": TITLE}]
    for i, n in enumerate(NAMES):
        spans.append({"name": n, "start": i * 15 * MS, "end": i * 15 * MS + 12 * MS, "parent": "p", "device": 0,
                      "lane": f"stream:{n}", "gpu_start": i * 15 * MS, "gpu_end": i * 15 * MS + 12 * MS,
                      "host": TITLE, "attrs": {f"k{n}": n}})
    tl = make_timeline(spans, resource={"service.name": TITLE, "gputrace.run_id": "[/]"}, trace_id="ab" * 16)
    p = tmp_path_factory.mktemp("hostile") / "hostile.jsonl"
    write_otlp_jsonl(tl, p)
    return p


def test_screenshot_svg_is_well_formed_and_inert(hostile_trace):
    svg = screenshot_svg(GputraceApp([str(hostile_trace)], title=f"t{TITLE}"), size=(160, 40))
    assert not _raw_controls(svg)
    minidom.parseString(svg)  # raises on a control character or an unescaped '<' / '&'
    text = re.sub(r"<[^>]+>", "", svg).replace("&#160;", " ")
    assert "\\x1b]0;pwned\\x07" in text  # the title and the host row show the escape, visibly


def test_panels_show_hostile_text_literally(hostile_trace):
    async def go():
        app = GputraceApp([str(hostile_trace)])
        async with app.run_test(size=(170, 44)) as pilot:
            await app.wait_ready(60)
            await pilot.pause()
            gantt = app.query_one(Gantt)
            tl = gantt.index.timeline
            shown = []
            for n in NAMES:
                row = next(r for r in range(tl.n) if tl.name_of(r) == n)
                gantt.select_row(row)
                app.query_one(DetailsPanel).show(tl, row, gantt.index.origin)
                await pilot.pause()
                shown.append(text_of(app.query_one(DetailsPanel)))
            summary = app.query_one(SummaryPanel)
            stalls = app.query_one(StallsPanel)
            cells = [str(summary.get_cell_at((i, 0))) for i in range(summary.row_count)]
            cells += [str(stalls.get_cell_at((i, 2))) for i in range(stalls.row_count)]
            rows = [s.label for s in gantt.rows]
            strips = [gantt._render_row(y, 170) for y in range(len(gantt.rows))]
            return shown, cells, rows, ["".join(seg.text for seg in st) for st in strips]

    shown, cells, rows, lines = asyncio.run(go())
    for n, text in zip(NAMES, shown):
        assert not _raw_controls(text), n
    assert "\\x1b]0;pwned\\x07" in shown[0] and "[/]" in shown[1] and "[link=http://evil.example]x[/link]" in shown[2]
    assert "\\x1b[2J" in shown[3] and "\\u202e" in shown[4]
    assert not _raw_controls("".join(cells + rows + lines))
    assert any("[/]" in c for c in cells)
    assert any("\\x1b]0;pwned" in r for r in rows)
    # every Gantt row is exactly as wide as the screen, also with wide (CJK) names
    from rich.cells import cell_len

    assert {cell_len(line) for line in lines} == {170}


def test_compare_view_shows_hostile_text_literally(tmp_path):
    from gputrace.commands.compare import load_runs
    from gputrace.tui.compare_view import CompareApp

    def run(path, commit, scale):
        spans = [{"id": "p", "name": "prove", "start": 0, "end": 100 * MS}]
        for i, n in enumerate(NAMES):
            spans.append({"name": n, "start": i * 15 * MS, "end": i * 15 * MS + int(10 * MS * scale), "parent": "p"})
        tl = make_timeline(spans, resource={"service.name": "t", "gputrace.run_id": path.name,
                                            "gputrace.git.commit": commit}, trace_id="ab" * 16)
        write_otlp_jsonl(tl, path)
        return str(path)

    a = [run(tmp_path / f"a{i}.jsonl", f"c0{TITLE}", 1.0 + i / 100) for i in range(2)]
    b = [run(tmp_path / f"b{i}.jsonl", "[/]c1\x1b[2J", 1.2 + i / 100) for i in range(2)]

    async def go():
        app = CompareApp(a, b, load_runs=load_runs, confidence=0.8)
        async with app.run_test(size=(170, 44)) as pilot:
            await app.wait_ready(30)
            await pilot.pause()
            assert app.error is None
            return app.export_screenshot(title="compare")

    svg = asyncio.run(go())
    assert not _raw_controls(svg)
    minidom.parseString(svg)
    text = re.sub(r"<[^>]+>", "", svg).replace("&#160;", " ")
    assert "\\x1b]0;pwned\\x07" in text

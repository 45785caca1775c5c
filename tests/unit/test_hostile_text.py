"""Hostile trace text (escape sequences, rich markup, bidi overrides) is shown as inert text by
gputrace.textsafe and by every report that prints trace text (report, compare, ab)."""

from __future__ import annotations

import io
import subprocess
import sys
from xml.dom import minidom
from pathlib import Path

import pytest
from rich.markup import render as rich_render

from gputrace.testing.synth import make_timeline, synthetic_run
from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl
from gputrace.textsafe import console, markup, rich_text, visible
from gputrace.textsafe import xml as xml_escape

ROOT = Path(__file__).resolve().parents[2]
MS = 1_000_000

# An OSC that retitles the terminal, a hyperlink OSC, CSI clear screen, CR overwrite, a bidi override.
TITLE = "\x1b]0;pwned\x07"
HOSTILE_NAMES = [TITLE, "[/]", "[link=http://evil.example]click[/link]", "a\rb", "\x1b[2J", "x\u202eyz", ":skull:",
                 "\x9b31m", "tail\\"]


def _no_raw_controls(out: str) -> None:
    """No control sequence that came from trace text: rich's own SGR colours (ESC [ ... m) are allowed."""
    import re

    stripped = re.sub(r"\x1b\[[0-9;]*m", "", out)
    bad = [c for c in stripped if (ord(c) < 32 and c not in "\n") or 0x7f <= ord(c) <= 0x9f or c == "\u202e"]
    assert not bad, f"raw control characters reached the output: {bad!r}"
    assert "\x1b]" not in out and "\x1b[2J" not in out


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_visible_and_markup_are_inert(name):
    v = visible(name)
    assert all(ord(c) >= 32 and not 0x7f <= ord(c) <= 0x9f and c != "\u202e" for c in v)
    # markup() round-trips through rich's markup parser to exactly the visible text (a trailing
    # backslash is doubled so it cannot escape a tag that follows; alone it shows doubled)
    if not name.endswith("\\"):
        assert rich_render(markup(name), emoji=False).plain == v
    assert rich_render(f"[bold]{markup(name)}[/bold] after", emoji=False).plain == v + " after"
    assert rich_text(name).plain == v


def test_visible_keeps_ordinary_text():
    for s in ("msm_h", "prove/msm_b_g1", "GPU 0 · é 😀 日本", "a[1]b", ""):
        assert visible(s) == s
    assert visible(TITLE) == "\\x1b]0;pwned\\x07"
    assert visible("x\u202ey") == "x\\u202ey"
    assert visible("\ud800") == "\\ud800"
    assert visible(12) == "12"


def test_xml_is_well_formed_for_every_hostile_name():
    names = HOSTILE_NAMES + ["<&>\"'", "]]>"]
    body = "".join(f'<text title="{xml_escape(n)}">{xml_escape(n)}</text>' for n in names)
    doc = minidom.parseString(f"<svg>{body}</svg>")
    nodes = doc.getElementsByTagName("text")
    assert [n.firstChild.data for n in nodes] == [visible(n) for n in names]
    assert [n.getAttribute("title") for n in nodes] == [visible(n) for n in names]


def _hostile_timeline():
    spans = [{"id": "p", "name": "prove", "start": 0, "end": 100 * MS}]
    for i, n in enumerate(HOSTILE_NAMES):
        spans.append({"name": n, "start": i * 10 * MS, "end": i * 10 * MS + 5 * MS, "parent": "p", "device": 0,
                      "lane": f"stream:{n}", "gpu_start": i * 10 * MS, "gpu_end": i * 10 * MS + 5 * MS})
    return make_timeline(spans, resource={"service.name": TITLE, "gputrace.run_id": "r"}, trace_id="ab" * 16)


def test_report_render_on_a_terminal_is_inert():
    from gputrace.commands.report import analyse, render

    buf = io.StringIO()
    c = console(file=buf, force_terminal=True, width=200, color_system="truecolor")
    render(analyse(_hostile_timeline()), c)
    out = buf.getvalue()
    _no_raw_controls(out)
    assert "\\x1b]0;pwned\\x07" in out and "[/]" in out and ":skull:" in out and "💀" not in out
    assert "[link=http://evil.example]click" in out


@pytest.fixture(scope="module")
def hostile_trace(tmp_path_factory):
    p = tmp_path_factory.mktemp("hostile") / "hostile.jsonl"
    write_otlp_jsonl(_hostile_timeline(), p)
    return p


def test_report_piped_is_inert_and_does_not_crash(hostile_trace):
    r = subprocess.run([sys.executable, "-m", "gputrace", "report", str(hostile_trace)], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    _no_raw_controls(r.stdout + r.stderr)
    assert "\\x1b]0;pwned\\x07" in r.stdout and "[/]" in r.stdout


def test_report_error_message_is_inert(tmp_path):
    p = tmp_path / f"bad{TITLE}.jsonl"
    p.write_text("{not json\n")
    from gputrace.commands._inputs import read_inputs

    err = io.StringIO()
    old, sys.stderr = sys.stderr, err
    try:
        assert read_inputs("report", [str(p)], False, "empty") is None
    finally:
        sys.stderr = old
    _no_raw_controls(err.getvalue())
    assert "\\x1b]0;pwned" in err.getvalue()


def test_compare_render_is_inert():
    from gputrace.analysis.ab.compare import compare_measures
    from gputrace.analysis.ab.measures import run_measures
    from gputrace.commands.compare import gate, render_comparison

    def runs(commit, slow):
        out = []
        for i in range(4):
            tl = synthetic_run(i + (50 if slow else 0), circuits=1, devices=1, slow={"msm_h": 0.5} if slow else None,
                               resource={"gputrace.run_id": f"{commit}{i}", "gputrace.git.commit": commit,
                                         "gputrace.config.b1": slow})
            tl.phases[:] = [TITLE + "[/]" if p == "msm_h" else p for p in tl.phases]
            out.append(run_measures(tl, f"run{TITLE}{i}"))
        return out

    res = compare_measures(runs("c0" + TITLE, False), runs("[/]c1\x1b[2J", True))
    assert res.environment.warnings  # the commits differ: the warning quotes them
    buf = io.StringIO()
    c = console(file=buf, force_terminal=True, width=250, color_system="truecolor")
    render_comparison(res, c, top=100)
    gate(res, 0.01, 0.0, c)
    out = buf.getvalue()
    _no_raw_controls(out)
    import re
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)  # rich's own styling, not trace text
    assert "\\x1b]0;pwned\\x07[/]" in plain and "[/]c1\\x1b[2J" in plain


def test_report_steps_table_is_inert():
    """The Steps table (analysis/steps.py) prints the step range's, the process's and the parts' names."""
    from gputrace.commands.report import analyse, render

    spans = [{"id": "root", "name": TITLE, "start": 0, "end": 200 * MS}]
    for i, w in enumerate((60, 10, 10, 30, 10)):
        t = 10 * MS + i * 40 * MS
        spans.append({"id": f"s{i}", "name": "[link=http://evil.example]click[/link]", "start": t,
                      "end": t + w * MS // 2, "parent": "root"})
        spans.append({"name": "\x1b[2J", "start": t, "end": t + w * MS // 4, "parent": f"s{i}"})
    d = analyse(make_timeline(spans))
    assert d["steps"]["series"]
    buf = io.StringIO()
    render(d, console(file=buf, force_terminal=True, width=250, color_system="truecolor"))
    out = buf.getvalue()
    _no_raw_controls(out)
    assert "[link=http://evil.example]click" in out and "\\x1b]0;pwned\\x07" in out

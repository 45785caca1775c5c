"""``analysis.processes``: a recorded process without its root span ended without its final flush; ``report``
says so in one line (issue 35: "report and view never say a process was killed")."""

from __future__ import annotations

from gputrace.analysis.processes import unfinished_note, unfinished_processes
from gputrace.analysis.report import analyse_timeline
from gputrace.commands.report import render
from gputrace.otlp.encode import encode_request
from gputrace.textsafe import console
from gputrace.timeline.load import read_any


def _span(sid, name, t0, t1, parent=None):
    return {"trace_id": 1, "span_id": sid, "parent_span_id": parent, "name": name, "start_ns": t0, "end_ns": t1,
            "attributes": {}}


def _trace(tmp_path, killed: bool):
    main = {"service.name": "python a.py", "host.name": "h", "process.pid": 10,
            "gputrace.launch.command": "python a.py"}
    child = {"service.name": "python a.py", "host.name": "h", "process.pid": 11,
             "gputrace.launch.command": "fork: python a.py"}
    plain = {"service.name": "other", "host.name": "h", "process.pid": 12}  # not from record: no claim either way
    lines = [encode_request(main, [_span(1, "python a.py", 0, 3_000_000_000), _span(2, "w", 10, 20, parent=1)]),
             encode_request(child, [_span(3, "w", 100, 1_500_000_000)]
                            + ([] if killed else [_span(4, "fork: python a.py", 50, 2_000_000_000)])),
             encode_request(plain, [_span(5, "x", 0, 5)])]
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return read_any(path)


def test_a_killed_child_is_named_and_a_finished_run_says_nothing(tmp_path):
    tl = _trace(tmp_path, killed=True)
    (u,) = unfinished_processes(tl)
    assert (u.pid, u.command, u.spans, u.last_end_ns) == (11, "fork: python a.py", 1, 1_500_000_000)
    note = unfinished_note([u])
    assert note == ("1 process ended without a final flush (killed?): pid 11 (fork: python a.py); its phases "
                    "still open then are missing")
    assert unfinished_processes(_trace(tmp_path, killed=False)) == []


def test_report_prints_the_note_and_json_carries_it_only_when_there_is_one(tmp_path):
    a = analyse_timeline(_trace(tmp_path, killed=True))
    d = a.to_dict()
    assert d["unfinished_processes"][0]["pid"] == 11
    c = console(record=True, width=200)
    render(d, c)
    assert "note: 1 process ended without a final flush (killed?): pid 11" in c.export_text()
    assert "unfinished_processes" not in analyse_timeline(_trace(tmp_path, killed=False)).to_dict()


def test_a_hostile_command_name_reaches_the_report_inert(tmp_path):
    """The note's command comes from the trace (untrusted): an escape sequence or markup in it is shown
    as text, never interpreted."""
    evil = "python \x1b]0;pwned\x07[bold red]x[/]"
    res = {"host.name": "h", "process.pid": 3, "gputrace.launch.command": evil}
    path = tmp_path / "t.jsonl"
    path.write_bytes(encode_request(res, [_span(1, "w", 0, 10)]) + b"\n")
    d = analyse_timeline(read_any(path)).to_dict()
    c = console(record=True, width=300)
    render(d, c)
    text = c.export_text()
    assert "\x1b" not in text and "\\x1b]0;pwned\\x07[bold red]x[/]" in text


def test_view_lists_the_note_in_the_stalls_panel(tmp_path):
    from gputrace.tui.overlays import compute_overlays

    tl = _trace(tmp_path, killed=True)
    notes = compute_overlays(tl, tl.t0).notes
    assert any(n.startswith("1 process ended without a final flush (killed?): pid 11") for n in notes), notes
    tl = _trace(tmp_path, killed=False)
    assert not any("final flush" in n for n in compute_overlays(tl, tl.t0).notes)
